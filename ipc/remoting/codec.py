"""RocketMQ's remoting wire: frames, commands, codes, and a small blocking client.

A frame is ``int32 total | int32 (serializeType << 24 | headerLen) | header | body`` (big-endian,
``total`` not counting itself). The header is JSON (type 0, what every client sends and the only type
the C++ client reads back) or RocketMQ's binary layout (type 1, which Java clients send when told to);
``decode_command`` reads both and a reply goes out in the request's type. Header ``extFields`` values
arrive as JSON numbers or strings (the C++ client mixes them); they are kept as strings here, which is
also what every reader of a reply expects.

``RemotingClient`` is the raw client the tests and ``mqstore rocketmq`` use for what the stock client
lacks (query by key, view by id).
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.record import SYSFLAG_COMPRESSED, DecodeKind, Record, decode_properties, decode_record
from mqstore.ipc.remoting import json_header
from mqstore.ipc.remoting.signature import Credentials, signed

# request codes (RequestCode.java)
SEND_MESSAGE = 10
PULL_MESSAGE = 11
QUERY_MESSAGE = 12
QUERY_CONSUMER_OFFSET = 14
UPDATE_CONSUMER_OFFSET = 15
SEARCH_OFFSET_BY_TIMESTAMP = 29
GET_MAX_OFFSET = 30
GET_MIN_OFFSET = 31
VIEW_MESSAGE_BY_ID = 33
HEART_BEAT = 34
UNREGISTER_CLIENT = 35
CONSUMER_SEND_MSG_BACK = 36
END_TRANSACTION = 37
GET_CONSUMER_LIST_BY_GROUP = 38
CHECK_TRANSACTION_STATE = 39
LOCK_BATCH_MQ = 41
UNLOCK_BATCH_MQ = 42
REGISTER_BROKER = 103
UNREGISTER_BROKER = 104
GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
RESUME_CHECK_HALF_MESSAGE = 323
SEND_MESSAGE_V2 = 310
SEND_BATCH_MESSAGE = 320

# response codes (ResponseCode.java)
SUCCESS = 0
SYSTEM_ERROR = 1
SYSTEM_BUSY = 2
REQUEST_CODE_NOT_SUPPORTED = 3
FLUSH_DISK_TIMEOUT = 10
SLAVE_NOT_AVAILABLE = 11
FLUSH_SLAVE_TIMEOUT = 12
MESSAGE_ILLEGAL = 13
SERVICE_NOT_AVAILABLE = 14
NO_PERMISSION = 16
TOPIC_NOT_EXIST = 17
PULL_NOT_FOUND = 19
PULL_RETRY_IMMEDIATELY = 20
PULL_OFFSET_MOVED = 21
QUERY_NOT_FOUND = 22
ILLEGAL_OPERATION = 604

# header flag bits; pull and send sysFlag bits
FLAG_RESPONSE = 1 << 0
FLAG_ONEWAY = 1 << 1
PULL_COMMIT_OFFSET = 1
PULL_SUSPEND = 2
PULL_SUBSCRIPTION = 4

JSON_TYPE = 0
ROCKETMQ_TYPE = 1
MIN_FRAME_BYTES = 4             # the header-length word
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024  # NettyDecoder's frameMaxLength

_INT = struct.Struct(">i")
_BINARY_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
              "RUST", "NODE_JS")


class FrameError(MqstoreError, ValueError):
    """A frame that is not a remoting command: the connection it came on cannot be trusted further."""


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: str = "PYTHON"
    version: int = 0
    serialize_type: int = JSON_TYPE

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def reply(self, code: int, remark: str | None = None, ext: Mapping[str, Any] | None = None,
              body: bytes = b"") -> RemotingCommand:
        """The response to this request: same opaque and header type, the response bit set, every
        ext value a string (the C++ client ignores anything else)."""
        return RemotingCommand(code, self.opaque, FLAG_RESPONSE, remark,
                               {k: str(v) for k, v in (ext or {}).items()}, body, "JAVA", self.version,
                               self.serialize_type)


def frame_length(prefix: bytes) -> int:
    """The length word that starts every frame (what follows it)."""
    (length,) = _INT.unpack(prefix)
    return int(length)


def decode_command(frame: bytes) -> RemotingCommand:
    """One frame without its length word. Raises FrameError when the lengths lie or the header is not
    a command."""
    if len(frame) < MIN_FRAME_BYTES:
        raise FrameError(f"a frame of {len(frame)} bytes has no header length")
    (mark,) = _INT.unpack_from(frame, 0)
    serialize_type, header_len = (mark >> 24) & 0xFF, mark & 0xFFFFFF
    if header_len > len(frame) - 4:
        raise FrameError(f"header length {header_len} exceeds the {len(frame) - 4} bytes of the frame")
    header = frame[4:4 + header_len]
    body = bytes(frame[4 + header_len:])
    if serialize_type == JSON_TYPE:
        return _from_json(header, body)
    if serialize_type == ROCKETMQ_TYPE:
        return _from_binary(header, body)
    raise FrameError(f"unknown serialize type {serialize_type}")


def encode_command(command: RemotingCommand) -> bytes:
    """The whole frame, length word included."""
    header = _to_binary(command) if command.serialize_type == ROCKETMQ_TYPE else _to_json(command)
    return (_INT.pack(4 + len(header) + len(command.body)) + _INT.pack((command.serialize_type << 24) | len(header))
            + header + command.body)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise FrameError(f"an extFields value must be a string or a number, got {type(value).__name__}")


def _from_json(header: bytes, body: bytes) -> RemotingCommand:
    try:
        raw = json_header.loads(header)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"header is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise FrameError("header is not a JSON object")
    ext = raw.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError("extFields is not an object")
    get = raw.get
    try:
        code, opaque, flag = int(get("code", 0)), int(get("opaque", 0)), int(get("flag", 0))
        version = int(get("version", 0))
    except (TypeError, ValueError):
        raise FrameError("code, opaque, flag and version must be integers") from None
    remark = get("remark")
    return RemotingCommand(code, opaque, flag, None if remark is None else str(remark),
                           {k: v if v.__class__ is str else _text(v) for k, v in ext.items()}, body,
                           str(get("language", "")), version, JSON_TYPE)


def _to_json(command: RemotingCommand) -> bytes:
    return json_header.dumps(command.code, command.language, command.version, command.opaque, command.flag,
                             command.remark, command.ext)


def _from_binary(header: bytes, body: bytes) -> RemotingCommand:
    try:
        code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(header, 0)
        pos = _BINARY_FIXED.size
        (remark_len,) = _INT.unpack_from(header, pos)
        remark = header[pos + 4:pos + 4 + remark_len].decode() if remark_len > 0 else None
        pos += 4 + max(remark_len, 0)
        (ext_len,) = _INT.unpack_from(header, pos)
        pos += 4
        end = pos + ext_len
        if remark_len < 0 or ext_len < 0 or end > len(header):
            raise FrameError("binary header lengths exceed the header")
        ext: dict[str, str] = {}
        while pos < end:
            (key_len,) = struct.unpack_from(">h", header, pos)
            key = header[pos + 2:pos + 2 + key_len].decode()
            pos += 2 + key_len
            (value_len,) = _INT.unpack_from(header, pos)
            ext[key] = header[pos + 4:pos + 4 + value_len].decode()
            pos += 4 + value_len
        if pos != end:
            raise FrameError("binary extFields overrun their length")
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"malformed binary header: {exc}") from None
    name = _LANGUAGES[language] if 0 <= language < len(_LANGUAGES) else "OTHER"
    return RemotingCommand(code, opaque, flag, remark, ext, body, name, version, ROCKETMQ_TYPE)


def _to_binary(command: RemotingCommand) -> bytes:
    language = _LANGUAGES.index(command.language) if command.language in _LANGUAGES else _LANGUAGES.index("OTHER")
    remark = (command.remark or "").encode()
    ext = b"".join(struct.pack(">h", len(k.encode())) + k.encode() + _INT.pack(len(v.encode())) + v.encode()
                   for k, v in command.ext.items())
    return (_BINARY_FIXED.pack(command.code, language, command.version, command.opaque, command.flag)
            + _INT.pack(len(remark)) + remark + _INT.pack(len(ext)) + ext)


# -- message bodies ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchItem:
    flag: int
    body: bytes
    properties: dict[str, str]


def decode_batch(body: bytes) -> list[BatchItem]:
    """A batch send's body (MessageDecoder.encodeMessages): per message ``totalSize, magic, bodyCRC,
    flag, bodyLen, body, propLen int16, properties``."""
    items: list[BatchItem] = []
    pos = 0
    try:
        while pos < len(body):
            total, _, _, flag, body_len = struct.unpack_from(">iiiii", body, pos)
            if total < 22 or pos + total > len(body) or body_len < 0 or 20 + body_len + 2 > total:
                raise FrameError(f"batch message at byte {pos} has inconsistent lengths")
            inner = body[pos + 20:pos + 20 + body_len]
            (props_len,) = struct.unpack_from(">h", body, pos + 20 + body_len)
            props_at = pos + 22 + body_len
            if props_len < 0 or 22 + body_len + props_len != total:
                raise FrameError(f"batch message at byte {pos} has inconsistent lengths")
            items.append(BatchItem(flag, inner, decode_properties(body[props_at:props_at + props_len])))
            pos += total
    except struct.error:
        raise FrameError(f"batch body truncated at byte {pos}") from None
    return items


def decode_records(blob: bytes) -> list[Record]:
    """Stored records back to back (a pull or query body), each decoded; bodies stay as stored."""
    records: list[Record] = []
    pos = 0
    while pos < len(blob):
        decoded = decode_record(blob, pos, check_crc=False)
        if decoded.kind is not DecodeKind.RECORD or decoded.record is None:
            raise FrameError(f"no record at byte {pos} of the body: {decoded.kind.name}")
        records.append(decoded.record)
        pos += decoded.record.size
    return records


def plain_body(record: Record) -> bytes:
    """The body as the producer gave it (inflated when the client compressed it)."""
    return zlib.decompress(record.body) if record.sys_flag & SYSFLAG_COMPRESSED else record.body


# -- a blocking client ---------------------------------------------------------------------------------


class RemotingClient:
    """One connection, one request at a time: ``call`` sends a command and returns its response, signed
    with ``credentials`` when given (``mqstore.ipc.remoting.signature``)."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 10.0, credentials: Credentials | None = None,
                 source_ip: str | None = None) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s,
                                              source_address=None if source_ip is None else (source_ip, 0))
        self.credentials = credentials
        self._opaques = itertools.count(1)
        self.requests: list[RemotingCommand] = []  # what the broker asked (CHECK_TRANSACTION_STATE), unread

    def call(self, code: int, ext: Mapping[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
        request = self._request(code, 0, ext, body)
        self._sock.sendall(encode_command(request))
        while True:
            reply = self._next()
            if reply.is_response and reply.opaque == request.opaque:
                return reply

    def oneway(self, code: int, ext: Mapping[str, Any] | None = None, body: bytes = b"") -> None:
        self._sock.sendall(encode_command(self._request(code, FLAG_ONEWAY, ext, body)))

    def _request(self, code: int, flag: int, ext: Mapping[str, Any] | None, body: bytes) -> RemotingCommand:
        request = RemotingCommand(code, next(self._opaques), flag, None, {k: str(v) for k, v in (ext or {}).items()},
                                  body)
        if self.credentials is not None:
            request.ext = signed(request.ext, body, self.credentials, request.version)
        return request

    def next_request(self) -> RemotingCommand:
        """The broker's next request to this client, waiting for it up to the socket's timeout."""
        while not self.requests:
            self._next()
        return self.requests.pop(0)

    def _next(self) -> RemotingCommand:
        command = decode_command(self._read(frame_length(self._read(4))))
        if not command.is_response:
            self.requests.append(command)
        return command

    def send_raw(self, data: bytes) -> None:
        self._sock.sendall(data)

    def _read(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> RemotingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
