from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine.meta import metafile
from mqstore.engine.meta.metafile import (
    MetafileError,
    abort_exists,
    create_abort,
    read_with_backup,
    remove_abort,
    write_atomic,
)


def parse_json(data: bytes) -> Any:
    return json.loads(data)


def test_first_write_has_no_backup(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    write_atomic(path, b'{"v":1}')
    assert path.read_bytes() == b'{"v":1}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json"]


def test_second_write_keeps_previous_version_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    write_atomic(path, b'{"v":1}')
    write_atomic(path, b'{"v":2}')
    write_atomic(path, b'{"v":3}')
    assert path.read_bytes() == b'{"v":3}'
    assert (tmp_path / "topics.json.bak").read_bytes() == b'{"v":2}'
    assert not (tmp_path / "topics.json.tmp").exists()


def test_read_prefers_main_file(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    write_atomic(path, b'{"v":1}')
    write_atomic(path, b'{"v":2}')
    assert read_with_backup(path, parse_json) == {"v": 2}


@pytest.mark.parametrize("main", [None, b"", b'{"v":', b"\xff\xfe garbage"])
def test_missing_empty_or_garbage_main_falls_back_to_bak(tmp_path: Path, main: bytes | None) -> None:
    path = tmp_path / "m.json"
    (tmp_path / "m.json.bak").write_bytes(b'{"v":1}')
    if main is not None:
        path.write_bytes(main)
    assert read_with_backup(path, parse_json) == {"v": 1}


def test_nothing_on_disk_reads_as_none(tmp_path: Path) -> None:
    assert read_with_backup(tmp_path / "m.json", parse_json) is None
    (tmp_path / "m.json").write_bytes(b"")
    assert read_with_backup(tmp_path / "m.json", parse_json) is None


def test_garbage_everywhere_is_an_error_not_an_empty_start(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_bytes(b"{not json")
    with pytest.raises(MetafileError, match=r"m\.json"):
        read_with_backup(tmp_path / "m.json", parse_json)
    (tmp_path / "m.json.bak").write_bytes(b"[also bad")
    with pytest.raises(MetafileError, match=r"m\.json\.bak"):
        read_with_backup(tmp_path / "m.json", parse_json)


def test_wrongly_shaped_content_falls_back_too(tmp_path: Path) -> None:
    def parse_version(data: bytes) -> int:
        value = json.loads(data)["v"]  # KeyError / TypeError on the wrong shape
        if not isinstance(value, int):
            raise ValueError("v is not an int")
        return value

    path = tmp_path / "m.json"
    (tmp_path / "m.json.bak").write_bytes(b'{"v":1}')
    for shape in (b'{"w":2}', b"[2]", b'{"v":"2"}'):
        path.write_bytes(shape)
        assert read_with_backup(path, parse_version) == 1


def test_parser_bugs_are_not_taken_for_bad_content(tmp_path: Path) -> None:
    def broken(data: bytes) -> int:
        raise ZeroDivisionError

    (tmp_path / "m.json").write_bytes(b"{}")
    with pytest.raises(ZeroDivisionError):
        read_with_backup(tmp_path / "m.json", broken)


def test_tmp_leftover_is_ignored_and_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    write_atomic(path, b'{"v":1}')
    # A crash mid-write leaves a torn tmp file; it must not be read, nor disturb the next write.
    (tmp_path / "m.json.tmp").write_bytes(b'{"v":99, "torn')
    assert read_with_backup(path, parse_json) == {"v": 1}
    write_atomic(path, b'{"v":2}')
    assert read_with_backup(path, parse_json) == {"v": 2}
    assert not (tmp_path / "m.json.tmp").exists()


def test_crash_between_renames_reads_the_backup(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    write_atomic(path, b'{"v":1}')
    # State after "rename main to .bak" but before "rename tmp to main".
    os.replace(path, tmp_path / "m.json.bak")
    (tmp_path / "m.json.tmp").write_bytes(b'{"v":2}')
    assert read_with_backup(path, parse_json) == {"v": 1}


def _record_syncs_and_renames(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, every fsync (of a file or a directory) and rename, in order, by base name."""
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append(f"replace {os.path.basename(src)}->{os.path.basename(dst)}")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def test_write_fsyncs_file_before_rename_and_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_atomic(tmp_path / "m.json", b"1")
    events = _record_syncs_and_renames(monkeypatch)
    write_atomic(tmp_path / "m.json", b"2")
    assert events == [
        "fsync-file",
        "replace m.json->m.json.bak",
        "replace m.json.tmp->m.json",
        "fsync-dir",
    ]


def test_failed_fsync_propagates_and_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.json"
    write_atomic(path, b'{"v":1}')

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output"):
        write_atomic(path, b'{"v":2}')
    assert path.read_bytes() == b'{"v":1}'


def test_abort_marker_lifecycle(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert not abort_exists(store)
    create_abort(store, 4242)
    assert abort_exists(store)
    assert (store / "abort").read_text() == "4242"
    remove_abort(store)
    assert not abort_exists(store)
    remove_abort(store)


def test_remove_abort_fsyncs_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    create_abort(tmp_path, 1)
    synced: list[str] = []
    monkeypatch.setattr(metafile, "fsync_dir", lambda path: synced.append(os.fspath(path)))
    remove_abort(tmp_path)
    assert synced == [os.fspath(tmp_path)]


def test_mode_is_exact_whatever_the_umask_or_a_leftover_tmp(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    (tmp_path / "secret.tmp").write_bytes(b"torn")
    os.chmod(tmp_path / "secret.tmp", 0o666)
    umask = os.umask(0)
    try:
        write_atomic(path, b"s1", mode=0o600)
        write_atomic(path, b"s2", mode=0o600)
    finally:
        os.umask(umask)
    assert path.read_bytes() == b"s2"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "secret.bak").st_mode) == 0o600


def test_without_backup_one_rename_replaces_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_atomic(tmp_path / "m.key", b"1", keep_backup=False)
    events = _record_syncs_and_renames(monkeypatch)
    write_atomic(tmp_path / "m.key", b"2", keep_backup=False)
    assert events == ["fsync-file", "replace m.key.tmp->m.key", "fsync-dir"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.key"]
    assert (tmp_path / "m.key").read_bytes() == b"2"
