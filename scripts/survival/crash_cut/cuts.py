"""Cut points of a crash-cut recording, and the directory each one leaves behind.

Each cut point is a state to recover from, written into a fresh directory:

- a write boundary: the directory exactly as it was after step ``j``;
- a torn step: the state before step ``j`` plus part of it. The commitlog is one byte stream: its
  bytes below a cut ``c`` come from after the step, the rest from before (cuts at every record
  start, one byte before every record end, inside the properties at a record's tail, and at random
  bytes). Every other file the step changed is, independently, as before, as after, or torn at a
  random byte of the changed range. A mapped file (consume queue, index) torn by a power cut keeps
  its size and reads zeros past the cut; a file written with write(2) (queue-index journal and
  segments, checkpoint, temp files) keeps the prefix that was written, as after a killed process or
  on a filesystem that orders data before size (the queue index has no checksum and cannot tell a
  zero-filled tail from data: ``mqstore.engine.ackindex.codec``). What one atomic syscall changed
  (a rename, a create, a delete) is all or nothing.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from mqstore.scripts.survival.crash_cut.recording import Files, Recording, Step

MAPPED_FAMILIES = ("commitlog/", "consumequeue/", "index/")


@dataclass(frozen=True, slots=True)
class Cut:
    step: int
    kind: str                                   # boundary / torn
    phys_cut: int | None = None                 # the commitlog stream's cut inside the step
    choices: tuple[tuple[str, str, int], ...] = ()  # (path, old | new | torn, byte) of the other changed files


def _diff_range(old: bytes | None, new: bytes | None) -> tuple[int, int] | None:
    if old == new:
        return None
    a, b = old or b"", new or b""
    lo = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    hi = max(len(a), len(b))
    while hi > lo and hi <= min(len(a), len(b)) and a[hi - 1] == b[hi - 1]:
        hi -= 1
    return lo, hi


def _tearable(step: Step, path: str, old: bytes | None, new: bytes | None) -> bool:
    if old is None or new is None or len(new) < len(old):
        return False  # created, deleted or cut short: one syscall, all or nothing
    return step.kind == "torn" or path.startswith(MAPPED_FAMILIES)


def cuts_for(rec: Recording, j: int, torn_per_step: int, rng: random.Random) -> list[Cut]:
    cuts = [Cut(j, "boundary")]
    if j == 0:
        return cuts
    old, new, step = rec.steps[j - 1].files, rec.steps[j].files, rec.steps[j]
    stream: list[int] = []
    others: list[tuple[str, int, int, bool]] = []
    for path in sorted(old.keys() | new.keys()):
        span = _diff_range(old.get(path), new.get(path))
        if span is None:
            continue
        if path.startswith("commitlog/") and path in new:
            base = int(path.rsplit("/", 1)[1])
            stream += [base + span[0], base + span[1]]
        else:
            others.append((path, span[0], span[1], _tearable(step, path, old.get(path), new.get(path))))

    def choices() -> tuple[tuple[str, str, int], ...]:
        together = rng.choice(("old", "new"))  # what one atomic syscall changed goes all or nothing
        out = []
        for path, lo, hi, tearable in others:
            if not tearable and step.kind == "atomic":
                pick = together
            else:
                pick = rng.choice(("old", "new", "torn") if tearable and hi > lo + 1 else ("old", "new"))
            out.append((path, pick, rng.randint(lo + 1, hi - 1) if pick == "torn" else 0))
        return tuple(out)

    if stream:
        lo, hi = min(stream), max(stream)
        positions = set()
        for r in rec.records:
            if lo <= r.phys < hi:
                end = r.phys + r.size
                positions |= {r.phys, end - 1}
                for _ in range(torn_per_step):
                    positions.add(end - rng.randint(2, min(r.size - 1, 48)))  # the properties at the tail
                    positions.add(rng.randint(r.phys + 1, end - 1))
        positions.add(rng.randint(lo, hi))
        cuts += [Cut(j, "torn", c, choices()) for c in sorted(positions)]
    elif any(o[3] and o[2] > o[1] + 1 for o in others):
        for _ in range(torn_per_step):
            cuts.append(Cut(j, "torn", None, choices()))
    elif others and len(others) > 1:
        cuts.append(Cut(j, "torn", None, choices()))
    return cuts


def materialize(rec: Recording, cut: Cut) -> Files:
    new = rec.steps[cut.step].files
    if cut.kind == "boundary":
        return dict(new)
    old = rec.steps[cut.step - 1].files
    picks = {path: (pick, pos) for path, pick, pos in cut.choices}
    out: Files = {}
    for path in old.keys() | new.keys():
        o, n = old.get(path), new.get(path)
        if o == n or (path not in picks and not path.startswith("commitlog/")):
            data = n
        elif path.startswith("commitlog/"):
            if n is None:
                data = o
            else:
                keep = 0 if cut.phys_cut is None else max(0, min(len(n), cut.phys_cut - int(path.rsplit("/", 1)[1])))
                data = n[:keep] + (o or b"").ljust(len(n), b"\0")[keep:]
        else:
            pick, pos = picks[path]
            if pick == "old" or pick == "new" or n is None:
                data = o if pick == "old" else n
            elif path.startswith(MAPPED_FAMILIES):
                data = n[:pos] + (o or b"").ljust(len(n), b"\0")[pos:len(n)]  # a power cut: zeros after
            else:
                data = n[:pos] + (o or b"")[pos:len(n)]  # write(2): the prefix that made it
        if data is not None:
            out[path] = data
    return out


def write_tree(root: Path, files: Files) -> None:
    if root.exists():
        shutil.rmtree(root)
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
