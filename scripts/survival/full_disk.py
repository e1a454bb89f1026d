"""Full-disk harness: a broker whose store sits on a small tmpfs, filled up in the middle of a load
by a filler file, again and again.

    python -m mqstore.scripts.survival.full_disk [--cycles 6] [--size-mb 24] [--producers 2] [--max-seconds 600]

Needs root (``mount -t tmpfs``). Producers (their own processes) send without pause and log every
outcome (``mqstore.scripts.survival.send_log``); an offset-mode consumer commits as it goes. Retention is configured
never to delete (every disk ratio at 1.0), so the disk really runs out: commitlog, consume-queue and
index files cannot be allocated, offset files cannot be written. Each cycle: wait for some
acknowledged sends, write the filler until ENOSPC, wait until sends are refused, keep the disk full
a moment, delete the filler, and time how long until a send is acknowledged again.

The verdict (one JSON object) holds per cycle the refusing statuses and the seconds to resume, and
``ok`` when every cycle filled the disk and resumed by itself, every refusal was a status with a
reason (no timeouts, no actor died: ``actor_restarts`` 0), the broker stopped cleanly, every
acknowledged send is readable exactly once at its queue offset with its body, and ``verify_store``
finds nothing. A disk that is completely full makes retention delete the oldest commitlog files
whatever the settings (RocketMQ's rule for a full disk): acknowledged sends in them are counted as
``expired_by_retention``, not lost.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import multiprocess

from mqstore.engine.repair.verify import verify_store
from mqstore.scripts.harness import Broker, wait_for
from mqstore.scripts.survival.ack_check import check_acked
from mqstore.scripts.survival.send_log import Logs, consume, produce

NO_RETENTION = """
[retention]
disk_max_used_space_ratio = 1.0
disk_clean_forcibly_ratio = 1.0
disk_warning_ratio = 1.0
"""
CLEAR_STATUSES = frozenset({"CREATE_MAPPED_FILE_FAILED", "SERVICE_NOT_AVAILABLE"})
TOPIC = "Full"


def fill(path: Path) -> int:
    """Write zeros into ``path`` until the filesystem is full; returns the bytes written."""
    written = 0
    chunk = bytes(64 * 1024)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                n = f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                n = 0
            if not n:
                if len(chunk) == 4096:
                    return written
                chunk = bytes(4096)
                continue
            written += n


def restarts(broker: Broker) -> int:
    status = broker.status()
    return sum(int(a["restarts"]) for a in status["actors"].values()) if status else -1


def run(root: Path, cycles: int, size_mb: int, producers: int, max_seconds: float) -> dict[str, Any]:
    started = time.monotonic()
    mount = root / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"harness": "full_disk", "ok": False, "error": f"cannot mount a tmpfs: {proc.stderr.strip()}"}
    broker = Broker(root, commitlog=64 * 1024, cq=64, extra_toml=NO_RETENTION, store=mount / "store")
    mp = multiprocess.get_context("spawn")
    workers: list[Any] = []
    logs = [root / f"producer-{i}.log" for i in range(producers)] + [root / "consumer.log"]
    results: list[dict[str, Any]] = []
    try:
        broker.start()
        restarts_before = restarts(broker)
        for i in range(producers):
            workers.append(mp.Process(target=produce, args=(str(broker.store), str(logs[i]), f"p{i}", TOPIC, 10, 400)))
        workers.append(mp.Process(target=consume, args=(str(broker.store), str(logs[-1]), "G", TOPIC, False)))
        for w in workers:
            w.start()
        filler = mount / "filler"
        for cycle in range(cycles):
            if time.monotonic() - started > max_seconds:
                break
            acked_before = len(Logs.read(logs).acked)
            wait_for(lambda n=acked_before: len(Logs.read(logs).acked) >= n + 200, 60, "sends before filling")
            filled = fill(filler)
            refusals_before = sum(Logs.read(logs).statuses[s] for s in CLEAR_STATUSES)
            wait_for(lambda n=refusals_before: sum(Logs.read(logs).statuses[s] for s in CLEAR_STATUSES) > n, 60,
                     "sends to be refused on the full disk")
            time.sleep(1.0)  # full for a while: every actor meets it
            acked_full = len(Logs.read(logs).acked)
            filler.unlink()
            freed = time.monotonic()
            wait_for(lambda n=acked_full: len(Logs.read(logs).acked) > n + 20, 60, "sends to be accepted again")
            results.append({"cycle": cycle, "filler_bytes": filled,
                            "resumed_after_s": round(time.monotonic() - freed, 2)})
        for w in workers:
            w.terminate()
        for w in workers:
            w.join(30)
        restarts_after = restarts(broker)
        exit_code = broker.stop()
        final = Logs.read(logs)
        check = check_acked(broker.store, final.acked)
        report = verify_store(broker.store)
        unclear = {s: n for s, n in final.statuses.items() if s not in CLEAR_STATUSES and s != "SEND_OK"}
        return {"harness": "full_disk", "size_mb": size_mb, "cycles": len(results), "cycle_results": results,
                **final.summary(), "unclear_statuses": unclear, "actor_restarts": restarts_after - restarts_before,
                "broker_exit": exit_code, "lost": check.counts["lost"], "garbled": check.counts["garbled"],
                "offset_reused": check.counts["offset_reused"],
                "expired_by_retention": check.counts["expired"], "verify_findings": len(report.findings),
                "examples": {"lost": check.lost, "garbled": check.garbled, "findings":
                             [f"{f.kind} {f.location}: {f.detail}" for f in report.findings[:3]]},
                "seconds": round(time.monotonic() - started, 1),
                "ok": len(results) == cycles and check.ok and report.ok and not unclear and exit_code == 0
                and restarts_after == restarts_before}
    except AssertionError as exc:
        return {"harness": "full_disk", "cycles": len(results), "cycle_results": results, "ok": False,
                "error": str(exc), "statuses": dict(Logs.read(logs).statuses), "broker_log": broker.logs()[-3000:]}
    finally:
        for w in workers:
            if w.is_alive():
                w.kill()
        broker.__exit__()
        with contextlib.suppress(OSError):
            (mount / "filler").unlink()
        subprocess.run(["umount", "-l", str(mount)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--size-mb", type=int, default=24)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=600)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="full-disk-") as tmp:
        verdict = run(Path(tmp), args.cycles, args.size_mb, args.producers, args.max_seconds)
    print(json.dumps(verdict))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
