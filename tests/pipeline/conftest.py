"""Fixtures shared by every Spark test (the data source's and the jobs'):

``spark``      one local[2] SparkSession for the whole test session (quiet, UTC, the ``mqstore``
               data source registered), stopped at the end. Skips the tests when pyspark or Java is
               missing.
``store_dir``  a closed, read-only-by-convention store built once per session with ``MessageStore``
               in tiny geometry ``STORE_GEOMETRY`` (64 KiB commitlog files, so it spans several
               files; 256-entry consume-queue files): ``STORE_MESSAGES`` messages over
               ``STORE_TOPICS`` x ``STORE_QUEUES`` queues, written in batches of ``STORE_BATCH`` with an
               injected clock that starts at ``STORE_START_MS`` and moves 1 s per batch. Message ``i``
               goes to topic ``STORE_TOPICS[i % 3]``, queue ``i % 4``, body ``b"body-{i}-" + "x" * (i % 97)``,
               tags ``f"tag{i % 5}"`` (none when ``i % 7 == 0``), keys ``(f"k{i}", f"order-{i % 10}")`` for odd
               ``i``, property ``{"seq": str(i)}``, born host ``STORE_BORN_HOSTS[i % 4]`` (two IPv6).
               Tests must not write into it: copy it first (``shutil.copytree``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine import Geometry, Host, Message, MessageStore, StoreConfig

ROOT = Path(__file__).resolve().parents[2]

STORE_GEOMETRY = Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=256, index_slot_count=64,
                          index_entry_count=512)
STORE_TOPICS = ("Orders", "Payments", "Audit")
STORE_QUEUES = 4
STORE_MESSAGES = 3000
STORE_BATCH = 100
STORE_START_MS = 1_700_000_000_000
STORE_BORN_HOSTS = (Host("10.1.2.3", 50001), Host("2001:db8::7", 50002), Host("192.168.0.9", 50003),
                    Host("fe80::1", 50004))


def store_message(i: int) -> Message:
    return Message(STORE_TOPICS[i % len(STORE_TOPICS)], b"body-%d-" % i + b"x" * (i % 97),
                   tags=None if i % 7 == 0 else f"tag{i % 5}",
                   keys=(f"k{i}", f"order-{i % 10}") if i % 2 else (),
                   properties={"seq": str(i)}, born_host=STORE_BORN_HOSTS[i % len(STORE_BORN_HOSTS)])


class StepClock:
    """The store's injected clock: moves only when told."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now


def write_messages(path: Path, first: int, count: int, *, geometry: Geometry = STORE_GEOMETRY,
                   start_ms: int = STORE_START_MS) -> None:
    """Append messages ``first .. first + count - 1`` (as ``store_message`` makes them) to the store
    at ``path``, ``STORE_BATCH`` per put with the clock 1 s further each batch."""
    clock = StepClock(start_ms + first // STORE_BATCH * 1000)
    with MessageStore.open(path, StoreConfig(geometry=geometry), now_ms=clock) as store:
        for lo in range(first, first + count, STORE_BATCH):
            ids = range(lo, min(lo + STORE_BATCH, first + count))
            results = store.put_batch([store_message(i) for i in ids], [i % STORE_QUEUES for i in ids])
            assert all(r.ok for r in results)
            clock.now += 1000


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for Spark's Python workers to import this checkout (not another one an editable
    install points at) with this interpreter, bound to loopback."""
    path = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(path), "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    os.environ.update(worker_env(os.environ))  # before the JVM starts: its workers inherit it
    from mqstore.pipeline.session import spark_session

    session = spark_session("local[2]", "mqstore-tests", **{
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    })
    yield session
    session.stop()


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mqstore") / "store"
    write_messages(path, 0, STORE_MESSAGES)
    return path
