"""Read-only access to a store directory's files, for tools that must not write a byte into it
(verify, inspect, the Spark pipeline): geometry, a whole-commitlog walk, queue entries, index headers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine.config import GEOMETRY_FILE, Geometry, resolve_geometry
from mqstore.engine.consumequeue.consume_queue import cq_file_size
from mqstore.engine.consumequeue.entry import CQ_DTYPE, CQ_ENTRY_SIZE, FILLER_SIZE, entry_holds_message, message_bytes
from mqstore.engine.consumequeue.store import DELETED_PREFIX
from mqstore.engine.keyindex.file_names import INDEX_FILE_NAME
from mqstore.engine.keyindex.index_file import IndexFile
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.mapped_file_queue import MappedFileQueue, infer_file_size
from mqstore.engine.log.record import Decoded, DecodeKind
from mqstore.engine.meta.metafile import BACKUP_SUFFIX
from mqstore.engine.repair.recovery import TORN_TAIL_LOOKAHEAD

Array = npt.NDArray[Any]


def read_geometry(store_dir: Path) -> Geometry:
    """The store's geometry, writing nothing: ``resolve_geometry`` only writes for a store that has
    neither a saved geometry nor commitlog files, and such a store gets the defaults here."""
    saved = store_dir / "config" / GEOMETRY_FILE
    has_saved = any(p.is_file() and p.stat().st_size > 0
                    for p in (saved, saved.with_name(GEOMETRY_FILE + BACKUP_SUFFIX)))
    if has_saved or infer_file_size(store_dir / "commitlog") is not None:
        return resolve_geometry(store_dir, None)
    return Geometry()


def scan_all(commitlog: CommitLog, *, require_prop_crc: bool = False,
             read_body: bool = False) -> Iterator[tuple[int, Decoded]]:
    """Every record and blank from the commitlog's min offset to the zeros that end its data, with
    CRCs checked. Unlike ``CommitLog.scan`` it goes on past a bad record: the record is yielded
    (CORRUPT or INCOMPLETE) and the scan resumes after it when its length is known, else at the next
    file. Non-zero bytes after the last record of the last file come out as one bad record."""
    queue = commitlog.queue
    phys, end = commitlog.min_offset, commitlog.max_offset
    while phys < end:
        stop: tuple[int, Decoded] | None = None
        for pos, decoded in commitlog.scan(phys, check_crc=True, read_body=read_body,
                                           require_prop_crc=require_prop_crc):
            if decoded.kind in (DecodeKind.RECORD, DecodeKind.BLANK):
                yield pos, decoded
            else:
                stop = (pos, decoded)
        if stop is None:
            return
        pos, decoded = stop
        mf = queue.find(pos)
        if mf is None or (mf is queue.files[-1] and _zeros_from(mf, pos - mf.file_base)):
            return
        yield pos, decoded
        skippable = decoded.kind is DecodeKind.CORRUPT and 0 < decoded.size <= mf.file_end - pos
        phys = pos + decoded.size if skippable else queue.roll_next(pos)


def _zeros_from(mf: MappedFile, pos: int) -> bool:
    """Whether only zeros follow ``pos``, looking one largest record ahead as recovery does: appends
    are contiguous and every cut zeroed what it dropped."""
    tail = mf.read(pos, min(mf.file_size - pos, TORN_TAIL_LOOKAHEAD))
    return tail.count(0) == len(tail)


def queue_ids(store_dir: Path) -> list[tuple[str, int]]:
    """(topic, queue id) of every ``consumequeue/{topic}/{queueId}`` directory, sorted."""
    root = store_dir / "consumequeue"
    if not root.is_dir():
        return []
    return sorted((topic_dir.name, int(queue_dir.name))
                  for topic_dir in root.iterdir()
                  if topic_dir.is_dir() and not topic_dir.name.startswith(DELETED_PREFIX)
                  for queue_dir in topic_dir.iterdir() if queue_dir.is_dir() and queue_dir.name.isdigit())


class QueueEntries:
    """One consume queue's files as read-only numpy maps (``np.memmap``: nothing to release)."""

    def __init__(self, topic: str, queue_id: int, entries_per_file: int, first_queue_offset: int,
                 files: list[Array]) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.entries_per_file = entries_per_file
        self.first_queue_offset = first_queue_offset  # of the first file's first entry
        self.files = files
        self.end_queue_offset = self._end_queue_offset()  # one past the last entry: RocketMQ's max offset
        self.min_queue_offset = self._min_queue_offset()

    @classmethod
    def open(cls, store_dir: Path, topic: str, queue_id: int, entries_per_file: int) -> QueueEntries:
        """Raises MappedFileError for files of the wrong size or not adjacent."""
        directory = store_dir / "consumequeue" / topic / str(queue_id)
        mapped = MappedFileQueue.open(directory, cq_file_size(entries_per_file), writable=False)
        bases, paths = [mf.file_base for mf in mapped.files], [mf.path for mf in mapped.files]
        mapped.close()  # it has checked sizes and adjacency; numpy maps the files on its own
        # Plain ndarray views of the maps: indexing one entry skips np.memmap's Python __getitem__.
        files: list[Array] = [np.memmap(p, dtype=CQ_DTYPE, mode="r").view(np.ndarray) for p in paths]
        return cls(topic, queue_id, entries_per_file, bases[0] // CQ_ENTRY_SIZE if bases else 0, files)

    def _end_queue_offset(self) -> int:
        for file_no in range(len(self.files) - 1, -1, -1):
            arr = self.files[file_no]
            written = np.flatnonzero((arr["phys_offset"] != 0) | (arr["size"] != 0) | (arr["tags_code"] != 0))
            if len(written):
                return self.first_queue_offset + file_no * self.entries_per_file + int(written[-1]) + 1
        return self.first_queue_offset

    def _min_queue_offset(self) -> int:
        """The first entry that is not a filler."""
        for file_no, arr in enumerate(self.files):
            real = np.flatnonzero(arr["size"] != FILLER_SIZE)
            if len(real):
                return min(self.first_queue_offset + file_no * self.entries_per_file + int(real[0]),
                           self.end_queue_offset)
        return self.end_queue_offset

    def message_bytes(self) -> int:
        """The bytes of the records its messages take in the commitlog, from its entries alone
        (``mqstore.engine.consumequeue.entry.message_bytes``)."""
        total = 0
        for file_no, arr in enumerate(self.files):
            base = self.first_queue_offset + file_no * self.entries_per_file
            total += message_bytes(arr[max(0, self.min_queue_offset - base):max(0, self.end_queue_offset - base)])
        return total

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(phys_offset, size, tags_code) of a valid, non-filler entry; None otherwise."""
        if not self.first_queue_offset <= queue_offset < self.end_queue_offset:
            return None
        file_no, k = divmod(queue_offset - self.first_queue_offset, self.entries_per_file)
        row = self.files[file_no][k]
        phys_offset, size, tags_code = int(row["phys_offset"]), int(row["size"]), int(row["tags_code"])
        if not entry_holds_message(phys_offset, size):
            return None
        return phys_offset, size, tags_code


def index_paths(store_dir: Path) -> list[Path]:
    """The ``yyyyMMddHHmmssSSS`` files of ``{store}/index``, oldest first."""
    index_dir = store_dir / "index"
    if not index_dir.is_dir():
        return []
    return sorted(p for p in index_dir.iterdir() if p.is_file() and INDEX_FILE_NAME.fullmatch(p.name))


@dataclass(frozen=True, slots=True)
class IndexHeader:
    path: Path
    begin_ms: int
    end_ms: int
    begin_phys_offset: int
    end_phys_offset: int
    slot_used_count: int
    index_count: int  # next entry number: entries 1 .. index_count - 1 are in use

    @classmethod
    def read(cls, path: Path, geometry: Geometry) -> IndexHeader:
        """Raises IndexFileError for a file of another geometry."""
        with IndexFile.open(path, geometry.index_slot_count, geometry.index_entry_count, writable=False) as f:
            return cls(path, f.begin_ms, f.end_ms, f.begin_phys_offset, f.end_phys_offset, f.slot_used_count,
                       min(f.index_count, geometry.index_entry_count))


