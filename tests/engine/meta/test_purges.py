from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine.meta.metafile import MetafileError
from mqstore.engine.meta.purges import PURGED_QUEUES_FILE, PurgedQueues


def test_floors_only_rise_and_survive_a_reload(tmp_path: Path) -> None:
    path = tmp_path / PURGED_QUEUES_FILE
    assert PurgedQueues.load(path).floor("T", 0) == 0  # never written: nothing purged
    table = PurgedQueues()
    assert table.raise_floors("T", [(0, 10), (3, 7)])
    assert not table.raise_floors("T", [(0, 4)])  # never back
    table.persist(path)
    again = PurgedQueues.load(path)
    assert (again.floor("T", 0), again.floor("T", 3), again.floor("T", 1), again.floor("U", 0)) == (10, 7, 0, 0)


def test_an_unreadable_table_is_an_error_not_an_empty_one(tmp_path: Path) -> None:
    path = tmp_path / PURGED_QUEUES_FILE
    path.parent.mkdir()
    path.write_text('{"floors": {"T": {"0": -1}}}')
    with pytest.raises(MetafileError):
        PurgedQueues.load(path)
