"""Store files a running broker holds open (``mqstore.engine.log.open_files``): after a reclamation
round, and after a retention round, no process of the broker holds a deleted store file (a
descriptor in ``/proc/PID/fd`` or a mapping in ``/proc/PID/maps``), and as the store grows across
many small files each process holds at most ``open_files_max`` of them once it is idle.

64 KiB commitlog files and 1 KiB bodies: about 60 messages fill a file; 16-entry consume-queue files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from tests.integration.broker import Broker, wait_for

FILE_SIZE = 64 * 1024
COUNT = 600  # about ten commitlog files, 38 consume-queue files
OPEN_FILES_MAX = 8


def _keys(i: int) -> list[str]:
    """Six keys a message: with 255 entries an index file, about 16 files for the 600 messages."""
    return [f"{prefix}{i}" for prefix in "kabcde"]


def _broker(tmp_path: Path, retention: str, *, open_files_max: int = OPEN_FILES_MAX) -> Broker:
    return Broker(tmp_path, commitlog=FILE_SIZE, cq=16,
                  broker_extra=("clean_interval_ms = 100\noffset_persist_interval_ms = 100\n"
                                f"open_files_max = {open_files_max}\nopen_files_sweep_ms = 100"),
                  extra_toml=f"\n[retention]\n{retention}\n")


def _produce(producer: Producer, topic: str) -> None:
    for first in range(0, COUNT, 50):
        batch = [{"topic": topic, "body": f"{i:06d}".encode() * 170, "queue_id": 0, "keys": _keys(i)}
                 for i in range(first, min(COUNT, first + 50))]
        assert all(r.ok for r in producer.send_batch(batch))


def _consume_all(broker: Broker, group: str, topic: str) -> None:
    with Consumer(broker.store, group=group, topic=topic, queues=[0], auto_commit=False) as consumer:
        assert len(consumer.messages(COUNT, timeout_ms=20_000)) == COUNT
        consumer.commit()


def _query_oldest_key(broker: Broker, topic: str) -> None:
    """A key query that walks every index file (the oldest key is in the oldest): the reader maps each."""
    with Admin(broker.store) as admin:
        wait_for(lambda: [m.body for m in admin.query_by_key(topic, "k0")] == [b"000000" * 170], 20,
                 "the oldest key to be found")


def _commitlog_files(broker: Broker) -> list[str]:
    return sorted(p.name for p in (broker.store / "commitlog").iterdir() if p.name.isdigit())


def _queue_files(broker: Broker, topic: str, queue_id: int = 0) -> int:
    return len(list((broker.store / "consumequeue" / topic / str(queue_id)).iterdir()))


def _writer(broker: Broker) -> dict[str, Any]:
    status = broker.status()
    assert status is not None
    return dict(status["actors"]["writer"])


def _held(broker: Broker) -> dict[str, list[str]]:
    """Per process of the broker (``name[pid]``), the store files it holds: descriptors and mappings,
    each as the kernel names it (`` (deleted)`` after a deleted file's path)."""
    store = str(broker.store.resolve())
    assert broker.proc is not None
    held: dict[str, list[str]] = {}
    for proc in [psutil.Process(broker.proc.pid), *psutil.Process(broker.proc.pid).children(recursive=True)]:
        names: list[str] = []
        try:
            for fd in os.listdir(f"/proc/{proc.pid}/fd"):
                try:
                    names.append("fd " + os.readlink(f"/proc/{proc.pid}/fd/{fd}"))
                except FileNotFoundError:
                    continue  # closed meanwhile
            with open(f"/proc/{proc.pid}/maps") as maps:
                names += ["map " + line.split(maxsplit=5)[5].strip() for line in maps if len(line.split()) == 6]
            label = f"{proc.name()}[{proc.pid}]"
        except (FileNotFoundError, ProcessLookupError, psutil.NoSuchProcess):
            continue
        held[label] = [n for n in names if _store_file(n, store)]
    return held


def _index_files(broker: Broker) -> list[str]:
    return sorted(p.name for p in (broker.store / "index").iterdir() if p.name.isdigit())


def _store_file(name: str, store: str) -> bool:
    path = name.split(" ", 1)[1]
    return path.startswith(store + "/") and any(f"/{d}/" in path for d in ("commitlog", "consumequeue", "index"))


def _deleted(broker: Broker) -> dict[str, list[str]]:
    held = _held(broker).items()
    return {proc: gone for proc, names in held if (gone := [n for n in names if n.endswith("(deleted)")])}


def _no_deleted_file_held(broker: Broker) -> None:
    last: dict[str, list[str]] = {}

    def none_held() -> bool:
        nonlocal last
        last = _deleted(broker)
        return not last
    try:
        wait_for(none_held, 30, "no process to hold a deleted store file")
    except Exception:
        raise AssertionError(f"deleted store files still held: {last}") from None


def test_deleted_files_are_held_open_after_a_reclamation_round(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "reclaim_consumed = true")
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Reclaimed")
        files = _commitlog_files(broker)
        assert len(files) >= 8
        _consume_all(broker, "Group", "Reclaimed")
        wait_for(lambda: _commitlog_files(broker) == files[-1:], 30, "every consumed file to go")
        wait_for(lambda: _queue_files(broker, "Reclaimed") <= 6, 30, "the consume-queue files below it to go")
        _no_deleted_file_held(broker)


def test_deleted_files_are_held_open_after_a_retention_round(tmp_path: Path) -> None:
    """Retention (every file expired at once, in every hour) deletes commitlog, consume-queue and index
    files that every process has read, synced or queried through, on four queues: once the round is
    over no process holds one of them. An unacked message at the log's start holds every file back
    (``keep_unacked``) until the store is written, flushed, consumed and queried; acking it is the
    switch that lets the round run."""
    hours = ";".join(str(h) for h in range(24))
    broker = Broker(tmp_path, commitlog=FILE_SIZE, cq=16,
                    broker_extra="clean_interval_ms = 100\noffset_persist_interval_ms = 100",
                    extra_toml=f'\n[retention]\nfile_reserved_hours = 0\ndelete_when = "{hours}"\n'
                               "keep_unacked = true\n")
    queues = [0, 1, 2, 3]
    with broker, Producer(broker.store) as producer:
        assert producer.send("Held", b"held", queue_id=0).ok
        with AckConsumer(broker.store, group="Holder", topic="Held", queues=[0], visibility_ms=600_000) as holder:
            held = holder.receive(1, timeout_ms=10_000)
            assert len(held) == 1 and held[0].queue_offset == 0
            mark = broker.store / "queueindex" / "lowwater-0.json"
            wait_for(lambda: mark.exists() and b'"phys_offset": 0' in mark.read_bytes(), 20, "the low-water mark")
            for first in range(0, COUNT, 50):
                assert all(r.ok for r in producer.send_batch(
                    [{"topic": "Expired", "body": f"{i:06d}".encode() * 170, "queue_id": i % 4, "keys": [f"k{i}"]}
                     for i in range(first, min(COUNT, first + 50))]))
            with Consumer(broker.store, group="Group", topic="Expired", queues=queues, auto_commit=False) as consumer:
                assert len(consumer.messages(COUNT, timeout_ms=20_000)) == COUNT
                consumer.commit()
            _query_oldest_key(broker, "Expired")
            files, index_files = _commitlog_files(broker), _index_files(broker)
            assert len(files) >= 8 and len(index_files) >= 3
            wait_for(lambda: _writer(broker)["flushed"] >= _writer(broker)["written"], 30, "the log to be flushed")
            assert _commitlog_files(broker) == files  # nothing expired went while the message was unacked
            holder.ack(held)
        wait_for(lambda: _commitlog_files(broker) == files[-1:], 30, "every expired file to go")
        wait_for(lambda: sum(_queue_files(broker, "Expired", q) for q in queues) <= 8, 30,
                 "the consume-queue files below it to go")
        wait_for(lambda: _index_files(broker)[0] != index_files[0], 30, "the index files below it to go")
        _no_deleted_file_held(broker)


def test_store_files_held_per_process_stay_bounded_as_the_store_grows(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "reclaim_consumed = false")
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Grown")
        _consume_all(broker, "Group", "Grown")
        _query_oldest_key(broker, "Grown")
        # the index builder may still be writing the later files (a loaded machine): wait for them
        wait_for(lambda: len(_commitlog_files(broker)) >= 8 and len(_index_files(broker)) > OPEN_FILES_MAX, 60,
                 "more index files than open_files_max")
        last: dict[str, int] = {}

        def bounded() -> bool:
            nonlocal last
            # each mapping is counted with the descriptor its mmap holds: one file, one entry
            last = {proc: len({n.split(" ", 1)[1] for n in names})
                    for proc, names in _held(broker).items()}
            return max(last.values()) <= OPEN_FILES_MAX
        try:
            wait_for(bounded, 30, "every process to hold at most open_files_max store files")
        except Exception:
            raise AssertionError(f"store files held per process: {last}") from None
