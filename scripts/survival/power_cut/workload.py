"""The power-cut harness's broker and the load it runs under, with the client's log of every answer.

- ``broker_for``: a broker as a user starts it (``mqstore start``: the supervisor in the foreground,
  which launches every actor) on a tiny-geometry store, so commitlog, consume-queue and index files
  roll after a few records; short delay levels (``1s 2s``), a 100 ms timer, quick offset persistence,
  a 1 s ack visibility timeout. The same configuration serves the broker under load and the broker
  that recovers a crash image.
- ``main`` (``python -m mqstore.scripts.survival.power_cut.workload STORE LOG_DIR SEED``): the load,
  four threads in one client process (a process outside the broker's tree, killed at the cut):
  plain sends in batches to ``PLAIN_TOPICS`` (keys, two tags, a queue named or left to the writer);
  single delayed, timer and transactional (committed or rolled back) sends; an offset-mode group on
  ``OFFSET_TOPIC`` committing its positions; an ack-mode group on ``ACK_TOPIC`` acking what it gets.
- ``Journal``: the logs read back.

Logs, one line per answer, flushed at once: ``plain.log``, ``offsets.log`` and ``acks.log`` in
``mqstore.scripts.survival.send_log``'s format (``ok``/``doubt``/``refused``, ``seen``, ``received``/``acked``),
plus ``commit TOPIC QUEUE POSITION - -`` lines once a commit is answered; ``special.log``: one JSON
object per delayed, timer or transactional send. What a consumer got is logged before it commits
or acks, so a group's stored progress never passes what its log says it received.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mqstore.ipc.client.api import AckConsumer, Admin, Consumer, Outgoing, Producer, TransactionState
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.scripts.harness import Broker
from mqstore.scripts.survival.send_log import IN_DOUBT_STATUSES, Logs, digest, record_and_ack

COMMITLOG_FILE_SIZE = 64 * 1024
CQ_ENTRIES_PER_FILE = 64
QUEUES = 4
OFFSET_TOPIC, ACK_TOPIC = "PcOrders", "PcPayments"
PLAIN_TOPICS = (OFFSET_TOPIC, ACK_TOPIC)
DELAY_TOPIC, TIMER_REAL_TOPIC, TX_TOPIC = "PcLater", "PcTimed", "PcTx"
OFFSET_GROUP, ACK_GROUP, TX_GROUP = "pc-offsets", "pc-acks", "pc-tx"
DELAY_LEVELS_MS = (1000, 2000)
TIMER_DELAYS_MS = (100, 1500)
CLIENT_TIMEOUT_MS = 3000
STORE_TOML = (f'\n[store]\nmessage_delay_level = "{" ".join(f"{ms // 1000}s" for ms in DELAY_LEVELS_MS)}"\n'
              "timer_precision_ms = 100\n")
BROKER_TOML = ("offset_persist_interval_ms = 100\nack_visibility_timeout_ms = 1000\nack_retry_first_level = 0\n"
               "ack_idle_flush_ms = 200\ntransaction_timeout_ms = 1000\ntransaction_check_interval_ms = 500\n"
               "transaction_check_max = 2")
LOGS = ("plain.log", "offsets.log", "acks.log")
SPECIAL_LOG = "special.log"


def broker_for(root: Path, mode: str, store: Path | None = None) -> Broker:
    """The broker on ``store`` (``root/store`` by default), its config and log under ``root``."""
    return Broker(root, mode=mode, commitlog=COMMITLOG_FILE_SIZE, cq=CQ_ENTRIES_PER_FILE, extra_toml=STORE_TOML,
                  broker_extra=BROKER_TOML, flap_restarts=1_000_000, store=store)


def body_for(name: str, seq: int, rng: random.Random) -> bytes:
    head = f"{name}-{seq}-".encode()
    return head + rng.randbytes(rng.randint(8, 96)).hex().encode()


def _forever(log: TextIO, work: Callable[[], None]) -> None:
    """Run ``work`` again whenever a broker error ends it (a client made before the broker was ready)."""
    while True:
        try:
            work()
        except (BrokerError, BrokerTimeoutError, ValueError, OSError) as exc:
            log.write(f"#\t{type(exc).__name__}: {exc}\n")
            log.flush()
            time.sleep(0.1)


def plain_sends(store: str, log: TextIO, rng: random.Random) -> None:
    seq = 0
    with Producer(store, timeout_ms=CLIENT_TIMEOUT_MS, retries=5, retry_backoff_ms=20) as producer:
        while True:
            batch = []
            for _ in range(rng.randint(1, 6)):
                queue = rng.choice((None, *range(QUEUES)))
                batch.append(Outgoing(rng.choice(PLAIN_TOPICS), body_for("plain", seq, rng), tags=rng.choice("AB"),
                                      keys=(f"k{seq}",), queue_id=queue))
                seq += 1
            try:
                results = producer.send_batch(batch)
            except (BrokerTimeoutError, BrokerError) as exc:
                status = "TIMEOUT" if isinstance(exc, BrokerTimeoutError) else f"ERROR:{exc.status}"
                lines = [f"doubt\t{m.topic}\t-\t-\t{digest(m.body)}\t{status}" for m in batch]
            else:
                lines = []
                for m, r in zip(batch, results, strict=True):
                    if r.ok:
                        lines.append(f"ok\t{m.topic}\t{r.queue_id}\t{r.queue_offset}\t{digest(m.body)}\t{r.msg_id}")
                    else:
                        kind = "doubt" if r.status in IN_DOUBT_STATUSES else "refused"
                        lines.append(f"{kind}\t{m.topic}\t-\t-\t{digest(m.body)}\t{r.status.value}")
            log.write("".join(line + "\n" for line in lines))
            log.flush()
            time.sleep(0.003)


def special_sends(store: str, log: TextIO, rng: random.Random) -> None:
    """Delayed, timer and transactional sends, one at a time, each logged once answered."""
    seq = 0
    local: dict[str, TransactionState] = {}
    with Producer(store, timeout_ms=CLIENT_TIMEOUT_MS, retries=5, retry_backoff_ms=20) as producer:
        while True:
            roll = rng.random()
            body = body_for("special", seq, rng)
            seq += 1
            entry: dict[str, Any] = {"digest": digest(body)}
            if roll < 0.6:
                delayed = roll < 0.3
                if delayed:
                    level = rng.randint(1, len(DELAY_LEVELS_MS))
                    entry.update(kind="delay", topic=DELAY_TOPIC, level=level)
                    props = {"DELAY": str(level)}
                else:
                    delay_ms = rng.randint(*TIMER_DELAYS_MS)
                    entry.update(kind="timer", topic=TIMER_REAL_TOPIC, delay_ms=delay_ms)
                    props = {"TIMER_DELAY_MS": str(delay_ms)}
                try:
                    result = producer.send(entry["topic"], body, tags="S", keys=(f"s{seq}",), properties=props)
                except (BrokerTimeoutError, BrokerError) as exc:
                    entry.update(status=f"doubt:{type(exc).__name__}")
                else:
                    entry.update(status=result.status.value, queue=result.queue_id, queue_offset=result.queue_offset,
                                 phys=result.phys_offset)
            else:
                state = TransactionState.COMMIT if roll < 0.85 else TransactionState.ROLLBACK
                entry.update(kind="tx", topic=TX_TOPIC, state=state.name)
                message = Outgoing(TX_TOPIC, body, tags="X", keys=(f"s{seq}",))

                def execute(m: Outgoing, r: Any, state: TransactionState = state) -> TransactionState:
                    local[digest(m.body)] = state
                    return state
                try:
                    done = producer.send_transactional(message, execute,
                                                       lambda m: local.get(digest(m.body), TransactionState.ROLLBACK),
                                                       group=TX_GROUP)
                except (BrokerTimeoutError, BrokerError) as exc:
                    entry.update(status=f"doubt:{type(exc).__name__}")
                else:
                    entry.update(status=done.send.status.value, phys=done.send.phys_offset, end_error=done.end_error)
            log.write(json.dumps(entry) + "\n")
            log.flush()
            time.sleep(0.01)


def offset_group(store: str, log: TextIO) -> None:
    with Consumer(store, group=OFFSET_GROUP, topic=OFFSET_TOPIC, queues=list(range(QUEUES)), start="committed",
                  long_poll_ms=200, auto_commit=False, timeout_ms=CLIENT_TIMEOUT_MS) as consumer:
        next_commit = time.monotonic()
        while True:
            got = consumer.poll(300)
            if got:
                log.write("".join(f"seen\t{OFFSET_TOPIC}\t{m.queue_id}\t{m.queue_offset}\t{digest(m.body)}\t-\n"
                                  for m in got))
                log.flush()
            if time.monotonic() >= next_commit:
                consumer.commit()
                log.write("".join(f"commit\t{OFFSET_TOPIC}\t{q}\t{consumer.position(q)}\t-\t-\n"
                                  for q in consumer.queues))
                log.flush()
                next_commit = time.monotonic() + 0.2


def ack_group(store: str, log: TextIO) -> None:
    with AckConsumer(store, group=ACK_GROUP, topic=ACK_TOPIC, long_poll_ms=200, visibility_ms=1000) as acker:
        while True:
            deliveries = acker.receive(max_count=32, timeout_ms=300)
            if deliveries:
                record_and_ack(acker, log, ACK_TOPIC, deliveries)


def main(argv: list[str] | None = None) -> int:
    """The load, until the process is killed."""
    store, log_dir, seed = (argv if argv is not None else sys.argv[1:])[:3]
    rng = random.Random(int(seed))
    with Admin(store, timeout_ms=CLIENT_TIMEOUT_MS) as admin:
        for topic in (*PLAIN_TOPICS, DELAY_TOPIC, TIMER_REAL_TOPIC, TX_TOPIC):
            admin.create_topic(topic, QUEUES)
    logs = {name: open(Path(log_dir) / name, "a") for name in (*LOGS, SPECIAL_LOG)}  # noqa: SIM115 (until killed)
    loops: list[tuple[TextIO, Callable[[], None]]] = [
        (logs["plain.log"], lambda: plain_sends(store, logs["plain.log"], random.Random(rng.random()))),
        (logs[SPECIAL_LOG], lambda: special_sends(store, logs[SPECIAL_LOG], random.Random(rng.random()))),
        (logs["offsets.log"], lambda: offset_group(store, logs["offsets.log"])),
        (logs["acks.log"], lambda: ack_group(store, logs["acks.log"]))]
    threads = [threading.Thread(target=_forever, args=loop, daemon=True) for loop in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


@dataclass(slots=True)
class Journal:
    """What the load's clients were told, read back from its logs."""

    logs: Logs
    special: list[dict[str, Any]] = field(default_factory=list)
    commits: dict[int, int] = field(default_factory=dict)  # queue -> the last position a commit was answered for

    @classmethod
    def read(cls, log_dir: Path) -> Journal:
        journal = cls(Logs.read([log_dir / name for name in LOGS]))
        special = log_dir / SPECIAL_LOG
        if special.exists():
            for line in special.read_text().splitlines():
                try:
                    journal.special.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # the line the kill cut short
        offsets = log_dir / "offsets.log"
        if offsets.exists():
            for line in offsets.read_text().splitlines():
                parts = line.split("\t")
                if len(parts) == 6 and parts[0] == "commit":
                    journal.commits[int(parts[2])] = int(parts[3])
        return journal

    def summary(self) -> dict[str, int]:
        sent = [s for s in self.special if s.get("status") == "PUT_OK"]
        return {"acknowledged": len(self.logs.acked), "offset_consumed": len(self.logs.seen),
                "ack_mode_received": len(self.logs.ack_received), "delayed": sum(s["kind"] == "delay" for s in sent),
                "timers": sum(s["kind"] == "timer" for s in sent), "transactions": sum(s["kind"] == "tx" for s in sent)}


if __name__ == "__main__":
    sys.exit(main())
