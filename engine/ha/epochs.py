"""The epoch file: which master wrote which stretch of the commitlog (RocketMQ 5's EpochFileCache).

``{store}/epochFileCheckpoint`` is text, byte-compatible with RocketMQ's ``CheckpointFile``::

    line 1   the number of entries, in decimal
    line 2   CRC32 & 0x7FFFFFFF of the entry text (every entry line with its "\\n"), in decimal
    line 3+  one entry a line: "{epoch}-{start}" (start: the phys offset where the epoch began)

Every line ends in "\\n" (Java's ``System.lineSeparator()`` on Linux). A CRC of 0 is not checked, as
RocketMQ reads it. An entry runs from its start to the next entry's start; the last one to the log's
end (``epoch_end``). Epochs rise strictly and starts never fall.

``{store}/epochFileCheckpoint.bak`` holds the version before the last write. The file is read like
RocketMQ reads it: a missing or empty main file, one with no entries, or one whose count or CRC does
not match, gives way to the ``.bak``. Writes go through ``mqstore.engine.meta.metafile.write_atomic``
(the new text synced under a temporary name, the old file renamed to ``.bak``, the new one into
place, the directory synced), so a crash at any instant leaves a whole file under one of the two
names.

An epoch file emptied by ``truncate_from`` is removed with its ``.bak``, the ``.bak`` first: RocketMQ
never writes an empty epoch file, and reading one it would fall back to a ``.bak`` still holding the
entries just cut.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.metafile import BACKUP_SUFFIX, fsync_dir, write_atomic

EPOCH_FILE_NAME = "epochFileCheckpoint"
NOT_CHECKED_CRC = 0
MAX_EPOCH = (1 << 31) - 1  # a Java int
MAX_OFFSET = (1 << 63) - 1  # a Java long


class EpochFileError(MqstoreError):
    """Neither the epoch file nor its ``.bak`` holds a whole, matching set of entries."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start: int  # phys offset of the epoch's first byte


def entries_text(entries: Sequence[EpochEntry]) -> bytes:
    """The entry lines as RocketMQ writes them (what the CRC covers)."""
    return "".join(f"{e.epoch}-{e.start}\n" for e in entries).encode("ascii")


def entries_crc(text: bytes) -> int:
    return zlib.crc32(text) & 0x7FFFFFFF


def encode_epoch_file(entries: Sequence[EpochEntry]) -> bytes:
    """The whole file's bytes for ``entries``."""
    text = entries_text(entries)
    return f"{len(entries)}\n{entries_crc(text)}\n".encode("ascii") + text


def decode_epoch_file(data: bytes) -> tuple[EpochEntry, ...]:
    """The entries of an epoch file; ValueError naming what does not match. A line that is not
    "int-int" is skipped (and so fails the count), as RocketMQ's reader skips it."""
    lines = data.decode("ascii").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise ValueError("fewer than two header lines")
    count, crc = int(lines[0]), int(lines[1])
    body = lines[2:]
    entries = []
    for line in body:
        parts = line.split("-")
        if len(parts) == 2:
            entries.append(EpochEntry(int(parts[0]), int(parts[1])))
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    truth = entries_crc("".join(f"{line}\n" for line in body).encode("ascii"))
    if crc != NOT_CHECKED_CRC and crc != truth:
        raise ValueError(f"entries crc32 {truth} does not match {crc}")
    return tuple(entries)


def read_epoch_file(path: Path) -> tuple[EpochEntry, ...]:
    """The entries, read as RocketMQ's CheckpointFile reads them: the main file, or the ``.bak`` when
    the main one is missing, empty, holds no entries or does not parse. EpochFileError naming each
    file when there is content but no copy parses; () when neither holds anything."""
    problems: list[str] = []
    for candidate in (path, Path(f"{path}{BACKUP_SUFFIX}")):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            continue
        try:
            entries = decode_epoch_file(data) if data else ()
        except ValueError as exc:
            problems.append(f"{candidate}: {exc}")
            continue
        if entries:
            return entries
    if problems:
        raise EpochFileError("no readable copy of the epoch file: " + "; ".join(problems))
    return ()


def epoch_end(entries: Sequence[EpochEntry], i: int, max_offset: int) -> int:
    """Where entry ``i`` ends: the next entry's start, or ``max_offset`` for the last."""
    return entries[i + 1].start if i + 1 < len(entries) else max_offset


def consistent_point(local: Sequence[EpochEntry], local_end: int, master: Sequence[EpochEntry],
                     master_end: int) -> int | None:
    """Where a slave's log stops agreeing with its master's (RocketMQ's findConsistentPoint): the
    newest local epoch the master also has, with the same start, gives the smaller of its two ends.
    None when no epoch matches (nothing can be trusted to agree)."""
    master_at = {e.epoch: i for i, e in enumerate(master)}
    for i in range(len(local) - 1, -1, -1):
        j = master_at.get(local[i].epoch)
        if j is not None and master[j].start == local[i].start:
            return min(epoch_end(local, i, local_end), epoch_end(master, j, master_end))
    return None


class EpochFile:
    """The epoch file of one store; every change is durable before the call returns."""

    def __init__(self, path: Path, entries: tuple[EpochEntry, ...]) -> None:
        self.path = path
        self._entries = entries

    @classmethod
    def load(cls, store_dir: Path | str) -> EpochFile:
        path = Path(store_dir) / EPOCH_FILE_NAME
        return cls(path, read_epoch_file(path))

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else 0

    @property
    def last(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def append(self, epoch: int, start: int) -> None:
        """Add the epoch that begins at ``start``. ValueError unless ``epoch`` is above the last one
        and ``start`` not below the last one's start."""
        if not 0 <= epoch <= MAX_EPOCH or not 0 <= start <= MAX_OFFSET:
            raise ValueError(f"epoch {epoch} at {start} is out of range")
        last = self.last
        if last is not None and (epoch <= last.epoch or start < last.start):
            raise ValueError(f"epoch {epoch} at {start} does not follow epoch {last.epoch} at {last.start}")
        self._write((*self._entries, EpochEntry(epoch, start)))

    def truncate_from(self, phys_offset: int) -> None:
        """Drop every epoch that starts at or beyond ``phys_offset`` (RocketMQ's
        truncateSuffixByOffset): the log is being cut there."""
        kept = tuple(e for e in self._entries if e.start < phys_offset)
        if kept != self._entries:
            self._write(kept)

    def _write(self, entries: tuple[EpochEntry, ...]) -> None:
        if entries:
            write_atomic(self.path, encode_epoch_file(entries))
        else:
            for path in (Path(f"{self.path}{BACKUP_SUFFIX}"), self.path):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    continue
                fsync_dir(self.path.parent)
        self._entries = entries
