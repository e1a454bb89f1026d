"""The mqstore command, run in-process through main() and once as a real subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine import Message, MessageStore, PutResult
from mqstore.engine.log.mapped_file import file_name
from mqstore.scripts.cli.mqstore import main

ROOT = Path(__file__).resolve().parents[3]
COUNT = 30
BINARY_BODY = b"\xff\xfe\x00binary"

OpenStore = Callable[..., MessageStore]


@pytest.fixture
def built(tmp_path: Path, open_store: OpenStore) -> tuple[Path, list[PutResult]]:
    store_dir = tmp_path / "store"
    store = open_store(store_dir)
    messages = [Message("Orders", BINARY_BODY if i == 0 else f"order {i}".encode(),
                        tags="TagA" if i % 2 == 0 else "TagB", keys=(f"order-{i}", "shared"))
                for i in range(COUNT)]
    results = store.put_batch(messages, [i % 3 for i in range(COUNT)])
    assert all(r.ok for r in results)
    store.close()
    return store_dir, results


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]]]:
    """main(argv) and its stdout as JSON lines."""
    rc = main(list(argv))
    lines = capsys.readouterr().out.splitlines()
    return rc, [json.loads(line) for line in lines]


def _of_type(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["type"] == kind]


def test_inspect_json_lines(built: tuple[Path, list[PutResult]], capsys: pytest.CaptureFixture[str]) -> None:
    store_dir, results = built
    rc, objs = _run(capsys, "inspect", str(store_dir), "--json", "--records", "100")
    assert rc == 0
    assert _of_type(objs, "store")[0]["records"] == COUNT
    assert not _of_type(objs, "store")[0]["abort"]
    records = _of_type(objs, "record")
    assert [r["phys_offset"] for r in records] == [r.phys_offset for r in results]
    assert records[0]["encoding"] == "base64" and records[1] == records[1] | {"body": "order 1", "encoding": "utf-8"}
    assert records[1]["msg_id"] == results[1].msg_id and records[1]["uniq_key"] == results[1].uniq_key
    assert {(q["topic"], q["queue_id"], q["min_queue_offset"], q["max_queue_offset"])
            for q in _of_type(objs, "queue")} == {("Orders", q, 0, COUNT // 3) for q in range(3)}
    assert sum(len(_of_type(objs, kind)) for kind in ("commitlog", "index", "checkpoint")) > 3

    rc, objs = _run(capsys, "inspect", str(store_dir), "--json")
    assert len(_of_type(objs, "record")) == 20


def test_inspect_table(built: tuple[Path, list[PutResult]], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(built[0]), "--records", "2"]) == 0
    out = capsys.readouterr().out
    assert "commitlog" in out and "Orders" in out and "order 1" in out


def test_query_by_key(built: tuple[Path, list[PutResult]], capsys: pytest.CaptureFixture[str]) -> None:
    store_dir, results = built
    rc, objs = _run(capsys, "query", str(store_dir), "--topic", "Orders", "--key", "order-7", "--json")
    assert rc == 0
    assert [o["phys_offset"] for o in objs] == [results[7].phys_offset]
    rc, objs = _run(capsys, "query", str(store_dir), "--topic", "Orders", "--key", "shared", "--json")
    assert len(objs) == COUNT


def test_query_by_msg_id_and_uniq_key(built: tuple[Path, list[PutResult]],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    store_dir, results = built
    rc, objs = _run(capsys, "query", str(store_dir), "--msg-id", results[4].msg_id, "--json")
    assert rc == 0 and [o["queue_offset"] for o in objs] == [results[4].queue_offset]
    assert results[5].uniq_key is not None
    rc, objs = _run(capsys, "query", str(store_dir), "--uniq-key", results[5].uniq_key, "--json")
    assert rc == 0 and [o["phys_offset"] for o in objs] == [results[5].phys_offset]
    rc, objs = _run(capsys, "query", str(store_dir), "--uniq-key", results[5].uniq_key, "--topic", "Orders",
                    "--json")
    assert [o["uniq_key"] for o in objs] == [results[5].uniq_key]


def test_query_by_queue_offset(built: tuple[Path, list[PutResult]], capsys: pytest.CaptureFixture[str]) -> None:
    store_dir, results = built
    rc, objs = _run(capsys, "query", str(store_dir), "--topic", "Orders", "--queue", "1", "--offset", "2", "--json")
    assert rc == 0 and [(o["queue_id"], o["queue_offset"]) for o in objs] == [(1, 2)]
    rc, objs = _run(capsys, "query", str(store_dir), "--topic", "Orders", "--queue", "0", "--offset", "0",
                    "--count", "100", "--tags", "TagA", "--json")
    queue0 = [r for i, r in enumerate(results) if i % 3 == 0 and i % 2 == 0]
    assert [o["phys_offset"] for o in objs] == [r.phys_offset for r in queue0]
    assert main(["query", str(store_dir), "--topic", "Orders", "--queue", "0", "--offset", "3"]) == 0
    assert "order 9" in capsys.readouterr().out


def test_query_without_match_exits_1(built: tuple[Path, list[PutResult]],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", str(built[0]), "--topic", "Orders", "--key", "nope"]) == 1
    assert "no matching records" in capsys.readouterr().err


def test_query_of_a_store_in_use_exits_2(built: tuple[Path, list[PutResult]], open_store: OpenStore,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    open_store(built[0])
    assert main(["query", str(built[0]), "--msg-id", built[1][0].msg_id]) == 2
    assert "in use" in capsys.readouterr().err


def test_bad_arguments_are_argparse_errors(built: tuple[Path, list[PutResult]]) -> None:
    for argv in (["bogus"], ["query", str(built[0]), "--key", "k"],
                 ["query", str(built[0]), "--key", "k", "--msg-id", "m"], ["demo", "--count", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


def test_inspect_without_a_store_looks_at_the_default_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A bare ``mqstore inspect`` was a usage error; every command now has ``--store ./mqstore-data``."""
    monkeypatch.chdir(tmp_path)
    assert main(["inspect"]) == 2
    assert "no store directory at mqstore-data" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["inspect", "verify", "query"])
def test_missing_store_exits_2(tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--msg-id", "00"] if command == "query" else []
    assert main([command, str(tmp_path / "nowhere"), *extra]) == 2
    assert "no store directory" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "plain").mkdir()
    assert main([command, str(tmp_path / "plain"), *extra]) == 2
    assert "not a store" in capsys.readouterr().err
    assert not any((tmp_path / "plain").iterdir())


def test_verify_exit_codes(built: tuple[Path, list[PutResult]], capsys: pytest.CaptureFixture[str]) -> None:
    store_dir, results = built
    rc, objs = _run(capsys, "verify", str(store_dir), "--json")
    assert rc == 0 and objs == [objs[0]] and objs[0]["ok"] and objs[0]["records"] == COUNT

    phys_offset = results[3].phys_offset
    with (store_dir / "commitlog" / file_name(0)).open("r+b") as f:
        f.seek(phys_offset + 90)  # inside the body
        f.write(b"#")
    rc, objs = _run(capsys, "verify", str(store_dir), "--json")
    assert rc == 1
    assert _of_type(objs, "finding")[0]["kind"] == "record_corrupt"
    assert not _of_type(objs, "verify")[0]["ok"]
    assert main(["verify", str(store_dir)]) == 1
    assert "record_corrupt" in capsys.readouterr().out


def test_verify_repair(built: tuple[Path, list[PutResult]], capsys: pytest.CaptureFixture[str]) -> None:
    store_dir = built[0]
    shutil.rmtree(store_dir / "consumequeue")
    assert main(["verify", str(store_dir)]) == 1
    assert "cq_entry_missing" in capsys.readouterr().out
    rc, objs = _run(capsys, "verify", str(store_dir), "--repair", "--json")
    assert rc == 0 and objs[-1]["repaired"] and objs[-1]["ok"]


def test_subprocess_entry_point(built: tuple[Path, list[PutResult]]) -> None:
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "verify", str(built[0]), "--json"],
                          cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["records"] == COUNT


def test_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store_dir = tmp_path / "demo"
    assert main(["demo", "--store", str(store_dir), "--count", "2000"]) == 0
    out = capsys.readouterr().out
    assert "put_batch" in out and "2000 of 2000" in out and "1000 of 1000" in out
    assert (store_dir / "commitlog").is_dir()
    shutil.rmtree(store_dir)  # RocketMQ's default geometry: 1.4 GB allocated, not left behind for pytest to keep
