"""The buckets of an IndexFile: every put and every walk of a chain.

A bucket is a slot and the chain of entries it heads (``engine.keyindex.index_file`` has the byte
table). These functions work on numpy views of a file's header, slots and entries, and are the only
code that writes an entry or walks a chain.

``put`` is the one put (a compiled kernel): ``IndexFile.put_key`` is a batch of one, and a batch writes the bytes
``IndexFile.putKey`` writes key after key, in an order that a kill at any point leaves at worst
unreachable entries, never a slot pointing past indexCount or an endPhyOffset claiming a key that
is not reachable: the entries, then the header's begin (for a file's first entry) and counts, then
the slots, then the end offset and time. Within a batch, an entry's ``prevIndex`` is the previous
entry of the batch in the same slot, or else the slot's value before the batch (kept only when it
is a valid entry number at the moment that key would have been put, as ``putKey`` checks it).

``select`` is ``IndexFile.selectPhyOffset``'s walk, one step of every key's chain per numpy gather;
``select_one`` the same walk for one key, entry by entry, which for one key costs less than
numpy's set-up. Both have the same stops, start at the key's slot or at an entry where a walk
stopped before, and say which entry to read next (0 once the chain has ended), so a walk can be
paged. An entry's ``prevIndex`` is always an older entry: a chain that goes up (a corrupt cycle,
which the Java walk would follow forever) ends there, and every walk goes strictly down.
``has_entry`` asks whether one exact entry is reachable.

Every function drops its views on the way out, even by an exception: a traceback that held them
would keep the map exported, and its close would raise BufferError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine import _native

Array = np.ndarray[Any, Any]



def put(header: Array, slots: Array, entries: Array, key_hashes: Array, phys_offsets: Array,
        store_ms: Array) -> int:
    """Put as many keys as the file has room for, in order; returns how many went in (the rest
    belong in the next file). ``key_hashes`` are ``index_hash``es. One kernel call
    (``engine._native.index_put``): ValueError for a negative offset or a hash that is not an
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


def select_one(header: Array, slots: Array, entries: Array, key_hash: int, max_count: int, begin_ms: int,
               end_ms: int, from_no: int = 0) -> tuple[list[int], int]:
    """``select`` of one key, walked entry by entry: for one key the plain walk costs less than
    numpy's set-up (a query asks for one key at a time, or only one is left walking a file)."""
    try:
        phys_offsets: list[int] = []
        raw_count = int(header["index_count"][0])
        index_count = raw_count if raw_count > 0 else 1
        entry_no = from_no if from_no > 0 else int(slots[key_hash % len(slots)])
        if entry_no <= 0 or entry_no > index_count or index_count <= 1:
            return phys_offsets, 0
        file_begin_ms = int(header["begin_ms"][0])
        while len(phys_offsets) < max_count:
            if entry_no >= len(entries):
                return phys_offsets, 0
            hash_read, phys_offset, diff_s, prev_no = entries[entry_no].item()
            if diff_s < 0:
                return phys_offsets, 0
            time_read_ms = file_begin_ms + diff_s * 1000
            if hash_read == key_hash and begin_ms <= time_read_ms <= end_ms:
                phys_offsets.append(phys_offset)
            if prev_no <= 0 or prev_no > index_count or prev_no >= entry_no or time_read_ms < begin_ms:
                return phys_offsets, 0
            entry_no = prev_no
        return phys_offsets, entry_no
    finally:
        del header, slots, entries


def select(header: Array, slots: Array, entries: Array, key_hashes: Array, wants: Array, begin_ms: int,
           end_ms: int, from_nos: Array | None = None) -> tuple[list[list[int]], Array]:
    """For each key hash, the offsets of up to ``wants[i]`` entries with that hash stored in [begin_ms,
    end_ms], newest first, walking from entry ``from_nos[i]`` (0 or none given: the head of the key's
    slot); and for each, the entry to read next (0: the chain has ended). Keys are not compared (only
    hashes are stored): the caller filters collisions by reading the records."""
    try:
        found: list[list[int]] = [[] for _ in range(len(key_hashes))]
        next_nos = np.zeros(len(key_hashes), np.int64)
        index_count = int(header["index_count"][0])
        file_begin_ms = int(header["begin_ms"][0])
        if index_count <= 1 or len(key_hashes) == 0:
            return found, next_nos
        entry_count = len(entries)
        hashes = np.asarray(key_hashes, np.int64)
        left = np.asarray(wants, np.int64).copy()
        entry_no = slots[hashes % len(slots)].astype(np.int64)
        if from_nos is not None:
            entry_no = np.where(np.asarray(from_nos, np.int64) > 0, from_nos, entry_no)
        live = np.flatnonzero((entry_no > 0) & (entry_no <= index_count))
        while len(live):
            met = left[live] <= 0  # these stop before the entry they would read next
            next_nos[live[met]] = entry_no[live[met]]
            live = live[~met & (entry_no[live] < entry_count)]
            if len(live) == 0:
                break
            numbers = entry_no[live]
            step = entries[numbers]
            diff_s = step["time_diff_s"].astype(np.int64)
            live = live[diff_s >= 0]
            step, numbers = step[diff_s >= 0], numbers[diff_s >= 0]
            time_ms = file_begin_ms + step["time_diff_s"].astype(np.int64) * 1000
            hits = (step["key_hash"] == hashes[live]) & (time_ms >= begin_ms) & (time_ms <= end_ms)
            for key, phys_offset in zip(live[hits].tolist(), step["phys_offset"][hits].tolist(), strict=True):
                found[key].append(phys_offset)
            left[live[hits]] -= 1
            prev = step["prev_index"].astype(np.int64)
            go_on = (prev > 0) & (prev <= index_count) & (prev < numbers) & (time_ms >= begin_ms)
            live = live[go_on]
            entry_no[live] = prev[go_on]
        return found, next_nos
    finally:
        del header, slots, entries
