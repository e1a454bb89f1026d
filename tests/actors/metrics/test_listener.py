"""The metrics listener on a real socket: the pages it holds, 4xx for anything else, and clients
that never send or never read hold a thread each and keep no one else waiting."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from mqstore.actors.metrics.listener import MAX_CONNECTIONS, MetricsServer, Pages
from mqstore.scripts.harness import wait_for


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    pages = Pages()
    pages.update(b"mqstore_up 1\n", b'{"time_ms": 1}')
    srv = MetricsServer(("127.0.0.1", 0), pages)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def _get(srv: MetricsServer, path: str, method: str = "GET") -> tuple[int, bytes, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{srv.server_port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers["Content-Type"]


def _raw(srv: MetricsServer, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", srv.server_port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: sock.recv(65536), b""))


def test_the_pages_are_served_with_their_types(server: MetricsServer) -> None:
    status, body, kind = _get(server, "/metrics")
    assert (status, body) == (200, b"mqstore_up 1\n") and kind.startswith("text/plain; version=0.0.4")
    assert _get(server, "/api/status?x=1")[:2] == (200, b'{"time_ms": 1}')
    status, body, kind = _get(server, "/")
    assert status == 200 and b"/dashboard.js" in body and kind.startswith("text/html")
    assert _get(server, "/dashboard.js")[0] == 200 and _get(server, "/dashboard.css")[0] == 200
    status, body, kind = _get(server, "/chart.js")
    assert status == 200 and b"function drawChart" in body and kind.startswith("text/javascript")


@pytest.mark.parametrize(("path", "method", "code"), [
    ("/nope", "GET", 404), ("/../actor.py", "GET", 404), ("/static/index.html", "GET", 404),
    ("/metrics", "POST", 405), ("/metrics", "DELETE", 405), ("/", "BREW", 405),
])
def test_anything_else_is_a_4xx(server: MetricsServer, path: str, method: str, code: int) -> None:
    assert _get(server, path, method)[0] == code
    assert _get(server, "/metrics")[0] == 200  # and it keeps serving


@pytest.mark.parametrize("request_bytes", [b"garbage\r\n\r\n", b"GET\r\n\r\n", b"GET /metrics HTTP/9.9\r\n\r\n",
                                           b"GET /" + b"a" * 70_000 + b" HTTP/1.0\r\n\r\n"])
def test_what_is_not_http_is_a_4xx(server: MetricsServer, request_bytes: bytes) -> None:
    status_line = _raw(server, request_bytes).split(b"\r\n", 1)[0]
    assert status_line.split(b" ")[1][:1] == b"4", status_line
    assert _get(server, "/metrics")[0] == 200


def test_clients_that_never_send_or_never_read_keep_no_one_waiting(server: MetricsServer) -> None:
    hung = []
    try:
        for i in range(MAX_CONNECTIONS // 2):
            sock = socket.create_connection(("127.0.0.1", server.server_port))
            if i % 2:  # asks, and never reads the answer
                sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            hung.append(sock)
        assert _get(server, "/metrics")[:2] == (200, b"mqstore_up 1\n")
    finally:
        for sock in hung:
            sock.close()


def test_past_the_connection_limit_the_oldest_still_sending_makes_room(server: MetricsServer) -> None:
    """Past the limit a new connection used to be closed unanswered: as many clients that never
    finish a request kept every scraper out. Now the oldest of them is closed for the newcomer."""
    hung = [socket.create_connection(("127.0.0.1", server.server_port), timeout=10) for _ in range(MAX_CONNECTIONS)]
    try:
        wait_for(lambda: len(server._live) == MAX_CONNECTIONS, 10, "every hung connection accepted")
        assert _raw(server, b"GET /metrics HTTP/1.0\r\n\r\n").endswith(b"mqstore_up 1\n")
        assert hung[0].recv(1) == b""  # the oldest, closed to make room
        assert server.evicted == 1
    finally:
        for sock in hung:
            sock.close()


@pytest.fixture
def strict_server() -> Iterator[MetricsServer]:
    pages = Pages()
    pages.update(b"mqstore_up 1\n", b"{}")
    srv = MetricsServer(("127.0.0.1", 0), pages, request_timeout_s=1.0, max_connections=4,
                        allowed_hosts=frozenset({"metrics.example"}))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def test_metrics_timeout_per_receive_let_a_trickle_hold_a_connection(strict_server: MetricsServer) -> None:
    """The timeout was per receive: a byte every few seconds held a connection (and its thread) for
    as long as the client liked. The whole request has one deadline now."""
    sock = socket.create_connection(("127.0.0.1", strict_server.server_port), timeout=10)
    closed = threading.Event()

    def trickle() -> None:
        try:
            while not closed.is_set():
                sock.sendall(b"G")
                closed.wait(0.2)
        except OSError:
            closed.set()

    threading.Thread(target=trickle, daemon=True).start()
    try:
        assert sock.recv(1) == b""  # cut while still sending
    finally:
        closed.set()
        sock.close()


@pytest.mark.parametrize(("host", "code"), [
    (None, 200), ("localhost", 200), ("127.0.0.1:{port}", 200), ("[::1]:{port}", 200), ("LOCALHOST", 200),
    ("metrics.example:{port}", 200), ("evil.example", 421), ("evil.example:{port}", 421), ("127.0.0.1.evil", 421),
    ("localhost.evil.example", 421)])
def test_metrics_host_header_unchecked_let_a_rebound_page_read_status(
        strict_server: MetricsServer, host: str | None, code: int) -> None:
    header = b"" if host is None else f"Host: {host.format(port=strict_server.server_port)}\r\n".encode()
    answer = _raw(strict_server, b"GET /api/status HTTP/1.1\r\n" + header + b"\r\n")
    assert int(answer.split(b" ", 2)[1]) == code, answer[:200]
