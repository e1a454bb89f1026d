"""The producer-encoded fast path carries no transaction records: a half message must reach the
writer's map parse, where ``mqstore.engine.put.rewrite`` stores it on the half topic."""

from __future__ import annotations

import pytest

from mqstore.engine.log.host import Host
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding, EncodingError
from mqstore.ipc.wire.messages import Outgoing

ENCODER = BatchEncoder(Encoding(Host("127.0.0.1", 10911), False, 1 << 20))


@pytest.mark.parametrize("message", [
    Outgoing("Orders", b"x", properties={"TRAN_MSG": "true", "PGROUP": "pg"}),
    Outgoing("Orders", b"x", sys_flag=0x4),
    Outgoing("Orders", b"x", sys_flag=0x8),
    Outgoing("Orders", b"x", prepared_tx_offset=100),
])
def test_transaction_records_are_refused_by_the_encoder(message: Outgoing) -> None:
    with pytest.raises(EncodingError):
        ENCODER.encode([Outgoing("Orders", b"fine"), message])


def test_plain_messages_still_encode() -> None:
    assert ENCODER.encode([Outgoing("Orders", b"fine", sys_flag=0x1)]).count == 1
