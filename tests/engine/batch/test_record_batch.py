"""Producer-encoded batches: checked, stamped and sealed by the compiled kernels, they leave the same
bytes on disk as the writer's own encoding, and a batch that does not hold together is refused whole."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine import Geometry, Host, Message, StoreConfig
from mqstore.engine.batch.record_batch import COLUMNS, BatchError, check_batch, encode_one
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.message import record_properties
from mqstore.engine.log.msgid import UniqKeyGenerator
from mqstore.engine.log.record import PROP_UNIQ_KEY, DecodeKind
from mqstore.engine.put.writer import CommitLogWriter

STORE = Host("10.0.0.7", 10911)
BORN_V6 = Host("fe80::1", 4242)
NOW_MS = 1_700_000_123_456


def reference_writer(path: Path, file_size: int, prop_crc: bool) -> CommitLogWriter:
    """The writer's own encoding at a fixed clock and host: the bytes producer-encoded batches must match."""
    config = StoreConfig(geometry=Geometry(commitlog_file_size=file_size, prop_crc=prop_crc), store_host=STORE)
    return CommitLogWriter(CommitLog.open(path, file_size), config, {},
                           UniqKeyGenerator(b"\x01\x02\x03\x04", 7, 9, lambda: NOW_MS))


def _batch(messages: list[Message], queues: list[int], prop_crc: bool) -> tuple[bytes, bytes, list[str]]:
    topics: dict[str, int] = {}
    records, rows = [], np.zeros(len(messages), COLUMNS)
    for i, (m, q) in enumerate(zip(messages, queues, strict=True)):
        props = record_properties(m, None)
        assert isinstance(props, dict)
        rec = encode_one(topic=m.topic, body=m.body, properties=props, queue_id=q, flag=m.flag, sys_flag=m.sys_flag,
                         born_ms=m.born_ms or 0, born_host=m.born_host or STORE, store_host=STORE,
                         reconsume_times=m.reconsume_times, prop_crc=prop_crc)
        records.append(rec)
        rows[i] = (len(rec), topics.setdefault(m.topic, len(topics)), q, 0, -1)
    return b"".join(records), rows.tobytes(), list(topics)


messages_strategy = st.lists(st.builds(
    lambda topic, body, tags, key, v6, flag, n: Message(
        topic, body, tags=tags, keys=(key,) if key else (), flag=flag, born_ms=NOW_MS - 5,
        born_host=BORN_V6 if v6 else None, reconsume_times=n, properties={PROP_UNIQ_KEY: f"U{len(body)}-{flag}"}),
    st.sampled_from(["A", "Topic_B", "T" * 127]), st.binary(max_size=300), st.sampled_from([None, "TagA", "x y"]),
    st.sampled_from(["", "k1", "order-7"]), st.booleans(), st.integers(-5, 5), st.integers(0, 3)),
    min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=messages_strategy, prop_crc=st.booleans(), file_size=st.sampled_from([2048, 4096, 1 << 20]))
def test_a_checked_batch_writes_the_bytes_the_writer_would(tmp_path_factory: pytest.TempPathFactory,
                                                           messages: list[Message], prop_crc: bool,
                                                           file_size: int) -> None:
    root = tmp_path_factory.mktemp("batch")
    queues = [i % 3 for i in range(len(messages))]
    reference = reference_writer(root / "a", file_size, prop_crc)
    outcome = reference.write(messages, queues, NOW_MS)
    fast = reference_writer(root / "b", file_size, prop_crc)
    records, columns, topics = _batch(messages, queues, prop_crc)
    checked = check_batch(records, columns, topics, store_host=STORE, prop_crc=prop_crc, max_body_bytes=1 << 20)
    batch = fast.write_batch(records, checked, topics, np.asarray(queues, np.int64), NOW_MS)
    assert batch.phys_offsets.tolist() == [r.phys_offset for r in outcome.results]
    assert batch.queue_offsets.tolist() == [r.queue_offset for r in outcome.results]
    assert fast.next_queue_offsets == reference.next_queue_offsets
    for a, b in zip(reference.commitlog.queue.files, fast.commitlog.queue.files, strict=True):
        assert bytes(a.buffer[:a.written_pos]) == bytes(b.buffer[:b.written_pos])
    kinds = {d.kind for _, d in fast.commitlog.scan(0, require_prop_crc=prop_crc)}
    assert kinds <= {DecodeKind.RECORD, DecodeKind.BLANK}
    reference.commitlog.close()
    fast.commitlog.close()


def _one(prop_crc: bool = True) -> tuple[bytearray, bytes, list[str]]:
    records, columns, topics = _batch([Message("A", b"hello", tags="T")], [0], prop_crc)
    return bytearray(records), columns, topics


@pytest.mark.parametrize("tamper", ["body", "size", "topic", "store_host", "crc_tail", "columns", "tx_flag"])
def test_a_batch_that_does_not_hold_together_is_refused(tamper: str) -> None:
    records, columns, topics = _one()
    host = STORE
    if tamper == "body":
        records[-40] ^= 0xFF  # inside the body: its CRC no longer matches
        records[90] ^= 0x01
    elif tamper == "size":
        records[3] += 1
    elif tamper == "topic":
        topics = ["B"]
    elif tamper == "store_host":
        host = replace(STORE, port=1)
    elif tamper == "crc_tail":
        records[-20] = ord("X")
    elif tamper == "columns":
        columns = columns[:-1]
    elif tamper == "tx_flag":
        records[39] |= 0x4
    with pytest.raises(BatchError):
        check_batch(bytes(records), columns, topics, store_host=host, prop_crc=True, max_body_bytes=1024)


def test_a_body_over_the_limit_is_refused() -> None:
    records, columns, topics = _one()
    with pytest.raises(BatchError, match="body length"):
        check_batch(bytes(records), columns, topics, store_host=STORE, prop_crc=True, max_body_bytes=4)
