"""The epoch file against RocketMQ's format, its .bak fallback, and findConsistentPoint's cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.ha.epochs import (
    EPOCH_FILE_NAME,
    EpochEntry,
    EpochFile,
    EpochFileError,
    consistent_point,
    decode_epoch_file,
    encode_epoch_file,
    epoch_end,
)

E = EpochEntry


def test_rocketmq_checkpoint_example_is_byte_exact(tmp_path: Path) -> None:
    """CheckpointFile's own javadoc example: entries 7-7000 and 8-8000, size 2, crc32 773307083."""
    ef = EpochFile.load(tmp_path)
    ef.append(7, 7000)
    ef.append(8, 8000)
    assert (tmp_path / EPOCH_FILE_NAME).read_bytes() == b"2\n773307083\n7-7000\n8-8000\n"
    assert EpochFile.load(tmp_path).entries == (E(7, 7000), E(8, 8000))


def test_bak_holds_the_previous_version(tmp_path: Path) -> None:
    """MixAll.string2File keeps the previous content as .bak."""
    ef = EpochFile.load(tmp_path)
    ef.append(7, 7000)
    ef.append(8, 8000)
    assert (tmp_path / (EPOCH_FILE_NAME + ".bak")).read_bytes() == encode_epoch_file([E(7, 7000)])


def test_missing_file_is_empty(tmp_path: Path) -> None:
    ef = EpochFile.load(tmp_path)
    assert ef.entries == () and ef.last_epoch == 0


def test_bad_crc_falls_back_to_bak(tmp_path: Path) -> None:
    ef = EpochFile.load(tmp_path)
    ef.append(1, 100)
    ef.append(2, 300)
    main = tmp_path / EPOCH_FILE_NAME
    main.write_bytes(main.read_bytes().replace(b"2-300", b"2-301"))
    assert EpochFile.load(tmp_path).entries == (E(1, 100),)


def test_count_mismatch_falls_back_to_bak(tmp_path: Path) -> None:
    ef = EpochFile.load(tmp_path)
    ef.append(1, 100)
    ef.append(2, 300)
    main = tmp_path / EPOCH_FILE_NAME
    main.write_bytes(b"3" + main.read_bytes()[1:])
    assert EpochFile.load(tmp_path).entries == (E(1, 100),)


def test_missing_main_reads_bak(tmp_path: Path) -> None:
    """CheckpointFileTest.testAbNormalWriteAndRead: the main file deleted, the .bak is read."""
    ef = EpochFile.load(tmp_path)
    ef.append(7, 7000)
    ef.append(8, 8000)
    (tmp_path / EPOCH_FILE_NAME).unlink()
    assert EpochFile.load(tmp_path).entries == (E(7, 7000),)


def test_both_bad_raises_naming_the_files(tmp_path: Path) -> None:
    (tmp_path / EPOCH_FILE_NAME).write_bytes(b"1\n5\n1-100\n")
    (tmp_path / (EPOCH_FILE_NAME + ".bak")).write_bytes(b"garbage")
    with pytest.raises(EpochFileError) as err:
        EpochFile.load(tmp_path)
    assert EPOCH_FILE_NAME in str(err.value) and ".bak" in str(err.value)


def test_zero_crc_is_not_checked(tmp_path: Path) -> None:
    (tmp_path / EPOCH_FILE_NAME).write_bytes(b"1\n0\n4-400\n")
    assert EpochFile.load(tmp_path).entries == (E(4, 400),)


def test_append_refuses_older_epochs_and_earlier_starts(tmp_path: Path) -> None:
    ef = EpochFile.load(tmp_path)
    ef.append(2, 300)
    with pytest.raises(ValueError):
        ef.append(2, 400)
    with pytest.raises(ValueError):
        ef.append(1, 400)
    with pytest.raises(ValueError):
        ef.append(3, 299)
    ef.append(3, 300)  # an epoch that wrote nothing before the next began
    assert EpochFile.load(tmp_path).entries == (E(2, 300), E(3, 300))
    assert ef.last_epoch == 3


def test_truncate_from_drops_epochs_starting_at_or_after(tmp_path: Path) -> None:
    """EpochFileCacheTest.testTruncate: cutting at 150 keeps epoch 1 only."""
    ef = EpochFile.load(tmp_path)
    for epoch, start in ((1, 100), (2, 300), (3, 500)):
        ef.append(epoch, start)
    ef.truncate_from(150)
    assert ef.entries == (E(1, 100),)
    assert EpochFile.load(tmp_path).entries == (E(1, 100),)
    ef.truncate_from(100)
    assert ef.entries == ()
    # no .bak left to bring the cut entries back, for RocketMQ's reader or ours
    assert not (tmp_path / EPOCH_FILE_NAME).exists() and not (tmp_path / (EPOCH_FILE_NAME + ".bak")).exists()
    assert EpochFile.load(tmp_path).entries == ()


def test_truncate_from_at_a_start_drops_that_epoch(tmp_path: Path) -> None:
    ef = EpochFile.load(tmp_path)
    for epoch, start in ((1, 100), (2, 300), (3, 500)):
        ef.append(epoch, start)
    ef.truncate_from(500)
    assert ef.entries == (E(1, 100), E(2, 300))


LOCAL = [E(1, 100), E(2, 300), E(3, 500)]


@pytest.mark.parametrize(("local_end", "master", "master_end", "expected"), [
    (700, [E(1, 100), E(2, 300), E(3, 450)], 600, 450),                 # EpochFileCacheTest sample 1
    (700, [E(1, 100), E(2, 300), E(3, 500)], 600, 600),                 # sample 2
    (700, [E(1, 200), E(2, 500)], 600, None),                           # sample 3 (RocketMQ: -1)
    (700, [E(1, 100), E(2, 300), E(3, 500), E(4, 800)], 900, 700),      # sample 4, the other way round
    (700, [], 0, None),
    (700, [E(1, 100)], 250, 250),
    (700, [E(1, 100), E(3, 500)], 650, 650),                            # the newest match wins
    (700, [E(1, 100), E(2, 300), E(4, 400)], 650, 400),                 # epoch 3 unknown to the master
])
def test_consistent_point(local_end: int, master: list[EpochEntry], master_end: int, expected: int | None) -> None:
    assert consistent_point(LOCAL, local_end, master, master_end) == expected


def test_consistent_point_sample_4_as_rocketmq_runs_it() -> None:
    """Sample 4 asks the longer log: its epoch 3 ends where epoch 4 starts (800), the shorter at 700."""
    master = [E(1, 100), E(2, 300), E(3, 500), E(4, 800)]
    assert consistent_point(master, 900, LOCAL, 700) == 700


def test_epoch_end() -> None:
    assert [epoch_end(LOCAL, i, 900) for i in range(3)] == [300, 500, 900]


entries_st = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1 << 40)), max_size=20).map(
    lambda pairs: [E(e, s) for e, s in sorted({e: s for e, s in pairs}.items())])


@given(entries_st)
def test_round_trip(entries: list[EpochEntry]) -> None:
    assert decode_epoch_file(encode_epoch_file(entries)) == tuple(entries)


@given(entries_st.filter(bool), st.data())
def test_a_flipped_byte_is_caught_or_harmless(entries: list[EpochEntry], data: st.DataObject) -> None:
    """A changed byte either fails to decode (ValueError only) or decodes to what the CRC vouches for."""
    raw = bytearray(encode_epoch_file(entries))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[i]))
    try:
        decoded = decode_epoch_file(bytes(raw))
    except ValueError:
        return
    # a digit changed in the count or crc lines that still matched (e.g. a leading zero) is harmless
    assert decoded == tuple(entries) or raw.split(b"\n")[1] == b"0"
