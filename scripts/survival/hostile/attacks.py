"""The attacks of the hostile-clients harness, each a method of ``Attacks`` bounded in count and time
that returns what the broker answered, over raw DEALER sockets (or TCP for the remoting front).
Replies are counted by status: ``OK`` for an ok reply (``OK:PUT_OK``, ``OK:MESSAGE_ILLEGAL``... for a
send's results), ``NO_REPLY`` for a frame nothing answered. What must never happen is a finding."""

from __future__ import annotations

import argparse
import os
import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import zmq

from mqstore.ipc.client.api import Admin, Producer
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.encoded import Encoding
from mqstore.ipc.wire.replies import EncodingReply
from mqstore.scripts.harness import wait_for
from mqstore.scripts.survival.hostile.acl_attacks import AclAttacks
from mqstore.scripts.survival.hostile.ipc_attacks import IPC_ATTACKS, IpcAttacks
from mqstore.scripts.survival.hostile.observers import GOOD_TOPIC
from mqstore.scripts.survival.hostile.requests import as_request, encoded_requests, invalid_frames, mutants

HOSTILE_TOPIC = "Hostile"
QUIET_TOPIC = "Quiet"
SLOW_TOPIC = "Slow"
NO_REPLY = "NO_REPLY"
WINDOW = 32  # requests in flight per connection, but for the floods


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


class Attacks(IpcAttacks):
    def __init__(self, ctx: zmq.Context[Any], endpoints: Endpoints, args: argparse.Namespace,
                 remoting_port: int | None = None) -> None:
        self.ctx = ctx
        self.remoting_port = remoting_port
        self.ep = endpoints
        self.args = args
        self.rng = random.Random(args.seed)
        self.findings: list[str] = []

    def _exchange(self, endpoint: str, frames: list[list[bytes]], timeout_s: float | None = None,
                  window: int = WINDOW, ctx: zmq.Context[Any] | None = None) -> dict[str, int]:
        """Send ``frames``, at most ``window`` unanswered at a time (as a client library does; a flood
        passes a window as large as the flood), and count the replies; ``ctx``: another client's keys."""
        statuses: Counter[str] = Counter()
        with dealer(ctx or self.ctx, endpoint) as sock:
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
            producer.send_batch([{"topic": SLOW_TOPIC, "body": os.urandom(60_000), "queue_id": 0}] * 16)
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

    def remoting_acl(self) -> dict[str, Any]:
        """The remoting front's ACL (``mqstore.scripts.survival.hostile.acl_attacks``)."""
        return AclAttacks(self.remoting_port or 0, self.args, self.findings).run()

    def bad_key_flood(self) -> dict[str, Any]:
        """Over TCP: connections with keys the broker never issued, and with none, each sending a
        send: not one may get through."""
        if self.ep.curve is None:
            return {"skipped": "the broker is not on TCP with CURVE (--tcp)"}
        from mqstore.ipc.transport.curve import CurveContext, CurveKeys
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
        shapes = list(encoded_requests(self._writer_encoding(), self.rng).values())  # its valid send_encoded is one
        out = {}
        for name, endpoint in (("ingress", self.ep.ingress), ("reader", self.ep.reader(0))):
            replies = self._exchange(endpoint, [[f] for f in frames] + [[b"\x80", b"extra"]] + shapes)
            out[name] = replies
        return out

    def _writer_encoding(self) -> Encoding:
        """How the writer encodes records, as it answers every producer that asks (``Op.ENCODING``)."""
        with dealer(self.ctx, self.ep.ingress) as sock:
            sock.send(schema.pack(requests.Encoding().encode(1)))
            if not sock.poll(10_000):
                raise TimeoutError("the writer did not say how it encodes")
            return Encoding.of(EncodingReply.decode(schema.unpack(sock.recv())))

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
            producer.send_batch([{"topic": QUIET_TOPIC, "body": b"q", "queue_id": 0}] * 3)
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
           "topic_flood", "bad_key_flood", "invalid_msgpack", "wrong_types", "offsets_beyond_max", "remoting_garbage",
           "remoting_acl", *IPC_ATTACKS)
