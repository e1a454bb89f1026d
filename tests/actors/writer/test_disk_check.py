"""When the writer looks at the disk (``DiskState.due_ms``): on the check's cadence while it writes,
while sends are refused for a full disk and while the disk is past the forcible ratio; an idle writer
fills no disk, so it then looks only with the cleanup's cadence and sleeps in between."""

from __future__ import annotations

from mqstore.actors.writer.state import DiskState
from mqstore.engine.reclaim.retention import CleanupDecision

CHECK_MS, CLEAN_MS = 1_000, 10_000


def _checked(end: int, *, full: bool = False, forcibly: bool = False) -> DiskState:
    disk = DiskState(CleanupDecision(False, forcibly, full, 0.95 if full or forcibly else 0.1, ""))
    disk.checked_end = end
    return disk


def test_an_idle_writer_looks_at_the_disk_only_with_the_cleanup() -> None:
    assert _checked(4096).due_ms(CHECK_MS, CLEAN_MS, 4096) == CLEAN_MS


def test_a_writer_that_wrote_since_its_last_look_looks_on_the_checks_cadence() -> None:
    assert _checked(4096).due_ms(CHECK_MS, CLEAN_MS, 8192) == CHECK_MS
    assert DiskState().due_ms(CHECK_MS, CLEAN_MS, 0) == CHECK_MS  # never looked: at once on the cadence


def test_a_full_disk_is_watched_for_the_drop_that_resumes_sends() -> None:
    assert _checked(4096, full=True).due_ms(CHECK_MS, CLEAN_MS, 4096) == CHECK_MS
    assert _checked(4096, forcibly=True).due_ms(CHECK_MS, CLEAN_MS, 4096) == CHECK_MS


def test_a_cleanup_due_before_the_check_waits_for_the_check() -> None:
    assert _checked(4096).due_ms(CHECK_MS, 500, 4096) == CHECK_MS
