"""The broker commands' rules that need no broker: numeric arguments are usage errors, and a start on
a store another process holds names that process instead of starting."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.engine import MessageStore
from mqstore.scripts.cli.mqstore import main
from mqstore.scripts.cli.output import status_json

OpenStore = Callable[..., MessageStore]


@pytest.mark.parametrize("argv", [
    ["produce", "--topic", "T", "--count", "-3"],
    ["produce", "--topic", "T", "--count", "0"],
    ["produce", "--topic", "T", "--batch", "0"],
    ["produce", "--topic", "T", "--queue", "-1"],
    ["produce", "--topic", "T", "--count", "many"],
    ["produce", "--topic", "T", "--tcp", "127.0.0.1:65536"],
    ["consume", "--topic", "T", "--tcp", "127.0.0.1"],
    ["consume", "--topic", "T", "--count", "0"],
    ["consume", "--topic", "T", "--timeout-ms", "-5"],
    ["consume", "--topic", "T", "--ack", "--visibility-ms", "0"],
    ["consume", "--topic", "T", "--ack", "--prefetch", "-1"],
    ["status", "--timeout-ms", "0"],
    ["stop", "--timeout-ms", "0"],
    ["stop", "--wait-ms", "0"],
    ["start", "--readers", "0"],
    ["start", "--remoting-port", "0"],
    ["start", "--remoting-port", "65536"],
    ["start", "--metrics-port", "0"],
    ["start", "--metrics", "maybe"],
], ids=" ".join)
def test_numeric_arguments_of_the_broker_commands_are_usage_errors(argv: list[str], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``mqstore produce --count -3`` printed "0 sent, 0 failed" and exited 0, and ``--batch 0``
    answered with an internal API message; the offline commands' rule now holds for these too."""
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--store", str(tmp_path / "store")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: mqstore" in err and f"argument {argv[-2]}" in err


@pytest.mark.parametrize("remoting", ["off", "on"])
def test_start_on_a_held_store_says_in_use_by_which_pid(tmp_path: Path, open_store: OpenStore, remoting: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A start on a held store raised RuntimeError out of the supervisor (a traceback), or, with the
    remoting front on and its port taken, blamed the port: the store lock is checked first."""
    open_store(tmp_path / "store")  # this process holds the store
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert main(["start", "--store", str(tmp_path / "store"), "--remoting", remoting,
                     "--remoting-port", port]) == 2
    err = capsys.readouterr().err
    assert f"is in use by pid {os.getpid()}" in err
    assert "cannot serve RocketMQ clients" not in err


def test_start_with_the_metrics_port_taken_says_so_and_starts_nothing(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert main(["start", "--store", str(tmp_path / "store"), "--remoting", "off", "--metrics-port", port]) == 2
    err = capsys.readouterr().err
    assert f"cannot serve metrics on 127.0.0.1:{port}" in err and "--metrics off" in err
    assert not (tmp_path / "store" / "commitlog").exists()


def test_status_json_names_each_holders_queue_queue_id() -> None:
    """``mqstore status --json`` showed a commitlog file's holders with ``queue`` where every other JSON
    output says ``queue_id``; the rest of the reply is as the supervisor sent it."""
    holder = {"kind": "offset", "group": "G", "topic": "T", "queue": 2, "messages": 5}
    reply = {"v": 1, "id": 1, "ok": True, "actors": {"writer": {"pid": 7, "files": [
        {"file": 0, "state": "held", "held_by": [holder], "more_holders": 0}]}, "reader-0": {"pid": 8}}}
    shown = status_json(reply)
    assert shown["actors"]["writer"]["files"][0]["held_by"] == [
        {"kind": "offset", "group": "G", "topic": "T", "queue_id": 2, "messages": 5}]
    assert {**shown, "actors": {}} == {**reply, "actors": {}} and shown["actors"]["reader-0"] == {"pid": 8}
    assert holder["queue"] == 2  # the reply itself is left as it came
    assert status_json({"v": 1, "actors": {"reader-0": {}}}) == {"v": 1, "actors": {"reader-0": {}}}
