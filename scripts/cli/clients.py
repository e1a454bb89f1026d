"""What the clients of a running broker on the command line share (``produce`` in
``mqstore.scripts.cli.produce``, ``consume`` in ``mqstore.scripts.cli.consume``), and the offline
``query``'s questions when a broker holds the store.

Each finds the broker from ``--store`` (its ipc sockets in the run directory derived from the store's
path) or ``--tcp``. No socket there means no broker: said at once, before any request waits for an
answer; a socket that nobody answers is said after the request's timeout. Failures are said with
their reasons on stderr; Ctrl-C stops a command with the summary of what it did so far (exit 130).
"""

from __future__ import annotations

import argparse
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mqstore.engine.errors import MqstoreError
from mqstore.ipc.transport.curve import DEFAULT_CLIENT, CurveKeys
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.scripts.cli.arguments import host_port
from mqstore.scripts.cli.output import json_body

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


class NoBrokerError(MqstoreError, ConnectionError):
    """No broker runs where a client command looks for one: the reason says where it looked."""


class CtrlC:
    """Ctrl-C as KeyboardInterrupt, except inside ``held_back()``: there it waits for the block's end, so a
    summary counts exactly what was printed. (Python runs signal handlers in the main thread, between
    bytecodes, whichever thread the kernel handed the signal to.)"""

    def __init__(self) -> None:
        self.held = self.pending = False

    def __enter__(self) -> CtrlC:
        self.previous = signal.signal(signal.SIGINT, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.held:
            self.pending = True
        else:
            raise KeyboardInterrupt

    @contextmanager
    def held_back(self) -> Iterator[None]:
        self.held = True
        try:
            yield
        finally:
            self.held = False
            if self.pending:
                raise KeyboardInterrupt


def add_connection_arguments(cmd: Any) -> None:
    """Where a client command finds the broker when not by ``--store``: ``--tcp``, with CURVE keys."""
    cmd.add_argument("--tcp", metavar="HOST:PORT", type=host_port, help="the broker's [ipc] tcp_host and "
                     "tcp_base_port (default: its ipc sockets, found from --store)")
    cmd.add_argument("--curve-keys", type=Path, metavar="DIR",
                     help="CURVE key directory with server.key and CLIENT.key_secret")
    cmd.add_argument("--client", default=DEFAULT_CLIENT,
                     help=f"CURVE client name in --curve-keys ({DEFAULT_CLIENT})")


def client_endpoints(args: argparse.Namespace) -> Endpoints:
    """Where a client command finds the broker: its ipc sockets, or TCP (with CURVE keys when given).
    Raises NoBrokerError when the run directory has no socket for it: no broker runs on that store."""
    if not args.tcp:
        endpoints = Endpoints.for_store(args.store)
        if not endpoints.socket_exists("ingress"):
            raise NoBrokerError(f"no broker runs on {args.store}: its run directory {endpoints.run_dir} has no "
                                f"sockets (start one with mqstore start --store {args.store})")
        return endpoints
    host, tcp_base_port = args.tcp
    curve = CurveKeys.for_client(args.curve_keys, args.client) if args.curve_keys else None
    return Endpoints.for_store(args.store, tcp_host=host, tcp_base_port=tcp_base_port, curve=curve)


def no_answer(args: argparse.Namespace, timeout_ms: int) -> NoBrokerError:
    """What a client command says when its request got no answer: no broker serves those sockets."""
    if args.tcp:
        where = "{}:{}".format(*args.tcp)
        return NoBrokerError(f"no broker answers on {where} within {timeout_ms} ms (is it running there?)")
    run_dir = Endpoints.for_store(args.store).run_dir
    return NoBrokerError(f"no broker answers on {args.store} within {timeout_ms} ms: its sockets are in {run_dir}, "
                         f"but nothing serves them (a broker that was killed leaves them behind; start one with "
                         f"mqstore start --store {args.store})")


def message_json(m: Any) -> dict[str, Any]:
    """A received message, JSON-ready, in the same shape as the offline query's records."""
    body, encoding = json_body(m.body)
    return {"type": "record", "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "phys_offset": m.phys_offset, "size": m.size, "flag": m.flag, "sys_flag": m.sys_flag, "tags": m.tags,
            "keys": list(m.keys), "properties": dict(m.properties), "body": body, "encoding": encoding,
            "born_ms": m.born_ms, "born_host": f"{m.born_host[0]}:{m.born_host[1]}", "store_ms": m.store_ms,
            "store_host": f"{m.store_host[0]}:{m.store_host[1]}", "reconsume_times": m.reconsume_times,
            "msg_id": m.msg_id, "uniq_key": m.uniq_key}


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
