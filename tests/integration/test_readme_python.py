"""The README's Python blocks, run as written against a real broker (its store path put in place of
``mqstore-data``): the blocking clients' ``for message in consumer`` and the asyncio clients do what
the README says they do."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.scripts.harness import ROOT
from tests.integration.broker import Broker

BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("readme"), commitlog=1024 * 1024, cq=4096) as running:
        yield running


def _run(block: str, store: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-c", block.replace('"mqstore-data"', repr(str(store)))],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_readme_shows_the_blocking_and_the_asyncio_clients() -> None:
    assert len(BLOCKS) == 2
    assert "for message in consumer:" in BLOCKS[0]
    assert "from mqstore import aio" in BLOCKS[1] and "async for message in consumer:" in BLOCKS[1]


def test_the_blocking_clients_block_sends_and_iterates_to_the_message(broker: Broker) -> None:
    sent, *consumed = _run(BLOCKS[0], broker.store)
    status, queue_id, queue_offset = sent.split()
    assert status == "PUT_OK"
    assert consumed[-1] == f"{queue_id} {queue_offset} {b'order 1 paid'!r}"


def test_the_asyncio_block_sends_a_hundred_and_consumes_to_the_last(broker: Broker) -> None:
    assert _run(BLOCKS[1], broker.store) == ["PUT_OK and the last of 100 consumed"]
