"""``python -m mqstore.scripts.docs``: write the generated reference pages under ``docs/``
(``--check``: write nothing, exit 1 naming each page that differs from what would be written)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mqstore.scripts.docs.pages import DOCS_DIR, stale_pages, write_pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.docs", description=__doc__)
    parser.add_argument("--docs", type=Path, default=DOCS_DIR, help="the docs directory (the checkout's docs/)")
    parser.add_argument("--check", action="store_true", help="only say which pages are stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(args.docs)
        for page in stale:
            print(f"stale: {args.docs / page}", file=sys.stderr)
        return 1 if stale else 0
    for page in write_pages(args.docs):
        print(args.docs / page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
