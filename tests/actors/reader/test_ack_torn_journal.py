"""A reader recovering an ack-mode queue after a power cut checks every publish its journal replays
against the commitlog (the message of that queue at that seq, at that offset, of that size): a lost
journal page makes the publish it cuts through name offset 0, which the reader would otherwise hand
out as the message (and drop it as gone, acking a message never delivered)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.reader.ack_groups import AckGroups
from mqstore.actors.reader.ack_queue import msg_id_prefix
from mqstore.actors.reader.state import PublishedStore
from mqstore.engine import Geometry, MessageStore, StoreConfig
from mqstore.engine.ackindex.codec import JOURNAL_PUB_SIZE
from mqstore.engine.ackindex.files import JOURNAL_FILE_NAME
from mqstore.engine.ackindex.low_water import QUEUE_INDEX_DIR
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex
from mqstore.engine.log.message import Message

GEOMETRY = Geometry(commitlog_file_size=256 * 1024, cq_entries_per_file=1024, index_slot_count=16,
                    index_entry_count=64)
PAGE = 4096
COUNT = 200


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.term()


def test_a_torn_journal_page_is_not_taken_for_a_publish(tmp_path: Path, ctx: zmq.Context[Any]) -> None:
    store_dir = tmp_path / "store"
    with MessageStore.open(store_dir, StoreConfig(geometry=GEOMETRY)) as store:
        store.put_batch([Message("T", b"m%d" % i) for i in range(COUNT)])
        cq = store.queues.get("T", 0)
        assert cq is not None
        located = [(seq, phys, size) for seq, (phys, size, _) in enumerate(cq.read(0, COUNT).tolist())]
    config = load_config(store_dir)
    prefix = msg_id_prefix(config.store.store_host.packed)
    queue_dir = store_dir / QUEUE_INDEX_DIR / "G" / "T" / "0"
    index = QueueIndex.open(queue_dir)
    index.publish_many(PublishEntry(seq, prefix + phys.to_bytes(8, "big"), size) for seq, phys, size in located)
    index.close(clean=False)  # the power cut: then the journal's second page is lost
    journal = queue_dir / JOURNAL_FILE_NAME
    data = bytearray(journal.read_bytes())
    data[PAGE:2 * PAGE] = bytes(PAGE)
    journal.write_bytes(bytes(data))
    straddling = PAGE // JOURNAL_PUB_SIZE

    published = PublishedStore(store_dir, GEOMETRY, index_enabled=False, now_ms=lambda: 0)
    groups = AckGroups(config, 0, published, ctx=ctx, ingress=config.endpoints.ingress, now_ms=lambda: 0)
    q = groups.queues.get(("G", "T", 0), create=False)
    assert q is not None
    try:
        assert [(m.seq, m.phys_offset, m.size) for m in q.fresh] == located[:straddling]
        assert q.index.recovery.rejected_publish
        assert q.scan_from == straddling  # the rest is indexed again from the consume queue
    finally:
        q.close(clean=False)
        published.close()
