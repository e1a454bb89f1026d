"""The broker from the command line: ``start | status | stop``, ``produce | consume``, and ``keys``
(CURVE keys for ZeroMQ over TCP).

``start`` runs the supervisor in the foreground (Ctrl-C or SIGTERM stops it in order); the others
find the running broker from the store directory alone (its sockets live in a run directory
derived from the store's path).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from mqstore.actors.config import ASYNC_FLUSH, SYNC_FLUSH, ConfigError, load_config
from mqstore.actors.store_holder import check_store_free
from mqstore.engine import StoreLockedError
from mqstore.engine.meta.metafile import abort_exists
from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.curve import DEFAULT_CLIENT, CurveError, CurveKeys, generate_keys
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.replies import StatusReply, StopReply
from mqstore.scripts.cli.arguments import add_store, host_port, non_negative, port, positive
from mqstore.scripts.cli.ha_flags import add_ha_flags, ha_overrides
from mqstore.scripts.cli.output import print_status, status_json

STOP_WAIT_MS = 60_000  # the supervisor gives each group of actors [supervisor] stop_timeout_ms (10 s)
STOP_POLL_S = 0.02


def add_broker_commands(commands: Any) -> None:
    start = commands.add_parser("start", help="run a broker in the foreground on a store directory")
    add_store(start)
    start.add_argument("--config", type=Path, help="TOML configuration file")
    start.add_argument("--flush", choices=(ASYNC_FLUSH, SYNC_FLUSH), help="flush mode (overrides the config)")
    start.add_argument("--readers", type=positive, help="reader processes (overrides the config)")
    start.add_argument("--remoting", choices=("on", "off"),
                       help="the RocketMQ remoting front for stock clients (on, unless the config says otherwise)")
    start.add_argument("--remoting-port", type=port, help="its TCP port (10911; NameServer and broker share it)")
    start.add_argument("--namesrv", metavar="HOST:PORT;HOST:PORT",
                       help="NameServers to register this broker with (any broker's front is one), as a RocketMQ "
                            "broker's namesrvAddr")
    start.add_argument("--metrics", choices=("on", "off"), help="Prometheus metrics and the dashboard over HTTP "
                       "(on, unless the config says otherwise)")
    start.add_argument("--metrics-port", type=port, help="their TCP port (9469, on [metrics] host, 127.0.0.1)")
    add_ha_flags(start)
    start.set_defaults(handler=_start)

    for name, helptext in (("status", "show the running broker's actors"), ("stop", "stop the running broker")):
        cmd = commands.add_parser(name, help=helptext)
        add_store(cmd)
        cmd.add_argument("--run-dir", help="the broker's run directory, when it is not the default")
        cmd.add_argument("--timeout-ms", type=positive, default=3000,
                         help="how long to wait for the supervisor's answer (3000)")
        if name == "status":
            cmd.add_argument("--json", action="store_true", help="the supervisor's answer as one JSON object")
        else:
            cmd.add_argument("--wait-ms", type=positive, default=STOP_WAIT_MS,
                             help=f"how long to wait for the broker to exit ({STOP_WAIT_MS})")
            cmd.add_argument("--no-wait", action="store_true", help="ask the broker to stop, and return at once")
        cmd.set_defaults(handler=_status if name == "status" else _stop)

    keys = commands.add_parser("keys", help="CURVE keys for ZeroMQ over TCP: the broker's and its clients'")
    keys.add_argument("--out", type=Path, required=True, help="key directory (the broker's keypair is kept "
                      "when it exists)")
    keys.add_argument("--client", action="append", help=f"a client to make a keypair for ({DEFAULT_CLIENT}); "
                      "repeat for more")
    keys.set_defaults(handler=_keys)


def _keys(args: argparse.Namespace) -> int:
    try:
        written = generate_keys(args.out, args.client or [DEFAULT_CLIENT])
    except CurveError as exc:
        print(f"mqstore keys: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    print(f"mqstore keys: broker config [ipc] curve_secret_key = \"{args.out / 'server.key_secret'}\", "
          f"curve_clients_dir = \"{args.out / 'clients'}\"; a client needs server.key and its NAME.key_secret",
          file=sys.stderr)
    return 0


def broker_running(store: Path) -> bool:
    try:
        return bool(control_request(store, "ping", timeout_ms=500).get("ok"))
    except ConnectionError:
        return False


def _start(args: argparse.Namespace) -> int:
    from mqstore.actors.supervisor import serve
    overrides: dict[str, dict[str, Any]] = {}
    if args.flush:
        overrides["flush"] = {"mode": args.flush}
    if args.readers is not None:
        overrides["broker"] = {"readers": args.readers}
    overrides["remoting"] = _on_by_default(args, "remoting", args.remoting, args.remoting_port)
    if args.namesrv is not None:
        overrides["remoting"]["namesrv"] = args.namesrv
    overrides["metrics"] = _on_by_default(args, "metrics", args.metrics, args.metrics_port)
    ha_overrides(args, overrides)
    try:
        config = load_config(args.store, args.config, **overrides)
    except ConfigError as exc:
        print(f"mqstore start: {exc}", file=sys.stderr)
        return 2
    try:
        check_store_free(Path(config.store_dir))  # before the port: a running broker holds that too
    except StoreLockedError as exc:
        print(f"mqstore start: {exc}", file=sys.stderr)
        return 2
    front = ""
    if config.remoting.enabled:
        problem = _port_problem(config.remoting.host, config.remoting.port)
        if problem:
            print(f"mqstore start: cannot serve RocketMQ clients on {config.remoting.host}:{config.remoting.port}: "
                  f"{problem} (use --remoting-port, or --remoting off)", file=sys.stderr)
            return 2
        front = "; RocketMQ clients: set_namesrv_addr(\"{}:{}\")".format(*config.remoting.address)
    if config.metrics.enabled:
        problem = _port_problem(config.metrics.host, config.metrics.port)
        if problem:
            print(f"mqstore start: cannot serve metrics on {config.metrics.host}:{config.metrics.port}: {problem} "
                  "(use --metrics-port, or --metrics off)", file=sys.stderr)
            return 2
        front += f"; dashboard: {config.metrics.url}, Prometheus metrics: {config.metrics.url}metrics"
    print(f"mqstore: starting a broker on {config.store_dir} ({config.flush.mode}, {config.broker.readers} "
          f"reader(s)); control at {config.endpoints.control}", file=sys.stderr)
    if config.metrics.enabled:
        print(f"mqstore: dashboard at {config.metrics.url}, Prometheus metrics at {config.metrics.url}metrics",
              file=sys.stderr)

    def ready() -> None:
        print(f"mqstore: ready on {config.store_dir}{front}", file=sys.stderr, flush=True)
    return serve(config, on_ready=ready)


def _on_by_default(args: argparse.Namespace, section: str, switch: str | None, port: int | None) -> dict[str, Any]:
    """The remoting front and the metrics are on for ``mqstore start`` unless the config file's
    section or ``--remoting off`` / ``--metrics off`` says no."""
    values: dict[str, Any] = {}
    if switch is not None:
        values["enabled"] = switch == "on"
    elif args.config is None or "enabled" not in _file_section(args.config, section):
        values["enabled"] = True
    if port is not None:
        values["port"] = port
    return values


def _file_section(path: Path, name: str) -> dict[str, Any]:
    try:
        section = tomllib.loads(path.read_text()).get(name, {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}  # load_config reports it
    return section if isinstance(section, dict) else {}


def _port_problem(host: str, port: int) -> str:
    """Why the front could not listen there ("" when it can), found before any actor starts."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return ""


def _status(args: argparse.Namespace) -> int:
    try:
        reply = control_request(args.store, "status", run_dir=args.run_dir, timeout_ms=args.timeout_ms)
    except ConnectionError as exc:
        print(f"mqstore status: {exc}", file=sys.stderr)
        return 2
    status = StatusReply.decode(reply)
    if args.json:
        print(json.dumps(status_json(reply)))
    else:
        print_status(reply)
    if not status.ready:
        print(f"mqstore status: not ready, waiting for {'; '.join(status.waiting_for) or 'the actors'}",
              file=sys.stderr)
        return 1
    return 0


def _stop(args: argparse.Namespace) -> int:
    """Ask the supervisor to stop, then wait for it to exit: an offline tool run next finds the store
    free. Exit 0 when it stopped cleanly, 1 when it is still running or left the abort marker."""
    try:
        reply = control_request(args.store, "stop", run_dir=args.run_dir, timeout_ms=args.timeout_ms)
    except ConnectionError as exc:
        print(f"mqstore stop: {exc}", file=sys.stderr)
        return 2
    stopping = StopReply.decode(reply)
    pid, store = stopping.pid, stopping.store
    if args.no_wait:
        print(f"mqstore stop: the broker (pid {pid}) is stopping; not waiting for it", file=sys.stderr)
        return 0
    if not _exited(pid, args.wait_ms):
        print(f"mqstore stop: the broker (pid {pid}) is still running after {args.wait_ms} ms; it stops its "
              "actors in order (its log says which it waits for), --wait-ms waits longer", file=sys.stderr)
        return 1
    if abort_exists(store):
        print(f"mqstore stop: the broker (pid {pid}) exited, but not cleanly: the abort marker is kept, so "
              f"the next start recovers {store} abnormally (its log says why)", file=sys.stderr)
        return 1
    print(f"mqstore stop: stopped cleanly (pid {pid} exited)", file=sys.stderr)
    return 0


def _exited(pid: int, wait_ms: int) -> bool:
    """Whether process ``pid`` exits within ``wait_ms``; a zombie its parent has not reaped has."""
    import psutil
    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        try:
            if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(STOP_POLL_S)


# -- produce / consume / query against a running broker ----------------------------------------------


def _add_tcp_arguments(cmd: Any) -> None:
    cmd.add_argument("--tcp", metavar="HOST:PORT", type=host_port, help="the broker's [ipc] tcp_host and "
                     "tcp_base_port (default: its ipc sockets, found from --store)")
    cmd.add_argument("--keys", type=Path, help="CURVE key directory with server.key and CLIENT.key_secret")
    cmd.add_argument("--client", default=DEFAULT_CLIENT, help=f"CURVE client name in --keys ({DEFAULT_CLIENT})")


def client_endpoints(args: argparse.Namespace) -> Endpoints:
    """Where a client command finds the broker: its ipc sockets, or TCP (with CURVE keys when given)."""
    if not args.tcp:
        return Endpoints.for_store(args.store)
    host, tcp_base_port = args.tcp
    curve = CurveKeys.for_client(args.keys, args.client) if args.keys else None
    return Endpoints.for_store(args.store, tcp_host=host, tcp_base_port=tcp_base_port, curve=curve)


def add_client_commands(commands: Any) -> None:
    produce = commands.add_parser("produce", help="send messages to a running broker")
    add_store(produce, helptext="the broker's store directory")
    _add_tcp_arguments(produce)
    produce.add_argument("--topic", required=True, help="the topic to send to")
    produce.add_argument("--body", default="hello from mqstore", help="message body text (a counter is appended)")
    produce.add_argument("--count", type=positive, default=1, help="messages to send")
    produce.add_argument("--batch", type=positive, default=100, help="messages per request (100)")
    produce.add_argument("--tags", help="the messages' tag")
    produce.add_argument("--key-prefix", help="key of message i is PREFIX-i")
    produce.add_argument("--queue", type=non_negative, help="send to this queue id (default: round robin)")
    produce.add_argument("--json", action="store_true", help="one JSON result per line (status, queue_id, ...)")
    produce.set_defaults(handler=_produce)

    consume = commands.add_parser("consume", help="pull messages from a running broker")
    add_store(consume, helptext="the broker's store directory")
    _add_tcp_arguments(consume)
    consume.add_argument("--topic", required=True, help="the topic to consume")
    consume.add_argument("--group", default="mqstore-cli", help="consumer group")
    consume.add_argument("--tags", default="*", help="subscription, e.g. 'TagA || TagB'")
    consume.add_argument("--from", dest="start", choices=("committed", "earliest", "latest"), default="committed",
                         help="where to start: the group's committed offsets, or each queue's first or end")
    consume.add_argument("--count", type=positive, default=10, help="stop after this many messages (10)")
    consume.add_argument("--timeout-ms", type=positive, default=3000, help="stop after this long without messages")
    consume.add_argument("--json", action="store_true", help="one JSON message per line (topic, queue_id, ...)")
    consume.add_argument("--ack", action="store_true",
                         help="ack mode: each message comes with a receipt and is acked once printed")
    consume.add_argument("--visibility-ms", type=positive, help="ack mode: redeliver what is not acked within this")
    consume.add_argument("--prefetch", type=positive, help="ack mode: unacked messages per queue at most")
    consume.add_argument("--no-ack", dest="settle", action="store_const", const="none", default="ack",
                         help="ack mode: receive without acking (they come back after the visibility timeout)")
    consume.add_argument("--nack", dest="settle", action="store_const", const="nack",
                         help="ack mode: nack with requeue instead of acking")
    consume.add_argument("--dead-letter", dest="settle", action="store_const", const="dlq",
                         help="ack mode: nack without requeue: each message goes to %%DLQ%%{group}")
    consume.set_defaults(handler=_consume)


def message_json(m: Any) -> dict[str, Any]:
    """A received message, JSON-ready, in the same shape as the offline query's records."""
    from mqstore.scripts.cli.output import json_body
    body, encoding = json_body(m.body)
    return {"type": "record", "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "phys_offset": m.phys_offset, "size": m.size, "flag": m.flag, "sys_flag": m.sys_flag, "tags": m.tags,
            "keys": list(m.keys), "properties": dict(m.properties), "body": body, "encoding": encoding,
            "born_ms": m.born_ms, "born_host": f"{m.born_host[0]}:{m.born_host[1]}", "store_ms": m.store_ms,
            "store_host": f"{m.store_host[0]}:{m.store_host[1]}", "reconsume_times": m.reconsume_times,
            "msg_id": m.msg_id, "uniq_key": m.uniq_key}


def _produce(args: argparse.Namespace) -> int:
    from mqstore.ipc.client.api import Producer
    sent = failed = 0
    with Producer(endpoints=client_endpoints(args)) as producer:
        for start in range(0, args.count, args.batch):
            batch = [{"topic": args.topic, "body": f"{args.body} {i}".encode(), "tags": args.tags,
                      "keys": [f"{args.key_prefix}-{i}"] if args.key_prefix else [], "queue_id": args.queue}
                     for i in range(start, min(args.count, start + args.batch))]
            for result in producer.send_batch(batch):
                if args.json:
                    print(json.dumps({"status": result.status, "msg_id": result.msg_id, "queue_id": result.queue_id,
                                      "queue_offset": result.queue_offset, "reason": result.reason}))
                sent += result.ok
                failed += not result.ok
    print(f"mqstore produce: {sent} sent, {failed} failed", file=sys.stderr)
    return 0 if failed == 0 else 1


def _consume(args: argparse.Namespace) -> int:
    if args.ack:
        return _consume_acked(args)
    from mqstore.ipc.client.api import Consumer
    received = 0
    with Consumer(endpoints=client_endpoints(args), group=args.group, topic=args.topic, tags=args.tags,
                  start=args.start) as consumer:
        while received < args.count:
            batch = consumer.poll(args.timeout_ms, max_count=args.count - received)
            if not batch:
                break
            for m in batch:
                print(json.dumps(message_json(m)) if args.json else
                      f"{m.topic}/{m.queue_id}@{m.queue_offset} tags={m.tags} keys={','.join(m.keys)} "
                      f"{m.body[:80]!r}")
            received += len(batch)
        consumer.commit()
    print(f"mqstore consume: {received} received", file=sys.stderr)
    return 0


def _consume_acked(args: argparse.Namespace) -> int:
    from mqstore.ipc.client.ack_consumer import AckConsumer
    received = 0
    with AckConsumer(endpoints=client_endpoints(args), group=args.group, topic=args.topic, tags=args.tags,
                     prefetch=args.prefetch, visibility_ms=args.visibility_ms) as consumer:
        while received < args.count:
            batch = consumer.receive(args.count - received, args.timeout_ms)
            if not batch:
                break
            for d in batch:
                print(json.dumps({**message_json(d), "redelivered": d.redelivered,
                                  "delivery_count": d.delivery_count}) if args.json else
                      f"{d.topic}/{d.queue_id}@{d.queue_offset} redelivered={d.redelivered} "
                      f"delivery_count={d.delivery_count} tags={d.tags} {d.body[:80]!r}")
            if args.settle == "ack":
                statuses = consumer.ack(batch)
            elif args.settle in ("nack", "dlq"):
                statuses = consumer.nack(batch, requeue=args.settle == "nack")
            else:
                statuses = ["OK"] * len(batch)
            refused = [s for s in statuses if s != "OK"]
            if refused:
                print(f"mqstore consume: {len(refused)} not settled: {refused[0]}", file=sys.stderr)
            received += len(batch)
    verb = {"ack": "acked", "nack": "nacked (requeued)", "dlq": "dead-lettered", "none": "left unacked"}
    print(f"mqstore consume: {received} received and {verb[args.settle]}", file=sys.stderr)
    return 0


def query_broker(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The offline query's questions asked of a running broker's readers."""
    from mqstore.ipc.client.api import Admin, Consumer
    with Admin(args.store) as admin:
        if args.key is not None:
            found = admin.query_by_key(args.topic, args.key)
        elif args.msg_id is not None:
            one = admin.view_by_id(args.msg_id)
            found = [one] if one is not None else []
        elif args.uniq_key is not None:
            topics = [args.topic] if args.topic else sorted(admin.topics())
            found = [m for t in topics for m in admin.query_by_uniq_key(t, args.uniq_key)]
        else:
            with Consumer(args.store, group="mqstore-cli-query", topic=args.topic, queues=[args.queue],
                          tags=args.tags or "*", start="earliest", auto_commit=False) as consumer:
                consumer.seek(args.queue, args.offset)
                found = consumer.messages(args.count, timeout_ms=1000)
    return [message_json(m) for m in found]
