"""metrics: Prometheus metrics and the dashboard, served over HTTP from a process of its own.

Every ``[metrics] collect_interval_ms`` (every ``IDLE_COLLECT_MS`` while nothing moves and nobody
reads the pages) the loop asks the supervisor and the other actors over the
ops they already serve (``mqstore.actors.metrics.collect``) and hands the collection to the listener
(``mqstore.actors.metrics.listener``), which serves it from a thread of its own: rendered as Prometheus
text (``mqstore.actors.metrics.exposition``) and JSON when a page is read, once a collection
(``RenderedPages``), so a collection nobody reads costs no render (at thousands of topics the render
was most of an idle broker's CPU). The other actors only count what they did in the stats
events they send anyway (``mqstore.actors.meters``), so no scrape, slow or stalled, reaches a send or a pull.

The listener binds when the actor is built, before it reports running: a broker that says it is
ready serves its metrics (``mqstore start`` refuses a port already taken). Should the port be taken
later, between a restart of this actor and its bind, the actor keeps running and tries again every
``REBIND_MS``: a restart loop here would make the supervisor give up on the whole broker. Killed,
the actor is restarted like any other; it keeps nothing.
"""

from __future__ import annotations

import json
import logging
import select
import threading
from typing import Any

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.metrics.collect import Collector, Snapshot
from mqstore.actors.metrics.exposition import Exposition
from mqstore.actors.metrics.listener import MetricsServer, Page, Pages
from mqstore.actors.metrics.overview import with_overview
from mqstore.actors.runtime import Runtime

log = logging.getLogger("mqstore")

IDLE_COLLECT_MS = 5_000  # the cadence while nothing moved and nobody read a page since the last collection
REBIND_MS = 1_000  # how often a listener that could not bind tries again


class RenderedPages(Pages):
    """The listener's pages, ``/metrics`` and ``/api/status`` rendered from the newest collection
    handed over (``offer``) when one of them is read, once per collection: rendering 2,000 topics
    takes a quarter of a second, and an idle broker nobody reads was doing it every few seconds."""

    RENDERED = frozenset({"/metrics", "/api/status"})

    def __init__(self) -> None:
        super().__init__()
        self.exposition = Exposition()
        self.renders = 0
        self._offered: tuple[int, Snapshot | None] = (0, None)  # one attribute: swapped whole between threads
        self._rendered = 0  # the number of the collection rendered
        self._lock = threading.Lock()  # one render at a time, whichever listener thread reads

    def offer(self, snapshot: Snapshot) -> None:
        self._offered = (self._offered[0] + 1, snapshot)

    def get(self, path: str) -> Page | None:
        if path.split("?", 1)[0] in self.RENDERED and self._offered[0] != self._rendered:
            with self._lock:
                number, snapshot = self._offered
                if number != self._rendered and snapshot is not None:
                    self._rendered = number
                    self.renders += 1
                    try:
                        status_json = json.dumps(with_overview(snapshot), default=str).encode()
                        self.update(self.exposition.render(snapshot), status_json)
                    except Exception:  # a bug here must not take the listener down: the last pages stay
                        log.exception("rendering the metrics failed; serving the last ones")
        return super().get(path)


class MetricsActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config.metrics
        self.interval_ms = cfg.collect_interval_ms
        self.address = (cfg.host, cfg.port)
        self.limits: dict[str, Any] = {"request_timeout_s": cfg.request_timeout_ms / 1000,
                                       "max_connections": cfg.max_connections,
                                       "allowed_hosts": frozenset(h.strip() for h in cfg.allowed_hosts.split(",")
                                                                  if h.strip())}
        self.pages = RenderedPages()
        self.collector = Collector(runtime.config, runtime.ctx)
        self.server: MetricsServer | None = None
        self._listen()
        log.info("metrics at %smetrics, the dashboard at %s", cfg.url, cfg.url)

    def _listen(self) -> None:
        """Bind and serve from a thread of its own; a port taken is logged and tried again later."""
        try:
            self.server = MetricsServer(self.address, self.pages, **self.limits)
        except OSError as exc:
            log.error("cannot listen on %s:%d (%s); trying again", *self.address, exc)
            return
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2}, name="mq-metrics-http",
                         daemon=True).start()

    def collect(self) -> None:
        """One collection handed to the pages; a fault in it is logged and the last pages stay served (a
        bug here must not make the supervisor give up on the broker by restarting this actor in a loop)."""
        try:
            self.pages.offer(self.collector.collect())
        except Exception:
            log.exception("metrics collection failed; serving the last one")

    def run(self) -> None:
        next_collect = next_bind = 0
        served = -1
        try:
            while not self.rt.stopping:
                now = monotonic_ms()
                if self.server is None and now >= next_bind:
                    next_bind = now + REBIND_MS
                    self._listen()
                if now >= next_collect:
                    self.collect()
                    watched, served = self.pages.served != served, self.pages.served
                    idle = not self.collector.moved and not watched
                    next_collect = monotonic_ms() + max(self.interval_ms, IDLE_COLLECT_MS if idle else 0)
                    self.rt.report("running", listening=self.server is not None, served=self.pages.served,
                                   collect_errors=self.collector.errors_total,
                                   asked=self.collector.asked)
                due = next_collect if self.server is not None else min(next_collect, next_bind)
                # asleep until the next collection; a stop makes ``stop_fd`` readable and ends the wait
                select.select([self.rt.stop_fd], [], [], self.rt.wait_ms(max(due - monotonic_ms(), 0)) / 1000)
                self.rt.send_held()
        finally:
            if self.server is not None:
                self.server.shutdown()
                self.server.server_close()
            self.collector.close()
