"""CommitLog record codec, byte-compatible with Apache RocketMQ.

All integers big-endian. Offsets shown for IPv4 born and store hosts (each IPv6 host adds 12):

    pos  size  field
      0     4  TOTALSIZE            whole record, this field included
      4     4  MAGICCODE            0xDAA320A7 (v1, 1-byte topic length) / 0xDAA320AB (v2, 2-byte)
      8     4  BODYCRC              zlib.crc32(body) & 0x7FFFFFFF
     12     4  QUEUEID
     16     4  FLAG
     20     8  QUEUEOFFSET          consume-queue entry number
     28     8  PHYSICALOFFSET       commitlog byte offset of this record
     36     4  SYSFLAG              0x10: born host IPv6, 0x20: store host IPv6, 0xC: transaction type
     40     8  BORNTIMESTAMP        ms
     48  8|20  BORNHOST             address bytes + int port
     56     8  STORETIMESTAMP       ms
     64  8|20  STOREHOST
     72     4  RECONSUMETIMES
     76     8  PREPARED TX OFFSET
     84     4  BODYLENGTH, then the body
      .   1|2  TOPICLENGTH, then the topic (UTF-8)
      .     2  PROPERTIESLENGTH, then ``name \\x01 value \\x02`` pairs (UTF-8, at most 32767 bytes)

The 8-byte blank record ``[int size][int 0xCBD43194]`` fills the tail of a file when the next record
does not fit. The optional whole-record CRC is a last property ``__CRC32#\\x01dddddddddd\\x02``
(20 bytes, inside PROPERTIESLENGTH): CRC32 & 0x7FFFFFFF of every record byte before those 20,
written as 10 decimal digits, least significant first. It catches a torn tail that the body CRC,
which covers only the body, would miss.
"""

from __future__ import annotations

import enum
import mmap
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from mqstore.engine.log.host import IPV4_HOST_SIZE, IPV6_HOST_SIZE, Host
from mqstore.engine.log.msgid import offset_msg_id

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477
BLANK_MAGIC = -875286124
END_FILE_MIN_BLANK_SIZE = 8
MAX_PROPERTIES_SIZE = 32767
DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024
RECORD_EXTRA_RESERVE = 65536
PROP_CRC_KEY = "__CRC32#"
PROP_CRC_SIZE = 20  # len("__CRC32#") + 1 + 10 digits + 1

QUEUE_OFFSET_POS = 20
PHYS_OFFSET_POS = 28
SYSFLAG_POS = 36
BORN_MS_POS = 40
BORN_HOST_POS = 48

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TX_PREPARED = 0x4
SYSFLAG_TX_COMMIT = 0x8
SYSFLAG_TX_ROLLBACK = 0xC
SYSFLAG_TX_MASK = 0xC
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20

PROP_KEYS = "KEYS"
PROP_TAGS = "TAGS"
PROP_UNIQ_KEY = "UNIQ_KEY"
PROP_DELAY = "DELAY"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
PROP_REAL_TOPIC = "REAL_TOPIC"
PROP_REAL_QID = "REAL_QID"

ByteSource = bytes | bytearray | memoryview | mmap.mmap

_NAME_VALUE_SEP = "\x01"
_PROPERTY_SEP = "\x02"
_HEAD = struct.Struct(">iiiiiqqiq")  # size .. born timestamp: 48 bytes
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_TAIL = struct.Struct(">iqi")  # reconsume times, prepared tx offset, body length


def body_crc(body: ByteSource) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


def host_size(sys_flag: int, v6_bit: int) -> int:
    return IPV6_HOST_SIZE if sys_flag & v6_bit else IPV4_HOST_SIZE


def store_ms_pos(sys_flag: int) -> int:
    """Position of STORETIMESTAMP, which moves with the born host's family."""
    return BORN_HOST_POS + host_size(sys_flag, SYSFLAG_BORNHOST_V6)


def body_length_pos(sys_flag: int) -> int:
    """Position of BODYLENGTH (the body follows it), which moves with both hosts' families."""
    return store_ms_pos(sys_flag) + 8 + host_size(sys_flag, SYSFLAG_STOREHOST_V6) + 12


def record_size(sys_flag: int, body_size: int, topic_size: int, props_size: int, version: int = 1) -> int:
    """RocketMQ's calMsgLength."""
    return (84 - 16 + host_size(sys_flag, SYSFLAG_BORNHOST_V6) + host_size(sys_flag, SYSFLAG_STOREHOST_V6)
            + 4 + body_size + (1 if version == 1 else 2) + topic_size + 2 + props_size)


def encode_properties(properties: Mapping[str, str]) -> bytes:
    return "".join(f"{k}{_NAME_VALUE_SEP}{v}{_PROPERTY_SEP}" for k, v in properties.items()).encode()


def decode_properties(data: ByteSource) -> dict[str, str]:
    """RocketMQ's parser: segments end at \\x02; a segment needs a non-empty name and value."""
    props: dict[str, str] = {}
    for segment in bytes(data).decode("utf-8", errors="replace").split(_PROPERTY_SEP):
        name, _, value = segment.partition(_NAME_VALUE_SEP)  # the first \x01 splits; none leaves value empty
        if name and value:
            props[name] = value
    return props


def prop_crc_digits(crc: int) -> bytes:
    """10 decimal digits, least significant first (RocketMQ's createCrc32)."""
    return str(crc).zfill(10)[::-1].encode()


def parse_prop_crc(digits: str) -> int | None:
    if len(digits) != 10 or not digits.isdigit():
        return None
    return int(digits[::-1])


def is_valid_property_text(text: str) -> bool:
    return bool(text) and _NAME_VALUE_SEP not in text and _PROPERTY_SEP not in text


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded commitlog record: every field RocketMQ stores."""

    size: int
    version: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    phys_offset: int
    sys_flag: int
    born_ms: int
    born_host: Host
    store_ms: int
    store_host: Host
    reconsume_times: int
    prepared_tx_offset: int
    body: bytes
    topic: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROP_TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(PROP_KEYS, "").split(" ") if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROP_UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.phys_offset)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & SYSFLAG_TX_MASK


class DecodeKind(enum.Enum):
    RECORD = "record"
    BLANK = "blank"
    INCOMPLETE = "incomplete"
    CORRUPT = "corrupt"


@dataclass(frozen=True, slots=True)
class Decoded:
    """Outcome of decoding at one position. ``size`` is the record or blank length; for CORRUPT it is
    the declared length when only the length check failed (so a scan could skip it), else 0."""

    kind: DecodeKind
    size: int = 0
    record: Record | None = None
    reason: str = ""


INCOMPLETE = Decoded(DecodeKind.INCOMPLETE, reason="buffer ends inside the record")


def _corrupt(reason: str, size: int = 0) -> Decoded:
    return Decoded(DecodeKind.CORRUPT, size, None, reason)


def decode_record(buf: ByteSource, pos: int = 0, *, check_crc: bool = True,
                  read_body: bool = True, require_prop_crc: bool = False) -> Decoded:
    """Decode the record at ``pos``; never raises on bad bytes.

    ``check_crc`` verifies the body CRC and, where present, the whole-record ``__CRC32#``;
    ``require_prop_crc`` makes a missing ``__CRC32#`` corrupt (stores that always write it).
    """
    end = len(buf)
    if end - pos < 8:
        return INCOMPLETE
    size, magic = struct.unpack_from(">ii", buf, pos)
    if magic == BLANK_MAGIC:
        if size < END_FILE_MIN_BLANK_SIZE:
            return _corrupt(f"blank record of size {size}")
        return Decoded(DecodeKind.BLANK, size)
    if magic not in (MAGIC_V1, MAGIC_V2):
        return _corrupt(f"illegal magic code {magic & 0xFFFFFFFF:#010x}")
    version = 1 if magic == MAGIC_V1 else 2
    min_size = record_size(0, 0, 0, 0, version)
    if size < min_size:
        return _corrupt(f"total size {size} below the minimum {min_size}")
    if end - pos < size:
        return INCOMPLETE
    try:
        return _decode_fields(buf, pos, size, version, check_crc, read_body, require_prop_crc)
    except (struct.error, ValueError, IndexError) as exc:  # any length field pointing outside the record
        return _corrupt(f"malformed record: {exc}", size)


def _decode_fields(buf: ByteSource, pos: int, size: int, version: int, check_crc: bool,
                   read_body: bool, require_prop_crc: bool) -> Decoded:
    rec_end = pos + size
    (_, _, crc, queue_id, flag, queue_offset, phys_offset, sys_flag, born_ms) = _HEAD.unpack_from(buf, pos)
    p = BORN_HOST_POS + pos
    born_len = host_size(sys_flag, SYSFLAG_BORNHOST_V6)
    born_host = Host.unpack(bytes(buf[p:p + born_len]))
    p += born_len
    (store_ms,) = _LONG.unpack_from(buf, p)
    p += 8
    store_len = host_size(sys_flag, SYSFLAG_STOREHOST_V6)
    store_host = Host.unpack(bytes(buf[p:p + store_len]))
    p += store_len
    reconsume_times, prepared_tx_offset, body_len = _TAIL.unpack_from(buf, p)
    p += 16
    if body_len < 0 or p + body_len > rec_end:
        return _corrupt(f"body length {body_len} outside the record", size)
    body_view = buf[p:p + body_len]
    if check_crc and body_len > 0 and body_crc(body_view) != crc:
        return _corrupt("body CRC mismatch", size)
    body = bytes(body_view) if read_body else b""
    p += body_len
    if version == 1:
        topic_len = buf[p]
        topic_len = topic_len - 256 if topic_len > 127 else topic_len
        p += 1
    else:
        (topic_len,) = _SHORT.unpack_from(buf, p)
        p += 2
    if topic_len < 0 or p + topic_len > rec_end:
        return _corrupt(f"topic length {topic_len} outside the record", size)
    try:
        topic = bytes(buf[p:p + topic_len]).decode("utf-8")
    except UnicodeDecodeError:
        return _corrupt("topic is not UTF-8", size)
    p += topic_len
    if p + 2 > rec_end:
        return _corrupt("properties length outside the record", size)
    (props_len,) = _SHORT.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len > rec_end:
        return _corrupt(f"properties length {props_len} outside the record", size)
    props = decode_properties(buf[p:p + props_len]) if props_len > 0 else {}
    expected = record_size(sys_flag, body_len, topic_len, props_len, version)
    if expected != size:
        return _corrupt(f"total size {size} differs from the fields' {expected}", size)
    if check_crc and (PROP_CRC_KEY in props or require_prop_crc):
        stored = parse_prop_crc(props.get(PROP_CRC_KEY, ""))
        tail = bytes(buf[rec_end - PROP_CRC_SIZE:rec_end])
        if stored is None or not tail.startswith(PROP_CRC_KEY.encode()):
            return _corrupt("whole-record CRC property missing", size)
        if body_crc(buf[pos:rec_end - PROP_CRC_SIZE]) != stored:
            return _corrupt("whole-record CRC mismatch", size)
    props.pop(PROP_CRC_KEY, None)
    record = Record(size, version, crc, queue_id, flag, queue_offset, phys_offset, sys_flag, born_ms, born_host,
                    store_ms, store_host, reconsume_times, prepared_tx_offset, body, topic, props)
    return Decoded(DecodeKind.RECORD, size, record)


def encode_record(*, topic: str, body: bytes, properties: Mapping[str, str], queue_id: int = 0, flag: int = 0,
                  sys_flag: int = 0, born_ms: int = 0, born_host: Host, store_host: Host, store_ms: int = 0,
                  queue_offset: int = 0, phys_offset: int = 0, reconsume_times: int = 0,
                  prepared_tx_offset: int = 0, prop_crc: bool = False, body_crc_value: int | None = None,
                  ) -> bytearray:
    """Encode one record. With ``prop_crc`` the 20 reserved bytes are left for ``seal_record``, which
    must run after the writer has patched queue offset, phys offset and store time."""
    sys_flag &= ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    if born_host.is_v6:
        sys_flag |= SYSFLAG_BORNHOST_V6
    if store_host.is_v6:
        sys_flag |= SYSFLAG_STOREHOST_V6
    topic_bytes = topic.encode()
    version = 2 if len(topic) > 127 else 1
    props = encode_properties(properties)
    if prop_crc:
        props += PROP_CRC_KEY.encode() + b"\x01" + b"0" * 10 + b"\x02"
    size = record_size(sys_flag, len(body), len(topic_bytes), len(props), version)
    crc = body_crc(body) if body_crc_value is None else body_crc_value
    out = bytearray(_HEAD.pack(size, MAGIC_V1 if version == 1 else MAGIC_V2, crc, queue_id, flag, queue_offset,
                               phys_offset, sys_flag, born_ms))
    out += born_host.packed
    out += _LONG.pack(store_ms)
    out += store_host.packed
    out += _TAIL.pack(reconsume_times, prepared_tx_offset, len(body))
    out += body
    out += bytes((len(topic_bytes),)) if version == 1 else _SHORT.pack(len(topic_bytes))
    out += topic_bytes
    out += _SHORT.pack(len(props))
    out += props
    return out


def encode_blank(size: int) -> bytes:
    return struct.pack(">ii", size, BLANK_MAGIC)


def patch_record(buf: bytearray | memoryview, pos: int, *, queue_offset: int, phys_offset: int,
                 store_ms: int) -> None:
    """Stamp the three fields the writer owns into an encoded record."""
    _LONG.pack_into(buf, pos + QUEUE_OFFSET_POS, queue_offset)
    _LONG.pack_into(buf, pos + PHYS_OFFSET_POS, phys_offset)
    (sys_flag,) = _INT.unpack_from(buf, pos + SYSFLAG_POS)
    _LONG.pack_into(buf, pos + store_ms_pos(sys_flag), store_ms)


def seal_record(buf: bytearray | memoryview, pos: int, size: int) -> None:
    """Write the whole-record CRC into the reserved ``__CRC32#`` tail of the record at ``pos``."""
    crc = body_crc(buf[pos:pos + size - PROP_CRC_SIZE])
    end = pos + size
    buf[end - 11:end - 1] = prop_crc_digits(crc)
