"""The consume-queue kernel against the numpy code it replaced (tests/oracle/consumequeue.py): the
same entries, queue offsets, queue order and min offset for any rows (several topics and queues,
transactions that get no entry), the same consume-queue files written through ``dispatch_rows``,
and refusals of rows and outputs that are not what it needs."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS
from mqstore.engine.consumequeue.store import QUEUE_FIELDS, ConsumeQueueStore, QueueEntries
from tests.oracle import consumequeue as oracle

settings_ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_the_kernel_knows_the_dispatch_row_layout() -> None:
    """engine/csrc/dispatch.h's offsets are DISPATCH_COLUMNS'."""
    fields = DISPATCH_COLUMNS.fields
    assert fields is not None and DISPATCH_COLUMNS.itemsize == 46
    assert {name: offset for name, (_, offset) in fields.items()} == {
        "phys_offset": 0, "size": 8, "topic": 12, "queue_id": 14, "queue_offset": 18, "tags_code": 26,
        "store_ms": 34, "sys_flag": 42}


@st.composite
def dispatch_rows(draw: st.DrawFn, *, queues: int = 4) -> np.ndarray:
    n = draw(st.integers(0, 60))
    rows = np.zeros(n, DISPATCH_COLUMNS)
    rows["size"] = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    rows["phys_offset"] = np.cumsum(rows["size"]) - rows["size"] + draw(st.integers(0, 1 << 40))  # back to back
    rows["topic"] = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    rows["queue_id"] = draw(st.lists(st.integers(0, queues - 1), min_size=n, max_size=n))
    rows["tags_code"] = draw(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=n, max_size=n))
    rows["sys_flag"] = draw(st.lists(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC, 0x3, 0x8 | 0x1]), min_size=n, max_size=n))
    seen: dict[tuple[int, int], int] = {}  # queue offsets count the rows that get an entry
    for i, (topic, queue_id) in enumerate(zip(rows["topic"].tolist(), rows["queue_id"].tolist(), strict=True)):
        rows["queue_offset"][i] = seen.get((topic, queue_id), 0)
        if int(rows["sys_flag"][i]) & 0xC in (0, 0x8):
            seen[(topic, queue_id)] = int(rows["queue_offset"][i]) + 1
    return rows


@settings_
@given(dispatch_rows(queues=2**20), st.integers(-3, 3))
def test_queue_entries_are_the_oracles(rows: np.ndarray, queue_shift: int) -> None:
    rows["queue_id"] -= queue_shift  # queue ids below 0 group as numpy groups them too
    got = QueueEntries.of(rows)
    entries, queue_offsets, bounds, queues, min_phys = oracle.queue_entries(rows)
    assert got.entries.tobytes() == entries.tobytes()
    assert got.queue_offsets.tolist() == queue_offsets.tolist()
    assert [q[2] for q in got.queues] + [len(entries)] == bounds
    assert [q[3] for q in got.queues] == bounds[1:]
    assert [(q[0], q[1]) for q in got.queues] == queues
    # what the store appends a queue's run by: its queue offsets and commitlog bytes, first and last
    assert [q[4:] for q in got.queues] == [
        [int(queue_offsets[first]), int(queue_offsets[end - 1]) + 1, int(entries["phys_offset"][first]),
         int(entries["phys_offset"][end - 1]) + int(entries["size"][end - 1])]
        for first, end in itertools.pairwise(bounds)]
    if len(entries):
        assert got.min_phys_offset == min_phys


def _dispatch_as_before(store: ConsumeQueueStore, rows: np.ndarray, topics: list[str]) -> None:
    """``dispatch_rows`` as it was: the oracle's entries, queue by queue, into ``append_entries``."""
    entries, queue_offsets, bounds, queues, _ = oracle.queue_entries(rows)
    for (topic, queue_id), (first, end) in zip(queues, itertools.pairwise(bounds), strict=True):
        cq = store.get(topics[topic], queue_id, create=True)
        assert cq is not None
        cq.append_entries(queue_offsets[first:end], entries[first:end])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dispatch_rows(), st.lists(st.integers(1, 25), max_size=4), st.lists(st.booleans(), min_size=5, max_size=5))
def test_dispatched_batches_write_the_consume_queue_files_the_oracle_writes(
        tmp_path_factory: pytest.TempPathFactory, rows: np.ndarray, cuts: list[int], repeats: list[bool]) -> None:
    """Batches that continue the queues (one copy a queue), cross their files, or come again (a
    builder resuming from the mark): the files are the oracle's."""
    root = tmp_path_factory.mktemp("cq")
    topics = ["T", "Orders", "Tö"]
    kernel = ConsumeQueueStore.open(root / "kernel", 8)  # files of 8 entries: batches cross them
    numpy = ConsumeQueueStore.open(root / "numpy", 8)
    done = 0
    for cut, repeat in zip([*cuts, len(rows)], repeats, strict=False):
        for _ in range(2 if repeat else 1):
            kernel.dispatch_rows(rows[done:done + cut], topics)
            _dispatch_as_before(numpy, rows[done:done + cut], topics)
        done += cut
    kernel.close()
    numpy.close()
    assert _files(root / "kernel") == _files(root / "numpy")


def test_the_kernel_refuses_rows_and_outputs_it_cannot_hold() -> None:
    rows = np.zeros(3, DISPATCH_COLUMNS)
    with pytest.raises(ValueError, match="not DISPATCH_COLUMNS"):
        QueueEntries.of(np.zeros(3, np.int64))
    entries, offsets, queues = np.empty(60, np.uint8), np.empty(3, np.int64), np.empty(3 * QUEUE_FIELDS, np.int64)
    with pytest.raises(ValueError, match="whole dispatch rows"):
        _native.cq_entries(rows.tobytes()[:-1], entries, offsets, queues)
    with pytest.raises(ValueError, match="sized"):
        _native.cq_entries(rows, entries[:40], offsets, queues)
    with pytest.raises(ValueError, match="sized"):
        _native.cq_entries(rows, entries, offsets, queues[:-1])
    with pytest.raises(ValueError, match="sized"):
        _native.cq_entries(rows, entries, offsets[:2], queues)
    assert _native.cq_entries(rows, entries, offsets, queues) == (1, 3, 0)
