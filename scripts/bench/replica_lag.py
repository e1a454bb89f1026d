"""Replication lag seen from outside both brokers, while a load runs against the master.

Three threads of the benchmark's process:

- ends: subscribes to the master's and the slave's ``written`` notices (the master's writer and the
  slave's HA actor publish them) and every ``sample_s`` notes the master's end minus the slave's:
  the lag in bytes. The load's window runs from the first to the last sample at which the master's
  log had grown more than ``BUSY_BYTES`` since the one before (the producers, not the probes alone);
  samples and probes outside it are left out;
- probes: one message at a time through its own ``Producer`` every ``probe_s``; for each, the time its
  SEND_OK came and where its record ends (the record's size read off the master's commitlog at its
  offset). The lag in ms of a probe is the time from its SEND_OK to the first slave notice whose end
  passes its record; 0 when the slave held it before SEND_OK (a SYNC_MASTER's answer waits for that);
- stats: the master's ``ha`` actor's own report every ``status_s`` (``slaves[].lag_bytes``), the
  figure ``mqstore status`` shows.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Written

BUSY_BYTES = 64 * 1024
PROBE_TOPIC = "ReplicationProbe"


def record_size(store: Path, phys_offset: int) -> int:
    """The size of the record at ``phys_offset`` in the commitlog of ``store`` (its first 4 bytes)."""
    bases = sorted(int(p.name) for p in (store / "commitlog").iterdir() if p.name.isdigit())
    base = bases[bisect.bisect_right(bases, phys_offset) - 1]
    fd = os.open(store / "commitlog" / f"{base:020d}", os.O_RDONLY)
    try:
        return int.from_bytes(os.pread(fd, 4, phys_offset - base), "big")
    finally:
        os.close(fd)


def _pct(values: list[float] | list[int], q: float) -> float | None:
    return round(float(np.percentile(np.asarray(values, np.float64), q)), 3) if values else None


class LagProbe:
    def __init__(self, master: Path, slave: Path, *, probe_s: float = 0.01, sample_s: float = 0.02,
                 status_s: float = 0.2) -> None:
        self.master, self.slave = master, slave
        self.probe_s, self.sample_s, self.status_s = probe_s, sample_s, status_s
        self.master_end = self.slave_end = -1
        self.slave_notices: list[tuple[float, int]] = []   # (monotonic s, end) each time the slave's end grew
        self.samples: list[tuple[float, int, int]] = []    # (monotonic s, master end, slave end)
        self.probes: list[tuple[float, int]] = []          # (monotonic s of SEND_OK, end of its record)
        self.probe_failures = 0
        self.ha_lag_bytes: list[tuple[float, int]] = []    # (monotonic s, the ha actor's lag_bytes)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=t, daemon=True) for t in (self._ends, self._probe, self._stats)]
        self._subscribed = threading.Event()

    def __enter__(self) -> LagProbe:
        for t in self._threads:
            t.start()
        self._subscribed.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def caught_up(self) -> bool:
        """The slave's end has reached the master's (as their last notices say)."""
        return 0 <= self.master_end <= self.slave_end

    # -- threads -----------------------------------------------------------------------------------

    def _ends(self) -> None:
        ctx = zmq.Context()
        subs = {name: connect(ctx, zmq.SUB, Endpoints.for_store(store).written, subscribe=(schema.WRITTEN,))
                for name, store in (("master", self.master), ("slave", self.slave))}
        poller = zmq.Poller()
        for sock in subs.values():
            poller.register(sock, zmq.POLLIN)
        self._subscribed.set()
        next_sample = time.monotonic()
        try:
            while not self._stop.is_set():
                ready = dict(poller.poll(5))
                now = time.monotonic()
                for name, sock in subs.items():
                    if sock in ready:
                        self._drain(name, sock, now)
                if now >= next_sample and self.master_end >= 0 and self.slave_end >= 0:
                    next_sample = now + self.sample_s
                    self.samples.append((now, self.master_end, self.slave_end))
        finally:
            ctx.destroy(linger=0)

    def _drain(self, name: str, sock: zmq.Socket[Any], now: float) -> None:
        while True:
            try:
                _, frame = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            end = Written.decode(frame).end
            if name == "master":
                self.master_end = max(self.master_end, end)
            elif end > self.slave_end:
                self.slave_end = end
                self.slave_notices.append((now, end))

    def _probe(self) -> None:
        from mqstore.ipc.client.api import Admin, Producer
        with Admin(self.master) as admin:
            admin.create_topic(PROBE_TOPIC, 1)
        with Producer(self.master, timeout_ms=30_000, retries=0) as producer:
            while not self._stop.wait(self.probe_s):
                try:
                    result = producer.send(PROBE_TOPIC, b"p" * 128)
                except Exception:  # a timeout under load: counted, the run goes on
                    self.probe_failures += 1
                    continue
                acked = time.monotonic()
                if not result.ok:
                    self.probe_failures += 1
                    continue
                self.probes.append((acked, result.phys_offset + record_size(self.master, result.phys_offset)))

    def _stats(self) -> None:
        while not self._stop.wait(self.status_s):
            with contextlib.suppress(ConnectionError, KeyError, IndexError):
                slaves = control_request(self.master, "status", timeout_ms=1000)["actors"]["ha"]["slaves"]
                self.ha_lag_bytes.append((time.monotonic(), int(slaves[0]["lag_bytes"])))

    # -- figures -----------------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        """Lag in bytes (samples under load), in ms (probes sent under load), and the ha actor's own."""
        grew = [t for (t, m, _), (_, m0, _) in zip(self.samples[1:], self.samples, strict=False) if m - m0 > BUSY_BYTES]
        start, stop = (grew[0], grew[-1]) if grew else (0.0, -1.0)
        lag_bytes = [max(0, m - s) for t, m, s in self.samples if start <= t <= stop]
        times = [t for t, _ in self.slave_notices]
        ends = [e for _, e in self.slave_notices]
        lag_ms: list[float] = []
        before_send_ok = unreplicated = 0
        for acked, end in self.probes:
            if not start <= acked <= stop:
                continue
            i = bisect.bisect_left(ends, end)
            if i == len(ends):
                unreplicated += 1
                continue
            before_send_ok += times[i] <= acked
            lag_ms.append(max(0.0, (times[i] - acked) * 1000))
        ha = [lag for t, lag in self.ha_lag_bytes if start <= t <= stop]
        return {"under_load_s": round(max(0.0, stop - start), 3),
                "bytes": {"samples": len(lag_bytes), "p50": _pct(lag_bytes, 50), "p99": _pct(lag_bytes, 99),
                          "max": max(lag_bytes, default=None)},
                "ms": {"samples": len(lag_ms), "p50": _pct(lag_ms, 50), "p99": _pct(lag_ms, 99),
                       "max": round(max(lag_ms), 3) if lag_ms else None,
                       "held_before_send_ok": before_send_ok, "not_replicated_by_the_end": unreplicated},
                "ha_stats_bytes": {"samples": len(ha), "p50": _pct(ha, 50), "p99": _pct(ha, 99),
                                   "max": max(ha, default=None)},
                "probe_failures": self.probe_failures}
