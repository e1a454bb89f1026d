"""The docs site builds with ``mkdocs build --strict`` (a broken link, a missing page or a page's
missing anchor fails it), and reads in a real headless Chromium with nothing fetched from another
host: the home page's navigation renders, and so does the configuration reference's generated table."""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def build(site_dir: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site_dir)], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    result = build(site_dir)
    assert result.returncode == 0, result.stderr
    return site_dir


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file() and (site / "reference" / "config" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is what catches a page that links nowhere."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: t\ndocs_dir: docs\ntheme:\n  name: mkdocs\n  highlightjs: false\n")
    result = build(tmp_path / "site", config)
    assert result.returncode != 0 and "missing.md" in result.stderr


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.mark.slow
def test_the_site_renders_offline_with_its_navigation_and_generated_tables(served: str, browser: Browser) -> None:
    requested: list[str] = []
    page = browser.new_page()
    page.on("request", lambda request: requested.append(request.url))
    try:
        page.goto(f"{served}/", wait_until="networkidle")
        nav = page.eval_on_selector_all(".navbar .nav-link, .navbar .dropdown-item",
                                        "links => links.map(a => a.textContent.trim())")
        assert {"Getting started", "Concepts", "Operations", "Reference", "Spark", "Performance",
                "Design notes"} <= set(nav)
        assert {"Configuration", "CLI", "Metrics", "Exit codes", "Protocols"} <= set(nav)

        page.goto(f"{served}/reference/config/", wait_until="networkidle")
        assert page.inner_text("h1") == "Configuration reference"
        header = page.eval_on_selector_all("table thead th", "cells => cells.map(c => c.textContent.trim())")
        assert header[:3] == ["Key", "Type", "Default"]
        rows = page.eval_on_selector_all("table tbody tr", "rows => rows.map(r => r.cells[0].textContent)")
        assert "readers" in rows and "in_sync_replicas" in rows and len(rows) > 100
        shown = page.eval_on_selector("table", "t => t.getBoundingClientRect().height")
        assert shown > 0
    finally:
        page.close()
    assert requested, "the browser recorded no request"
    elsewhere = [url for url in requested if urlparse(url).hostname not in ("127.0.0.1", None)
                 and not url.startswith(("data:", "about:"))]
    assert elsewhere == [], elsewhere
