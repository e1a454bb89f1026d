"""Retention's ``reclaim_consumed`` inside the writer, on the cleanup cadence: each round deletes the
commitlog files every group has consumed (``mqstore.engine.reclaim.consumed`` decides from the durable state,
``mqstore.engine.reclaim.retention.delete_consumed_commitlog`` deletes oldest first), then describes what holds the
oldest files for the writer's status (``files``): what ``mqstore status`` and the metrics show.

Without ``reclaim_consumed`` nothing is read but the files' ages: every file waits for the clock.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from mqstore.actors.config import BrokerConfig
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.reclaim.consumed import ConsumedFiles, Consumption, HeldFile, ReclaimError
from mqstore.engine.reclaim.retention import delete_consumed_commitlog

log = logging.getLogger("mqstore")

DESCRIBED_FILES = 16  # the oldest files described in the status, and the newest (the rest wait behind them)
LISTED_HOLDERS = 8  # holders listed per file in the status (the most messages first); the rest counted


class Reclaimer:
    def __init__(self, config: BrokerConfig, open_files: OpenFiles | None = None) -> None:
        self.policy = config.retention
        geometry = config.store.geometry
        self.files = ConsumedFiles(Path(config.store_dir), geometry.cq_entries_per_file, config.broker.readers,
                                   open_files) if self.policy.reclaim_consumed else None
        self.rounds = 0
        self.report: list[dict[str, Any]] = []
        self.held: list[HeldFile] = []  # what the last round said holds each file (the mover reads it)

    def close(self) -> None:
        if self.files is not None:
            self.files.close()

    def round(self, commitlog: CommitLog) -> int:
        """Delete what every group consumed; returns how many files went."""
        deleted = 0
        consumption: Consumption | None = None
        if self.files is not None:
            try:
                consumption = self.files.read(commitlog.min_offset)
            except ReclaimError as exc:
                log.warning("reclaim: %s; nothing reclaimed this round", exc)  # the next round reads again
            else:
                deleted = delete_consumed_commitlog(commitlog, self.policy, consumption.consumed_end)
        self.rounds += 1
        self.report = self._describe(commitlog, consumption)
        return deleted

    def _describe(self, commitlog: CommitLog, consumption: Consumption | None) -> list[dict[str, Any]]:
        files = commitlog.queue.files
        shown = files if len(files) <= DESCRIBED_FILES else [*files[:DESCRIBED_FILES - 1], files[-1]]
        spans = [(mf.file_base, mf.file_end, self.policy.expires_ms(mf)) for mf in shown]
        self.held = []
        if consumption is None or self.files is None:
            return [{"file": base, "expires_ms": expires_ms, "state": "newest" if i == len(spans) - 1 else "retention",
                     "held_by": [], "more_holders": 0} for i, (base, _, expires_ms) in enumerate(spans)]
        self.held = self.files.describe(consumption, spans)
        return [_file_json(held) for held in self.held]


def _file_json(held: HeldFile) -> dict[str, Any]:
    state = ("newest" if held.newest else "undispatched" if held.undispatched else "held" if held.holds
             else "reclaimable")
    holds = sorted(held.holds, key=lambda h: -h.messages)
    return {"file": held.file_base, "expires_ms": held.expires_ms, "state": state,
            "held_by": [{"kind": h.holder.kind, "group": h.holder.group, "topic": h.holder.topic,
                         "queue": h.holder.queue_id, "messages": h.messages} for h in holds[:LISTED_HOLDERS]],
            "more_holders": max(0, len(holds) - LISTED_HOLDERS)}
