from __future__ import annotations

import mmap
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mqstore.engine import Geometry, MessageStore, StoreConfig

TINY = Geometry(commitlog_file_size=8192, cq_entries_per_file=16, index_slot_count=16, index_entry_count=64)


class FakeClock:
    """An injected clock: tests move time explicitly instead of sleeping."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def tiny_config() -> StoreConfig:
    return StoreConfig(geometry=TINY)


@pytest.fixture
def open_store(tmp_path: Path, tiny_config: StoreConfig, clock: FakeClock
               ) -> Iterator[Callable[..., MessageStore]]:
    """Open (or reopen) a tiny-geometry store under tmp_path; whatever is still open is closed after."""
    opened: list[MessageStore] = []

    def _open(path: Path | None = None, config: StoreConfig | None = None) -> MessageStore:
        store = MessageStore.open(path or tmp_path / "store", config or tiny_config, now_ms=clock)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs: a disk that really fills (skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def populate_read(tmp_path: Path) -> None:
    """Skips a test of the page warmer's real work where the kernel refuses ``MADV_POPULATE_READ``
    (Linux 5.14+) on a read-only file mapping under tmp_path: the warmer turns itself off there."""
    from mqstore.engine.log.page_warmer import MADV_POPULATE_READ

    probe = tmp_path / "populate-read-probe"
    probe.write_bytes(bytes(4096))
    with probe.open("rb") as f, mmap.mmap(f.fileno(), 4096, mmap.MAP_SHARED, mmap.PROT_READ) as mm:
        try:
            mm.madvise(MADV_POPULATE_READ, 0, 4096)
        except OSError as exc:
            pytest.skip(f"this kernel refuses madvise(MADV_POPULATE_READ): {exc}")
    probe.unlink()
