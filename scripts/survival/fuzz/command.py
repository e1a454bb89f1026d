"""Fuzzing the decoders that take bytes from outside: no crash, no hang, a clear error.

    python -m mqstore.scripts.survival.fuzz [--inputs 1000000] [--seconds 3600] [--targets record wire ...] [--hang-s
    10]

Targets, each fed by hypothesis (random bytes, byte-flipped and cut copies of valid inputs,
structured inputs), built by ``build`` from ``decoders``, ``wire`` and ``files``:

- ``record``       mqstore.engine.log.record.decode_record, with and without CRC checks: never raises
- ``wire``         mqstore.ipc.wire.schema.unpack, then the same frame through the commitlog writer's request path
                   (``_serve``: parse, validate, append, answer) and reader 0's (``_handle``): every frame
                   answered exactly once, never a SYSTEM_ERROR
- ``remoting``     the RocketMQ remoting front's frame and batch-body decoders: only FrameError
- ``queue_index``  the journal and segment parsers, and QueueIndex.open recovering from the bytes as a
                   journal or a segment file: only QueueIndexError
- ``config``       mqstore.actors.config.load_config on TOML text: only ConfigError
- ``recovery``     a small store's file (commitlog, consume queue, index, checkpoint, offsets, topics,
                   geometry) damaged in a copy, then verify_store, recovery (MessageStore.open), and
                   verify_store again: only the engine's own error types, and a clean verify after

``--inputs`` is spread over the targets by weight, and ``--seconds`` too by another (a store input
costs a thousand record inputs); a target stops at its count or its time, whichever comes first.
Prints one JSON verdict: per target the inputs run, clear errors, crashes (exception type and where,
with the first input that raised it), hangs (an input running past ``--hang-s``) and findings (file
descriptors left open among them); ``ok`` when there are no crashes, hangs or findings.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
import traceback
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

from mqstore.actors.config import ConfigError
from mqstore.engine.ackindex.files import QueueIndexError
from mqstore.scripts.survival.fuzz.decoders import check_record, check_remoting, record_seeds, remoting_seeds
from mqstore.scripts.survival.fuzz.files import (
    STORE_ERRORS,
    ConfigTarget,
    QueueIndexTarget,
    RecoveryTarget,
    config_strategy,
    queue_index_seeds,
)
from mqstore.scripts.survival.fuzz.targets import Finding, Target, bytes_like
from mqstore.scripts.survival.fuzz.wire import WireTarget, wire_strategy

TARGETS = ("record", "wire", "remoting", "queue_index", "config", "recovery")
WEIGHTS = {"record": 40, "wire": 25, "remoting": 10, "queue_index": 10, "config": 12, "recovery": 3}  # of --inputs
TIME_WEIGHTS = {"record": 10, "wire": 25, "remoting": 5, "queue_index": 20, "config": 15, "recovery": 25}
CHUNK = 5_000  # examples per hypothesis run: its bookkeeping grows with each run's examples
FD_SLACK = 8   # descriptors a target that keeps no files may end with beyond what it started with


def build(name: str) -> Target:
    """The target called ``name``, built fresh: ``close`` releases what it holds (files, a store, sockets)."""
    if name == "record":
        return Target(name, bytes_like(record_seeds()), check_record, expand=32)
    if name == "wire":
        wire = WireTarget()
        return Target(name, wire_strategy(wire.encoding), wire.check, close=wire.close, expand=4,
                      keeps_no_files=False)
    if name == "remoting":
        return Target(name, bytes_like(remoting_seeds()), check_remoting, expand=16)
    if name == "queue_index":
        qi = QueueIndexTarget()
        return Target(name, bytes_like(queue_index_seeds()), qi.check, (QueueIndexError,), qi.close, expand=4,
                      stats=lambda: {"recovered": qi.parsed // qi.OPEN_EVERY})
    if name == "config":
        cfg = ConfigTarget()
        return Target(name, config_strategy(), cfg.check, (ConfigError,), cfg.close, expand=4)
    if name == "recovery":
        rec = RecoveryTarget()
        return Target(name, rec.strategy(), rec.check, STORE_ERRORS, rec.close,
                      stats=lambda: {"repaired_by_verify": rec.repaired})
    raise ValueError(f"unknown target {name!r}")


class Hang(BaseException):
    """Raised by the alarm inside an input that runs too long (a BaseException: no ``except
    Exception`` in the code under test can swallow it)."""


class _OutOfTime(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang()


def _where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/hypothesis/" not in f.filename]
    own = [f for f in frames if "/scripts/survival/fuzz/" not in f.filename] or frames  # not the harness's own
    last = own[-1] if own else None
    return f"{last.filename.rsplit('/', 2)[-2:][-1]}:{last.lineno} {last.name}" if last else "?"


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _flip(data: bytes, rng: random.Random) -> bytes:
    """A cheap mutant: a few bytes set, maybe cut short."""
    if not data:
        return bytes([rng.randrange(256)])
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out[:rng.randrange(len(out) + 1)] if rng.random() < 0.2 else out)


def fuzz(target: Target, count: int, seconds: float, hang_s: float) -> dict[str, Any]:
    stats: dict[str, Any] = {"inputs": 0, "clear_errors": 0, "crashes": {}, "hangs": [], "findings": {}}
    deadline = time.monotonic() + seconds

    rng = random.Random(0)

    def one(example: Any) -> None:
        if time.monotonic() > deadline:
            raise _OutOfTime()
        inputs = [example]
        if isinstance(example, bytes):
            inputs += [_flip(example, rng) for _ in range(target.expand - 1)]
        for data in inputs:
            _one(data)

    def _one(data: Any) -> None:
        stats["inputs"] += 1
        # the alarm repeats: one raised where Python ignores exceptions (a gc callback) is not the last
        signal.setitimer(signal.ITIMER_REAL, hang_s, hang_s)
        started = time.monotonic()
        try:
            target.check(data)
            if time.monotonic() - started > hang_s:
                raise Hang()
        except Hang:
            stats["hangs"].append({"seconds": round(time.monotonic() - started, 1), "input": repr(data)[:300]})
        except target.clear:
            stats["clear_errors"] += 1
        except Finding as exc:
            entry = stats["findings"].setdefault(str(exc)[:200], {"count": 0, "input": repr(data)[:300]})
            entry["count"] += 1
        except Exception as exc:
            key = f"{type(exc).__name__} at {_where(exc)}"
            entry = stats["crashes"].setdefault(key, {"count": 0, "message": str(exc)[:200],
                                                      "input": repr(data)[:300]})
            entry["count"] += 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    signal.signal(signal.SIGALRM, _alarm)
    started = time.monotonic()
    fds_before = _open_fds()
    while stats["inputs"] < count and time.monotonic() < deadline:
        before = stats["inputs"]
        examples = max(1, min(CHUNK, (count - before) // target.expand))
        run = settings(max_examples=examples, database=None, deadline=None,
                       phases=[Phase.generate], suppress_health_check=list(HealthCheck))(given(target.strategy)(one))
        try:
            run()
        except _OutOfTime:
            break
        if stats["inputs"] == before:
            break
    stats.update(target.stats())
    stats["open_fds_growth"] = _open_fds() - fds_before
    if target.keeps_no_files and stats["open_fds_growth"] > FD_SLACK:
        stats["findings"][f"{stats['open_fds_growth']} file descriptors left open"] = {"count": 1, "input": ""}
    stats["seconds"] = round(time.monotonic() - started, 1)
    stats["inputs_per_s"] = round(stats["inputs"] / max(stats["seconds"], 1e-9))
    return stats


def run(args: argparse.Namespace) -> dict[str, Any]:
    total_weight = sum(WEIGHTS[t] for t in args.targets)
    total_time_weight = sum(TIME_WEIGHTS[t] for t in args.targets)
    verdict: dict[str, Any] = {"targets": {}}
    for name in args.targets:
        share = max(1, args.inputs * WEIGHTS[name] // total_weight)
        target = build(name)
        try:
            seconds = args.seconds * TIME_WEIGHTS[name] / total_time_weight
            verdict["targets"][name] = fuzz(target, share, seconds, args.hang_s)
        finally:
            target.close()
    results = verdict["targets"].values()
    verdict.update(inputs=sum(r["inputs"] for r in results), crashes=sum(len(r["crashes"]) for r in results),
                   hangs=sum(len(r["hangs"]) for r in results), findings=sum(len(r["findings"]) for r in results))
    verdict["ok"] = verdict["crashes"] == verdict["hangs"] == verdict["findings"] == 0
    return verdict


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m mqstore.scripts.survival.fuzz",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=1_000_000, help="inputs over all targets (1,000,000)")
    p.add_argument("--seconds", type=float, default=3600, help="time over all targets (3600)")
    p.add_argument("--targets", nargs="*", default=list(TARGETS), choices=TARGETS)
    p.add_argument("--hang-s", type=float, default=10.0, help="an input running longer is a hang")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    verdict = run(parse_args(argv))
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
