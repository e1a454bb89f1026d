"""An index file's mapping, with a process's bounded set of open files (``mqstore.engine.log.open_files``):
made on first use, let go when idle, deleted or past the set's bound, and made again on the next use.

At default geometry an index file is about 420 MB, and a reader or the index builder would otherwise
keep every one mapped from the moment it first saw it: the disk blocks of files retention deleted
included. The numpy views of the header, slots and entries (what the buckets' kernels take) borrow
the mapping; they are kept between uses and dropped before a release, so a release fails
(``BufferError``) only while a caller still holds one, and the file then stays until a later sweep
finds it free. The raw mapping a use gets is valid within the round that asked for it.

A file found deleted, or another file made at its path, is ``gone``: never mapped again (``mapping``
and ``views`` say None).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.engine.log.file_identity import FileIdentity, identity, map_same_file
from mqstore.engine.log.open_files import OpenFiles, unmap

Views = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]


class IndexMapping:
    __slots__ = ("_identity", "_make_views", "_mm", "_open_files", "_path", "_size", "_views", "_writable", "gone",
                 "used")

    def __init__(self, path: Path, size: int, writable: bool, file_id: FileIdentity, mm: mmap.mmap | None,
                 make_views: Callable[[mmap.mmap], Views], open_files: OpenFiles | None) -> None:
        self._path = path
        self._size = size
        self._writable = writable
        self._identity = file_id
        self._mm = mm
        self._make_views = make_views
        self._views: Views | None = None
        self._open_files = open_files
        self.gone = False
        self.used = True
        if mm is not None and open_files is not None:
            open_files.opened(self)

    def mapping(self) -> mmap.mmap | None:
        """The mapping, made again if it was let go; None once the file is gone."""
        mm = self._mm
        if mm is None:
            mm = None if self.gone else map_same_file(self._path, self._size, self._writable, self._identity)
            if mm is None:
                self.gone = True
                return None
            self._mm = mm
            if self._open_files is not None:
                self._open_files.opened(self)
        self.used = True
        return mm

    def views(self) -> Views | None:
        """The header, slots and entries views; None once the file is gone."""
        views = self._views
        if views is None:
            mm = self.mapping()
            if mm is None:
                return None
            views = self._views = self._make_views(mm)
        self.used = True
        return views

    @property
    def mapped(self) -> bool:
        return self._mm is not None

    def release(self) -> bool:
        """Unmap until the next use; False while a view of the mapping is out (borrowed)."""
        if self._mm is not None:
            self._views = None
            if not unmap(self._mm):
                return False
            self._mm = None
        return True

    def deleted(self) -> bool:
        """Whether the path no longer names this file; remembered in ``gone``."""
        if not self.gone:
            try:
                self.gone = not identity(self._path).same_file(self._identity)
            except FileNotFoundError:
                self.gone = True
        return self.gone

    def close(self) -> None:
        """Unmap for good; a view still out raises BufferError (the mapping stays, as for ``mmap.close``)."""
        self._views = None  # a view left alive would keep the map exported (BufferError)
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._open_files is not None:
            self._open_files.closed(self)
