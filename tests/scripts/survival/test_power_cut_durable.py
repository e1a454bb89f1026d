"""The power-cut record's format (the shim's C table is the reader's; a log cut inside a record reads up
to it) and the recorder's build."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from mqstore.scripts.survival.power_cut import durable, shim
from mqstore.scripts.survival.power_cut.durable import Kind


def test_the_shims_event_table_is_the_readers() -> None:
    defines = dict(re.findall(r"#define (EV_\w+) (\d+)", shim.SOURCE.read_text()))
    kinds = {name[3:]: int(value) for name, value in defines.items()
             if not name.startswith(("EV_FLAG_", "EV_HEAD"))}
    assert kinds == {kind.name: kind.value for kind in Kind}
    assert int(defines["EV_HEAD_SIZE"]) == durable.HEAD_SIZE == durable.HEAD.size
    flags = {name: int(value) for name, value in defines.items() if name.startswith("EV_FLAG_")}
    assert flags == {"EV_FLAG_EXCHANGE": durable.FLAG_EXCHANGE, "EV_FLAG_SIZE": durable.FLAG_SIZE,
                     "EV_FLAG_DIR": durable.FLAG_DIR}


def test_a_record_cut_inside_an_event_reads_up_to_it() -> None:
    event = durable.Event(Kind.CREATE, 0, 1, 2, 3, 4, 0, 0, "a/b", "")
    raw = durable.encode_event(event) * 2
    assert durable.decode_events(raw) == [event, event]
    for cut in range(len(raw) // 2, len(raw)):
        assert durable.decode_events(raw[:cut]) == [event]


def test_build_reuses_the_library_and_says_when_gcc_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert shim.build() == shim.build()
    monkeypatch.setenv(shim.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(shim.ShimBuildError, match="gcc not found"):
        shim.build()


def test_an_unwritable_cache_falls_back_to_the_temp_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_bytes(b"")
    monkeypatch.delenv(shim.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert shim.cache_dir().parent == Path(tempfile.gettempdir())
