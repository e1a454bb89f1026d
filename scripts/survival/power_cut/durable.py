"""What the power-cut recorder saw, read back: each file's durable bytes and size, and the names
created, renamed and removed under the root in their global order, each marked durable or not.

A record directory holds ``events`` (one record per event, appended by every recorded process)
and ``data/`` (a copy per inode of the bytes its syncs made durable, at the same offsets).

Event record (little-endian, the layout of ``struct ev_head`` in ``shim.c``)::

    offset size field
    0      4    len    the whole record, paths included
    4      2    kind   CREATE 1, MKDIR 2, RENAME 3, UNLINK 4, RMDIR 5, DIRSYNC 6, SYNC 7, RANGE 8, TRUNCATE 9
    6      2    flags  EXCHANGE 1 (rename), SIZE 2 (range: c is durable), DIR 4 (rename of a directory)
    8      4    pid
    12     2    len1   path1's bytes
    14     2    len2   path2's bytes
    16     8    dev
    24     8    ino
    32     8    a      CREATE/MKDIR/UNLINK/RMDIR: parent's inode; RENAME: old parent; SYNC: durable size;
                       RANGE: offset; TRUNCATE: size
    40     8    b      RENAME: new parent; RANGE: length
    48     8    c      RENAME: inode replaced at the new name (0: none); RANGE: file size
    56     len1 path1  relative to the root ("" is the root)
    ...    len2 path2  RENAME: the new name; CREATE/MKDIR: the retired copy of an earlier inode (or "")

Inode numbers are reused: an inode's life from one CREATE or MKDIR to the next is an epoch, and a
file is ``(dev, ino, epoch)``. The copy of an earlier epoch is the one the next CREATE names.

A name event is durable once a later DIRSYNC of its parent directory (both parents for a rename) is
in the log. A file's durable size is the last SYNC's, or an msync's (RANGE with SIZE); its durable
bytes are its copy's up to that size, zeros past the copy's end.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

EVENTS_NAME = "events"
DATA_DIR_NAME = "data"
HEAD = struct.Struct("<IHHIHHQQQQQ")
HEAD_SIZE = 56
FLAG_EXCHANGE = 1
FLAG_SIZE = 2
FLAG_DIR = 4

FileId = tuple[int, int, int]  # dev, ino, epoch


class Kind(IntEnum):
    CREATE = 1
    MKDIR = 2
    RENAME = 3
    UNLINK = 4
    RMDIR = 5
    DIRSYNC = 6
    SYNC = 7
    RANGE = 8
    TRUNCATE = 9


NAME_KINDS = frozenset({Kind.CREATE, Kind.MKDIR, Kind.RENAME, Kind.UNLINK, Kind.RMDIR})


@dataclass(frozen=True, slots=True)
class Event:
    kind: Kind
    flags: int
    pid: int
    dev: int
    ino: int
    a: int
    b: int
    c: int
    path: str
    path2: str


def encode_event(event: Event) -> bytes:
    one, two = event.path.encode(), event.path2.encode()
    head = HEAD.pack(HEAD_SIZE + len(one) + len(two), event.kind, event.flags, event.pid, len(one), len(two),
                     event.dev, event.ino, event.a, event.b, event.c)
    return head + one + two


def decode_events(raw: bytes) -> list[Event]:
    """Every whole record, in order; a torn or foreign tail ends the list."""
    events: list[Event] = []
    pos = 0
    while pos + HEAD_SIZE <= len(raw):
        length, kind, flags, pid, len1, len2, dev, ino, a, b, c = HEAD.unpack_from(raw, pos)
        if length != HEAD_SIZE + len1 + len2 or pos + length > len(raw) or kind not in Kind._value2member_map_:
            break
        start = pos + HEAD_SIZE
        path = raw[start:start + len1].decode(errors="surrogateescape")
        path2 = raw[start + len1:start + len1 + len2].decode(errors="surrogateescape")
        events.append(Event(Kind(kind), flags, pid, dev, ino, a, b, c, path, path2))
        pos += length
    return events


def copy_name(dev: int, ino: int) -> str:
    """The name of an inode's current copy under ``data/`` (as the shim spells it)."""
    return f"{dev:x}-{ino:x}"


@dataclass(frozen=True, slots=True)
class NameEvent:
    seq: int              # its place in the event log
    kind: Kind            # CREATE, MKDIR, RENAME, UNLINK or RMDIR
    path: str
    new_path: str         # a rename's target, "" otherwise
    file: FileId
    is_dir: bool
    exchange: bool        # renameat2(RENAME_EXCHANGE)
    durable: bool

    def describe(self) -> str:
        what = f"{self.kind.name.lower()} {self.path}" + (f" -> {self.new_path}" if self.new_path else "")
        return f"#{self.seq} {what} (ino {self.file[1]})"


@dataclass(frozen=True, slots=True)
class DurableFile:
    file: FileId
    size: int              # the durable size
    copy: Path | None      # its synced bytes, at their offsets (None: nothing ever synced)

    def read(self) -> bytes:
        if self.copy is None or not self.copy.exists():
            return bytes(self.size)
        with self.copy.open("rb") as f:
            data = f.read(self.size)
        return data.ljust(self.size, b"\0")


@dataclass(frozen=True, slots=True)
class Record:
    events: tuple[Event, ...]
    names: tuple[NameEvent, ...]
    files: dict[FileId, DurableFile]

    def durable_bytes(self, file: FileId) -> bytes:
        known = self.files.get(file)
        return known.read() if known is not None else b""


def read_record(record_dir: Path) -> Record:
    """A record directory read back; call it once every recorded process is stopped or gone."""
    log = record_dir / EVENTS_NAME
    events = decode_events(log.read_bytes()) if log.exists() else []
    data_dir = record_dir / DATA_DIR_NAME
    epochs: dict[tuple[int, int], int] = {}
    copies: dict[FileId, Path] = {}
    sizes: dict[FileId, int] = {}
    pending: list[tuple[int, Event, FileId, frozenset[FileId]]] = []
    dir_syncs: list[tuple[int, FileId]] = []

    def current(dev: int, ino: int) -> FileId:
        return (dev, ino, epochs.get((dev, ino), 0))

    for seq, event in enumerate(events):
        if event.kind in (Kind.CREATE, Kind.MKDIR):
            previous = current(event.dev, event.ino)
            if event.path2:
                copies[previous] = data_dir / event.path2
            epochs[(event.dev, event.ino)] = previous[2] + 1
        file = current(event.dev, event.ino)
        if event.kind in NAME_KINDS:
            parents = {current(event.dev, event.a)}  # inode 0: the parent was not found, never durable
            if event.kind == Kind.RENAME:
                parents.add(current(event.dev, event.b))
            pending.append((seq, event, file, frozenset(parents)))
        elif event.kind == Kind.DIRSYNC:
            dir_syncs.append((seq, file))
        elif event.kind == Kind.SYNC:
            sizes[file] = event.a
        elif event.kind == Kind.RANGE and event.flags & FLAG_SIZE:
            sizes[file] = event.c
    for (dev, ino), epoch in epochs.items():
        copies.setdefault((dev, ino, epoch), data_dir / copy_name(dev, ino))
    for file in sizes.keys() - copies.keys():
        copies[file] = data_dir / copy_name(file[0], file[1])
    names = _mark_durable(pending, dir_syncs)
    files = {file: DurableFile(file, sizes.get(file, 0), copies.get(file)) for file in copies.keys() | sizes.keys()}
    return Record(tuple(events), names, files)


def _mark_durable(pending: list[tuple[int, Event, FileId, frozenset[FileId]]],
                  dir_syncs: list[tuple[int, FileId]]) -> tuple[NameEvent, ...]:
    last_sync: dict[FileId, int] = {}
    for seq, directory in dir_syncs:
        last_sync[directory] = seq
    names = []
    for seq, event, file, parents in pending:
        durable = all(last_sync.get(parent, -1) > seq for parent in parents)
        names.append(NameEvent(seq, event.kind, event.path, event.path2 if event.kind == Kind.RENAME else "", file,
                               event.kind in (Kind.MKDIR, Kind.RMDIR) or bool(event.flags & FLAG_DIR),
                               bool(event.flags & FLAG_EXCHANGE), durable))
    return tuple(names)
