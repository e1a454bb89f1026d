from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.meta.checkpoint import CHECKPOINT_SIZE, Checkpoint, CheckpointError

LONGS = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


def test_store_checkpoint_write_and_read(tmp_path: Path) -> None:
    """RocketMQ StoreCheckpointTest.testWriteAndRead (reference §11.4)."""
    path = tmp_path / "checkpoint"
    with Checkpoint.open(path) as cp:
        cp.physic_msg_ms = 0xAABB
        cp.logics_msg_ms = 0xCCDD
        cp.flush()
        assert cp.physic_msg_ms - cp.min_timestamp_ms == 3000
    with Checkpoint.open(path) as reopened:
        assert reopened.physic_msg_ms == 0xAABB
        assert reopened.logics_msg_ms == 0xCCDD


def test_create_writes_a_zeroed_page(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    with Checkpoint.open(path) as cp:
        assert (cp.physic_msg_ms, cp.logics_msg_ms, cp.index_msg_ms) == (0, 0, 0)
        assert (cp.master_flushed_offset, cp.confirm_phys_offset) == (0, 0)
    assert path.read_bytes() == bytes(CHECKPOINT_SIZE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_flush_writes_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    with Checkpoint.open(path) as cp:
        cp.physic_msg_ms = 0x0102030405060708
        cp.logics_msg_ms = 0x1112131415161718
        cp.index_msg_ms = 0x2122232425262728
        cp.master_flushed_offset = 0x3132333435363738
        cp.confirm_phys_offset = -2
        cp.flush()
    expected = bytes.fromhex(
        "0102030405060708111213141516171821222324252627283132333435363738FFFFFFFFFFFFFFFE"
    ) + bytes(CHECKPOINT_SIZE - 40)
    assert path.read_bytes() == expected


def test_flush_leaves_the_rest_of_the_page_alone(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    tail = bytes(range(256)) * ((CHECKPOINT_SIZE - 40) // 256) + bytes((CHECKPOINT_SIZE - 40) % 256)
    path.write_bytes(bytes(40) + tail)
    with Checkpoint.open(path) as cp:
        cp.physic_msg_ms = 7
        cp.flush()
    assert path.read_bytes()[40:] == tail


def test_rocketmq_4x_file_with_three_longs_loads(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(
        struct.pack(">qqq", 1_700_000_000_000, 1_700_000_000_500, 1_699_999_000_000)
        + bytes(CHECKPOINT_SIZE - 24)
    )
    with Checkpoint.open(path) as cp:
        assert cp.physic_msg_ms == 1_700_000_000_000
        assert cp.logics_msg_ms == 1_700_000_000_500
        assert cp.index_msg_ms == 1_699_999_000_000
        assert cp.master_flushed_offset == 0
        assert cp.confirm_phys_offset == 0


@pytest.mark.parametrize("size_bytes", [0, 40, CHECKPOINT_SIZE - 1, CHECKPOINT_SIZE + 1, 2 * CHECKPOINT_SIZE])
def test_wrong_size_is_a_clear_error(tmp_path: Path, size_bytes: int) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(bytes(size_bytes))
    with pytest.raises(CheckpointError, match=f"found {size_bytes}"):
        Checkpoint.open(path)
    assert path.stat().st_size == size_bytes


def test_min_timestamps() -> None:
    with tempfile.TemporaryDirectory() as tmp, Checkpoint.open(os.path.join(tmp, "checkpoint")) as cp:
        cp.physic_msg_ms, cp.logics_msg_ms, cp.index_msg_ms = 10_000, 9_000, 100_000
        assert cp.min_timestamp_ms == 6_000
        assert cp.min_timestamp_index_ms == 6_000
        cp.index_msg_ms = 5_000
        assert cp.min_timestamp_index_ms == 5_000
        cp.physic_msg_ms = 2_999
        assert cp.min_timestamp_ms == 0
        cp.index_msg_ms = 0
        assert cp.min_timestamp_index_ms == 0


@given(fields=st.tuples(LONGS, LONGS, LONGS, LONGS, LONGS))
def test_round_trip(fields: tuple[int, int, int, int, int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint")
        with Checkpoint.open(path) as cp:
            (
                cp.physic_msg_ms,
                cp.logics_msg_ms,
                cp.index_msg_ms,
                cp.master_flushed_offset,
                cp.confirm_phys_offset,
            ) = fields
            cp.flush()
        with Checkpoint.open(path, read_only=True) as back:
            assert (
                back.physic_msg_ms,
                back.logics_msg_ms,
                back.index_msg_ms,
                back.master_flushed_offset,
                back.confirm_phys_offset,
            ) == fields


def test_out_of_range_field_is_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    with Checkpoint.open(path) as cp:
        cp.physic_msg_ms = 1 << 63
        with pytest.raises(CheckpointError, match="range"):
            cp.flush()
    assert path.read_bytes() == bytes(CHECKPOINT_SIZE)


def test_read_only(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    with pytest.raises(FileNotFoundError):
        Checkpoint.open(path, read_only=True)
    assert not path.exists()
    Checkpoint.open(path).close()
    with Checkpoint.open(path, read_only=True) as cp, pytest.raises(CheckpointError, match="read-only"):
        cp.flush()


def test_use_after_close(tmp_path: Path) -> None:
    cp = Checkpoint.open(tmp_path / "checkpoint")
    cp.close()
    cp.close()
    assert cp.closed
    with pytest.raises(CheckpointError, match="closed"):
        cp.flush()


def test_failed_fsync_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Checkpoint.open(tmp_path / "checkpoint") as cp:

        def failing_fsync(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError, match="Input/output"):
            cp.flush()


def test_flush_is_one_pwrite_of_the_five_longs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, int]] = []
    real_pwrite = os.pwrite

    def spy(fd: int, data: bytes, pos: int) -> int:
        calls.append((bytes(data), pos))
        return real_pwrite(fd, data, pos)

    with Checkpoint.open(tmp_path / "checkpoint") as cp:
        monkeypatch.setattr(os, "pwrite", spy)
        cp.index_msg_ms = 42
        cp.flush()
    assert calls == [(struct.pack(">qqqqq", 0, 0, 42, 0, 0), 0)]
