"""A message's keys as the client takes them: a string is one key, a list or tuple several."""

from __future__ import annotations

from typing import Any

import pytest

from mqstore.ipc.wire.messages import Outgoing, message_keys


def test_a_string_is_one_key_and_a_list_or_tuple_several() -> None:
    assert message_keys("one-key") == ("one-key",)
    assert message_keys(["a", "b"]) == ("a", "b") == message_keys(("a", "b"))
    assert Outgoing("T", b"x", keys="one-key").keys == ("one-key",)  # type: ignore[arg-type]
    assert Outgoing.of({"topic": "T", "body": b"x", "keys": "one-key"}).to_wire()["keys"] == ["one-key"]


@pytest.mark.parametrize("keys", [b"bytes", 7, {"a"}, ["a", 1], None])
def test_anything_else_is_a_type_error(keys: Any) -> None:
    with pytest.raises(TypeError, match="keys must be a string"):
        message_keys(keys)
    with pytest.raises(TypeError, match="keys must be a string"):
        Outgoing("T", b"x", keys=keys)
