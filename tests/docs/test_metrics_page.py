"""docs/reference/metrics.md against what real brokers serve: every family a lone broker's, a master's
and its slave's ``/metrics`` hold is on the page, and every family on the page (but the straggler
mover's, served only once it has moved something) is served by one of them."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mqstore.ipc.client.api import Producer
from mqstore.scripts.docs.metrics_page import PAGE
from tests.integration.broker import Broker, free_port_range, wait_for

DOCUMENTED = set(re.findall(r"^\| `(mqstore_\w+)` \|", (Path(__file__).resolve().parents[2] / "docs" / PAGE)
                            .read_text(), re.M))
ONLY_AFTER_A_MOVE = {"mqstore_stragglers_moved_messages_total", "mqstore_stragglers_moved_bytes_total",
                     "mqstore_stragglers_moved_files_total"}


def _families(port: int) -> set[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    if not text:
        return set()  # before the first collection
    assert list(text_string_to_metric_families(text))  # Prometheus text that parses
    return set(re.findall(r"^# TYPE (\w+) ", text, re.M))  # named as the page names them (a counter's _total)


def _serving(port: int, *names: str) -> set[str] | None:
    """What ``port`` serves, once it serves ``names`` (replication's families wait on the HA link)."""
    served = _families(port)
    return served if set(names) <= served else None


@pytest.mark.slow
def test_what_brokers_serve_is_what_the_page_lists(tmp_path: Path) -> None:
    # the master's front on the HA port - 1, where its slave fetches topics and offsets from
    remoting_port, master_metrics, slave_metrics = free_port_range(2), free_port_range(1), free_port_range(1)
    ha_port = remoting_port + 1
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    master = Broker(tmp_path / "m", metrics_port=master_metrics, remoting_port=remoting_port,
                    extra_toml=f"\n[ha]\nserve = true\nlisten_port = {ha_port}\n")
    slave = Broker(tmp_path / "s", metrics_port=slave_metrics)
    slave.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", f"127.0.0.1:{ha_port}")
    with master, slave:
        with Producer(master.store) as producer:
            assert producer.send("Watched", b"x", queue_id=0).ok
        served_master = wait_for(lambda: _serving(master_metrics, "mqstore_ha_slaves_connected"), timeout_s=60,
                                 what="the master's replication metrics")
        served_slave = wait_for(lambda: _serving(slave_metrics, "mqstore_ha_master_quiet_seconds",
                                                 "mqstore_ha_metadata_last_sync_timestamp_seconds"),
                                timeout_s=60, what="the slave's metrics of its master and its metadata sync")
    served = served_master | served_slave
    assert served - DOCUMENTED == set(), "served but not on the page: run `python -m mqstore.scripts.docs`"
    assert DOCUMENTED - ONLY_AFTER_A_MOVE - served == set(), "on the page but served by none"
