"""Hostile clients against a real broker, while a good producer and consumer keep working.

    python -m scripts.survival.hostile [--connections 500] [--frames 200] [--seconds 3] [--rss-limit-mb 1024]

Starts ``mqstore start`` on a tiny-geometry store in a temporary directory (ipc sockets, or TCP with
CURVE with ``--tcp``) and runs each attack in turn, every one bounded in count and time:

- ``oversized_frames``     frames past the ingress and reader size limits, and a body past the store's
- ``big_frame_flood``      frames just under the ingress limit, sent as fast as the socket takes them
- ``slow_readers``         long-poll and full pulls from DEALERs that never read a reply
- ``connection_flood``     many connections, each its own DEALER identity, a request each, then gone
- ``ack_group_flood``      ack-mode pulls for thousands of new groups (each a queue index on a reader)
- ``topic_flood``          a send to each of thousands of new topics (each auto-created)
- ``remoting_garbage``     the RocketMQ remoting front (TCP): frames past its limit, random headers, frames
                           cut short, heartbeats sent and never read
- ``bad_key_flood``        (``--tcp``) connections with CURVE keys the broker never issued, or none
- ``invalid_msgpack``      random bytes, truncated maps, non-maps, wrong versions, extra frames, and
                           producer-encoded sends in every malformed multipart shape
- ``wrong_types``          every field of every request given values of the wrong type or range
- ``offsets_beyond_max``   consumer offsets past a queue's end, negative, past 2**63

Prints one JSON verdict: per attack what the broker answered (reply statuses counted), whether the
good client was served meanwhile (its sends during the attack all PUT_OK, none waiting longer than
``--max-latency-s``) and the broker's RSS (all processes) before, at peak and after; then ``ok``:
every attack answered without a SYSTEM_ERROR, no actor restarted, the good client always served and
its consumer caught up, and peak RSS under the limit. Exit status 0 when ok.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
import zmq

from ipc import schema
from ipc.client import Admin, Consumer, Producer
from ipc.endpoints import Endpoints
from scripts.harness import Broker, free_port_range, wait_for
from scripts.survival.hostile.requests import as_request, encoded_requests, invalid_frames, mutants

GOOD_TOPIC = "Good"
HOSTILE_TOPIC = "Hostile"
QUIET_TOPIC = "Quiet"
SLOW_TOPIC = "Slow"
NO_REPLY = "NO_REPLY"
WINDOW = 32  # requests in flight per connection, but for the floods


class GoodClient:
    """A producer sending one message every few ms and a consumer reading them, on their own threads."""

    def __init__(self, endpoints: Endpoints, interval_s: float = 0.01) -> None:
        self.endpoints = endpoints
        self.interval_s = interval_s
        self.sent: list[tuple[float, float, str, bytes]] = []  # (time, latency, status, body)
        self.received: set[bytes] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> GoodClient:
        for t in self._threads:
            t.start()
        return self

    def _produce(self) -> None:
        with Producer(endpoints=self.endpoints, timeout_ms=10_000) as producer:
            n = 0
            while not self._stop.is_set():
                body = f"good-{n}".encode()
                began = time.monotonic()
                try:
                    status = producer.send(GOOD_TOPIC, body, queue=0).status
                except Exception as exc:
                    status = type(exc).__name__
                    self.errors.append(f"send: {exc}")
                self.sent.append((began, time.monotonic() - began, status, body))
                n += 1
                time.sleep(self.interval_s)

    def _consume(self) -> None:
        with Consumer(endpoints=self.endpoints, group="good", topic=GOOD_TOPIC, queues=[0], start="earliest",
                      long_poll_ms=500, timeout_ms=10_000) as consumer:
            while not self._stop.is_set() or not self.caught_up():
                try:
                    self.received.update(m.body for m in consumer.poll(500))
                except Exception as exc:
                    self.errors.append(f"poll: {exc}")
                    time.sleep(0.1)
                if self._stop.is_set() and time.monotonic() > self._deadline:
                    return

    def caught_up(self) -> bool:
        return {b for _, _, s, b in self.sent if s == "PUT_OK"} <= self.received

    def window(self, start: float, end: float) -> dict[str, Any]:
        sends = [(latency, status) for t, latency, status, _ in self.sent if start <= t <= end]
        statuses = Counter(status for _, status in sends)
        return {"sends": len(sends), "statuses": dict(statuses),
                "max_latency_s": round(max((latency for latency, _ in sends), default=0), 3),
                "served": bool(sends) and set(statuses) == {"PUT_OK"}}

    def stop(self, timeout_s: float = 30) -> None:
        if self._stop.is_set():
            return
        self._deadline = time.monotonic() + timeout_s
        self._stop.set()
        for t in self._threads:
            t.join(timeout_s + 5)


class Rss:
    """The broker's memory: every process of its tree, sampled on a thread."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self.peak_by_pid: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def now(self) -> int:
        total = 0
        for p in [self.root, *self.root.children(recursive=True)]:
            with suppress(psutil.Error):
                rss = p.memory_info().rss
                total += rss
                self.peak_by_pid[p.pid] = max(self.peak_by_pid.get(p.pid, 0), rss)
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.now())

    def start(self) -> Rss:
        self.peak = self.now()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


# -- raw sockets ---------------------------------------------------------------------------------------


@contextmanager
def dealer(ctx: zmq.Context[Any], endpoint: str, **options: int) -> Iterator[zmq.Socket[Any]]:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    for name, value in options.items():
        sock.setsockopt(getattr(zmq, name), value)
    sock.connect(endpoint)
    try:
        yield sock
    finally:
        sock.close(0)


def collect(sock: zmq.Socket[Any], expected: int, timeout_s: float) -> Counter[str]:
    """Reply statuses until ``expected`` came or the time is up: ``OK`` for an ok reply (``OK:PUT_OK``,
    ``OK:MESSAGE_ILLEGAL``... for a send's results), else its status."""
    statuses: Counter[str] = Counter()
    replies = 0
    deadline = time.monotonic() + timeout_s
    while replies < expected and sock.poll(max(0, int((deadline - time.monotonic()) * 1000))):
        replies += 1
        try:
            reply = schema.unpack(sock.recv(), max_bytes=1 << 30)
        except schema.SchemaError:
            statuses["UNDECODABLE_REPLY"] += 1
            continue
        results = reply.get("results")
        if reply.get("ok") and isinstance(results, list):
            statuses.update(f"OK:{r.get('status')}" for r in results if isinstance(r, dict))
        else:
            statuses["OK" if reply.get("ok") else str(reply.get("status"))] += 1
    statuses[NO_REPLY] += expected - replies
    return +statuses


# -- attacks --------------------------------------------------------------------------------------------


class Attacks:
    def __init__(self, ctx: zmq.Context[Any], endpoints: Endpoints, args: argparse.Namespace,
                 remoting_port: int | None = None) -> None:
        self.ctx = ctx
        self.remoting_port = remoting_port
        self.ep = endpoints
        self.args = args
        self.rng = random.Random(args.seed)
        self.findings: list[str] = []

    def _exchange(self, endpoint: str, frames: list[list[bytes]], timeout_s: float | None = None,
                  window: int = WINDOW) -> dict[str, int]:
        """Send ``frames``, at most ``window`` unanswered at a time (as a client library does; a flood
        passes a window as large as the flood), and count the replies."""
        statuses: Counter[str] = Counter()
        with dealer(self.ctx, endpoint) as sock:
            for start in range(0, len(frames), window):
                for parts in frames[start:start + window]:
                    sock.send_multipart(parts)
                statuses.update(collect(sock, len(frames[start:start + window]), timeout_s or self.args.seconds))
        return dict(statuses)

    def oversized_frames(self) -> dict[str, Any]:
        limit = self.args.max_request_bytes
        huge = schema.pack(schema.request("send", 1, msgs=[{"topic": HOSTILE_TOPIC, "body": bytes(limit)}]))
        past_store = schema.pack(schema.request("send", 2, msgs=[{"topic": HOSTILE_TOPIC,
                                                                  "body": bytes(self.args.max_message_bytes + 1)}]))
        reader_huge = schema.pack(schema.request("ping", 3, pad=bytes(2 << 20)))
        return {"ingress_past_limit": self._exchange(self.ep.ingress, [[huge]], 2),
                "body_past_max_message_size": self._exchange(self.ep.ingress, [[past_store]]),
                "reader_past_limit": self._exchange(self.ep.reader(0), [[reader_huge]], 2)}

    def big_frame_flood(self) -> dict[str, Any]:
        body = os.urandom(self.args.max_request_bytes - 4096)
        frame = schema.pack(schema.request("send", 1, msgs=[{"topic": HOSTILE_TOPIC, "body": body}]))
        return {"frames": self.args.flood_frames, "frame_bytes": len(frame),
                "replies": self._exchange(self.ep.ingress, [[frame]] * self.args.flood_frames,
                                          window=self.args.flood_frames)}

    def slow_readers(self) -> dict[str, Any]:
        with Producer(endpoints=self.ep, timeout_ms=30_000) as producer:  # replies as big as a pull may be
            producer.send_batch([{"topic": SLOW_TOPIC, "body": os.urandom(60_000), "queue": 0}] * 16)
        sockets = []
        sent = 0
        try:
            for _i in range(self.args.slow_readers):
                sock = self.ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.RCVHWM, 1)  # and never read: the reader's send side fills up
                sock.connect(self.ep.reader(0))
                sockets.append(sock)
                for j in range(self.args.frames):
                    pull = ({"topic": GOOD_TOPIC, "wait_ms": 30_000, "offset": 1 << 40} if j % 4 == 0 else
                            {"topic": SLOW_TOPIC, "offset": 0, "max": 1024, "max_bytes": 64 << 20})
                    sock.send(schema.pack(schema.request("pull", j, group="slow", queue=0, **pull)), zmq.NOBLOCK)
                    sent += 1
            time.sleep(self.args.seconds)
        finally:
            for sock in sockets:
                sock.close(0)
        return {"readers": len(sockets), "pulls_never_read": sent}

    def connection_flood(self) -> dict[str, Any]:
        statuses: Counter[str] = Counter()
        open_sockets = []
        try:
            for i in range(self.args.connections):
                sock = self.ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.ROUTING_ID, os.urandom(16) if i % 2 else f"id-{i}".encode())
                sock.connect(self.ep.ingress if i % 2 else self.ep.reader(0))
                sock.send(schema.pack(schema.request("ping", i)))
                open_sockets.append(sock)
            poller = zmq.Poller()
            for sock in open_sockets:
                poller.register(sock, zmq.POLLIN)
            waiting, deadline = set(open_sockets), time.monotonic() + self.args.seconds
            while waiting and time.monotonic() < deadline:
                for sock, _ in poller.poll(100):
                    if sock in waiting:
                        statuses.update(collect(sock, 1, 0))
                        waiting.discard(sock)
                        poller.unregister(sock)
            statuses[NO_REPLY] += len(waiting)
        finally:
            for sock in open_sockets:
                sock.close(0)
        return {"connections": self.args.connections, "replies": dict(statuses)}

    def ack_group_flood(self) -> dict[str, Any]:
        """An ack-mode pull for each of many new groups: each opens a queue index (files, an open
        journal) on the reader that owns it."""
        frames = [[schema.pack(schema.request("ack_pull", i, group=f"flood-{i}", topic=GOOD_TOPIC, queue=0,
                                              consumer="c", max=1))] for i in range(self.args.ack_groups)]
        return {"groups": self.args.ack_groups, "replies": self._exchange(self.ep.reader(0), frames,
                                                                          max(self.args.seconds, 30), len(frames))}

    def topic_flood(self) -> dict[str, Any]:
        """A send to each of many new topics: each is auto-created (topics.json rewritten, consume
        queue files made and mapped by the builders and readers)."""
        frames = [[schema.pack(schema.request("send", i, msgs=[{"topic": f"Flood{i}", "body": b"t"}]))]
                  for i in range(self.args.topics)]
        return {"topics": self.args.topics,
                "replies": self._exchange(self.ep.ingress, frames, max(self.args.seconds, 30))}

    def remoting_garbage(self) -> dict[str, Any]:
        """The RocketMQ remoting front (TCP): length words past its limit, random headers, frames cut
        short, and connections that send and never read; each connection's fate is counted."""
        outcomes: Counter[str] = Counter()
        held = []
        try:
            for i in range(self.args.frames):
                conn = socket.create_connection(("127.0.0.1", self.remoting_port or 0), timeout=self.args.seconds)
                kind = i % 4
                if kind == 0:
                    payload = struct.pack(">i", 0x7FFFFFFF) + self.rng.randbytes(64)  # a 2 GiB frame announced
                elif kind == 1:
                    body = self.rng.randbytes(self.rng.randint(4, 200))
                    payload = struct.pack(">i", len(body)) + body
                elif kind == 2:
                    payload = struct.pack(">i", 1000) + self.rng.randbytes(10)  # cut short, then silence
                else:
                    header = b'{"code":34,"opaque":1,"flag":0,"language":"JAVA","version":1}'
                    frame = struct.pack(">i", len(header)) + header
                    payload = (struct.pack(">i", len(frame)) + frame) * 200  # heartbeats, never read
                conn.sendall(payload)
                if kind >= 2:
                    held.append(conn)
                    outcomes["held_open"] += 1
                    continue
                try:
                    outcomes["closed" if conn.recv(4096) == b"" else "answered"] += 1
                except TimeoutError:
                    outcomes["no_answer"] += 1
                conn.close()
            time.sleep(self.args.seconds)
        finally:
            for conn in held:
                conn.close()
        return {"connections": self.args.frames, "outcomes": dict(outcomes)}

    def bad_key_flood(self) -> dict[str, Any]:
        """Over TCP: connections with keys the broker never issued, and with none, each sending a
        send: not one may get through."""
        if self.ep.curve is None:
            return {"skipped": "the broker is not on TCP with CURVE (--tcp)"}
        from ipc.curve import CurveContext, CurveKeys
        frame = schema.pack(schema.request("send", 1, msgs=[{"topic": HOSTILE_TOPIC, "body": b"intruder"}]))
        contexts: list[zmq.Context[Any]] = []
        sockets = []
        try:
            for i in range(self.args.connections // 4):
                public, secret = zmq.curve_keypair()
                ctx: zmq.Context[Any] = (CurveContext(CurveKeys(self.ep.curve.server_public, public, secret))
                                         if i % 2 else zmq.Context())
                contexts.append(ctx)
                sock = ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(self.ep.ingress if i % 4 < 2 else self.ep.reader(0))
                sock.send(frame, zmq.NOBLOCK)
                sockets.append(sock)
            time.sleep(self.args.seconds)
            through = sum(1 for sock in sockets if sock.poll(0))
        finally:
            for sock in sockets:
                sock.close(0)
            for ctx in contexts:
                ctx.term()
        if through:
            self.findings.append(f"{through} connection(s) without an issued key got a reply")
        return {"connections": len(sockets), "replies_got_through": through}

    def invalid_msgpack(self) -> dict[str, Any]:
        frames = invalid_frames(self.rng, self.args.frames)
        with Producer(endpoints=self.ep) as producer:  # how the writer encodes: its valid send_encoded is one
            shapes = list(encoded_requests(producer._batch_encoder().encoding, self.rng).values())
        out = {}
        for name, endpoint in (("ingress", self.ep.ingress), ("reader", self.ep.reader(0))):
            replies = self._exchange(endpoint, [[f] for f in frames] + [[b"\x80", b"extra"]] + shapes)
            out[name] = replies
        return out

    def wrong_types(self) -> dict[str, Any]:
        by_op: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for route, op, fields in mutants(self.rng):
            by_op.setdefault((route, op), []).append(fields)
        out: dict[str, Any] = {}
        for (route, op), variants in by_op.items():
            endpoint = self.ep.ingress if route == "ingress" else self.ep.reader(0)
            replies = self._exchange(endpoint, [[as_request(op, i, f)] for i, f in enumerate(variants)])
            replies.pop(NO_REPLY, None)  # long polls parked on a junk queue: answered at their deadline
            if "SYSTEM_ERROR" in replies:
                self.findings.append(f"{route} {op}: SYSTEM_ERROR on a wrong-type field")
            out[f"{route}.{op}"] = replies
        return out

    def offsets_beyond_max(self) -> dict[str, Any]:
        with Producer(endpoints=self.ep) as producer:  # a queue nobody else writes: its max holds still
            producer.send_batch([{"topic": QUIET_TOPIC, "body": b"q", "queue": 0}] * 3)
        with Admin(endpoints=self.ep) as admin:
            top = wait_for(lambda: admin.queue_info(QUIET_TOPIC).get(0, (0, 0))[1] >= 3 and 3, 10, "quiet queue")
        frames = [[schema.pack(schema.request("commit_offset", i, group="hostile", topic=QUIET_TOPIC, queue=0,
                                              offset=offset))]
                  for i, offset in enumerate((top + 1, top + 10**9, (1 << 63) - 1, -1, 1 << 63))]
        replies = self._exchange(self.ep.reader(0), frames)
        if "OK" in replies:
            self.findings.append("a consumer offset beyond the queue's max was accepted")
        return {"max_offset": top, "replies": replies}


ATTACKS = ("oversized_frames", "big_frame_flood", "slow_readers", "connection_flood", "ack_group_flood",
           "topic_flood", "bad_key_flood", "invalid_msgpack", "wrong_types", "offsets_beyond_max", "remoting_garbage")


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="mqstore-hostile-", dir=args.dir))
    broker_extra = (f"max_request_bytes = {args.max_request_bytes}\ningress_hwm = {args.ingress_hwm}\n"
                    f"reader_hwm = {args.reader_hwm}\nack_max_queues = {args.ack_max_queues}")
    ports = free_port_range(13)  # 12 for ZeroMQ over TCP (8 roles, readers), the last for the remoting front
    broker = Broker(root, broker_extra=broker_extra, tcp_port=ports if args.tcp else None,
                    extra_toml=f"\n[store]\nmax_body_bytes = {args.max_message_bytes}\n",
                    remoting_port=ports + 12 if "remoting_garbage" in args.attacks else None)
    verdict: dict[str, Any] = {"attacks": {}, "tcp": args.tcp, "config": {
        "max_request_bytes": args.max_request_bytes, "ingress_hwm": args.ingress_hwm, "reader_hwm": args.reader_hwm,
        "max_body_bytes": args.max_message_bytes, "ack_max_queues": args.ack_max_queues}}
    with broker:
        endpoints = broker.endpoints()
        ctx: zmq.Context[Any] = zmq.Context() if endpoints.curve is None else _curve_context(endpoints)
        good = GoodClient(endpoints).start()
        rss = Rss(broker.proc.pid if broker.proc else os.getpid())
        attacks = Attacks(ctx, endpoints, args, broker.remoting_port)
        try:  # whatever happens, the clients close: a context with open sockets would hang the exit
            wait_for(lambda: good.received, 30, "the good consumer's first message")
            rss.start()
            verdict["rss_before_mb"] = round(rss.now() / 2**20, 1)
            for name in args.attacks:
                verdict["attacks"][name] = _attack(attacks, name, good, rss, args)
        finally:
            good.stop()
            rss.stop()
            ctx.destroy(0)
        status = broker.status() or {}
        restarts = {a: i.get("restarts", 0) for a, i in status.get("actors", {}).items() if i.get("restarts")}
        verdict.update(rss_peak_mb=round(rss.peak / 2**20, 1), rss_after_mb=round(rss.now() / 2**20, 1),
                       rss_peak_by_process_mb=_by_actor(rss.peak_by_pid, status),
                       restarts=restarts, good_sent=sum(1 for _, _, s, _ in good.sent if s == "PUT_OK"),
                       good_received=len(good.received), good_caught_up=good.caught_up(),
                       good_errors=good.errors[:5])
        verdict["broker_exit"] = broker.stop()
    findings = attacks.findings
    findings += [f"{a} restarted {n} time(s)" for a, n in restarts.items()]
    if not verdict["good_caught_up"]:
        findings.append("the good consumer did not receive every acknowledged message")
    if verdict["rss_peak_mb"] > args.rss_limit_mb:
        findings.append(f"broker RSS peaked at {verdict['rss_peak_mb']} MiB, past {args.rss_limit_mb}")
    verdict.update(findings=findings, ok=not findings)
    return verdict


def _attack(attacks: Attacks, name: str, good: GoodClient, rss: Rss, args: argparse.Namespace) -> dict[str, Any]:
    """One attack, and how the good client and the broker's memory fared meanwhile."""
    start = time.monotonic()
    peak_before = rss.peak
    rss.peak = rss.now()
    try:
        answered: Any = getattr(attacks, name)()
    except Exception as exc:  # the harness's own failure is a finding too, not a crash of the run
        answered = {"harness_error": f"{type(exc).__name__}: {exc}"}
        attacks.findings.append(f"{name}: {answered['harness_error']}")
    time.sleep(0.3)  # the good client's next sends land after the attack too
    served = good.window(start, time.monotonic())
    outcome = {"answered": answered, "good_client": served, "rss_peak_mb": round(rss.peak / 2**20, 1),
               "seconds": round(time.monotonic() - start, 2)}
    rss.peak = max(rss.peak, peak_before)
    if not served["served"]:
        attacks.findings.append(f"{name}: the good client was not served ({served['statuses']})")
    elif served["max_latency_s"] > args.max_latency_s:
        attacks.findings.append(f"{name}: a good send waited {served['max_latency_s']} s")
    return outcome


def _by_actor(peaks: dict[int, int], status: dict[str, Any]) -> dict[str, float]:
    """Peak RSS per actor (and the supervisor), in MiB; processes that are neither go by pid."""
    names = {info.get("pid"): name for name, info in status.get("actors", {}).items()}
    names[status.get("pid")] = "supervisor"
    return {str(names.get(pid, pid)): round(rss / 2**20, 1) for pid, rss in peaks.items()}


def _curve_context(endpoints: Endpoints) -> zmq.Context[Any]:
    from ipc.curve import CurveContext
    return CurveContext(endpoints.curve)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", type=int, default=500)
    p.add_argument("--frames", type=int, default=200, help="frames per attack that sends many")
    p.add_argument("--flood-frames", type=int, default=40, help="big frames in the flood")
    p.add_argument("--slow-readers", type=int, default=20)
    p.add_argument("--topics", type=int, default=3000, help="new topics in the topic flood")
    p.add_argument("--ack-groups", type=int, default=3000, help="new ack-mode groups in the group flood")
    p.add_argument("--ack-max-queues", type=int, default=256, help="the broker's [broker] ack_max_queues")
    p.add_argument("--seconds", type=float, default=3.0, help="how long an attack waits for replies")
    p.add_argument("--max-request-bytes", type=int, default=8 << 20, help="the broker's ingress frame limit")
    p.add_argument("--max-message-bytes", type=int, default=4 << 20, help="the store's max message size")
    p.add_argument("--ingress-hwm", type=int, default=64, help="the broker's [broker] ingress_hwm")
    p.add_argument("--reader-hwm", type=int, default=64, help="the broker's [broker] reader_hwm")
    p.add_argument("--rss-limit-mb", type=float, default=1024)
    p.add_argument("--max-latency-s", type=float, default=5.0, help="a good send waiting longer is a finding")
    p.add_argument("--attacks", nargs="*", default=list(ATTACKS), choices=ATTACKS)
    p.add_argument("--tcp", action="store_true", help="ZeroMQ over TCP with CURVE instead of ipc sockets")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--dir", help="where the temporary store goes")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    verdict = run(parse_args(argv))
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

