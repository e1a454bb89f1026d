"""The operations, Spark and performance pages show only what exists: every ``mqstore ...`` line of
their shell blocks parses with the ``mqstore`` parser, and every TOML block loads with
``load_config`` (a ``roles.toml`` block with the roles reader, with the keys and ACL file the page's
other blocks name written beside it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.actors.config import ConfigError, load_config
from mqstore.ipc.transport.curve import generate_keys
from mqstore.ipc.transport.roles import read_roles
from tests.docs.pages import blocks, command_lines, load_toml, parse_command, read

PAGES = [f"operations/{name}.md" for name in
         ("configuration", "admin", "retention", "security", "upgrading", "backups", "troubleshooting")]
PAGES += ["spark.md", "performance/index.md", "performance/notes.md"]
COMMANDS = [(page, line) for page in PAGES for line in command_lines(read(page))]
TOMLS = [(page, body) for page in PAGES for body in blocks(read(page), "toml")
         if not body.startswith("# roles.toml")]
ROLES_BLOCK = "# roles.toml"


def test_the_pages_have_what_the_checks_read() -> None:
    pages_with_commands = {page for page, _ in COMMANDS}
    assert {"operations/admin.md", "operations/backups.md", "spark.md"} <= pages_with_commands
    assert len(COMMANDS) >= 30 and len(TOMLS) >= 4


@pytest.mark.parametrize(("page", "line"), COMMANDS, ids=[f"{p}:{line[:60]}" for p, line in COMMANDS])
def test_each_command_parses(page: str, line: str) -> None:
    parse_command(line)


@pytest.mark.parametrize(("page", "body"), TOMLS, ids=[f"{p}#{i}" for i, (p, _) in enumerate(TOMLS)])
def test_each_config_block_loads(tmp_path: Path, page: str, body: str) -> None:
    text = read(page)
    if "curve_secret_key" in body:  # the keys `mqstore keys` makes, and the page's roles beside them
        generate_keys(tmp_path / "keys", ["app", "ops"])
        for roles in blocks(text, "toml"):
            if roles.startswith(ROLES_BLOCK):
                (tmp_path / "keys" / "roles.toml").write_text(roles)
    if "acl_file" in body:  # the page's plain_acl.yml, where the block names it
        (acl,) = blocks(text, "yaml")
        (tmp_path / "plain_acl.yml").write_text(acl)
    load_toml(body, tmp_path)


def test_the_roles_block_reads(tmp_path: Path) -> None:
    (roles,) = [b for b in blocks(read("operations/security.md"), "toml") if b.startswith(ROLES_BLOCK)]
    generate_keys(tmp_path / "keys", ["app", "ops"])
    (tmp_path / "keys" / "roles.toml").write_text(roles)
    table = read_roles(tmp_path / "keys" / "clients")
    assert table.roles is not None and len(table.roles) == 2


def test_the_front_off_loopback_needs_the_pages_acl(tmp_path: Path) -> None:
    """The security page's remoting block is the one that needs its ACL file: without it, refused."""
    (front,) = [b for b in blocks(read("operations/security.md"), "toml") if "acl_file" in b]
    config_path = tmp_path / "broker.toml"
    config_path.write_text(front + "enabled = true\n")
    with pytest.raises(ConfigError, match="ACL file"):
        load_config(tmp_path / "store", config_path)
