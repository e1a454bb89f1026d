"""metrics: Prometheus metrics and the dashboard, served over HTTP from a process of its own.

Every ``[metrics] collect_interval_ms`` the loop asks the supervisor and the other actors over the
ops they already serve (``actors.metrics.collect``), renders the answers once as Prometheus text
(``actors.metrics.exposition``) and JSON, and hands both to the listener (``actors.metrics.listener``),
which serves them from a thread of its own. The other actors only count what they did in the stats
events they send anyway (``actors.meters``), so no scrape, slow or stalled, reaches a send or a pull.

The listener binds when the actor is built, before it reports running: a broker that says it is
ready serves its metrics. Killed, the actor is restarted like any other; it keeps nothing.
"""

from __future__ import annotations

import json
import logging
import threading

from actors.clock import monotonic_ms
from actors.metrics.collect import Collector
from actors.metrics.exposition import Exposition
from actors.metrics.listener import MetricsServer, Pages
from actors.runtime import Runtime

log = logging.getLogger("mqstore")

LOOP_MS = 100  # how soon a stop is noticed between collections


class MetricsActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config.metrics
        self.interval_ms = cfg.collect_interval_ms
        self.pages = Pages()
        self.server = MetricsServer((cfg.host, cfg.port), self.pages)
        self.collector = Collector(runtime.config, runtime.ctx)
        self.exposition = Exposition()
        self._wake = threading.Event()
        log.info("metrics at %smetrics, the dashboard at %s", cfg.url, cfg.url)

    def collect(self) -> None:
        """One collection rendered; a fault in it is logged and the last pages stay served (a bug here
        must not make the supervisor give up on the broker by restarting this actor in a loop)."""
        try:
            snapshot = self.collector.collect()
            self.pages.update(self.exposition.render(snapshot), json.dumps(snapshot).encode())
        except Exception:
            log.exception("metrics collection failed; serving the last one")

    def run(self) -> None:
        listener = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                    name="mq-metrics-http", daemon=True)
        listener.start()
        next_collect = 0
        try:
            while not self.rt.stopping:
                now = monotonic_ms()
                if now >= next_collect:
                    self.collect()
                    next_collect = monotonic_ms() + self.interval_ms
                    self.rt.report("running", served=self.pages.served, collect_errors=self.collector.errors_total)
                self._wake.wait(min(LOOP_MS, max(next_collect - monotonic_ms(), 0)) / 1000)
        finally:
            self.server.shutdown()
            self.server.server_close()
            self.collector.close()
