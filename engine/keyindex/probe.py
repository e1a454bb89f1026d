"""A key query's walk of the index files, every key at once, as flat columns: RocketMQ's
``IndexService.queryOffset`` for many keys, a round at a time.

A round asks each key still short for up to ``wants[i]`` more offsets; each file, newest first, is
probed for all the keys placed in it in one kernel call (``IndexFile.probe``), which appends their
offsets, newest first, to the round's candidates with a key column, and moves each key's place on:
the entry to read next in that file, or the head of its chain in the next older one. Places are
positions in the files as the probe found them, so a walk over several rounds neither skips nor
repeats an entry, and it ends: chains only go down and files only get older. A query's pages
(``mqstore.engine.keyindex.pages``) are a round each, its cursors turned into places and back.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from mqstore.engine.keyindex.index_file import IndexFile


class KeyProbe:
    """Where each key of one query stands in the index files (newest first). Its columns are int64
    ``array``s: for the few keys of most queries far cheaper to set up than numpy's."""

    __slots__ = ("_begin_ms", "_end_ms", "_files", "_from_nos", "_hashes", "_places")

    def __init__(self, files: Sequence[IndexFile], hashes: array[int], begin_ms: int, end_ms: int,
                 places: array[int] | None = None, from_nos: array[int] | None = None) -> None:
        """Every key at the head of its chain in the newest file, or where ``places`` and ``from_nos``
        say (columns the probe moves on in place); ``hashes`` are Java's or the index's hashes of the
        keys' ``topic#key`` (``index_probe`` reads either as the index's)."""
        self._files = files
        self._hashes = hashes
        self._begin_ms = begin_ms
        self._end_ms = end_ms
        # each key's file, a position in ``files``, and the entry it reads next there (0: its slot)
        self._places = array("q", bytes(8 * len(hashes))) if places is None else places
        self._from_nos = array("q", bytes(8 * len(hashes))) if from_nos is None else from_nos

    @property
    def file_count(self) -> int:
        return len(self._files)

    @property
    def places(self) -> array[int]:
        """Each key's file (``file_count``: its walk has ended)."""
        return self._places

    @property
    def from_nos(self) -> array[int]:
        """The entry each key reads next in its file (0: the head of its chain)."""
        return self._from_nos

    def candidates(self, wants: array[int]) -> tuple[array[int], array[int], int]:
        """The next round: up to ``wants[i]`` offsets of key i whose hash matches, stored in [begin_ms,
        end_ms], newest first, from where its walk stopped; as two columns and their length, each
        candidate's key and its offset, one key's in walk order. ``wants`` is used up in place."""
        total = sum(wants)
        cand_keys = array("q", bytes(8 * total))
        cand_phys = array("q", bytes(8 * total))
        count = 0
        file_count = len(self._files)
        for file_pos, index_file in enumerate(self._files if total else ()):
            count, wanting = index_file.probe(file_pos, file_count, self._begin_ms, self._end_ms, self._hashes, wants,
                                              self._places, self._from_nos, cand_keys, cand_phys, count)
            if not wanting:
                break
        return cand_keys, cand_phys, count
