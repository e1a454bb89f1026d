"""Small metadata files written the way RocketMQ's ConfigManager writes them, and the abort marker.

A metadata file ``name`` lives beside ``name.bak`` (the previous version) and, transiently,
``name.tmp`` (the next one being written). ``write_atomic`` never leaves a half-written ``name``:
the new bytes go to ``name.tmp`` and are fsynced before any rename, the old ``name`` becomes
``name.bak``, ``name.tmp`` becomes ``name``, and the directory is fsynced so both renames survive a
crash. A crash between the two renames leaves no ``name`` but an intact ``name.bak``, which is why
``read_with_backup`` falls back to it. A leftover ``name.tmp`` is never read: it may be torn.
Files no reader falls back for (``mqstore.ipc.transport.curve``'s key files) skip the backup: one rename replaces them.

A name survives a power cut only once its directory is fsynced, and a new directory's only once its
parent is: ``make_dirs`` creates directories that way, and ``DirectorySync`` lets the process that owns
a file family's durability make the entries of files others created durable, once per change.

The abort marker ``{store}/abort`` holds the PID of the running store as text. Its presence at start
means the last stop was not clean (RocketMQ: ``lastExitOK = !exists(abort)``), so what matters for
durability is the directory entry, and both creating and removing it fsync the directory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
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


# Directory times come from a coarse clock (a kernel tick; a second on some filesystems): a change in
# the same tick as the one seen may leave the time as it was, so only a time older than this is trusted
# to change with the next entry made or removed.
DIR_TIME_TRUST_NS = 2_000_000_000


def make_dirs(dir_path: StrPath, mode: int = 0o777) -> None:
    """``os.makedirs``, with each directory it makes durable (its parent fsynced) before returning."""
    made: list[str] = []
    path = os.path.abspath(os.fspath(dir_path))
    while not os.path.isdir(path):
        made.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for path in reversed(made):
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        fsync_dir(os.path.dirname(path))


class DirectorySync:
    """The entries of directories under ``root`` made durable for files another process creates
    (consume-queue files and their queue and topic directories, index files), by the process that
    owns their durability, before anything that counts them durable (the checkpoint).

    ``sync(directory)`` fsyncs ``directory`` when an entry in it may have changed since its last
    fsync here, and the directories above it up to ``root`` the same way (a new directory's name is
    in its parent). A directory's inode and modification time, recorded before its fsync, tell: both
    unchanged means no entry was made, renamed or removed since. A time within
    ``DIR_TIME_TRUST_NS`` of the fsync is not recorded, so the directory is fsynced again next time.
    Costs one ``stat`` a call while nothing changes, one directory fsync per change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._synced: dict[Path, tuple[int, int]] = {}  # directory -> (inode, mtime_ns) at its last fsync
        self.sync_count = 0

    def sync(self, directory: Path) -> bool:
        """Make every entry of ``directory`` durable, and its own name up to ``root``; False when it
        does not exist (removed, or not made yet)."""
        try:
            st = os.stat(directory)
        except FileNotFoundError:
            self._synced.pop(directory, None)
            return False
        seen = (st.st_ino, st.st_mtime_ns)
        if self._synced.get(directory) == seen:
            return True
        if directory != self.root and self.root in directory.parents:
            self.sync(directory.parent)
        fsync_dir(directory)
        self.sync_count += 1
        if time.time_ns() - st.st_mtime_ns > DIR_TIME_TRUST_NS:
            self._synced[directory] = seen
        else:
            self._synced.pop(directory, None)
        return True


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
    make_dirs(dir_path)
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
    make_dirs(store)
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
