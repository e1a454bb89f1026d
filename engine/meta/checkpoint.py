"""The store checkpoint: ``{store}/checkpoint``, RocketMQ's StoreCheckpoint, one 4096-byte page.

Byte layout (big-endian signed longs; the rest of the page is zero)::

    pos  size  field                  meaning
      0     8  physic_msg_ms          store time of the last flushed commitlog record
      8     8  logics_msg_ms          store time of the last record flushed into a consume queue
     16     8  index_msg_ms           end time of the last full index file flushed
     24     8  master_flushed_offset  HA: the master's flushed commitlog offset (slave side)
     32     8  confirm_phys_offset    controller mode: confirmed commitlog offset
     40  4056  zero
    ---- 4096

A 4.x file has only the first three longs (0/8/16); its bytes 24..39 are zero, which reads as
0 for the last two fields, so it loads unchanged.

Recovery starts from ``min_timestamp_ms``: the older of the two durable timestamps, less a 3 s
margin (RocketMQ's ``getMinTimestamp``), because the consume queues and the commitlog are flushed on
different cadences and either may lag the other.

RocketMQ maps this page; here it is written with one ``pwrite`` of the 40 field bytes on a plain
descriptor followed by ``fsync``, so there is no second mapping that could show a torn update, and
a failed fsync raises instead of being logged and forgotten.
"""

from __future__ import annotations

import os
import struct
from types import TracebackType

from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.metafile import StrPath, write_atomic

_FIELDS = struct.Struct(">qqqqq")

CHECKPOINT_SIZE = 4096
CHECKPOINT_FIELDS_SIZE = _FIELDS.size
MIN_TIMESTAMP_MARGIN_MS = 3000


class CheckpointError(MqstoreError):
    """The checkpoint file is malformed, or the object is used after close or read-only."""


class Checkpoint:
    """The five checkpoint fields, held in memory and written to disk by ``flush``.

    Set the attributes freely; nothing reaches the file until ``flush()``. ``close()`` does not
    flush: a checkpoint must never claim more than its owner has made durable, so writing it is
    always an explicit act.
    """

    __slots__ = (
        "_fd",
        "_path",
        "_read_only",
        "confirm_phys_offset",
        "index_msg_ms",
        "logics_msg_ms",
        "master_flushed_offset",
        "physic_msg_ms",
    )

    def __init__(self, fd: int, path: str, fields: tuple[int, int, int, int, int], read_only: bool) -> None:
        self._fd: int | None = fd
        self._path = path
        self._read_only = read_only
        (
            self.physic_msg_ms,
            self.logics_msg_ms,
            self.index_msg_ms,
            self.master_flushed_offset,
            self.confirm_phys_offset,
        ) = fields

    @classmethod
    def open(cls, path: StrPath, *, read_only: bool = False) -> Checkpoint:
        """Load the checkpoint at ``path``, creating a zeroed one first if there is none.

        With ``read_only`` a missing file raises FileNotFoundError instead of being created, and
        ``flush`` is refused: for tools that inspect a store they do not own.
        """
        target = os.fspath(path)
        if not read_only and not os.path.exists(target):
            # Created whole through a renamed temp file: a crash mid-create must not leave a
            # short file that the size check would reject on every later start.
            write_atomic(target, bytes(CHECKPOINT_SIZE))
        fd = os.open(target, os.O_RDONLY if read_only else os.O_RDWR)
        try:
            size_bytes = os.fstat(fd).st_size
            if size_bytes != CHECKPOINT_SIZE:
                raise CheckpointError(
                    f"{target}: checkpoint must be {CHECKPOINT_SIZE} bytes, found {size_bytes}"
                )
            raw = os.pread(fd, CHECKPOINT_FIELDS_SIZE, 0)
            if len(raw) != CHECKPOINT_FIELDS_SIZE:
                raise CheckpointError(f"{target}: short read of checkpoint fields ({len(raw)} bytes)")
            fields: tuple[int, int, int, int, int] = _FIELDS.unpack(raw)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, target, fields, read_only)

    @property
    def path(self) -> str:
        return self._path

    @property
    def min_timestamp_ms(self) -> int:
        """Store time from which an abnormal recovery must re-check the commitlog."""
        return max(0, min(self.physic_msg_ms, self.logics_msg_ms) - MIN_TIMESTAMP_MARGIN_MS)

    @property
    def min_timestamp_index_ms(self) -> int:
        """Like ``min_timestamp_ms``, but also no later than the last flushed index file."""
        return min(self.min_timestamp_ms, self.index_msg_ms)

    def packed(self) -> bytes:
        """The 40 field bytes as they sit at the start of the file."""
        try:
            return _FIELDS.pack(
                self.physic_msg_ms,
                self.logics_msg_ms,
                self.index_msg_ms,
                self.master_flushed_offset,
                self.confirm_phys_offset,
            )
        except struct.error as exc:
            raise CheckpointError(f"checkpoint field out of signed 64-bit range: {exc}") from exc

    def flush(self) -> None:
        """Write all five fields and fsync. Any OSError propagates: the checkpoint is not durable."""
        fd = self._require_fd()
        if self._read_only:
            raise CheckpointError(f"{self._path}: checkpoint opened read-only")
        data = self.packed()
        written = os.pwrite(fd, data, 0)
        if written != len(data):
            raise OSError(f"{self._path}: short checkpoint write ({written} of {len(data)} bytes)")
        os.fsync(fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def _require_fd(self) -> int:
        if self._fd is None:
            raise CheckpointError(f"{self._path}: checkpoint is closed")
        return self._fd

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Checkpoint(path={self._path!r}, physic_msg_ms={self.physic_msg_ms}, "
            f"logics_msg_ms={self.logics_msg_ms}, index_msg_ms={self.index_msg_ms}, "
            f"master_flushed_offset={self.master_flushed_offset}, "
            f"confirm_phys_offset={self.confirm_phys_offset})"
        )
