"""The machine's floor under an HA sender: what the kernel charges a process to push bytes over
loopback TCP, in ``CHUNK_BYTES`` ``sendmsg`` calls of a view of a mapped buffer (as the master's HA
actor sends), with a receiver draining them in another process.

On loopback the receiver's TCP work runs in the sender's system call, so the sender's CPU per byte
here is the least any HA sender on this machine can cost; per message at the benchmark's record size.
"""

from __future__ import annotations

import mmap
import socket
import time
from typing import Any

import multiprocess

CHUNK_BYTES = 32 * 1024
BUFFER_BYTES = 64 * 1024 * 1024


def _drain(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        buffer = bytearray(1 << 20)
        while sock.recv_into(buffer):
            pass


def loopback_send_cost(bytes_per_msg: int, seconds: float = 1.0) -> dict[str, Any]:
    """Bytes per second and the sender's CPU (user + system) per message of ``bytes_per_msg``."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        receiver = multiprocess.get_context("spawn").Process(target=_drain, args=(listener.getsockname()[1],),
                                                              daemon=True)
        receiver.start()
        sock, _ = listener.accept()
    mapped = mmap.mmap(-1, BUFFER_BYTES)
    view = memoryview(mapped)
    sent = pos = 0
    try:
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            cpu0, wall0 = time.thread_time(), time.monotonic()
            while time.monotonic() - wall0 < seconds:
                n = sock.sendmsg([view[pos:pos + CHUNK_BYTES]])
                sent += n
                pos = (pos + n) % (BUFFER_BYTES - CHUNK_BYTES)
            cpu, wall = time.thread_time() - cpu0, time.monotonic() - wall0
    finally:
        view.release()
        mapped.close()
        receiver.join(30)
    return {"chunk_bytes": CHUNK_BYTES, "mb_per_s": round(sent / wall / 1e6, 1), "bytes_per_msg": bytes_per_msg,
            "sender_us_per_msg": round(cpu / sent * bytes_per_msg * 1e6, 4),
            "msgs_per_s_one_core": round(sent / cpu / bytes_per_msg)}
