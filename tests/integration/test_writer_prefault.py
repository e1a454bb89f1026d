"""The writer's mapping prefaulted ahead of its end in a running broker (``[store]
prefault_ahead_bytes``): with files so small that a roll comes every few batches, the prefault
thread keeps following the writer into each new file, and every acknowledged record reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.api import Producer
from tests.integration.broker import Broker, check_acked, wait_for
from tests.integration.test_spare_file import RollingSender, actor_stat

FILE_SIZE = 64 * 1024


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_many_rolls_while_populating_lose_nothing(tmp_path: Path, mode: str) -> None:
    broker = Broker(tmp_path, commitlog=FILE_SIZE, mode=mode,
                    extra_toml=f"\n[store]\nprefault_ahead_bytes = {FILE_SIZE // 2}\n")
    commitlog = broker.store / "commitlog"
    with broker, Producer(broker.store) as producer:
        sender = RollingSender(producer, body_bytes=3000, batch=4)
        sender.send_until_file(commitlog, 40 * FILE_SIZE)
        wait_for(lambda: actor_stat(broker, "writer", "prefaulted") > 10 * FILE_SIZE // 2, 30,
                 "the writer's prefaulted bytes across rolls")
        assert broker.stop() == 0
        assert "prefaulted:" not in broker.logs()  # never turned off by a failed madvise
    assert check_acked(broker.store, sender.acked).ok
    assert verify_store(broker.store).ok


@pytest.mark.parametrize("setting", ["prefault_ahead_bytes = 0", "# SYNC_FLUSH: off unless set"])
def test_switched_off_the_writer_prefaults_nothing(tmp_path: Path, setting: str) -> None:
    mode = "SYNC_FLUSH" if setting.startswith("#") else "ASYNC_FLUSH"
    broker = Broker(tmp_path, commitlog=FILE_SIZE, mode=mode, extra_toml=f"\n[store]\n{setting}\n")
    commitlog = broker.store / "commitlog"
    with broker, Producer(broker.store) as producer:
        sender = RollingSender(producer, body_bytes=3000, batch=4)
        sender.send_until_file(commitlog, 3 * FILE_SIZE)
        wait_for(lambda: actor_stat(broker, "writer", "written") >= 3 * FILE_SIZE, 30, "the writer's status")
        assert actor_stat(broker, "writer", "prefaulted") == 0
        assert broker.stop() == 0
    assert check_acked(broker.store, sender.acked).ok
