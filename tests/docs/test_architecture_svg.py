"""docs/concepts/architecture.svg is one self-contained picture of the broker: well-formed XML, every
actor kind the registry builds and every socket role the endpoints define named in it, and nothing
fetched from elsewhere (no external link, image, stylesheet or font)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from mqstore.actors.registry import ACTOR_KINDS
from mqstore.ipc.transport import endpoints

SVG = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "architecture.svg"
NS = "{http://www.w3.org/2000/svg}"


def _words() -> set[str]:
    root = ET.parse(SVG).getroot()
    assert root.tag == f"{NS}svg"
    text = " ".join(t for node in root.iter() for t in (node.text, node.tail) if t)
    return set(re.findall(r"[\w-]+", text))


def test_every_actor_kind_is_in_the_picture() -> None:
    assert set(ACTOR_KINDS) - _words() == set()


def test_every_socket_role_is_in_the_picture() -> None:
    roles = {*endpoints._ROLES, "own-ingress", "reader-i"}
    assert roles - _words() == set()


def test_nothing_is_fetched_from_elsewhere() -> None:
    root = ET.parse(SVG).getroot()
    for node in root.iter():
        for name, value in node.attrib.items():
            if name.endswith("href"):
                assert value.startswith("#"), (node.tag, value)
    raw = SVG.read_text()
    assert "@import" not in raw and "@font-face" not in raw
    assert re.findall(r"url\((?!#)", raw) == []
