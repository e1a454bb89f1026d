"""Hostile clients against a real broker: scripts/hostile.py at a small size, and the bugs it found,
each test named after its bug."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
import zmq

from ipc import schema
from ipc.client import Producer
from scripts.hostile import main, parse_args, run
from tests.integration.broker import Broker


@pytest.mark.slow
def test_hostile_clients_smoke(tmp_path: Path) -> None:
    verdict = run(parse_args(["--connections", "40", "--frames", "30", "--flood-frames", "6", "--slow-readers", "4",
                              "--seconds", "1.5", "--max-request-bytes", str(2 << 20), "--max-message-bytes",
                              str(1 << 20), "--rss-limit-mb", "2048", "--dir", str(tmp_path)]))
    assert verdict["ok"], verdict["findings"]
    attacks = verdict["attacks"]
    assert set(attacks) == {"oversized_frames", "big_frame_flood", "slow_readers", "connection_flood",
                            "invalid_msgpack", "wrong_types", "offsets_beyond_max"}
    assert all(a["good_client"]["served"] for a in attacks.values())
    assert attacks["offsets_beyond_max"]["answered"]["replies"] == {"OFFSET_OVERFLOW_BADLY": 3, "BAD_REQUEST": 2}
    assert set(attacks["invalid_msgpack"]["answered"]["reader"]) <= {"BAD_REQUEST", "OK", "UNKNOWN_OP"}
    assert attacks["oversized_frames"]["answered"]["body_past_max_message_size"] == {"OK:MESSAGE_ILLEGAL": 1}
    assert verdict["restarts"] == {} and verdict["good_caught_up"]


def test_hostile_cli_rejects_unknown_attacks() -> None:
    with pytest.raises(SystemExit):
        main(["--attacks", "nothing"])


@pytest.mark.slow
def test_reader_replies_to_a_client_that_never_reads_are_bounded_by_reader_hwm(tmp_path: Path) -> None:
    """A DEALER sending hundreds of full pulls and never reading made reader-0 queue every reply
    (ZeroMQ's default high-water mark, 10,000 per connection: 1.4 GiB for 20 such clients). The
    reader's queue per connection is now [broker] reader_hwm; past it replies are dropped."""
    broker = Broker(tmp_path, broker_extra="reader_hwm = 8")
    with broker, Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch([{"topic": "Big", "body": bytes(60_000), "queue": 0}] * 8))
        reader = psutil.Process(broker.pid_of("reader-0"))
        before = reader.memory_info().rss
        ctx: zmq.Context[object] = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.RCVHWM, 1)
        sock.connect(broker.endpoints().reader(0))
        pulls = 400  # each reply ~240 KiB (max_transfer_bytes): ~94 MiB if all were queued
        for i in range(pulls):
            sock.send(schema.pack(schema.request("pull", i, group="slow", topic="Big", queue=0, offset=0,
                                                 max=32)))
        peak = before
        watch_until = time.monotonic() + 3  # the reader serves 400 pulls well within this
        while time.monotonic() < watch_until:
            peak = max(peak, reader.memory_info().rss)
            time.sleep(0.02)
        grown_mib = (peak - before) / 2**20
        sock.close(0)
        ctx.term()
        assert grown_mib < 40, f"reader-0 grew by {grown_mib:.0f} MiB for a client that never reads"
