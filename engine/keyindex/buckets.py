"""Many IndexFile puts at once: the bytes ``IndexFile.put_key`` would write key by key, written with
numpy in the same crash-safe order (entries, then the header's counts, then slots, then the end
offsets), so a kill at any point leaves at worst unreachable entries. And many lookups at once
(``select_many``): ``IndexFile.select_phys_offsets``'s walk, one step of every key's chain per numpy
gather.

Within a batch, an entry's ``prevIndex`` is the previous entry of the batch in the same slot, or
else the slot's value before the batch (kept only when it is a valid entry number at the moment
that key would have been put, as ``putKey`` checks it).
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

INDEX_HEADER_SIZE = 40
_BEGIN_MS_POS = 0
_BEGIN_PHYS_POS = 16
_INT_MAX = (1 << 31) - 1
_HEADER = np.dtype([("begin_ms", ">i8"), ("end_ms", ">i8"), ("begin_phys", ">i8"), ("end_phys", ">i8"),
                    ("slot_used", ">i4"), ("index_count", ">i4")])
_ENTRY = np.dtype([("key_hash", ">i4"), ("phys_offset", ">i8"), ("time_diff_s", ">i4"), ("prev_index", ">i4")])


def time_diffs(store_ms: np.ndarray[Any, Any], begin_ms: int) -> np.ndarray[Any, Any]:
    if begin_ms <= 0:
        return np.zeros(len(store_ms), np.int64)
    return np.clip((store_ms - begin_ms) // 1000, 0, _INT_MAX)  # type: ignore[no-any-return]


def put_keys(mm: mmap.mmap, slot_count: int, entry_count: int, key_hashes: np.ndarray[Any, Any],
             phys_offsets: np.ndarray[Any, Any], store_ms: np.ndarray[Any, Any]) -> int:
    """Put as many keys as the file has room for, in order; returns how many went in."""
    header = np.frombuffer(mm, dtype=_HEADER, count=1)
    slots_view = np.frombuffer(mm, dtype=">i4", count=slot_count, offset=INDEX_HEADER_SIZE)
    entries = np.frombuffer(mm, dtype=_ENTRY, count=entry_count, offset=INDEX_HEADER_SIZE + slot_count * 4)
    try:
        raw_count = int(header["index_count"][0])
        start = raw_count if raw_count > 0 else 1
        n = min(len(key_hashes), entry_count - start)
        if n <= 0:
            return 0
        hashes, phys, times = key_hashes[:n], phys_offsets[:n], store_ms[:n]
        numbers = start + np.arange(n, dtype=np.int64)
        slots = hashes % slot_count
        order = np.argsort(slots, kind="stable")
        sorted_slots = slots[order]
        first_in_slot = np.ones(n, bool)
        first_in_slot[1:] = sorted_slots[1:] != sorted_slots[:-1]
        prev = np.empty(n, np.int64)
        prev[order[1:]] = numbers[order[:-1]]
        old = slots_view[slots].astype(np.int64)
        firsts = order[first_in_slot]
        valid = (old[firsts] > 0) & (old[firsts] <= numbers[firsts])
        prev[firsts] = np.where(valid, old[firsts], 0)
        begin_ms = int(header["begin_ms"][0])
        diffs = np.empty(n, np.int64)
        if start <= 1:  # the file's first entry measures from the seed, then becomes the begin
            diffs[:1] = time_diffs(times[:1], begin_ms)
            begin_ms = int(times[0])
            diffs[1:] = time_diffs(times[1:], begin_ms)
        else:
            diffs[:] = time_diffs(times, begin_ms)
        block = entries[start:start + n]
        block["key_hash"] = hashes
        block["phys_offset"] = phys
        block["time_diff_s"] = diffs
        block["prev_index"] = prev
        if start <= 1:
            header["begin_phys"] = phys[0]
            header["begin_ms"] = times[0]
        header["index_count"] = start + n
        header["slot_used"] = int(header["slot_used"][0]) + int(np.count_nonzero(prev == 0))
        last_in_slot = np.ones(n, bool)
        last_in_slot[:-1] = sorted_slots[1:] != sorted_slots[:-1]
        slots_view[sorted_slots[last_in_slot]] = numbers[order[last_in_slot]]
        header["end_phys"] = phys[n - 1]
        header["end_ms"] = times[n - 1]
        return n
    finally:
        del header, slots_view, entries


def select_many(mm: mmap.mmap, slot_count: int, entry_count: int, key_hashes: np.ndarray[Any, Any],
                wants: np.ndarray[Any, Any], begin_ms: int, end_ms: int) -> list[list[int]]:
    """For each key hash, the offsets of up to ``wants[i]`` entries with that hash stored in [begin_ms,
    end_ms], newest first: the walk of ``IndexFile.select_phys_offsets`` (same stops, same bound on
    a corrupt cycle), taken for all keys together."""
    found: list[list[int]] = [[] for _ in range(len(key_hashes))]
    header = np.frombuffer(mm, dtype=_HEADER, count=1)
    slots_view = np.frombuffer(mm, dtype=">i4", count=slot_count, offset=INDEX_HEADER_SIZE)
    entries = np.frombuffer(mm, dtype=_ENTRY, count=entry_count, offset=INDEX_HEADER_SIZE + slot_count * 4)
    try:
        index_count = int(header["index_count"][0])
        file_begin_ms = int(header["begin_ms"][0])
        if index_count <= 1 or len(key_hashes) == 0:
            return found
        hashes = np.asarray(key_hashes, np.int64)
        left = np.asarray(wants, np.int64).copy()
        entry_no = slots_view[hashes % slot_count].astype(np.int64)
        live = np.flatnonzero((entry_no > 0) & (entry_no <= index_count) & (left > 0))
        for _ in range(index_count):
            live = live[(left[live] > 0) & (entry_no[live] < entry_count)]
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
            go_on = (prev > 0) & (prev <= index_count) & (prev != numbers) & (time_ms >= begin_ms)
            live = live[go_on]
            entry_no[live] = prev[go_on]
        return found
    finally:
        del header, slots_view, entries
