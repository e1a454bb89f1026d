"""The metrics actor's HTTP listener: read-only, GET (and HEAD) only, from what ``Pages`` holds.

    /metrics        Prometheus text exposition (``mqstore.actors.metrics.exposition``)
    /api/status     the last collection as JSON (``mqstore.actors.metrics.collect``)
    /               the dashboard (``static/index.html``), its script and stylesheet beside it

Each connection has a thread of its own, at most ``MAX_CONNECTIONS`` at once (past that a connection
is closed unanswered), and a socket timeout of ``CLIENT_TIMEOUT_S``: a client that never sends its
request, or never reads the answer, holds one thread that long and nothing else. Every page is
bytes rendered once per collection, so a scrape costs a copy to the socket. Anything but a known
page is a 4xx: 404 for another path, 405 for another method, 400 / 414 / 431 for what is not HTTP.
"""

from __future__ import annotations

import logging
import socketserver
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger("mqstore")

MAX_CONNECTIONS = 32
CLIENT_TIMEOUT_S = 5.0
STATIC_DIR = Path(__file__).resolve().parent / "static"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
STATIC_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
                "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
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


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = CLIENT_TIMEOUT_S
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

    def __init__(self, address: tuple[str, int], pages: Pages) -> None:
        self.pages = pages
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # too many at once: this one is closed unanswered
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client gone or too slow (a timeout, a reset) is its own business; anything else is logged
        log.debug("metrics listener: connection from %s failed", client_address, exc_info=True)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host (no name is needed)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])
