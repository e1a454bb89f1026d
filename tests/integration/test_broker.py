"""The whole broker as users run it: ``mqstore start`` with its supervisor and every actor as real
processes, driven through the client library, killed with SIGKILL, checked on the files. Tests that
neither kill, stop nor configure it share one broker (``shared_broker``), each on its own topic."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any

import psutil
import pytest

from mqstore.engine import MessageStore
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Outgoing, Producer
from mqstore.ipc.transport.channel import BrokerTimeoutError
from tests.integration.broker import Broker, check_acked, free_port_range, wait_for

ACTORS = ("writer", "flusher", "cqbuilder", "indexbuilder", "scheduler", "timer", "reader-0", "transactions")


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("shared")) as broker:
        yield broker


def _batch(start: int, n: int, topics: tuple[str, ...] = ("Orders", "Payments")) -> list[dict[str, Any]]:
    return [{"topic": topics[i % len(topics)], "body": f"message-{i}".encode() * 3,
             "tags": "TagA" if i % 3 else "TagB", "keys": [f"key-{i}"]} for i in range(start, start + n)]


def _consume_all(store: Path, topic: str, group: str, expected: int) -> list[Any]:
    got: list[Any] = []
    with Consumer(store, group=group, topic=topic, start="earliest", long_poll_ms=200) as consumer:
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(1000)
        consumer.commit()
    return got


@pytest.mark.slow
def test_end_to_end_produce_consume_query_restart(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    with broker:
        results = []
        with Producer(broker.store) as producer:
            for start in range(0, 10_000, 200):
                results += producer.send_batch(_batch(start, 200))
        assert all(r.ok for r in results) and len(results) == 10_000
        for topic in ("Orders", "Payments"):
            got = _consume_all(broker.store, topic, "G1", 5000)
            assert len(got) == 5000
            for queue in range(4):  # in order per queue, each queue offset once
                offsets = [m.queue_offset for m in got if m.queue_id == queue]
                assert offsets == list(range(len(offsets)))
        with Admin(broker.store) as admin:
            assert [m.body for m in admin.query_by_key("Orders", "key-42")] == [b"message-42" * 3]
            assert admin.view_by_id(results[77].msg_id).body == b"message-77" * 3  # type: ignore[union-attr]
            assert admin.fetch_offset("G1", "Orders", 0) == 1250
        assert broker.stop() == 0
    assert not (broker.store / "abort").exists()
    with broker:  # start again: everything still there
        assert len(_consume_all(broker.store, "Payments", "G2", 5000)) == 5000
        with Admin(broker.store) as admin:
            assert [m.body for m in admin.query_by_key("Payments", "key-9999")] == [b"message-9999" * 3]
        assert broker.stop() == 0
    assert verify_store(broker.store).ok


class Load:
    """A producer thread sending batches until stopped, logging every SEND_OK with a body hash."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.acked: list[tuple[str, int, int, str]] = []  # topic, queue, queue offset, body hash
        self.timeouts = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        with Producer(self.store, timeout_ms=2000) as producer:
            while not self.stopping:
                batch = _batch(n, 20, ("Chaos",))
                n += 20
                try:
                    results = producer.send_batch(batch)
                except BrokerTimeoutError:
                    self.timeouts += 1  # maybe stored, maybe not: never counted as acknowledged
                    continue
                for msg, r in zip(batch, results, strict=True):
                    if r.ok:
                        self.acked.append((msg["topic"], r.queue_id, r.queue_offset,
                                           hashlib.sha256(msg["body"]).hexdigest()))

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping = True
        self.thread.join(30)

    def wait_more(self, count: int) -> None:
        target = len(self.acked) + count
        wait_for(lambda: len(self.acked) >= target, 60, f"{count} more acknowledged sends")


@pytest.mark.slow
def test_sigkill_each_actor_and_all_at_once_under_load(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    with broker, Load(broker.store) as load:
        load.wait_more(200)
        for actor in ACTORS:
            old = broker.kill(actor)
            broker.wait_restarted(actor, old)
            load.wait_more(200)
        status = broker.status()
        assert status is not None
        pids = {a: status["actors"][a]["pid"] for a in ACTORS}
        for pid in pids.values():
            subprocess.run(["kill", "-KILL", str(pid)], check=False)
        for actor, pid in pids.items():
            broker.wait_restarted(actor, pid)
        load.wait_more(200)
        load.stopping = True
        load.thread.join(30)
        status = broker.status()
        assert status is not None and all(status["actors"][a]["restarts"] == 2 for a in ACTORS)
        assert broker.stop() == 0
    _every_ack_readable_exactly_once(broker.store, load.acked)
    assert verify_store(broker.store).ok


def _survivors(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (a zombie has exited: only its parent has not reaped it)."""
    alive = []
    for p in procs:
        with suppress(psutil.NoSuchProcess):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
    return alive


def _proc_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as exc:
        return f"({exc.strerror})"


def _describe(p: psutil.Process) -> str:
    """What a process is doing, from /proc: its title, state and parent; its signals pending, blocked,
    ignored and caught (SIGTERM is bit 15: pending and not yet handled, or never caught); and each
    thread's name, state, the kernel function it sleeps in and, where readable, its kernel stack."""
    with suppress(psutil.Error):
        lines = [f"{p.pid} {' '.join(p.cmdline())[:100]!r} {p.status()} ppid {p.ppid()}"]
        status = _proc_text(f"/proc/{p.pid}/status").splitlines()
        lines.append("  " + " ".join(line.replace("\t", "") for line in status
                                      if line.startswith(("SigQ", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))))
        for tid in sorted(os.listdir(f"/proc/{p.pid}/task"), key=int):
            task = f"/proc/{p.pid}/task/{tid}"
            state = next((x.split(":", 1)[1].strip() for x in _proc_text(f"{task}/status").splitlines()
                          if x.startswith("State")), "?")
            lines.append(f"  thread {tid} {_proc_text(f'{task}/comm')!r} {state} wchan {_proc_text(f'{task}/wchan')}")
            stack = _proc_text(f"{task}/stack")
            if stack and not stack.startswith("("):
                lines += [f"    {frame}" for frame in stack.splitlines()[:12]]
        return "\n".join(lines)
    return f"{p.pid} gone"


def _why_still_running(broker: Broker, procs: list[psutil.Process], killed_s: float, more_s: float = 60) -> str:
    """The survivors of a SIGKILLed supervisor past the deadline: each described (``_describe``), the
    actors' Python stacks (SIGUSR1, ``mqstore.actors.process.dump_stacks_on_signal``) from the log, and
    whether each is only slow (when it exited) or stuck (still running ``more_s`` later: killed then)."""
    alive = _survivors(procs)
    report = [_describe(p) for p in alive]
    for p in alive:  # an actor, titled or named by its role, dumps its stacks into the log
        with suppress(psutil.Error):
            if " ".join(p.cmdline()).startswith("mqstore: ") or p.name().startswith("mq-"):
                p.send_signal(signal.SIGUSR1)
    exited: dict[int, float] = {}
    deadline = time.monotonic() + more_s
    while len(exited) < len(alive) and time.monotonic() < deadline:
        gone = {p.pid for p in alive} - {p.pid for p in _survivors(alive)}
        exited.update((pid, time.monotonic() - killed_s) for pid in gone - exited.keys())
        time.sleep(0.1)
    for p in _survivors(alive):
        with suppress(psutil.Error):
            p.kill()
    report += [f"{p.pid}: exited {exited[p.pid]:.1f} s after the supervisor's SIGKILL" if p.pid in exited else
               f"{p.pid}: still running {time.monotonic() - killed_s:.0f} s after it: killed" for p in alive]
    return "\n".join(report) + f"\nthe broker's log:\n{broker.logs()[-12000:]}"


def _every_ack_readable_exactly_once(store_dir: Path, acked: list[tuple[str, int, int, str]]) -> None:
    check = check_acked(store_dir, acked)
    assert check.ok, check


@pytest.mark.slow
def test_whole_broker_sigkill_then_restart_recovers(tmp_path: Path) -> None:
    """The supervisor and every actor killed at once (the actors die with their parent): the next
    start recovers abnormally and every acknowledged message is there."""
    broker = Broker(tmp_path, mode="SYNC_FLUSH")
    with broker, Load(broker.store) as load:
        load.wait_more(100)
        assert broker.proc is not None
        actors = psutil.Process(broker.proc.pid).children(recursive=True)  # the fork server and the actors
        assert len(actors) >= len(ACTORS)
        broker.proc.send_signal(signal.SIGKILL)
        broker.proc.wait()
        killed_s = time.monotonic()
        broker.proc = None
        load.stopping = True

    try:
        wait_for(lambda: not _survivors(actors), 30, "every actor to follow its supervisor")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_why_still_running(broker, actors, killed_s)}") from None
    assert (broker.store / "abort").exists()
    with broker:
        status = broker.status()
        assert status is not None and status["recovery"]["abnormal"]
        assert broker.stop() == 0
    _every_ack_readable_exactly_once(broker.store, load.acked)
    assert verify_store(broker.store).ok


def test_long_poll_returns_on_arrival_not_at_timeout(shared_broker: Broker) -> None:
    with nullcontext(shared_broker) as broker, Producer(broker.store) as producer:
        producer.send("Polled", b"first", queue_id=0)  # the topic exists, its queue 0 has one message
        with Consumer(broker.store, group="G", topic="Polled", queues=[0], start="earliest",
                      long_poll_ms=20_000) as consumer:
            assert [m.body for m in consumer.poll(10_000)] == [b"first"]
            assert consumer.poll(300) == []  # parks a 20 s pull on the empty end of the queue
            sent_at = time.monotonic()
            producer.send("Polled", b"wake up", queue_id=0)
            got = consumer.poll(15_000)
            elapsed = time.monotonic() - sent_at
        assert [m.body for m in got] == [b"wake up"]
        assert elapsed < 10, f"the parked pull answered after {elapsed:.1f} s: at its timeout, not on arrival"


def test_bad_input_through_the_broker_and_it_still_serves(shared_broker: Broker) -> None:
    import zmq

    from mqstore.ipc.transport.sockets import connect
    from mqstore.ipc.wire import schema
    with nullcontext(shared_broker) as broker:  # the shared one: neither started nor stopped here
        endpoints = broker.status()
        assert endpoints is not None
        ctx: zmq.Context[Any] = zmq.Context()
        try:
            from mqstore.ipc.transport.endpoints import Endpoints
            ep = Endpoints.for_store(broker.store)
            for address in (ep.ingress, ep.reader(0)):
                sock = connect(ctx, zmq.DEALER, address, rcvtimeo_ms=5000)
                for frame in (b"garbage", schema.pack({"v": 99, "op": "ping", "id": 1}),
                              schema.pack({"v": 1, "op": "no-such-op", "id": 2}), schema.pack([1, 2, 3])):
                    sock.send(frame)
                    reply = schema.unpack(sock.recv())
                    assert reply["ok"] is False and reply["status"] in (schema.BAD_REQUEST, schema.UNKNOWN_OP)
                    assert reply["reason"]
                sock.close()
        finally:
            ctx.destroy(linger=0)
        with Producer(broker.store) as producer:
            assert producer.send("Orders", b"still here").ok
            too_big = producer.send("Orders", b"x" * (5 * 1024 * 1024))
            assert too_big.status == "MESSAGE_ILLEGAL" and "exceeds" in too_big.reason
            big_props = producer.send("Orders", b"x", properties={"p": "v" * 40_000})
            assert big_props.status == "PROPERTIES_SIZE_EXCEEDED" and big_props.reason
            bad_topic = producer.send("no spaces allowed", b"x")
            assert bad_topic.status == "MESSAGE_ILLEGAL"
            out_of_range = producer.send("Orders", b"x", queue_id=4)
            assert out_of_range.status == "MESSAGE_ILLEGAL" and "out of range" in out_of_range.reason
            assert producer.send("Orders", b"and still").ok
        status = broker.status()
        assert status is not None and all(a["restarts"] == 0 for a in status["actors"].values())


def test_cli_status_json_and_stop(tmp_path: Path) -> None:
    broker = Broker(tmp_path).start()
    try:
        out = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "status", "--store",
                              str(broker.store),
                              "--json"], capture_output=True, text=True, check=True).stdout
        status = json.loads(out)
        assert set(status["actors"]) == set(ACTORS)
        for info in status["actors"].values():
            assert info["state"] == "running" and info["pid"] > 0 and "rss_bytes" in info
        assert "lag_bytes" in status["actors"]["cqbuilder"]
        subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "stop", "--store", str(broker.store)],
                       check=True)
        assert broker.proc is not None
        assert broker.proc.wait(60) == 0
        broker.proc = None
    finally:
        broker.__exit__()
    assert not (broker.store / "abort").exists()


def test_zeromq_over_tcp_when_configured(tmp_path: Path) -> None:
    """TCP is opt-in: data endpoints on loopback ports (CURVE), control still in the private run dir."""
    broker = Broker(tmp_path, tcp_port=free_port_range(12))
    with broker:
        endpoints = broker.endpoints()
        assert endpoints.ingress.startswith("tcp://127.0.0.1:") and endpoints.control.startswith("ipc://")
        with Producer(endpoints=endpoints) as producer:
            sent = producer.send("OverTcp", b"hello", queue_id=0)
            assert sent.ok
        with Consumer(endpoints=endpoints, group="G", topic="OverTcp", queues=[0], start="earliest") as consumer:
            got = consumer.messages(1, timeout_ms=10_000)
        assert [m.body for m in got] == [b"hello"]
        assert broker.stop() == 0


def test_disk_watermark_refuses_sends_and_resumes(tmp_path: Path) -> None:
    """Past 90 % used the writer refuses sends with a reason; once space returns it accepts them
    again by itself. Nothing acknowledged is lost."""
    import os as _os
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        broker = Broker(mount, commitlog=64 * 1024, cq=64)
        with broker, Producer(broker.store, retries=0) as producer:
            first = producer.send("Orders", b"before")
            assert first.ok
            st = _os.statvfs(mount)
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            ballast = mount / "ballast"
            ballast.write_bytes(bytes(int(st.f_blocks * st.f_frsize * 0.95) - used))

            def refused() -> Any:
                r = producer.send("Orders", b"during")
                return r if not r.ok else None
            r = wait_for(refused, 20, "sends to be refused on a full disk")
            assert r.status == "SERVICE_NOT_AVAILABLE" and "disk" in r.reason
            ballast.unlink()
            after = wait_for(lambda: (lambda x: x if x.ok else None)(producer.send("Orders", b"after")), 20,
                             "sends to be accepted again")
            assert after.ok
            assert broker.stop() == 0
        with MessageStore.open(broker.store) as store:
            bodies = [m.body for q in range(4) for m in store.get("Orders", q, 0, max_count=32).messages]
        assert b"before" in bodies and b"after" in bodies
        assert verify_store(broker.store).ok
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_supervisor_gives_up_loudly_on_a_flapping_actor(tmp_path: Path) -> None:
    """An actor that keeps dying is restarted with backoff until it died too often within the
    window; then the supervisor stops everything, says why, exits 3 and keeps the abort marker, and
    the next start recovers abnormally with every acknowledged message there."""
    broker = Broker(tmp_path, flap_restarts=3)
    with broker, Producer(broker.store) as producer:
        acked = [producer.send("Orders", f"m{i}".encode()) for i in range(20)]
        assert all(r.ok for r in acked)
        for _ in range(3):
            old = broker.kill("reader-0")
            broker.wait_restarted("reader-0", old)
        broker.kill("reader-0")
        assert broker.proc is not None
        assert broker.proc.wait(60) == 3
        broker.proc = None
    assert "giving up: reader-0 died" in broker.logs()
    assert (broker.store / "abort").exists()
    with broker:
        status = broker.status()
        assert status is not None and status["recovery"]["abnormal"]
        assert broker.stop() == 0
    with MessageStore.open(broker.store) as store:
        for r in acked:
            assert store.get("Orders", r.queue_id, r.queue_offset, max_count=1).messages[0].msg_id == r.msg_id


@pytest.mark.parametrize("kind", ["offsets", "acks"])
def test_consumer_made_right_after_a_topics_first_send_waits_for_the_readers_to_see_it(tmp_path: Path,
                                                                                     kind: str) -> None:
    """The writer records new topics once per tick, and a queue's files come from the consume-queue
    builder: a Consumer (and an AckConsumer, seen flaky in CI) made right after a new topic's first
    SEND_OK, before either, raised "has no queues yet". (The builder is held here, and the tick is
    long, to make that window certain.)"""
    with Broker(tmp_path, broker_extra="tick_interval_ms = 1500") as broker:
        builder = broker.kill("cqbuilder", signal.SIGSTOP)
        try:
            with Producer(broker.store) as producer:
                assert producer.send("Warm", b"x").ok  # the writer ticks right after this round ...
                assert producer.send("BrandNew", b"first").ok  # ... so not again for 1.5 s
            consumer: Consumer | AckConsumer = (
                Consumer(broker.store, group="eager", topic="BrandNew", start="earliest") if kind == "offsets"
                else AckConsumer(broker.store, group="eager", topic="BrandNew"))
        finally:
            os.kill(builder, signal.SIGCONT)
        if isinstance(consumer, Consumer):
            with consumer:
                assert consumer.queues == [0, 1, 2, 3]
                assert [m.body for m in consumer.messages(1, timeout_ms=10_000)] == [b"first"]
        else:
            with consumer:
                got = wait_for(lambda: consumer.receive(1, timeout_ms=200), 10, "the first message, acked mode")
                assert [d.body for d in got] == [b"first"]


def test_a_consumer_made_right_after_a_topics_first_send_is_assigned_every_queue_not_only_those_built(
        tmp_path: Path) -> None:
    """Seen as a Consumer that stopped at 40 of 53 messages with all four queues stored: it was made
    after the first sends to a new topic were answered, before the writer's tick wrote the topic into
    topics.json, while the consume-queue builder had made the files of three of its queues. The
    readers answered those three, and the consumer kept to them for good. The writer now writes a
    topic it made before answering the sends that made it, by either send path, so the readers know
    every queue of it from then on. (The builder is held, so no queue has files yet, and the tick is
    long, so topics.json is not written by it meanwhile.)"""
    with Broker(tmp_path, broker_extra="tick_interval_ms = 1500") as broker:
        topics = broker.store / "config" / "topics.json"
        builder = broker.kill("cqbuilder", signal.SIGSTOP)
        try:
            with Producer(broker.store) as producer, Admin(broker.store) as admin:
                assert producer.send("Warm", b"x").ok
                wait_for(lambda: topics.exists() and "Warm" in topics.read_text(), 10, "Warm in topics.json")
                assert producer.send("ByMap", b"first").ok  # the writer has just written topics.json, at
                assert producer.send_encoded([Outgoing("Encoded", b"first")])[0].ok  # the latest: no tick for 1.5 s
                assert sorted(admin.queue_info("ByMap")) == [0, 1, 2, 3]
                assert sorted(admin.queue_info("Encoded")) == [0, 1, 2, 3]
        finally:
            os.kill(builder, signal.SIGCONT)
        for topic in ("ByMap", "Encoded"):
            with Consumer(broker.store, group="eager", topic=topic, start="earliest") as consumer:
                assert consumer.queues == [0, 1, 2, 3]
                assert [m.body for m in consumer.messages(1, timeout_ms=10_000)] == [b"first"]


# -- mqstore start / status / stop as a new user runs them ------------------------------------------


def test_ready_line_comes_once_the_remoting_front_answers_route_queries(tmp_path: Path) -> None:
    """``mqstore start`` printed ``set_namesrv_addr(...)`` about two seconds before the front listened,
    and a stock client used at once failed with "No route info of this topic". The line now comes
    when every actor serves: at that moment the front answers a route query."""
    from mqstore.ipc.remoting import codec as rm
    port = free_port_range(1)
    broker = Broker(tmp_path, remoting_port=port).launch()
    try:
        wait_for(lambda: broker.proc is not None and (broker.proc.poll() is not None or
                                                        "set_namesrv_addr" in broker.logs()),
                 60, "the line with the address for RocketMQ clients")
        with rm.RemotingClient("127.0.0.1", port, timeout_s=10) as client:
            route = client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"})
        assert route.code == rm.SUCCESS, route.remark
        assert json.loads(route.body)["brokerDatas"][0]["brokerAddrs"]["0"] == f"127.0.0.1:{port}"
        status = broker.mqstore("status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["ready"] and json.loads(status.stdout)["waiting_for"] == []
        assert broker.stop() == 0
    finally:
        broker.__exit__()


def test_status_exits_non_zero_and_says_what_it_waits_for_while_an_actor_is_down(tmp_path: Path) -> None:
    """``mqstore status`` exited 0 whatever the actors' states; a script could not wait on it."""
    hour_ms = 3_600_000
    broker = Broker(tmp_path, supervisor={"backoff_initial_ms": hour_ms, "backoff_max_ms": hour_ms})
    with broker:
        assert broker.mqstore("status").returncode == 0
        broker.kill("reader-0")

        def reader_down() -> bool:
            status = broker.status()
            return status is not None and status["actors"]["reader-0"]["state"].startswith("dead")
        wait_for(reader_down, 30, "the supervisor to see reader-0 dead")
        table = broker.mqstore("status")
        assert table.returncode == 1, table.stderr
        assert "not ready" in table.stderr and "reader-0" in table.stderr
        as_json = broker.mqstore("status", "--json")
        assert as_json.returncode == 1
        status = json.loads(as_json.stdout)
        assert not status["ready"] and [w for w in status["waiting_for"] if w.startswith("reader-0")]
        assert broker.stop() == 0


@pytest.mark.parametrize("remoting", ["on", "off"])
def test_second_start_on_a_held_store_says_in_use_by_which_pid(tmp_path: Path, remoting: str) -> None:
    """A second ``mqstore start`` on a running broker's store ended in a RuntimeError traceback, or,
    with the remoting front on, blamed the port its probe found taken."""
    broker = Broker(tmp_path, remoting_port=free_port_range(1) if remoting == "on" else None)
    with broker:
        assert broker.proc is not None
        second = subprocess.run(broker.start_argv(), capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert f"in use by pid {broker.proc.pid}" in second.stderr
        assert "Traceback" not in second.stderr and "cannot serve RocketMQ clients" not in second.stderr
        status = broker.status()
        assert status is not None and status["pid"] == broker.proc.pid and status["ready"]
        assert broker.stop() == 0


def test_stop_returns_once_the_broker_has_exited_and_the_store_is_free(tmp_path: Path) -> None:
    """``mqstore stop`` returned before the broker stopped, so ``mqstore stop && mqstore spark
    rebuild STORE`` raced the supervisor for the store lock."""
    broker = Broker(tmp_path).start()
    try:
        with Producer(broker.store) as producer:
            assert producer.send("Orders", b"kept").ok
        stop = broker.mqstore("stop")
        assert stop.returncode == 0, stop.stderr
        assert broker.proc is not None and broker.proc.poll() == 0, stop.stderr  # exited, not still stopping
        assert "stopped cleanly" in stop.stderr
        broker.proc = None
        with MessageStore.open(broker.store) as store:  # the lock is free: an offline tool may open it
            assert [m.body for q in range(4) for m in store.get("Orders", q, 0, max_count=32).messages] == [b"kept"]
    finally:
        broker.__exit__()
    assert not (broker.store / "abort").exists()


@pytest.mark.parametrize("wait", ["--wait-ms=300", "--no-wait"])
def test_stop_of_a_broker_that_cannot_stop_yet(tmp_path: Path, wait: str) -> None:
    """A reader held with SIGSTOP keeps the supervisor joining it (for the hour its stop timeout allows):
    ``stop`` says it is still running after its wait and exits 1; ``--no-wait`` returns at once, as
    it used to. Once the reader goes on, the broker stops cleanly."""
    broker = Broker(tmp_path, supervisor={"stop_timeout_ms": 3_600_000}).start()
    try:
        reader = broker.kill("reader-0", signal.SIGSTOP)
        try:
            stop = broker.mqstore("stop", wait)
            assert broker.proc is not None and broker.proc.poll() is None
            if wait == "--no-wait":
                assert stop.returncode == 0 and "not waiting" in stop.stderr, stop.stderr
            else:
                assert stop.returncode == 1 and "still running after 300 ms" in stop.stderr, stop.stderr
        finally:
            os.kill(reader, signal.SIGCONT)
        assert broker.proc.wait(60) == 0
        broker.proc = None
    finally:
        broker.__exit__()
    assert not (broker.store / "abort").exists()
