"""The power-cut recorder's library (``shim.c``), built on demand, and the environment that loads it.

``build()`` compiles ``shim.c`` with gcc into a cache directory keyed by the source's hash and reuses
what is there. ``env_for(record_dir, root)`` gives the variables that make a process and every
child it starts (fork, spawn, forkserver, exec: they inherit the environment) record what each
sync under ``root`` made durable into ``record_dir``. ``baseline(root, record_dir)`` records the
files already under ``root`` as durable as they are, for a store opened again; call it while
nothing runs there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from mqstore.engine.errors import MqstoreError
from mqstore.scripts.survival.power_cut.durable import DATA_DIR_NAME, EVENTS_NAME, Event, Kind, copy_name, encode_event

SOURCE = Path(__file__).with_name("shim.c")
ROOT_ENV = "MQSTORE_POWERCUT_ROOT"
DIR_ENV = "MQSTORE_POWERCUT_DIR"
CACHE_ENV = "MQSTORE_POWERCUT_CACHE"
GCC_FLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Wno-format-truncation", "-U_FORTIFY_SOURCE")
MAX_RECORD_DIR_CHARS = 2048  # the shim keeps paths in PATH_MAX buffers; it disables itself past this


class ShimBuildError(MqstoreError, RuntimeError):
    """gcc is missing or could not build the recorder."""


def cache_dir() -> Path:
    """``$MQSTORE_POWERCUT_CACHE``, else the user's cache directory, else one in the temp directory
    (a CI runner's home may be read-only)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    preferred = Path(base) / "mqstore" / "power_cut"
    try:
        preferred.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path(tempfile.gettempdir()) / f"mqstore-power-cut-{os.getuid()}"
    return preferred


def build() -> Path:
    """The compiled recorder, built once per version of ``shim.c``."""
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + " ".join(GCC_FLAGS).encode()).hexdigest()[:16]
    target = cache_dir() / f"shim-{key}.so"
    if target.exists():
        return target
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ShimBuildError("gcc not found on PATH: the power-cut recorder is a C library built on demand")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=target.name, suffix=".partial", dir=target.parent)
    os.close(fd)
    try:
        proc = subprocess.run([gcc, *GCC_FLAGS, "-o", partial, str(SOURCE), "-ldl"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ShimBuildError(f"gcc could not build {SOURCE}:\n{proc.stderr}")
        os.replace(partial, target)  # concurrent builds: each lands a whole library
    finally:
        Path(partial).unlink(missing_ok=True)
    return target


def env_for(record_dir: Path, root: Path) -> dict[str, str]:
    """Variables to add to a process's environment so that it and its children record syncs under
    ``root`` into ``record_dir`` (created here; it must lie outside ``root``)."""
    library = build()
    real_root = root.resolve(strict=True)
    record = record_dir.resolve()
    if record == real_root or real_root in record.parents:
        raise ValueError(f"the record directory {record} must lie outside the recorded root {real_root}")
    if len(str(record)) > MAX_RECORD_DIR_CHARS:
        raise ValueError(f"record directory path too long for the recorder: {record}")
    (record / DATA_DIR_NAME).mkdir(parents=True, exist_ok=True)
    preload = " ".join(p for p in (str(library), os.environ.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, ROOT_ENV: str(real_root), DIR_ENV: str(record)}


def baseline(root: Path, record_dir: Path) -> None:
    """Record every file and directory now under ``root`` as durable with its current bytes and
    names (a store opened again keeps what it had before recording began)."""
    real_root = root.resolve(strict=True)
    data_dir = record_dir / DATA_DIR_NAME
    data_dir.mkdir(parents=True, exist_ok=True)
    events: list[Event] = []
    directories = [real_root]
    for dirpath, dirnames, filenames in os.walk(real_root):
        dirnames.sort()
        here = Path(dirpath)
        parent_ino = here.stat().st_ino
        for name in dirnames:
            path = here / name
            st = path.lstat()
            events.append(_event(Kind.MKDIR, st, parent_ino, path.relative_to(real_root).as_posix()))
            directories.append(path)
        for name in sorted(filenames):
            path = here / name
            st = path.lstat()
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            (data_dir / copy_name(st.st_dev, st.st_ino)).write_bytes(data)
            rel = path.relative_to(real_root).as_posix()
            events.append(_event(Kind.CREATE, st, parent_ino, rel))
            events.append(_event(Kind.SYNC, st, len(data), rel))
    for directory in directories:
        st = directory.stat()
        name = directory.relative_to(real_root).as_posix()
        events.append(_event(Kind.DIRSYNC, st, 0, "" if name == "." else name))
    with (record_dir / EVENTS_NAME).open("ab") as log:
        log.write(b"".join(encode_event(event) for event in events))


def _event(kind: Kind, st: os.stat_result, a: int, rel: str) -> Event:
    return Event(kind, 0, os.getpid(), st.st_dev, st.st_ino, a, 0, 0, rel, "")
