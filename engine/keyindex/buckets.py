"""The buckets of an IndexFile: every put and every walk of a chain.

A bucket is a slot and the chain of entries it heads (``mqstore.engine.keyindex.index_file`` has the byte
table). These functions work on numpy views of a file's header, slots and entries, and are the only
code that writes an entry or walks a chain.

``put`` is the one put (a compiled kernel): ``IndexFile.put_key`` is a batch of one, and a batch writes the bytes
``IndexFile.putKey`` writes key after key, in an order that a kill at any point leaves at worst
unreachable entries, never a slot pointing past indexCount or an endPhyOffset claiming a key that
is not reachable: the entries, then the header's begin (for a file's first entry) and counts, then
the slots, then the end offset and time. Within a batch, an entry's ``prevIndex`` is the previous
entry of the batch in the same slot, or else the slot's value before the batch (kept only when it
is a valid entry number at the moment that key would have been put, as ``putKey`` checks it).

``select`` is ``IndexFile.selectPhyOffset``'s walk of every key's chain in one kernel call
(``mqstore.engine._native.index_select``; the numpy walk it replaced is the oracle in
``tests/oracle/keyindex.py``). A walk starts at the key's slot or at an entry where a walk stopped
before, and says which entry to read next (0 once the chain has ended), so a walk can be paged.
An entry's ``prevIndex`` is always an older entry: a chain that goes up (a corrupt cycle,
which the Java walk would follow forever) ends there, and every walk goes strictly down.
``probe`` is the same walk for a key query, every key placed in this file at once, its offsets
appended to flat candidate columns (``mqstore.engine._native.index_probe``; ``mqstore.engine.keyindex.probe``).
``has_entry`` asks whether one exact entry is reachable.

Every function drops its views on the way out, even by an exception: a traceback that held them
would keep the map exported, and its close would raise BufferError.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from mqstore.engine import _native

Array = np.ndarray[Any, Any]



def put(header: Array, slots: Array, entries: Array, key_hashes: Array, phys_offsets: Array,
        store_ms: Array) -> int:
    """Put as many keys as the file has room for, in order; returns how many went in (the rest
    belong in the next file). ``key_hashes`` are ``index_hash``es. One kernel call
    (``mqstore.engine._native.index_put``): ValueError for a negative offset or a hash that is not an
    ``index_hash``, before anything is written."""
    try:
        return _native.index_put(header, slots, entries, np.ascontiguousarray(key_hashes, np.int64),
                                 np.ascontiguousarray(phys_offsets, np.int64), np.ascontiguousarray(store_ms, np.int64))
    finally:
        del header, slots, entries


def has_entry(header: Array, slots: Array, entries: Array, key_hash: int, phys_offset: int) -> bool:
    """Whether an entry with this key hash and exactly this offset is reachable (what re-dispatch of
    the newest indexed record checks). Entry offsets never decrease with the entry number, so the
    walk stops at the first older offset."""
    try:
        raw_count = int(header["index_count"][0])
        index_count = raw_count if raw_count > 0 else 1
        entry_no = int(slots[key_hash % len(slots)])
        if entry_no <= 0 or entry_no > index_count or index_count <= 1:
            return False
        for _ in range(index_count):
            if entry_no >= len(entries):
                break
            hash_read, phys_read, _diff_s, prev_no = entries[entry_no].item()
            if phys_read < phys_offset:
                break
            if hash_read == key_hash and phys_read == phys_offset:
                return True
            if prev_no <= 0 or prev_no >= entry_no:
                break
            entry_no = prev_no
        return False
    finally:
        del header, slots, entries


def select(header: Array, slots: Array, entries: Array, key_hashes: Sequence[int] | Array,
           wants: Sequence[int] | Array, begin_ms: int, end_ms: int,
           from_nos: Sequence[int] | Array | None = None) -> tuple[list[list[int]], list[int]]:
    """For each key hash, the offsets of up to ``wants[i]`` entries with that hash stored in [begin_ms,
    end_ms], newest first, walking from entry ``from_nos[i]`` (0 or none given: the head of the key's
    slot); and for each, the entry to read next (0: the chain has ended). Keys are not compared (only
    hashes are stored): the caller filters collisions by reading the records. One kernel call
    (``mqstore.engine._native.index_select``) walks every key's chain."""
    try:
        keys = array("q", key_hashes)  # int64s: for a page of a few keys cheaper than numpy's set-up
        keys.extend(max(want, 0) for want in wants)
        keys.extend([0] * len(key_hashes) if from_nos is None else from_nos)
        return _native.index_select(header, slots, entries, keys, begin_ms, end_ms)
    finally:
        del header, slots, entries


def probe(header: Array, slots: Array, entries: Array, file_pos: int, file_count: int, walk: bool, stop: bool,
          begin_ms: int, end_ms: int, hashes: Any, wants: Any, places: Any, from_nos: Any, cand_keys: Any,
          cand_phys: Any, count: int) -> tuple[int, int]:
    """``select``'s walk for every key of a query placed in this file (``places[i] == file_pos``, file
    ``file_pos`` of ``file_count``, newest first) and still wanting offsets, in one kernel call
    (``mqstore.engine._native.index_probe``, whose docstring is the contract): their offsets appended at row
    ``count`` of the candidate columns, the keys' wants and places moved on in place; returns the new
    count and how many keys still want offsets (0 once no older file is to be walked)."""
    try:
        return _native.index_probe(header, slots, entries, file_pos, file_count, walk, stop, begin_ms, end_ms, hashes,
                                   wants, places, from_nos, cand_keys, cand_phys, count)
    finally:
        del header, slots, entries
