"""Where every socket of one broker lives.

By default every endpoint is an ``ipc://`` socket in a private run directory (mode 0700) derived from
the store's path, so a client that knows the store finds the broker without any other setup. ZeroMQ
over TCP is opt-in (``tcp_host`` and ``tcp_base_port``): each data endpoint then gets its own port,
while the supervisor's control and event sockets stay in the private run directory. ``curve`` holds
the CURVE keys the TCP sockets use (``mqstore.ipc.transport.curve``): a client's, or, in the broker, the broker's own.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.errors import MqstoreError
from mqstore.ipc.transport.curve import CurveKeys

# role -> offset from the TCP base port; readers take READER_PORT_OFFSET + i
_ROLES = ("ingress", "dispatch", "written", "flushed", "arrived", "indexed", "control", "events", "transactions")
READER_PORT_OFFSET = len(_ROLES)
LOCAL_ONLY = ("control", "events")  # administration stays on this machine, in the private run dir
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
    def control(self) -> str:
        return self.role("control")

    @property
    def events(self) -> str:
        return self.role("events")

    @property
    def transactions(self) -> str:
        return self.role("transactions")

    def reader(self, index: int) -> str:
        return self._address(f"reader-{index}", READER_PORT_OFFSET + index)

    @property
    def readers(self) -> list[str]:
        return [self.reader(i) for i in range(self.reader_count)]

    def prepare(self) -> None:
        """Create the run directory private to this user (0700), or check an existing one is."""
        for directory in (self.run_dir.parent, self.run_dir):
            directory.mkdir(mode=0o700, exist_ok=True)
        st = self.run_dir.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise EndpointError(f"run directory {self.run_dir} must be owned by this user with mode 0700")
        longest = len(str(self.run_dir / "reader-99.sock"))
        if longest > MAX_IPC_PATH:
            raise EndpointError(f"run directory {self.run_dir} is too long for ipc socket paths")


def default_run_dir(store_dir: Path | str) -> Path:
    """``$XDG_RUNTIME_DIR`` (or the temp dir) / ``mqstore-{uid}`` / a hash of the store's real path."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    digest = hashlib.sha256(str(Path(store_dir).resolve()).encode()).hexdigest()[:16]
    return base / f"mqstore-{os.getuid()}" / digest
