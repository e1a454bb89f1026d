"""Fuzz targets on pure decoders: the commitlog record decoder (``mqstore.engine.log.record``) and the
RocketMQ remoting front's frame and batch-body decoders (``mqstore.ipc.remoting.codec``)."""

from __future__ import annotations

import contextlib
import struct

from mqstore.engine import Host
from mqstore.engine.log.record import DecodeKind, decode_record, encode_blank, encode_record, seal_record
from mqstore.scripts.survival.fuzz.targets import Finding

LOCAL = Host("127.0.0.1", 10911)


def record_seeds() -> list[bytes]:
    seeds = []
    for i, (topic, props, host) in enumerate([("T", {}, LOCAL), ("Orders", {"KEYS": "a b", "TAGS": "x"}, LOCAL),
                                              ("V2" * 70, {"k": "v" * 300}, Host("::1", 9876))]):
        rec = encode_record(topic=topic, body=bytes(range(i * 40 % 256)) * 2, properties=props, born_host=host,
                            store_host=LOCAL, queue_offset=i, phys_offset=i * 100, prop_crc=True)
        seal_record(rec, 0, len(rec))
        seeds.append(bytes(rec))
    return [*seeds, encode_blank(64), seeds[0] + seeds[1]]


def check_record(data: bytes) -> None:
    for crc in (True, False):
        decoded = decode_record(data, 0, check_crc=crc, require_prop_crc=crc)
        if decoded.kind is DecodeKind.RECORD and not 0 < decoded.size <= len(data):
            raise Finding(f"a record of size {decoded.size} decoded from {len(data)} bytes")


# -- the RocketMQ remoting front's frames ---------------------------------------------------------------


def remoting_seeds() -> list[bytes]:
    from mqstore.ipc.remoting.codec import JSON_TYPE, ROCKETMQ_TYPE, RemotingCommand, encode_command
    commands = [RemotingCommand(10, 7, 0, "remark", {"topic": "T", "queueId": "0", "flag": "0"}, b"body", "JAVA", 1,
                                kind) for kind in (JSON_TYPE, ROCKETMQ_TYPE)]
    frames = [encode_command(c)[4:] for c in commands]  # without the length word, as the front reads them
    props = b"KEYS\x01k\x02"
    item = struct.pack(">iiiii", 22 + 4 + len(props), 0, 0, 0, 4) + b"abcd" + struct.pack(">h", len(props)) + props
    return [*frames, item * 3]


def check_remoting(frame: bytes) -> None:
    from mqstore.ipc.remoting.codec import FrameError, decode_batch, decode_command
    for decode in (decode_command, decode_batch):
        with contextlib.suppress(FrameError):
            decode(frame)
