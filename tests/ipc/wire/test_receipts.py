"""Ack mode's shared vocabulary: ownership spreads a group's queues over the readers; a delivery
decodes from its wire map with its receipt."""

from __future__ import annotations

from collections import Counter

import pytest

from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.receipts import Delivery, Receipt, ack_owner, dlq_topic


def test_ack_owner_is_stable_and_spreads_a_groups_queues() -> None:
    assert ack_owner("G", "Orders", 3, 1) == 0
    for readers in (2, 3, 4, 8):
        for group in ("G1", "billing", "orders-group"):
            owners = [ack_owner(group, "Orders", q, readers) for q in range(readers * 4)]
            assert Counter(owners) == {r: 4 for r in range(readers)}  # every reader gets its share
            assert owners == [ack_owner(group, "Orders", q, readers) for q in range(readers * 4)]
    with pytest.raises(ValueError):
        ack_owner("G", "T", 0, 0)


def test_delivery_from_the_wire() -> None:
    raw = {"topic": "T", "queue": 2, "queue_offset": 7, "phys_offset": 99, "size": 120, "flag": 0, "sys_flag": 0,
           "tags": "A", "keys": ["k"], "props": {"p": "v"}, "body": b"x", "born_ms": 1, "born_host": ["1.2.3.4", 5],
           "store_ms": 2, "store_host": ["1.2.3.4", 6], "reconsume_times": 0, "msg_id": "AB", "uniq_key": None,
           "seq": 7, "redelivered": True, "delivery_count": 2}
    d = Delivery.from_ack_wire("G", raw)
    assert d.receipt == Receipt("G", "T", 2, 7) and d.redelivered and d.delivery_count == 2 and d.body == b"x"
    assert d.receipt.to_wire() == ["G", "T", 2, 7] and dlq_topic("G") == "%DLQ%G"
    with pytest.raises(ReplyError):
        Delivery.from_ack_wire("G", {**raw, "seq": None})
