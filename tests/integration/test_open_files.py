"""Store files a running broker holds open (``mqstore.engine.log.open_files``): after a reclamation
round no process of the broker holds a deleted store file (a descriptor in
``/proc/PID/fd`` or a mapping in ``/proc/PID/maps``), and as the store grows across many small
files each process holds at most ``open_files_max`` of them once it is idle.

64 KiB commitlog files and 1 KiB bodies: about 60 messages fill a file; 16-entry consume-queue files.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from mqstore.ipc.client.api import Consumer, Producer
from tests.integration.broker import Broker, wait_for

FILE_SIZE = 64 * 1024
COUNT = 600  # about ten commitlog files, 38 consume-queue files
OPEN_FILES_MAX = 8


def _broker(tmp_path: Path, retention: str, *, open_files_max: int = OPEN_FILES_MAX) -> Broker:
    return Broker(tmp_path, commitlog=FILE_SIZE, cq=16,
                  broker_extra=("clean_interval_ms = 100\noffset_persist_interval_ms = 100\n"
                                f"open_files_max = {open_files_max}\nopen_files_sweep_ms = 100"),
                  extra_toml=f"\n[retention]\n{retention}\n")


def _produce(producer: Producer, topic: str) -> None:
    for first in range(0, COUNT, 50):
        batch = [{"topic": topic, "body": f"{i:06d}".encode() * 170, "queue_id": 0}
                 for i in range(first, min(COUNT, first + 50))]
        assert all(r.ok for r in producer.send_batch(batch))


def _consume_all(broker: Broker, group: str, topic: str) -> None:
    with Consumer(broker.store, group=group, topic=topic, queues=[0], auto_commit=False) as consumer:
        assert len(consumer.messages(COUNT, timeout_ms=20_000)) == COUNT
        consumer.commit()


def _commitlog_files(broker: Broker) -> list[str]:
    return sorted(p.name for p in (broker.store / "commitlog").iterdir() if p.name.isdigit())


def _queue_files(broker: Broker, topic: str) -> int:
    return len(list((broker.store / "consumequeue" / topic / "0").iterdir()))


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


def test_store_files_held_per_process_stay_bounded_as_the_store_grows(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "reclaim_consumed = false")
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Grown")
        _consume_all(broker, "Group", "Grown")
        assert len(_commitlog_files(broker)) >= 8
        last: dict[str, int] = {}

        def bounded() -> bool:
            nonlocal last
            # each mapping is counted with the descriptor its mmap holds: one file, one entry
            last = {proc: len({n.split(" ", 1)[1] for n in names if "/index/" not in n})
                    for proc, names in _held(broker).items()}
            return max(last.values()) <= OPEN_FILES_MAX
        try:
            wait_for(bounded, 30, "every process to hold at most open_files_max store files")
        except Exception:
            raise AssertionError(f"store files held per process: {last}") from None
