"""The buckets of an IndexFile: every put and every walk of a chain.

A bucket is a slot and the chain of entries it heads (``engine.keyindex.index_file`` has the byte
table). These functions work on numpy views of a file's header, slots and entries, and are the only
code that writes an entry or walks a chain.

``put`` is the one put: ``IndexFile.put_key`` is a batch of one, and a batch writes the bytes
``IndexFile.putKey`` writes key after key, in an order that a kill at any point leaves at worst
unreachable entries, never a slot pointing past indexCount or an endPhyOffset claiming a key that
is not reachable: the entries, then the header's begin (for a file's first entry) and counts, then
the slots, then the end offset and time. Within a batch, an entry's ``prevIndex`` is the previous
entry of the batch in the same slot, or else the slot's value before the batch (kept only when it
is a valid entry number at the moment that key would have been put, as ``putKey`` checks it).

``select`` is ``IndexFile.selectPhyOffset``'s walk of every key's chain in one kernel call
(``engine._native.index_select``; the numpy walk it replaced is the oracle in
``tests/oracle/keyindex.py``). A walk starts at the key's slot or at an entry where a walk stopped
before, and says which entry to read next (0 once the chain has ended), so a walk can be paged.
An entry's ``prevIndex`` is always an older entry: a chain that goes up (a corrupt cycle,
which the Java walk would follow forever) ends there, and every walk goes strictly down.
``has_entry`` asks whether one exact entry is reachable.

Every function drops its views on the way out, even by an exception: a traceback that held them
would keep the map exported, and its close would raise BufferError.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _native

Array = np.ndarray[Any, Any]

_INT_MAX = (1 << 31) - 1


def time_diffs(store_ms: Array, begin_ms: Array) -> Array:
    """The timeDiff field of entries stored at ``store_ms`` in a file whose beginTimestamp is
    ``begin_ms``: whole seconds since it, clamped to [0, 2**31 - 1]; 0 while beginTimestamp <= 0."""
    # measured from the later of the two, so that no subtraction can wrap
    since = (np.maximum(store_ms, begin_ms) - begin_ms) // 1000
    return np.where(begin_ms > 0, np.minimum(since, _INT_MAX), 0)


def time_diff_s(store_ms: int, begin_ms: int) -> int:
    """``time_diffs`` of one entry."""
    return int(time_diffs(np.array([store_ms], np.int64), np.array([begin_ms], np.int64))[0])


def put(header: Array, slots: Array, entries: Array, key_hashes: Array, phys_offsets: Array,
        store_ms: Array) -> int:
    """Put as many keys as the file has room for, in order; returns how many went in (the rest
    belong in the next file). ``key_hashes`` are ``index_hash``es."""
    try:
        if len(phys_offsets) and int(np.min(phys_offsets)) < 0:
            raise ValueError(f"phys_offset out of range: {int(np.min(phys_offsets))}")
        raw_count = int(header["index_count"][0])
        start = raw_count if raw_count > 0 else 1  # IndexHeader.load() reads a count <= 0 as 1
        n = min(len(key_hashes), len(entries) - start)
        if n <= 0:
            return 0
        hashes, phys, times = key_hashes[:n], phys_offsets[:n], store_ms[:n]
        numbers = np.arange(start, start + n, dtype=np.int64)
        slot_of = hashes % len(slots)
        order = np.argsort(slot_of, kind="stable")
        sorted_slots = slot_of[order]
        bounds = np.ones(n + 1, bool)  # bounds[i]: sorted entry i starts a slot's run; bounds[i + 1]: i ends it
        np.not_equal(sorted_slots[1:], sorted_slots[:-1], out=bounds[1:n])
        prev = np.empty(n, np.int64)
        prev[order[1:]] = numbers[order[:-1]]
        firsts = order[bounds[:n]]
        old = slots[slot_of[firsts]].astype(np.int64)
        prev[firsts] = np.where((old > 0) & (old <= numbers[firsts]), old, 0)
        begin_ms = np.full(n, int(header["begin_ms"][0]), np.int64)
        if start <= 1:  # the file's first entry measures from the seed, then becomes the begin
            begin_ms[1:] = times[0]
        block: Array = np.empty(n, entries.dtype)
        block["key_hash"] = hashes
        block["phys_offset"] = phys
        block["time_diff_s"] = time_diffs(times, begin_ms)
        block["prev_index"] = prev
        entries[start:start + n] = block
        if start <= 1:
            header["begin_phys"] = phys[0]
            header["begin_ms"] = times[0]
        header["index_count"] = start + n
        header["slot_used"] = int(header["slot_used"][0]) + int(np.count_nonzero(prev == 0))
        last = bounds[1:]
        slots[sorted_slots[last]] = numbers[order[last]]
        header["end_phys"] = phys[n - 1]
        header["end_ms"] = times[n - 1]
        return n
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
    (``engine._native.index_select``) walks every key's chain."""
    try:
        keys = array("q", key_hashes)  # int64s: for a page of a few keys cheaper than numpy's set-up
        keys.extend(max(want, 0) for want in wants)
        keys.extend([0] * len(key_hashes) if from_nos is None else from_nos)
        return _native.index_select(header, slots, entries, keys, begin_ms, end_ms)
    finally:
        del header, slots, entries
