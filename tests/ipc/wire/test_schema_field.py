"""``schema.field``: every request field every actor reads goes through it; its exact-type fast path
must refuse and accept what the full checks do."""

from __future__ import annotations

from typing import Any

import pytest

from mqstore.ipc.wire import schema


@pytest.mark.parametrize(("value", "kind", "bounds", "wanted"), [
    (5, int, {}, 5),
    (5, int, {"lo": 0, "hi": 9}, 5),
    (True, bool, {}, True),
    ("Orders", str, {}, "Orders"),
    (b"raw", (bytes, str), {}, b"raw"),
    (True, (int, bool), {}, True),
    ([1, 2], list, {}, [1, 2]),
])
def test_a_field_of_the_kind_asked_for_is_returned(value: Any, kind: Any, bounds: dict[str, int], wanted: Any
                                                   ) -> None:
    assert schema.field({"f": value}, "f", kind, **bounds) == wanted


@pytest.mark.parametrize(("value", "kind", "bounds", "reason"), [
    (True, int, {}, "got a boolean"),
    (False, (int, str), {}, "got a boolean"),
    (1, bool, {}, "must be bool, got int"),
    ("5", int, {}, "must be int, got str"),
    (5, str, {}, "must be str, got int"),
    (-1, int, {"lo": 0}, "is below 0"),
    (10, int, {"hi": 9}, "is above 9"),
    (1 << 64, int, {"lo": 0, "hi": (1 << 63) - 1}, "is above"),
])
def test_a_field_of_another_kind_or_out_of_bounds_is_refused(value: Any, kind: Any, bounds: dict[str, int],
                                                            reason: str) -> None:
    with pytest.raises(schema.SchemaError, match=reason):
        schema.field({"f": value}, "f", kind, **bounds)


def test_a_missing_or_null_field_takes_its_default_or_is_refused() -> None:
    assert schema.field({}, "f", int, default=7) == 7
    assert schema.field({"f": None}, "f", int, default=None) is None
    with pytest.raises(schema.SchemaError, match="missing field 'f'"):
        schema.field({"f": None}, "f", int)
