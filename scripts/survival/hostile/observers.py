"""What the hostile-clients harness watches while it attacks: a good client kept working beside the
attacks (``GoodClient``: a producer sending every few ms and a consumer reading it all) and the
broker's memory (``Rss``: every process of its tree, sampled on a thread)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import suppress
from typing import Any

import psutil

from mqstore.ipc.client.api import Consumer, Producer
from mqstore.ipc.transport.endpoints import Endpoints

GOOD_TOPIC = "Good"


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
                    status = producer.send(GOOD_TOPIC, body, queue_id=0).status
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
