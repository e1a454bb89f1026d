"""A query over the index files, a page at a time: RocketMQ's ``IndexService.queryOffset``, paged.

The files are walked newest first and each key's chain newest entry first (``mqstore.engine.keyindex.probe``),
up to a count of entries whose hash matches. Only hashes are stored, so colliding keys take places
in a page; a caller still short after comparing the records' keys asks for the next page, which
goes on where this one stopped (``IndexCursor``). Pages are cut by position in the chains, not by
time as RocketMQ's ``queryMessage`` retries are, so no entry is skipped or visited twice, and a walk
ends: chains only go down (``mqstore.engine.keyindex.buckets``) and files only get older.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from mqstore.engine.keyindex.index_file import IndexFile
from mqstore.engine.keyindex.probe import KeyProbe


@dataclass(frozen=True, slots=True)
class IndexCursor:
    """Where a walk of one key's chains stopped: the file (by name, which survives files created or
    deleted meanwhile) and the entry to read next in it (0: the head of the key's slot)."""

    file_name: str
    entry_no: int


@dataclass(frozen=True, slots=True)
class QueryOffsetResult:
    """Offsets found for a key, newest first, plus how far the index had got when asked, and where
    the next page starts (``after``): None once every entry in range was walked."""

    phys_offsets: list[int]
    index_last_update_ms: int
    index_last_update_phys_offset: int
    next_page: IndexCursor | None = None


@dataclass(frozen=True, slots=True)
class QueryPages:
    """``QueryOffsetResult`` of many keys, in their order, as columns: one object a query, not one a key."""

    phys_offsets: list[list[int]]
    next_pages: list[IndexCursor | None]
    index_last_update_ms: int
    index_last_update_phys_offset: int

    def page(self, i: int) -> QueryOffsetResult:
        """Key ``i``'s page."""
        return QueryOffsetResult(self.phys_offsets[i], self.index_last_update_ms, self.index_last_update_phys_offset,
                                 self.next_pages[i])


def select_pages(files: Sequence[IndexFile], key_hashes: Sequence[int], wants: Sequence[int],
                 after: Sequence[IndexCursor | None], begin_ms: int, end_ms: int) -> QueryPages:
    """For each key hash, a page of up to ``wants[i]`` offsets from ``after[i]`` on (None: from the
    newest entry) in ``files`` (newest first) stored in [begin_ms, end_ms]: a round of a probe
    (``mqstore.engine.keyindex.probe``, one kernel call a file for all the keys), its places turned into
    cursors. ``queryOffset``'s stops: files whose time range misses [begin_ms, end_ms] are passed
    over, and none older than a file that began before ``begin_ms`` is walked."""
    count = len(key_hashes)
    places = array("q", bytes(8 * count))
    from_nos = array("q", bytes(8 * count))
    for i, cursor in enumerate(after):
        if cursor is not None:
            places[i], from_nos[i] = _resume(files, cursor)
    probe = KeyProbe(files, array("q", key_hashes), begin_ms, end_ms, places, from_nos)
    cand_keys, cand_phys, found_count = probe.candidates(array("q", [max(want, 0) for want in wants]))
    found: list[list[int]] = [[] for _ in key_hashes]
    for key, phys_offset in zip(cand_keys[:found_count], cand_phys[:found_count], strict=True):
        found[key].append(phys_offset)
    last_ms, last_phys_offset = (files[0].end_ms, files[0].end_phys_offset) if files else (0, 0)
    return QueryPages(found, [IndexCursor(files[place].name, from_no) if place < len(files) else None
                              for place, from_no in zip(places, from_nos, strict=True)], last_ms, last_phys_offset)


def _resume(files: Sequence[IndexFile], cursor: IndexCursor) -> tuple[int, int]:
    """Where ``cursor`` points in ``files`` (newest first): its file and entry, or the head of the next
    older file when retention deleted its own; ``len(files)`` when none is left."""
    for pos, index_file in enumerate(files):
        if index_file.name == cursor.file_name:
            return pos, cursor.entry_no
        if index_file.name < cursor.file_name:
            return pos, 0
    return len(files), 0
