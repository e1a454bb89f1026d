"""``mqstore promote``: a slave whose master is gone becomes the master (in place of RocketMQ's
controller; ``mqstore.actors.promotion`` says what the supervisor does).

A running slave is asked through its control socket and watched until it serves again as a master.
A stopped store is promoted on disk (``mqstore.engine.ha.promotion.promote_store``); start it then
with a master role. Either way a new epoch opens where the slave's log ends, and queue offsets go on
from there without a gap or a reuse.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.actors.store_holder import hold_store
from mqstore.engine.config import resolve_geometry
from mqstore.engine.ha.promotion import promote_store
from mqstore.ipc.transport.control import control_request
from mqstore.ipc.wire.replies import PromoteReply, StatusReply
from mqstore.ipc.wire.requests import Promote
from mqstore.ipc.wire.requests.control import PROMOTED_ROLES
from mqstore.scripts.cli.arguments import add_store, positive

POLL_S = 0.1


def add_promote_command(commands: Any) -> None:
    cmd = commands.add_parser("promote", help="make a slave whose master is gone the master (running or stopped)")
    add_store(cmd, helptext="the slave's store directory")
    cmd.add_argument("--role", choices=PROMOTED_ROLES, default=PROMOTED_ROLES[0], help="the master role it takes")
    cmd.add_argument("--run-dir", help="the broker's run directory, when it is not the default")
    cmd.add_argument("--timeout-ms", type=positive, default=3000, help="how long to wait for the broker to answer")
    cmd.add_argument("--wait-ms", type=positive, default=120_000,
                     help="how long to wait for a running slave to serve again as a master")
    cmd.set_defaults(handler=_promote)


def _promote(args: argparse.Namespace) -> int:
    try:
        reply = control_request(args.store, Promote(args.role), run_dir=args.run_dir, timeout_ms=args.timeout_ms)
    except ConnectionError:
        return _promote_stopped(args)
    answer = PromoteReply.decode(reply)
    if not answer.accepted:
        print(f"mqstore promote: refused: {answer.reason}", file=sys.stderr)
        return 1
    print(f"mqstore promote: {answer.reason}", file=sys.stderr)
    deadline = time.monotonic() + args.wait_ms / 1000
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        try:
            status = StatusReply.decode(control_request(args.store, "status", run_dir=args.run_dir,
                                                        timeout_ms=args.timeout_ms))
        except ConnectionError:
            continue  # between the slave's stop and the master's start
        if status.role == args.role and status.ready:
            epoch = status.actors.get("ha", {}).get("epoch")
            print(f"mqstore promote: serving as {args.role}" + (f" in epoch {epoch}" if epoch else ""),
                  file=sys.stderr)
            return 0
    print(f"mqstore promote: not serving as {args.role} after {args.wait_ms} ms (its log says why)", file=sys.stderr)
    return 1


def _promote_stopped(args: argparse.Namespace) -> int:
    """No broker answers: promote the store on disk (its lock is held meanwhile)."""
    if not (args.store / "commitlog").is_dir():
        print(f"mqstore promote: no broker answers for {args.store} and it holds no store", file=sys.stderr)
        return 2
    fd = hold_store(args.store)
    try:
        stored = promote_store(args.store, resolve_geometry(args.store, None), args.role, wall_ms())
    finally:
        os.close(fd)
    print(f"mqstore promote: {args.store} promoted on disk to {stored.role}: epoch {stored.epoch} opens at "
          f"commitlog offset {stored.start}; start it with `mqstore start --store {args.store} --role {stored.role}`",
          file=sys.stderr)
    return 0
