"""The listeners outsiders reach, bounded: the hostile harness's resource attacks against a real
broker's remoting front and metrics listener while a good front client sends and pulls, and a front
that keeps dying no longer stops the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.ipc.client.api import Producer
from mqstore.ipc.remoting import codec as rm
from mqstore.scripts.survival.hostile.command import parse_args, run
from mqstore.scripts.survival.hostile.resource_attacks import RESOURCE_ATTACKS
from tests.integration.broker import Broker, free_port_range, wait_for


@pytest.mark.slow
def test_front_resource_attacks_leave_the_good_client_served_and_the_front_bounded(tmp_path: Path) -> None:
    """Before: a trickled frame stayed open, idle sockets past the table reset a new client, half-sent
    frames grew the front by their size (60 of 16 MiB: 900 MiB), and dribbling clients kept every
    scrape out of the metrics listener."""
    verdict = run(parse_args(["--attacks", *RESOURCE_ATTACKS, "--seconds", "1.5", "--front-connections", "200",
                              "--dir", str(tmp_path)]))
    front = verdict["front"]
    assert verdict["ok"], verdict["findings"]
    assert front["attacks_tried"] == len(RESOURCE_ATTACKS) and front["front_restarts"] == 0
    for name, outcome in front["attacks"].items():
        served = outcome["good_front"]
        assert served["sends_ok"] and served["pulls_ok"] and not served["failed"], (name, served)
    attacks = {name: outcome["answered"] for name, outcome in front["attacks"].items()}
    assert attacks["front_trickle"]["cut_off"]
    assert attacks["front_idle_flood"]["new_client_route_code"] == rm.SUCCESS
    assert attacks["front_idle_flood"]["closed_in_all"] == 200  # the idle timeout takes the rest
    assert attacks["front_partial_frames"]["cut_off"] == attacks["front_partial_frames"]["connections"]
    # every lock request's locks went with its connection: 81,920 locked, never more than 20,000 held
    assert attacks["front_lock_flood"]["queues_locked"] == 20 * 4096
    assert attacks["metrics_slowloris"]["scrapes_ok"] > 0
    # 50 connections announced 4 MiB frames (200 MiB); the front holds at most max_read_bytes (16 MiB)
    assert front["front_rss_peak_mb"] < 150, front["front_rss_peak_mb"]


@pytest.mark.slow
def test_six_deaths_of_the_front_made_the_supervisor_give_up_on_the_broker(tmp_path: Path) -> None:
    port = free_port_range(1)
    broker = Broker(tmp_path, remoting_port=port, supervisor={"flap_restarts": 2, "flap_window_ms": 60_000})
    with broker:
        for _ in range(4):
            broker.wait_restarted("remoting", broker.kill("remoting"))
        assert broker.proc is not None and broker.proc.poll() is None, broker.logs()
        with Producer(broker.store) as producer:
            assert producer.send("StillServed", b"m").ok

        def front_answers() -> bool:
            try:
                with rm.RemotingClient("127.0.0.1", port, timeout_s=5) as client:
                    return client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}).code == rm.SUCCESS
            except OSError:
                return False
        wait_for(front_answers, 30, "the front back after flapping")
