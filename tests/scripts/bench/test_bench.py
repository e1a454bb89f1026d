"""Smoke tests of the benchmark tools: tiny runs that check the JSON's shape and that the messages the
load generator reports really are in the store. Speed is never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mqstore.ipc.client.api import Admin
from mqstore.scripts.bench import limits as bench_limits
from mqstore.scripts.bench import redis_peer as bench_redis
from mqstore.scripts.bench import sweep as bench_sweep
from mqstore.scripts.bench import trace as bench_trace
from mqstore.scripts.bench.load import Workload, run_load
from tests.integration.broker import Broker, wait_for

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the load runs, each on topics of its own prefix (Smoke, Paced, the CLI's Bench)."""
    b = Broker(tmp_path_factory.mktemp("bench"), readers=2).start()
    yield b
    assert b.stop() == 0


def _stored(store: Path, topics: list[str]) -> int:
    with Admin(store) as admin:
        return sum(hi - lo for t in topics for lo, hi in admin.queue_info(t).values())


def test_load_sends_what_it_reports_and_consumers_see_it_all(broker: Broker) -> None:
    spec = Workload(producers=2, consumers=2, readers=2, count=3000, batch=50, topics=2, queues=3, key_share=0.2,
                    tag_share=0.5, topic_prefix="Smoke")
    result = run_load(broker.store, spec)
    send, consume = result.summary["send"], result.summary["consume"]
    assert send["messages_ok"] == 3000 and send["failed"] == 0
    assert {"msgs_per_s", "rt_avg_ms", "rt_max_ms", "rt_p99_ms", "seconds"} <= set(send)
    assert consume["messages"] == 3000 and consume["complete"]
    assert set(consume["latency_ms"]) == {"samples", "p50", "p99", "p99.9", "max"}
    assert result.latencies_us.size == 3000 and (result.latencies_us > 0).all()
    wait_for(lambda: _stored(broker.store, spec.topic_names()) == 3000, 30, "3000 consumable")
    with Admin(broker.store) as admin:  # keyed messages are indexed under the generator's key names
        assert admin.query_by_key("Smoke0", "k0-0") or admin.query_by_key("Smoke1", "k0-0")


def test_open_loop_rate_and_duration_bound_the_run(broker: Broker) -> None:
    spec = Workload(producers=1, count=None, duration_s=1.0, rate=2000, batch=20, topic_prefix="Paced")
    send = run_load(broker.store, spec).summary["send"]
    assert 0 < send["messages_ok"] <= 2000 * 1.5 + 20  # paced, not flat out
    wait_for(lambda: _stored(broker.store, spec.topic_names()) == send["messages_ok"], 30, "all consumable")


def test_load_command_prints_one_json_summary(broker: Broker) -> None:
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "bench", "load", "--store",
                           str(broker.store),
                           "--count", "5000", "--batch", "25", "--consumers", "1", "--readers", "2", "--no-live"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["benchmark"] == "load" and doc["send"]["messages_ok"] == 5000 and doc["consume"]["complete"]
    broker_cpu = doc["broker"]  # every broker process's CPU per message appended, and their sum
    assert {"supervisor", "writer", "cqbuilder", "indexbuilder", "flusher", "reader-0", "reader-1"} <= \
        set(broker_cpu["actors_cpu_us_per_msg"])
    # CPU times come in 10 ms clock ticks: 200 requests, so that the writer's share is more than one
    assert broker_cpu["actors_cpu_us_per_msg"]["writer"] > 0
    assert broker_cpu["cpu_us_per_msg"] == pytest.approx(sum(broker_cpu["actors_cpu_us_per_msg"].values()), abs=0.1)


def test_limits_have_every_figure(tmp_path: Path) -> None:
    limits = bench_limits.measure_limits(tmp_path, quick=True)
    for name in ("mmap_copy_mb_per_s", "seq_write_fdatasync_mb_per_s", "fdatasync_appends_per_s",
                 "ipc_batch_round_trip_us", "ipc_one_producer_msgs_per_s"):
        assert limits[name] > 0, name
    assert list(tmp_path.iterdir()) == []  # the probes clean up


def test_redis_peer_runs_both_fsync_modes(tmp_path: Path) -> None:
    why = bench_redis.available()
    if why is not None:  # scripts/test installs both: the redis extra and Debian's redis-server
        pytest.skip(f"the Redis Streams peer cannot run here: {why}")
    result = bench_redis.run_peer(tmp_path, producers=1, count=1000, body_bytes=128)
    assert result["server"].startswith("Redis server v=")
    for mode in ("everysec", "always"):
        assert result[mode]["messages"] == 1000 and result[mode]["msgs_per_s"] > 0
        # redis-server's CPU comes from /proc in clock ticks: a thousand XADDs may take less than one
        assert result[mode]["server_cpu_us_per_msg"] >= 0 and result[mode]["producers_cpu_us_per_msg"] > 0


def test_redis_peer_without_redis_server_says_why_and_runs_nothing(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no redis-server on it
    result = bench_redis.run_peer(tmp_path, producers=1, count=1000, body_bytes=128)
    assert result == {"skipped": "redis-server is not installed (--install-redis runs apt-get install -y redis-server)"}
    assert list(tmp_path.iterdir()) == [tmp_path / "bin"]


def test_sweep_plot_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "sweep.png"
    bench_sweep.plot(path, [{"producers": 1, "msgs_per_s": 10}, {"producers": 2, "msgs_per_s": 18}],
                     [{"readers": 1, "msgs_per_s": 12}], {"a": np.array([900, 1100, 1500, 4000]), "b": np.array([])},
                     "t", "latency")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_suite_writes_json_and_png(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "bench", "suite", "--procs", "1",
                           "--seconds",
                           "0.5", "--lookups", "20", "--recovery-mb", "1", "--spark-messages", "2000",
                           "--redis-count", "1000", "--backlog", "300", "--replication-rounds", "1",
                           "--idle-seconds", "0.5", "--settle-seconds", "0.2", "--idle-topics", "3",
                           "--idle-groups", "3", "--rate-seconds", "0.5",
                           "--quick", "--out", str(out), "--name", "smoke", "--dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=480)  # a hang guard (~160 s alone)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "smoke.json").read_text())
    # 13 rows of the suite's own, 2 of replication's goals, 6 of the load points' (idle: none, 3 topics,
    # 3 topics and 3 groups; 5,000 msgs/s and a tenth of the max; the slowest message of every latency run)
    assert len(doc["targets"]) == 21
    workloads = [t["workload"] for t in doc["targets"]]
    assert sum(w.startswith("broker idle") for w in workloads) == 3
    assert "error" not in doc["runs"]["replication"] and "error" not in doc["runs"]["load_points"]
    assert sum(w.startswith("replication: ") for w in workloads) == 2
    spark = next(t["achieved"] for t in doc["targets"] if t["workload"].startswith("Spark batch read"))
    assert spark["messages"] == 2000 and spark["arrow_noop_rows_per_s"] > 0 and spark["parquet_noop_rows_per_s"] > 0
    assert spark["arrow_pruned_agg_rows_per_s"] > 0 and spark["pruned_over_parquet_agg"] > 0
    assert all({"workload", "target", "achieved", "met"} <= set(t) for t in doc["targets"])
    cpu_rows = [t["achieved"] for t in doc["targets"] if t["workload"].startswith("broker CPU per message")]
    assert len(cpu_rows) == 2 and all(row["broker_cpu_us_per_msg"] > 0 for row in cpu_rows)
    assert all(row["broker_over_redis_server"] is None or row["broker_over_redis_server"] > 0 for row in cpu_rows)
    assert doc["runs"]["async_128"]["consume"]["complete"]
    assert doc["runs"]["async_128"]["inflight"] == 32 and doc["runs"]["async_128_inflight_4"]["inflight"] == 4
    half = next(t["achieved"] for t in doc["targets"] if t["workload"].startswith("send -> consumed, ASYNC at half"))
    assert half["of_inflight_4_max"]["rate"] == round(doc["runs"]["async_128_inflight_4"]["send"]["msgs_per_s"] / 2)
    assert "skipped" in doc["redis"] or doc["redis"]["everysec"]["pipeline"] == 100 * 32  # as many outstanding
    assert all(doc["runs"]["query_by_key"][mode]["found"] > 0 for mode in ("one_at_a_time", "in_flight", "batched"))
    queries = doc["runs"]["query_by_key"]
    assert queries["batched"]["lookups"] == 10 * queries["one_at_a_time"]["lookups"]  # the keys gone over 10 times
    assert (out / "smoke.png").read_bytes()[:4] == b"\x89PNG"
    assert doc["runs"]["latency_sync_tenth_rate"]["flush"] == "SYNC_FLUSH"
    assert "flushed -> dispatch" in doc["runs"]["trace_sync_tenth_rate"]["hops_ms"]


@pytest.mark.slow
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_trace_stamps_every_hop_of_every_message(tmp_path: Path, flush: str) -> None:
    config = tmp_path / "broker.toml"  # sends are refused on a disk others filled past 90 % otherwise
    config.write_text("[retention]\ndisk_max_used_space_ratio = 0.99\ndisk_clean_forcibly_ratio = 0.99\n"
                      "disk_warning_ratio = 1.0\n")
    result = bench_trace.trace_run(tmp_path, 200, 1.0, batch=2, flush=flush, config=config)
    assert result["received"] == result["sent"] > 0 and result["failed"] == 0
    stamps = {"append", "dispatch", "arrived", "indexed", "acked", "replied", "received"} | (
        {"flushed"} if flush == "SYNC_FLUSH" else set())
    assert stamps <= set(result["since_send_ms"])
    assert all(result["since_send_ms"][name]["samples"] == result["sent"] for name in stamps)
    assert all(hop["samples"] == result["sent"] for hop in result["hops_ms"].values())


def test_producer_cpu_reports_the_encoder_and_each_inflights_loop(capsys: pytest.CaptureFixture[str]) -> None:
    from mqstore.scripts.bench import producer_cpu
    assert producer_cpu.main(["--inflight", "1,4", "--count", "2000"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["encode_columns_cpu_us_per_batch"] > 0
    assert [(r["inflight"], r["count"], r["failed"]) for r in lines[1:]] == [(1, 2000, 0), (4, 2000, 0)]
    assert all(r["cpu_us_per_msg"] > 0 for r in lines[1:])
