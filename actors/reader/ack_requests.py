"""Ack-mode requests as a reader serves them: the wire's classes (``mqstore.ipc.wire.requests.acks``,
decoded once where the request comes in) with the reader's defaults and the bounds its
configuration sets; a bad field is a ``SchemaError`` (the reader's error boundary turns it into
BAD_REQUEST). Inside a receipt list one bad receipt is one BAD_REQUEST result and the others are
served (``parse_receipt``)."""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.actors.config import BrokerSection
from mqstore.engine.read.lookup import TagFilter
from mqstore.ipc.wire import requests
from mqstore.ipc.wire.requests.acks import AckKey, group_reason, parse_receipt

__all__ = ["AckKey", "AckPull", "AckSpan", "group_reason", "parse_receipt", "resolve_ack_pull", "resolve_ack_span"]


@dataclass(frozen=True, slots=True)
class AckPull:
    """An ``ack_pull`` with the reader's defaults filled in."""

    group: str
    topic: str
    queue_id: int
    consumer: str
    max_count: int
    prefetch: int
    visibility_ms: int
    tag_filter: TagFilter

    @property
    def key(self) -> AckKey:
        return (self.group, self.topic, self.queue_id)


def resolve_ack_pull(request: requests.AckPull, cfg: BrokerSection) -> tuple[AckPull, int]:
    """The pull and its ``wait_ms``."""
    requests.at_most("prefetch", request.prefetch, cfg.ack_prefetch)
    requests.at_most("wait_ms", request.wait_ms, cfg.long_poll_max_ms)
    pull = AckPull(request.group, request.topic, request.queue_id, request.consumer, request.max_count or 32,
                   request.prefetch or cfg.ack_prefetch, request.visibility_ms or cfg.ack_visibility_timeout_ms,
                   TagFilter.parse(request.tags if request.tags is not None else "*"))
    return pull, request.wait_ms or 0


@dataclass(frozen=True, slots=True)
class AckSpan:
    """An ``ack_pull_queues`` with the reader's defaults filled in: ``pull(queue_id, count)`` is one
    queue's part, an ``AckPull`` of at most ``count``."""

    group: str
    topic: str
    queue_ids: tuple[int, ...]
    consumer: str
    max_count: int
    prefetch: int
    visibility_ms: int
    tag_filter: TagFilter

    @property
    def keys(self) -> tuple[AckKey, ...]:
        return tuple((self.group, self.topic, q) for q in self.queue_ids)

    def pull(self, queue_id: int, count: int) -> AckPull:
        return AckPull(self.group, self.topic, queue_id, self.consumer, count, self.prefetch, self.visibility_ms,
                       self.tag_filter)


def resolve_ack_span(request: requests.AckPullQueues, cfg: BrokerSection) -> tuple[AckSpan, int]:
    """The spanning pull and its ``wait_ms`` (the bounds as an ``ack_pull``'s)."""
    requests.at_most("prefetch", request.prefetch, cfg.ack_prefetch)
    requests.at_most("wait_ms", request.wait_ms, cfg.long_poll_max_ms)
    span = AckSpan(request.group, request.topic, request.queue_ids, request.consumer, request.max_count or 32,
                   request.prefetch or cfg.ack_prefetch, request.visibility_ms or cfg.ack_visibility_timeout_ms,
                   TagFilter.parse(request.tags if request.tags is not None else "*"))
    return span, request.wait_ms or 0
