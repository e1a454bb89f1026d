"""The metrics actor's HTTP listener: read-only, GET (and HEAD) only, from what ``Pages`` holds.

    /metrics        Prometheus text exposition (``mqstore.actors.metrics.exposition``)
    /api/status     the last collection as JSON (``mqstore.actors.metrics.collect``), with the dashboard's
                    totals, version and uptime (``overview``: ``mqstore.actors.metrics.overview``)
    /               the dashboard (``static/index.html``), its scripts and stylesheet beside it

Each connection has a thread of its own, at most ``max_connections`` at once, and one deadline,
``request_timeout_ms``, for the whole of it: the request must arrive whole and the answer leave
within it, however the bytes trickle in (a watch shuts the socket at the deadline; a timeout per
receive would let a byte every few seconds hold a thread for ever). With every place taken, a new
connection closes the oldest one still sending its request, so clients that dribble bytes cannot
keep a scraper out (a scraper sends its request at once). The Host header must name the listener
itself (its address, localhost, 127.0.0.1, [::1], or a name in ``allowed_hosts``): a page from another
site whose name an attacker re-points at 127.0.0.1 (DNS rebinding) gets a 421, not the status. A
page is rendered at most once per collection, on the first read after it (``RenderedPages`` in the
metrics actor): later scrapes of the same collection cost a copy to the socket. Anything but a
known page is a 4xx: 404 for another path, 405 for another method, 400 / 414 / 431 for what is not
HTTP, 421 for another Host.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger("mqstore")

MAX_CONNECTIONS = 64
REQUEST_TIMEOUT_S = 5.0
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
STATIC_DIR = Path(__file__).resolve().parent / "static"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
STATIC_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
                "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
                "/chart.js": ("chart.js", "text/javascript; charset=utf-8"),
                "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8")}


@dataclass(frozen=True, slots=True)
class Page:
    body: bytes
    content_type: str


class Pages:
    """What the listener serves; ``update`` swaps in a new collection's pages whole."""

    def __init__(self, static_dir: Path = STATIC_DIR) -> None:
        self.pages: dict[str, Page] = {path: Page((static_dir / name).read_bytes(), kind)
                                       for path, (name, kind) in STATIC_FILES.items()}
        self.pages["/metrics"] = Page(b"", PROMETHEUS_TEXT)
        self.pages["/api/status"] = Page(b"{}", "application/json")
        self.served = 0

    def update(self, metrics_text: bytes, status_json: bytes) -> None:
        self.pages = {**self.pages, "/metrics": Page(metrics_text, PROMETHEUS_TEXT),
                      "/api/status": Page(status_json, "application/json")}

    def get(self, path: str) -> Page | None:
        return self.pages.get(path.split("?", 1)[0])


def host_name(header: str) -> str:
    """The name of a Host header, without its port: ``[::1]:9469`` is ``[::1]``, ``a.b:80`` is ``a.b``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[:header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    server_version = "mqstore-metrics"
    protocol_version = "HTTP/1.0"  # one request a connection: a scraper idling on keep-alive holds no thread
    default_request_version = "HTTP/1.0"  # errors carry a status line even for what is not HTTP at all

    def parse_request(self) -> bool:
        """http.server's parse, less HTTP/0.9 (``GET /path`` without a version) and with 400 rather
        than 505 for a version it does not speak: a bad request is the client's, a 4xx."""
        if len(self.raw_requestline.split()) == 2:
            self.requestline = self.raw_requestline.decode("iso-8859-1", "replace").rstrip("\r\n")
            self.command, self.path = "", ""
            self.send_error(400, "a request line is METHOD PATH VERSION")
            return False
        return super().parse_request()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code == 505:
            code, message = 400, "HTTP/1.0 or HTTP/1.1 only"
        super().send_error(code, message, explain)

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def _answer(self, *, with_body: bool) -> None:
        self.server.answering(self.request)
        host = self.headers.get("Host")
        if host is not None and host_name(host) not in self.server.names:
            self.send_error(421, "this listener serves its own names only (Host)")
            return
        page = self.server.pages.get(self.path)
        if page is None:
            self.send_error(404, "no such page (/, /metrics, /api/status)")
            return
        self.server.pages.served += 1
        self.send_response(200)
        self.send_header("Content-Type", page.content_type)
        self.send_header("Content-Length", str(len(page.body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if with_body:
            self.wfile.write(page.body)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # any other method: 405, not http.server's 501
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self.send_error(405, "read-only: GET and HEAD only")
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics listener: " + format, *args)


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog: connections past it would wait on SYN retries

    def __init__(self, address: tuple[str, int], pages: Pages, *, request_timeout_s: float = REQUEST_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS, allowed_hosts: frozenset[str] = frozenset()) -> None:
        self.pages = pages
        self.request_timeout_s = request_timeout_s
        self.max_connections = max_connections
        self.names = LOCAL_NAMES | {h.lower() for h in allowed_hosts}
        self.evicted = 0
        self._lock = threading.Lock()
        self._live: dict[Any, tuple[float, bool]] = {}  # socket: (deadline, still sending its request)
        super().__init__(address, _Handler)
        bound = str(self.server_address[0])
        self.names |= {bound, f"[{bound}]"}

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if len(self._live) >= self.max_connections:
                oldest = min((s for s, (_, reading) in self._live.items() if reading),
                             key=lambda s: self._live[s][0], default=None)
                if oldest is None:  # every place is answering: this one waits for none of them
                    self.shutdown_request(request)
                    return
                del self._live[oldest]
                self.evicted += 1
                _cut(oldest)
            self._live[request] = (time.monotonic() + self.request_timeout_s, True)
        super().process_request(request, client_address)

    def answering(self, request: Any) -> None:
        """The request came whole: its connection no longer makes room for newcomers."""
        with self._lock:
            if request in self._live:
                self._live[request] = (self._live[request][0], False)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._live.pop(request, None)

    def service_actions(self) -> None:
        """Between polls of the listening socket: shut every connection past its deadline."""
        now = time.monotonic()
        with self._lock:
            late = [s for s, (deadline, _) in self._live.items() if deadline <= now]
            for sock in late:
                del self._live[sock]
        for sock in late:
            _cut(sock)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client gone or too slow (a timeout, a reset) is its own business; anything else is logged
        log.debug("metrics listener: connection from %s failed", client_address, exc_info=True)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host (no name is needed)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


def _cut(sock: socket.socket) -> None:
    """Its thread's receive or send returns at once; the thread closes the socket as it ends."""
    with contextlib.suppress(OSError):  # already gone
        sock.shutdown(socket.SHUT_RDWR)
