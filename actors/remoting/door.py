"""The remoting front's door: which connections are let in, which one leaves to make room, and how
many bytes of half-read frames the front may hold at once.

- **Per address**: at most ``max_connections_per_address`` connections from one remote address; past
  that, a new one from that address is refused (its own, not anyone else's).
- **In all**: at most ``max_connections`` (lowered to what the open-files limit leaves room for).
  When the table is full a newcomer is not simply refused, which would let whoever holds the most
  idle sockets lock everyone else out: the address holding the most connections gives one up, its
  longest-idle connection (one with a request in flight only when it has no idle one), provided that
  address holds more than the newcomer's would once admitted; otherwise the longest-idle connection
  of any address gives way, if quiet for ``SETTLED_IDLE_MS`` (a RocketMQ client reconnects on its
  next request). Only when no connection is that quiet and no address holds more than its share is a
  newcomer refused. So idle sockets, however many and from however many addresses, never keep a client out.
- **Frame bytes**: a frame's body is read only once its length is reserved from ``max_read_bytes``
  in all and ``max_read_bytes_per_address`` per address; frames up to ``SMALL_FRAME_BYTES``
  (heartbeats, pulls, most sends) need no reservation, so they never wait behind large ones. The
  front's buffered input is then at most ``max_read_bytes`` plus a small frame per connection,
  whatever clients announce.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from mqstore.actors.remoting.headers import Peer

SMALL_FRAME_BYTES = 64 * 1024
SETTLED_IDLE_MS = 1_000  # a client between two requests is not idle: only one quiet this long gives way
FD_RESERVE = 128  # descriptors the front keeps for its store sockets, logs and the accept itself


@dataclass(slots=True)
class Connection:
    peer: Peer
    writer: asyncio.StreamWriter
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    active_ms: int = 0  # when it last read a frame or wrote a reply

    @property
    def idle(self) -> bool:
        return not self.tasks


def usable_connections(configured: int, open_files_limit: int) -> int:
    """``configured``, lowered so that every connection gets a descriptor (past the limit, accept
    fails and the front can neither serve nor refuse anyone)."""
    return max(1, min(configured, open_files_limit - FD_RESERVE))


class Door:
    def __init__(self, max_connections: int, max_per_address: int, max_read_bytes: int,
                 max_read_bytes_per_address: int) -> None:
        self.max_connections = max_connections
        self.max_per_address = max_per_address
        self.max_read_bytes = max_read_bytes
        self.max_read_bytes_per_address = max_read_bytes_per_address
        self.open: dict[int, Connection] = {}
        self.by_address: Counter[str] = Counter()
        self.reading: Counter[str] = Counter()
        self.reading_bytes = 0
        self.refused = 0
        self.evicted = 0
        self._waiters: list[asyncio.Future[None]] = []

    def admit(self, ip: str, now_ms: int) -> tuple[bool, Connection | None]:
        """Whether a newcomer from ``ip`` may come in, and the connection to close for it (if any)."""
        if self.by_address[ip] >= self.max_per_address:
            self.refused += 1
            return False, None
        if len(self.open) < self.max_connections:
            return True, None
        biggest, held = max(self.by_address.items(), key=lambda item: item[1])
        if held > self.by_address[ip] + 1:
            candidates = [c for c in self.open.values() if c.peer.ip == biggest]
        else:
            candidates = [c for c in self.open.values() if c.idle and now_ms - c.active_ms >= SETTLED_IDLE_MS]
        if not candidates:
            self.refused += 1
            return False, None
        self.evicted += 1
        return True, min(candidates, key=lambda c: (not c.idle, c.active_ms))

    def enter(self, connection: Connection) -> None:
        self.open[connection.peer.connection] = connection
        self.by_address[connection.peer.ip] += 1

    def leave(self, connection: Connection) -> None:
        if self.open.pop(connection.peer.connection, None) is not None:
            self.by_address[connection.peer.ip] -= 1
            if self.by_address[connection.peer.ip] <= 0:
                del self.by_address[connection.peer.ip]

    async def reserve(self, ip: str, length: int) -> int:
        """Wait until ``length`` bytes of frame may be read from ``ip``; returns what was reserved
        (0 for a small frame), to hand back to ``release``. The caller's deadline bounds the wait."""
        if length <= SMALL_FRAME_BYTES:
            return 0
        while not (self.reading_bytes + length <= self.max_read_bytes
                   and self.reading[ip] + length <= self.max_read_bytes_per_address):
            freed = asyncio.get_running_loop().create_future()
            self._waiters.append(freed)
            try:
                await freed
            finally:
                if freed in self._waiters:
                    self._waiters.remove(freed)
        self.reading_bytes += length
        self.reading[ip] += length
        return length

    def release(self, ip: str, reserved: int) -> None:
        if not reserved:
            return
        self.reading_bytes -= reserved
        self.reading[ip] -= reserved
        if self.reading[ip] <= 0:
            del self.reading[ip]
        waiters, self._waiters = self._waiters, []
        for freed in waiters:
            if not freed.done():
                freed.set_result(None)
