"""group_describe's reply keeps its wire names; the client reads it back into the engine's QueueLag."""

from __future__ import annotations

import pytest

from mqstore.engine.read.group_lag import QueueLag
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.group_lag import lag_to_wire, lags_from_wire
from mqstore.ipc.wire.messages import ReplyError


def test_a_queue_lag_crosses_the_wire_under_its_old_names_and_comes_back_whole() -> None:
    lags = [QueueLag("Orders", 3, 5, 1, 9, 4, 1_700_000_000_123), QueueLag("Orders", 0, -1, 0, 0, 0, 0)]
    wire = [lag_to_wire(q) for q in lags]
    assert set(wire[0]) == {"topic", "queue", "committed_offset", "min_offset", "max_offset", "lag", "last_consume_ms"}
    assert lags_from_wire(schema.unpack(schema.pack(schema.ok_reply(1, queues=wire)))["queues"]) == lags


@pytest.mark.parametrize("raw", [None, {"queues": []}, [{"topic": "T"}],
                                 [{**lag_to_wire(QueueLag("T", 0, 0, 0, 0, 0, 0)), "lag": "many"}]])
def test_a_malformed_group_describe_reply_is_a_reply_error(raw: object) -> None:
    with pytest.raises(ReplyError):
        lags_from_wire(raw)
