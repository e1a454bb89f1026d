"""``mqstore bench ...``: the load generator and the benchmarks built on it.

    mqstore bench load    N producers (and M consumers) against a broker: live table, JSON summary
    mqstore bench limits  this machine's copy, write, fsync and ipc limits
    mqstore bench redis   the Redis Streams peer (pipelined XADD, everysec and always)
    mqstore bench sweep   1..k producers and 1..k readers, JSON and a PNG
    mqstore bench suite   all of it in one run, against the issue's targets: JSON and PNG
    mqstore bench roll    send RT on commitlog rolls, spare next file on and off
    mqstore bench replication  a single broker, ASYNC_MASTER and SYNC_MASTER with a slave: rates, lag, HA CPU
    mqstore bench trace   one message's hops (send, append, dispatch, builders, reader, consumer): percentiles

``load`` attaches to the broker running on ``--store``, or with ``--start`` runs its own on a fresh
store in a temp dir (``--flush``, ``--readers``; no remoting front, as the load goes over ipc, so
runs side by side do not contend for its port) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mqstore.scripts.bench import limits as bench_limits
from mqstore.scripts.bench import redis_peer as bench_redis
from mqstore.scripts.cli.arguments import add_store


def add_bench_commands(commands: Any) -> None:
    bench = commands.add_parser("bench", help="load generator and benchmarks (mqstore bench load|limits|...)")
    tools = bench.add_subparsers(dest="tool", required=True, metavar="TOOL")

    load = tools.add_parser("load", help="N producer / M consumer processes against a broker")
    add_workload_arguments(load)
    add_store(load, helptext="the running broker's store directory")
    load.add_argument("--start", action="store_true", help="start a broker on a fresh temp store for the run")
    load.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH", help="with --start")
    load.add_argument("--config", default=None, help="with --start: the broker's config file (broker.toml)")
    load.add_argument("--no-live", action="store_true", help="no live table (it goes to stderr otherwise)")
    load.set_defaults(handler=_load)

    limits = tools.add_parser("limits", help="mmap copy, write + fdatasync, fdatasync rate, ipc round trip")
    bench_limits.add_arguments(limits)
    limits.set_defaults(handler=bench_limits.run)

    redis = tools.add_parser("redis", help="the Redis Streams peer")
    bench_redis.add_arguments(redis)
    redis.set_defaults(handler=bench_redis.run)

    from mqstore.scripts.bench import suite as bench_suite
    from mqstore.scripts.bench import sweep as bench_sweep
    sweep = tools.add_parser("sweep", help="1..k producers and 1..k readers: JSON and a PNG")
    bench_sweep.add_arguments(sweep)
    sweep.set_defaults(handler=bench_sweep.run)

    suite = tools.add_parser("suite", help="limits, workloads, peer and sweep in one run: JSON and PNG")
    bench_suite.add_arguments(suite)
    suite.set_defaults(handler=bench_suite.run)

    from mqstore.scripts.bench import roll as bench_roll
    roll = tools.add_parser("roll", help="send RT on commitlog rolls, the spare next file on and off")
    bench_roll.add_arguments(roll)
    roll.set_defaults(handler=bench_roll.run)

    from mqstore.scripts.bench import replication as bench_replication
    replication = tools.add_parser("replication", help="a single broker, ASYNC_MASTER and SYNC_MASTER with a slave: "
                                   "rates, lag and the HA actors' CPU")
    bench_replication.add_arguments(replication)
    replication.set_defaults(handler=bench_replication.run)

    from mqstore.scripts.bench import trace as bench_trace
    trace = tools.add_parser("trace", help="per-hop send -> consumed percentiles at a rate")
    bench_trace.add_arguments(trace)
    trace.set_defaults(handler=bench_trace.run)


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--producers", type=int, default=1, help="producer processes")
    parser.add_argument("--consumers", type=int, default=0, help="consumer processes")
    parser.add_argument("--readers", type=int, default=1, help="the broker's reader processes")
    parser.add_argument("--body-bytes", type=int, default=128, help="bytes in each message body")
    parser.add_argument("--batch", type=int, default=100, help="messages per send")
    parser.add_argument("--inflight", type=int, default=4, help="batch sends outstanding per producer")
    parser.add_argument("--wire", choices=("columns", "encoded", "map"), default="columns",
                        help="records encoded by the producer from columns (send_encoded_columns) or from message "
                             "objects (send_encoded), or one map per message (send_batch)")
    parser.add_argument("--topics", type=int, default=1, help="topics the messages spread over")
    parser.add_argument("--queues", type=int, default=4, help="queues per topic")
    parser.add_argument("--key-share", type=float, default=0.1, help="share of messages with a key (0.1)")
    parser.add_argument("--tag-share", type=float, default=1.0, help="share of messages with a tag (1.0)")
    parser.add_argument("--rate", default="max", help="msgs/s over all producers, open loop, or 'max'")
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--count", type=int, default=None, help="messages in all (default 100000)")
    bound.add_argument("--duration", type=float, default=None, help="seconds of sending")
    parser.add_argument("--drain-s", type=float, default=30.0, help="how long consumers may trail the producers")


def workload_from(args: argparse.Namespace) -> Any:
    from mqstore.scripts.bench.load import Workload
    count = args.count if args.count is not None or args.duration is not None else 100_000
    return Workload(producers=args.producers, consumers=args.consumers, body_bytes=args.body_bytes, batch=args.batch,
                    topics=args.topics, queues=args.queues, key_share=args.key_share, tag_share=args.tag_share,
                    rate=None if args.rate == "max" else float(args.rate), count=count, duration_s=args.duration,
                    inflight=args.inflight, readers=args.readers, drain_s=args.drain_s, wire=args.wire).validate()


def _load(args: argparse.Namespace) -> int:
    from mqstore.scripts import harness
    from mqstore.scripts.bench.load import run_load
    spec = workload_from(args)
    live = not args.no_live and sys.stderr.isatty()
    if not args.start:
        result = run_load(args.store, spec, live=live)
    else:
        with tempfile.TemporaryDirectory(prefix="mqstore-load-") as work:
            # the load goes over ipc: no remoting front, whose fixed port would keep a second run from starting
            broker = harness.BrokerProcess(Path(work) / "store", "--flush", args.flush, "--readers", str(args.readers),
                                           "--remoting", "off",
                                           config=Path(args.config) if args.config else None).start()
            try:
                result = run_load(broker.store, spec, live=live)
            finally:
                broker.stop()
    print(json.dumps({"benchmark": "load", "machine": {"cpus": os.cpu_count()}, **result.summary}, indent=2))
    return 0 if result.summary["send"]["failed"] == 0 else 1
