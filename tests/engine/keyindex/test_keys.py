"""The index's keys hash as Java hashes ``topic#key``, one key at a time or many at once: the record
path's strings, a DispatchBatch's joined text (spaces, empty strings, text outside ASCII, keys past
the power table) and the rows of DispatchColumns all give ``index_hash`` of the same strings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine.batch.dispatch import DispatchBatch, DispatchRequest
from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.java.jhash import java_hash
from mqstore.engine.keyindex.keys import index_hash, index_hashes, index_key, key_hashes, record_keys
from tests.oracle.keyindex import joined_hashes

settings_ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_vectorised_hashes_are_the_index_hash() -> None:
    keys = ["Orders#k1", "", "a", "Topic#" + "x" * 300, "é#1", "polygenelubricants"]
    assert index_hashes(keys) == [index_hash(k) for k in keys]


def test_many_ascii_keys_hash_with_numpy_as_one_by_one() -> None:
    """Enough ASCII keys for the numpy path, Integer.MIN_VALUE's key ("polygenelubricants") among them."""
    keys = [f"Orders#key-{i}" for i in range(40)] + ["polygenelubricants", "", "Topic#" + "x" * 300]
    assert java_hash("polygenelubricants") == -(1 << 31) and index_hash("polygenelubricants") == 0
    assert index_hashes(keys) == [index_hash(k) for k in keys]
    assert key_hashes("Orders", [f"k{i}" for i in range(40)]).tolist() == [index_hash(f"Orders#k{i}")
                                                                            for i in range(40)]


def test_a_record_is_indexed_under_its_uniq_key_then_its_keys() -> None:
    assert record_keys("U1", ["k1", "", "k2"]) == ["U1", "k1", "k2"]
    assert record_keys(None, ("k1",)) == record_keys("", ["", "k1"]) == ["k1"]
    assert index_key("T", "k1") == "T#k1"


@given(parts=st.lists(st.tuples(st.text(st.characters(max_codepoint=0x7F), max_size=12),
                                st.text(st.characters(max_codepoint=0x7F), max_size=40)), max_size=30))
def test_joined_hashes_are_the_index_hash_of_topic_and_key(parts: list[tuple[str, str]]) -> None:
    topics = np.array([java_hash(t) & 0xFFFFFFFF for t, _ in parts], np.int64)
    keys = np.array([java_hash(k) & 0xFFFFFFFF for _, k in parts], np.int64)
    lengths = np.array([len(k) for _, k in parts], np.int64)
    assert joined_hashes(topics, keys, lengths).tolist() == [index_hash(index_key(t, k)) for t, k in parts]


def _key_strings(batch: DispatchBatch) -> tuple[list[int], list[str]]:
    """What ``build`` indexes for each record: its UNIQ_KEY, then its KEYS split on single spaces."""
    rows, names = [], []
    for row, r in enumerate(batch.requests()):
        for key in ([r.uniq_key] if r.uniq_key else []) + list(r.keys):
            rows.append(row)
            names.append(index_key(r.topic, key))
    return rows, names


_KEY_TEXT = st.text(st.sampled_from("ab #-é\U0001F600"), max_size=8)


@settings_
@given(records=st.lists(st.tuples(st.sampled_from(["T", "Orders", "Tö"]), _KEY_TEXT, _KEY_TEXT), max_size=12))
def test_batch_index_keys_are_the_index_hashes_of_topic_and_key(records: list[tuple[str, str, str]]) -> None:
    """Space runs, leading and trailing spaces, a UNIQ_KEY holding spaces (one key), empty strings,
    text outside ASCII (in keys and topics): hashed all at once, as the strings hash one by one."""
    requests = [DispatchRequest(topic, 0, 10 * i, 10, 0, 0, i, (), None, 0) for i, (topic, _, _) in enumerate(records)]
    plain = DispatchBatch.from_requests(requests)
    key_text = KeyText.of([u for _, _, u in records], [k for _, k, _ in records])
    batch = DispatchBatch(plain.columns, plain.topics, key_text)
    key_rows, key_hashes = batch.index_keys()
    rows, names = _key_strings(batch)
    assert key_rows.tolist() == rows
    assert key_hashes.tolist() == [index_hash(name) for name in names]


@pytest.mark.parametrize(("keys", "uniq"), [
    (["k1  k2 ", "", " lead", "one", "a b c", "   "], ["U 1", "", "UNIQ", "", " ", "0A1B2C3D4E5F"]),
    (["k1", "", "", "one", "abc", ""], ["U1", "", "UNIQ", "", "7", "0A1B2C3D4E5F"]),  # no key holds a space
])
def test_ascii_index_keys_hash_as_strings(keys: list[str], uniq: list[str]) -> None:
    requests = [DispatchRequest("Orders" if i % 2 else "T", i % 3, 100 * i, 100, 0, 0, i, (), None, 0)
                for i in range(6)]
    plain = DispatchBatch.from_requests(requests)
    batch = DispatchBatch(plain.columns, plain.topics, KeyText.of(uniq, keys))
    key_rows, key_hashes = batch.index_keys()
    rows, names = _key_strings(batch)
    assert key_rows.tolist() == rows
    assert key_hashes.tolist() == [index_hash(name) for name in names]


@pytest.mark.parametrize("length", [8_192, 8_193, 20_000])
def test_keys_longer_than_the_power_table_hash_instead_of_raising_index_error(length: int) -> None:
    """A key (or UNIQ_KEY) past 8,192 characters made the live index builder die on IndexError; the
    properties allow keys up to their 32,767 bytes."""
    requests = [DispatchRequest("T", 0, 100 * i, 100, 0, 0, i, (), None, 0) for i in range(2)]
    plain = DispatchBatch.from_requests(requests)
    key_text = KeyText.of(["u" * length, ""], ["k" * length + " b", "x" * (length - 3)])
    batch = DispatchBatch(plain.columns, plain.topics, key_text)
    key_rows, key_hashes = batch.index_keys()
    rows, names = _key_strings(batch)
    assert key_rows.tolist() == rows == [0, 0, 0, 1]
    assert key_hashes.tolist() == [index_hash(name) for name in names]


