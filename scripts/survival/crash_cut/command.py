"""Crash-consistency harness: record a store's writes, replay them cut at every write boundary and
at bytes inside records, and check that recovery keeps exactly the whole records before the cut.

    python -m mqstore.scripts.survival.crash_cut [--ops 300] [--torn-per-step 2] [--seed 7] [--max-seconds 600]

Recording (``recording``): a workload drives the real engine on a tiny-geometry store, and the
harness snapshots the store directory after every write syscall the engine makes and after every
workload step: the states the directory passes through, in order. Replay (``cuts``): each cut
point, a write boundary or a step torn inside, is a state written into a fresh directory. The
invariant (``oracle``): after recovery, every file family (commitlog, consume queues, index,
checkpoint, consumer offsets, queue index) keeps exactly what was whole before the cut, and
``verify_store`` finds nothing after one more put.

Prints one JSON object: cut points checked by kind, failures (the first few described), seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore.scripts.survival.crash_cut.cuts import cuts_for
from mqstore.scripts.survival.crash_cut.oracle import check
from mqstore.scripts.survival.crash_cut.recording import record


def run(ops: int, torn_per_step: int, seed: int, max_seconds: float, workdir: Path) -> dict[str, Any]:
    started = time.monotonic()
    rng = random.Random(seed)
    rec = record(workdir / "recorded", ops, rng)
    counts = {"boundary": 0, "torn": 0}
    failures: list[dict[str, Any]] = []
    complete = True
    for j in range(len(rec.steps)):
        if time.monotonic() - started > max_seconds:
            complete = False
            break
        for cut in cuts_for(rec, j, torn_per_step, rng):
            try:
                problems = check(rec, cut, workdir / "replay", rng)
            except Exception as exc:  # a crash in recovery is a finding, reported with the cut
                problems = [f"{type(exc).__name__}: {exc}"]
            counts[cut.kind] += 1
            if problems:
                failures.append({"step": j, "kind": cut.kind, "phys_cut": cut.phys_cut,
                                 "choices": [list(c) for c in cut.choices], "problems": problems})
    return {"harness": "crash_cut", "seed": seed, "ops": ops, "steps": len(rec.steps), "records": len(rec.records),
            "queue_index_events": len(rec.qi_events), "cut_points": counts["boundary"] + counts["torn"],
            "boundary_cuts": counts["boundary"], "torn_cuts": counts["torn"], "complete": complete,
            "failures": len(failures), "first_failures": failures[:5],
            "seconds": round(time.monotonic() - started, 1), "ok": complete and not failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.survival.crash_cut",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=300, help="workload steps to record")
    parser.add_argument("--torn-per-step", type=int, default=2, help="random torn cuts per record and step")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=600)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="crash-cut-") as tmp:
        verdict = run(args.ops, args.torn_per_step, args.seed, args.max_seconds, Path(tmp))
    print(json.dumps(verdict))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
