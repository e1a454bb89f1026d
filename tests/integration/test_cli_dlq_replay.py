"""``mqstore dlq replay`` through the command against a real broker: each dead letter once on its
original topic, after the command was SIGKILLed between its sends and its commit, and after the
whole broker was SIGKILLed as well."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.ipc.client.api import AckConsumer, Admin, Consumer, Producer
from mqstore.scripts.cli.dlq import CRASH_ENV, REPLAYED_FROM
from mqstore.scripts.harness import ROOT
from tests.integration.broker import Broker, wait_for

pytestmark = pytest.mark.slow
COUNT = 12


def _dead_letters(broker: Broker, topic: str, group: str) -> None:
    with Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch(
            [{"topic": topic, "body": f"m{i}".encode(), "tags": "t", "keys": [f"k{i}"],
              "properties": {"who": "test"}} for i in range(COUNT)]))
    with AckConsumer(broker.store, group=group, topic=topic) as consumer:
        seen: list[object] = []

        def nack_all() -> bool:
            got = consumer.receive(32, timeout_ms=200)
            consumer.nack(got, requeue=False)
            seen.extend(got)
            return len(seen) >= COUNT
        wait_for(nack_all, 30, "every message delivered")
    with Admin(broker.store) as admin:
        wait_for(lambda: admin.queue_info(f"%DLQ%{group}").get(0, (0, 0))[1] == COUNT or None, 30, "the dead letters")


def _replay(broker: Broker, *argv: str, kill_after: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({CRASH_ENV: str(kill_after)} if kill_after is not None else {})}
    return subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "dlq", "replay", *argv,
                           "--store", str(broker.store), "--json"], capture_output=True, text=True, cwd=ROOT,
                          timeout=180, env=env)


def _copies(broker: Broker, topic: str) -> list[tuple[str, bytes, str | None, tuple[str, ...], str | None]]:
    with Consumer(broker.store, group="Check", topic=topic, start="earliest", auto_commit=False) as consumer:
        msgs = consumer.messages(10 * COUNT, timeout_ms=3000)
    return [(m.properties[REPLAYED_FROM], m.body, m.tags, m.keys, m.properties.get("who"))
            for m in msgs if REPLAYED_FROM in m.properties]


def test_a_replay_killed_between_send_and_commit_and_a_killed_broker_leave_one_copy_each(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker:
        _dead_letters(broker, "Orders", "G")
        killed = _replay(broker, "G", "--batch", "5", kill_after=2)  # batch 1 committed, batch 2 sent only
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert len(_copies(broker, "Orders")) == 10
        broker.kill_tree()  # and the broker too, with the second batch's progress not taken
        broker.start()
        done = _replay(broker, "G", "--batch", "5")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"type": "replay", "group": "G", "dlq": "%DLQ%G", "replayed": 2,
                                           "already_replayed": 5, "no_origin": 0}
        copies = _copies(broker, "Orders")
        assert len(copies) == COUNT and len({c[0] for c in copies}) == COUNT  # one per dead letter
        assert sorted(c[1] for c in copies) == sorted(f"m{i}".encode() for i in range(COUNT))
        assert all(c[2] == "t" and c[4] == "test" and c[3][-1] == c[0] for c in copies), copies[:2]
        again = _replay(broker, "G")  # nothing left: nothing sent
        assert again.returncode == 0 and json.loads(again.stdout)["replayed"] == 0, again.stderr
        assert len(_copies(broker, "Orders")) == COUNT


def test_replay_to_another_topic_at_most_n_and_bad_input(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker:
        _dead_letters(broker, "Src", "H")
        some = _replay(broker, "H", "--to", "Elsewhere", "--max", "4")
        assert some.returncode == 0 and json.loads(some.stdout)["replayed"] == 4, some.stderr
        assert len(_copies(broker, "Elsewhere")) == 4
        rest = _replay(broker, "H", "--to", "Elsewhere")
        assert json.loads(rest.stdout)["replayed"] == COUNT - 4, rest.stderr
        assert len(_copies(broker, "Elsewhere")) == COUNT
        none = _replay(broker, "Nobody")
        assert none.returncode == 2 and "no dead letters" in none.stderr and "Traceback" not in none.stderr
