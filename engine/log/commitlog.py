"""The CommitLog: every record of every topic, appended in one sequence of mapped files.

A record never straddles two files: when the next record (plus the 8-byte blank header) does not fit
the rest of a file, a blank record fills the tail and the record goes to the next file. A batch is
split at record boundaries, one append per file it touches.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.engine import _native
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.mapped_file_queue import MappedFileQueue
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.log.record import (
    END_FILE_MIN_BLANK_SIZE,
    Decoded,
    DecodeKind,
    decode_record,
    encode_blank,
    patch_record,
    seal_record,
    store_ms_pos,
)
from mqstore.engine.meta.metafile import DirectorySync, make_dirs

DEFAULT_COMMITLOG_FILE_SIZE = 1024 * 1024 * 1024


class RecordTooLargeError(MqstoreError, ValueError):
    """A record cannot fit even an empty commitlog file."""


class CommitLog:
    def __init__(self, queue: MappedFileQueue) -> None:
        self.queue = queue

    @classmethod
    def open(cls, directory: Path | str, file_size: int = DEFAULT_COMMITLOG_FILE_SIZE, *,
             writable: bool = True, open_files: OpenFiles | None = None) -> CommitLog:
        if writable:
            make_dirs(directory)  # its name durable before any file in it is counted flushed
        queue = MappedFileQueue.open(directory, file_size, writable=writable, open_files=open_files)
        if writable:
            queue.dir_sync = DirectorySync(queue.directory.parent)
        return cls(queue)

    def close(self) -> None:
        self.queue.close()

    @property
    def file_size(self) -> int:
        return self.queue.file_size

    @property
    def min_offset(self) -> int:
        return max(self.queue.min_offset, 0)

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def flushed_where(self) -> int:
        return self.queue.flushed_where

    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    # -- append ------------------------------------------------------------------------------------

    def append(self, batch: bytearray, sizes: Sequence[int], queue_offsets: Sequence[int], store_ms: int,
               *, sealed: bool = False, appended: list[int] | None = None) -> list[int]:
        """Append the encoded records in ``batch`` (``sizes`` gives each record's length), stamping
        each with its queue offset, its phys offset and ``store_ms``; ``sealed`` records also get
        their whole-record CRC. Returns each record's phys offset. ``batch`` is modified in place.

        Records reach ``appended`` (when given) file by file, so a caller still knows what was
        written when creating the next file fails (ENOSPC) part way through a batch."""
        phys_offsets: list[int] = [] if appended is None else appended
        view = memoryview(batch)
        try:
            index, batch_pos = 0, 0
            while index < len(sizes):
                mf = self.queue.last_file_for_append(0)
                count = _fit(sizes, index, mf.free_bytes)
                if count == 0:
                    if sizes[index] + END_FILE_MIN_BLANK_SIZE > self.file_size:
                        raise RecordTooLargeError(
                            f"record of {sizes[index]} bytes cannot fit a {self.file_size}-byte commitlog file")
                    mf.append_blank_tail(encode_blank(mf.free_bytes))
                    continue
                phys_base = mf.file_base + mf.written_pos
                pos = batch_pos
                chunk_offsets = []
                for k in range(index, index + count):
                    patch_record(view, pos, queue_offset=queue_offsets[k], phys_offset=phys_base + pos - batch_pos,
                                 store_ms=store_ms)
                    if sealed:
                        seal_record(view, pos, sizes[k])
                    chunk_offsets.append(phys_base + pos - batch_pos)
                    pos += sizes[k]
                mf.append(view[batch_pos:pos])
                phys_offsets.extend(chunk_offsets)
                index += count
                batch_pos = pos
        finally:
            view.release()
        return phys_offsets

    def append_checked(self, records: bytes | memoryview, batch_starts: np.ndarray[Any, Any],
                       sizes: np.ndarray[Any, Any], batch_store_ms_pos: np.ndarray[Any, Any],
                       queue_ids: np.ndarray[Any, Any], queue_offsets: np.ndarray[Any, Any], store_ms: int, *,
                       sealed: bool, appended: list[np.ndarray[Any, Any]]) -> None:
        """Append a producer-encoded batch (checked by ``mqstore.engine.batch.record_batch``: each record's
        start in ``records``, size and store time position): one slice copy per file, then its fields
        stamped and its records sealed over the mapped bytes in one compiled loop. The phys offsets of
        each file's records reach ``appended`` as one int64 array once they are written, as
        ``append``'s reach its list."""
        sizes = sizes.astype(np.int64)
        n = len(sizes)
        total = int(batch_starts[-1] + sizes[-1]) if n else 0
        index = 0
        while index < n:
            mf = self.queue.last_file_for_append(0)
            done = int(batch_starts[index])
            if total - done + END_FILE_MIN_BLANK_SIZE <= mf.free_bytes:
                count = n - index  # the rest fits: the common case, without a search
            else:
                ends = batch_starts[index:] + sizes[index:] - done
                count = int(np.searchsorted(ends + END_FILE_MIN_BLANK_SIZE, mf.free_bytes, side="right"))
            if count == 0:
                if int(sizes[index]) + END_FILE_MIN_BLANK_SIZE > self.file_size:
                    raise RecordTooLargeError(
                        f"record of {int(sizes[index])} bytes cannot fit a {self.file_size}-byte commitlog file")
                mf.append_blank_tail(encode_blank(mf.free_bytes))
                continue
            chunk = slice(index, index + count)
            file_pos = mf.written_pos
            end = int(batch_starts[index + count - 1] + sizes[index + count - 1])
            with memoryview(records) as view:
                mf.buffer[file_pos:file_pos + end - done] = view[done:end]
            starts = batch_starts[chunk] - done + file_pos
            phys = starts + mf.file_base
            stamp_batch(mf.buffer, starts, sizes[chunk], batch_store_ms_pos[chunk], queue_ids[chunk],
                        queue_offsets[chunk], phys, store_ms, sealed)
            mf.written_pos = mf.committed_pos = file_pos + end - done
            appended.append(phys)
            index += count

    # -- read --------------------------------------------------------------------------------------

    def size_at(self, phys_offset: int) -> int:
        """The TOTALSIZE field of the record at ``phys_offset`` (-1 when outside the log)."""
        mf = self.file_for(phys_offset)
        if mf is None:
            return -1
        pos = phys_offset - mf.file_base
        (size,) = struct.unpack_from(">i", mf.buffer, pos)
        return int(size)

    def read_record(self, phys_offset: int, *, check_crc: bool = True, read_body: bool = True) -> Decoded:
        mf = self.file_for(phys_offset)
        if mf is None:
            return Decoded(DecodeKind.CORRUPT, reason=f"phys offset {phys_offset} outside the commitlog")
        pos = phys_offset - mf.file_base
        limit = mf.written_pos
        decoded = decode_record(mf.buffer, pos, check_crc=check_crc, read_body=read_body)
        if decoded.kind is DecodeKind.RECORD and pos + decoded.size > limit:
            return Decoded(DecodeKind.INCOMPLETE, reason="record passes the written position")
        return decoded

    def read_bytes(self, phys_offset: int, size: int) -> bytes | None:
        mf = self.file_for(phys_offset)
        if mf is None or phys_offset + size > mf.file_base + mf.written_pos:
            return None
        return mf.read(phys_offset - mf.file_base, size)

    def store_ms_at(self, phys_offset: int) -> int:
        """Store timestamp of the record at ``phys_offset`` (-1 when it is not there)."""
        mf = self.file_for(phys_offset)
        if mf is None or phys_offset < self.min_offset or phys_offset >= mf.file_base + mf.written_pos:
            return -1
        pos = phys_offset - mf.file_base
        (sys_flag,) = struct.unpack_from(">i", mf.buffer, pos + 36)
        (store_ms,) = struct.unpack_from(">q", mf.buffer, pos + store_ms_pos(sys_flag))
        return int(store_ms)

    def scan(self, from_phys: int, to_phys: int | None = None, *, check_crc: bool = True, read_body: bool = True,
             require_prop_crc: bool = False) -> Iterator[tuple[int, Decoded]]:
        """Decode records from ``from_phys`` up to ``to_phys`` (default: the written end). Blanks are
        yielded and skipped to the next file; the scan ends at the first incomplete or corrupt record,
        which is yielded last."""
        end = self.max_offset if to_phys is None else to_phys
        phys = max(from_phys, self.min_offset)
        while phys < end:
            mf = self.file_for(phys)
            if mf is None:
                return
            pos = phys - mf.file_base
            decoded = decode_record(mf.buffer, pos, check_crc=check_crc, read_body=read_body,
                                    require_prop_crc=require_prop_crc)
            yield phys, decoded
            if decoded.kind is DecodeKind.RECORD:
                phys += decoded.size
            elif decoded.kind is DecodeKind.BLANK:
                phys = self.queue.roll_next(phys)
            else:
                return

    def file_for(self, phys_offset: int) -> MappedFile | None:
        """The file holding ``phys_offset``; None when no file does."""
        if phys_offset < 0:
            return None
        return self.queue.find(phys_offset)


def _fit(sizes: Sequence[int], start: int, free_bytes: int) -> int:
    """How many records from ``start`` fit in ``free_bytes`` while leaving room for a blank header."""
    total = 0
    count = 0
    for size in sizes[start:]:
        if total + size + END_FILE_MIN_BLANK_SIZE > free_bytes:
            break
        total += size
        count += 1
    return count


def stamp_batch(buf: Any, starts: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any],
                store_ms_pos: np.ndarray[Any, Any], queue_ids: np.ndarray[Any, Any],
                queue_offsets: np.ndarray[Any, Any], phys_offsets: np.ndarray[Any, Any], store_ms: int,
                sealed: bool) -> None:
    """Stamp queue id, queue offset, phys offset and store time into records already copied to ``buf``
    (a mapped file's bytes; ``starts`` are positions in it), then their whole-record CRCs: one
    compiled loop (``_native.stamp_batch``) over the columns as int64 arrays. ValueError when a
    record leaves ``buf``."""
    starts, sizes, store_ms_pos, queue_ids, queue_offsets, phys_offsets = (
        np.ascontiguousarray(column, np.int64)
        for column in (starts, sizes, store_ms_pos, queue_ids, queue_offsets, phys_offsets))
    _native.stamp_batch(buf, starts, sizes, store_ms_pos, queue_ids, queue_offsets, phys_offsets, store_ms, sealed)
