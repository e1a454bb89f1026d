"""The supervisor's control client: one request (``status``, ``stop``, ``ping``) to a running
broker's control socket, found from the store directory alone.

The control socket is the supervisor's REP, always an ``ipc://`` socket in the broker's private run
directory (``mqstore.ipc.transport.endpoints``): administration never goes over TCP. A request that gets no answer
within its timeout (no broker runs on that store, or it is stuck) raises ``ConnectionError``; the
supervisor's reply comes back as it is, a refusal (``ok`` false) included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import zmq

from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests import SUPERVISOR, Request


def control_request(store: Path | str, op: str | Request, *, run_dir: str | None = None,
                    timeout_ms: int = 3000) -> dict[str, Any]:
    """One request to the supervisor's control socket; raises ConnectionError when nobody answers."""
    endpoints = Endpoints.for_store(store, run_dir=run_dir)
    # the control socket is trusted only in a run directory of this user's; what is missing is not made:
    # asking leaves nothing behind, and removes nothing a broker starting at this instant has just made
    endpoints.prepare(create=False)
    if not endpoints.socket_exists("control"):
        raise ConnectionError(f"no broker runs on {store}: no control socket in its run directory "
                              f"{endpoints.run_dir}")
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        sock = connect(ctx, zmq.REQ, endpoints.control, rcvtimeo_ms=timeout_ms)
        sock.send(schema.pack(_request(op).encode(1) if isinstance(op, Request) or op in SUPERVISOR.ops
                              else schema.request(op, 1)))  # an op it does not serve: to hear its refusal
        try:
            reply = schema.unpack(sock.recv())
        except zmq.Again:
            raise ConnectionError(f"no broker answers for {store} within {timeout_ms} ms: its control socket in "
                                  f"{endpoints.run_dir} is there, but nothing serves it (a broker that was killed "
                                  "leaves it behind)") from None
        return reply
    finally:
        ctx.destroy(linger=0)


def _request(op: str | Request) -> Request:
    """The supervisor's request of an op it serves, by its class or its name (``status``, ``stop``, ``ping``)."""
    return op if isinstance(op, Request) else SUPERVISOR.ops[op]()
