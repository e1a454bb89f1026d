"""RocketMQ's ``plain_acl.yml`` (ACL 1.0's accounts file), read into ``AclRules``.

    globalWhiteRemoteAddresses: [pattern, ...]   a request from a matching address is let in unchecked
    accounts:
      - accessKey: RocketMQ                      longer than 6 characters, unique
        secretKey: 12345678                      longer than 6 characters
        whiteRemoteAddress: 192.168.1.*          this account's requests from there skip the signature
        admin: false                             an admin may make every request, on every resource
        defaultTopicPerm: DENY                   for a topic no entry names (missing: DENY)
        defaultGroupPerm: SUB                    for a group no entry names (missing: DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=SUB]                 plain group names
    dataVersion: [...]                           written by RocketMQ's admin API; ignored

Every value is read as a string (YAML's BaseLoader), as Java's SnakeYAML binds them into String
fields: ``secretKey: 0123`` is "0123", not 83. A permission is ``DENY``, ``PUB``, ``SUB``, ``PUB|SUB``
or ``SUB|PUB`` (``Permission.parsePermFromString``); anything else is DENY. An entry for a resource
overrides the default whatever it says; PUB does not imply SUB. Address patterns are
``mqstore.actors.remoting.acl_address``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mqstore.actors.remoting.acl_address import AddressPattern, AddressPatternError, parse_pattern
from mqstore.engine.errors import MqstoreError

DENY = 1
ANY = 2
PUB = 4
SUB = 8
PERMS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
MIN_KEY_CHARS = 7  # AclUtils: accessKey and secretKey must be longer than 6
ACCOUNT_KEYS = frozenset({"accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
                          "defaultGroupPerm", "topicPerms", "groupPerms"})
TOP_KEYS = frozenset({"globalWhiteRemoteAddresses", "accounts", "dataVersion"})
TRUE, FALSE = ("true", "yes", "on"), ("false", "no", "off", "")


class AclFileError(MqstoreError, ValueError):
    """An ACL file that cannot be read, or that RocketMQ would not load."""


def parse_perm(text: str | None) -> int:
    return PERMS.get((text or "").strip(), DENY)


def perm_name(perm: int) -> str:
    return next((name for name, bits in PERMS.items() if bits == perm), "DENY")


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str
    white_address: AddressPattern | None = None
    admin: bool = False
    default_topic_perm: int | None = None   # None: the file gives none (DENY, "no matched policies")
    default_group_perm: int | None = None
    topic_perms: Mapping[str, int] = field(default_factory=dict)
    group_perms: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AclRules:
    global_white: tuple[AddressPattern, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)


def read_acl(path: Path | str) -> AclRules:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AclFileError(f"cannot read ACL file {path}: {exc}") from None
    try:
        return parse_acl(text)
    except AclFileError as exc:
        raise AclFileError(f"ACL file {path}: {exc}") from None


def parse_acl(text: str) -> AclRules:
    try:
        raw = yaml.load(text, Loader=yaml.BaseLoader)  # strings, lists and maps only: nothing is constructed
    except yaml.YAMLError as exc:
        raise AclFileError(f"not YAML: {exc}") from None
    if raw is None or raw == "":
        raw = {}
    top = _mapping(raw, "the file")
    unknown = set(top) - TOP_KEYS
    if unknown:
        raise AclFileError(f"unknown keys {sorted(unknown)} (known: {sorted(TOP_KEYS)})")
    try:
        white = tuple(p for p in map(parse_pattern, _strings(top.get("globalWhiteRemoteAddresses"),
                                                             "globalWhiteRemoteAddresses")) if p is not None)
        accounts: dict[str, Account] = {}
        for i, item in enumerate(_list(top.get("accounts"), "accounts")):
            account = _account(_mapping(item, f"accounts[{i}]"), f"accounts[{i}]")
            if account.access_key in accounts:
                raise AclFileError(f"accounts[{i}]: accessKey {account.access_key!r} is given twice")
            accounts[account.access_key] = account
    except AddressPatternError as exc:
        raise AclFileError(str(exc)) from None
    return AclRules(white, accounts)


def _account(raw: dict[str, Any], where: str) -> Account:
    unknown = set(raw) - ACCOUNT_KEYS
    if unknown:
        raise AclFileError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(ACCOUNT_KEYS)})")
    access_key, secret_key = _string(raw.get("accessKey"), where), _string(raw.get("secretKey"), where)
    if len(access_key) < MIN_KEY_CHARS or len(secret_key) < MIN_KEY_CHARS:
        raise AclFileError(f"{where}: accessKey and secretKey must each be longer than {MIN_KEY_CHARS - 1} "
                           "characters")
    admin = _string(raw.get("admin"), where).strip().lower()
    if admin not in TRUE + FALSE:
        raise AclFileError(f"{where}: admin must be true or false, got {admin!r}")
    defaults = {key: None if raw.get(key) in (None, "") else parse_perm(_string(raw[key], where))
                for key in ("defaultTopicPerm", "defaultGroupPerm")}
    return Account(access_key, secret_key, parse_pattern(_string(raw.get("whiteRemoteAddress"), where)),
                   admin in TRUE, defaults["defaultTopicPerm"], defaults["defaultGroupPerm"],
                   _perms(raw.get("topicPerms"), f"{where}.topicPerms"),
                   _perms(raw.get("groupPerms"), f"{where}.groupPerms"))


def _perms(raw: Any, where: str) -> dict[str, int]:
    perms: dict[str, int] = {}
    for entry in _strings(raw, where):
        name, equals, perm = entry.partition("=")
        if not equals or not name.strip():
            raise AclFileError(f"{where}: {entry!r} is not name=PERM")
        perms[name.strip()] = parse_perm(perm)
    return perms


def _mapping(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise AclFileError(f"{where} must be a mapping, got {type(raw).__name__}")
    return raw


def _list(raw: Any, where: str) -> list[Any]:
    if raw in (None, ""):
        return []
    if not isinstance(raw, list):
        raise AclFileError(f"{where} must be a list, got {type(raw).__name__}")
    return raw


def _strings(raw: Any, where: str) -> list[str]:
    return [_string(item, where) for item in _list(raw, where)]


def _string(raw: Any, where: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise AclFileError(f"{where}: expected a value, got a {type(raw).__name__}")
    return raw
