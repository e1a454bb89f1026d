"""A key query's walk of the index files, every key at once, as flat columns: RocketMQ's
``IndexService.queryOffset`` for many keys, a round at a time.

A round asks each key still short for up to ``wants[i]`` more offsets; each file, newest first, is
probed for all the keys placed in it in one kernel call (``IndexFile.probe``), which appends their
offsets, newest first, to the round's candidates with a key column, and moves each key's place on:
the entry to read next in that file, or the head of its chain in the next older one. Places are
positions in the files as the probe found them, so a walk over several rounds neither skips nor
repeats an entry, and it ends: chains only go down and files only get older. A query's pages
(``engine.keyindex.pages``) are a round each, its cursors turned into places and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.keyindex.index_file import IndexFile

Array = np.ndarray[Any, Any]


class KeyProbe:
    """Where each key of one query stands in the index files (newest first)."""

    __slots__ = ("_begin_ms", "_end_ms", "_files", "_from_nos", "_hashes", "_places")

    def __init__(self, files: Sequence[IndexFile], hashes: Array, begin_ms: int, end_ms: int,
                 places: Array | None = None, from_nos: Array | None = None) -> None:
        """Every key at the head of its chain in the newest file, or where ``places`` and ``from_nos``
        say (int64 columns the probe moves on in place)."""
        self._files = files
        self._hashes = hashes
        self._begin_ms = begin_ms
        self._end_ms = end_ms
        # each key's file, a position in ``files``, and the entry it reads next there (0: its slot)
        self._places = np.zeros(len(hashes), np.int64) if places is None else places
        self._from_nos = np.zeros(len(hashes), np.int64) if from_nos is None else from_nos

    def candidates(self, wants: Array) -> tuple[Array, Array]:
        """The next round: up to ``wants[i]`` offsets of key i whose hash matches, stored in [begin_ms,
        end_ms], newest first, from where its walk stopped; as two columns, each candidate's key and
        its offset, one key's in walk order. ``wants`` is used up in place."""
        total = int(wants.sum())
        cand_keys = np.empty(total, np.int64)
        cand_phys = np.empty(total, np.int64)
        count = 0
        file_count = len(self._files)
        for file_pos, index_file in enumerate(self._files if total else ()):
            count, wanting = index_file.probe(file_pos, file_count, self._begin_ms, self._end_ms, self._hashes, wants,
                                              self._places, self._from_nos, cand_keys, cand_phys, count)
            if not wanting:
                break
        return cand_keys[:count], cand_phys[:count]

    def places(self) -> tuple[list[int], list[int]]:
        """Each key's file (``len(files)``: its walk has ended) and the entry it reads next there."""
        places: list[int] = self._places.tolist()
        from_nos: list[int] = self._from_nos.tolist()
        return places, from_nos

    def walking(self) -> Array:
        """Which keys have entries left to walk (a bool column)."""
        result: Array = self._places < len(self._files)
        return result
