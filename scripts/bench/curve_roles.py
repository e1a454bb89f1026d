"""What CURVE roles cost the send path: one broker on ZeroMQ over TCP with CURVE (ASYNC_FLUSH),
the same load with no roles file and with one in force, alternating, rounds interleaved so the two
see the same machine.

    python -m mqstore.scripts.bench.curve_roles [--rounds 5] [--count 20000] [--inflight 32]

With a roles file the writer reads each request's first frame without a copy, to learn the key
that sent it (the ZAP handler's User-Id), and looks its roles up (``mqstore.ipc.transport.roles``).
Two loads, ``--inflight`` requests outstanding: ``single`` one 128-byte message a request (where a
per-request cost shows most), ``batch_100`` a hundred a request (the suite's ASYNC row). And what
the writer's receive costs a request, alone (``receive_us``): a CURVE ROUTER in this process drained
of waiting sends as the writer drains its ingress, without and with the key read and its roles
looked up. Prints one JSON object: each load's msgs/s per round and their medians, with roles off
and on, and the receive's microseconds a request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import zmq

from mqstore.ipc.client.api import Admin, BrokerError, Producer
from mqstore.ipc.transport.curve import CurveContext, CurveKeys, generate_keys, read_authorized, start_authenticator
from mqstore.ipc.transport.roles import KeyRoles
from mqstore.ipc.transport.sockets import bind, connect, recv_first, recv_message
from mqstore.ipc.wire import requests, schema
from mqstore.scripts.harness import Broker, free_port_range, wait_for

BODY = b"x" * 128
ROLES = 'client = ["produce"]\n'  # the benchmark's key: it may send, and not delete


def _rate(count: int, per_request: int, inflight: int, send: Callable[[], Future[Any]]) -> float:
    window: deque[Future[Any]] = deque()
    started = time.perf_counter()
    for _ in range(count // per_request):
        if len(window) >= inflight:
            window.popleft().result()
        window.append(send())
    while window:
        window.popleft().result()
    return round(count / (time.perf_counter() - started))


def _roles_in_force(admin: Admin) -> bool:
    try:
        admin.delete_topic("NoSuchTopic")
    except BrokerError:
        return True
    return False


def measure(root: Path, rounds: int, count: int, inflight: int) -> dict[str, Any]:
    broker = Broker(root, tcp_port=free_port_range(12), commitlog=64 * 1024 * 1024, cq=300_000)
    roles_file = broker.keys_dir / "roles.toml"
    rates: dict[str, dict[str, list[float]]] = {mode: {"single": [], "batch_100": []} for mode in ("off", "on")}
    batch = [{"topic": "Bench", "body": BODY} for _ in range(100)]
    with broker, Producer(endpoints=broker.endpoints(), timeout_ms=30_000) as producer, \
            Admin(endpoints=broker.endpoints()) as admin:
        producer.send("Bench", BODY)  # the topic made, the connection up
        for _ in range(rounds):
            for mode in ("off", "on"):
                if mode == "on":
                    roles_file.write_text(ROLES)
                else:
                    roles_file.unlink(missing_ok=True)
                wait_for(lambda m=mode: _roles_in_force(admin) == (m == "on"), 30, f"roles {mode}")
                rates[mode]["single"].append(_rate(count, 1, inflight, lambda: producer.send_async("Bench", BODY)))
                rates[mode]["batch_100"].append(_rate(count * 10, 100, inflight,
                                                      lambda: producer.send_batch_async(batch)))
        broker.stop()
    return {mode: {load: {"msgs_per_s": runs, "median": statistics.median(runs)} for load, runs in loads.items()}
            for mode, loads in rates.items()}


def receive_us(root: Path, requests_count: int = 200_000, fill: int = 1000) -> dict[str, float]:
    """Microseconds a request for the writer's receive of a waiting send on a CURVE ROUTER: ``plain``
    (``recv_message``, what runs without roles), ``with_roles`` (the key read off the first frame,
    ``recv_first``, and the request's role looked up, ``KeyRoles.refusal``)."""
    generate_keys(root)
    (root / "roles.toml").write_text(ROLES)
    server = CurveKeys.for_server(root / "server.key_secret")
    ctx = CurveContext(server)
    client_ctx = CurveContext(CurveKeys.for_client(root))
    auth = start_authenticator(ctx, read_authorized(root / "clients"))
    roles = KeyRoles(root / "clients", server.public)
    send = requests.Send((requests.SendMessage("Bench", BODY),))
    frame = schema.pack(send.encode(1))
    port = free_port_range(1)
    router = bind(ctx, zmq.ROUTER, f"tcp://127.0.0.1:{port}")
    dealer = connect(client_ctx, zmq.DEALER, f"tcp://127.0.0.1:{port}")
    spent = {"plain": 0.0, "with_roles": 0.0}
    try:
        for done in range(0, requests_count, fill):
            mode = "plain" if (done // fill) % 2 else "with_roles"
            for _ in range(fill):
                dealer.send(frame)
            router.poll()
            time.sleep(0.05)  # the rest of the batch through ZeroMQ's I/O thread: only the receive is timed
            started = time.perf_counter()
            for _ in range(fill):
                if mode == "plain":
                    recv_message(router, head=2)
                else:
                    first, user_id = recv_first(router)
                    recv_message(router, head=2, first=first)
                    assert roles.refusal(user_id, send) is None
            spent[mode] += time.perf_counter() - started
    finally:
        router.close(0)
        dealer.close(0)
        auth.stop()
        ctx.destroy(0)
        client_ctx.destroy(0)
    return {mode: round(s * 1e6 / (requests_count / 2), 2) for mode, s in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=20_000, help="single sends a round (batched: ten times more)")
    parser.add_argument("--inflight", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mqstore-curve-roles-") as work:
        out = {"receive_us": receive_us(Path(work) / "receive"),
               **measure(Path(work) / "broker", args.rounds, args.count, args.inflight)}
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
