"""When the broker serves: every actor running, and the remoting front answering a route query on its
real TCP port, asked once per front process and only once the actors behind it run."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mqstore.actors.config_listeners import RemotingConfig
from mqstore.actors.readiness import PROBE_INTERVAL_MS, Readiness
from mqstore.ipc.remoting import codec as rm
from tests.conftest import FakeClock


@dataclass
class Actor:
    state: str
    pid: int | None


class Front:
    """A TCP port that refuses connections until ``listen``, then answers each request with ``code``."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.code = rm.SUCCESS
        self.requests: list[int] = []

    def listen(self) -> None:
        self.sock.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with conn:
                length = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))[0]
                request = rm.decode_command(conn.recv(length, socket.MSG_WAITALL))
                self.requests.append(request.code)
                conn.sendall(rm.encode_command(request.reply(self.code)))


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front()
    yield f
    f.sock.close()


def _actors(front_state: str = "running", front_pid: int = 7, writer: str = "running") -> dict[str, Actor]:
    return {"flusher": Actor("running", 1), "writer": Actor(writer, 2), "reader-0": Actor("running", 3),
            "remoting": Actor(front_state, front_pid)}


def test_without_the_front_every_actor_running_is_ready() -> None:
    readiness = Readiness(RemotingConfig(enabled=False))
    assert readiness.check({}) == ["the actors to start"]
    actors = _actors()
    del actors["remoting"]
    assert readiness.check(actors) == []
    actors["writer"].state = "dead (exit -9), restart in 100 ms"
    assert readiness.check(actors) == ["writer: dead (exit -9), restart in 100 ms"]


def test_the_front_is_awaited_until_it_answers_a_route_query(front: Front, clock: FakeClock) -> None:
    readiness = Readiness(RemotingConfig(enabled=True, port=front.port), clock)
    waiting_front = f"the remoting front to answer route queries on 127.0.0.1:{front.port}"
    assert readiness.check(_actors(front_state="starting")) == ["remoting: starting"]
    # reported "running" but not listening yet: a RocketMQ client would be refused
    assert readiness.check(_actors()) == [waiting_front]
    front.listen()
    assert readiness.check(_actors()) == [waiting_front]  # the next probe waits for its interval
    clock.advance(PROBE_INTERVAL_MS)
    assert readiness.check(_actors()) == []
    assert front.requests == [rm.GET_ROUTEINFO_BY_TOPIC]
    assert readiness.check(_actors()) == [] and len(front.requests) == 1  # asked once per front process


def test_the_front_is_asked_only_once_the_writer_runs_and_again_when_restarted(front: Front,
                                                                              clock: FakeClock) -> None:
    readiness = Readiness(RemotingConfig(enabled=True, host="0.0.0.0", port=front.port), clock)
    front.listen()
    assert "writer: starting" in readiness.check(_actors(writer="starting"))
    assert front.requests == []  # its route query would wait for the writer
    assert readiness.check(_actors()) == []
    front.code = rm.SYSTEM_ERROR
    clock.advance(PROBE_INTERVAL_MS)
    restarted = _actors(front_pid=8)
    assert readiness.check(restarted) == [f"the remoting front to answer route queries on 127.0.0.1:{front.port}"]
    assert readiness.waiting_for(restarted) == readiness.check(restarted)
    front.code = rm.SUCCESS
    clock.advance(PROBE_INTERVAL_MS)
    assert readiness.check(restarted) == []
    assert front.requests == [rm.GET_ROUTEINFO_BY_TOPIC] * 3
