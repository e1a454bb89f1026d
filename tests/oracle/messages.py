"""The Python loop that engine/csrc/bodies.c replaced (``MessageBatch.bodies``): not a runtime path, only
what the property test holds ``_native.packed_bodies`` (and the batch's bodies through it) to, body for
body, and refusal for refusal. A record's fields are read from its own bytes: one that ends before its
BODYLENGTH does is too short for its header, whatever follows it (engine/csrc/record.h, mq_record_body)."""

from __future__ import annotations

import struct

from mqstore.engine.log.record import SYSFLAG_POS, body_length_pos
from mqstore.ipc.wire.messages import ReplyError, _plain

_INT = struct.Struct(">i")


def bodies(data: bytes, starts: list[int], sizes: list[int]) -> list[bytes]:
    """Every message's body as its producer gave it (inflated when compressed), nothing else decoded."""
    out = []
    try:
        for start, size in zip(starts, sizes, strict=True):
            if _INT.unpack_from(data, start)[0] != size:
                raise ReplyError(f"no {size}-byte record at byte {start} of a packed reply")
            record = data[start:start + size]  # every field is read from the record's own bytes
            (sys_flag,) = _INT.unpack_from(record, SYSFLAG_POS)
            pos = body_length_pos(sys_flag)
            (body_len,) = _INT.unpack_from(record, pos)
            if body_len < 0 or pos + 4 + body_len > size:
                raise ReplyError(f"a body of {body_len} bytes outside its record")
            pos += start
            out.append(_plain(data[pos + 4:pos + 4 + body_len], sys_flag))
    except struct.error as exc:
        raise ReplyError(f"a record too short for its header: {exc}") from None
    return out
