"""config/delayOffset.json in RocketMQ's format: fastjson's unquoted integer keys, with or without
dataVersion; round trip; written atomically beside its backup."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.delay.offsets import (
    decode_delay_offsets,
    encode_delay_offsets,
    read_delay_offsets,
    read_reput_floor,
    write_delay_offsets,
    write_reput_floor,
)


@given(st.dictionaries(st.integers(1, 100), st.integers(0, 2**62)), st.integers(0, 2**31), st.integers(0, 2**45))
def test_round_trip(offsets: dict[int, int], counter: int, now_ms: int) -> None:
    decoded = decode_delay_offsets(encode_delay_offsets(offsets, counter, now_ms))
    assert (decoded.offsets, decoded.counter) == (offsets, counter)


def test_reads_rocketmq_5_and_4_files() -> None:
    five = b'{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"stateVersion":0,\n\t\t"timestamp":1700000000000\n\t},' \
           b'\n\t"offsetTable":{1:5,2:0,18:12}\n}'
    assert decode_delay_offsets(five).offsets == {1: 5, 2: 0, 18: 12}
    four = b'{"offsetTable":{3:7}}'  # RocketMQ 4: no dataVersion
    assert decode_delay_offsets(four).offsets == {3: 7}
    assert decode_delay_offsets(b'{"offsetTable":{"3":7}}').offsets == {3: 7}  # strict JSON too


def test_written_in_fastjson_shape_and_read_back(tmp_path: Path) -> None:
    assert read_delay_offsets(tmp_path).offsets == {} and read_reput_floor(tmp_path) is None
    write_delay_offsets(tmp_path, {2: 4, 1: 9}, 1, 1700000000000)
    write_reput_floor(tmp_path, 1234)
    assert b'"offsetTable":{1:9,2:4}' in (tmp_path / "config" / "delayOffset.json").read_bytes()
    assert read_delay_offsets(tmp_path).offsets == {1: 9, 2: 4} and read_reput_floor(tmp_path) == 1234
