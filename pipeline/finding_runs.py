"""Runs of findings: consecutive missing entries reported as one finding, as ``mqstore.engine.repair.verify``
reports them ("... queue offsets 3..9", "7 in a row; the first: ..."). A Spark task sees part of the
log, so it hands on its runs whole, and ``merge_runs`` joins those that a range boundary cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mqstore.engine.repair.verify import Finding


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive findings of one kind in one scope: ``mqstore.engine.repair.verify._Runs``' unit of report."""

    scope: str
    first: int
    last: int
    next_position: int
    count: int
    detail: str

    def finding(self, kind: str, unit: str) -> Finding:
        if self.count == 1:
            return Finding(kind, f"{self.scope} {unit} {self.first}", self.detail)
        return Finding(kind, f"{self.scope} {unit}s {self.first}..{self.last}",
                       f"{self.count} in a row; the first: {self.detail}")


class RunCollector:
    """Positions arrive in walk order; one run per scope stays open until a gap closes it."""

    def __init__(self) -> None:
        self.open: dict[str, Run] = {}
        self.done: list[Run] = []

    def add(self, scope: str, position: int, next_position: int, detail: str) -> None:
        run = self.open.get(scope)
        if run is not None and run.next_position == position:
            self.open[scope] = Run(scope, run.first, position, next_position, run.count + 1, run.detail)
            return
        if run is not None:
            self.done.append(run)
        self.open[scope] = Run(scope, position, position, next_position, 1, detail)

    def close(self) -> list[Run]:
        self.done.extend(self.open.values())
        self.open.clear()
        return self.done


def merge_runs(runs: Iterable[Run]) -> list[Run]:
    """Join runs that one range ended and the next one went on with."""
    merged: list[Run] = []
    for run in sorted(runs, key=lambda r: (r.scope, r.first)):
        prev = merged[-1] if merged else None
        if prev is not None and prev.scope == run.scope and prev.next_position == run.first:
            merged[-1] = Run(prev.scope, prev.first, run.last, run.next_position, prev.count + run.count, prev.detail)
        else:
            merged.append(run)
    return merged
