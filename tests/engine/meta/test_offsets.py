from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.meta.metafile import MetafileError
from mqstore.engine.meta.offsets import (
    CONSUMER_OFFSET_FILE,
    ConsumerOffsets,
    clamp_to_queue_ends,
    decode_offset_file,
    encode_offset_file,
)


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


# What a RocketMQ broker writes (fastjson 1.x, PrettyFormat): tabs, sorted keys, bare integer
# keys, and a non-empty integer-keyed map closing on its own line.
BROKER_FILE = (
    "{\n"
    '\t"dataVersion":{\n'
    '\t\t"counter":17,\n'
    '\t\t"stateVersion":0,\n'
    '\t\t"timestamp":1700000000123\n'
    "\t},\n"
    '\t"offsetTable":{\n'
    '\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0\n'
    "\t\t},\n"
    '\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,2:251,3:250\n'
    "\t\t}\n"
    "\t}\n"
    "}"
)


def test_parse_broker_file_with_unquoted_keys() -> None:
    loaded = decode_offset_file(BROKER_FILE.encode())
    assert loaded.counter == 17
    assert loaded.state_version == 0
    assert loaded.timestamp_ms == 1700000000123
    assert loaded.table == {
        "%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4": {0: 0},
        "TopicTest@please_rename_unique_group_name_4": {0: 250, 1: 249, 2: 251, 3: 250},
    }


def test_parse_quoted_keys_and_compact_form() -> None:
    data = b'{"offsetTable":{"T@G":{"0":12, "1" : 7},"U@G":{}},"dataVersion":{"counter":2,"timestamp":5}}'
    loaded = decode_offset_file(data)
    assert loaded.table == {"T@G": {0: 12, 1: 7}, "U@G": {}}
    assert loaded.counter == 2


def test_parse_mixed_spacing_and_negative_keys() -> None:
    loaded = decode_offset_file(b'{"offsetTable":{"T@G":{ 0 :1,\n -1: 2,\t"3":4}}}')
    assert loaded.table == {"T@G": {0: 1, -1: 2, 3: 4}}


def test_key_quoting_never_touches_string_content() -> None:
    data = b'{"note":"{0:1,2:3}","offsetTable":{"odd{0:1,\\"x@g":{5:6}}}'
    assert decode_offset_file(data).table == {'odd{0:1,"x@g': {5: 6}}


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"offsetTable":[]}',
        b'{"offsetTable":{"T@G":{0:"12"}}}',
        b'{"offsetTable":{"T@G":{0:true}}}',
        b'{"offsetTable":{"T@G":{x:1}}}',
        b'{"offsetTable":{"T@G":{0:1}',
    ],
)
def test_bad_content_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_offset_file(data)


def test_persisted_bytes_match_fastjson_exactly(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(FakeClock(1700000000123))
    # Committed out of order: the file sorts topic@group as strings and queue ids as numbers.
    offsets.commit("GroupA", "TopicA", 10, 3)
    offsets.commit("GroupA", "TopicA", 1, 7)
    offsets.commit("GroupA", "TopicA", 0, 12)
    offsets.commit("GroupA", "TopicA", 2, 9)
    offsets.commit("GroupA", "%RETRY%GroupA", 0, 0)
    path = tmp_path / "config" / "consumerOffset.json"
    offsets.persist(path)
    assert path.read_bytes() == (
        b"{\n"
        b'\t"dataVersion":{\n'
        b'\t\t"counter":1,\n'
        b'\t\t"stateVersion":0,\n'
        b'\t\t"timestamp":1700000000123\n'
        b"\t},\n"
        b'\t"offsetTable":{\n'
        b'\t\t"%RETRY%GroupA@GroupA":{0:0\n'
        b"\t\t},\n"
        b'\t\t"TopicA@GroupA":{0:12,1:7,2:9,10:3\n'
        b"\t\t}\n"
        b"\t}\n"
        b"}"
    )


def test_broker_file_re_encodes_to_the_same_bytes() -> None:
    loaded = decode_offset_file(BROKER_FILE.encode())
    again = encode_offset_file(
        loaded.table,
        counter=loaded.counter,
        state_version=loaded.state_version,
        timestamp_ms=loaded.timestamp_ms,
    )
    assert again == BROKER_FILE.encode()


def test_empty_tables_encode_as_braces() -> None:
    assert encode_offset_file({}, counter=0, state_version=0, timestamp_ms=0).endswith(
        b'\t"offsetTable":{}\n}'
    )
    assert b'"T@G":{}' in encode_offset_file({"T@G": {}}, counter=0, state_version=0, timestamp_ms=0)


def test_commit_query_and_groups() -> None:
    offsets = ConsumerOffsets(FakeClock(0))
    assert offsets.query("G1", "T", 0) == -1
    offsets.commit("G1", "T", 0, 5)
    offsets.commit("G2", "T", 3, 8)
    offsets.commit("G1", "Other", 0, 1)
    offsets.commit("G1", "T", 0, 4)  # a reset may move backwards
    assert offsets.query("G1", "T", 0) == 4
    assert offsets.query("G1", "T", 1) == -1
    assert offsets.query("G2", "T", 3) == 8
    assert offsets.groups_of("T") == frozenset({"G1", "G2"})
    assert offsets.groups_of("Other") == frozenset({"G1"})
    assert offsets.groups_of("Nope") == frozenset()
    assert offsets.table == {"T@G1": {0: 4}, "T@G2": {3: 8}, "Other@G1": {0: 1}}


def test_table_is_read_only() -> None:
    offsets = ConsumerOffsets(FakeClock(0))
    offsets.commit("G", "T", 0, 1)
    with pytest.raises(TypeError):
        offsets.table["T@G"] = {}  # type: ignore[index]


@pytest.mark.parametrize(
    ("group", "topic", "queue_id", "next_offset"),
    [
        ("G@x", "T", 0, 0),
        ("G", "T@y", 0, 0),
        ("", "T", 0, 0),
        ("G", 'T"', 0, 0),
        ("G", "T", -1, 0),
        ("G", "T", 0, -5),
        ("G", "T", 0, 1 << 63),
    ],
)
def test_commit_rejects_bad_arguments(group: str, topic: str, queue_id: int, next_offset: int) -> None:
    with pytest.raises(ValueError):
        ConsumerOffsets(FakeClock(0)).commit(group, topic, queue_id, next_offset)


def test_round_trip_keeps_every_group_and_bumps_counter(tmp_path: Path) -> None:
    clock = FakeClock(1000)
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsets(clock)
    offsets.commit("G1", "T1", 0, 10)
    offsets.commit("G2", "T2", 1, 20)
    offsets.persist(path)
    clock.now_ms = 2000
    offsets.persist(path)
    assert offsets.counter == 2

    reloaded = ConsumerOffsets.load(path, clock)
    assert reloaded.counter == 2
    assert reloaded.table == {"T1@G1": {0: 10}, "T2@G2": {1: 20}}
    reloaded.commit("G1", "T1", 0, 11)
    clock.now_ms = 3000
    reloaded.persist(path)

    final = decode_offset_file(path.read_bytes())
    assert final.counter == 3
    assert final.timestamp_ms == 3000
    assert final.table == {"T1@G1": {0: 11}, "T2@G2": {1: 20}}


def test_load_of_broker_file_then_persist_keeps_its_version(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text(BROKER_FILE)
    offsets = ConsumerOffsets.load(path, FakeClock(1700000009999))
    assert offsets.query("please_rename_unique_group_name_4", "TopicTest", 2) == 251
    offsets.persist(path)
    assert decode_offset_file(path.read_bytes()).counter == 18
    assert (tmp_path / "consumerOffset.json.bak").read_text() == BROKER_FILE


def test_missing_file_loads_empty(tmp_path: Path) -> None:
    offsets = ConsumerOffsets.load(tmp_path / "consumerOffset.json", FakeClock(0))
    assert offsets.table == {}
    assert offsets.counter == 0


def test_garbage_file_falls_back_to_bak(tmp_path: Path) -> None:
    clock = FakeClock(1)
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsets(clock)
    offsets.commit("G", "T", 0, 1)
    offsets.persist(path)
    offsets.commit("G", "T", 0, 2)
    offsets.persist(path)
    path.write_bytes(b'{\n\t"dataVersion":{\n\t\t"coun')  # torn by something other than us
    assert ConsumerOffsets.load(path, clock).query("G", "T", 0) == 1


def test_garbage_without_backup_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_bytes(b"\x00\x00\x00")
    with pytest.raises(MetafileError):
        ConsumerOffsets.load(path, FakeClock(0))


NAMES = st.from_regex(r"[%|a-zA-Z0-9_-]{1,12}", fullmatch=True)


@given(
    entries=st.lists(
        st.tuples(NAMES, NAMES, st.integers(0, (1 << 31) - 1), st.integers(0, (1 << 63) - 1)), max_size=20
    ),
    counter=st.integers(0, 1 << 40),
    timestamp_ms=st.integers(0, 1 << 45),
)
def test_encode_decode_round_trip(
    entries: list[tuple[str, str, int, int]], counter: int, timestamp_ms: int
) -> None:
    offsets = ConsumerOffsets(FakeClock(0))
    for group, topic, queue_id, next_offset in entries:
        offsets.commit(group, topic, queue_id, next_offset)
    decoded = decode_offset_file(offsets.encode(counter=counter, timestamp_ms=timestamp_ms))
    assert decoded.table == offsets.table
    assert (decoded.counter, decoded.timestamp_ms) == (counter, timestamp_ms)


def test_offsets_past_the_recovered_queue_ends_are_brought_back(tmp_path: Path) -> None:
    """A power cut took a tail the offsets had been committed into: recovery brings them back to the
    queue ends, so the sends after it (at the lost offsets) are consumed, not skipped."""
    offsets = ConsumerOffsets(FakeClock(1))
    offsets.commit("G", "T", 0, 9)   # past the end: 5 entries survived
    offsets.commit("G", "T", 1, 3)   # within it
    offsets.commit("H", "T", 0, 5)   # at it
    offsets.commit("G", "Gone", 0, 2)  # a queue nothing of survived
    path = tmp_path / CONSUMER_OFFSET_FILE
    offsets.persist(path)
    ends = {("T", 0): 5, ("T", 1): 4}
    moved = clamp_to_queue_ends(tmp_path, ends, FakeClock(2))
    assert sorted(moved) == [("Gone@G", 0, 2, 0), ("T@G", 0, 9, 5)]
    again = ConsumerOffsets.load(path, FakeClock(3))
    assert again.query("G", "T", 0) == 5 and again.query("G", "T", 1) == 3 and again.query("H", "T", 0) == 5
    assert again.query("G", "Gone", 0) == 0 and again.counter == offsets.counter + 1
    before = path.read_bytes()
    assert clamp_to_queue_ends(tmp_path, ends, FakeClock(4)) == []  # none moved: not rewritten
    assert path.read_bytes() == before
