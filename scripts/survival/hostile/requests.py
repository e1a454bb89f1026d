"""What hostile clients send: a valid request of every op the writer and readers serve, the junk
values each field is replaced with, frames that are not valid requests at all, and producer-encoded
sends (a map, then the records as a frame of their own) in every shape a writer must refuse.
Shared by ``mqstore.scripts.survival.hostile`` (against a running broker) and ``mqstore.scripts.survival.fuzz``
(against the decoders
alone)."""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from typing import Any

import msgpack

from mqstore.engine.batch.record_batch import COLUMNS
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.encoded import OP_SEND_ENCODED, BatchEncoder, Encoding, request_fields
from mqstore.ipc.wire.messages import Outgoing

RECEIPT = ["G", "Good", 0, 0]

# (route, op, a valid set of fields); a send's fields are one message of its ``msgs``
REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("ingress", "send", {"topic": "Hostile", "body": b"x", "tags": "T", "keys": ["k"], "props": {"a": "b"},
                         "queue": 0, "shard": "s", "flag": 0, "born_ms": 1, "born_host": ["127.0.0.1", 1],
                         "reconsume_times": 0, "sys_flag": 0}),
    ("ingress", "create_topic", {"topic": "HostileT", "queues": 2}),
    ("ingress", "topics", {}),
    ("ingress", "ping", {}),
    ("reader", "pull", {"group": "G", "topic": "Good", "queue": 0, "offset": 0, "max": 4, "max_bytes": 1024,
                        "tags": "*", "wait_ms": 0, "raw": False}),
    ("reader", "query_key", {"topic": "Good", "key": "k", "max": 4, "begin_ms": 0, "end_ms": 1 << 62}),
    ("reader", "query_uniq", {"topic": "Good", "uniq_key": "u"}),
    ("reader", "view_id", {"msg_id": "7F00000100002A9F0000000000000000"}),
    ("reader", "offset_by_time", {"topic": "Good", "queue": 0, "ts_ms": 0, "upper": False}),
    ("reader", "queue_info", {"topic": "Good"}),
    ("reader", "commit_offset", {"group": "G", "topic": "Good", "queue": 0, "offset": 0}),
    ("reader", "fetch_offset", {"group": "G", "topic": "Good", "queue": 0}),
    ("reader", "ping", {}),
    ("reader", "ack_pull", {"group": "G", "topic": "Good", "queue": 0, "consumer": "c", "max": 2, "prefetch": 2,
                            "visibility_ms": 1000, "tags": "*", "wait_ms": 0}),
    ("reader", "ack", {"receipts": [RECEIPT]}),
    ("reader", "nack", {"receipts": [RECEIPT], "requeue": True}),
    ("reader", "ack_release", {"group": "G", "topic": "Good", "queues": [0], "consumer": "c", "read": [[0, 0]]}),
]

JUNK: list[Any] = [None, True, -1, (1 << 64) - 1, -(1 << 63), 1.5, float("nan"), "", "x" * 5000, "../../etc",
                   "%DLQ%", b"\x00\xff", [], [1, [2, [3]]], [["a", "b", -1, 1 << 40]] * 3, {}, {"k": 1},
                   {"": None}]


def mutants(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    """Every request with one field replaced by every junk value, and a few with several at once."""
    out = []
    for route, op, fields in REQUESTS:
        for name in fields:
            for junk in JUNK:
                out.append((route, op, dict(fields, **{name: junk})))
        for _ in range(8):
            mixed = {k: rng.choice(JUNK) if rng.random() < 0.5 else v for k, v in fields.items()}
            out.append((route, op, mixed))
    return out


def as_request(op: str, request_id: int, fields: dict[str, Any]) -> bytes:
    body = {"msgs": [fields]} if op == "send" else fields
    return msgpack.packb(schema.request(op, request_id, **body), use_bin_type=True)  # type: ignore[no-any-return]


def invalid_frames(rng: random.Random, count: int) -> list[bytes]:
    """Frames no broker should accept: random bytes, cut-off maps, non-maps, other versions, a map
    key that is not a string, deep nesting."""
    valid = as_request("ping", 1, {})
    fixed = [b"", b"\xc1", b"\x80", b"\x91\x01", msgpack.packb([1, 2, 3]), msgpack.packb("op"),
             msgpack.packb({"v": 2, "op": "ping", "id": 1}), msgpack.packb({"v": 1, "op": 7, "id": 1}),
             msgpack.packb({1: 2}), msgpack.packb({"v": 1, "op": "ping", "id": [1] * 3}),
             b"\x91" * 2000 + b"\x01", b"\xdf\xff\xff\xff\xff", b"\xdd\xff\xff\xff\xff", b"\xc6\x7f\xff\xff\xff",
             msgpack.packb(msgpack.ExtType(1, b"obj")),
             msgpack.packb({"v": 1, "op": "ping", "id": msgpack.ExtType(5, b"x")}), valid[:-1], valid + b"\x00"]
    frames = list(fixed)
    while len(frames) < count:
        choice = rng.random()
        if choice < 0.4:
            frames.append(rng.randbytes(rng.randint(1, 64)))
        elif choice < 0.8:
            mutated = bytearray(valid)
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            frames.append(bytes(mutated))
        else:
            frames.append(valid[:rng.randrange(len(valid))])
    return frames[:max(count, len(fixed))]


def encoded_requests(encoding: Encoding, rng: random.Random) -> dict[str, list[bytes]]:
    """Name -> frames of a ``send_encoded`` request for a writer encoding as ``encoding``: ``valid``
    first, then the shapes to be refused with a reason: parts missing, miscounted or too many,
    records cut short, padded or replaced, columns that disagree with them, key text whose bounds
    leave it, go back, count other records or are torn, or that is not UTF-8, junk in the map's
    fields, and parts on ops that take none."""
    batch = BatchEncoder(encoding).encode([Outgoing("Hostile", rng.randbytes(40), tags="T", keys=("k",)),
                                           Outgoing("Hostile", b"y" * 300, queue_id=0)])
    fields, records = request_fields(batch), batch.records
    head = schema.request(OP_SEND_ENCODED, 1, **fields)

    def announcing(count: Any, *parts: bytes, **changed: Any) -> list[bytes]:
        return [schema.pack({**head, **changed, "parts": count}), *parts]
    flipped = bytearray(records)
    flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
    out: dict[str, list[bytes]] = {
        "valid": _frames(schema.pack_message(head, [records])),
        "no_parts": [schema.pack(head)],
        "records_in_the_map": [schema.pack({**head, "records": records})],
        "announced_but_missing": announcing(1),
        "more_than_announced": announcing(1, records, records),
        "two_parts": announcing(2, records, records),
        "too_many_parts": announcing(schema.MAX_PARTS + 1, *[records] * (schema.MAX_PARTS + 1)),
        "records_cut_short": announcing(1, records[:-7]),
        "records_padded": announcing(1, records + bytes(9)),
        "records_empty": announcing(1, b""),
        "records_random": announcing(1, rng.randbytes(len(records))),
        "records_flipped": announcing(1, bytes(flipped)),
        "columns_doubled": announcing(1, records, columns=fields["columns"] * 2),
        "columns_torn": announcing(1, records, columns=fields["columns"][:COLUMNS.itemsize + 3]),
        "key_bounds_past_text": announcing(1, records, key_bounds=struct.pack("<5i", 0, 1, 1 << 20, 1 << 20, 1 << 20)),
        "key_bounds_going_back": announcing(1, records, key_bounds=fields["key_bounds"][::-1]),
        "key_bounds_miscounted": announcing(1, records, key_bounds=fields["key_bounds"][:-4]),
        "key_bounds_torn": announcing(1, records, key_bounds=fields["key_bounds"][:-1]),
        "keys_not_utf8": announcing(1, records, keys=b"\xff" * len(fields["keys"])),
        "map_not_a_map": [b"\x91\x01", records],
        "part_on_ping": _frames(schema.pack_message(schema.request("ping", 1), [b"x"])),
        "part_on_send": _frames(schema.pack_message(
            schema.request("send", 1, msgs=[{"topic": "Hostile", "body": b"x"}]), [records])),
    }
    for junk in (-1, True, "1", [1], None, 1.5, 1 << 40):
        out[f"parts_is_{junk!r}"] = announcing(junk, records)
    for name in fields:
        for junk in rng.sample(JUNK, 4):
            out[f"{name}_is_{junk!r}"[:60]] = announcing(1, records, **{name: junk})
    return out


def _frames(message: Sequence[bytes | memoryview]) -> list[bytes]:
    return [bytes(frame) for frame in message]
