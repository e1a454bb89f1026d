"""Packed pulls: the engine's stored read path and the client's MessageBatch over what it returns."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest

from mqstore.engine import GetStatus, Host, Message, MessageStore
from mqstore.engine.read.lookup import GetResult, PullLimits, TagFilter, get_messages
from mqstore.ipc.wire.messages import MessageBatch, ReceivedMessage, ReplyError, pack_columns, stored_parts

OpenStore = Callable[..., MessageStore]


def _pull(store: MessageStore, queue_offset: int, *, stored: bool, max_count: int = 32, max_bytes: int = 1 << 20,
          tags: str | None = None) -> GetResult:
    return get_messages(store.queues.get("Orders", 0), store.commitlog, queue_offset,
                        PullLimits(max_count, max_bytes, 1024, 1 << 20), TagFilter.parse(tags),
                        store.commitlog.max_offset, stored=stored)


def _batch(result: GetResult) -> MessageBatch:
    stored = result.stored
    assert stored is not None
    return MessageBatch.from_reply(stored_parts(stored.data, stored.queue_offsets, stored.phys_offsets, stored.sizes))


def _fill(store: MessageStore) -> None:
    store.put_batch([Message("Orders", f"body-{i}".encode(), tags=("Aa", "BB", "C")[i % 3], keys=(f"k{i}",),
                             born_host=Host("::1", 9) if i == 4 else Host("10.0.0.1", 9)) for i in range(12)])
    store.put(Message("Orders", zlib.compress(b"inflated " * 20), sys_flag=0x1))


@pytest.mark.parametrize(("start", "max_count", "max_bytes", "tags"),
                         [(0, 32, 1 << 20, None), (3, 4, 1 << 20, None), (0, 32, 300, None), (0, 32, 1 << 20, "BB"),
                          (1, 32, 1 << 20, "Aa || C"), (0, 32, 1 << 20, "Z"), (13, 32, 1 << 20, None),
                          (20, 32, 1 << 20, None)])
def test_a_stored_pull_answers_what_a_decoded_pull_does(open_store: OpenStore, start: int, max_count: int,
                                                       max_bytes: int, tags: str | None) -> None:
    """Same status, next offset and messages ('Aa' and 'BB' collide on the tag hash), IPv6 hosts and a
    compressed body among them; the stored bytes decode into the same messages."""
    store = open_store()
    _fill(store)
    decoded = _pull(store, start, stored=False, max_count=max_count, max_bytes=max_bytes, tags=tags)
    stored = _pull(store, start, stored=True, max_count=max_count, max_bytes=max_bytes, tags=tags)
    assert (stored.status, stored.next_queue_offset, stored.filtered_count) == (
        decoded.status, decoded.next_queue_offset, decoded.filtered_count)
    assert stored.message_count == decoded.message_count and stored.messages == []
    if decoded.status is GetStatus.FOUND:
        batch = _batch(stored)
        expected = [ReceivedMessage.from_record(r) for r in decoded.messages]
        assert list(batch) == expected
        assert batch.bodies() == [m.body for m in expected]
        assert batch.queue_offsets == [m.queue_offset for m in expected]


def test_a_batch_slices_joins_and_skips_what_was_delivered(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store)
    batch = _batch(_pull(store, 0, stored=True))
    assert batch[-1].body == b"inflated " * 20 and batch[4].born_host == ("::1", 9)
    assert batch.since(10).queue_offsets == [10, 11, 12] and batch.since(0) is batch
    rejoined = MessageBatch.join([batch[:3], batch[3:7].since(5), batch[9:]])
    assert rejoined.queue_offsets == [0, 1, 2, 5, 6, 9, 10, 11, 12]
    assert [m.body for m in rejoined] == [m.body for i, m in enumerate(batch) if i in rejoined.queue_offsets]
    assert len(MessageBatch.empty()) == 0 and not MessageBatch.join([MessageBatch.empty(), MessageBatch.empty()])


def test_a_batch_equals_the_list_of_its_messages(open_store: OpenStore) -> None:
    """Admin.query_by_key answers with a batch decoded when touched, where it answered with a list:
    what compared equal to the list still does, and the batch is no more hashable than a list."""
    store = open_store()
    _fill(store)
    batch = _batch(_pull(store, 0, stored=True))
    messages = list(batch)
    assert batch == messages and messages == batch and batch == tuple(messages) and batch == batch[:]
    assert batch != messages[:-1] and batch[:2] != messages[1:3] and batch != "not messages"
    assert MessageBatch.empty() == [] and batch != []
    with pytest.raises(TypeError):
        hash(batch)


def test_a_packed_reply_whose_parts_disagree_is_refused(open_store: OpenStore) -> None:
    store = open_store()
    _fill(store)
    stored = _pull(store, 0, stored=True).stored
    assert stored is not None
    cols = pack_columns(stored.queue_offsets, stored.phys_offsets, stored.sizes)
    bad: list[dict[str, Any]] = [{"parts": [stored.data], "count": len(stored) + 1, "cols": cols},
                                 {"parts": [stored.data[:-1]], "count": len(stored), "cols": cols},
                                 {"parts": [stored.data], "count": len(stored), "cols": cols[:-8]},
                                 {"parts": [stored.data], "count": "13", "cols": cols},
                                 {"parts": [], "count": len(stored), "cols": cols},
                                 {"parts": [stored.data, b""], "count": len(stored), "cols": cols},
                                 {"parts": ["records"], "count": len(stored), "cols": cols},
                                 {"parts": [stored.data], "count": len(stored), "cols": memoryview(cols)},
                                 {"raw": stored.data, "count": len(stored), "cols": cols},
                                 {"msgs": []}]
    for reply in bad:
        with pytest.raises(ReplyError):
            MessageBatch.from_reply(reply)
    garbled = MessageBatch.from_reply({"parts": [b"\0" * len(stored.data)], "count": len(stored), "cols": cols})
    with pytest.raises(ReplyError):
        garbled[0]
    with pytest.raises(ReplyError):
        garbled.bodies()


def test_a_packed_reply_read_from_memoryviews_is_the_same_batch(open_store: OpenStore) -> None:
    """A reply's parts come back as memoryviews of ZeroMQ's buffers: the batch reads them in place."""
    store = open_store()
    _fill(store)
    stored = _pull(store, 0, stored=True).stored
    assert stored is not None
    reply = stored_parts(stored.data, stored.queue_offsets, stored.phys_offsets, stored.sizes)
    viewed = MessageBatch.from_reply({**reply, "parts": [memoryview(reply["parts"][0])]})
    batch = _batch(_pull(store, 0, stored=True))
    assert viewed == batch and viewed.bodies() == batch.bodies() and viewed[2:5] == batch[2:5]
    assert MessageBatch.join([viewed[:3], viewed[3:]]) == batch
