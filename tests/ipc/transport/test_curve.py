"""Key files as ``mqstore keys`` writes them: durable before they are in place, private, and nothing
left beside them."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.transport.curve import CurveKeys, generate_keys

KEY_FILES = ["client.key_secret", "clients/client.key", "server.key", "server.key_secret"]


def files_under(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def test_key_files_are_fsynced_before_the_rename_that_puts_them_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: key files were renamed into place with no fsync before, so a crash could leave a
    key file whose rename survived but whose bytes did not (an empty file)."""
    events: list[tuple[str, ...]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.path.realpath(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("replace", os.path.realpath(src), os.path.realpath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    written = generate_keys(tmp_path / "keys")
    assert sorted(str(p.relative_to(tmp_path / "keys")) for p in written) == KEY_FILES
    for path in written:
        key = os.path.realpath(path)
        renamed = events.index(("replace", key + ".tmp", key))
        assert ("fsync", key + ".tmp") in events[:renamed], f"{path} renamed before its bytes were fsynced"
        assert ("fsync", os.path.dirname(key)) in events[renamed + 1:], f"{path}'s rename not made durable"


def test_key_files_are_0600_whatever_the_umask_or_a_leftover_tmp(tmp_path: Path) -> None:
    """A crash leaves ``NAME.tmp`` behind; under a permissive umask the next write must still give
    exactly 0600, not the leftover's mode."""
    out = tmp_path / "keys"
    (out / "clients").mkdir(parents=True)
    leftover = out / "client.key_secret.tmp"
    leftover.write_text("torn")
    leftover.chmod(0o644)
    umask = os.umask(0)
    try:
        generate_keys(out)
    finally:
        os.umask(umask)
    assert files_under(out) == KEY_FILES
    assert {n: stat.S_IMODE(os.stat(out / n).st_mode) for n in KEY_FILES} == {n: 0o600 for n in KEY_FILES}
    CurveKeys.for_client(out)  # reads back, and the secret file passes the private-mode check


def test_new_client_keys_replace_the_old_and_leave_no_copy_beside_them(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    generate_keys(out)
    old = CurveKeys.for_client(out)
    generate_keys(out)
    new = CurveKeys.for_client(out)
    assert new.server_public == old.server_public and new.public != old.public
    assert files_under(out) == KEY_FILES  # no .bak of the replaced secret, no .tmp


def test_a_crash_between_the_server_files_leaves_a_pair_the_next_run_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker's keypair is kept once ``server.key_secret`` exists, so that file is written last:
    a run killed after the first server file must not leave a secret without its public key."""
    import mqstore.ipc.transport.curve

    real_write = mqstore.ipc.transport.curve.write_atomic
    calls: list[str] = []

    def write_then_die(path: Path, data: bytes, **kwargs: Any) -> None:
        calls.append(Path(path).name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process stops here
        real_write(path, data, **kwargs)

    monkeypatch.setattr(mqstore.ipc.transport.curve, "write_atomic", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        generate_keys(tmp_path / "keys")
    monkeypatch.undo()
    generate_keys(tmp_path / "keys")
    server = CurveKeys.for_server(tmp_path / "keys" / "server.key_secret")
    assert CurveKeys.for_client(tmp_path / "keys").server_public == server.public
