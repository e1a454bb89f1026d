"""The master's side of the HA actor: the HA port, one ``SlaveLink`` per connection, all on the
actor's one poll loop (non-blocking sockets, no thread per connection).

A connection goes through:

1. the hello, when ``[ha] secret`` is set (``mqstore.ipc.wire.ha``: challenge, answer, proof): a
   slave that cannot prove the secret is closed before it learns anything;
2. the handshake: the slave's broker id (a second connection claiming an id already connected is
   refused, the first kept), answered with the master's end, last epoch and epoch entries;
3. transfers, from where the slave's first report says, straight from the mapped files
   (``mqstore.actors.ha.log_source``): one file, one epoch and ``transfer_batch_bytes`` at most a
   frame; a heartbeat (an empty transfer) when nothing was sent for ``heartbeat_interval_ms``.

A report beyond the master's end (RocketMQ's #3015: a forged ack would let a SYNC_MASTER answer
SEND_OK for bytes no slave holds) or below what the slave acknowledged before closes the connection
with a log line; so does a connection nothing was read from for ``housekeeping_interval_ms``, and one
not past its handshake within ``HANDSHAKE_TIMEOUT_MS`` (a peer trickling its hello a byte at a time
would otherwise hold its place for ever). The port holds ``[ha] max_connections`` at most: past it a
new connection is closed at once (a refusal logged once a second at most), the connected slaves kept.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from dataclasses import dataclass, field

from mqstore.actors.config_ha import HaConfig, allowed_networks
from mqstore.actors.ha.log_source import LogSource
from mqstore.actors.ha.peer import Peer
from mqstore.actors.ha.replicas import ReplicaSet, SlaveCopy
from mqstore.engine.ha.epochs import EpochEntry
from mqstore.ipc.wire import ha as wire
from mqstore.ipc.wire import ha_hello as hello

log = logging.getLogger("mqstore")
HELLO, HANDSHAKE, TRANSFER = "hello", "handshake", "transfer"
HANDSHAKE_TIMEOUT_MS = 5_000  # from accept to the handshake's answer (the slave allows its master as long)
REFUSAL_LOG_MS = 1_000


@dataclass(slots=True)
class SlaveLink:
    peer: Peer
    state: str
    nonce: bytes = b""
    stream: wire.SlaveStream = field(default_factory=wire.SlaveStream)
    broker_id: int = -1
    copy: SlaveCopy | None = None
    next_phys: int = -1   # the next byte to send; -1 until the slave's first report
    last_sent_ms: int = 0


class MasterSide:
    def __init__(self, ha: HaConfig, source: LogSource, entries: tuple[EpochEntry, ...], now_ms: int) -> None:
        self.ha = ha
        self.source = source
        self.entries = entries
        self.epoch = entries[-1].epoch
        self.networks = allowed_networks(ha.allowed_slaves)
        self.secret = ha.secret.encode()
        self.replicas = ReplicaSet(ha.in_sync_replicas, ha.max_gap_not_in_sync)
        self.links: dict[int, SlaveLink] = {}  # by socket fd
        self.written_end = -1  # the writer's end, from its written notices; -1 until the first
        self.listener: socket.socket | None = None
        self.refused = 0
        self.closed = 0
        self.sent_bytes = 0
        self._now = now_ms
        self._refusal_logged_ms = -REFUSAL_LOG_MS

    def note_written(self, end: int, now_ms: int) -> None:
        """The writer's end, from its ``written`` notices (-1: none came)."""
        if end > self.written_end:
            self.written_end = end
            self.replicas.write_times.note(end, now_ms)

    # -- the port ----------------------------------------------------------------------------------

    def listen(self, address: tuple[str, int]) -> socket.socket:
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(16)
        sock.setblocking(False)
        self.listener = sock
        log.info("HA port listening on %s:%d (epoch %d)", address[0], address[1], self.epoch)
        return sock

    def accept(self, now_ms: int) -> list[SlaveLink]:
        assert self.listener is not None
        accepted: list[SlaveLink] = []
        while True:
            try:
                sock, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return accepted
            address = f"{addr[0]}:{addr[1]}"
            if self.networks and not any(_in(addr[0], n) for n in self.networks):
                self._refuse(sock, now_ms, f"HA connection from {address} refused: not in [ha] allowed_slaves")
                continue
            if len(self.links) >= self.ha.max_connections:
                self._refuse(sock, now_ms, f"HA connection from {address} refused: {len(self.links)} connections "
                                           "open, [ha] max_connections")
                continue
            link = SlaveLink(Peer(sock, address, now_ms), HELLO if self.secret else HANDSHAKE)
            if self.secret:
                link.nonce = hello.new_nonce()
                link.peer.send(hello.encode_challenge(link.nonce))
            self.links[sock.fileno()] = link
            accepted.append(link)

    def _refuse(self, sock: socket.socket, now_ms: int, why: str) -> None:
        self.refused += 1
        sock.close()
        if now_ms - self._refusal_logged_ms >= REFUSAL_LOG_MS:  # a flood is one line a second, not one a try
            self._refusal_logged_ms = now_ms
            log.warning("%s (%d refused in all)", why, self.refused)

    def close_link(self, link: SlaveLink, why: str, *, warn: bool = True) -> None:
        (log.warning if warn else log.info)("HA connection from %s closed: %s", link.peer.address, why)
        if link.copy is not None:
            self.replicas.leave(link.copy)
        self.links.pop(link.peer.fd, None)
        link.peer.close()
        self.closed += 1

    # -- reading -----------------------------------------------------------------------------------

    def on_readable(self, link: SlaveLink, now_ms: int) -> None:
        try:
            data = link.peer.read(now_ms)
        except OSError as exc:
            self.close_link(link, f"read failed: {exc}")
            return
        if data is None:
            self.close_link(link, "the slave closed it", warn=False)
            return
        try:
            if link.state == HELLO:
                data = self._hello(link, data)
                if link.state == HELLO:
                    return
            for frame in link.stream.feed(data):
                self._on_frame(link, frame, now_ms)
                if link.peer.fd not in self.links:
                    return
        except wire.HaWireError as exc:
            self.close_link(link, f"not the HA protocol: {exc}")

    def _hello(self, link: SlaveLink, data: bytes) -> bytes:
        link.peer.pending_in += data
        if len(link.peer.pending_in) < hello.ANSWER_SIZE:
            return b""
        answer = hello.check_answer(self.secret, link.nonce, link.peer.pending_in[:hello.ANSWER_SIZE])
        rest = bytes(link.peer.pending_in[hello.ANSWER_SIZE:])
        link.peer.pending_in.clear()
        link.broker_id = answer.broker_id
        link.peer.send(hello.encode_proof(self.secret, link.nonce, answer))
        link.state = HANDSHAKE
        return rest

    def _on_frame(self, link: SlaveLink, frame: wire.SlaveFrame, now_ms: int) -> None:
        if isinstance(frame, wire.SlaveHandshake):
            self._on_handshake(link, frame, now_ms)
        elif link.copy is None:
            self.close_link(link, "a report before the handshake")
        else:
            self._on_report(link, frame.max_offset, now_ms)

    def _on_handshake(self, link: SlaveLink, frame: wire.SlaveHandshake, now_ms: int) -> None:
        if link.state != HANDSHAKE:
            self.close_link(link, "a second handshake")
            return
        if self.secret and frame.broker_id != link.broker_id:
            self.close_link(link, f"its handshake says broker id {frame.broker_id}, its hello {link.broker_id}")
            return
        if self.written_end < 0:
            self.close_link(link, "the master does not know its own end yet; the slave retries", warn=False)
            return
        copy = self.replicas.join(frame.broker_id, link.peer.address, now_ms)
        if copy is None:
            first = self.replicas.slaves[frame.broker_id].address
            self.refused += 1
            self.close_link(link, f"broker id {frame.broker_id} is connected already (from {first}); "
                                  "the first connection is kept")
            return
        link.broker_id, link.copy, link.state = frame.broker_id, copy, TRANSFER
        link.peer.send(wire.MasterHandshake(self.written_end, self.epoch, self.entries).encode())
        log.info("slave %d connected from %s", frame.broker_id, link.peer.address)

    def _on_report(self, link: SlaveLink, reported: int, now_ms: int) -> None:
        copy = link.copy
        assert copy is not None
        if reported > self.written_end:
            self.close_link(link, f"slave {copy.broker_id} reported offset {reported}, beyond the master's end "
                                  f"{self.written_end}: a forged or impossible report")
            return
        if reported < copy.acked:
            self.close_link(link, f"slave {copy.broker_id} reported offset {reported}, below the {copy.acked} it "
                                  "acknowledged before")
            return
        if link.next_phys < 0:
            start = reported
            if reported < self.source.min_offset:
                if reported != 0:
                    self.close_link(link, f"slave {copy.broker_id} ends at {reported}, before the master's first "
                                          f"offset {self.source.min_offset}: its log cannot be continued")
                    return
                start = self.source.min_offset  # an empty slave starts at the master's first byte
            link.next_phys = start
        copy.acked, copy.acked_ms = reported, now_ms

    # -- writing -----------------------------------------------------------------------------------

    def push(self, link: SlaveLink, now_ms: int) -> None:
        """Send what the slave lacks while its socket takes it; a heartbeat when idle."""
        if link.state != TRANSFER or link.next_phys < 0:
            return
        try:
            if not link.peer.flush():
                return
            while link.next_phys < self.written_end:
                entry, epoch_end = self._epoch_at(link.next_phys)
                view = self.source.chunk(link.next_phys, min(self.written_end, epoch_end),
                                         self.ha.transfer_batch_bytes)
                if view is None:
                    self.close_link(link, f"offset {link.next_phys} is in no commitlog file of the master")
                    return
                try:
                    header = wire.transfer_header(link.next_phys, entry.epoch, entry.start, self.confirm_offset,
                                                  len(view))
                    size = len(view)
                    done = link.peer.send_parts(header, view)
                finally:
                    view.release()
                link.next_phys += size
                link.last_sent_ms = now_ms
                self.sent_bytes += size
                if not done:
                    return
            if now_ms - link.last_sent_ms >= self.ha.heartbeat_interval_ms:
                entry, _ = self._epoch_at(link.next_phys)
                link.peer.send(wire.transfer_header(link.next_phys, entry.epoch, entry.start, self.confirm_offset, 0))
                link.last_sent_ms = now_ms
        except OSError as exc:
            self.close_link(link, f"write failed: {exc}")

    @property
    def confirm_offset(self) -> int:
        return self.replicas.end(max(self.written_end, 0))

    def _epoch_at(self, phys: int) -> tuple[EpochEntry, int]:
        """The epoch holding byte ``phys`` and where it ends (a transfer never spans two)."""
        for i in range(len(self.entries) - 1, -1, -1):
            if self.entries[i].start <= phys or i == 0:
                end = self.entries[i + 1].start if i + 1 < len(self.entries) else 1 << 62
                return self.entries[i], end
        raise AssertionError("a master has at least one epoch")

    def due_ms(self) -> int | None:
        """The next deadline of a connection (a heartbeat to send, a silent or slow peer to close);
        None with no connection. A push is never due on a clock: a written notice or a writable socket
        brings it."""
        due: list[int] = []
        for link in self.links.values():
            due.append(link.peer.last_read_ms + self.ha.housekeeping_interval_ms + 1)
            if link.state != TRANSFER:
                due.append(link.peer.connected_ms + self._handshake_ms + 1)
            elif link.next_phys >= 0 and not link.peer.wants_write:
                due.append(link.last_sent_ms + self.ha.heartbeat_interval_ms)
        return min(due, default=None)

    @property
    def _handshake_ms(self) -> int:
        return min(self.ha.housekeeping_interval_ms, HANDSHAKE_TIMEOUT_MS)

    def housekeep(self, now_ms: int) -> None:
        handshake_ms = self._handshake_ms
        for link in list(self.links.values()):
            if now_ms - link.peer.last_read_ms > self.ha.housekeeping_interval_ms:
                self.close_link(link, f"nothing read for {self.ha.housekeeping_interval_ms} ms")
            elif link.state != TRANSFER and now_ms - link.peer.connected_ms > handshake_ms:
                self.close_link(link, f"no handshake within {handshake_ms} ms of connecting")

    def close(self) -> None:
        for link in list(self.links.values()):
            self.close_link(link, "the HA actor stops", warn=False)
        if self.listener is not None:
            self.listener.close()


def _in(host: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        return ipaddress.ip_address(host) in network
    except ValueError:
        return False
