"""The delay-level table parsed as RocketMQ's parseDelayLevel, the tags code it gives a schedule-topic
record, and the table kept with the store for offline tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.config import StoreConfig
from mqstore.engine.delay.table import (
    DEFAULT_DELAY_LEVELS,
    DelayLevelError,
    parse_delay_levels,
    parse_level,
    queue_level,
    read_delay_levels,
    save_delay_levels,
    schedule_queue_id,
    tags_code_of,
)
from mqstore.engine.java.jhash import java_hash
from mqstore.engine.log.record import SCHEDULE_TOPIC


def test_the_default_table_is_rocketmqs() -> None:
    assert DEFAULT_DELAY_LEVELS.delays_ms == (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000,
                                              360000, 420000, 480000, 540000, 600000, 1200000, 1800000,
                                              3600000, 7200000)
    assert StoreConfig().delay_levels == DEFAULT_DELAY_LEVELS and DEFAULT_DELAY_LEVELS.max_level == 18


def test_units_and_refusals() -> None:
    assert parse_delay_levels("1s 2m 3h 1d").delays_ms == (1000, 120_000, 10_800_000, 86_400_000)
    for bad in ("", "1s  2s", "1x", "s", "1.5s", "1s 2"):
        with pytest.raises(DelayLevelError):
            parse_delay_levels(bad)
    with pytest.raises(ValueError, match="message_delay_level token 2"):
        StoreConfig(message_delay_level="1s 2q").validate()


@given(st.integers(min_value=-(2**40), max_value=2**40), st.integers(min_value=0, max_value=2**41))
def test_tags_code_is_store_time_plus_the_clamped_level(level: int, store_ms: int) -> None:
    levels = parse_delay_levels("1s 2s 3s")
    props = {"DELAY": str(level), "TAGS": "T"}
    code = tags_code_of(SCHEDULE_TOPIC, props, store_ms, levels)
    if 0 < level < 2**31:
        assert code == store_ms + 1000 * min(level, 3)
    else:  # not a level (0, negative, past Java's int): the tags' hash, as for any record
        assert code == java_hash("T")
    assert tags_code_of("Other", props, store_ms, levels) == java_hash("T")


@given(st.text(max_size=12) | st.integers(-(1 << 40), 1 << 40).map(str))
def test_the_level_a_delay_asks_for(delay: str) -> None:
    """One rule for the put hook and the delivery time: parsed as Java's parseInt, 0 or below is no
    delay, past the table's last is the last; a level waits on queue level - 1."""
    levels = parse_delay_levels("1s 5s 1m")
    level, asked = levels.level_of(delay), parse_level(delay)
    if asked is None:
        assert level is None and levels.delivery_ms(delay, 1_000) is None
    elif asked <= 0:
        assert level == 0 and levels.delivery_ms(delay, 1_000) is None
    else:
        assert level == min(asked, 3) and levels.delivery_ms(delay, 1_000) == 1_000 + levels.delays_ms[level - 1]
        assert levels.delay_ms(asked) == levels.delay_ms(level)
        assert queue_level(schedule_queue_id(level)) == level and schedule_queue_id(1) == 0
    assert list(levels.levels) == [1, 2, 3]


def test_java_integer_parsing_of_delay() -> None:
    assert [parse_level(t) for t in ("3", "+3", "-1", "03", " 3", "3.0", "x", "2147483648")] == [
        3, 3, -1, 3, None, None, None, None]


def test_the_table_is_saved_with_the_store(tmp_path: Path) -> None:
    assert read_delay_levels(tmp_path) == DEFAULT_DELAY_LEVELS
    save_delay_levels(tmp_path, DEFAULT_DELAY_LEVELS)
    assert not (tmp_path / "config").exists()  # the default needs no file
    short = parse_delay_levels("1s 2s 3s")
    save_delay_levels(tmp_path, short)
    assert read_delay_levels(tmp_path) == short
