"""One RocketMQ IndexFile: a hash table on disk from message key to commitlog offset.

Byte layout (all big-endian, as ``IndexFile.java`` / ``IndexHeader.java`` write it)::

    [ header 40 B ][ slot_count x 4 B slots ][ entry_count x 20 B entries ]
    file size = 40 + slot_count * 4 + entry_count * 20      (default 420,000,040 bytes)

    header
    | pos | size | field                                                              |
    |   0 |    8 | beginTimestamp  long  store ms of the first entry (or the seed)    |
    |   8 |    8 | endTimestamp    long  store ms of the last entry (or the seed)     |
    |  16 |    8 | beginPhyOffset  long  commitlog offset of the first entry          |
    |  24 |    8 | endPhyOffset    long  commitlog offset of the last entry           |
    |  32 |    4 | hashSlotCount   int   slots that went from empty to used           |
    |  36 |    4 | indexCount      int   next entry number; starts at 1 (entry #0 is  |
    |     |      |                       never used); a value <= 0 is read as 1       |

    slot at 40 + (key_hash % slot_count) * 4
    |   0 |    4 | int   entry number of the newest entry in the bucket; 0 = empty    |

    entry number n at 40 + slot_count * 4 + n * 20
    |   0 |    4 | keyHash      int   index_hash(key), never negative                |
    |   4 |    8 | phyOffset    long  commitlog offset of the record                 |
    |  12 |    4 | timeDiff     int   (store ms - beginTimestamp) // 1000, clamped to |
    |     |      |                    [0, 2**31 - 1]; 0 while beginTimestamp <= 0     |
    |  16 |    4 | prevIndex    int   previous entry number in the bucket; 0 = end    |

A bucket is a singly linked list from the slot through ``prevIndex``, newest first. Entries store
only the key's hash, so a lookup returns every offset whose key hashes alike; the caller reads
each record and compares the actual key.

One quirk kept for byte compatibility: the first entry's timeDiff is computed against the
header's beginTimestamp *before* the put replaces it with that entry's store time, so in a file
seeded from its predecessor the first entry's timeDiff is relative to the seed.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from engine.keyindex.buckets import put_keys, select_many
from engine.keyindex.keys import index_hash

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
INVALID_INDEX = 0
DEFAULT_SLOT_COUNT = 5_000_000
DEFAULT_ENTRY_COUNT = 20_000_000
TMP_SUFFIX = ".tmp"

_BEGIN_MS_POS = 0
_END_MS_POS = 8
_BEGIN_PHYS_POS = 16
_END_PHYS_POS = 24
_SLOT_USED_COUNT_POS = 32
_INDEX_COUNT_POS = 36

_INT_MAX = (1 << 31) - 1
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")
assert _ENTRY.size == INDEX_ENTRY_SIZE


# one entry as numpy sees it, for batch readers (verify, pipeline)
INDEX_ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phys_offset", ">i8"), ("time_diff_s", ">i4"),
                              ("prev_index", ">i4")])


class IndexFileError(ValueError):
    """An index file that does not match the expected geometry, or is used after close."""


def index_file_size(slot_count: int, entry_count: int) -> int:
    """File size in bytes for a geometry, after checking it is one RocketMQ can also open."""
    if not 1 <= slot_count <= _INT_MAX or not 1 <= entry_count <= _INT_MAX:
        raise IndexFileError(
            f"slot_count and entry_count must be in [1, 2**31-1]: {slot_count}, {entry_count}"
        )
    size = INDEX_HEADER_SIZE + slot_count * INDEX_SLOT_SIZE + entry_count * INDEX_ENTRY_SIZE
    if size > _INT_MAX:
        # IndexFile.java computes the file size as a Java int; a larger file would be unreadable there.
        raise IndexFileError(f"index file of {size} bytes exceeds RocketMQ's int-sized limit")
    return size


def time_diff_s(store_ms: int, begin_ms: int) -> int:
    """The entry's timeDiff field exactly as ``putKey`` computes it."""
    if begin_ms <= 0:
        return 0
    # Java's long division truncates toward zero; a negative result is clamped to 0 either way.
    return min(max((store_ms - begin_ms) // 1000, 0), _INT_MAX)


class IndexFile:
    """A mapped IndexFile. Header fields live only in the mapping, so a reader sees the writer's puts."""

    __slots__ = (
        "_entries_pos",
        "_entry_count",
        "_mm",
        "_needs_dir_sync",
        "_path",
        "_slot_count",
        "_writable",
    )

    def __init__(
        self, path: Path, slot_count: int, entry_count: int, mm: mmap.mmap, *, writable: bool
    ) -> None:
        self._path = path
        self._slot_count = slot_count
        self._entry_count = entry_count
        self._mm: mmap.mmap | None = mm
        self._writable = writable
        self._entries_pos = INDEX_HEADER_SIZE + slot_count * INDEX_SLOT_SIZE
        self._needs_dir_sync = False

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        slot_count: int = DEFAULT_SLOT_COUNT,
        entry_count: int = DEFAULT_ENTRY_COUNT,
        begin_phys_offset: int = 0,
        begin_ms: int = 0,
    ) -> IndexFile:
        """Create a new file; ``begin_*`` are the previous file's end values (seeded only when > 0).

        The file is built under ``path + ".tmp"`` and renamed into place once allocated and headed,
        so a kill mid-creation never leaves a short file under an index name. A full disk raises the
        OSError from ``posix_fallocate`` before anything is mapped.
        """
        final_path = Path(path)
        size = index_file_size(slot_count, entry_count)
        if final_path.exists():
            raise FileExistsError(f"index file already exists: {final_path}")
        tmp_path = final_path.with_name(final_path.name + TMP_SUFFIX)
        fd = os.open(tmp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            try:
                # Reserves the blocks (ENOSPC here, not SIGBUS later) without writing the bytes.
                os.posix_fallocate(fd, 0, size)
                mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)  # the mmap holds its own descriptor
        except BaseException:
            tmp_path.unlink(missing_ok=True)
            raise
        index_file = cls(final_path, slot_count, entry_count, mm, writable=True)
        try:
            _INT.pack_into(mm, _INDEX_COUNT_POS, 1)
            if begin_phys_offset > 0:
                _LONG.pack_into(mm, _BEGIN_PHYS_POS, begin_phys_offset)
                _LONG.pack_into(mm, _END_PHYS_POS, begin_phys_offset)
            if begin_ms > 0:
                _LONG.pack_into(mm, _BEGIN_MS_POS, begin_ms)
                _LONG.pack_into(mm, _END_MS_POS, begin_ms)
            os.rename(tmp_path, final_path)
        except BaseException:
            index_file.close()
            tmp_path.unlink(missing_ok=True)
            raise
        index_file._needs_dir_sync = True
        return index_file

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        slot_count: int = DEFAULT_SLOT_COUNT,
        entry_count: int = DEFAULT_ENTRY_COUNT,
        *,
        writable: bool = True,
    ) -> IndexFile:
        """Map an existing file; its size must be exactly the geometry's (IndexFileError otherwise)."""
        file_path = Path(path)
        size = index_file_size(slot_count, entry_count)
        fd = os.open(file_path, (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
        try:
            actual_size = os.fstat(fd).st_size
            if actual_size != size:
                raise IndexFileError(
                    f"{file_path}: {actual_size} bytes, but {slot_count} slots / {entry_count} entries "
                    f"need {size}"
                )
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
        finally:
            os.close(fd)
        return cls(file_path, slot_count, entry_count, mm, writable=writable)

    # -- header ---------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def name(self) -> str:
        return self._path.name

    @property
    def slot_count(self) -> int:
        return self._slot_count

    @property
    def entry_count(self) -> int:
        return self._entry_count

    @property
    def begin_ms(self) -> int:
        return int(_LONG.unpack_from(self._map(), _BEGIN_MS_POS)[0])

    @property
    def end_ms(self) -> int:
        return int(_LONG.unpack_from(self._map(), _END_MS_POS)[0])

    @property
    def begin_phys_offset(self) -> int:
        return int(_LONG.unpack_from(self._map(), _BEGIN_PHYS_POS)[0])

    @property
    def end_phys_offset(self) -> int:
        return int(_LONG.unpack_from(self._map(), _END_PHYS_POS)[0])

    @property
    def slot_used_count(self) -> int:
        return int(_INT.unpack_from(self._map(), _SLOT_USED_COUNT_POS)[0])

    @property
    def index_count(self) -> int:
        """Next entry number; IndexHeader.load() reads a value <= 0 as 1."""
        raw = int(_INT.unpack_from(self._map(), _INDEX_COUNT_POS)[0])
        return raw if raw > 0 else 1

    @property
    def is_full(self) -> bool:
        return self.index_count >= self._entry_count

    @property
    def is_closed(self) -> bool:
        return self._mm is None

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """Whether [begin_ms, end_ms] overlaps the file's [beginTimestamp, endTimestamp]."""
        file_begin_ms = self.begin_ms
        file_end_ms = self.end_ms
        return (
            (begin_ms < file_begin_ms and end_ms > file_end_ms)
            or file_begin_ms <= begin_ms <= file_end_ms
            or file_begin_ms <= end_ms <= file_end_ms
        )

    # -- entries --------------------------------------------------------------------------------

    def put_key(self, key: str, phys_offset: int, store_ms: int) -> bool:
        """Add one entry (``IndexFile.putKey``); False when the file is full."""
        mm = self._writable_map()
        if not 0 <= phys_offset <= _LONG_MAX:
            raise ValueError(f"phys_offset out of range: {phys_offset}")
        if not _LONG_MIN <= store_ms <= _LONG_MAX:
            raise ValueError(f"store_ms out of range: {store_ms}")
        index_count = self.index_count
        if index_count >= self._entry_count:
            return False
        key_hash = index_hash(key)
        slot_pos = self._slot_pos(key_hash)
        slot_value = int(_INT.unpack_from(mm, slot_pos)[0])
        if slot_value <= INVALID_INDEX or slot_value > index_count:
            slot_value = INVALID_INDEX
        diff_s = time_diff_s(store_ms, self.begin_ms)
        # Same bytes as Java in the end, but ordered so that a kill between any two writes leaves at
        # worst an unreachable entry or a key indexed twice on re-dispatch, never a slot pointing past
        # indexCount or an endPhyOffset claiming a key that is not reachable.
        _ENTRY.pack_into(mm, self._entry_pos(index_count), key_hash, phys_offset, diff_s, slot_value)
        if index_count <= 1:
            _LONG.pack_into(mm, _BEGIN_PHYS_POS, phys_offset)
            _LONG.pack_into(mm, _BEGIN_MS_POS, store_ms)
        _INT.pack_into(mm, _INDEX_COUNT_POS, index_count + 1)
        if slot_value == INVALID_INDEX:
            _INT.pack_into(mm, _SLOT_USED_COUNT_POS, self.slot_used_count + 1)
        _INT.pack_into(mm, slot_pos, index_count)
        _LONG.pack_into(mm, _END_PHYS_POS, phys_offset)
        _LONG.pack_into(mm, _END_MS_POS, store_ms)
        return True

    def put_keys(self, key_hashes: np.ndarray[Any, Any], phys_offsets: np.ndarray[Any, Any],
                 store_ms: np.ndarray[Any, Any]) -> int:
        """``put_key`` for many already hashed keys, in order (``engine.keyindex.buckets``); returns how
        many fit (the rest belong in the next file)."""
        return put_keys(self._writable_map(), self._slot_count, self._entry_count, key_hashes, phys_offsets, store_ms)

    def select_phys_offsets(self, key: str, max_count: int, begin_ms: int, end_ms: int) -> list[int]:
        """Offsets of entries whose hash equals the key's and whose time is in [begin_ms, end_ms].

        Newest first, at most ``max_count``; the walk of ``IndexFile.selectPhyOffset``. Keys are not
        compared (only hashes are stored): the caller filters collisions by reading the records.
        """
        mm = self._map()
        phys_offsets: list[int] = []
        if max_count <= 0:
            return phys_offsets
        key_hash = index_hash(key)
        index_count = self.index_count
        entry_no = int(_INT.unpack_from(mm, self._slot_pos(key_hash))[0])
        if entry_no <= INVALID_INDEX or entry_no > index_count or index_count <= 1:
            return phys_offsets
        file_begin_ms = self.begin_ms
        # A sound chain visits each entry at most once; the bound stops a corrupt cycle, which the
        # Java walk (it only rejects prev == current) would follow forever.
        for _ in range(index_count):
            if len(phys_offsets) >= max_count or entry_no >= self._entry_count:
                break
            hash_read, phys_offset, diff_s, prev_no = _ENTRY.unpack_from(mm, self._entry_pos(entry_no))
            if diff_s < 0:
                break
            time_read_ms = file_begin_ms + diff_s * 1000
            if hash_read == key_hash and begin_ms <= time_read_ms <= end_ms:
                phys_offsets.append(int(phys_offset))
            if (
                prev_no <= INVALID_INDEX
                or prev_no > index_count
                or prev_no == entry_no
                or time_read_ms < begin_ms
            ):
                break
            entry_no = prev_no
        return phys_offsets

    def select_phys_offsets_many(self, key_hashes: np.ndarray[Any, Any], wants: np.ndarray[Any, Any],
                                 begin_ms: int, end_ms: int) -> list[list[int]]:
        """``select_phys_offsets`` for many keys at once, given their ``index_hash``es, up to
        ``wants[i]`` offsets for key i (``engine.keyindex.buckets.select_many``)."""
        return select_many(self._map(), self._slot_count, self._entry_count, key_hashes, wants, begin_ms, end_ms)

    def has_entry(self, key: str, phys_offset: int) -> bool:
        """Whether an entry with this key's hash and exactly this offset is reachable.

        Used to make re-dispatch of the newest indexed record idempotent. Entry offsets never
        decrease with the entry number, so the walk stops at the first older offset.
        """
        return self.has_hashed_entry(index_hash(key), phys_offset)

    def has_hashed_entry(self, key_hash: int, phys_offset: int) -> bool:
        """``has_entry`` for a key already hashed (``index_hash``)."""
        mm = self._map()
        index_count = self.index_count
        entry_no = int(_INT.unpack_from(mm, self._slot_pos(key_hash))[0])
        if entry_no <= INVALID_INDEX or entry_no > index_count or index_count <= 1:
            return False
        for _ in range(index_count):
            if entry_no >= self._entry_count:
                break
            hash_read, phys_read, _diff_s, prev_no = _ENTRY.unpack_from(mm, self._entry_pos(entry_no))
            if phys_read < phys_offset:
                break
            if hash_read == key_hash and phys_read == phys_offset:
                return True
            if prev_no <= INVALID_INDEX or prev_no >= entry_no:
                break
            entry_no = prev_no
        return False

    # -- lifecycle ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Force the mapping to disk (msync); an OSError propagates, it is never swallowed."""
        mm = self._map()
        if not self._writable:
            return
        if _INT.unpack_from(mm, _INDEX_COUNT_POS)[0] <= 0:
            # Java's flush rewrites the header from memory, where load() turned <= 0 into 1.
            _INT.pack_into(mm, _INDEX_COUNT_POS, 1)
        mm.flush()
        if self._needs_dir_sync:
            # The rename that published the file is durable only once its directory is.
            dir_fd = os.open(self._path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            self._needs_dir_sync = False

    def close(self) -> None:
        """Unmap without flushing; idempotent."""
        if self._mm is not None:
            mm, self._mm = self._mm, None
            mm.close()

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self._path.unlink()

    def __enter__(self) -> IndexFile:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------

    def _map(self) -> mmap.mmap:
        if self._mm is None:
            raise IndexFileError(f"index file is closed: {self._path}")
        return self._mm

    def _writable_map(self) -> mmap.mmap:
        if not self._writable:
            raise IndexFileError(f"index file is open read-only: {self._path}")
        return self._map()

    def _slot_pos(self, key_hash: int) -> int:
        return INDEX_HEADER_SIZE + (key_hash % self._slot_count) * INDEX_SLOT_SIZE

    def _entry_pos(self, entry_no: int) -> int:
        return self._entries_pos + entry_no * INDEX_ENTRY_SIZE
