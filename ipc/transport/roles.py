"""What each CURVE client key may do: ``roles.toml`` beside the ``clients/`` key directory::

    # NAME is a key's name in clients/ (clients/NAME.key); roles: produce, consume, admin
    app = ["produce", "consume"]
    ops = ["admin"]

Without the file every key let in may make every request (``mqstore.ipc.transport.curve`` decides
who gets in at all). With it, a key has the roles listed and no others, and a key not listed has
none; the broker's own key always has every role. The role an op needs is ``OP_ROLES`` (beside the
``Op`` enum); a request whose key lacks it is refused with the reason ``refusal`` gives.

Roles apply to the CURVE sockets only, that is ZeroMQ over TCP: an ``ipc://`` socket lives in the
run directory only this user can open, and every request there is the broker's own user's.

The file is polled: ``poll`` looks at its mtime, size and inode at most once every
``RELOAD_CHECK_MS`` and reads it again when they changed (a file that appeared, changed or went
away). A file that no longer parses keeps the roles read before, and says so in the log; at start
the broker refuses it (``[ipc]`` validation).
"""

from __future__ import annotations

import logging
import os
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.errors import MqstoreError
from mqstore.ipc.transport.curve import PUBLIC_SUFFIX, CurveError, read_public
from mqstore.ipc.wire.requests.base import Request, Role

log = logging.getLogger("mqstore")

ROLES_FILE = "roles.toml"
RELOAD_CHECK_MS = 1000
ALL_ROLES = frozenset(Role)


class RolesError(MqstoreError, ValueError):
    """The roles file does not parse, names a role that is none, or a key that is not in clients/."""


@dataclass(frozen=True, slots=True)
class RoleTable:
    """One reading of the roles file: each listed key's roles (by its Z85 public key), and every
    key's name for the refusals; ``roles`` None: no file, every role to every key."""

    roles: dict[str, frozenset[Role]] | None
    names: dict[str, str]


def roles_path(clients_dir: Path | str) -> Path:
    return Path(clients_dir).parent / ROLES_FILE


def read_roles(clients_dir: Path | str) -> RoleTable:
    """The roles file beside ``clients_dir`` (``RolesError`` when it is malformed)."""
    directory = Path(clients_dir)
    names: dict[str, str] = {}
    try:
        for path in sorted(directory.glob(f"*{PUBLIC_SUFFIX}")):
            names[read_public(path).decode()] = path.name[:-len(PUBLIC_SUFFIX)]
    except CurveError as exc:
        raise RolesError(str(exc)) from None
    path = roles_path(directory)
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        return RoleTable(None, names)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RolesError(f"cannot read {path}: {exc}") from None
    by_name = {name: key for key, name in names.items()}
    roles: dict[str, frozenset[Role]] = {}
    for name, listed in raw.items():
        if name not in by_name:
            raise RolesError(f"{path}: {name!r} is not a client key in {directory} (no {name}{PUBLIC_SUFFIX})")
        if not isinstance(listed, list) or not all(isinstance(r, str) and r in ALL_ROLES for r in listed):
            raise RolesError(f"{path}: {name} = {listed!r}: a list of roles among "
                             f"{', '.join(repr(r.value) for r in Role)}")
        roles[by_name[name]] = frozenset(Role(r) for r in listed)
    return RoleTable(roles, names)


class KeyRoles:
    """The roles in force on one process's CURVE sockets, read again when the file changes."""

    def __init__(self, clients_dir: Path | str, server_public: bytes) -> None:
        self.clients_dir = Path(clients_dir)
        self.path = roles_path(clients_dir)
        self.server_public = server_public.decode()
        self._stamp = self._file_stamp()
        self.table = read_roles(clients_dir)
        self._next_check = time.monotonic() + RELOAD_CHECK_MS / 1000

    @property
    def active(self) -> bool:
        """Whether a roles file is in force: the sockets' requests must then say whose key sent them."""
        return self.table.roles is not None

    def poll(self) -> bool:
        """Read the file again if it changed since the last look (at most one look a RELOAD_CHECK_MS);
        whether roles are in force (``active``)."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + RELOAD_CHECK_MS / 1000
            stamp = self._file_stamp()
            if stamp != self._stamp:
                self._stamp = stamp
                self._reload()
        return self.active

    def _reload(self) -> None:
        try:
            self.table = read_roles(self.clients_dir)
        except RolesError as exc:
            log.error("CURVE roles not reloaded, the roles read before stay in force: %s", exc)
            return
        log.info("CURVE roles %s", f"reloaded from {self.path}" if self.active else "off: no roles file")

    def refusal(self, user_id: str | None, request: Request) -> str | None:
        """Why the key ``user_id`` (the ZAP handler's User-Id: the key in Z85; None when the socket gave
        none) may not make ``request``; None when it may."""
        roles = self.table.roles
        if roles is None or user_id == self.server_public:
            return None
        needed = request.role
        if needed is None:
            return None
        held = roles.get(user_id or "", frozenset())
        if needed in held:
            return None
        name = self.table.names.get(user_id or "")
        who = f"client key {name!r}" if name is not None else "this client key"
        has = ", ".join(sorted(r.value for r in held)) if held else "no roles"
        return f"{who} has {has} in {self.path.name}; {request.OP.value!r} needs the {needed.value!r} role"

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino
