"""Every result carries its status as one enum, a ``str`` as well; a status off the wire that this
client does not know has one rule per kind of result."""

from __future__ import annotations

import json

import pytest

from mqstore.engine import GetStatus, PutStatus
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.messages import ReplyError, SendResult
from mqstore.ipc.wire.receipts import AckStatus


def _sent(status: str, reason: str = "") -> SendResult:
    raw = {"status": status, "msg_id": "ID", "queue": 2, "queue_offset": 7, "phys_offset": 700, "reason": reason}
    return SendResult.from_wire(schema.unpack(schema.pack(schema.ok_reply(1, **raw))))


@pytest.mark.parametrize("status", list(PutStatus))
def test_every_put_status_the_writer_sends_comes_back_as_that_member(status: PutStatus) -> None:
    result = _sent(status.value)
    assert result.status is status and result.status == status.value
    assert result.ok is (status is PutStatus.PUT_OK)
    assert (result.queue_id, result.queue_offset, result.phys_offset) == (2, 7, 700)


def test_a_send_is_stored_when_ok_or_when_only_a_wait_failed_as_rocketmqs_clients_count_it() -> None:
    stored = {s for s in PutStatus if _sent(s.value).stored}
    assert stored == {PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
                      PutStatus.SLAVE_NOT_AVAILABLE}
    assert not _sent("QUORUM_LOST").stored


def test_an_unknown_put_status_is_unknown_error_with_the_brokers_word_kept() -> None:
    result = _sent("QUORUM_LOST", "two replicas of three")
    assert result.status is PutStatus.UNKNOWN_ERROR and not result.ok
    assert "'QUORUM_LOST'" in result.reason and "two replicas of three" in result.reason
    assert "'QUORUM_LOST'" in _sent("QUORUM_LOST").reason


def test_statuses_compare_print_and_serialize_as_their_names() -> None:
    assert PutStatus.PUT_OK == "PUT_OK" and GetStatus.FOUND == "FOUND" and AckStatus.OK == "OK"
    assert f"{PutStatus.FLUSH_DISK_TIMEOUT}" == "FLUSH_DISK_TIMEOUT"
    assert json.dumps([PutStatus.PUT_OK, GetStatus.NO_MESSAGE_IN_QUEUE, AckStatus.NOT_OWNER]) == \
        '["PUT_OK", "NO_MESSAGE_IN_QUEUE", "NOT_OWNER"]'
    assert schema.unpack(schema.pack(schema.ok_reply(1, results=[AckStatus.OK])))["results"] == ["OK"]


def test_ack_statuses_decode_to_members_and_an_unknown_one_is_a_reply_error() -> None:
    assert [AckStatus.from_wire(s.value) for s in AckStatus] == list(AckStatus)
    for raw in ("SETTLED_ELSEWHERE", None, 1):
        with pytest.raises(ReplyError, match="unknown ack status"):
            AckStatus.from_wire(raw)
