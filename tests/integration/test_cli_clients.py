"""The client commands a user runs first (``mqstore produce | consume | status | topics | groups``),
through the command itself against a real broker: failures said with their reasons, Ctrl-C and a closed
stdout handled, no broker said plainly, output a person reads."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.ipc.client.api import Admin, Producer
from mqstore.ipc.transport.endpoints import default_run_dir
from mqstore.scripts.harness import ROOT as ROOT_DIR
from tests.integration.broker import Broker, wait_for

pytestmark = pytest.mark.slow
MQSTORE = [sys.executable, "-m", "mqstore.scripts.cli.mqstore"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("cli")) as running:
        with Producer(running.store) as producer:
            assert all(r.ok for r in producer.send_batch(
                [{"topic": "Texts", "body": "grüße 1".encode()}, {"topic": "Texts", "body": b"\xff\xfe raw"}]))
        yield running


def _mqstore(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MQSTORE, *argv], capture_output=True, text=True, cwd=ROOT_DIR, timeout=120,
                          env={**os.environ, **(env or {})})


def test_a_failed_produce_says_each_failures_reason(broker: Broker) -> None:
    done = broker.mqstore("produce", "--topic", "Orders", "--queue", "99", "--body", "x")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any(line.startswith("mqstore produce: not sent: ") and "99" in line for line in lines), done.stderr
    assert lines[-1] == "mqstore produce: 0 sent, 1 failed"
    bad = broker.mqstore("produce", "--topic", "bad topic!", "--body", "x")
    assert bad.returncode == 1 and "not sent: MESSAGE_ILLEGAL: " in bad.stderr, bad.stderr


def test_a_string_key_is_one_key(broker: Broker) -> None:
    with Producer(broker.store) as producer:
        assert producer.send("Keys", b"x", keys="one-key").ok
        assert producer.send_encoded([{"topic": "Keys", "body": b"y", "keys": "other-key"}])[0].ok
    with Admin(broker.store) as admin:
        found = wait_for(lambda: admin.query_by_key("Keys", "one-key") or None, 30, "the key indexed")
        assert [m.keys for m in found] == [("one-key",)]
        other = wait_for(lambda: admin.query_by_key("Keys", "other-key") or None, 30, "the key indexed")
        assert [m.keys for m in other] == [("other-key",)]


def test_consume_prints_text_bodies_as_text_and_leaves_out_empty_fields(broker: Broker) -> None:
    done = broker.mqstore("consume", "--topic", "Texts", "--group", "Readers", "--from", "earliest", "--count", "2")
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert len(lines) == 2 and all("None" not in line and "keys=" not in line for line in lines), lines
    assert any(line.endswith(" grüße 1") for line in lines), lines
    assert any(line.endswith(r"body (not UTF-8, escaped): \xff\xfe raw") for line in lines), lines


def test_a_queue_never_consumed_shows_never_and_null(broker: Broker) -> None:
    broker.mqstore("consume", "--topic", "Texts", "--group", "Once", "--from", "earliest", "--count", "1")
    rows = [json.loads(line) for line in broker.mqstore("groups", "describe", "Once", "--json").stdout.splitlines()]
    assert any(r["last_consume_ms"] is None for r in rows) and any(r["last_consume_ms"] for r in rows), rows
    assert all(r["last_consume_ms"] != 0 for r in rows)
    table = broker.mqstore("groups", "describe", "Once").stdout
    assert "never" in table, table


def test_status_title_and_url_lines_do_not_wrap_at_200_columns(broker: Broker) -> None:
    done = subprocess.run([*MQSTORE, "status", "--store", str(broker.store)], capture_output=True, text=True,
                          cwd=ROOT_DIR, env={**os.environ, "COLUMNS": "200"}, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"broker on {broker.store} (pid ") and "flushed" in lines[0]  # whole, unwrapped
    assert all(len(line) <= 200 for line in lines), max(map(len, lines))


@pytest.mark.parametrize("argv", [("status",), ("topics", "list"),
                                  ("consume", "--topic", "Texts", "--group", "Pipe", "--from", "earliest")])
def test_a_closed_stdout_ends_the_command_quietly(broker: Broker, argv: tuple[str, ...]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the first write meets a closed pipe
    try:
        done = subprocess.run([*MQSTORE, *argv, "--store", str(broker.store)], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT_DIR, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
    assert "Broken pipe" not in done.stderr and "Errno" not in done.stderr and "Traceback" not in done.stderr


def _interrupted(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` run until it prints its first line, then Ctrl-C (SIGINT)."""
    proc = subprocess.Popen([*MQSTORE, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT_DIR)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first, proc.communicate(timeout=60)
    proc.send_signal(signal.SIGINT)
    # the rest through the same file object: ``readline`` may have buffered more than the first line,
    # which ``communicate`` (reading the pipe's descriptor) would never see (the stderr here is a line)
    out = proc.stdout.read()
    _, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, first + out, err)


def test_ctrl_c_on_consume_and_produce_prints_the_summary_so_far(broker: Broker) -> None:
    consumed = _interrupted(["consume", "--store", str(broker.store), "--topic", "Texts", "--group", "Int",
                             "--from", "earliest", "--count", "100", "--timeout-ms", "600000"])
    assert consumed.returncode == 130 and "Traceback" not in consumed.stderr, consumed.stderr
    printed = len(consumed.stdout.splitlines())  # what came before the signal: one or both
    assert f"mqstore consume: {printed} received (interrupted)" in consumed.stderr, consumed
    produced = _interrupted(["produce", "--store", str(broker.store), "--topic", "Many", "--count", "1000000",
                             "--batch", "1", "--json"])
    assert produced.returncode == 130 and "Traceback" not in produced.stderr, produced.stderr
    summary = [line for line in produced.stderr.splitlines() if line.endswith("failed (interrupted)")]
    assert summary and summary[0].startswith("mqstore produce: ") and " sent, 0 failed" in summary[0]


def test_query_help_says_it_asks_a_running_broker() -> None:
    assert "running broker" in _mqstore("query", "--help").stdout.replace("\n", " ").replace("  ", " ")


# -- no broker -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [("produce", "--topic", "T"), ("consume", "--topic", "T"), ("status",),
                                  ("stop",), ("topics", "create", "T")])
def test_without_a_broker_each_client_command_says_so_at_once(tmp_path: Path, argv: tuple[str, ...]) -> None:
    store = tmp_path / "nobody"
    done = _mqstore(*argv, "--store", str(store))
    assert done.returncode == 2, done.stderr
    assert f"no broker runs on {store}" in done.stderr and "request" not in done.stderr, done.stderr
    assert not default_run_dir(store).exists()  # asking made no run directory


def test_a_socket_nobody_answers_is_said_after_the_timeout(tmp_path: Path) -> None:
    store = tmp_path / "killed"
    run_dir = default_run_dir(store)
    run_dir.mkdir(mode=0o700, parents=True)
    for role in ("ingress", "reader-0", "control"):  # what a killed broker leaves behind
        with socket.socket(socket.AF_UNIX) as stale:
            stale.bind(str(run_dir / f"{role}.sock"))
    try:
        for argv in (("produce", "--topic", "T", "--body", "x", "--timeout-ms", "200"), ("consume", "--topic", "T")):
            done = _mqstore(*argv, "--store", str(store))
            assert done.returncode == 2, done.stderr
            assert f"no broker answers on {store} within" in done.stderr and str(run_dir) in done.stderr, done.stderr
    finally:
        for path in run_dir.iterdir():
            path.unlink()
        run_dir.rmdir()


def test_start_on_a_file_says_so_before_anything_else(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-store"
    a_file.write_text("x")
    done = _mqstore("start", "--store", str(a_file), "--remoting", "off")
    assert done.returncode == 2
    assert done.stderr.strip() == f"mqstore start: {a_file} is a file, not a directory: --store names the " \
                                  "store's directory"
    assert "dashboard" not in done.stderr + done.stdout


# -- stopped brokers -------------------------------------------------------------------------------------


def test_a_clean_stop_leaves_no_run_directory_behind(tmp_path: Path) -> None:
    with Broker(tmp_path) as running:
        run_dir = default_run_dir(running.store)
        assert (run_dir / "control.sock").exists()
        stopped = running.mqstore("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert running.proc is not None and running.proc.wait(60) == 0
        assert not run_dir.exists(), sorted(p.name for p in run_dir.iterdir())


def test_a_deleted_topic_stays_deleted_through_verify_and_repair(tmp_path: Path) -> None:
    with Broker(tmp_path) as running:
        assert running.mqstore("topics", "create", "Gone", "--queues", "4").returncode == 0
        assert running.mqstore("produce", "--topic", "Gone", "--count", "8").returncode == 0
        assert running.mqstore("produce", "--topic", "Kept", "--count", "3").returncode == 0
        deleted = running.mqstore("topics", "delete", "Gone")
        assert deleted.returncode == 0, deleted.stderr
        assert running.stop() == 0
    verified = _mqstore("verify", "--store", str(running.store), "--json")
    assert verified.returncode == 0, verified.stdout
    repaired = _mqstore("verify", "--store", str(running.store), "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert not (running.store / "consumequeue" / "Gone").exists()
    assert (running.store / "consumequeue" / "Kept").is_dir()
    topics = json.loads((running.store / "config" / "topics.json").read_text())
    assert "Gone" not in topics["topicConfigTable"] and "Kept" in topics["topicConfigTable"]
    listed = [json.loads(line)["topic"] for line in
              _mqstore("topics", "list", "--store", str(running.store), "--json").stdout.splitlines()]
    assert "Gone" not in listed and "Kept" in listed
