"""README.md stays a newcomer's page: at most 15 KB, no commit hash in it, the two commands that
``.ci/run`` and ``scripts/test`` say it has, links that lead somewhere, and headline figures that are the
latest committed benchmark suite's (``docs/benchmarks/suite-*.json``), with that suite's date."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TEXT = README.read_text()
# a lowercase hex word of 7 to 40 with a digit and a letter in it: what git prints for a commit
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_at_most_15_kb() -> None:
    assert len(TEXT.encode()) <= 15 * 1024


def test_nothing_in_it_is_pinned_to_a_commit() -> None:
    assert COMMIT_HASH.findall(TEXT) == []


def test_the_two_commands_are_what_ci_and_the_test_script_run() -> None:
    assert "pip install -e . && mqstore start" in TEXT
    assert "bash scripts/test" in TEXT
    assert "exec bash scripts/test" in (ROOT / ".ci" / "run").read_text()
    assert "mqstore = \"mqstore.scripts.cli.mqstore:main\"" in (ROOT / "pyproject.toml").read_text()


def test_every_tour_command_parses() -> None:
    from mqstore.scripts.cli.mqstore import build_parser

    lines = [line.removeprefix("$ ") for line in TEXT.splitlines() if line.startswith("$ mqstore ")]
    assert len(lines) >= 6
    for line in lines:
        argv = line.split()
        assert build_parser().parse_args(argv[1:]).command == argv[1]


def test_every_relative_link_leads_to_a_file() -> None:
    targets = [t for t in LINK.findall(TEXT) if "://" not in t]
    assert len(targets) > 20
    assert [t for t in targets if not (ROOT / t).is_file()] == []


def _commit_time(path: Path) -> int:
    out = subprocess.run(["git", "log", "-1", "--format=%ct", "--", path.name], cwd=path.parent,
                         capture_output=True, text=True, check=True).stdout.strip()
    return int(out) if out else 0


def _latest_suite() -> tuple[Path, dict[str, Any], str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the suites' dates come from git")
    suites = sorted((ROOT / "docs" / "benchmarks").glob("suite-*.json"), key=_commit_time)
    latest = suites[-1]
    day = datetime.fromtimestamp(_commit_time(latest), UTC).strftime("%Y-%m-%d")
    return latest, json.loads(latest.read_text()), day


def _target(suite: dict[str, Any], workload: str) -> dict[str, Any]:
    found = [t["achieved"] for t in suite["targets"] if t["workload"].startswith(workload)]
    assert len(found) == 1, workload
    result: dict[str, Any] = found[0]
    return result


def test_the_figures_are_the_latest_committed_suite() -> None:
    latest, suite, day = _latest_suite()
    async_128 = _target(suite, "ASYNC 128 B")
    sync_128 = _target(suite, "SYNC 128 B")
    async_4k = _target(suite, "ASYNC 4 KiB")
    broker = _target(suite, "broker CPU per message, ASYNC")
    producer = _target(suite, "producer CPU per message")
    tenth = _target(suite, "send -> consumed, ASYNC at a tenth")
    lookups = _target(suite, "query by key")
    recovery = _target(suite, "recovery")
    redis = suite["redis"]
    expected = [
        f"measured {day}",
        f"| {async_128['appended_msgs_per_s']:,} msgs/s | Redis everysec {redis['everysec']['msgs_per_s']:,} msgs/s "
        f"({async_128['x_redis_everysec']:.2f}x) |",
        f"| {sync_128['msgs_per_s']:,} msgs/s | Redis always {redis['always']['msgs_per_s']:,} msgs/s "
        f"({sync_128['x_redis_always']:.2f}x); {sync_128['x_fdatasync_rate']:.0f}x the fdatasync rate "
        f"({suite['limits']['fdatasync_appends_per_s']:,}/s) |",
        f"| {async_4k['body_mb_per_s']} MB/s | {async_4k['of_seq_write_fdatasync']:.2f}x sequential write + fdatasync "
        f"({suite['limits']['seq_write_fdatasync_mb_per_s']:,} MB/s) |",
        f"| {broker['broker_cpu_us_per_msg']} us | redis-server {broker['redis_server_cpu_us_per_msg']} us |",
        f"| {producer['producers_cpu_us_per_msg']} us | redis-py {producer['redis_py_producers_cpu_us_per_msg']} us |",
        f"| {async_128['consumed_msgs_per_s']:,} msgs/s |",
        f"| p50 {tenth['p50']:.2f} ms, p99 {tenth['p99']:.1f} ms |",
        f"| {lookups['batched_lookups_per_s']:,} lookups/s |",
        f"| {recovery['seconds_per_gib']} s per GiB |",
    ]
    missing = [line for line in expected if line not in TEXT]
    assert missing == [], f"README.md's figures are not {latest.name}'s: update its 'How fast' table"
