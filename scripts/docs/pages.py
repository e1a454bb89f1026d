"""The generated reference pages (``docs/reference/*.md`` written from the code), and where they go."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mqstore.scripts.docs import cli_page, config_page, metrics_page, protocols_page

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
GENERATORS: dict[str, Callable[[], str]] = {
    config_page.PAGE: config_page.render, cli_page.PAGE: cli_page.render,
    metrics_page.PAGE: metrics_page.render, protocols_page.PAGE: protocols_page.render,
}


def rendered() -> dict[str, str]:
    """Each generated page's path under the docs directory, and its text as the code makes it now."""
    return {page: render().rstrip("\n") + "\n" for page, render in GENERATORS.items()}


def write_pages(docs_dir: Path) -> list[str]:
    pages = rendered()
    for page, text in pages.items():
        path = docs_dir / page
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(pages)


def stale_pages(docs_dir: Path) -> list[str]:
    """The generated pages missing from ``docs_dir`` or differing from what the code makes now."""
    return [page for page, text in rendered().items()
            if not (docs_dir / page).is_file() or (docs_dir / page).read_text() != text]
