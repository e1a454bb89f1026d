"""A key query's candidates compared with their keys in their stored bytes (``engine.lookup.matching``,
one kernel call a file for every key's candidates) held to the Python comparison of one key it
replaced (``tests/oracle/lookup.py``), key by key: the same records found for any candidate offsets
(record starts, inside records, past the readable end, below the log's start, twice) over records of
both magics and host families whose KEYS and UNIQ_KEY hold the key, hold it as part of a word, or not
at all, and over bytes damaged anywhere (lengths that point past a record, negative ones)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.log.commitlog import CommitLog
from engine.log.host import Host
from engine.log.record import encode_record
from engine.lookup import matching
from tests.oracle import lookup as oracle

V4, V6 = Host("10.0.0.7", 4000), Host("2001:db8::1", 10911)
WORDS = ["k1", "k2", "k", "", "k1k1"]
FILE_SIZE = 4096

values = st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join)


@st.composite
def record_specs(draw: st.DrawFn) -> dict[str, object]:
    props = {}
    if draw(st.booleans()):
        props["KEYS"] = draw(values)
    if draw(st.booleans()):
        props["UNIQ_KEY"] = draw(st.sampled_from(WORDS))
    if draw(st.booleans()):
        props["xKEYS"] = draw(values)  # a name that ends like the one looked for
    return {"topic": draw(st.sampled_from(["T", "U", "t" * 130])), "body": b"b" * draw(st.integers(0, 40)),
            "properties": props, "born_host": draw(st.sampled_from([V4, V6])),
            "store_host": draw(st.sampled_from([V4, V6]))}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_specs(), min_size=1, max_size=25), st.lists(st.tuples(st.integers(0, 1 << 14),
                                                                             st.integers(1, 255)), max_size=3),
       st.data(), st.sampled_from(["T", "t" * 130, "U"]), st.booleans())
def test_candidates_hold_their_keys_as_the_python_comparison_says(specs: list[dict[str, object]],
                                                                  flips: list[tuple[int, int]], data: st.DataObject,
                                                                  topic: str, uniq: bool) -> None:
    with tempfile.TemporaryDirectory() as work:
        log = CommitLog.open(Path(work), FILE_SIZE)
        try:
            starts = []
            for spec in specs:
                record = encode_record(**spec)  # type: ignore[arg-type]
                starts += log.append(record, [len(record)], [0], 1_700_000_000_000)
            for at, value in flips:
                mf = log.queue.find(at % log.max_offset)
                if mf is not None:
                    mf.buffer[at % log.max_offset - mf.file_base] ^= value
            elsewhere = st.integers(-5, log.max_offset + 50)
            candidates = data.draw(st.lists(st.lists(st.sampled_from(starts) | elsewhere, max_size=6), max_size=4))
            keys = data.draw(st.lists(st.sampled_from(WORDS), min_size=len(candidates), max_size=len(candidates)))
            ends_of_records = [*starts[1:], log.max_offset]
            end = data.draw(st.sampled_from([log.max_offset, starts[len(starts) // 2] + 30,
                                             *(e - 1 for e in ends_of_records[-3:])]))
            got = matching(log, candidates, topic.encode(), [k.encode() for k in keys], uniq, end)
            assert got == [oracle.matching(log, c, topic.encode(), k.encode(), uniq, end)
                           for c, k in zip(candidates, keys, strict=True)]
        finally:
            log.close()
