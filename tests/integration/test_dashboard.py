"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by Playwright): the page
loads, its figures (actors, states, restarts, a topic's queue offsets, a group's lag) are those of
``mqstore status --json`` and the JSON endpoint, its replication panel names the role, and its throughput
chart moves after a produce.

``scripts/test`` (the README's second command, what ``.ci/run`` runs) installs the browser (apt) and
Playwright (the ``test`` extra); Playwright's own browser download is never used."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from mqstore.ipc.client.api import Admin, Consumer, Producer
from tests.integration.broker import Broker, free_port_range, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _cells(page: Page, table: str) -> list[dict[str, Any]]:
    """Each body row of a table: its data attributes and its cells' texts."""
    rows: list[dict[str, Any]] = page.eval_on_selector_all(
        f"#{table} tbody tr",
        "rows => rows.map(r => ({data: {...r.dataset}, cells: [...r.cells].map(c => c.textContent)}))")
    return rows


def _api(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def _send(store: Path, topic: str, count: int) -> None:
    with Producer(store) as producer:
        results = producer.send_batch([{"topic": topic, "body": f"{topic}-{i}".encode(), "queue_id": i % 2}
                                       for i in range(count)])
    assert all(r.ok for r in results), results


@pytest.mark.slow
def test_the_dashboard_shows_the_broker_as_status_does_and_its_chart_moves(tmp_path: Path, browser: Browser) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, metrics_port=port) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic("Shown", 2)
        _send(broker.store, "Shown", 20)  # 10 a queue
        with Consumer(broker.store, group="Watchers", topic="Shown", queues=[0], start="earliest",
                      long_poll_ms=100) as consumer:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < 4 and time.monotonic() < deadline:
                got += consumer.poll(500, max_count=4 - len(got))
            consumer.commit()
        status = json.loads(broker.mqstore("status", "--json").stdout)

        page = browser.new_page()
        try:
            page.goto(f"http://127.0.0.1:{port}/")
            expected_actors = {name: [name, str(info["pid"]), "running", "0"]
                               for name, info in status["actors"].items()}

            def shows_the_broker() -> bool:
                actors = {r["data"]["actor"]: r["cells"][:4] for r in _cells(page, "actors")}
                queues = {r["data"]["queue"]: r["cells"][2:4] for r in _cells(page, "topics")
                          if r["data"].get("topic") == "Shown"}
                lags = {r["data"]["queue"]: r["cells"][3:] for r in _cells(page, "groups")
                        if r["data"].get("group") == "Watchers"}
                return (actors == expected_actors and queues == {"0": ["0", "10"], "1": ["0", "10"]}
                        and lags.get("0") == ["4", "10", "6"])

            wait_for(shows_the_broker, 30, "the page to show the actors, the topic's queues and the group's lag")
            api = _api(port)
            assert {name: str(info["pid"]) for name, info in api["status"]["actors"].items()} == {
                name: str(info["pid"]) for name, info in status["actors"].items()}
            assert api["topics"]["Shown"]["queues"] == {"0": [0, 10], "1": [0, 10]}
            assert page.text_content("#ready") == "ready"
            assert page.get_attribute("#replication", "data-role") == "ASYNC_MASTER"
            assert page.text_content("#replication-text") == "ASYNC_MASTER, serving no slaves (no HA port)"
            assert float(page.get_attribute("#disk", "data-used-ratio") or -1) == pytest.approx(
                api["disk"]["used_ratio"], abs=0.02)

            # the writer reports its counts once a stats interval: the chart catches up with the 20 sent
            wait_for(lambda: int(page.get_attribute("#chart", "data-in-total") or 0) == 20, 30,
                     "the chart to count the 20 sent")
            before = 20
            points = page.get_attribute("#chart-in", "points")
            _send(broker.store, "Shown", 200)

            def moved() -> bool:
                return (int(page.get_attribute("#chart", "data-in-total") or 0) == before + 200
                        and page.get_attribute("#chart-in", "points") != points
                        and int(page.text_content("#chart-peak") or 0) > 1)

            wait_for(moved, 30, "the chart to move after a produce")
        finally:
            page.close()
        assert broker.stop() == 0
