"""Where every socket of one broker lives.

By default every endpoint is an ``ipc://`` socket in a private run directory (mode 0700) derived from
the store's path, so a client that knows the store finds the broker without any other setup. ZeroMQ
over TCP is opt-in (``tcp_host`` and ``tcp_base_port``): each data endpoint then gets its own port,
while the supervisor's control and event sockets stay in the private run directory. ``curve`` holds
the CURVE keys the TCP sockets use (``mqstore.ipc.transport.curve``): a client's, or, in the broker, the broker's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.errors import MqstoreError
from mqstore.ipc.transport.curve import CurveKeys

# role -> offset from the TCP base port; readers take READER_PORT_OFFSET + i
_ROLES = ("ingress", "dispatch", "written", "flushed", "arrived", "indexed", "control", "events", "transactions",
          "replicated")
READER_PORT_OFFSET = len(_ROLES)
LOCAL_ONLY = ("control", "events")  # administration stays on this machine, in the private run dir
# the notices the broker's actors publish to each other: on TCP only the broker's own key may connect
# (``mqstore.ipc.transport.curve.OWN_ZAP_DOMAIN``); clients reach ingress, the readers and transactions
INTERNAL = ("dispatch", "written", "flushed", "arrived", "indexed", "replicated")
MAX_IPC_PATH = 100  # sun_path holds 107 bytes; keep a margin


class EndpointError(MqstoreError, ValueError):
    """The run directory is unusable (not private, path too long)."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    run_dir: Path
    reader_count: int
    tcp_host: str | None = None
    tcp_base_port: int = 0
    curve: CurveKeys | None = None

    @classmethod
    def for_store(cls, store_dir: Path | str, reader_count: int = 1, *, run_dir: Path | str | None = None,
                  tcp_host: str | None = None, tcp_base_port: int = 0, curve: CurveKeys | None = None) -> Endpoints:
        return cls(Path(run_dir) if run_dir else default_run_dir(store_dir), reader_count, tcp_host, tcp_base_port,
                   curve)

    @property
    def uses_tcp(self) -> bool:
        return bool(self.tcp_host)

    def _address(self, role: str, port_offset: int) -> str:
        if self.tcp_host and role not in LOCAL_ONLY:
            return f"tcp://{self.tcp_host}:{self.tcp_base_port + port_offset}"
        return f"ipc://{self.run_dir / (role + '.sock')}"

    def role(self, role: str) -> str:
        return self._address(role, _ROLES.index(role))

    @property
    def ingress(self) -> str:
        return self.role("ingress")

    @property
    def own_ingress(self) -> str:
        """The writer's second ingress, for the broker's own actors only (the scheduler, the timer, the
        transactions): always an ``ipc://`` socket in the private run directory, never on TCP, so only
        this user's processes reach it. Sends there may name the system topics a client may not."""
        return f"ipc://{self.run_dir / 'own-ingress.sock'}"

    @property
    def dispatch(self) -> str:
        return self.role("dispatch")

    @property
    def written(self) -> str:
        return self.role("written")

    @property
    def flushed(self) -> str:
        return self.role("flushed")

    @property
    def arrived(self) -> str:
        return self.role("arrived")

    @property
    def indexed(self) -> str:
        return self.role("indexed")

    @property
    def replicated(self) -> str:
        """A master's HA actor tells the writer how far enough copies hold the log (``Replicated``)."""
        return self.role("replicated")

    @property
    def control(self) -> str:
        return self.role("control")

    @property
    def events(self) -> str:
        return self.role("events")

    @property
    def transactions(self) -> str:
        return self.role("transactions")

    @property
    def internal(self) -> frozenset[str]:
        """The addresses of the internal streams (``INTERNAL``)."""
        return frozenset(self.role(role) for role in INTERNAL)

    def reader(self, index: int) -> str:
        return self._address(f"reader-{index}", READER_PORT_OFFSET + index)

    @property
    def readers(self) -> list[str]:
        return [self.reader(i) for i in range(self.reader_count)]

    def prepare(self, *, create: bool = True) -> None:
        """Make the run directory private to this user, or check that it is; the broker before it binds
        and every client before it trusts a socket there (``own_run_dir``). Without ``create`` only what
        exists is checked and nothing is made (a client asking whether a broker runs)."""
        own_run_dir(self.run_dir, create=create)
        longest = len(str(self.run_dir / "reader-99.sock"))
        if longest > MAX_IPC_PATH:
            raise EndpointError(f"run directory {self.run_dir} is too long for ipc socket paths")

    def remove_sockets(self, *, remove_dir: bool) -> None:
        """The broker, after a stop in which every actor exited: unlink its ``ipc://`` socket files (ZeroMQ
        leaves them behind on close), and, with ``remove_dir`` (a run directory private to this broker,
        the default one), the directory when nothing else is left in it."""
        for name in os.listdir(self.run_dir) if self.run_dir.is_dir() else ():
            role = name.removesuffix(".sock")
            if name == role or not (role in _ROLES or role == "own-ingress" or _is_reader(role)):
                continue
            path = self.run_dir / name
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink(missing_ok=True)
        if remove_dir:
            with contextlib.suppress(OSError):  # something else is in it (or it is gone): leave it
                self.run_dir.rmdir()

    def socket_exists(self, role: str) -> bool:
        """Whether ``role``'s ``ipc://`` socket file is there: a broker bound it and has not cleanly
        stopped (a broker that was killed leaves it behind, so it may also be stale). Touches nothing."""
        address = self.role(role)
        return not address.startswith("ipc://") or Path(address.removeprefix("ipc://")).exists()


def _is_reader(role: str) -> bool:
    prefix, _, number = role.partition("-")
    return prefix == "reader" and number.isdigit()


def own_run_dir(run_dir: Path, *, create: bool = True) -> None:
    """Each directory this user's run directory depends on: ``mqstore-{uid}`` and the store's one below
    it (the default layout: the shared temp directory's ``mqstore-{uid}`` is where another local user
    would plant a directory of their own, and its sockets), or the configured run directory alone.
    Each is created 0700 when missing, and otherwise must be a real directory (not a symlink), owned by
    this user, with no group or other bits. The walk holds each directory open and opens the next one
    inside it without following a symlink, so what is checked is what the sockets will be in; once
    checked, nobody else can rename or replace an entry of a 0700 directory (or of the sticky temp one).
    Without ``create``, the walk stops at the first directory missing, having made nothing."""
    uid = os.getuid()
    if run_dir.parent.name == f"mqstore-{uid}":
        top, names = run_dir.parent.parent, [run_dir.parent.name, run_dir.name]
    else:
        if not create and not run_dir.parent.is_dir():
            return
        run_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        top, names = run_dir.parent, [run_dir.name]
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)  # the system's (/tmp, $XDG_RUNTIME_DIR) or the configured one
    try:
        path = top
        for name in names:
            path = path / name
            if not create and not os.path.lexists(path):
                return
            try:
                os.mkdir(name, mode=0o700, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            try:
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:  # ELOOP: a symlink; ENOTDIR: a file
                raise EndpointError(f"run directory {path} is not a directory of its own (a symlink, or a file): "
                                    f"{exc.strerror}; remove it, or set XDG_RUNTIME_DIR or [ipc] run_dir") from None
            os.close(fd)
            fd = inner
            if made:
                os.fchmod(fd, 0o700)  # whatever the umask
            st = os.fstat(fd)
            if st.st_uid != uid or stat.S_IMODE(st.st_mode) & 0o077:
                raise EndpointError(f"run directory {path} is owned by uid {st.st_uid} with mode "
                                    f"{stat.S_IMODE(st.st_mode):o}: it must be this user's (uid {uid}) with mode "
                                    "0700, or another user could replace the broker's sockets; remove it, or set "
                                    "XDG_RUNTIME_DIR or [ipc] run_dir")
    finally:
        os.close(fd)


def default_run_dir(store_dir: Path | str) -> Path:
    """``$XDG_RUNTIME_DIR`` (or the temp dir) / ``mqstore-{uid}`` / a hash of the store's real path."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    digest = hashlib.sha256(str(Path(store_dir).resolve()).encode()).hexdigest()[:16]
    return base / f"mqstore-{os.getuid()}" / digest
