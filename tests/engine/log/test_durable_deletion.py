"""A power cut keeps any subset of the unlinks made since a directory's last fsync. Retention deletes
a queue's leading files in order; were two deletions pending at once, the image that keeps the
earlier file and loses the later would hold files ``MappedFileQueue.open`` refuses as not adjacent
(a store that does not open). So each leading file's deletion is durable before the next."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mqstore.engine.log import mapped_file_queue
from mqstore.engine.log.mapped_file import MappedFile, MappedFileError
from mqstore.engine.log.mapped_file_queue import MappedFileQueue

FILE_SIZE = 1024
FILE_COUNT = 6


def _filled(directory: Path) -> MappedFileQueue:
    queue = MappedFileQueue.open(directory, FILE_SIZE)
    for _ in range(FILE_COUNT * FILE_SIZE // 64):
        queue.last_file_for_append(0).append(b"x" * 64)
    return queue


def _crash_images(monkeypatch: pytest.MonkeyPatch, directory: Path, images: Path) -> list[Path]:
    """Every image a power cut during the deletions can leave with the files deleted since the
    directory's last fsync brought back, as many as could come back while a later one stays gone: at
    each unlink, the deletions not yet synced before it come back."""
    pending: list[Path] = []
    found: list[Path] = []
    real_delete, real_fsync_dir = MappedFile.delete, mapped_file_queue.fsync_dir

    def delete(mf: MappedFile) -> None:
        if pending:  # crash image: the earlier pending deletions undone, this one durable
            image = images / str(len(found))
            shutil.copytree(directory, image)
            for earlier in pending:
                shutil.copy(earlier.with_name(earlier.name + ".kept"), image / earlier.name)
            (image / mf.path.name).unlink()
            found.append(image)
        shutil.copy(mf.path, mf.path.with_name(mf.path.name + ".kept"))
        pending.append(mf.path)
        real_delete(mf)

    def fsync_dir(path: Path | str) -> None:
        real_fsync_dir(path)
        if Path(path) == directory:
            pending.clear()

    monkeypatch.setattr(MappedFile, "delete", delete)
    monkeypatch.setattr(mapped_file_queue, "fsync_dir", fsync_dir)
    return found


def _kept_copies_removed(directory: Path) -> None:
    for kept in directory.glob("*.kept"):
        kept.unlink()


@pytest.mark.parametrize("by", ["time", "offset"])
def test_retention_leaves_no_image_with_a_hole(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, by: str) -> None:
    directory = tmp_path / "queue"
    queue = _filled(directory)
    images = _crash_images(monkeypatch, directory, tmp_path / "images")
    try:
        if by == "time":
            deleted = queue.delete_expired_by_time(0, 0, clean_immediately=True, batch_max=FILE_COUNT)
        else:
            deleted = queue.delete_expired_by_offset(FILE_COUNT * FILE_SIZE, lambda mf: mf.file_end - 1)
        assert deleted == FILE_COUNT - 1
    finally:
        queue.close()
    monkeypatch.undo()
    for image in images:
        _kept_copies_removed(image)
        try:
            MappedFileQueue.open(image, FILE_SIZE, writable=False).close()
        except MappedFileError as exc:
            pytest.fail(f"a power cut during retention leaves a store that does not open: {exc}")
