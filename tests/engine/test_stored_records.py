"""A query's answer as one object (as ``mqstore.engine.read.lookup.query_keys`` gives it; built here by the Python
it replaced, ``tests/oracle/lookup.py`` ``of_keys``): every key's records, oldest first, one key after
another, and how many each key has; ``split`` gives back each key's own, the same as building them key
by key."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.log.record import QUEUE_OFFSET_POS
from mqstore.engine.read.lookup import StoredRecords
from tests.oracle.lookup import of_keys


def stored(queue_offset: int, tail: int) -> bytes:
    return bytes(QUEUE_OFFSET_POS) + struct.pack(">q", queue_offset) + b"r" * tail


one_key = st.dictionaries(st.integers(0, 1 << 40), st.tuples(st.integers(0, 1 << 30), st.integers(0, 9)),
                          max_size=4)


@given(st.lists(one_key, max_size=6))
def test_the_keys_records_come_one_key_after_another_and_split_back(keys: list[dict[int, tuple[int, int]]]) -> None:
    found = [{phys: stored(*spec) for phys, spec in key.items()} for key in keys]
    joined, counts = of_keys(found)
    assert counts == [len(records) for records in found]
    each = [StoredRecords(b"".join(records[p] for p in sorted(records)),
                          [struct.unpack_from(">q", records[p], QUEUE_OFFSET_POS)[0] for p in sorted(records)],
                          sorted(records), [len(records[p]) for p in sorted(records)]) for records in found]
    assert joined.split(counts) == each
    assert joined.data == b"".join(one.data for one in each)
    assert joined.phys_offsets == [p for one in each for p in one.phys_offsets]
