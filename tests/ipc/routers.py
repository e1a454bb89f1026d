"""A ROUTER bound on an ipc endpoint in a private temp dir: the broker side of a channel test."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import zmq


@contextlib.contextmanager
def bound_router(prefix: str) -> Iterator[tuple[str, zmq.Socket[Any]]]:
    root = tempfile.mkdtemp(prefix=prefix)
    endpoint = f"ipc://{root}/router"
    ctx: zmq.Context[Any] = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(endpoint)
    try:
        yield endpoint, sock
    finally:
        sock.close(0)
        ctx.term()
        shutil.rmtree(root, ignore_errors=True)
