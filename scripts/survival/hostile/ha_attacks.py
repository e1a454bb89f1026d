"""Attacks on a master's replication (HA) port, from other loopback addresses (127.0.2.x) than its real
slave's 127.0.0.1, in two variants, each a SYNC_MASTER (``in_sync_replicas = 2``) and a real slave on
this machine:

- ``ha_port_plain``   no secret; ``allowed_slaves = "127.0.0.1, 127.0.2.0/24"``: the attackers get in
                      as any slave on an allowed host would
- ``ha_port_secret``  ``[ha] secret``; the attackers do not hold it

    forged_report     (plain, before the slave joins) a handshake, a send, then a report beyond the master's
                      end: the connection is closed and the send is not SEND_OK
    stand_in          (plain, before the slave joins) a peer that follows the stream without storing it and
                      reports what it was sent: it counts as a copy, so the send is SEND_OK. The documented
                      limit of a port without a secret (docs/operations/replication.md), reported, not a finding
    duplicate_id      the connected slave's broker id claimed again: refused (plain), no proof (secret)
    no_secret         (secret) a RocketMQ slave's handshake with no hello: nothing but the challenge
    wrong_secret      (secret) a hello answer MAC'd with another secret: nothing but the challenge
    slowloris         the handshake (the hello answer with a secret) a byte every 0.5 s: closed, and when
    garbage           random bytes, an unknown state, a report before any handshake, 4 MiB of noise
    connection_flood  many connections held open: past ``[ha] max_connections`` refused at once; afterwards
                      a new peer is answered again
    not_allowed       (plain) a connection from 127.0.3.1, outside ``allowed_slaves``: closed, no byte

Throughout, a good producer sends to the master (``GoodClient``): every send must be SEND_OK (PUT_OK)
while the real slave keeps its connection (its ``connects`` unchanged); at the end the slave's
commitlog must equal the master's up to the slave's end. Anything else is a finding.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from mqstore.ipc.client.api import Producer
from mqstore.ipc.wire import ha as wire
from mqstore.ipc.wire import ha_hello as hello
from mqstore.scripts.harness import Broker, free_port_range, wait_for
from mqstore.scripts.survival.hostile.observers import GoodClient

HA_ATTACKS = ("ha_port_plain", "ha_port_secret")
SECRET = "the-harness-replication-secret"
MAX_CONNECTIONS = 24
SLAVE_ID = 1
BEFORE_SLAVE = ("forged_report", "stand_in")
PLAIN = ("forged_report", "stand_in", "duplicate_id", "slowloris", "garbage", "connection_flood", "not_allowed")
SECRETED = ("no_secret", "wrong_secret", "duplicate_id", "slowloris", "garbage", "connection_flood")


def _toml(port: int, secret: bool) -> str:
    guard = f'secret = "{SECRET}"' if secret else 'allowed_slaves = "127.0.0.1, 127.0.2.0/24"'
    return (f'\n[ha]\nhost = "127.0.0.1"\nlisten_port = {port}\nslave_timeout_ms = 1000\n'
            f"max_connections = {MAX_CONNECTIONS}\n{guard}\n")


def _drain(sock: socket.socket, deadline: float) -> tuple[bytes, bool]:
    """What the peer sends until it closes (True) or the deadline passes (False)."""
    got = bytearray()
    while True:  # one look at least, even past the deadline
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            break
        except OSError:
            return bytes(got), True
        if not chunk:
            return bytes(got), True
        got += chunk
        if time.monotonic() >= deadline:
            break
    return bytes(got), False


class HaAttacks:
    def __init__(self, port: int, secret: bool, seconds: float, connections: int, findings: list[str]) -> None:
        self.port = port
        self.secret = secret
        self.seconds = seconds
        self.connections = connections
        self.findings = findings
        self.expected_prefix = hello.CHALLENGE_SIZE if secret else 0  # what anyone is sent before proving

    def _connect(self, i: int = 0, host: str = "") -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10,
                                        source_address=(host or f"127.0.2.{1 + i % 200}", 0))

    def _handshake(self, broker_id: int) -> tuple[socket.socket, wire.MasterStream, wire.MasterHandshake]:
        """A handshake as a slave's (the master closes it until it has heard the writer's end: again)."""
        def attempt() -> tuple[socket.socket, wire.MasterStream, wire.MasterHandshake] | None:
            sock = self._connect()
            sock.sendall(wire.SlaveHandshake(broker_id).encode())
            stream = wire.MasterStream()
            while data := sock.recv(1 << 16):
                for frame in stream.feed(data):
                    assert isinstance(frame, wire.MasterHandshake)
                    return sock, stream, frame
            sock.close()
            return None
        return wait_for(attempt, 30, "the master to answer a handshake")  # type: ignore[no-any-return]

    def _nothing_leaked(self, name: str, got: bytes, closed: bool) -> dict[str, Any]:
        leaked = len(got) - self.expected_prefix
        if leaked > 0:
            self.findings.append(f"ha {name}: {leaked} bytes past the hello reached a peer that proved nothing")
        if not closed:
            self.findings.append(f"ha {name}: the connection was not closed")
        return {"bytes_received": len(got), "closed": closed}

    # -- before the slave joins ----------------------------------------------------------------------

    def forged_report(self, producer: Producer, writer_sees: Callable[[int], None]) -> dict[str, Any]:
        sock, _, shake = self._handshake(9)
        with sock:
            sock.sendall(wire.SlaveReport(shake.max_offset).encode())
            writer_sees(1)  # the attacker is a slave in sync, as far as the writer knows: the send waits on it
            pending = producer.send_async("HaForged", b"forged")
            sock.sendall(wire.SlaveReport(shake.max_offset + (1 << 40)).encode())
            _, closed = _drain(sock, time.monotonic() + 10)
        status = pending.result().status
        if not closed:
            self.findings.append("ha forged_report: a report beyond the master's end left the connection open")
        if status == "PUT_OK":
            self.findings.append("ha forged_report: a send got SEND_OK with only a forged report")
        return {"closed": closed, "send_status": str(status)}

    def stand_in(self, producer: Producer, writer_sees: Callable[[int], None]) -> dict[str, Any]:
        writer_sees(0)
        sock, stream, shake = self._handshake(9)
        with sock:
            sock.sendall(wire.SlaveReport(shake.max_offset).encode())
            writer_sees(1)
            pending = producer.send_async("HaStandIn", b"stand-in")
            deadline = time.monotonic() + 10
            while not pending.done() and time.monotonic() < deadline:
                sock.settimeout(0.2)
                with suppress(TimeoutError):
                    for frame in stream.feed(sock.recv(1 << 16)):
                        if isinstance(frame, wire.Transfer) and frame.body:  # acknowledged, never stored
                            sock.sendall(wire.SlaveReport(frame.offset + len(frame.body)).encode())
            status = pending.result().status
        return {"send_status": str(status), "documented": "without a secret anyone let in counts as a copy"}

    # -- beside the slave ----------------------------------------------------------------------------

    def duplicate_id(self) -> dict[str, Any]:
        with self._connect() as sock:
            if self.secret:
                sock.sendall(hello.encode_answer(b"not-the-secret", b"\0" * hello.NONCE_SIZE, os.urandom(32), SLAVE_ID))
            sock.sendall(wire.SlaveHandshake(SLAVE_ID).encode())
            got, closed = _drain(sock, time.monotonic() + 10)
        return self._nothing_leaked("duplicate_id", got, closed)

    def no_secret(self) -> dict[str, Any]:
        began = time.monotonic()
        with self._connect() as sock:
            sock.sendall(wire.SlaveHandshake(7).encode() + wire.SlaveReport(0).encode())
            got, closed = _drain(sock, time.monotonic() + 15)
        return {**self._nothing_leaked("no_secret", got, closed), "closed_after_s": round(time.monotonic() - began, 1)}

    def wrong_secret(self) -> dict[str, Any]:
        with self._connect() as sock:
            nonce = hello.decode_challenge(sock.recv(hello.CHALLENGE_SIZE))
            sock.sendall(hello.encode_answer(b"another-secret-of-some-length", nonce, hello.new_nonce(), 7)
                         + wire.SlaveHandshake(7).encode())
            got, closed = _drain(sock, time.monotonic() + 10)
        return self._nothing_leaked("wrong_secret", hello.encode_challenge(nonce) + got, closed)

    def slowloris(self) -> dict[str, Any]:
        payload = (bytes(hello.ANSWER_SIZE) if self.secret else wire.SlaveHandshake(8).encode())
        began = time.monotonic()
        sent, closed, got = 0, False, b""
        with self._connect() as sock:
            while not closed and sent < len(payload) - 1 and time.monotonic() - began < 30:
                with suppress(OSError):
                    sock.sendall(payload[sent:sent + 1])
                sent += 1
                more, closed = _drain(sock, time.monotonic() + 0.5)
                got += more
        out = self._nothing_leaked("slowloris", got, closed)
        return {**out, "bytes_trickled": sent, "closed_after_s": round(time.monotonic() - began, 1)}

    def garbage(self) -> dict[str, Any]:
        shapes = {"random": os.urandom(64), "unknown_state": b"\0\0\0\x07" + bytes(12),
                  "report_first": wire.SlaveReport(1 << 40).encode(), "noise_4mib": os.urandom(4 << 20)}
        out = {}
        for name, payload in shapes.items():
            with self._connect() as sock:
                with suppress(OSError):
                    sock.sendall(payload)
                got, closed = _drain(sock, time.monotonic() + 10)
            out[name] = self._nothing_leaked(f"garbage {name}", got, closed)
        return out

    def connection_flood(self) -> dict[str, Any]:
        held: list[socket.socket] = []
        try:
            for i in range(self.connections):
                with suppress(OSError):
                    held.append(self._connect(i))
            at_once = time.monotonic() + 2  # shared: the first open one waits it out, the rest are looked at
            refused = sum(1 for sock in held if _drain(sock, at_once)[1])
            closed_in_all = sum(1 for sock in held if _drain(sock, time.monotonic() + 10)[1])
        finally:
            for sock in held:
                sock.close()
        with self._connect() as newcomer:  # the flood gone, a new peer is answered again
            if self.secret:
                answered = len(newcomer.recv(hello.CHALLENGE_SIZE)) == hello.CHALLENGE_SIZE
            else:
                newcomer.sendall(wire.SlaveHandshake(10).encode())
                answered = bool(newcomer.recv(wire.MASTER_HANDSHAKE_HEADER_SIZE))
        if refused < self.connections - MAX_CONNECTIONS:
            self.findings.append(f"ha connection_flood: {self.connections - refused} connections held at once, "
                                 f"past max_connections {MAX_CONNECTIONS}")
        if closed_in_all < len(held) or not answered:
            self.findings.append("ha connection_flood: connections stayed open, or a newcomer was not answered")
        return {"connections": self.connections, "refused_at_once": refused, "closed_in_all": closed_in_all,
                "newcomer_answered": answered}

    def not_allowed(self) -> dict[str, Any]:
        with self._connect(host="127.0.3.1") as sock:
            with suppress(OSError):
                sock.sendall(wire.SlaveHandshake(11).encode())
            got, closed = _drain(sock, time.monotonic() + 10)
        return self._nothing_leaked("not_allowed", got, closed)


def _ha_status(broker: Broker) -> dict[str, Any]:
    return dict(((broker.status() or {}).get("actors") or {}).get("ha") or {})


def _writer_sees(master: Broker, in_sync: int) -> None:
    """Wait until the master's writer has heard of ``in_sync`` slaves in sync (its last Replicated)."""
    def heard() -> bool:
        writer = ((master.status() or {}).get("actors") or {}).get("writer") or {}
        replicated = (writer.get("waits") or {}).get("replicated") or {}
        return replicated.get("in_sync") == in_sync
    wait_for(heard, 30, f"the master's writer to hear of {in_sync} slave(s) in sync")


def _log_bytes(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((store / "commitlog").iterdir()) if p.name.isdigit())


def run_variant(root: Path, variant: str, seconds: float, connections: int) -> dict[str, Any]:
    """One variant (``ha_port_plain`` or ``ha_port_secret``): a SYNC_MASTER, its attacks, its real slave."""
    secret = variant == "ha_port_secret"
    port = free_port_range(1)
    findings: list[str] = []
    attacks = HaAttacks(port, secret, seconds, connections, findings)
    names = PLAIN if not secret else SECRETED
    out: dict[str, Any] = {}
    (root / "master").mkdir()
    (root / "slave").mkdir()
    master = Broker(root / "master", extra_toml=_toml(port, secret),
                    broker_extra='role = "SYNC_MASTER"\nstats_interval_ms = 50')  # the writer's waits reported quickly
    slave = Broker(root / "slave", extra_toml=f'\n[ha]\nsecret = "{SECRET}"\n' if secret else "")
    slave.start_args += ("--role", "SLAVE", "--broker-id", str(SLAVE_ID), "--master", f"127.0.0.1:{port}")
    with master, Producer(endpoints=master.endpoints(), timeout_ms=30_000) as producer:
        wait_for(lambda: "connected" in _ha_status(master), 30, "the master's HA actor")
        for name in (n for n in names if n in BEFORE_SLAVE):
            out[name] = _guarded(findings, name,
                                 lambda n=name: getattr(attacks, n)(producer, lambda c: _writer_sees(master, c)))
        with slave:
            _writer_sees(master, 1)
            connects = wait_for(lambda: _ha_status(slave).get("ha_state") == "transfer"
                                and _ha_status(slave)["connects"], 30, "the slave's status")
            good = GoodClient(master.endpoints(), interval_s=0.02).start()
            try:
                wait_for(lambda: good.received, 30, "the good consumer's first message")
                for name in (n for n in names if n not in BEFORE_SLAVE):
                    start = time.monotonic()
                    answered = _guarded(findings, name, getattr(attacks, name))
                    after = time.monotonic()  # the good client's next sends land after the attack too
                    wait_for(lambda t=after: good.window(t, time.monotonic())["sends"] >= 3, 30, "good sends")
                    served = good.window(start, time.monotonic())
                    if not served["served"]:
                        findings.append(f"ha {name}: the good client was not served ({served['statuses']})")
                    out[name] = {"answered": answered, "good_client": served,
                                 "seconds": round(time.monotonic() - start, 2)}
            finally:
                good.stop()
            if _ha_status(slave).get("connects") != connects:
                findings.append("the real slave lost its connection during the attacks")
            end = wait_for(lambda: _caught_up(master, slave), 60, "the slave to catch up")
        restarts = {a: i.get("restarts", 0) for a, i in ((master.status() or {}).get("actors") or {}).items()
                    if i.get("restarts")}
    same = _log_bytes(slave.store)[:end] == _log_bytes(master.store)[:end]
    if not same:
        findings.append("the slave's commitlog differs from the master's")
    if restarts:
        findings.append(f"the master's actors restarted: {restarts}")
    return {"attacks": out, "slave_end": end, "slave_log_equal": same, "restarts": restarts, "findings": findings}


def _caught_up(master: Broker, slave: Broker) -> int | None:
    written, held = _ha_status(master).get("written", -1), _ha_status(slave).get("written", -2)
    return int(held) if written == held else None


def _guarded(findings: list[str], name: str, attack: Callable[[], Any]) -> Any:
    try:
        return attack()
    except Exception as exc:  # the harness's own failure is a finding, not a crash of the run
        findings.append(f"ha {name}: {type(exc).__name__}: {exc}")
        return {"harness_error": f"{type(exc).__name__}: {exc}"}


def run_ha_attacks(root: Path, variants: list[str], seconds: float, connections: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    findings: list[str] = []
    for variant in variants:
        (root / variant).mkdir(parents=True)
        out[variant] = run_variant(root / variant, variant, seconds, connections)
        findings += out[variant]["findings"]
    return {"variants": out, "attacks_tried": sum(len(v["attacks"]) for v in out.values()), "findings": findings}
