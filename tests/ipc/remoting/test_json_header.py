"""The JSON header's own reader and writer against the json module: the same values and errors from
``loads``, the same bytes from ``dumps``, whatever the header holds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.ipc.remoting import json_header

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(["", "KEYS\x01k\x02", "é\u2028"])
numbers = st.integers(min_value=-(1 << 70), max_value=1 << 70)
scalars = texts | numbers | st.booleans() | st.none() | st.floats(allow_nan=False)
exts = st.dictionaries(texts, texts | numbers | st.booleans(), max_size=6)
ints = numbers | st.booleans()  # a bool is an int to Python and "true" to JSON


def reference(code: Any, language: Any, version: Any, opaque: Any, flag: Any, remark: Any, ext: Any) -> bytes:
    return json.dumps({"code": code, "language": language, "version": version, "opaque": opaque, "flag": flag,
                       "remark": remark, "extFields": ext, "serializeTypeCurrentRPC": "JSON"},
                      separators=(",", ":")).encode()


@given(ints, texts, ints, ints, ints, st.none() | texts, exts)
def test_dumps_writes_what_json_dumps_writes(code: int, language: str, version: int, opaque: int, flag: int,
                                            remark: str | None, ext: dict[str, Any]) -> None:
    assert json_header.dumps(code, language, version, opaque, flag, remark, ext) == reference(
        code, language, version, opaque, flag, remark, ext)


@given(scalars, scalars, exts | st.dictionaries(numbers, texts, max_size=2))
def test_dumps_of_unusual_fields_still_matches_the_encoder(language: Any, remark: Any, ext: dict[Any, Any]) -> None:
    assert json_header.dumps(1, language, 0, 2, 0, remark, ext) == reference(1, language, 0, 2, 0, remark, ext)


def outcome(decode: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "value", decode(data)
    except Exception as exc:
        return type(exc).__name__, str(exc)


headers = st.fixed_dictionaries({"code": numbers, "remark": st.none() | texts, "extFields": exts},
                                optional={"flag": scalars, "language": scalars})
layouts = st.sampled_from([{"separators": (",", ":")}, {"ensure_ascii": False}, {"indent": 1}, {}])


@given(headers, layouts, st.sampled_from(["", "\n", " \r\n\t", "x", " ,", "\x0b"]),
       st.sampled_from(["", " ", "\ufeff"]), st.sampled_from(["utf-8", "utf-16-le", "utf-16", "utf-32"]))
def test_loads_reads_what_json_loads_reads(header: dict[str, Any], layout: dict[str, Any], tail: str, head: str,
                                          encoding: str) -> None:
    data = (head + json.dumps(header, **layout) + tail).encode(encoding)
    assert outcome(json_header.loads, data) == outcome(json.loads, data)


@given(st.binary(max_size=40).map(lambda b: b"{" + b))
def test_loads_of_any_bytes_after_a_brace_fails_or_reads_as_json_loads(data: bytes) -> None:
    assert outcome(json_header.loads, data) == outcome(json.loads, data)


def test_the_cpp_clients_header_is_read_by_the_scanner_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    header = b'{"code":10,"extFields":{"queueId":0,"topic":"T"},"flag":0,"language":"CPP","opaque":7,"remark":""}\n'
    expected = json.loads(header)

    def refuse(data: bytes) -> None:
        raise AssertionError("json.loads was called")
    monkeypatch.setattr(json_header.json, "loads", refuse)
    assert json_header.loads(header) == expected
