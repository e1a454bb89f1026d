"""The supervisor's control client: no broker on a store is a ConnectionError within the request's
timeout, never a hang; the supervisor's reply comes back as it is, a refusal included."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.transport.sockets import bind
from mqstore.ipc.wire import schema


@pytest.fixture
def run_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="mq")  # short: ipc socket paths are limited in length
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Supervisor:
    """A control socket that answers one request with ``reply`` (a message, or raw bytes)."""

    def __init__(self, store: Path, run_dir: str, reply: dict[str, Any] | bytes) -> None:
        self.endpoint = Endpoints.for_store(store, run_dir=run_dir).control
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.bound = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        assert self.bound.wait(10)

    def _serve(self) -> None:
        ctx: zmq.Context[Any] = zmq.Context()
        try:
            control = bind(ctx, zmq.REP, self.endpoint, rcvtimeo_ms=10_000)
            self.bound.set()
            request = schema.unpack(control.recv())
            self.requests.append(request)
            reply = self.reply if isinstance(self.reply, bytes) else {**self.reply, "id": request["id"]}
            control.send(reply if isinstance(reply, bytes) else schema.pack(reply))
        finally:
            ctx.destroy(linger=1000)

    def join(self) -> None:
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.mark.parametrize("explicit_run_dir", [True, False])
def test_no_broker_is_said_at_once_without_its_socket_and_after_the_timeout_with_a_stale_one(
        tmp_path: Path, run_dir: str, explicit_run_dir: bool) -> None:
    store = tmp_path / "store"
    chosen = run_dir if explicit_run_dir else None
    with pytest.raises(ConnectionError, match=r"no broker runs on .*store: no control socket"):
        control_request(store, "status", run_dir=chosen, timeout_ms=600_000)  # no wait: nothing to wait for
    where = Endpoints.for_store(store, run_dir=chosen).run_dir
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX) as stale:  # what a killed broker leaves behind
        stale.bind(str(where / "control.sock"))
    try:
        with pytest.raises(ConnectionError, match=r"no broker answers for .*store within 300 ms"):
            control_request(store, "status", run_dir=chosen, timeout_ms=300)
    finally:
        (where / "control.sock").unlink()


def test_the_supervisors_reply_comes_back_as_it_is(tmp_path: Path, run_dir: str) -> None:
    supervisor = Supervisor(tmp_path / "store", run_dir, schema.ok_reply(None, pid=42, ready=True))
    reply = control_request(tmp_path / "store", "status", run_dir=run_dir, timeout_ms=5000)
    supervisor.join()
    assert [r["op"] for r in supervisor.requests] == ["status"]
    assert reply["ok"] and reply["pid"] == 42 and reply["ready"]


def test_a_refusal_is_a_reply_not_an_error(tmp_path: Path, run_dir: str) -> None:
    refusal = schema.error_reply(None, schema.UNKNOWN_OP, "the supervisor does not serve 'reboot'")
    supervisor = Supervisor(tmp_path / "store", run_dir, refusal)
    reply = control_request(tmp_path / "store", "reboot", run_dir=run_dir, timeout_ms=5000)
    supervisor.join()
    assert not reply["ok"]
    assert reply["status"] == schema.UNKNOWN_OP


def test_a_reply_that_is_not_a_message_raises(tmp_path: Path, run_dir: str) -> None:
    supervisor = Supervisor(tmp_path / "store", run_dir, b"\xc1 not msgpack")
    with pytest.raises(schema.SchemaError):
        control_request(tmp_path / "store", "ping", run_dir=run_dir, timeout_ms=5000)
    supervisor.join()


def test_asking_never_takes_a_run_directory_from_a_broker_starting_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A status asked while a broker starts: the broker makes its run directory between the client's
    look and its answer. The client once removed a run directory it found empty, and the broker's bind
    there then failed ("No such file or directory")."""
    store = tmp_path / "starting"
    broker = Endpoints.for_store(store)
    looked = Endpoints.socket_exists

    def broker_starts_meanwhile(self: Endpoints, role: str) -> bool:
        broker.prepare()  # the broker's start makes its run directory now, and has not bound yet
        return looked(self, role)

    monkeypatch.setattr(Endpoints, "socket_exists", broker_starts_meanwhile)
    try:
        with pytest.raises(ConnectionError, match="no broker runs"):
            control_request(store, "status", timeout_ms=10)
        assert broker.run_dir.is_dir()  # still there for the broker's bind
        with zmq.Context() as ctx:
            bind(ctx, zmq.REP, broker.control).close(0)
    finally:
        shutil.rmtree(broker.run_dir, ignore_errors=True)
