"""RocketMQ's two message ids: the broker's offsetMsgId and the client's UNIQ_KEY.

offsetMsgId (``MessageDecoder.createMessageId``), uppercase hex of, big-endian::

    pos     size  field
      0   4 | 16  store host address (IPv4 | IPv6)
    4|16       4  store host port (int)
    8|20       8  commitlog phys_offset (long)
    -------------  16 bytes = 32 hex chars (IPv4), 28 bytes = 56 hex chars (IPv6)

UNIQ_KEY (``MessageClientIDSetter``), uppercase hex of, big-endian::

    pos        size  field
      0      4 | 16  client IP (or a "fake IP": bytes 4..7 of the current time millis as a long)
    ip_len        2  PID as a Java (short): the low 16 bits
    ip_len+2      4  class-loader hash (int)
    ip_len+6      4  ms since the start of the current month, local time, as a Java (int)
    ip_len+10     2  counter, low 16 bits, +1 per id
    ----------------  16 bytes = 32 hex chars (IPv4), 28 bytes = 56 hex chars (IPv6)

The month-relative time is ``(int)(now - month_start)``: past about day 24.8 of a month it wraps
negative, and readers take the 4 bytes as unsigned, which undoes the wrap. A clock stepped back a
little (NTP) gives a small negative span, which the writer clamps to 0.
"""

from __future__ import annotations

import ipaddress
import os
import string
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from mqstore.engine import _native
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.host import Host

OFFSET_MSG_ID_V4_LEN = 32
OFFSET_MSG_ID_V6_LEN = 56
UNIQ_KEY_V4_LEN = 32
UNIQ_KEY_V6_LEN = 56

_PHYS_OFFSET = struct.Struct(">q")
_UNIQ_FIXED_TAIL = struct.Struct(">hi")  # pid short, class-loader hash
_UNIQ_VARYING = struct.Struct(">IH")  # month span, counter
_UNIQ_TAIL = struct.Struct(">HiIH")  # as read back: pid unsigned (getPidFromID masks it)
_CLAMP_NEGATIVE_SPAN_MS = -1_000_000
_HEX_DIGITS = frozenset(string.hexdigits)


class MessageIdError(MqstoreError, ValueError):
    """A message id of the wrong length or with non-hex characters."""


def _id_bytes(msg_id: str, lengths: tuple[int, int], what: str) -> bytes:
    if len(msg_id) not in lengths:
        raise MessageIdError(
            f"{what} must be {lengths[0]} or {lengths[1]} hex chars, got {len(msg_id)}: {msg_id!r}"
        )
    # bytes.fromhex would skip spaces; an id with any is malformed.
    if not _HEX_DIGITS.issuperset(msg_id):
        raise MessageIdError(f"{what} is not hex: {msg_id!r}")
    return bytes.fromhex(msg_id)


def offset_msg_id(store_host: Host, phys_offset: int) -> str:
    """The broker-assigned id of the record at ``phys_offset`` stored by ``store_host``."""
    try:
        raw = store_host.packed + _PHYS_OFFSET.pack(phys_offset)
    except (struct.error, ValueError) as exc:
        raise MessageIdError(f"cannot encode {store_host} @ {phys_offset}: {exc}") from exc
    return raw.hex().upper()


def offset_msg_ids(store_host: Host, phys_offsets: Sequence[int]) -> list[str]:
    """``offset_msg_id`` of each offset, hexed at once (a batch's reply)."""
    host = store_host.packed.hex().upper()
    try:
        digits = struct.pack(f">{len(phys_offsets)}q", *phys_offsets).hex().upper()
    except struct.error as exc:
        raise MessageIdError(f"cannot encode {store_host} @ {list(phys_offsets)[:4]}...: {exc}") from exc
    return [host + digits[i:i + 16] for i in range(0, len(digits), 16)]


def decode_offset_msg_id(msg_id: str) -> tuple[Host, int]:
    """``(store_host, phys_offset)`` of an offsetMsgId; case-insensitive."""
    raw = _id_bytes(msg_id, (OFFSET_MSG_ID_V4_LEN, OFFSET_MSG_ID_V6_LEN), "offsetMsgId")
    (phys_offset,) = _PHYS_OFFSET.unpack_from(raw, len(raw) - _PHYS_OFFSET.size)
    return Host.unpack(raw[: -_PHYS_OFFSET.size]), phys_offset


# --- UNIQ_KEY --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UniqKey:
    """The fields of a decoded UNIQ_KEY, read back as RocketMQ's getters read them."""

    ip: bytes
    pid: int  # unsigned 16 bits, like getPidFromID
    class_loader_hash: int  # signed int
    month_span_ms: int  # unsigned 32 bits, like getNearlyTimeFromID
    counter: int


def decode_uniq_key(uniq_key: str) -> UniqKey:
    raw = _id_bytes(uniq_key, (UNIQ_KEY_V4_LEN, UNIQ_KEY_V6_LEN), "UNIQ_KEY")
    ip_len = len(raw) - _UNIQ_TAIL.size
    pid, class_loader_hash, month_span_ms, counter = _UNIQ_TAIL.unpack_from(raw, ip_len)
    return UniqKey(raw[:ip_len], pid, class_loader_hash, month_span_ms, counter)


def uniq_key_pid(uniq_key: str) -> int:
    """The low 16 bits of the creating process's PID, unsigned (``getPidFromID``)."""
    return decode_uniq_key(uniq_key).pid


def _month_start_ms(at_ms: int, tz: tzinfo | None, months_ahead: int = 0) -> int:
    """Start of the (local, or ``tz``) month holding ``at_ms``, shifted by ``months_ahead``."""
    at = datetime.fromtimestamp(at_ms // 1000, tz)
    month_index = at.year * 12 + at.month - 1 + months_ahead
    start = at.replace(year=month_index // 12, month=month_index % 12 + 1, day=1,
                       hour=0, minute=0, second=0, microsecond=0, fold=0)
    return round(start.timestamp()) * 1000


def uniq_key_time_ms(uniq_key: str, now_ms: int, tz: tzinfo | None = None) -> int:
    """Approximate creation time of a UNIQ_KEY (``getNearlyTimeFromID``).

    The id holds only the offset into some month: taken as this month unless that lands at or
    after ``now_ms``, then as last month. ``tz`` None means local time, as the client used.
    """
    span_ms = decode_uniq_key(uniq_key).month_span_ms
    month_start_ms = _month_start_ms(now_ms, tz)
    if month_start_ms + span_ms >= now_ms:
        month_start_ms = _month_start_ms(now_ms, tz, months_ahead=-1)
    return month_start_ms + span_ms


def _to_java_int(value: int) -> int:
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _to_java_short(value: int) -> int:
    return ((value + (1 << 15)) & 0xFFFF) - (1 << 15)


class UniqKeyGenerator:
    """Creates UNIQ_KEYs the way one RocketMQ client process does (``createUniqID``)."""

    __slots__ = ("_counter", "_month_start_ms", "_next_month_start_ms", "_now_ms", "_prefix", "_tz")

    def __init__(self, ip: bytes, pid: int, class_loader_hash: int, now_ms: Callable[[], int],
                 tz: tzinfo | None = None) -> None:
        """``pid`` and ``class_loader_hash`` are cut to 16 and 32 bits as Java's casts cut them;
        ``tz`` None means local time, as RocketMQ's Calendar uses."""
        if len(ip) not in (4, 16):
            raise ValueError(f"ip must be 4 or 16 bytes, got {len(ip)}")
        fixed = bytes(ip) + _UNIQ_FIXED_TAIL.pack(_to_java_short(pid), _to_java_int(class_loader_hash))
        self._prefix = fixed.hex().upper()
        self._now_ms = now_ms
        self._tz = tz
        self._counter = 0
        self._month_start_ms = 0
        # Forces the month to be computed from the first id's own clock reading.
        self._next_month_start_ms = -(1 << 63)

    @classmethod
    def for_this_process(cls, now_ms: Callable[[], int], ip: bytes | None = None) -> UniqKeyGenerator:
        """A generator for this process: the given address (the engine resolves no names; the
        caller knows its own), else RocketMQ's fake IP, the PID and a random hash."""
        ip = ip or fake_ip(now_ms())
        class_loader_hash = int.from_bytes(os.urandom(4), "big", signed=True)
        return cls(ip, os.getpid(), class_loader_hash, now_ms)

    def next(self) -> str:
        span_ms = self._span_ms()
        counter = self._counter
        self._counter = (counter + 1) & 0xFFFF
        return self._prefix + _UNIQ_VARYING.pack(span_ms, counter).hex().upper()

    def next_many(self, count: int) -> list[str]:
        """``count`` ids, as as many calls of ``next`` give within one clock reading: one month span
        for all, the counter counting on (a batch encoder's ids, made in one compiled call)."""
        counter = self._counter
        self._counter = (counter + count) & 0xFFFF
        return _native.uniq_keys(f"{self._prefix}{self._span_ms():08X}", counter, count)

    def _span_ms(self) -> int:
        """The id's month span for the clock now, as an unsigned 32-bit value."""
        current_ms = self._now_ms()
        # Only forward: a clock stepped back keeps the month it had, as RocketMQ does.
        if current_ms >= self._next_month_start_ms:
            self._month_start_ms = _month_start_ms(current_ms, self._tz)
            self._next_month_start_ms = _month_start_ms(current_ms, self._tz, months_ahead=1)
        span_ms = _to_java_int(current_ms - self._month_start_ms)
        if _CLAMP_NEGATIVE_SPAN_MS < span_ms < 0:
            span_ms = 0
        return span_ms & 0xFFFFFFFF


def fake_ip(now_ms: int) -> bytes:
    """RocketMQ's stand-in when no address is found: bytes 4..7 of the time millis as a long."""
    return struct.pack(">q", now_ms)[4:8]


def choose_ipv4(candidates: Iterable[bytes]) -> bytes | None:
    """The address RocketMQ's ``UtilAll.getIP`` would prefer: the first usable public one, else the
    first usable private one. Loopback, unspecified, link-local, multicast and reserved are unusable.
    """
    private: bytes | None = None
    for packed in candidates:
        if len(packed) != 4:
            continue
        addr = ipaddress.IPv4Address(packed)
        unusable = (addr.is_loopback or addr.is_unspecified or addr.is_link_local
                    or addr.is_multicast or addr.is_reserved)
        if unusable:
            continue
        if not addr.is_private:
            return packed
        if private is None:
            private = packed
    return private
