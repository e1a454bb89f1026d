"""``mqstore produce`` and ``mqstore consume`` as a user runs them, through the command against a real
broker: each line of stdin (or ``--file``) one message with its bytes exact, a line typed into a pipe
sent at once, ``--body`` exact, tags, keys, properties (the broker's reserved names refused), delay
levels and delivery times; ``consume --follow`` from earliest, latest or a time, ``--json`` bodies as
text or base64, Ctrl-C's summary."""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mqstore.scripts.harness import ROOT as ROOT_DIR
from tests.integration.broker import Broker, wait_for

pytestmark = pytest.mark.slow
MQSTORE = [sys.executable, "-m", "mqstore.scripts.cli.mqstore"]
DEADLINE_S = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("cli-io"), commitlog=1024 * 1024, cq=4096) as running:
        yield running


def _run(broker: Broker, *argv: str | bytes, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*MQSTORE, *argv, "--store", str(broker.store)], input=stdin, capture_output=True,
                          cwd=ROOT_DIR, timeout=120)


def _records(broker: Broker, topic: str, count: int, *more: str) -> list[dict[str, Any]]:
    """``count`` messages of ``topic`` as ``consume --json`` prints them, from each queue's start."""
    done = _run(broker, "consume", "--topic", topic, "--group", f"check-{time.monotonic_ns()}", "--from", "earliest",
                "--count", str(count), "--timeout-ms", "30000", "--json", *more)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _body(record: dict[str, Any]) -> bytes:
    if record["encoding"] == "base64":
        return base64.b64decode(record["body"])
    assert record["encoding"] == "utf-8"
    return str(record["body"]).encode()


class _Lines:
    """A running command's stdout, a line at a time, each waited for with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.proc, self.fd, self.buffer = proc, proc.stdout.fileno(), b""

    def next(self) -> bytes:
        deadline = time.monotonic() + DEADLINE_S
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line within {DEADLINE_S} s"
            if select.select([self.fd], [], [], remaining)[0]:
                chunk = os.read(self.fd, 65536)
                assert chunk, "the command closed its stdout"
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def rest(self) -> tuple[bytes, bytes]:
        """What it prints until it exits, and its stderr (its stdin closed first)."""
        out, err = self.proc.communicate(timeout=DEADLINE_S)
        return self.buffer + out, err


def _start(broker: Broker, *argv: str) -> _Lines:
    return _Lines(subprocess.Popen([*MQSTORE, *argv, "--store", str(broker.store)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT_DIR))


# -- produce -------------------------------------------------------------------------------------------------


def test_each_line_of_stdin_is_one_message_with_its_bytes_exact(broker: Broker) -> None:
    sent = b"plain\ncarriage\r\n\n\xff\xfe not utf-8\ngr\xc3\xbc\xc3\x9fe\nlast without newline"
    done = _run(broker, "produce", "--topic", "StdinLines", "--queue", "0", stdin=sent)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[-1] == "mqstore produce: 6 sent, 0 failed"
    records = _records(broker, "StdinLines", 6)
    assert [_body(r) for r in records] == [b"plain", b"carriage\r", b"", b"\xff\xfe not utf-8", "grüße".encode(),
                                           b"last without newline"]
    assert [r["encoding"] for r in records] == ["utf-8", "utf-8", "utf-8", "base64", "utf-8", "utf-8"]
    assert records[4]["body"] == "grüße"  # text as text in --json


def test_input_that_ends_with_a_newline_has_no_empty_message_after_it(broker: Broker) -> None:
    done = _run(broker, "produce", "--topic", "Trailing", "--queue", "0", stdin=b"one\ntwo\n")
    assert done.returncode == 0 and done.stderr.decode().endswith("2 sent, 0 failed\n"), done.stderr
    assert [_body(r) for r in _records(broker, "Trailing", 3, "--timeout-ms", "1000")] == [b"one", b"two"]
    empty = _run(broker, "produce", "--topic", "Trailing", stdin=b"")
    assert empty.returncode == 0 and empty.stderr.decode().endswith("0 sent, 0 failed\n"), empty.stderr


def test_file_lines_in_many_batches_are_each_sent_once_in_order(broker: Broker, tmp_path: Any) -> None:
    lines = [f"line {i}".encode() for i in range(2500)]
    path = tmp_path / "lines.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    done = _run(broker, "produce", "--topic", "FromFile", "--queue", "1", "--file", str(path), "--batch", "1000")
    assert done.returncode == 0 and done.stderr.decode().endswith("2500 sent, 0 failed\n"), done.stderr
    assert [_body(r) for r in _records(broker, "FromFile", 2500)] == lines


def test_a_line_typed_into_a_pipe_is_sent_at_once(broker: Broker) -> None:
    """The line goes out while stdin stays open: no waiting for a batch to fill or for the end."""
    producer = _start(broker, "produce", "--topic", "Typed", "--queue", "0", "--json")
    assert producer.proc.stdin is not None
    for typed in (b"first", b"second"):
        producer.proc.stdin.write(typed + b"\n")
        producer.proc.stdin.flush()
        assert json.loads(producer.next())["status"] == "PUT_OK"
        assert _body(_records(broker, "Typed", 1 + (typed == b"second"))[-1]) == typed
    _, err = producer.rest()  # closes stdin: the end of the input
    assert producer.proc.returncode == 0 and err.decode().endswith("2 sent, 0 failed\n"), err


def test_body_is_stored_exactly(broker: Broker) -> None:
    text = "  two  spaces\tand a tab  "
    done = _run(broker, "produce", "--topic", "Exact", "--queue", "0", "--body", text, "--count", "2")
    assert done.returncode == 0, done.stderr
    raw = _run(broker, "produce", "--topic", "Exact", "--queue", "0", "--body", b"\xff raw argv")
    assert raw.returncode == 0, raw.stderr
    assert [_body(r) for r in _records(broker, "Exact", 3)] == [text.encode(), text.encode(), b"\xff raw argv"]


def test_tags_keys_and_properties_go_on_every_message(broker: Broker) -> None:
    done = _run(broker, "produce", "--topic", "Labelled", "--tags", "paid", "--keys", "k1", "k2", "--keys", "k3",
                "--property", "color=red", "--property", "size=L", stdin=b"a\nb\n")
    assert done.returncode == 0, done.stderr
    records = _records(broker, "Labelled", 2)
    assert sorted(_body(r) for r in records) == [b"a", b"b"]
    for r in records:
        assert r["tags"] == "paid" and r["keys"] == ["k1", "k2", "k3"]
        assert r["properties"]["color"] == "red" and r["properties"]["size"] == "L"
    found = _run(broker, "query", "--topic", "Labelled", "--key", "k2", "--json")
    assert found.returncode == 0 and len(found.stdout.splitlines()) == 2, found


@pytest.mark.parametrize("name", ["DELAY", "REAL_TOPIC", "TRAN_MSG", "KEYS", "UNIQ_KEY", "TIMER_DELIVER_MS",
                                  "ORIGIN_TOPIC"])
def test_a_property_the_broker_reserves_is_refused_with_the_reason(broker: Broker, name: str) -> None:
    done = _run(broker, "produce", "--topic", "Reserved", "--body", "x", "--property", f"{name}=1")
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    assert done.stderr.decode().startswith(f"mqstore produce: --property {name} is a name the broker reserves: ")
    assert b"sent" not in done.stderr


@pytest.mark.parametrize(("argv", "reason"), [
    (("--property", "novalue"), "is not K=V"),
    (("--delay-level", "19"), "levels 1 to 18"),
    (("--delay-level", "0"), "levels 1 to 18"),
    (("--file", "/nonexistent/lines.txt"), "No such file"),
    (("--file", "-", "--count", "2"), "--count goes with --body or alone"),
])
def test_bad_produce_options_say_why_and_send_nothing(broker: Broker, argv: tuple[str, ...], reason: str) -> None:
    done = _run(broker, "produce", "--topic", "BadOptions", *argv, stdin=b"x\n")
    assert done.returncode == 2 and reason in done.stderr.decode() and b"Traceback" not in done.stderr, done.stderr
    assert b" sent" not in done.stderr


def test_a_bad_deliver_at_is_a_usage_error(broker: Broker) -> None:
    done = _run(broker, "produce", "--topic", "BadTime", "--body", "x", "--deliver-at", "tomorrow")
    assert done.returncode == 2 and b"is not a time" in done.stderr, done.stderr


def test_delay_level_holds_the_message_for_its_level(broker: Broker) -> None:
    done = _run(broker, "produce", "--topic", "Later", "--body", "in a second", "--delay-level", "1")
    assert done.returncode == 0, done.stderr
    [record] = _records(broker, "Later", 1)
    assert _body(record) == b"in a second"
    assert record["store_ms"] >= record["born_ms"] + 1000  # level 1 is 1s: never delivered before it


def test_deliver_at_a_future_time_delivers_no_earlier(broker: Broker) -> None:
    deliver_ms = time.time_ns() // 1_000_000 + 1500
    done = _run(broker, "produce", "--topic", "AtTime", "--body", "timed", "--deliver-at", str(deliver_ms))
    assert done.returncode == 0, done.stderr
    [record] = _records(broker, "AtTime", 1)
    assert _body(record) == b"timed" and record["properties"]["TIMER_DELIVER_MS"] == str(deliver_ms)
    assert record["store_ms"] >= deliver_ms


def test_deliver_at_a_past_time_is_delivered_at_once_as_a_plain_message(broker: Broker) -> None:
    past = datetime.fromtimestamp(time.time() - 3600, UTC).isoformat(timespec="milliseconds")
    done = _run(broker, "produce", "--topic", "Past", "--body", "late already", "--deliver-at", past)
    assert done.returncode == 0, done.stderr
    [record] = _records(broker, "Past", 1)
    assert _body(record) == b"late already" and "TIMER_DELIVER_MS" in record["properties"]
    assert "TIMER_OUT_MS" not in record["properties"]  # never parked on the timer wheel


def test_ctrl_c_on_produce_from_stdin_prints_the_summary(broker: Broker) -> None:
    producer = _start(broker, "produce", "--topic", "Stopped", "--json")
    assert producer.proc.stdin is not None
    for typed in (b"one\n", b"two\n"):
        producer.proc.stdin.write(typed)
        producer.proc.stdin.flush()
        assert json.loads(producer.next())["status"] == "PUT_OK"
    producer.proc.send_signal(signal.SIGINT)
    _, err = producer.rest()
    assert producer.proc.returncode == 130 and b"Traceback" not in err, err
    assert err.decode().splitlines()[-1] == "mqstore produce: 2 sent, 0 failed (interrupted)"


# -- consume -------------------------------------------------------------------------------------------------


def test_follow_prints_messages_as_they_arrive_until_ctrl_c(broker: Broker) -> None:
    assert _run(broker, "produce", "--topic", "Followed", "--body", "before").returncode == 0
    follower = _start(broker, "consume", "--topic", "Followed", "--group", "F", "--from", "latest", "--follow",
                      "--timeout-ms", "200")
    # a message sent before the follower has found its queues' ends is not its to print: warm up until one is
    deadline = time.monotonic() + DEADLINE_S
    while not select.select([follower.fd], [], [], 1)[0]:
        assert time.monotonic() < deadline, "the follower printed nothing"
        assert _run(broker, "produce", "--topic", "Followed", "--body", "warm-up").returncode == 0
    printed = []
    for n in range(3):  # each printed while the command runs on, after many empty polls
        assert _run(broker, "produce", "--topic", "Followed", "--body", f"arrived {n}").returncode == 0
        line = follower.next().decode()
        while line.endswith(" warm-up"):
            line = follower.next().decode()
        printed.append(line)
    assert [line.rpartition(" ")[0].rpartition(" ")[2] + " " + line.rpartition(" ")[2] for line in printed] == [
        "arrived 0", "arrived 1", "arrived 2"], printed
    follower.proc.send_signal(signal.SIGINT)
    out, err = follower.rest()
    assert follower.proc.returncode == 130 and b"Traceback" not in err, err
    assert b"before" not in out
    assert err.decode().splitlines()[-1].startswith("mqstore consume: ") and err.endswith(b" received (interrupted)\n")


def test_follow_in_ack_mode_acks_each_message_as_it_arrives_until_ctrl_c(broker: Broker) -> None:
    assert _run(broker, "topics", "create", "AckFollowed", "--queues", "4").returncode == 0
    follower = _start(broker, "consume", "--topic", "AckFollowed", "--group", "AF", "--ack", "--follow",
                      "--timeout-ms", "200")
    for n in range(2):
        assert _run(broker, "produce", "--topic", "AckFollowed", "--body", f"acked {n}").returncode == 0
        line = follower.next().decode()
        assert line.endswith(f"delivery_count=1 acked {n}"), line
    follower.proc.send_signal(signal.SIGINT)
    _, err = follower.rest()
    assert follower.proc.returncode == 130 and b"Traceback" not in err, err
    assert err.decode().splitlines()[-1] == "mqstore consume: 2 received and acked (interrupted)"
    again = _run(broker, "consume", "--topic", "AckFollowed", "--group", "AF", "--ack", "--timeout-ms", "500")
    assert again.returncode == 0 and again.stdout == b"", again  # acked: nothing comes back


def test_from_a_time_starts_at_the_first_message_stored_at_or_after_it(broker: Broker) -> None:
    assert _run(broker, "produce", "--topic", "Timed", "--queue", "0", "--body", "old", "--count", "2").returncode == 0
    [*_, last_old] = _records(broker, "Timed", 2)
    wait_for(lambda: time.time_ns() // 1_000_000 > last_old["store_ms"], 10, "the clock past the old messages")
    assert _run(broker, "produce", "--topic", "Timed", "--queue", "0", "--body", "new", "--count", "2").returncode == 0
    first_new = _records(broker, "Timed", 3)[2]
    iso = datetime.fromtimestamp(first_new["store_ms"] / 1000, UTC).isoformat(timespec="milliseconds")
    for n, when in enumerate((str(first_new["store_ms"]), iso)):
        done = _run(broker, "consume", "--topic", "Timed", "--group", f"Timed{n}", "--from", when, "--count", "10",
                    "--timeout-ms", "1500", "--json")
        assert done.returncode == 0, done.stderr
        got = [json.loads(line) for line in done.stdout.splitlines()]
        assert [(_body(r), r["queue_offset"]) for r in got] == [(b"new", 2), (b"new", 3)], (when, got)


def test_from_a_time_after_every_message_follows_from_the_end(broker: Broker) -> None:
    assert _run(broker, "produce", "--topic", "Ended", "--queue", "0", "--body", "gone").returncode == 0
    future = str(time.time_ns() // 1_000_000 + 3_600_000)
    follower = _start(broker, "consume", "--topic", "Ended", "--group", "E", "--from", future, "--follow", "--json")
    deadline = time.monotonic() + DEADLINE_S
    while not select.select([follower.fd], [], [], 1)[0]:
        assert time.monotonic() < deadline, "nothing printed"
        assert _run(broker, "produce", "--topic", "Ended", "--queue", "0", "--body", "fresh").returncode == 0
    assert _body(json.loads(follower.next())) == b"fresh"
    follower.proc.send_signal(signal.SIGINT)
    follower.rest()
    assert follower.proc.returncode == 130


def test_from_is_refused_in_ack_mode(broker: Broker) -> None:
    done = _run(broker, "consume", "--topic", "Texts", "--ack", "--from", "earliest")
    assert done.returncode == 2 and b"--from is for offset mode" in done.stderr, done.stderr


def test_a_line_longer_than_the_brokers_largest_message_is_refused_and_the_rest_goes_on(tmp_path: Path) -> None:
    """The broker's [store] max_body_bytes, asked of it: a line past it is named on stderr with its
    length, never sent, and the lines after it are; one of exactly the limit is a message."""
    with Broker(tmp_path, extra_toml="\n[store]\nmax_body_bytes = 1000\n") as small:
        sent = b"short\n" + b"x" * 1001 + b"\n" + b"y" * 1000 + b"\nlast" + b"z" * 5000
        done = _run(small, "produce", "--topic", "Long", "--queue", "0", stdin=sent)
        assert done.returncode == 1, done.stderr
        said = done.stderr.decode().splitlines()
        assert said == [
            "mqstore produce: not sent: line 2 is 1001 bytes, more than the broker's largest message body (1000 "
            "bytes, [store] max_body_bytes)",
            "mqstore produce: not sent: line 4 is 5004 bytes, more than the broker's largest message body (1000 "
            "bytes, [store] max_body_bytes)",
            "mqstore produce: 2 sent, 2 failed"], said
        assert [_body(r) for r in _records(small, "Long", 2)] == [b"short", b"y" * 1000]
        assert small.stop() == 0
