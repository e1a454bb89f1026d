"""The metrics pages are rendered when read, once per collection: collections nobody reads cost no
render (at 2,000 topics a render took a quarter of a second, every few seconds, on an idle broker);
a read renders the newest collection, and a second read of the same collection renders nothing."""

from __future__ import annotations

import json
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from mqstore.actors.metrics.actor import RenderedPages
from tests.actors.metrics.test_exposition import _snapshot


def _written(page: Any) -> float:
    families = text_string_to_metric_families(page.body.decode())
    return next(s.value for f in families for s in f.samples if s.name == "mqstore_commitlog_written_offset")


def _collection(written: int) -> dict[str, Any]:
    snapshot = {**_snapshot(), "time_ms": 1_700_000_000_000}
    snapshot["offsets"]["written"] = written
    return snapshot


def test_collections_nobody_reads_are_not_rendered() -> None:
    pages = RenderedPages()
    for written in (100, 200, 300):
        pages.offer(_collection(written))
    assert pages.renders == 0
    assert _written(pages.get("/metrics")) == 300  # the newest collection
    assert json.loads(pages.get("/api/status?x=1").body)["offsets"]["written"] == 300  # type: ignore[union-attr]
    assert pages.renders == 1  # both pages from one render
    pages.offer(_collection(400))
    assert _written(pages.get("/metrics")) == 400 and pages.renders == 2
    assert pages.get("/") is not None and pages.renders == 2  # the dashboard's files are no render


def test_a_render_that_fails_keeps_the_last_pages() -> None:
    pages = RenderedPages()
    pages.offer(_collection(100))
    assert _written(pages.get("/metrics")) == 100
    pages.offer({"status": {}})  # no topics, offsets ...: the exposition fails on it
    assert _written(pages.get("/metrics")) == 100
