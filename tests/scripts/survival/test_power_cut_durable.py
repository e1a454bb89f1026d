"""The power-cut record's format: the shim's C table is the reader's, and a log cut inside a record
reads up to it."""

from __future__ import annotations

import re

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
