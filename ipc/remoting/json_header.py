"""RocketMQ's JSON command header (serialize type 0), read and written without the json module's
per-call set-up on the common shape.

The header is one JSON object::

    {"code":INT,"language":STR,"version":INT,"opaque":INT,"flag":INT,"remark":STR|null,
     "extFields":{STR:STR,...},"serializeTypeCurrentRPC":"JSON"}

(in that order when mqstore writes it, compact separators, ASCII with ``\\uXXXX`` escapes: what
``json.dumps(header, separators=(",", ":"))`` gives). ``loads`` reads a header that starts with
``{`` and is plain UTF-8 (whitespace after it allowed) in one call of the C scanner; anything else
(whitespace before it, another encoding, a fault) goes through ``json.loads``, so values and errors
are ``json.loads``'s.
``dumps`` joins the parts itself when every field has the type the header holds and hands any other
value to the encoder, so its bytes are ``json.dumps``'s either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii as _string
from typing import Any

_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_WHITESPACE = " \t\n\r"  # what json.loads skips after the value


def loads(header: bytes) -> Any:
    """``json.loads(header)``: same value, same errors."""
    if header[:1] == b"{" and header[1:2] != b"\x00":  # a NUL second byte means UTF-16 to json.loads
        try:
            text = header.decode()
            value, end = _SCAN(text, 0)
        except (UnicodeDecodeError, json.JSONDecodeError, StopIteration):
            pass  # json.loads below says what is wrong (or reads what strict UTF-8 refused)
        else:
            if end == len(text) or not text[end:].strip(_WHITESPACE):  # the C++ client ends it with a newline
                return value
    return json.loads(header)


def dumps(code: int, language: str, version: int, opaque: int, flag: int, remark: str | None,
          ext: Mapping[str, Any]) -> bytes:
    """``json.dumps`` of the header in mqstore's field order, compact, as bytes."""
    if (code.__class__ is int and version.__class__ is int and opaque.__class__ is int
            and flag.__class__ is int and language.__class__ is str and (remark is None or remark.__class__ is str)):
        try:
            fields = ",".join([_string(k) + ":" + _string(v) for k, v in ext.items()])
        except TypeError:
            pass  # a key or value that is not a string: the encoder's business
        else:
            return (f'{{"code":{code},"language":{_string(language)},"version":{version},"opaque":{opaque},'
                    f'"flag":{flag},"remark":{"null" if remark is None else _string(remark)},'
                    f'"extFields":{{{fields}}},"serializeTypeCurrentRPC":"JSON"}}').encode()
    header = {"code": code, "language": language, "version": version, "opaque": opaque, "flag": flag,
              "remark": remark, "extFields": ext, "serializeTypeCurrentRPC": "JSON"}
    return _ENCODER.encode(header).encode()
