"""Which topics are the broker's own: what listings and the dashboard fold away unless asked."""

from __future__ import annotations

import pytest

from mqstore.engine.put.system_topics import NOT_ALLOWED_SEND_TOPICS, is_system_topic


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
                                   "rmq_sys_wheel_timer", "rmq_sys_moved", "TRANS_CHECK_MAX_TIME_TOPIC",
                                   "%RETRY%Orders", "%DLQ%Orders", "OFFSET_MOVED_EVENT"])
def test_the_brokers_own_topics_are_system_topics(topic: str) -> None:
    assert is_system_topic(topic)


@pytest.mark.parametrize("topic", ["Orders", "RMQ_SYSTEMS", "my%RETRY%", "schedule_topic_xxxx", ""])
def test_a_users_topic_is_not(topic: str) -> None:
    assert not is_system_topic(topic)


def test_every_topic_a_client_may_not_send_to_is_a_system_topic() -> None:
    assert all(is_system_topic(t) for t in NOT_ALLOWED_SEND_TOPICS.names)
