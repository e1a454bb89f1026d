"""Attacks on the resources of the listeners outsiders reach, the remoting front and the metrics
listener, while a good RocketMQ-protocol client keeps sending and pulling through the front:

- ``front_trickle``          a frame of ``max_frame_bytes`` announced and sent a byte at a time
- ``front_idle_flood``       more idle connections than the front's table holds, from many 127.x addresses
- ``front_partial_frames``   connections that each send all but the last bytes of a maximal frame
- ``front_lock_flood``       orderly-consumption locks for thousands of queues, on connections then closed
- ``metrics_slowloris``      more clients than the metrics listener's places, each dribbling a byte now and then

Attackers bind to other loopback addresses (127.0.x.y) than the good client's 127.0.0.1, so the
per-address cap is exercised without locking the good client out. Each attack reports what it saw;
``GoodFrontClient.window`` counts the good sends and pulls that succeeded meanwhile, ``FrontRss`` the
front's memory.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import urllib.request
from contextlib import suppress
from typing import Any

import psutil

from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.signature import Credentials

RESOURCE_ATTACKS = ("front_trickle", "front_idle_flood", "front_partial_frames", "front_lock_flood",
                    "metrics_slowloris")
GOOD_FRONT_TOPIC, GOOD_FRONT_GROUP = "GoodFront", "good"
# what the harness's broker is configured with, small enough that each bound is crossed in seconds
FRONT_TOML = """
[remoting]
idle_timeout_ms = 2000
frame_timeout_ms = 2000
max_frame_bytes = 4194304
max_connections = 128
max_connections_per_address = 16
max_read_bytes = 16777216
max_read_bytes_per_address = 8388608
max_queue_locks = 20000

[metrics]
request_timeout_ms = 2000
max_connections = 16
"""
FRAME_BYTES = 4 << 20


ATTACKER_ADDRESSES = 12


def attacker(i: int) -> tuple[str, int]:
    """The i-th attacker connection's source address: one of a dozen on loopback, none the good
    client's 127.0.0.1 (so each holds many connections, as a real attacker's few hosts would)."""
    return f"127.0.1.{1 + i % ATTACKER_ADDRESSES}", 0


def _send_ext(queue: int) -> dict[str, Any]:
    return {"producerGroup": "PG", "topic": GOOD_FRONT_TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 1,
            "queueId": queue, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": "",
            "reconsumeTimes": 0, "unitMode": "false", "batch": "false"}


class GoodFrontClient:
    """Sends through the front and pulls back what it sent, one request at a time, reconnecting when
    cut off; every outcome stamped, so an attack's window can be counted."""

    def __init__(self, port: int, credentials: Credentials | None = None) -> None:
        self.port = port
        self.credentials = credentials  # signs its requests where the front checks an ACL
        self.outcomes: list[tuple[float, str, bool]] = []  # (time, "send" | "pull", succeeded)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> GoodFrontClient:
        self._thread.start()
        return self

    def _run(self) -> None:
        next_offset = 0
        while not self._stop.is_set():
            try:
                with rm.RemotingClient("127.0.0.1", self.port, timeout_s=10, credentials=self.credentials) as client:
                    while not self._stop.wait(0.02):
                        sent = client.call(rm.SEND_MESSAGE, _send_ext(0), b"good")
                        self.outcomes.append((time.monotonic(), "send", sent.code == rm.SUCCESS))
                        pulled = client.call(rm.PULL_MESSAGE, {
                            "consumerGroup": GOOD_FRONT_GROUP, "topic": GOOD_FRONT_TOPIC, "queueId": 0,
                            "queueOffset": next_offset, "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0,
                            "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
                        found = pulled.code in (rm.SUCCESS, rm.PULL_NOT_FOUND, rm.PULL_RETRY_IMMEDIATELY)
                        if pulled.code == rm.SUCCESS:
                            next_offset = int(pulled.ext.get("nextBeginOffset", next_offset))
                        self.outcomes.append((time.monotonic(), "pull", found))
            except (OSError, rm.FrameError) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                self.outcomes.append((time.monotonic(), "connection", False))
                self._stop.wait(0.1)

    def window(self, start: float, end: float) -> dict[str, int]:
        seen = [(kind, ok) for t, kind, ok in self.outcomes if start <= t <= end]
        return {"sends_ok": sum(1 for k, ok in seen if k == "send" and ok),
                "pulls_ok": sum(1 for k, ok in seen if k == "pull" and ok),
                "failed": sum(1 for _, ok in seen if not ok)}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class FrontRss:
    """The front's resident memory, sampled on a thread (a restarted front is followed by its pid)."""

    def __init__(self, pid_of_front: Any) -> None:
        self.pid_of_front = pid_of_front
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def now(self) -> int:
        with suppress(psutil.Error, AssertionError, KeyError, TypeError):
            return int(psutil.Process(self.pid_of_front()).memory_info().rss)
        return 0

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.now())

    def start(self) -> FrontRss:
        self.peak = self.now()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _closed_within(sock: socket.socket, deadline: float) -> bool:
    """Whether the peer closes ``sock`` before ``deadline`` (what it sends meanwhile is read and dropped)."""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            return False
        except OSError:
            return True
    return False


class ResourceAttacks:
    def __init__(self, remoting_port: int, metrics_port: int | None, seconds: float, connections: int) -> None:
        self.port = remoting_port
        self.metrics_port = metrics_port
        self.seconds = seconds
        self.connections = connections
        self.findings: list[str] = []

    def _connect(self, i: int) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=self.seconds, source_address=attacker(i))

    def front_trickle(self) -> dict[str, Any]:
        sock = self._connect(0)
        began, cut = time.monotonic(), False
        sent = 0
        try:
            sock.sendall(struct.pack(">i", FRAME_BYTES))
            while not cut and time.monotonic() - began < self.seconds * 10:
                try:
                    sock.sendall(b"x")
                    sent += 1
                except OSError:
                    cut = True
                    break
                cut = _closed_within(sock, time.monotonic() + 0.2)
        finally:
            sock.close()
        if not cut:
            self.findings.append(f"front_trickle: a frame trickled byte by byte stayed open {self.seconds * 10} s")
        return {"bytes_trickled": sent, "cut_off": cut}

    def front_idle_flood(self) -> dict[str, Any]:
        held, refused = [], 0
        try:
            for i in range(self.connections):
                try:
                    held.append(self._connect(i))
                except OSError:
                    refused += 1
            closed = sum(1 for sock in held if _closed_within(sock, time.monotonic() + 0.01))
            with rm.RemotingClient("127.0.0.1", self.port, timeout_s=10) as newcomer:  # a new client gets in
                route = newcomer.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}).code
            deadline = time.monotonic() + self.seconds * 10
            idle_closed = sum(1 for sock in held if _closed_within(sock, deadline))
        finally:
            for sock in held:
                sock.close()
        if route != rm.SUCCESS:
            self.findings.append(f"front_idle_flood: a new client's route query got {route}")
        if idle_closed < len(held):
            self.findings.append(f"front_idle_flood: {len(held) - idle_closed} idle connections stayed open")
        return {"connections": self.connections, "refused_at_connect": refused, "closed_at_once": closed,
                "new_client_route_code": route, "closed_in_all": idle_closed}

    def front_partial_frames(self) -> dict[str, Any]:
        held = []
        chunk = bytes(64 * 1024)
        try:
            for i in range(self.connections // 4):
                sock = self._connect(i)
                held.append(sock)
                sock.settimeout(0.05)
                with suppress(OSError):  # a front that does not read fills the socket: move on
                    sock.sendall(struct.pack(">i", FRAME_BYTES))
                    for _ in range(FRAME_BYTES // len(chunk) - 1):
                        sock.sendall(chunk)
            cut = sum(1 for sock in held if _closed_within(sock, time.monotonic() + self.seconds * 10))
        finally:
            for sock in held:
                sock.close()
        return {"connections": len(held), "frame_bytes_announced": FRAME_BYTES, "cut_off": cut}

    def front_lock_flood(self) -> dict[str, Any]:
        locked = 0
        for r in range(20):
            queues = [{"topic": f"L{r}-{i}-" + "t" * 100, "brokerName": "broker-a", "queueId": i} for i in range(4096)]
            body = json.dumps({"consumerGroup": f"lockers{r}", "clientId": f"c{r}", "mqSet": queues}).encode()
            sock = self._connect(r)
            try:
                sock.sendall(rm.encode_command(rm.RemotingCommand(rm.LOCK_BATCH_MQ, r, 0, None, {}, body)))
                head = b""
                sock.settimeout(30)
                while len(head) < 4:
                    head += sock.recv(4 - len(head)) or b"...."
                reply = bytearray()
                length = rm.frame_length(head[:4])
                while len(reply) < length:
                    part = sock.recv(length - len(reply))
                    if not part:
                        break
                    reply += part
                command = rm.decode_command(bytes(reply))
                locked += len(json.loads(command.body or b"{}").get("lockOKMQSet", []))
            except (OSError, ValueError) as exc:
                self.findings.append(f"front_lock_flood: {type(exc).__name__}: {exc}")
            finally:
                sock.close()
        return {"lock_requests": 20, "queues_asked": 20 * 4096, "queues_locked": locked}

    def metrics_slowloris(self) -> dict[str, Any]:
        if self.metrics_port is None:
            return {"skipped": "the metrics listener is off"}
        socks = [socket.create_connection(("127.0.0.1", self.metrics_port), timeout=5, source_address=attacker(i))
                 for i in range(32)]
        ok = failed = 0
        deadline = time.monotonic() + self.seconds * 2
        try:
            while time.monotonic() < deadline:
                for sock in socks:
                    with suppress(OSError):
                        sock.sendall(b"G")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as page:
                        ok += page.status == 200
                except OSError:
                    failed += 1
        finally:
            for sock in socks:
                sock.close()
        if not ok:
            self.findings.append("metrics_slowloris: no scrape was answered")
        return {"dribblers": len(socks), "scrapes_ok": ok, "scrapes_failed": failed}


def run_front_attacks(broker: Any, names: list[str], seconds: float, connections: int,
                      metrics_port: int | None, credentials: Credentials | None = None) -> dict[str, Any]:
    """Each attack in ``names`` against ``broker`` (a running ``mqstore.scripts.harness.Broker`` with
    its front on, configured with ``FRONT_TOML``), a good front client working throughout: the
    figures (attacks tried, good sends and pulls that succeeded during them, the front's peak memory,
    its restarts) and the findings. ``credentials`` sign the good client's requests where the front
    checks an ACL."""
    attacks = ResourceAttacks(broker.remoting_port, metrics_port, seconds, connections)
    good = GoodFrontClient(broker.remoting_port, credentials).start()
    rss = FrontRss(lambda: broker.pid_of("remoting")).start()
    out: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 30
        while not good.window(0, time.monotonic())["sends_ok"] and time.monotonic() < deadline:
            time.sleep(0.05)
        for name in names:
            start = time.monotonic()
            answered = getattr(attacks, name)()
            time.sleep(0.3)  # the good client's next requests land after the attack too
            served = good.window(start, time.monotonic())
            if not served["sends_ok"] or not served["pulls_ok"] or served["failed"]:
                attacks.findings.append(f"{name}: the good front client was not served ({served})")
            out[name] = {"answered": answered, "good_front": served, "seconds": round(time.monotonic() - start, 2)}
    finally:
        good.stop()
        rss.stop()
    restarts = int((broker.status() or {}).get("actors", {}).get("remoting", {}).get("restarts_total", 0))
    if restarts:
        attacks.findings.append(f"the front restarted {restarts} time(s)")
    totals = good.window(0, time.monotonic())
    return {"attacks_tried": len(names), "attacks": out, "good_sends_ok": totals["sends_ok"],
            "good_pulls_ok": totals["pulls_ok"], "good_failed": totals["failed"], "good_errors": good.errors[:5],
            "front_rss_peak_mb": round(rss.peak / 2**20, 1), "front_restarts": restarts,
            "findings": attacks.findings}
