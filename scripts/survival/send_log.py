"""Logs the survival harnesses (``mqstore.scripts.survival.chaos``, ``mqstore.scripts.survival.full_disk``) keep of
what producers
were told and what consumers saw, one tab-separated line per message, flushed after every batch:

    ok       topic queue queue_offset body_sha256 msg_id   SEND_OK reached the producer
    doubt    topic -     -            body_sha256 status   no answer (timeout, broker gone) or
                                                            FLUSH_DISK_TIMEOUT: stored or not, unknown
    refused  topic -     -            body_sha256 status   a definite failure: never stored
    seen     topic queue queue_offset body_sha256 -        an offset-mode consumer received it
    received topic queue queue_offset body_sha256 count    an ack-mode consumer received it (count:
                                                            its delivery count), logged before the ack
    acked    topic queue queue_offset body_sha256 status   the broker answered its ack (OK or
                                                            UNKNOWN_RECEIPT)

Every body is unique (producer name and sequence number inside), so its hash names the message.
An ack that gets no answer (its reader killed or frozen, or one reader of a batch that spans two)
may still have been applied, and then the message is never delivered again: what the ack-mode
group received is the ``received`` lines, never only the answered acks.
The producing and consuming loops run in their own processes, killed with SIGTERM at the end.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from mqstore.ipc.client.api import AckConsumer, Consumer, Producer
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.ipc.wire.receipts import Delivery

IN_DOUBT_STATUSES = frozenset({"FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class _Stop:
    """SIGTERM ends the loop between two requests."""

    def __init__(self) -> None:
        self.requested = False
        logging.getLogger("mqstore.client").setLevel(logging.ERROR)  # retries under chaos are expected
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


def produce(store: str, log_path: str, name: str, topic: str, batch: int, body_bytes: int,
            pause_ms: int = 0) -> None:
    """Send batches until SIGTERM, logging each message's outcome."""
    stop = _Stop()
    seq = 0
    with open(log_path, "a") as log, Producer(store, timeout_ms=3000, retries=20, retry_backoff_ms=50) as producer:
        while not stop.requested:
            bodies = []
            for _ in range(batch):
                head = f"{name}-{seq}-".encode()
                bodies.append(head + os.urandom(max(0, body_bytes - len(head)) // 2).hex().encode()[:body_bytes])
                seq += 1
            lines = []
            try:
                results = producer.send_batch([{"topic": topic, "body": b, "tags": "T"} for b in bodies])
            except (BrokerTimeoutError, BrokerError) as exc:
                status = "TIMEOUT" if isinstance(exc, BrokerTimeoutError) else f"ERROR:{exc.status}"
                lines = [f"doubt\t{topic}\t-\t-\t{digest(b)}\t{status}" for b in bodies]
                time.sleep(0.05)
            else:
                for b, r in zip(bodies, results, strict=True):
                    if r.ok:
                        lines.append(f"ok\t{topic}\t{r.queue_id}\t{r.queue_offset}\t{digest(b)}\t{r.msg_id}")
                    else:
                        kind = "doubt" if r.status in IN_DOUBT_STATUSES else "refused"
                        reason = r.reason.replace("\t", " ").replace("\n", " ")
                        lines.append(f"{kind}\t{topic}\t-\t-\t{digest(b)}\t{r.status}:{reason}")
            log.write("".join(line + "\n" for line in lines))
            log.flush()
            if pause_ms:
                time.sleep(pause_ms / 1000)


def consume(store: str, log_path: str, group: str, topic: str, ack_mode: bool) -> None:
    """Consume until SIGTERM, by offset (committing) or in ack mode (acking all it receives); a
    client that fails (a broker restarting under it) is opened again."""
    stop = _Stop()
    with open(log_path, "a") as log:
        while not stop.requested:
            try:
                if ack_mode:
                    with AckConsumer(store, group=group, topic=topic, long_poll_ms=300,
                                     visibility_ms=5000) as acker:
                        while not stop.requested:
                            deliveries = acker.receive(max_count=64, timeout_ms=500)
                            if deliveries:
                                record_and_ack(acker, log, topic, deliveries)
                else:
                    with Consumer(store, group=group, topic=topic, start="committed", long_poll_ms=300,
                                  auto_commit_interval_ms=500) as consumer:
                        while not stop.requested:
                            got = consumer.poll(500)
                            if got:
                                log.write("".join(f"seen\t{topic}\t{m.queue_id}\t{m.queue_offset}\t{digest(m.body)}\t-\n"
                                                  for m in got))
                                log.flush()
            except (BrokerError, BrokerTimeoutError, ValueError, OSError) as exc:
                log.write(f"#\t{type(exc).__name__}: {exc}\n")
                log.flush()
                time.sleep(0.2)


def record_and_ack(acker: AckConsumer, log: TextIO, topic: str, got: list[Delivery]) -> None:
    """Log what an ack-mode consumer received, then ack it and log the answers. The deliveries go
    to the log first: an ack that raises may have been applied, in part or in full."""
    log.write("".join(f"received\t{topic}\t{d.queue_id}\t{d.queue_offset}\t{digest(d.body)}\t{d.delivery_count}\n"
                      for d in got))
    log.flush()
    statuses = acker.ack(got)
    log.write("".join(f"acked\t{topic}\t{d.queue_id}\t{d.queue_offset}\t{digest(d.body)}\t{s}\n"
                      for d, s in zip(got, statuses, strict=True)))
    log.flush()


@dataclass(slots=True)
class Logs:
    acked: list[tuple[str, int, int, str]] = field(default_factory=list)   # topic, queue, offset, hash
    doubt: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)                 # hash -> status
    statuses: Counter[str] = field(default_factory=Counter)
    seen: list[tuple[str, int, int, str]] = field(default_factory=list)
    ack_received: list[tuple[str, int, int, str]] = field(default_factory=list)
    ack_statuses: Counter[str] = field(default_factory=Counter)           # answers to acks

    @classmethod
    def read(cls, paths: list[Path]) -> Logs:
        logs = cls()
        for path in paths:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                parts = line.split("\t")
                if len(parts) != 6 or line.startswith("#"):
                    continue
                kind, topic, queue, offset, h, status = parts
                if kind == "ok":
                    logs.acked.append((topic, int(queue), int(offset), h))
                    logs.statuses["SEND_OK"] += 1
                elif kind in ("doubt", "refused"):
                    (logs.doubt.add(h) if kind == "doubt" else logs.refused.__setitem__(h, status))
                    logs.statuses[status.split(":", 1)[0]] += 1
                elif kind == "seen":
                    logs.seen.append((topic, int(queue), int(offset), h))
                elif kind == "received":
                    logs.ack_received.append((topic, int(queue), int(offset), h))
                elif kind == "acked":
                    logs.ack_statuses[status] += 1
        return logs

    def summary(self) -> dict[str, Any]:
        return {"acknowledged": len(self.acked), "in_doubt": len(self.doubt), "refused": len(self.refused),
                "statuses": dict(self.statuses), "offset_consumed": len(self.seen),
                "ack_mode_received": len(self.ack_received), "ack_mode_acked": self.ack_statuses["OK"]}
