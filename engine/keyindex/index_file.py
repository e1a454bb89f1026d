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
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from mqstore.engine.errors import MqstoreError
from mqstore.engine.keyindex import buckets
from mqstore.engine.keyindex.index_map import IndexMapping, Views
from mqstore.engine.keyindex.keys import index_hash
from mqstore.engine.log.file_identity import identity, identity_of
from mqstore.engine.log.open_files import OpenFiles

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
DEFAULT_SLOT_COUNT = 5_000_000
DEFAULT_ENTRY_COUNT = 20_000_000
TMP_SUFFIX = ".tmp"

# the header and one entry as numpy sees them: the file's own reads and writes, verify, the pipeline
INDEX_HEADER_DTYPE = np.dtype([("begin_ms", ">i8"), ("end_ms", ">i8"), ("begin_phys", ">i8"), ("end_phys", ">i8"),
                               ("slot_used", ">i4"), ("index_count", ">i4")])
INDEX_ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phys_offset", ">i8"), ("time_diff_s", ">i4"),
                              ("prev_index", ">i4")])
assert INDEX_HEADER_DTYPE.itemsize == INDEX_HEADER_SIZE and INDEX_ENTRY_DTYPE.itemsize == INDEX_ENTRY_SIZE

_INT_MAX = (1 << 31) - 1
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1

# each header field's reader: one struct unpack straight off the map, several times cheaper than a
# field of the numpy view, and a query reads the header of every file it walks a few times
_HEADER_FIELDS = {name: (struct.Struct(">q" if INDEX_HEADER_DTYPE[name].itemsize == 8 else ">i"),
                         INDEX_HEADER_DTYPE.fields[name][1])  # type: ignore[index]
                  for name in INDEX_HEADER_DTYPE.names or ()}

# what a deleted file reads as: an empty one (its slots all 0, entry #0 never used)
_EMPTY: Views = (np.zeros(1, INDEX_HEADER_DTYPE), np.zeros(1, ">i4"), np.zeros(1, INDEX_ENTRY_DTYPE))
for _view in _EMPTY:
    _view.flags.writeable = False


class IndexFileError(MqstoreError, ValueError):
    """An index file that does not match the expected geometry, or is used after close."""


class IndexFileGoneError(IndexFileError):
    """An index file let go (``open_files``) was deleted, or another file made at its path, before its next use."""


def index_file_size(slot_count: int, entry_count: int) -> int:
    """File size in bytes for a geometry, after checking it is one RocketMQ can also open."""
    if not 1 <= slot_count <= _INT_MAX or not 1 <= entry_count <= _INT_MAX:
        raise IndexFileError(f"slot_count and entry_count must be in [1, 2**31-1]: {slot_count}, {entry_count}")
    size = INDEX_HEADER_SIZE + slot_count * INDEX_SLOT_SIZE + entry_count * INDEX_ENTRY_SIZE
    if size > _INT_MAX:
        # IndexFile.java computes the file size as a Java int; a larger file would be unreadable there.
        raise IndexFileError(f"index file of {size} bytes exceeds RocketMQ's int-sized limit")
    return size


class IndexFile:
    """A mapped IndexFile. Header fields live only in the mapping, so a reader sees the writer's puts;
    the buckets' puts and probes (``mqstore.engine.keyindex.buckets``) work on numpy views of it.

    With ``open_files`` the mapping is made on first use and may be let go between uses
    (``mqstore.engine.keyindex.index_map``). A file found deleted reads as an empty one (a walk passes
    over it: retention deletes only files whose records are gone too); its header and its writes
    raise IndexFileGoneError."""

    __slots__ = ("_closed", "_entry_count", "_map_", "_needs_dir_sync", "_path", "_slot_count", "_writable")

    def __init__(self, path: Path, slot_count: int, entry_count: int, mapping: IndexMapping, *,
                 writable: bool) -> None:
        self._path = path
        self._slot_count = slot_count
        self._entry_count = entry_count
        self._map_ = mapping
        self._writable = writable
        self._needs_dir_sync = False
        self._closed = False

    @staticmethod
    def _views_of(slot_count: int, entry_count: int) -> Callable[[mmap.mmap], Views]:
        """The header, slots and entries of a mapping (dropped before its unmap: ``index_map``)."""
        entries_pos = INDEX_HEADER_SIZE + slot_count * INDEX_SLOT_SIZE
        return lambda mm: (np.frombuffer(mm, INDEX_HEADER_DTYPE, 1),
                           np.frombuffer(mm, ">i4", slot_count, INDEX_HEADER_SIZE),
                           np.frombuffer(mm, INDEX_ENTRY_DTYPE, entry_count, entries_pos))

    @classmethod
    def create(cls, path: str | os.PathLike[str], slot_count: int = DEFAULT_SLOT_COUNT,
               entry_count: int = DEFAULT_ENTRY_COUNT, begin_phys_offset: int = 0, begin_ms: int = 0,
               open_files: OpenFiles | None = None) -> IndexFile:
        """Create a new file; ``begin_*`` are the previous file's end values (seeded only when > 0).
        Built under ``path + ".tmp"``, renamed into place once allocated, headed and fsynced: neither a
        kill nor a power cut mid-creation leaves a short file under an index name. A full disk raises
        the OSError from ``posix_fallocate`` before anything is mapped."""
        final_path = Path(path)
        size = index_file_size(slot_count, entry_count)
        if final_path.exists():
            raise FileExistsError(f"index file already exists: {final_path}")
        tmp_path = final_path.with_name(final_path.name + TMP_SUFFIX)
        fd = os.open(tmp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            # Reserves the blocks (ENOSPC here, not SIGBUS later) without writing the bytes.
            os.posix_fallocate(fd, 0, size)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            file_id = identity_of(fd)  # a rename keeps it
        except BaseException:
            os.close(fd)
            tmp_path.unlink(missing_ok=True)
            raise
        mapping = IndexMapping(final_path, size, True, file_id, mm, cls._views_of(slot_count, entry_count), open_files)
        index_file = cls(final_path, slot_count, entry_count, mapping, writable=True)
        try:
            try:
                index_file._set_header("index_count", 1)
                for field, value in (("begin_phys", begin_phys_offset), ("end_phys", begin_phys_offset),
                                     ("begin_ms", begin_ms), ("end_ms", begin_ms)):
                    if value > 0:
                        index_file._set_header(field, value)
                # size and header durable before the name: a directory sync (this file's, or any later
                # one's) must never make durable a name whose file a power cut leaves 0 bytes long
                os.fsync(fd)
            finally:
                os.close(fd)  # the mmap holds its own descriptor
            os.rename(tmp_path, final_path)
        except BaseException:
            index_file.close()
            tmp_path.unlink(missing_ok=True)
            raise
        index_file._needs_dir_sync = True
        return index_file

    @classmethod
    def open(cls, path: str | os.PathLike[str], slot_count: int = DEFAULT_SLOT_COUNT,
             entry_count: int = DEFAULT_ENTRY_COUNT, *, writable: bool = True,
             open_files: OpenFiles | None = None) -> IndexFile:
        """Map an existing file (with ``open_files``: on first use); its size must be exactly the
        geometry's (IndexFileError otherwise)."""
        file_path = Path(path)
        size = index_file_size(slot_count, entry_count)
        actual_size = file_path.stat().st_size
        if actual_size != size:
            raise IndexFileError(f"{file_path}: {actual_size} bytes, but {slot_count} slots / {entry_count} entries "
                                 f"need {size}")
        mapping = IndexMapping(file_path, size, writable, identity(file_path), None,
                               cls._views_of(slot_count, entry_count), open_files)
        index_file = cls(file_path, slot_count, entry_count, mapping, writable=writable)
        if open_files is None:
            index_file._map()
        return index_file

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
        return self._header_field("begin_ms")

    @property
    def end_ms(self) -> int:
        return self._header_field("end_ms")

    @property
    def begin_phys_offset(self) -> int:
        return self._header_field("begin_phys")

    @property
    def end_phys_offset(self) -> int:
        return self._header_field("end_phys")

    @property
    def slot_used_count(self) -> int:
        return self._header_field("slot_used")

    @property
    def index_count(self) -> int:
        """Next entry number; IndexHeader.load() reads a value <= 0 as 1."""
        raw = self._header_field("index_count")
        return raw if raw > 0 else 1

    @property
    def is_full(self) -> bool:
        return self.index_count >= self._entry_count

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def held(self) -> IndexMapping:
        """The mapping, as the process's open files hold it."""
        return self._map_

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """Whether [begin_ms, end_ms] overlaps the file's [beginTimestamp, endTimestamp]."""
        file_begin_ms = self.begin_ms
        file_end_ms = self.end_ms
        return ((begin_ms < file_begin_ms and end_ms > file_end_ms) or file_begin_ms <= begin_ms <= file_end_ms
                or file_begin_ms <= end_ms <= file_end_ms)

    # -- entries --------------------------------------------------------------------------------

    def put_key(self, key: str, phys_offset: int, store_ms: int) -> bool:
        """Add one entry (``IndexFile.putKey``): ``put_keys`` of one key; False when the file is full."""
        self._writable_map()
        if not 0 <= phys_offset <= _LONG_MAX:
            raise ValueError(f"phys_offset out of range: {phys_offset}")
        if not _LONG_MIN <= store_ms <= _LONG_MAX:
            raise ValueError(f"store_ms out of range: {store_ms}")
        return self.put_keys(np.array([index_hash(key)], np.int64), np.array([phys_offset], np.int64),
                             np.array([store_ms], np.int64)) == 1

    def put_keys(self, key_hashes: np.ndarray[Any, Any], phys_offsets: np.ndarray[Any, Any],
                 store_ms: np.ndarray[Any, Any]) -> int:
        """Add entries for many already hashed keys, in order (``mqstore.engine.keyindex.buckets.put``); returns
        how many fit (the rest belong in the next file)."""
        self._writable_map()
        return buckets.put(*self._buckets(), key_hashes, phys_offsets, store_ms)

    def select_phys_offsets(self, key: str, max_count: int, begin_ms: int, end_ms: int) -> list[int]:
        """Offsets of entries whose hash equals the key's and whose time is in [begin_ms, end_ms].

        Newest first, at most ``max_count``; the walk of ``IndexFile.selectPhyOffset``. Keys are not
        compared (only hashes are stored): the caller filters collisions by reading the records.
        """
        return buckets.select(*self._read_buckets(), [index_hash(key)], [max_count], begin_ms, end_ms)[0][0]

    def select_phys_offsets_many(self, key_hashes: np.ndarray[Any, Any], wants: np.ndarray[Any, Any],
                                 begin_ms: int, end_ms: int) -> list[list[int]]:
        """``select_phys_offsets`` for many keys at once, given their ``index_hash``es, up to
        ``wants[i]`` offsets for key i (``mqstore.engine.keyindex.buckets.select``)."""
        return buckets.select(*self._read_buckets(), key_hashes, wants, begin_ms, end_ms)[0]

    def select_page(self, key_hashes: Sequence[int], wants: Sequence[int], from_nos: Sequence[int], begin_ms: int,
                    end_ms: int) -> tuple[list[list[int]], list[int]]:
        """``select_phys_offsets_many`` walking each key's chain from entry ``from_nos[i]`` (0: its slot),
        and for each key the entry to read next (0: its chain in this file has ended): a walk paged
        by position, each page going on where the last one stopped."""
        return buckets.select(*self._read_buckets(), key_hashes, wants, begin_ms, end_ms, from_nos)

    def probe(self, file_pos: int, file_count: int, begin_ms: int, end_ms: int, hashes: Any, wants: Any, places: Any,
              from_nos: Any, cand_keys: Any, cand_phys: Any, count: int) -> tuple[int, int]:
        """This file, ``file_pos`` of a query's ``file_count`` (newest first), probed for every key of the
        query placed in it (``mqstore.engine.keyindex.buckets.probe``); ``queryOffset``'s stops: a file whose time
        range misses [begin_ms, end_ms] is passed over, and one begun before ``begin_ms`` is the last walked."""
        views = self._read_buckets()
        gone = views is _EMPTY  # passed over: its keys go on to the next file
        return buckets.probe(*views, file_pos, file_count, not gone and self.is_time_matched(begin_ms, end_ms),
                             not gone and self.begin_ms < begin_ms, begin_ms, end_ms, hashes, wants, places, from_nos,
                             cand_keys, cand_phys, count)

    def has_entry(self, key: str, phys_offset: int) -> bool:
        """Whether an entry with this key's hash and exactly this offset is reachable.

        Used to make re-dispatch of the newest indexed record idempotent. Entry offsets never
        decrease with the entry number, so the walk stops at the first older offset.
        """
        return self.has_hashed_entry(index_hash(key), phys_offset)

    def has_hashed_entry(self, key_hash: int, phys_offset: int) -> bool:
        """``has_entry`` for a key already hashed (``index_hash``; ``mqstore.engine.keyindex.buckets.has_entry``)."""
        return buckets.has_entry(*self._read_buckets(), key_hash, phys_offset)

    # -- lifecycle ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Force the mapping to disk (msync: the file's dirty pages, through whichever mapping they were
        written, one let go since included); an OSError propagates, it is never swallowed."""
        if not self._writable:
            return
        mm = self._map()
        if self._header_field("index_count") <= 0:
            # Java's flush rewrites the header from memory, where load() turned <= 0 into 1.
            self._set_header("index_count", 1)
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
        if not self._closed:
            self._closed = True
            self._map_.close()

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self._path.unlink()

    def __enter__(self) -> IndexFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------

    def _map(self) -> mmap.mmap:
        if self._closed:
            raise IndexFileError(f"index file is closed: {self._path}")
        mm = self._map_.mapping()
        if mm is None:
            raise IndexFileGoneError(f"index file was deleted (or deleted and made again): {self._path}")
        return mm

    def _writable_map(self) -> mmap.mmap:
        if not self._writable:
            raise IndexFileError(f"index file is open read-only: {self._path}")
        return self._map()

    def _buckets(self) -> Views:
        """The header, slots and entries views, for ``mqstore.engine.keyindex.buckets``."""
        views = self._read_buckets()
        if views is _EMPTY:
            self._map()  # raises: the file is gone
        return views

    def _read_buckets(self) -> Views:
        """``_buckets``, or an empty file's once the file is gone."""
        if self._closed:
            raise IndexFileError(f"index file is closed: {self._path}")
        views = self._map_.views()
        return _EMPTY if views is None else views

    def _header_field(self, name: str) -> int:
        reader, pos = _HEADER_FIELDS[name]
        value: int = reader.unpack_from(self._map(), pos)[0]
        return value

    def _set_header(self, name: str, value: int) -> None:
        self._buckets()[0][name] = value
