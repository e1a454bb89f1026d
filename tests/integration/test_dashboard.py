"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by Playwright), each figure
checked against ``/api/status`` and ``mqstore status --json``: a loading state until the first answer
(the API held back by Playwright's routing), the actors, per-topic and per-group totals (offset and ack
mode) equal to the API's overview and to the sums of its per-queue figures, the system topics folded
behind one row, filter boxes that hide rows, a chart with time and rate axes that moves after a
produce, the version and the uptime, and the replication panel.

``scripts/test`` (the README's second command, what ``.ci/run`` runs) installs the browser (apt) and
Playwright (the ``test`` extra); Playwright's own browser download is never used."""

from __future__ import annotations

import importlib.metadata
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest
from playwright.sync_api import Browser, Page, Route, sync_playwright

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from tests.integration.broker import Broker, free_port_range, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIME_LABEL = re.compile(r"^\d\d:\d\d(:\d\d)?$")


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
    return _rows(page, f"#{table} tbody tr")


def _rows(page: Page, selector: str) -> list[dict[str, Any]]:
    """Each row the selector finds: its data attributes, its cells' texts, and whether it is shown."""
    rows: list[dict[str, Any]] = page.eval_on_selector_all(
        selector, "rows => rows.map(r => ({data: {...r.dataset}, cells: [...r.cells].map(c => c.textContent),"
                  " shown: r.offsetParent !== null}))")
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


def _topic_cells(t: dict[str, Any]) -> list[str]:
    return [str(t[k]) for k in ("queues", "messages", "messages_in")] + [", ".join(t["groups"])]


def _group_cells(g: dict[str, Any]) -> list[str]:
    return [g["mode"], ", ".join(g["topics"]), str(g["queues"])] + [
        "—" if g[k] is None else str(g[k]) for k in ("lag", "delivered", "ready", "unacked", "redelivered", "dead")]


def _loading_until_released(page: Page, port: int) -> None:
    """The page before its first answer: held back by routing, then let through."""
    held: list[Route] = []
    page.route("**/api/status", lambda route: held.append(route))
    page.goto(f"http://127.0.0.1:{port}/")
    wait_for(lambda: page.evaluate("1") and held, 30, "the page to ask for /api/status")
    assert page.evaluate("document.body.classList.contains('loading')")
    assert page.is_visible("#loading") and "waiting for the broker's first answer" in (page.text_content("#loading")
                                                                                        or "")
    assert page.eval_on_selector("#disk-used", "e => e.getBoundingClientRect().width") == 0  # no full bar
    assert page.text_content("#disk-text") == "loading…"
    for table in ("topics", "groups", "actors"):
        assert [r["cells"] for r in _rows(page, f"#{table} tbody tr")] == [["loading…"]]
    assert page.text_content("#uptime") == "…" and page.text_content("#version") == ""
    for route in held:
        route.continue_()
    page.unroute("**/api/status")
    wait_for(lambda: not page.evaluate("document.body.classList.contains('loading')"), 30, "the first answer drawn")
    assert not page.is_visible("#loading")


@pytest.mark.slow
def test_the_dashboard_shows_totals_folds_system_topics_filters_and_draws_axes_as_the_api_says(
        tmp_path: Path, browser: Browser) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, metrics_port=port) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic("Shown", 2)
            admin.create_topic("Other", 1)
        _send(broker.store, "Shown", 20)  # 10 a queue
        with Producer(broker.store) as producer:  # a delay level of two hours: it waits on SCHEDULE_TOPIC_XXXX
            assert producer.send("Other", b"later", properties={"DELAY": "18"}).ok
        with Consumer(broker.store, group="Watchers", topic="Shown", queues=[0], start="earliest",
                      long_poll_ms=100) as consumer:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < 4 and time.monotonic() < deadline:
                got += consumer.poll(500, max_count=4 - len(got))
            consumer.commit()
        status = json.loads(broker.mqstore("status", "--json").stdout)

        page = browser.new_page()
        asked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        with AckConsumer(broker.store, group="Acks", topic="Shown", prefetch=3) as acks:
            held_back: list[Any] = []
            deadline = time.monotonic() + 30
            while len(held_back) < 3 and time.monotonic() < deadline:
                held_back += acks.receive(3 - len(held_back), 500)
            assert len(held_back) == 3  # delivered, never acked
            try:
                _loading_until_released(page, port)
                _check_the_page(page, port, status)
                # nothing from elsewhere (a broker works offline): the listener's own pages only
                assert {urlsplit(url).netloc for url in asked} == {f"127.0.0.1:{port}"}, asked
                assert {urlsplit(url).path for url in asked} == {"/", "/dashboard.css", "/chart.js", "/dashboard.js",
                                                                 "/api/status"}, asked
            finally:
                page.close()
        assert broker.stop() == 0


def _check_the_page(page: Page, port: int, status: dict[str, Any]) -> None:
    expected_actors = {name: [name, str(info["pid"]), "running", "0"] for name, info in status["actors"].items()}
    wait_for(lambda: {r["data"]["actor"]: r["cells"][:4] for r in _rows(page, "#actors tbody tr")}
             == expected_actors, 30, "the page to show the actors")

    def agrees() -> dict[str, Any] | None:
        """The API once it counts what was done, and the page drawing that answer's totals."""
        api = _api(port)
        o = api.get("overview", {})
        groups = o.get("groups", {})
        if not (o and o["topics"]["Shown"]["messages_in"] == 20 and groups.get("Watchers", {}).get("lag") == 16
                and (groups.get("Acks", {}).get("unacked") or 0) >= 3 and o["system_topics"]["messages"] == 1
                and groups["Watchers"]["delivered"] >= 4 and groups["Acks"]["delivered"] >= 3):
            return None
        topics = {r["data"]["topic"]: r["cells"][1:] for r in _rows(page, "#topics tbody tr.topic")}
        drawn = {r["data"]["group"]: r["cells"][1:] for r in _rows(page, "#groups tbody tr.group")}
        fold = _rows(page, "#topics tbody tr.system-fold")
        same = (topics == {t: _topic_cells(info) for t, info in o["topics"].items() if not info["system"]}
                and drawn == {g: _group_cells(info) for g, info in groups.items()}
                and [r["cells"][1:4] for r in fold] == [[str(o["system_topics"][k]) for k in (
                    "queues", "messages", "messages_in")]])
        return api if same else None

    api = wait_for(agrees, 30, "the page's totals to be the API's")
    o = api["overview"]
    # the overview's totals are the sums of the API's own per-queue figures
    shown = o["topics"]["Shown"]
    assert shown["messages"] == sum(hi - lo for lo, hi in api["topics"]["Shown"]["queues"].values()) == 20
    assert shown["groups"] == ["Acks", "Watchers"] and shown["queues"] == 2
    assert o["groups"]["Watchers"]["lag"] == sum(q["lag"] for q in api["groups"]["Watchers"]) == 16
    assert o["groups"]["Watchers"]["mode"] == "offset" and o["groups"]["Acks"]["mode"] == "ack"
    assert o["groups"]["Acks"]["ready"] == sum(q["ready"] for q in api["ack"] if q["group"] == "Acks")
    system = sorted(t for t, info in o["topics"].items() if info["system"])
    assert "SCHEDULE_TOPIC_XXXX" in system and "Shown" not in system
    # deliveries per group beside its lag: Watchers read queue 0 alone (10 messages; its consumer may have
    # pulled past the 4 it was given), Acks was handed 3 and acked none; each group counts its own
    assert page.inner_text("#groups thead th:nth-child(6)") == "delivered"
    assert [page.inner_text(f"#topics thead th:nth-child({i})") for i in (4, 5)] == ["messages in", "groups"]
    assert 4 <= o["groups"]["Watchers"]["delivered"] <= 10 and o["groups"]["Acks"]["delivered"] >= 3
    for group in ("Watchers", "Acks"):
        assert o["groups"][group]["delivered"] == sum(api["delivered"][group].values())
        assert set(api["delivered"][group]) == {"Shown"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    delivered = dict(re.findall(r'^mqstore_group_delivered_messages_total\{group="(\w+)",topic="Shown"\} (\S+)$',
                                metrics, re.M))
    assert float(delivered["Watchers"]) >= 4 and float(delivered["Acks"]) >= 3

    # system topics: one folded row, unfolded on a click
    fold = _rows(page, "#topics tbody tr.system-fold")
    assert [r["cells"][0] for r in fold] == [f"▸ system topics ({len(system)})"]
    assert not page.is_visible("#topics tr[data-topic='SCHEDULE_TOPIC_XXXX']")
    page.click("#topics tr.system-fold button.toggle")
    wait_for(lambda: page.is_visible("#topics tr[data-topic='SCHEDULE_TOPIC_XXXX']"), 30, "the system topics shown")
    page.click("#topics tr.system-fold button.toggle")
    wait_for(lambda: not page.is_visible("#topics tr[data-topic='SCHEDULE_TOPIC_XXXX']"), 30, "them folded again")

    # a topic unfolds to its queues, a group to its queues' offsets
    page.click("#topics tr[data-topic='Shown'] button.toggle")
    wait_for(lambda: {r["data"]["queue"]: r["cells"] for r in _rows(page, "#topics tr.detail tbody tr")}
             == {"0": ["0", "0", "10", "10"], "1": ["1", "0", "10", "10"]}, 30, "Shown's queues")
    page.click("#groups tr[data-group='Watchers'] button.toggle")
    wait_for(lambda: {r["data"]["queue"]: r["cells"][2:5] for r in _rows(page, "#groups tr.detail tbody tr")
                      if r["data"]["group"] == "Watchers" and r["data"].get("queue")}
             == {"0": ["4", "10", "6"], "1": ["never", "10", "10"]}, 30, "Watchers' queues")
    wait_for(lambda: {r["data"]["topic"]: r["cells"][1] for r in _rows(page, "#groups tr.detail tbody tr")
                      if r["data"]["group"] == "Watchers" and "delivered" in r["data"]}
             == {"Shown": str(_api(port)["overview"]["groups"]["Watchers"]["delivered"])}, 30,
             "what Watchers was delivered, per topic")

    # the filters hide what does not match
    page.fill("#topic-filter", "oth")
    wait_for(lambda: [r["data"]["topic"] for r in _rows(page, "#topics tbody tr.topic")] == ["Other"], 30,
             "the topic filter to leave Other alone")
    page.fill("#group-filter", "ACK")
    wait_for(lambda: [r["data"]["group"] for r in _rows(page, "#groups tbody tr.group")] == ["Acks"], 30,
             "the group filter to leave Acks alone")
    page.fill("#group-filter", "nothing like it")
    wait_for(lambda: [r["cells"] for r in _rows(page, "#groups tbody tr")] == [["no group matches the filter"]],
             30, "the group filter to say nothing matches")
    page.fill("#topic-filter", "")
    wait_for(lambda: {"Shown", "Other"} <= {r["data"]["topic"] for r in _rows(page, "#topics tbody tr.topic")}, 30,
             "every topic back without a filter")

    # version and uptime, as the API says; the broker started when its supervisor did
    broker = o["broker"]
    assert broker["version"] == importlib.metadata.version("mqstore") == page.text_content("#version")
    assert broker["started_ms"] == int(psutil.Process(api["status"]["pid"]).create_time() * 1000)
    assert page.get_attribute("#broker", "data-started-ms") == str(broker["started_ms"])
    assert re.fullmatch(r"\d+ (s|min \d+ s)", page.text_content("#uptime") or "")
    assert page.text_content("#ready") == "ready"
    assert page.text_content("#replication-text") == "ASYNC_MASTER, serving no slaves (no HA port)"
    assert float(page.get_attribute("#disk", "data-used-ratio") or -1) == pytest.approx(api["disk"]["used_ratio"],
                                                                                        abs=0.02)
    _check_the_chart(page, port)


def _check_the_chart(page: Page, port: int) -> None:
    assert page.text_content("#y-title") == "messages / s" and page.text_content("#x-title") == "time"
    wait_for(lambda: int(page.get_attribute("#chart", "data-in-total") or 0) == 21, 30, "the chart to count the 21")
    points = page.get_attribute("#chart-in", "points")
    _send_more = 200
    with Producer(_api(port)["store"]) as producer:
        assert all(r.ok for r in producer.send_batch([{"topic": "Shown", "body": b"m"}] * _send_more))

    def moved() -> bool:
        return (int(page.get_attribute("#chart", "data-in-total") or 0) == 21 + _send_more
                and page.get_attribute("#chart-in", "points") != points
                and float(page.get_attribute("#chart", "data-peak") or 0) > 0)

    wait_for(moved, 30, "the chart to move after a produce")
    # a rate scale: round ticks from 0 up to a top at or above the peak; time ticks labelled HH:MM(:SS)
    rates = page.eval_on_selector_all("#y-axis text.tick", "ts => ts.map(t => t.textContent)")
    top = float(page.get_attribute("#chart", "data-scale-top") or 0)
    assert rates[0] == "0" and len(rates) >= 2 and top >= float(page.get_attribute("#chart", "data-peak") or 0)
    wait_for(lambda: page.eval_on_selector_all("#x-axis text.tick", "ts => ts.length") >= 1, 30, "time ticks")
    times = page.eval_on_selector_all("#x-axis text.tick", "ts => ts.map(t => t.textContent)")
    assert all(TIME_LABEL.match(t) for t in times) and len(set(times)) == len(times), times
