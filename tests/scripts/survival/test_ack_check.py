"""mqstore.scripts.survival.ack_check on a store written in process: each kind of broken promise is counted,
with an example, and retention's deletions are told apart from losses."""

from __future__ import annotations

from pathlib import Path

from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.engine.reclaim.retention import RetentionPolicy
from mqstore.scripts.survival.ack_check import check_acked
from mqstore.scripts.survival.send_log import digest
from tests.conftest import TINY


def test_every_acknowledged_send_readable_at_its_offset_is_ok(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(geometry=TINY)) as store:
        results = store.put_batch([Message("T", f"m{i}".encode()) for i in range(5)], queue_id=1)
    acked = [("T", 1, r.queue_offset, digest(f"m{i}".encode())) for i, r in enumerate(results)]
    check = check_acked(tmp_path, acked)
    assert check.ok and check.acked == 5
    assert check.counts == {"lost": 0, "garbled": 0, "offset_reused": 0, "expired": 0}
    assert not check_acked(tmp_path, []).ok  # nothing acknowledged proves nothing


def test_lost_garbled_and_reused_offsets_are_counted_with_examples(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(geometry=TINY)) as store:
        store.put_batch([Message("T", b"a"), Message("T", b"b")], queue_id=0)
    check = check_acked(tmp_path, [("T", 0, 0, digest(b"a")),
                                   ("T", 0, 1, digest(b"not b")),  # another body at its offset
                                   ("T", 0, 7, digest(b"c")),      # nothing there
                                   ("T", 0, 0, digest(b"a"))])     # one offset acknowledged twice
    assert not check.ok and check.acked == 4
    assert check.counts == {"lost": 1, "garbled": 1, "offset_reused": 1, "expired": 0}
    assert (check.lost, check.garbled, check.offset_reused) == (["T/0@7"], ["T/0@1"], ["T/0@0"])


def test_sends_in_files_retention_deleted_are_expired_not_lost(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(geometry=TINY)) as store:
        results = store.put_batch([Message("T", bytes([i]) * 300) for i in range(120)])
        store.clean_expired(RetentionPolicy(delete_file_batch_max=2), used_ratio=0.87)  # a full disk's rule
        first_kept = store.min_queue_offset("T", 0)
    assert first_kept > 0
    check = check_acked(tmp_path, [("T", 0, r.queue_offset, digest(bytes([i]) * 300)) for i, r in enumerate(results)])
    assert check.ok and check.counts["expired"] == first_kept and check.counts["lost"] == 0
