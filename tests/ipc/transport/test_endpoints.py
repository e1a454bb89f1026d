"""The private run directory (mqstore.ipc.transport.endpoints.own_run_dir): ``mqstore-{uid}`` and the
store's directory below it made 0700 when missing, and refused, by the broker's ``prepare`` and by every
client before it trusts a socket there, when either is open to others, a symlink, or another user's.

Another user's directory is made by chown, so that case needs root; the others run as anyone."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.ipc.client.api import Admin, Producer
from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.endpoints import EndpointError, Endpoints

OTHER_UID = 54_321


@pytest.fixture
def base(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for the shared temp directory, short enough for socket paths."""
    made = Path(tempfile.mkdtemp(prefix="mq"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(made))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _refused_everywhere(store: Path, named: str) -> None:
    """The broker's prepare and each client refuse, naming why."""
    with pytest.raises(EndpointError, match=named):
        Endpoints.for_store(store).prepare()
    with pytest.raises(EndpointError, match=named):
        Producer(store)
    with pytest.raises(EndpointError, match=named):
        Admin(store)
    with pytest.raises(EndpointError, match=named):
        control_request(store, "status", timeout_ms=10)


def test_missing_directories_are_made_private(base: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        ep = Endpoints.for_store(tmp_path / "store")
        ep.prepare()
    finally:
        os.umask(old)
    assert ep.run_dir.parent == base / f"mqstore-{os.getuid()}"
    assert (_mode(ep.run_dir.parent), _mode(ep.run_dir)) == (0o700, 0o700)
    ep.prepare()  # present and private: accepted


@pytest.mark.parametrize("level", ["root", "leaf"])
def test_a_directory_open_to_others_is_refused(base: Path, tmp_path: Path, level: str) -> None:
    store = tmp_path / "store"
    ep = Endpoints.for_store(store)
    ep.prepare()
    os.chmod(ep.run_dir.parent if level == "root" else ep.run_dir, 0o777)
    _refused_everywhere(store, "mode 777")


@pytest.mark.parametrize("level", ["root", "leaf"])
def test_a_symlink_is_refused_even_to_a_private_directory(base: Path, tmp_path: Path, level: str) -> None:
    store = tmp_path / "store"
    ep = Endpoints.for_store(store)
    target = base / "planted"  # someone's directory, laid out as the broker would
    (target / ep.run_dir.name).mkdir(mode=0o700, parents=True)
    os.chmod(target, 0o700)
    if level == "root":
        ep.run_dir.parent.symlink_to(target)
    else:
        ep.run_dir.parent.mkdir(mode=0o700)
        ep.run_dir.symlink_to(target / ep.run_dir.name)
    _refused_everywhere(store, "symlink")
    assert not any((target / ep.run_dir.name).iterdir())  # nothing was made through it


def test_a_file_in_its_place_is_refused(base: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    (base / f"mqstore-{os.getuid()}").write_bytes(b"")
    _refused_everywhere(store, "not a directory of its own")


@pytest.mark.skipif(os.getuid() != 0, reason="making another user's directory needs root")
def test_another_users_directory_is_refused(base: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ep = Endpoints.for_store(store)
    ep.prepare()
    os.chown(ep.run_dir.parent, OTHER_UID, OTHER_UID)
    _refused_everywhere(store, f"owned by uid {OTHER_UID}")


def test_a_configured_run_dir_is_checked_alone(base: Path) -> None:
    configured = base / "conf" / "run"
    ep = Endpoints.for_store(base / "store", run_dir=configured)
    ep.prepare()
    assert _mode(configured) == 0o700
    os.chmod(configured, 0o750)
    with pytest.raises(EndpointError, match="mode 750"):
        ep.prepare()
