"""What the remoting front reads from a request's header (its ``extFields``), and how it refuses one.

Every field comes as a string: integers are parsed and range-checked, topics checked by the store's
rule, and booleans read the way both client families write them. A field that fails becomes a
``RequestError``, which the front answers with its code and remark instead of serving the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.engine.errors import MqstoreError
from mqstore.engine.names import check_topic
from mqstore.ipc.remoting import codec as rm

LONG_MAX = (1 << 63) - 1


class RequestError(MqstoreError):
    """A request the front answers with ``code`` and ``remark`` instead of serving it."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True, slots=True)
class Peer:
    connection: int
    ip: str
    port: int


def header_int(ext: dict[str, str], name: str, default: int | None = None, lo: int = -LONG_MAX,
               hi: int = LONG_MAX) -> int:
    raw = ext.get(name)
    if raw is None or raw == "":
        if default is None:
            raise RequestError(rm.SYSTEM_ERROR, f"the request header lacks {name}")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise RequestError(rm.SYSTEM_ERROR, f"header field {name}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise RequestError(rm.SYSTEM_ERROR, f"header field {name}={value} is out of range")
    return value


def header_topic(ext: dict[str, str], name: str = "topic") -> str:
    topic = ext.get(name, "")
    reason = check_topic(topic)
    if reason is not None:
        raise RequestError(rm.TOPIC_NOT_EXIST if not topic else rm.SYSTEM_ERROR, reason)
    return topic


def header_flag(value: str | None) -> bool:
    return value in ("1", "true", "True")  # C++ writes bools as 0/1, Java as true/false
