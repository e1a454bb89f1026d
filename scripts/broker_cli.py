"""``mqstore start | status | stop``: the broker's lifecycle from the command line.

``start`` runs the supervisor in the foreground (Ctrl-C or SIGTERM stops it in order); ``status``
and ``stop`` talk to its control socket, found from the store directory alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import zmq

from actors.config import ASYNC_FLUSH, SYNC_FLUSH, ConfigError, load_config
from ipc import schema
from ipc.endpoints import Endpoints
from ipc.sockets import connect

DEFAULT_STORE = Path("mqstore-data")


def add_broker_commands(commands: Any) -> None:
    start = commands.add_parser("start", help="run a broker in the foreground on a store directory")
    start.add_argument("--store", type=Path, default=DEFAULT_STORE, help="store directory (./mqstore-data)")
    start.add_argument("--config", type=Path, help="TOML configuration file")
    start.add_argument("--flush", choices=(ASYNC_FLUSH, SYNC_FLUSH), help="flush mode (overrides the config)")
    start.add_argument("--readers", type=int, help="reader processes (overrides the config)")
    start.set_defaults(handler=_start)

    for name, helptext in (("status", "show the running broker's actors"), ("stop", "stop the running broker")):
        cmd = commands.add_parser(name, help=helptext)
        cmd.add_argument("--store", type=Path, default=DEFAULT_STORE, help="store directory (./mqstore-data)")
        cmd.add_argument("--run-dir", help="the broker's run directory, when it is not the default")
        cmd.add_argument("--timeout-ms", type=int, default=3000)
        if name == "status":
            cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(handler=_status if name == "status" else _stop)


def control_request(store: Path, op: str, *, run_dir: str | None = None, timeout_ms: int = 3000) -> dict[str, Any]:
    """One request to the supervisor's control socket; raises ConnectionError when nobody answers."""
    endpoints = Endpoints.for_store(store, run_dir=run_dir)
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        sock = connect(ctx, zmq.REQ, endpoints.control, rcvtimeo_ms=timeout_ms)
        sock.send(schema.pack(schema.request(op, 1)))
        try:
            reply = schema.unpack(sock.recv())
        except zmq.Again:
            raise ConnectionError(f"no broker answers for {store} (is it running?)") from None
        return reply
    finally:
        ctx.destroy(linger=0)


def _start(args: argparse.Namespace) -> int:
    from actors.supervisor import serve
    overrides: dict[str, dict[str, Any]] = {}
    if args.flush:
        overrides["flush"] = {"mode": args.flush}
    if args.readers is not None:
        overrides["broker"] = {"readers": args.readers}
    try:
        config = load_config(args.store, args.config, **overrides)
    except ConfigError as exc:
        print(f"mqstore start: {exc}", file=sys.stderr)
        return 2
    print(f"mqstore: starting a broker on {config.store_dir} ({config.flush.mode}, {config.broker.readers} "
          f"reader(s)); control at {config.endpoints.control}", file=sys.stderr)
    return serve(config)


def _status(args: argparse.Namespace) -> int:
    try:
        reply = control_request(args.store, "status", run_dir=args.run_dir, timeout_ms=args.timeout_ms)
    except ConnectionError as exc:
        print(f"mqstore status: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(reply))
        return 0
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"broker on {reply['store']} (pid {reply['pid']}, {reply['flush_mode']}), "
                        f"written {reply['written']}, flushed {reply['flushed']}")
    for column in ("actor", "pid", "state", "restarts", "cpu %", "rss MiB", "lag bytes"):
        table.add_column(column)
    for name, info in reply["actors"].items():
        table.add_row(name, str(info.get("pid")), str(info.get("state")), str(info.get("restarts")),
                      f"{info.get('cpu_percent', 0):.0f}", f"{info.get('rss_bytes', 0) / 2**20:.1f}",
                      str(info.get("lag_bytes", "")))
    Console().print(table)
    return 0


def _stop(args: argparse.Namespace) -> int:
    try:
        control_request(args.store, "stop", run_dir=args.run_dir, timeout_ms=args.timeout_ms)
    except ConnectionError as exc:
        print(f"mqstore stop: {exc}", file=sys.stderr)
        return 2
    print("mqstore: stopping", file=sys.stderr)
    return 0
