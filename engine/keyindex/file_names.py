"""The names in ``{store}/index/``: each index file is named by the local time of its creation,
``yyyyMMddHHmmssSSS`` (RocketMQ's ``UtilAll.timeMillisToHumanString``), so name order is creation
order. A file being created is ``{name}.tmp`` until it is allocated and headed; one left by a kill
is removed at open. Other names are not the index's and are left alone.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timedelta
from pathlib import Path

from mqstore.engine.keyindex.index_file import TMP_SUFFIX

INDEX_FILE_NAME = re.compile(r"\d{17}")  # yyyyMMddHHmmssSSS
_TMP_NAME = re.compile(r"\d{17}" + re.escape(TMP_SUFFIX))
_NAME_TIME_FORMAT = "%Y%m%d%H%M%S"


def index_file_name(now_ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: local time as 17 digits, e.g. ``20240131235959123``."""
    seconds, millis = divmod(now_ms, 1000)
    name = time.strftime(_NAME_TIME_FORMAT, time.localtime(seconds)) + f"{millis:03d}"
    if not INDEX_FILE_NAME.fullmatch(name):
        raise ValueError(f"clock value {now_ms} does not give a 17-digit index file name")
    return name


def next_index_file_name(index_dir: Path, now_ms: int, newest: str) -> str:
    """The name of a file created now after ``newest`` ("" for none): bumped by 1 ms while taken,
    and kept ascending if the clock went back."""
    name = index_file_name(now_ms)
    while name <= newest or (index_dir / name).exists():
        name = _name_plus_one_ms(max(name, newest))
    return name


def _name_plus_one_ms(name: str) -> str:
    # Naive wall-clock arithmetic on the name itself: the result always sorts after it, even when
    # local time repeats an hour.
    moment = datetime.strptime(name[:14], _NAME_TIME_FORMAT) + timedelta(milliseconds=int(name[14:]) + 1)
    return moment.strftime(_NAME_TIME_FORMAT) + f"{moment.microsecond // 1000:03d}"


def index_file_names(index_dir: Path) -> list[str]:
    """The index files' names in ``index_dir``, oldest first (none when it does not exist)."""
    if not index_dir.is_dir():
        return []
    return sorted(e.name for e in os.scandir(index_dir)
                  if e.is_file(follow_symlinks=False) and INDEX_FILE_NAME.fullmatch(e.name))


def remove_unfinished(index_dir: Path) -> None:
    """Remove the ``.tmp`` files of creations that were killed."""
    for entry in os.scandir(index_dir):
        if entry.is_file(follow_symlinks=False) and _TMP_NAME.fullmatch(entry.name):
            os.unlink(entry.path)
