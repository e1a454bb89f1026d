"""The deleted-groups table: numbers rise over all groups, another broker's number is taken only when
newer, the file round-trips (its backup when it is torn), and the oldest deletions go past the bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine.meta import deleted_groups
from mqstore.engine.meta.deleted_groups import DeletedGroups, DeletedGroupsError, decode


def test_deletions_are_numbered_and_a_newer_number_is_taken_once(tmp_path: Path) -> None:
    master = DeletedGroups()
    assert (master.record("A"), master.record("B"), master.record("A")) == (1, 2, 3)
    slave = DeletedGroups()
    assert slave.newer("A", 3) and slave.newer("B", 2)
    slave.take("A", 3)
    slave.take("A", 1)  # an older number never takes it back
    assert slave.deleted == {"A": 3} and not slave.newer("A", 3)
    path = tmp_path / "config" / "deletedGroups.json"
    path.parent.mkdir()
    master.persist(path)
    assert DeletedGroups.load(path).deleted == {"A": 3, "B": 2}
    promoted = DeletedGroups.load(path)
    assert promoted.record("C") == 4  # a promoted slave numbers on from what it holds
    assert DeletedGroups.load(tmp_path / "none.json").deleted == {}


@pytest.mark.parametrize("data", [b"{}", b'{"deleted": {"A": 0}}', b'{"deleted": []}', b"not json"])
def test_a_file_that_is_not_a_table_is_refused(data: bytes) -> None:
    with pytest.raises(DeletedGroupsError):
        decode(data)


def test_past_the_bound_the_oldest_deletions_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deleted_groups, "MAX_DELETED_GROUPS", 3)
    table = DeletedGroups()
    for group in "ABCD":
        table.record(group)
    assert table.deleted == {"B": 2, "C": 3, "D": 4}
