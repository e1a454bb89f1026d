"""The spare next commitlog file in a running broker: the flush service prepares it, the writer's
rolls adopt it (the rolled-into file is the very inode that was ``.spare``), and a flush service
killed while preparing one leaves a store that restarts, prepares again and loses nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine.log.mapped_file import file_name
from mqstore.engine.log.mapped_file_queue import SPARE_NAME, SPARE_PREPARING_NAME
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.api import Producer
from tests.integration.broker import Broker, check_acked, wait_for


class RollingSender:
    """Sends batches of one topic, keeping every SEND_OK for ``check_acked``."""

    def __init__(self, producer: Producer, body_bytes: int, batch: int) -> None:
        self.producer = producer
        self.body_bytes = body_bytes
        self.batch = batch
        self.sent = 0
        self.acked: list[tuple[str, int, int, str]] = []

    def send_until_file(self, commitlog: Path, file_base: int) -> None:
        """Send until the writer has created the file starting at ``file_base``."""
        while not (commitlog / file_name(file_base)).exists():
            bodies = [(b"%010d" % (self.sent + i)) * (self.body_bytes // 10) for i in range(self.batch)]
            results = self.producer.send_batch([{"topic": "Rolls", "body": body} for body in bodies])
            for body, result in zip(bodies, results, strict=True):
                assert result.ok, result
                self.acked.append(("Rolls", result.queue_id, result.queue_offset, hashlib.sha256(body).hexdigest()))
            self.sent += len(bodies)


def actor_stat(broker: Broker, actor: str, name: str) -> int:
    status = broker.status()
    return int(status["actors"][actor].get(name, 0)) if status is not None else 0


def ready_spare_inode(commitlog: Path) -> int | None:
    try:
        return (commitlog / SPARE_NAME).stat().st_ino
    except FileNotFoundError:
        return None


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_rolls_adopt_the_spare_the_flush_service_prepared(tmp_path: Path, mode: str) -> None:
    file_size = 256 * 1024
    broker = Broker(tmp_path, commitlog=file_size, mode=mode)
    commitlog = broker.store / "commitlog"
    with broker, Producer(broker.store) as producer:
        sender = RollingSender(producer, body_bytes=8 * 1024, batch=6)
        for file_base in range(0, 5 * file_size, file_size):
            inode = wait_for(lambda: ready_spare_inode(commitlog), 30, "the flush service's spare")
            sender.send_until_file(commitlog, file_base)
            assert (commitlog / file_name(file_base)).stat().st_ino == inode
        wait_for(lambda: actor_stat(broker, "writer", "spares_adopted") >= 5, 30, "the writer's adoption count")
        wait_for(lambda: actor_stat(broker, "flusher", "spares_prepared") >= 5, 30, "the flusher's count")
        assert broker.stop() == 0
    assert sorted(p.name for p in commitlog.iterdir() if not p.name.isdigit()) in ([SPARE_NAME], [])
    assert check_acked(broker.store, sender.acked).ok
    assert verify_store(broker.store).ok


def test_without_spare_file_the_writer_allocates_inline(tmp_path: Path) -> None:
    file_size = 256 * 1024
    broker = Broker(tmp_path, commitlog=file_size)
    broker.config_path.write_text(broker.config_path.read_text().replace('[flush]\n', '[flush]\nspare_file = false\n'))
    commitlog = broker.store / "commitlog"
    with broker, Producer(broker.store) as producer:
        sender = RollingSender(producer, body_bytes=8 * 1024, batch=6)
        sender.send_until_file(commitlog, 3 * file_size)
        assert broker.stop() == 0
    assert not any(p.name.startswith(".spare") for p in commitlog.iterdir())
    assert check_acked(broker.store, sender.acked).ok


@pytest.mark.slow
def test_flush_service_killed_while_preparing_a_spare(tmp_path: Path) -> None:
    """Files big enough that preparing a spare spans poll rounds (its warm-up steps come after the
    warm-up of the file just rolled into), so the kill lands while ``.spare.preparing`` exists."""
    file_size = 64 * 1024 * 1024
    broker = Broker(tmp_path, commitlog=file_size)
    commitlog = broker.store / "commitlog"
    preparing = commitlog / SPARE_PREPARING_NAME
    with broker, Producer(broker.store) as producer:
        sender = RollingSender(producer, body_bytes=64 * 1024, batch=16)
        killed_while: list[Any] = []
        for file_base in range(0, 4 * file_size, file_size):
            wait_for(lambda: ready_spare_inode(commitlog), 60, "a ready spare")
            sender.send_until_file(commitlog, file_base)
            # the roll took the spare: the flush service makes the next one, a step per poll round
            if wait_for(lambda: preparing.exists() or ready_spare_inode(commitlog), 60, "a new spare",
                        interval_s=0.001) and preparing.exists():
                old = broker.kill("flusher")
                killed_while.append(preparing.stat().st_size if preparing.exists() else "renamed meanwhile")
                broker.wait_restarted("flusher", old)
                break
        assert killed_while, "the kill never caught a spare being prepared"
        inode = wait_for(lambda: ready_spare_inode(commitlog), 60, "the restarted flush service's spare")
        assert not preparing.exists()
        wait_for(lambda: actor_stat(broker, "flusher", "spares_prepared") >= 1, 30, "the new flusher's count")
        adopted = actor_stat(broker, "writer", "spares_adopted")
        next_base = max(int(p.name) for p in commitlog.iterdir() if p.name.isdigit()) + file_size
        sender.send_until_file(commitlog, next_base)
        assert (commitlog / file_name(next_base)).stat().st_ino == inode
        wait_for(lambda: actor_stat(broker, "writer", "spares_adopted") > adopted, 30, "one more adoption")
        assert broker.stop() == 0
    assert check_acked(broker.store, sender.acked).ok
    assert verify_store(broker.store).ok
