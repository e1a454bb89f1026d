"""Crash images: what a power cut may leave of a recorded tree.

Names: the name events replay in order from an empty root; a durable one always applies, any other
applies or not at random (a rename not applied keeps the old name, an unlink not applied keeps the
file, a create not applied leaves no file; an event whose source the image lacks does nothing).
Bytes: each file holds its durable bytes plus a random subset of the 4 KiB pages where the live
copy (the root copied by path while the tree was stopped) differs, one chosen page torn at a
512-byte boundary sometimes (its first sectors live, the rest durable); its size is the durable
size, or the live size when a random choice takes the tail. ``durable_image`` leaves the durable
state alone. The same record, live copy and seed build the same image.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from mqstore.scripts.survival.power_cut.durable import FileId, Kind, NameEvent, Record, read_record

PAGE_SIZE = 4096
SECTOR_SIZE = 512

Entries = dict[str, tuple[FileId, bool]]  # path -> (file, is a directory)


@dataclass(frozen=True, slots=True)
class FileChoice:
    path: str
    durable_size: int
    live_size: int | None     # None: no live copy of this file (gone, or never named there)
    size: int
    pages: tuple[int, ...]    # page numbers taken from the live copy
    differing: int            # pages where the live copy differs


@dataclass(frozen=True, slots=True)
class TornPage:
    path: str
    page: int
    live_bytes: int           # the page's first live_bytes are live, the rest durable


@dataclass(frozen=True, slots=True)
class ImageInfo:
    applied: tuple[NameEvent, ...]        # name events not durable that the image applies
    skipped: tuple[NameEvent, ...]        # name events not durable that it leaves out
    files: tuple[FileChoice, ...]
    torn: TornPage | None
    unrecorded: tuple[str, ...] = field(default=())  # live paths no recorded event explains

    def describe(self) -> str:
        lines = [f"names applied beyond the durable: {len(self.applied)}, left out: {len(self.skipped)}"]
        lines += [f"  + {event.describe()}" for event in self.applied]
        lines += [f"  - {event.describe()}" for event in self.skipped]
        for choice in self.files:
            if choice.pages or choice.size != choice.durable_size:
                lines.append(f"{choice.path}: size {choice.size} (durable {choice.durable_size}, live "
                             f"{choice.live_size}), live pages {list(choice.pages)} of {choice.differing}")
        if self.torn is not None:
            lines.append(f"torn: {self.torn.path} page {self.torn.page} at {self.torn.live_bytes} B")
        if self.unrecorded:
            lines.append(f"unrecorded live paths: {list(self.unrecorded)}")
        return "\n".join(lines)


def replay(names: tuple[NameEvent, ...], take: list[bool]) -> Entries:
    """The names after applying the events whose ``take`` is true, in order."""
    entries: Entries = {}
    for event, chosen in zip(names, take, strict=True):
        if chosen:
            _apply(entries, event)
    return entries


def _present_dir(entries: Entries, path: str) -> bool:
    parent = path.rpartition("/")[0]
    return parent == "" or entries.get(parent, (None, False))[1]


def _subtree(entries: Entries, path: str) -> list[str]:
    return [name for name in entries if name == path or name.startswith(path + "/")]


def _apply(entries: Entries, event: NameEvent) -> None:
    if event.kind in (Kind.CREATE, Kind.MKDIR):
        if _present_dir(entries, event.path):
            for name in _subtree(entries, event.path):
                del entries[name]
            entries[event.path] = (event.file, event.is_dir)
        return
    if entries.get(event.path, (None, False))[0] != event.file:
        return  # the image does not hold this file under this name
    if event.kind in (Kind.UNLINK, Kind.RMDIR):
        for name in _subtree(entries, event.path):
            del entries[name]
    elif event.kind == Kind.RENAME and _present_dir(entries, event.new_path):
        moving = {name: entries.pop(name) for name in _subtree(entries, event.path)}
        if event.exchange:
            swapped = {name: entries.pop(name) for name in _subtree(entries, event.new_path)}
            entries.update({event.path + name[len(event.new_path):]: value for name, value in swapped.items()})
        else:
            for name in _subtree(entries, event.new_path):
                del entries[name]
        entries.update({event.new_path + name[len(event.path):]: value for name, value in moving.items()})


def _live_paths(record: Record, live: Path) -> tuple[dict[FileId, Path], tuple[str, ...]]:
    entries = replay(record.names, [True] * len(record.names))
    paths = {file: live / name for name, (file, is_dir) in entries.items() if not is_dir}
    known = set(entries)
    unrecorded = tuple(sorted(path.relative_to(live).as_posix() for path in live.rglob("*")
                              if path.relative_to(live).as_posix() not in known)) if live.is_dir() else ()
    return paths, unrecorded


@dataclass(slots=True)
class _Draft:
    choice: FileChoice
    content: bytearray
    durable: bytes = b""
    live: bytes = b""


def _mix(path: str, durable: bytes, live: bytes | None, rng: random.Random | None) -> _Draft:
    if live is None or rng is None:
        return _Draft(FileChoice(path, len(durable), None, len(durable), (), 0), bytearray(durable))
    size = len(durable)
    if len(live) != len(durable) and rng.random() < 0.5:
        size = len(live)
    base = bytes(durable[:size].ljust(size, b"\0"))
    content = bytearray(base)
    differing = 0
    pages = []
    for start in range(0, min(size, len(live)), PAGE_SIZE):
        end = min(start + PAGE_SIZE, size, len(live))
        if live[start:end] == base[start:end]:
            continue
        differing += 1
        if rng.random() < 0.5:
            content[start:end] = live[start:end]
            pages.append(start // PAGE_SIZE)
    return _Draft(FileChoice(path, len(durable), len(live), size, tuple(pages), differing), content, base, live)


def _tear(drafts: list[_Draft], rng: random.Random) -> TornPage | None:
    chosen = [(draft, page) for draft in drafts for page in draft.choice.pages]
    if not chosen or rng.random() < 0.5:
        return None
    draft, page = chosen[rng.randrange(len(chosen))]
    start = page * PAGE_SIZE
    end = min(start + PAGE_SIZE, draft.choice.size, len(draft.live))
    live_bytes = rng.randrange(1, PAGE_SIZE // SECTOR_SIZE) * SECTOR_SIZE
    if start + live_bytes >= end:
        return None  # a short last page: nothing past the cut to tear
    draft.content[start + live_bytes:end] = draft.durable[start + live_bytes:end]
    return TornPage(draft.choice.path, page, live_bytes)


def _build(record: Record, live: Path, out: Path, take: list[bool], rng: random.Random | None) -> ImageInfo:
    entries = replay(record.names, take)
    live_paths, unrecorded = _live_paths(record, live)
    drafts: list[_Draft] = []
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(entries):
        file, is_dir = entries[name]
        if is_dir:
            (out / name).mkdir(parents=True, exist_ok=True)
            continue
        durable = record.durable_bytes(file)
        live_path = live_paths.get(file)
        live_bytes = None
        if rng is not None and live_path is not None and live_path.is_file():
            live_bytes = live_path.read_bytes()
        drafts.append(_mix(name, durable, live_bytes, rng))
    torn = _tear(drafts, rng) if rng is not None else None
    for draft in drafts:
        (out / draft.choice.path).write_bytes(bytes(draft.content))
    applied = tuple(event for event, chosen in zip(record.names, take, strict=True) if chosen and not event.durable)
    skipped = tuple(event for event, chosen in zip(record.names, take, strict=True) if not chosen)
    return ImageInfo(applied, skipped, tuple(draft.choice for draft in drafts), torn, unrecorded)


def crash_image(record_dir: Path, live: Path, out: Path, rng: random.Random) -> ImageInfo:
    """One crash image of the recorded tree in ``out`` (created; it should be empty)."""
    record = read_record(record_dir)
    take = [event.durable or rng.random() < 0.5 for event in record.names]
    return _build(record, live, out, take, rng)


def durable_image(record_dir: Path, live: Path, out: Path) -> ImageInfo:
    """The image that holds only what was made durable: durable names, durable bytes and sizes."""
    record = read_record(record_dir)
    return _build(record, live, out, [event.durable for event in record.names], None)
