"""The commitlog writer's prefault thread: populates the writer's own mapping ahead of its written
end (``mqstore.engine.log.prefault.WriterPrefault``) beside the request loop instead of inside its appends.

The loop hands over a range (``hand``: its last file and written position, only when a step is due,
so most rounds cost one comparison); the thread populates it a step (1 MiB) at a time, through a
libc call that releases the GIL, so on a second core the page faults run while the loop serves.

A file must not be unmapped while the thread advises it (a use after unmap). The thread advises
only while it holds ``_busy`` and only a file that is not closed; whatever closes a commitlog file
of the writer (retention's deletes, the final close) does so inside ``paused()``, which waits at
most one step. Rolls close nothing: the file rolled out of stays mapped in the queue. ``stop`` joins
the thread before the actor closes its commitlog.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.prefault import DEFAULT_PREFAULT_AHEAD_BYTES, WriterPrefault

log = logging.getLogger("mqstore")


def ahead_bytes_for(configured: int | None, sync_flush: bool) -> int:
    """``[store] prefault_ahead_bytes``, or unset, the default for the flush mode: off under
    SYNC_FLUSH, where the whole-file fsync after every batch used to write the populated pages back
    (as zeros) before the writer filled them; the flush now syncs only what was written, and the
    default waits for a measurement at 4 KiB (see ``mqstore.engine.log.prefault`` for the figures)."""
    if configured is not None:
        return configured
    return 0 if sync_flush else DEFAULT_PREFAULT_AHEAD_BYTES


class PrefaultThread:
    def __init__(self, ahead_bytes: int) -> None:
        """Nothing runs until ``start``; with ``ahead_bytes`` 0 (off) nothing ever does, and ``hand``
        and ``paused`` cost next to nothing."""
        self.prefault = WriterPrefault(ahead_bytes)
        self._wake = threading.Condition()
        self._busy = threading.RLock()  # the writer's loop may let a file go (open files' eviction) inside paused()
        self._target: MappedFile | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="commitlog-prefault", daemon=True)

    def start(self) -> None:
        """Start the thread unless populating is off (or the platform cannot: logged once)."""
        if self.prefault.ahead_bytes > 0 and not self.prefault.enabled:
            log.warning("the writer's mapping is not prefaulted: %s", self.prefault.error)
        if self.prefault.enabled:
            self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def hand(self, mf: MappedFile | None) -> None:
        """The writer's last file, after its end moved: wakes the thread when the populated range
        runs short. Reads the thread's cursors without a lock: at worst a step is handed twice."""
        if mf is None or not self.prefault.due(mf, mf.written_pos):
            return
        with self._wake:
            self._target = mf
            self._wake.notify()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the thread off the mappings: wrap every close or delete of a commitlog file."""
        with self._busy:
            yield

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread.ident is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._target is None and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
                mf = self._target
                assert mf is not None
            with self._busy:  # mf is read only here, where no close can run: closed is final
                done = 0 if mf.closed else self.prefault.step(mf, mf.written_pos)
            if done == 0:
                with self._wake:
                    if self._target is mf:
                        self._target = None  # caught up (or off): sleep until handed more
                if not self.prefault.enabled:
                    log.warning("the writer's mapping is no longer prefaulted: %s", self.prefault.error)
                    return
