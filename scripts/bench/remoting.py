"""The same load through the stock RocketMQ client (remoting front) and through mqstore's own client.

    python -m mqstore.scripts.bench.remoting --count 20000 [--body-bytes 128] [--acl] [--out FILE.json]

One broker (``mqstore start``, ASYNC_FLUSH, the front on a free loopback port). Each side sends
``count`` messages one synchronous send at a time (tags on, a key each), then a consumer in a new
group takes them all: the stock client's push consumer, mqstore's ``Consumer``. For scale, mqstore's
batched send (100 per request) runs too. The stock client runs in its own process
(``mqstore.scripts.bench.rocketmq_peer``), timed from its first send or delivery to its last. Prints one JSON
object: each figure in msgs/s and the stock client's ratio to mqstore's for the same work. ``--acl``
gives the front an ACL file (``[remoting] acl_file``) and the stock client an account that signs
every request: what the ACL costs, against a run without.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore.ipc.client.api import Consumer, Producer
from mqstore.scripts import harness
from mqstore.scripts.bench.suite import git_commit

ROOT = Path(__file__).resolve().parents[2]


def stock(home: Path, *args: Any) -> dict[str, Any]:
    """Run the stock client quietly; its summary line."""
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.bench.rocketmq_peer", *map(str, args), "--quiet"],
                          cwd=ROOT,
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"the stock client failed: {proc.stderr[-2000:]}")
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return summary


def rate(count: int, seconds: float) -> dict[str, Any]:
    return {"messages": count, "seconds": round(seconds, 3), "msgs_per_s": round(count / seconds) if seconds else 0}


def own_send(store: Path, topic: str, count: int, body_bytes: int, batch: int) -> dict[str, Any]:
    with Producer(store, timeout_ms=30_000) as producer:
        producer.send(topic, b"warm-up")
        start = time.perf_counter()
        sent = 0
        while sent < count:
            n = min(batch, count - sent)
            results = producer.send_batch([{"topic": topic, "body": f"body-{sent + j}".encode().ljust(body_bytes, b"."),
                                            "tags": f"Tag{(sent + j) % 3}", "keys": [f"key-{sent + j}"]}
                                           for j in range(n)])
            if not all(r.ok for r in results):
                raise RuntimeError(f"send failed: {[r for r in results if not r.ok][:1]}")
            sent += n
        return rate(count, time.perf_counter() - start)


def own_consume(store: Path, topic: str, count: int) -> dict[str, Any]:
    with Consumer(store, group="bench-own", topic=topic, start="earliest") as consumer:
        # timed from the first poll: a first poll that brings every message (a fetch holds up to 8 MiB)
        # timed from its return gave a rate of count / ~0
        start = time.perf_counter()
        taken = len(consumer.poll(30_000))
        while taken < count:
            more = consumer.poll(30_000)
            if not more:
                raise RuntimeError(f"only {taken} of {count} messages came")
            taken += len(more)
        return rate(count, time.perf_counter() - start)


ACL_FILE = """\
accounts:
  - accessKey: bench-client
    secretKey: bench-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Stock=PUB|SUB]
    groupPerms: [CG_bench=SUB]
"""
ACCOUNT = ("--access-key", "bench-client", "--secret-key", "bench-secret")


def run(count: int, body_bytes: int, acl: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mqbench-") as tmp:
        root = Path(tmp)
        port = harness.free_port_range(1)
        ns = f"127.0.0.1:{port}"
        config = None
        if acl:
            (root / "plain_acl.yml").write_text(ACL_FILE)
            config = root / "broker.toml"
            config.write_text('[remoting]\nacl_file = "plain_acl.yml"\n')
        broker = harness.BrokerProcess(root / "store", "--remoting", "on", "--remoting-port", str(port),
                                       config=config).start()
        account = ACCOUNT if acl else ()
        try:
            stock_send = stock(root, "produce", ns, "Stock", count, "--size", body_bytes, *account)
            stock_push = stock(root, "push", ns, "Stock", "CG_bench", count, 600, *account)
            own_sync = own_send(root / "store", "Own", count, body_bytes, 1)
            own_batched = own_send(root / "store", "OwnBatch", count, body_bytes, 100)
            own_pull = own_consume(root / "store", "Own", count)
        finally:
            broker.stop()
    stock_send_rate = rate(stock_send["count"], stock_send["elapsed_s"])
    stock_push_rate = rate(stock_push["count"], stock_push["elapsed_s"])
    return {
        "commit": git_commit(), "cpus": os.cpu_count(), "count": count, "body_bytes": body_bytes, "acl": acl,
        "send_one_at_a_time": {"rocketmq_client": stock_send_rate, "mqstore_client": own_sync,
                               "ratio_rocketmq_to_mqstore": round(stock_send_rate["msgs_per_s"]
                                                                  / max(1, own_sync["msgs_per_s"]), 3)},
        "consume_new_group": {"rocketmq_push_consumer": stock_push_rate, "mqstore_consumer": own_pull,
                              "ratio_rocketmq_to_mqstore": round(stock_push_rate["msgs_per_s"]
                                                                 / max(1, own_pull["msgs_per_s"]), 3)},
        "mqstore_send_batch_100": own_batched,
        "stock_send_failures": stock_send["failed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--acl", action="store_true", help="the front checks RocketMQ's ACL; the client signs")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    result = json.dumps(run(args.count, args.body_bytes, args.acl), indent=2)
    print(result)
    if args.out:
        args.out.write_text(result + "\n")


if __name__ == "__main__":
    main()
