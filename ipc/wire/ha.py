"""The replication wire between a master and a slave: RocketMQ 5's auto-switch HA frames.

All integers big-endian ("long": signed 64-bit, "int": signed 32-bit, "short": signed 16-bit). The
first int of every frame is a state (RocketMQ's ``HAConnectionState`` ordinals: READY 0, HANDSHAKE 1,
TRANSFER 2, SUSPEND 3, SHUTDOWN 4); only HANDSHAKE and TRANSFER travel.

Slave to master (``AutoSwitchHAClient``), read with ``SlaveStream``::

    SlaveHandshake, 16 B    int state=1 | short sync_from_last_file (0/1) | short async_learner (0/1)
                            | long broker_id
    SlaveReport,    12 B    int state=2 | long max_offset (the slave's log end)

Master to slave (``AutoSwitchHAConnection``), read with ``MasterStream``::

    MasterHandshake, 20 B + 12 B an entry
                            int state=1 | int body_size (12 x entries) | long max_offset | int last_epoch
                            then per entry: int epoch | long start
    Transfer,        36 B + body
                            int state=2 | int body_size | long offset | int epoch | long epoch_start
                            | long confirm_offset, then body_size raw commitlog bytes (none: a heartbeat)

Bounds, each a ``HaWireError`` with a reason (the caller then closes the connection): a state other
than those above, a body over ``MAX_BODY_SIZE`` (4 MiB, the slave's read buffer in RocketMQ), a
handshake body that is not whole entries or holds more than ``MAX_EPOCH_ENTRIES``, a negative
offset, epoch, broker id or body size, a flag other than 0 or 1. RocketMQ's heartbeat before any
transfer carries offset -1; an mqstore master always sends its real next offset.

Before these frames, when ``[ha] secret`` is set, the two sides run mqstore's authenticated hello
(``mqstore.ipc.wire.ha_hello``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from mqstore.engine.errors import MqstoreError
from mqstore.engine.ha.epochs import EpochEntry

STATE_READY, STATE_HANDSHAKE, STATE_TRANSFER, STATE_SUSPEND, STATE_SHUTDOWN = range(5)

SLAVE_HANDSHAKE_SIZE = 16
SLAVE_REPORT_SIZE = 12
MASTER_HANDSHAKE_HEADER_SIZE = 20
TRANSFER_HEADER_SIZE = 36
EPOCH_ENTRY_SIZE = 12
MAX_BODY_SIZE = 4 * 1024 * 1024
MAX_EPOCH_ENTRIES = 65_536


_SLAVE_HANDSHAKE = struct.Struct(">ihhq")
_SLAVE_REPORT = struct.Struct(">iq")
_MASTER_HANDSHAKE = struct.Struct(">iiqi")
_TRANSFER = struct.Struct(">iiqiqq")
_ENTRY = struct.Struct(">iq")
_STATE = struct.Struct(">i")


F = TypeVar("F")


class HaWireError(MqstoreError, ValueError):
    """Bytes that are no frame of the replication wire; the connection cannot go on."""


def non_negative(name: str, value: int) -> int:
    """``value``, or HaWireError naming the field when it is below zero."""
    if value < 0:
        raise HaWireError(f"negative {name}: {value}")
    return value


def _flag(name: str, value: int) -> bool:
    if value not in (0, 1):
        raise HaWireError(f"{name} is {value}, neither 0 nor 1")
    return value == 1


# -- slave to master ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SlaveHandshake:
    broker_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False

    SIZE: ClassVar[int] = SLAVE_HANDSHAKE_SIZE

    def encode(self) -> bytes:
        return _SLAVE_HANDSHAKE.pack(STATE_HANDSHAKE, int(self.sync_from_last_file), int(self.async_learner),
                                     non_negative("broker id", self.broker_id))

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> SlaveHandshake:
        if len(data) != SLAVE_HANDSHAKE_SIZE:
            raise HaWireError(f"slave handshake of {len(data)} bytes, not {SLAVE_HANDSHAKE_SIZE}")
        state, last_file, learner, broker_id = _SLAVE_HANDSHAKE.unpack(data)
        if state != STATE_HANDSHAKE:
            raise HaWireError(f"slave handshake with state {state}")
        return cls(non_negative("broker id", broker_id), _flag("sync_from_last_file", last_file),
                   _flag("async_learner", learner))


@dataclass(frozen=True, slots=True)
class SlaveReport:
    max_offset: int

    SIZE: ClassVar[int] = SLAVE_REPORT_SIZE

    def encode(self) -> bytes:
        return _SLAVE_REPORT.pack(STATE_TRANSFER, non_negative("max offset", self.max_offset))

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> SlaveReport:
        if len(data) != SLAVE_REPORT_SIZE:
            raise HaWireError(f"slave report of {len(data)} bytes, not {SLAVE_REPORT_SIZE}")
        state, max_offset = _SLAVE_REPORT.unpack(data)
        if state != STATE_TRANSFER:
            raise HaWireError(f"slave report with state {state}")
        return cls(non_negative("max offset", max_offset))


SlaveFrame = SlaveHandshake | SlaveReport


# -- master to slave ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MasterHandshake:
    max_offset: int
    last_epoch: int
    entries: tuple[EpochEntry, ...] = ()

    HEADER_SIZE: ClassVar[int] = MASTER_HANDSHAKE_HEADER_SIZE

    def encode(self) -> bytes:
        if len(self.entries) > MAX_EPOCH_ENTRIES:
            raise HaWireError(f"{len(self.entries)} epoch entries, over {MAX_EPOCH_ENTRIES}")
        head = _MASTER_HANDSHAKE.pack(STATE_HANDSHAKE, EPOCH_ENTRY_SIZE * len(self.entries),
                                      non_negative("max offset", self.max_offset),
                                      non_negative("last epoch", self.last_epoch))
        return head + b"".join(_ENTRY.pack(non_negative("epoch", e.epoch), non_negative("epoch start", e.start))
                               for e in self.entries)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> MasterHandshake:
        if len(data) < MASTER_HANDSHAKE_HEADER_SIZE:
            raise HaWireError(f"master handshake of {len(data)} bytes, under its header's "
                              f"{MASTER_HANDSHAKE_HEADER_SIZE}")
        state, body_size, _, _ = _MASTER_HANDSHAKE.unpack_from(data)
        if state != STATE_HANDSHAKE:
            raise HaWireError(f"master handshake with state {state}")
        _handshake_body_size(body_size)
        if len(data) != MASTER_HANDSHAKE_HEADER_SIZE + body_size:
            raise HaWireError(f"master handshake of {len(data)} bytes, its header says {body_size} after the header")
        return _master_handshake(data, 0)


@dataclass(frozen=True, slots=True)
class Transfer:
    offset: int           # phys offset of the body's first byte (of the next byte, in a heartbeat)
    epoch: int
    epoch_start: int
    confirm_offset: int
    body: bytes = b""

    HEADER_SIZE: ClassVar[int] = TRANSFER_HEADER_SIZE

    @property
    def is_heartbeat(self) -> bool:
        return not self.body

    def header(self) -> bytes:
        """The 36-byte header alone, for a sender that writes the body from its own mapping."""
        if len(self.body) > MAX_BODY_SIZE:
            raise HaWireError(f"transfer body of {len(self.body)} bytes, over {MAX_BODY_SIZE}")
        return transfer_header(self.offset, self.epoch, self.epoch_start, self.confirm_offset, len(self.body))

    def encode(self) -> bytes:
        return self.header() + self.body

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Transfer:
        if len(data) < TRANSFER_HEADER_SIZE:
            raise HaWireError(f"transfer of {len(data)} bytes, under its {TRANSFER_HEADER_SIZE}-byte header")
        state, body_size = _STATE.unpack_from(data)[0], _STATE.unpack_from(data, 4)[0]
        if state != STATE_TRANSFER:
            raise HaWireError(f"transfer with state {state}")
        _transfer_body_size(body_size)
        if len(data) != TRANSFER_HEADER_SIZE + body_size:
            raise HaWireError(f"transfer of {len(data)} bytes, its header says {body_size} after the header")
        return _transfer(data, 0)


def transfer_header(offset: int, epoch: int, epoch_start: int, confirm_offset: int, body_size: int) -> bytes:
    """A transfer's header for ``body_size`` bytes that follow it (0: a heartbeat)."""
    return _TRANSFER.pack(STATE_TRANSFER, _transfer_body_size(body_size), non_negative("offset", offset),
                          non_negative("epoch", epoch), non_negative("epoch start", epoch_start),
                          non_negative("confirm offset", confirm_offset))


MasterFrame = MasterHandshake | Transfer


def _handshake_body_size(body_size: int) -> int:
    if body_size < 0 or body_size % EPOCH_ENTRY_SIZE:
        raise HaWireError(f"handshake body of {body_size} bytes is not whole {EPOCH_ENTRY_SIZE}-byte entries")
    if body_size > EPOCH_ENTRY_SIZE * MAX_EPOCH_ENTRIES:
        raise HaWireError(f"handshake of {body_size // EPOCH_ENTRY_SIZE} epoch entries, over {MAX_EPOCH_ENTRIES}")
    return body_size


def _transfer_body_size(body_size: int) -> int:
    if not 0 <= body_size <= MAX_BODY_SIZE:
        raise HaWireError(f"transfer body of {body_size} bytes, outside 0..{MAX_BODY_SIZE}")
    return body_size


def _master_handshake(buf: bytes | bytearray | memoryview, pos: int) -> MasterHandshake:
    _, body_size, max_offset, last_epoch = _MASTER_HANDSHAKE.unpack_from(buf, pos)
    entries = []
    for at in range(pos + MASTER_HANDSHAKE_HEADER_SIZE, pos + MASTER_HANDSHAKE_HEADER_SIZE + body_size,
                    EPOCH_ENTRY_SIZE):
        epoch, start = _ENTRY.unpack_from(buf, at)
        entries.append(EpochEntry(non_negative("epoch", epoch), non_negative("epoch start", start)))
    return MasterHandshake(non_negative("max offset", max_offset), non_negative("last epoch", last_epoch),
                           tuple(entries))


def _transfer(buf: bytes | bytearray | memoryview, pos: int) -> Transfer:
    _, body_size, offset, epoch, epoch_start, confirm = _TRANSFER.unpack_from(buf, pos)
    body_at = pos + TRANSFER_HEADER_SIZE
    return Transfer(non_negative("offset", offset), non_negative("epoch", epoch),
                    non_negative("epoch start", epoch_start), non_negative("confirm offset", confirm),
                    bytes(buf[body_at:body_at + body_size]))


# -- incremental readers -----------------------------------------------------------------------------


class _Stream(Generic[F]):
    """Bytes in any split, whole frames out. What it holds is the unread part of one frame: a frame
    longer than its bounds is refused from its header, before its body arrives."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._failed: HaWireError | None = None

    @property
    def pending_bytes(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[F]:
        """The frames ``data`` completes, in order; HaWireError (then on every later call) at the
        first malformed one."""
        if self._failed is not None:
            raise self._failed
        self._buf += data
        frames: list[F] = []
        pos = 0
        try:
            while True:
                size = self._frame_size(pos)
                if size is None or len(self._buf) - pos < size:
                    break
                frames.append(self._decode(pos, size))
                pos += size
        except HaWireError as exc:
            self._failed = exc  # nothing after a bad frame can be framed
            raise
        finally:
            del self._buf[:pos]
        return frames

    def _frame_size(self, pos: int) -> int | None:
        raise NotImplementedError

    def _decode(self, pos: int, size: int) -> F:
        raise NotImplementedError


class SlaveStream(_Stream[SlaveFrame]):
    """Reads what a slave sends (on the master): ``SlaveHandshake`` and ``SlaveReport`` frames."""

    def _frame_size(self, pos: int) -> int | None:
        if len(self._buf) - pos < 4:
            return None
        (state,) = _STATE.unpack_from(self._buf, pos)
        if state == STATE_HANDSHAKE:
            return SLAVE_HANDSHAKE_SIZE
        if state == STATE_TRANSFER:
            return SLAVE_REPORT_SIZE
        raise HaWireError(f"slave frame with state {state}")

    def _decode(self, pos: int, size: int) -> SlaveFrame:
        frame = self._buf[pos:pos + size]
        return SlaveHandshake.decode(frame) if size == SLAVE_HANDSHAKE_SIZE else SlaveReport.decode(frame)


class MasterStream(_Stream[MasterFrame]):
    """Reads what a master sends (on the slave): ``MasterHandshake`` and ``Transfer`` frames."""

    def _frame_size(self, pos: int) -> int | None:
        have = len(self._buf) - pos
        if have < 8:
            return None
        state, body_size = _STATE.unpack_from(self._buf, pos)[0], _STATE.unpack_from(self._buf, pos + 4)[0]
        if state == STATE_HANDSHAKE:
            return MASTER_HANDSHAKE_HEADER_SIZE + _handshake_body_size(body_size)
        if state == STATE_TRANSFER:
            return TRANSFER_HEADER_SIZE + _transfer_body_size(body_size)
        raise HaWireError(f"master frame with state {state}")

    def _decode(self, pos: int, size: int) -> MasterFrame:
        (state,) = _STATE.unpack_from(self._buf, pos)
        return _master_handshake(self._buf, pos) if state == STATE_HANDSHAKE else _transfer(self._buf, pos)
