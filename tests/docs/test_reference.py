"""The generated reference pages match the code: each is what ``python -m mqstore.scripts.docs`` writes
now, covers every configuration key, command and remoting code, and a key added to the schema shows
up in a freshly rendered page (so the staleness check would catch a page not regenerated)."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, fields, is_dataclass, make_dataclass
from pathlib import Path

import pytest

import mqstore.ipc.remoting.codec as rm
from mqstore.actors.config import SECTIONS
from mqstore.actors.remoting import metadata
from mqstore.scripts.cli.mqstore import build_parser
from mqstore.scripts.docs import config_page, protocols_page
from mqstore.scripts.docs.fields import field_comments
from mqstore.scripts.docs.pages import DOCS_DIR, rendered, stale_pages
from mqstore.scripts.docs.rocketmq_names import ROCKETMQ_NAMES, bare_name

REFERENCE_NOTES = Path("/work/shared/reference")
PAGES = rendered()


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_committed_page_is_what_the_generator_writes(page: str) -> None:
    committed = DOCS_DIR / page
    assert committed.is_file() and committed.read_text() == PAGES[page], (
        f"docs/{page} is stale: run `python -m mqstore.scripts.docs` and commit the result")


def _keys(cls: type, path: str) -> list[str]:
    found = []
    for f in fields(cls):
        inner = f.type if isinstance(f.type, type) else None
        if inner is not None and is_dataclass(inner):
            found += _keys(inner, f"{path}.{f.name}")
        else:
            found.append(f"{path}.{f.name}")
    return found


def test_every_section_and_key_is_on_the_config_page() -> None:
    text = PAGES[config_page.PAGE]
    for section in SECTIONS:
        assert f"## `[{section}]`" in text
    assert "### `[store.geometry]`" in text and "### `[store.store_host]`" in text
    rows = re.findall(r"^\| `(\w+)` \| (\w+)", text, re.M)
    names = {f.name for cls in SECTIONS.values() for f in fields(cls)}
    assert names - {"geometry", "store_host"} <= {name for name, _ in rows}


def test_the_bounds_column_says_what_validation_refuses() -> None:
    text = PAGES[config_page.PAGE]
    assert "| `readers` | integer | `1` | must be between 1 and 64 |" in text
    assert "| `in_sync_replicas` | integer | `2` | must be between 1 and 16 |" in text
    assert "| `timer_precision_ms` | integer | `1000` | must be 100, 200, 500 or 1000 |" in text


def test_a_key_added_to_a_section_appears_on_a_fresh_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the staleness test relies on: the page is rendered from the schema, not kept by hand."""
    grown = make_dataclass("SupervisorConfig", [(f.name, f.type, f) for f in fields(SECTIONS["supervisor"])]
                           + [("added_for_the_test_ms", int, 7)], frozen=True)
    monkeypatch.setitem(SECTIONS, "supervisor", grown)
    monkeypatch.setattr(config_page, "field_comments", lambda cls: {f.name: "" for f in fields(cls)})
    assert "| `added_for_the_test_ms` | integer | `7` |" in config_page.render()


def test_comments_beside_a_field_become_its_description() -> None:
    @dataclass
    class Section:
        # above it
        a: int = 1          # beside it
                            # and below
        b: int = 2

    assert field_comments(Section) == {"a": "above it — beside it and below", "b": ""}


def test_every_command_and_subcommand_is_on_the_cli_page() -> None:
    text = PAGES["reference/cli.md"]

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    assert f"`{' '.join([*words, name])}`" in text
                    walk(sub, [*words, name])
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                assert f"`{action.option_strings[0]}" in text

    walk(build_parser(), ["mqstore"])


def test_each_remoting_code_is_named_as_the_code_names_it() -> None:
    served = protocols_page.served_codes()
    assert served <= set(protocols_page.REMOTING_CODES)
    for code, (name, _) in protocols_page.REMOTING_CODES.items():
        assert getattr(metadata, name, getattr(rm, name, None)) == code, name


@pytest.mark.skipif(not REFERENCE_NOTES.is_dir(), reason="the RocketMQ reference notes are not on this machine")
def test_each_rocketmq_name_is_rocketmq_s() -> None:
    """In the reference notes, or in the comment beside the key in the source."""
    notes = "\n".join(path.read_text() for path in REFERENCE_NOTES.glob("*.md"))
    comments = {}
    for section, cls in SECTIONS.items():
        comments |= {f"{section}.{key}": text for key, text in field_comments(cls).items()}
    for key, entry in ROCKETMQ_NAMES.items():
        name = bare_name(entry)
        assert re.search(rf"\b{name}\b", notes) or name in comments.get(key, ""), (key, name)


def test_the_check_mode_names_a_stale_page(tmp_path: Path) -> None:
    assert set(stale_pages(tmp_path)) == set(PAGES)
    for page, text in PAGES.items():
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(text)
    assert stale_pages(tmp_path) == []
