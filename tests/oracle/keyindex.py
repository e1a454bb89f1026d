"""The index's code as engine/keyindex ran it before the kernels, kept as their oracle: the keys of many
records (``mqstore.engine._native.index_key_hashes``), a batch of puts into one file
(``mqstore.engine._native.index_put``)
the chain walks of a query (``mqstore.engine._native.index_select``, which replaced ``buckets.select``) and the
walk of the files for many keys, a page each, a file at a time (``select_pages``, which a probe round,
``mqstore.engine._native.index_probe``, replaced in ``mqstore.engine.keyindex.pages``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mqstore.engine.keyindex.index_file import IndexFile
from mqstore.engine.keyindex.keys import KEY_JOINER, index_key, record_keys
from mqstore.engine.keyindex.pages import IndexCursor, QueryPages, _resume
from tests.oracle.jhash import combine_hashes, java_hash, java_hashes, java_hashes_of_slices

Array = np.ndarray[Any, Any]
_INT_MAX = (1 << 31) - 1
_INT_MIN = -(1 << 31)
_MASK32 = 0xFFFFFFFF


def index_hash(full_key: str) -> int:
    h = java_hash(full_key)
    return 0 if h == _INT_MIN else abs(h)


def index_hashes(full_keys: Sequence[str]) -> list[int]:
    return [0 if h == _INT_MIN else abs(h) for h in java_hashes(full_keys)]


def _topic_hashes(topics: Sequence[str]) -> Array:
    return np.asarray(java_hashes(topics), np.int64) & _MASK32


def as_index_hashes(unsigned: Array) -> Array:
    """``index_hash`` from unsigned 32-bit Java hashes, as int64."""
    signed = np.where(unsigned >= (1 << 31), unsigned - (1 << 32), unsigned)
    return np.where(signed == _INT_MIN, 0, np.abs(signed)).astype(np.int64)


def joined_hashes(topic_hashes: Array, key_hashes: Array, key_lengths: Array) -> Array:
    """``index_hash`` of ``topic#key`` for each key, given the unsigned Java hashes of its topic and of
    the key itself, and the key's length in UTF-16 units: the hash of ``topic#`` joined to the key's."""
    prefix = combine_hashes(topic_hashes, np.full(len(topic_hashes), ord(KEY_JOINER), np.int64),
                            np.ones(len(topic_hashes), np.int64))
    return as_index_hashes(combine_hashes(prefix, key_hashes, key_lengths))


def record_key_hashes(topics: Sequence[str], topic_codes: Array, keys: Sequence[str],
                      uniq_keys: Sequence[str]) -> tuple[Array, Array]:
    """The index keys of many records, each given by its topic (an index into ``topics``), its KEYS
    (space separated) and its UNIQ_KEY ("" for none): ``key_rows`` (each key's record, ascending; a
    record's keys in ``record_keys`` order) and ``key_hashes``.

    All at once: the strings are joined into one text, cut at the spaces that separate keys (a
    UNIQ_KEY is one key, spaces and all), and each slice's Java hash is joined to its topic's. Text
    that is not ASCII goes key by key, because Java hashes UTF-16 units."""
    n = len(keys)
    items: list[str] = [""] * (2 * n)
    items[0::2] = uniq_keys
    items[1::2] = keys
    text = " ".join(items)
    if not text.isascii():
        return _record_key_hashes_exactly(topics, topic_codes, keys, uniq_keys)
    data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    spaces = np.flatnonzero(data == ord(" "))
    if len(spaces) == len(items) - 1:  # no key holds a space: the spaces are the separators
        starts = np.concatenate(([0], spaces + 1))
        ends = np.concatenate((spaces, [len(data)]))
        item_of = np.arange(len(items))
    else:
        lengths = np.fromiter(map(len, items), np.int64, len(items))
        item_ends = np.cumsum(lengths + 1) - 1  # the separator (or the text's end) after each item
        item_of_space = np.searchsorted(item_ends, spaces)
        # a space cuts between items, and inside KEYS; a UNIQ_KEY is one key, spaces and all
        cuts = spaces[(item_ends[item_of_space] == spaces) | (item_of_space % 2 == 1)]
        starts = np.concatenate(([0], cuts + 1))
        ends = np.concatenate((cuts, [len(data)]))
        item_of = np.searchsorted(item_ends, starts)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    key_rows = (item_of[keep] // 2).astype(np.int64)
    hashes = joined_hashes(_topic_hashes(topics)[np.asarray(topic_codes)[key_rows]],
                           java_hashes_of_slices(data, starts, ends), ends - starts)
    return key_rows, hashes


def _record_key_hashes_exactly(topics: Sequence[str], topic_codes: Array, keys: Sequence[str],
                               uniq_keys: Sequence[str]) -> tuple[Array, Array]:
    key_rows: list[int] = []
    full_keys: list[str] = []
    for row, (topic, keys_text, uniq) in enumerate(zip(np.asarray(topic_codes).tolist(), keys, uniq_keys,
                                                       strict=True)):
        names = record_keys(uniq, keys_text.split(" "))
        full_keys.extend(index_key(topics[topic], name) for name in names)
        key_rows.extend([row] * len(names))
    return np.asarray(key_rows, np.int64), np.asarray(index_hashes(full_keys), np.int64)


def time_diffs(store_ms: Array, begin_ms: Array) -> Array:
    """The timeDiff field of entries stored at ``store_ms`` in a file whose beginTimestamp is
    ``begin_ms``: whole seconds since it, clamped to [0, 2**31 - 1]; 0 while beginTimestamp <= 0."""
    # measured from the later of the two, so that no subtraction can wrap
    since = (np.maximum(store_ms, begin_ms) - begin_ms) // 1000
    return np.where(begin_ms > 0, np.minimum(since, _INT_MAX), 0)


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


def time_diff_s(store_ms: int, begin_ms: int) -> int:
    """``time_diffs`` of one entry."""
    return int(time_diffs(np.array([store_ms], np.int64), np.array([begin_ms], np.int64))[0])


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


def select_pages(files: Sequence[IndexFile], key_hashes: Sequence[int], wants: Sequence[int],
                 after: Sequence[IndexCursor | None], begin_ms: int, end_ms: int) -> QueryPages:
    """For each key hash, a page of up to ``wants[i]`` offsets from ``after[i]`` on (None: from the
    newest entry) in ``files`` (newest first) stored in [begin_ms, end_ms]; each file is probed for
    all the keys that walk it together (``IndexFile.select_page``).

    ``queryOffset``'s stops: files whose time range misses [begin_ms, end_ms] are passed over, and
    none older than a file that began before ``begin_ms`` is walked."""
    # each key's place: its file (the position in ``files``) and the entry it reads next there
    count = len(key_hashes)
    at = [0] * count
    from_nos = [0] * count
    for i, cursor in enumerate(after):
        if cursor is not None:
            at[i], from_nos[i] = _resume(files, cursor)
    found: list[list[int]] = [[] for _ in key_hashes]
    short = [i for i in range(count) if wants[i] > 0]
    for pos, index_file in enumerate(files):
        if not short:
            break
        live = [i for i in short if at[i] == pos]
        if live and index_file.is_time_matched(begin_ms, end_ms):
            pages, next_nos = index_file.select_page([key_hashes[i] for i in live],
                                                     [wants[i] - len(found[i]) for i in live],
                                                     [from_nos[i] for i in live], begin_ms, end_ms)
            for i, more, next_no in zip(live, pages, next_nos, strict=True):
                found[i] += more
                at[i], from_nos[i] = (pos, next_no) if next_no else (pos + 1, 0)
        else:
            for i in live:
                at[i], from_nos[i] = pos + 1, 0
        if index_file.begin_ms < begin_ms:  # every older file is older still
            at = [len(files) if file_pos > pos else file_pos for file_pos in at]
            break
        short = [i for i in short if len(found[i]) < wants[i]]  # what is left walks older files
    last_ms, last_phys_offset = (files[0].end_ms, files[0].end_phys_offset) if files else (0, 0)
    return QueryPages(found, [IndexCursor(files[file_pos].name, from_no) if file_pos < len(files) else None
                              for file_pos, from_no in zip(at, from_nos, strict=True)], last_ms, last_phys_offset)
