"""The power-cut harness through the real broker: a short run of crash images under both flush
modes, every image recovered by a broker and checked; and the oracle, on a cut whose durable image
is the live copy, passing it and catching an acknowledged send the store never held."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from mqstore.scripts.survival.power_cut.command import run
from mqstore.scripts.survival.power_cut.cut import LiveCopyRecorder, ShimRecorder, cut
from mqstore.scripts.survival.power_cut.oracle import Log, check_image
from mqstore.scripts.survival.power_cut.workload import OFFSET_TOPIC, Journal

pytestmark = pytest.mark.slow


def test_crash_images_of_a_broker_under_load_recover_without_losing_what_was_acknowledged(tmp_path: Path) -> None:
    verdict = run(images=18, modes=("SYNC_FLUSH", "ASYNC_FLUSH"), seed=28, per_cut=3, recorder=ShimRecorder(),
                  workdir=tmp_path)
    assert verdict["images"] == 18 and not verdict["cut_errors"], verdict["cut_errors"]
    assert all(v["images"] == 9 for v in verdict["per_mode"].values())
    summary = [{k: f[k] for k in ("cut", "kind", "image_seed", "checks", "examples")} for f in verdict["failed_images"]]
    assert verdict["failures_by_check"] == {}, json.dumps(summary, indent=1)[:6000]


def test_the_oracle_passes_a_whole_live_copy_and_catches_a_send_the_store_never_held(tmp_path: Path) -> None:
    recorder = LiveCopyRecorder()
    copy = cut(tmp_path / "cut", "SYNC_FLUSH", 5, recorder)
    assert copy.journal.logs.acked and copy.journal.special
    recorder.durable_image(copy.record, copy.live, tmp_path / "durable")
    durable = Log.scan(tmp_path / "durable")
    image = tmp_path / "image"
    recorder.crash_image(copy.record, copy.live, image, random.Random(1))
    whole = check_image(image, durable, tmp_path / "durable", copy.journal, "SYNC_FLUSH", tmp_path / "check-whole")
    assert whole.ok, (whole.counts, whole.examples)

    topic, queue, queue_offset, _ = next(a for a in copy.journal.logs.acked if a[0] == OFFSET_TOPIC)
    never_stored = replace(copy.journal.logs, acked=[*copy.journal.logs.acked, (topic, queue, 10**6, "0" * 64)],
                           seen=[*copy.journal.logs.seen, (topic, queue, queue_offset, "1" * 64)])
    told_more = Journal(never_stored, copy.journal.special, copy.journal.commits)
    caught = check_image(image, durable, tmp_path / "durable", told_more, "SYNC_FLUSH", tmp_path / "check-told-more")
    assert caught.counts["lost"] == 1 and caught.counts["consumed_lost"] == 1, (caught.counts, caught.examples)
