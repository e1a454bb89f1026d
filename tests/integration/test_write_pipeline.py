"""The write pipeline without a supervisor: writer, flush service and both builders as real processes,
driven over raw ZeroMQ frames, checked on the files afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import multiprocess
import pytest
import zmq

from mqstore.actors.config import BrokerConfig, load_config
from mqstore.actors.process import run_actor
from mqstore.actors.supervisor import Supervisor
from mqstore.engine import MessageStore
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.transport.sockets import bind, connect
from mqstore.ipc.wire import schema
from tests.integration.broker import wait_for

GEOMETRY = {"commitlog_file_size": 64 * 1024, "cq_entries_per_file": 64, "index_slot_count": 64,
            "index_entry_count": 256}


class Pipeline:
    def __init__(self, store: Path, mode: str, **flush: Any) -> None:
        run_dir = tempfile.mkdtemp(prefix="mq")
        self.config: BrokerConfig = load_config(store, None, store={"geometry": GEOMETRY},
                                                flush={"mode": mode, **flush}, ipc={"run_dir": run_dir})
        sup = Supervisor(self.config)
        sup.endpoints.prepare()
        sup._recover()  # what the supervisor does before it starts actors
        self.config = sup.config
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.events = bind(self.ctx, zmq.PULL, self.config.endpoints.events)
        self.mp = multiprocess.get_context("spawn")
        self.procs: dict[str, Any] = {}
        self._seen: list[dict[str, Any]] = []
        for name in ("flusher", "cqbuilder", "indexbuilder", "writer"):
            self.start(name)
        self.producer = connect(self.ctx, zmq.DEALER, self.config.endpoints.ingress, rcvtimeo_ms=10_000)
        self.wait_written()
        self.wait_running(tuple(self.procs))

    def start(self, name: str) -> None:
        proc = self.mp.Process(target=run_actor, args=(name, self.config.to_dict()))
        proc.start()
        self.procs[name] = proc

    def request(self, op: str, request_id: int, **fields: Any) -> dict[str, Any]:
        self.producer.send(schema.pack(schema.request(op, request_id, **fields)))
        return schema.unpack(self.producer.recv())

    def wait_written(self) -> None:
        wait_for(lambda: self.request("ping", 0).get("ok"), 30, "the writer")

    def wait_running(self, names: tuple[str, ...]) -> None:
        """Until each actor said it runs: its SIGTERM handler is set then, so a stop is a clean one
        (a slow start under load would otherwise take the signal's default and exit -15)."""
        running: set[str] = set()

        def all_running() -> bool:
            events = self.events_seen()
            running.update(e["actor"] for e in events if e.get("state") == "running")
            self._seen += events  # kept for the next events_seen
            return running >= set(names)

        wait_for(all_running, 30, f"{names} running")

    def events_seen(self) -> list[dict[str, Any]]:
        seen, self._seen = self._seen, []
        while self.events.poll(0):
            seen.append(schema.unpack(self.events.recv()))
        return seen

    def wait_applied(self, end: int, actors: tuple[str, ...] = ("cqbuilder", "indexbuilder")) -> None:
        """Until each builder reports it applied the commitlog up to ``end`` (PUB/SUB may have
        dropped the first notices: builders close the gap on the writer's next tick)."""
        seen: dict[str, int] = {}

        def caught_up() -> bool:
            for event in self.events_seen():
                if "applied" in event:
                    seen[event["actor"]] = max(seen.get(event["actor"], 0), int(event["applied"]))
            return all(seen.get(a, 0) >= end for a in actors)
        wait_for(caught_up, 30, f"the builders to apply up to {end}")

    def stop(self) -> None:
        """Each actor in order, all of them stopped (killed past 20 s) before any exit code is judged:
        one left running would keep the test session from ending."""
        exits = {}
        for name in ("writer", "cqbuilder", "indexbuilder", "flusher"):
            proc = self.procs[name]
            proc.terminate()
            proc.join(20)
            if proc.exitcode is None:
                proc.kill()
                proc.join(5)
            exits[name] = proc.exitcode
        self.ctx.destroy(linger=0)
        assert exits == dict.fromkeys(exits, 0), f"exit codes {exits}"


@pytest.fixture(params=["ASYNC_FLUSH", "SYNC_FLUSH"])
def pipeline(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Pipeline]:
    p = Pipeline(tmp_path / "store", request.param)
    yield p
    for proc in p.procs.values():
        if proc.is_alive():
            proc.kill()


def _queue_ends(p: Pipeline) -> dict[tuple[str, int], int]:
    """What the consume-queue builder wrote, read off its files (before any recovery touches them)."""
    queues = ConsumeQueueStore.open(Path(p.config.store_dir) / "consumequeue", GEOMETRY["cq_entries_per_file"],
                                    writable=False)
    try:
        return queues.published_state()[0]
    finally:
        queues.close()


def _send(p: Pipeline, n: int, start: int = 0) -> list[dict[str, Any]]:
    msgs = [{"topic": "Orders", "body": f"m{i}".encode() * 20, "tags": "T", "keys": [f"k{i}"], "queue": i % 2}
            for i in range(start, start + n)]
    reply = p.request("send", 1, msgs=msgs)
    assert reply["ok"], reply
    return reply["results"]  # type: ignore[no-any-return]


def test_sends_reach_commitlog_queues_and_index(pipeline: Pipeline) -> None:
    results = []
    for batch in range(20):
        results += _send(pipeline, 25, batch * 25)
    assert all(r["status"] == "PUT_OK" for r in results)
    assert [r["queue_offset"] for r in results if r["queue"] == 0] == list(range(250))
    pipeline.wait_applied(results[-1]["phys_offset"] + 1)
    pipeline.stop()
    assert _queue_ends(pipeline) == {("Orders", 0): 250, ("Orders", 1): 250}
    with MessageStore.open(pipeline.config.store_dir) as store:
        for i, r in enumerate(results):
            got = store.get("Orders", r["queue"], r["queue_offset"], max_count=1)
            assert got.messages[0].body == f"m{i}".encode() * 20
        assert [m.phys_offset for m in store.query_by_key("Orders", "k77")] == [results[77]["phys_offset"]]
    assert verify_store(pipeline.config.store_dir).ok


def test_bad_requests_get_reasons_and_the_writer_goes_on(pipeline: Pipeline) -> None:
    p = pipeline
    p.producer.send(b"\xc1 not msgpack")
    assert schema.unpack(p.producer.recv())["status"] == schema.BAD_REQUEST
    for op, fields, status in [
        ("nope", {}, schema.UNKNOWN_OP),
        ("send", {"msgs": "x"}, schema.BAD_REQUEST),
        ("send", {"msgs": [{"topic": "Orders"}]}, schema.BAD_REQUEST),
        ("send", {"msgs": [{"topic": "Orders", "body": "text not bytes"}]}, schema.BAD_REQUEST),
        ("send", {"msgs": [{"topic": "Orders", "body": b"x", "born_host": ["not-an-ip", 1]}]}, schema.BAD_REQUEST),
    ]:
        reply = p.request(op, 7, **fields)
        assert not reply["ok"] and reply["status"] == status and reply["reason"], reply
    reply = p.request("send", 8, msgs=[{"topic": "bad topic!", "body": b"x"},
                                       {"topic": "Orders", "body": b"x" * 5_000_000},
                                       {"topic": "Orders", "body": b"x", "queue": 99},
                                       {"topic": "Orders", "body": b"ok"}])
    statuses = [r["status"] for r in reply["results"]]
    assert statuses == ["MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL", "PUT_OK"], reply
    assert all(r["reason"] for r in reply["results"][:3])
    assert _send(p, 1)[0]["status"] == "PUT_OK"


def test_builder_killed_catches_up_from_the_commitlog(pipeline: Pipeline) -> None:
    first = _send(pipeline, 30)
    pipeline.procs["cqbuilder"].kill()
    pipeline.procs["cqbuilder"].join()
    second = _send(pipeline, 30, 30)  # dispatched while no builder listens
    pipeline.start("cqbuilder")
    pipeline.procs["indexbuilder"].kill()
    pipeline.procs["indexbuilder"].join()
    pipeline.start("indexbuilder")
    pipeline.wait_applied(second[-1]["phys_offset"] + 1)
    pipeline.stop()
    assert _queue_ends(pipeline) == {("Orders", 0): 30, ("Orders", 1): 30}
    with MessageStore.open(pipeline.config.store_dir) as store:
        for r in first + second:
            assert store.get("Orders", r["queue"], r["queue_offset"], max_count=1).messages[0].phys_offset == \
                r["phys_offset"]
    assert verify_store(pipeline.config.store_dir).ok


def test_builders_killed_catch_up_across_a_commitlog_roll_with_keys(pipeline: Pipeline) -> None:
    """Reput reads the missed range as columns: past a blank end-of-file record into the next file,
    with every key indexed and every queue entry in place."""
    first = _send(pipeline, 25)
    for role in ("cqbuilder", "indexbuilder"):
        pipeline.procs[role].kill()
        pipeline.procs[role].join()
    missed = [r for batch in range(16) for r in _send(pipeline, 25, 25 + batch * 25)]
    assert missed[-1]["phys_offset"] >= GEOMETRY["commitlog_file_size"]  # the missed range rolls a file
    for role in ("cqbuilder", "indexbuilder"):
        pipeline.start(role)
    pipeline.wait_applied(missed[-1]["phys_offset"] + 1)
    pipeline.stop()
    assert _queue_ends(pipeline) == {("Orders", 0): 213, ("Orders", 1): 212}
    with MessageStore.open(pipeline.config.store_dir) as store:
        for i, r in enumerate(first + missed):
            assert store.get("Orders", r["queue"], r["queue_offset"], max_count=1).messages[0].phys_offset == \
                r["phys_offset"]
            assert [m.phys_offset for m in store.query_by_key("Orders", f"k{i}")] == [r["phys_offset"]]
    assert verify_store(pipeline.config.store_dir).ok


def test_writer_killed_mid_load_resumes_offsets(pipeline: Pipeline) -> None:
    first = _send(pipeline, 40)
    pipeline.procs["writer"].kill()
    pipeline.procs["writer"].join()
    pipeline.start("writer")
    pipeline.wait_written()
    second = _send(pipeline, 40, 40)
    assert [r["queue_offset"] for r in first + second if r["queue"] == 0] == list(range(40))
    pipeline.wait_applied(second[-1]["phys_offset"] + 1)
    pipeline.stop()
    assert verify_store(pipeline.config.store_dir).ok


def test_sigterm_is_a_clean_stop(pipeline: Pipeline) -> None:
    _send(pipeline, 5)
    pipeline.stop()
    assert all(proc.exitcode == 0 for proc in pipeline.procs.values())


@pytest.fixture
def sync_pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    p = Pipeline(tmp_path / "store", "SYNC_FLUSH")
    yield p
    for proc in p.procs.values():
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()


def test_sync_flush_acknowledges_only_after_the_flush(sync_pipeline: Pipeline) -> None:
    """With the flush service frozen (SIGSTOP) nothing is acknowledged and nothing becomes
    consumable; once it runs again, the fsync comes first, then the ack and the queue entry."""
    p = sync_pipeline
    first = _send(p, 3)
    p.wait_applied(first[-1]["phys_offset"] + 1, ("cqbuilder",))
    flushed_in = connect(p.ctx, zmq.SUB, p.config.endpoints.flushed, subscribe=(schema.FLUSHED,))
    flusher_pid = p.procs["flusher"].pid
    os.kill(flusher_pid, signal.SIGSTOP)
    try:
        p.producer.send(schema.pack(schema.request("send", 42, msgs=[{"topic": "Orders", "body": b"durable",
                                                                       "queue": 0}])))
        assert not p.producer.poll(1000), "acknowledged while the flush service could not fsync"
        assert _queue_ends(p)[("Orders", 0)] == 2, "consumable before it was flushed"
        while flushed_in.poll(0):
            flushed_in.recv_multipart()
    finally:
        os.kill(flusher_pid, signal.SIGCONT)
    assert p.producer.poll(10_000)
    reply = schema.unpack(p.producer.recv())
    result = reply["results"][0]
    assert result["status"] == "PUT_OK"
    # the flush notice that released it covers the record
    notice_end = 0
    while flushed_in.poll(2000) and notice_end <= result["phys_offset"]:
        notice_end = schema.unpack(flushed_in.recv_multipart()[1])["end"]
    assert notice_end > result["phys_offset"]
    wait_for(lambda: _queue_ends(p)[("Orders", 0)] == 3, 10, "the entry after the flush")


def test_sync_flush_restarted_writer_publishes_the_unflushed_tail_only_once_flushed(
        sync_pipeline: Pipeline) -> None:
    """A writer killed while its appended records wait for a flush leaves them in the log; the writer
    that replaces it finds them on start, and must not let the builders apply them (a consumer would
    read records a power cut can still take) until the flush service says they are durable."""
    p = sync_pipeline
    first = _send(p, 3)
    applied = first[-1]["phys_offset"] + 1
    p.wait_applied(applied, ("cqbuilder",))
    flusher_pid = p.procs["flusher"].pid
    os.kill(flusher_pid, signal.SIGSTOP)
    try:
        p.producer.send(schema.pack(schema.request("send", 42, msgs=[{"topic": "Orders", "body": b"tail",
                                                                       "queue": 0}])))
        wait_for(lambda: _writer_report(p, p.procs["writer"].pid, lambda e: e["written"] > applied), 30,
                 "the writer to append the tail")
        p.procs["writer"].kill()
        p.procs["writer"].join()
        p.start("writer")
        report = wait_for(lambda: _writer_report(p, p.procs["writer"].pid), 30, "the new writer's first tick")
        assert report["written"] > applied, report
        assert report["dispatched"] < report["written"], f"the unflushed tail was published to the builders: {report}"
        assert _queue_ends(p)[("Orders", 0)] == 2
    finally:
        os.kill(flusher_pid, signal.SIGCONT)
    wait_for(lambda: _queue_ends(p)[("Orders", 0)] == 3, 30, "the tail's entry once flushed")


def _writer_report(p: Pipeline, pid: int, wanted: Any = lambda e: True) -> dict[str, Any] | None:
    """The writer process ``pid``'s first tick report (``written``, ``dispatched``) that ``wanted`` accepts."""
    for event in p.events_seen():
        if event.get("actor") == "writer" and event.get("pid") == pid and "dispatched" in event and wanted(event):
            return event
    return None


def test_a_restarted_consume_queue_builder_makes_the_flush_service_sync_every_queue(
        sync_pipeline: Pipeline) -> None:
    """The flush service follows the builder's numbered notices through real sockets: its first
    notice, then the first of a builder restarted (whose predecessor may have written entries it never
    announced), each cost one sweep of every queue; notices that follow each other cost none."""
    p = sync_pipeline
    sweeps = _flusher_sweeps(p, 0, 1)
    assert _flusher_sweeps(p, 100, sweeps) == sweeps
    p.procs["cqbuilder"].kill()
    p.procs["cqbuilder"].join()
    p.start("cqbuilder")
    assert _flusher_sweeps(p, 200, sweeps + 1) == sweeps + 1


def _flusher_sweeps(p: Pipeline, first: int, at_least: int) -> int:
    """Send until the flush service reports the consume-queue entry of the first send synced (a
    notice sent before it subscribed is lost: PUB/SUB), and its sweep count by then."""
    seen = {"sweeps": 0, "queues_durable": 0}
    sent: list[int] = []

    def reported() -> bool:
        for event in p.events_seen():
            if event.get("actor") == "flusher" and "sweeps" in event:
                seen.update(sweeps=event["sweeps"], queues_durable=event["queues_durable"])
        if sent and seen["queues_durable"] > sent[0] and seen["sweeps"] >= at_least:
            return True
        sent.append(_send(p, 1, first + len(sent))[0]["phys_offset"])
        return False
    wait_for(reported, 30, f"the flush service to sync the queues after {at_least} sweep(s)")
    return seen["sweeps"]


def test_sync_flush_times_out_without_a_flush(tmp_path: Path) -> None:
    p = Pipeline(tmp_path / "store", "SYNC_FLUSH", sync_timeout_ms=1500)
    try:
        _send(p, 1)
        os.kill(p.procs["flusher"].pid, signal.SIGSTOP)
        started = time.monotonic()
        result = _send(p, 1, 1)[0]
        assert result["status"] == "FLUSH_DISK_TIMEOUT"
        assert time.monotonic() - started >= p.config.flush.sync_timeout_ms / 1000 * 0.9
    finally:
        os.kill(p.procs["flusher"].pid, signal.SIGCONT)
        for proc in p.procs.values():
            proc.kill()


def test_a_writer_stopped_while_its_flush_service_is_gone_flushes_the_held_send_itself(tmp_path: Path) -> None:
    """Every actor gets SIGTERM at once when the supervisor dies, so the flush service may be gone
    before the writer stops: a SYNC_FLUSH send held for its flush is flushed by the writer and
    answered PUT_OK at the stop, not after the sync timeout (an hour here)."""
    p = Pipeline(tmp_path / "store", "SYNC_FLUSH", sync_timeout_ms=3_600_000)
    try:
        _send(p, 1)
        os.kill(p.procs["flusher"].pid, signal.SIGSTOP)
        msg = {"topic": "Orders", "body": b"held", "tags": "T", "keys": ["held"], "queue": 0}
        p.producer.send(schema.pack(schema.request("send", 2, msgs=[msg])))
        wait_for(lambda: any(e.get("actor") == "writer" and e.get("pending_sync", 0) >= 1 for e in p.events_seen()),
                 30, "the writer to hold the send for its flush")
        p.procs["writer"].terminate()
        assert p.producer.poll(30_000), "the held send was not answered at the writer's stop"
        reply = schema.unpack(p.producer.recv())
        assert reply["ok"] and reply["results"][0]["status"] == "PUT_OK", reply
        p.procs["writer"].join(30)
        assert p.procs["writer"].exitcode == 0
    finally:
        os.kill(p.procs["flusher"].pid, signal.SIGCONT)
        for proc in p.procs.values():
            proc.kill()


def test_full_disk_refuses_sends_then_resumes(tmp_path: Path) -> None:
    """The store on a 1 MiB tmpfs: sends fail with a clear status once it is full, the actors keep
    running, writing resumes by itself once space is freed, and the store verifies clean."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        ballast = mount / "ballast"
        ballast.write_bytes(bytes(640 * 1024))  # most of the disk: freeing it leaves ample room
        p = Pipeline(mount / "store", "ASYNC_FLUSH")
        acked: list[dict[str, Any]] = []
        refused: dict[str, Any] = {}
        for batch in range(200):
            results = _send(p, 20, batch * 20)
            acked += [r for r in results if r["status"] == "PUT_OK"]
            bad = [r for r in results if r["status"] != "PUT_OK"]
            if bad:
                refused = bad[0]
                break
        assert refused, "the disk never filled up"
        assert refused["status"] == "CREATE_MAPPED_FILE_FAILED" and "No space left" in refused["reason"]
        assert all(proc.is_alive() for proc in p.procs.values())
        ballast.unlink()
        more = _send(p, 5, 10_000)
        assert all(r["status"] == "PUT_OK" for r in more), more
        p.stop()
        with MessageStore.open(mount / "store") as store:
            for r in acked + more:
                assert store.get("Orders", r["queue"], r["queue_offset"], max_count=1).messages[0].phys_offset == \
                    r["phys_offset"]
        assert verify_store(mount / "store").ok
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
