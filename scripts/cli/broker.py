"""The broker from the command line: ``start | status | stop``, and ``keys`` (CURVE keys for ZeroMQ
over TCP); its clients' commands are ``mqstore.scripts.cli.clients``.

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
from mqstore.ipc.transport.curve import DEFAULT_CLIENT, CurveError, generate_keys
from mqstore.ipc.wire.replies import StatusReply, StopReply
from mqstore.scripts.cli.arguments import add_store, port, positive
from mqstore.scripts.cli.ha_flags import add_ha_flags, ha_overrides
from mqstore.scripts.cli.mqstore import mqstore_version
from mqstore.scripts.cli.output import local_time, print_status, status_json

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
    from mqstore.actors.remoting.registrar import live_master_elsewhere
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
    problem = store_dir_problem(Path(config.store_dir))
    if problem:
        print(f"mqstore start: {problem}", file=sys.stderr)
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
    refusal = live_master_elsewhere(config)
    if refusal:
        print(f"mqstore start: refused: {refusal}", file=sys.stderr)
        return 2
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


def store_dir_problem(store_dir: Path) -> str:
    """Why ``store_dir`` cannot be a store ("" when it can), found before anything starts or is printed:
    it is made when missing, so a file in its place or on its path is what stops it."""
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return f"{store_dir} is a file, not a directory: --store names the store's directory"
    except OSError as exc:
        return f"cannot make the store directory {store_dir}: {exc.strerror or exc}"
    return ""


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
    from mqstore.actors.metrics.overview import started_ms as process_started_ms  # the dashboard's, the same rule
    version, started_ms = mqstore_version(), process_started_ms(status.pid)
    uptime_s = None if started_ms is None else max(0, int(time.time() * 1000) - started_ms) // 1000
    if args.json:
        print(json.dumps({**status_json(reply), "version": version, "started_ms": started_ms, "uptime_s": uptime_s}))
    else:
        print_status(reply)
        print(f"mqstore {version}; up {_duration(uptime_s)}"
              + ("" if started_ms is None else f", since {local_time(started_ms)}"))
    if not status.ready:
        print(f"mqstore status: not ready, waiting for {'; '.join(status.waiting_for) or 'the actors'}",
              file=sys.stderr)
        return 1
    return 0


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "for an unknown time"
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min")) if n]
    return " ".join(parts[:2]) if parts else f"{secs} s"


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
