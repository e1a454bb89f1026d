"""Small metadata files written the way RocketMQ's ConfigManager writes them, and the abort marker.

A metadata file ``name`` lives beside ``name.bak`` (the previous version) and, transiently,
``name.tmp`` (the next one being written). ``write_atomic`` never leaves a half-written ``name``:
the new bytes go to ``name.tmp`` and are fsynced before any rename, the old ``name`` becomes
``name.bak``, ``name.tmp`` becomes ``name``, and the directory is fsynced so both renames survive a
crash. A crash between the two renames leaves no ``name`` but an intact ``name.bak``, which is why
``read_with_backup`` falls back to it. A leftover ``name.tmp`` is never read: it may be torn.
Files no reader falls back for (``mqstore.ipc.transport.curve``'s key files) skip the backup: one rename replaces them.

The abort marker ``{store}/abort`` holds the PID of the running store as text. Its presence at start
means the last stop was not clean (RocketMQ: ``lastExitOK = !exists(abort)``), so what matters for
durability is the directory entry, and both creating and removing it fsync the directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from mqstore.engine.errors import MqstoreError

T = TypeVar("T")
StrPath = str | os.PathLike[str]

TMP_SUFFIX = ".tmp"
BACKUP_SUFFIX = ".bak"
ABORT_FILE_NAME = "abort"
DEFAULT_MODE = 0o644


_BAD_CONTENT = (ValueError, KeyError, TypeError)


class MetafileError(MqstoreError):
    """A metadata file has content, but neither it nor its backup parses."""


def fsync_dir(dir_path: StrPath) -> None:
    """Make the directory's entries (creates, renames, unlinks) durable."""
    fd = os.open(dir_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file_synced(path: str, data: bytes, mode: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, DEFAULT_MODE if mode is None else mode)
    try:
        if mode is not None:
            # open's mode passes through the umask and is ignored for a file left by a crash: set it
            # before the first byte goes in
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _ensure_dir(dir_path: str) -> None:
    if os.path.isdir(dir_path):
        return
    os.makedirs(dir_path, exist_ok=True)
    # The new directory's own entry must survive too, or the file inside it is lost with it.
    fsync_dir(os.path.dirname(dir_path) or ".")


def write_atomic(path: StrPath, data: bytes, *, mode: int | None = None, keep_backup: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash at any instant leaves a whole file behind.

    ``mode``: the file's permission bits, exactly (the umask and a leftover ``name.tmp`` do not
    change them); by default 0644 less the umask. ``keep_backup=False`` puts the new file in place
    with one rename and keeps no ``name.bak``: for files whose readers never fall back to one
    (key files, where an old secret must not linger beside the new).

    Creates the parent directory if needed. Any OSError (a failed fsync included) propagates:
    the caller must not believe the data durable.
    """
    target = os.path.abspath(os.fspath(path))
    dir_path = os.path.dirname(target)
    _ensure_dir(dir_path)
    tmp_path = target + TMP_SUFFIX
    _write_file_synced(tmp_path, data, mode)
    if keep_backup and os.path.exists(target):
        os.replace(target, target + BACKUP_SUFFIX)
    os.replace(tmp_path, target)
    fsync_dir(dir_path)


def _read_or_none(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_with_backup(path: StrPath, parse: Callable[[bytes], T]) -> T | None:
    """Parse ``path``, or its ``.bak`` when ``path`` is missing, empty or unparseable.

    ``parse`` signals bad content with ValueError (json's and UTF-8's decode errors are
    ValueErrors), or with the KeyError / TypeError that reading a wrongly shaped document
    naturally raises; anything else is a bug and propagates.

    Returns None when neither file has any content: a store that never wrote it. Raises
    MetafileError when there is content but none of it parses: starting empty would silently
    throw away what the file held. OSErrors other than a missing file (EIO, EACCES) propagate.
    """
    target = os.fspath(path)
    problems: list[str] = []
    for candidate in (target, target + BACKUP_SUFFIX):
        data = _read_or_none(candidate)
        if not data:
            continue
        try:
            return parse(data)
        except _BAD_CONTENT as exc:
            problems.append(f"{candidate}: {exc}")
    if problems:
        raise MetafileError("no readable copy of metadata file: " + "; ".join(problems))
    return None


def abort_path(store_dir: StrPath) -> str:
    return os.path.join(os.fspath(store_dir), ABORT_FILE_NAME)


def create_abort(store_dir: StrPath, pid: int) -> None:
    """Write ``{store}/abort`` holding ``pid`` as decimal text, durably (file and directory)."""
    store = os.path.abspath(os.fspath(store_dir))
    _ensure_dir(store)
    _write_file_synced(abort_path(store), str(pid).encode("ascii"))
    fsync_dir(store)


def abort_exists(store_dir: StrPath) -> bool:
    return os.path.exists(abort_path(store_dir))


def remove_abort(store_dir: StrPath) -> None:
    """Delete the abort marker (a clean stop) and make the deletion durable; absent is fine."""
    store = os.fspath(store_dir)
    try:
        os.unlink(abort_path(store))
    except FileNotFoundError:
        return
    fsync_dir(store)
