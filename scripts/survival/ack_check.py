"""Acknowledged sends checked against a stopped broker's store: the promise every survival harness
(``mqstore.scripts.survival.chaos``, ``mqstore.scripts.survival.full_disk``) and the broker's integration tests hold
the store to. An acknowledged send is a (topic, queue, queue offset, body digest) tuple, as
``mqstore.scripts.survival.send_log`` logs each SEND_OK (the digest: ``send_log.digest``, sha256 hex)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mqstore.engine import MessageStore
from mqstore.scripts.survival.send_log import digest as body_digest


@dataclass(slots=True)
class AckCheck:
    """Acknowledged sends checked against a stopped broker's store: a few examples of each failure."""

    acked: int = 0
    lost: list[str] = field(default_factory=list)           # not readable at its queue offset
    garbled: list[str] = field(default_factory=list)        # readable with another body
    offset_reused: list[str] = field(default_factory=list)  # one queue offset acknowledged twice
    expired: list[str] = field(default_factory=list)        # below the queue's min: retention deleted it
    counts: dict[str, int] = field(default_factory=lambda: {"lost": 0, "garbled": 0, "offset_reused": 0,
                                                            "expired": 0})

    def add(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        examples: list[str] = getattr(self, kind)
        if len(examples) < 5:
            examples.append(what)

    @property
    def ok(self) -> bool:
        return self.acked > 0 and not any(n for kind, n in self.counts.items() if kind != "expired")


def check_acked(store_dir: Path, acked: Iterable[tuple[str, int, int, str]]) -> AckCheck:
    """Each acknowledged send, as (topic, queue, queue offset, sha256 hex of the body), must be
    readable exactly once at its queue offset with its body, unless retention deleted its file (a
    full disk deletes the oldest files, RocketMQ's rule). Opens the store offline."""
    check = AckCheck()
    seen: dict[tuple[str, int, int], str] = {}
    for topic, queue, offset, digest in acked:
        check.acked += 1
        where = f"{topic}/{queue}@{offset}"
        if (topic, queue, offset) in seen:
            check.add("offset_reused", where)
        seen[(topic, queue, offset)] = digest
    with MessageStore.open(store_dir) as store:
        for (topic, queue, offset), digest in seen.items():
            where = f"{topic}/{queue}@{offset}"
            got = store.get(topic, queue, offset, max_count=1)
            if offset < got.min_queue_offset:
                check.add("expired", where)
            elif not got.messages or got.messages[0].queue_offset != offset:
                check.add("lost", where)
            elif body_digest(got.messages[0].body) != digest:
                check.add("garbled", where)
    return check
