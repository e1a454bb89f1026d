"""What every reply has: its map (``v``, ``id``, ``ok``, then its fields) and the field rules the
decoders share.

A reply is one frozen class per reply shape (``mqstore.ipc.wire.replies``): ``encode(request_id)``
gives the map an actor sends, the same keys, values and order as ``schema.ok_reply`` with the
fields in the class's order (a field named in ``OMITTED`` is left out when None: the actors add it
only when they have it); ``decode(message)`` gives the class back from a map that ``schema.unpack``
read, raising ``ReplyError`` that names the field. A refusal stays one map for every op
(``schema.error_reply``): the transport raises it as a ``BrokerError`` before any decode.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.messages import ReplyError

__all__ = ["Reply", "ReplyError", "field", "mapping_of", "strings"]


class Reply:
    """One reply shape. A subclass is a frozen dataclass whose fields are, in order, the map's fields
    after ``v``, ``id`` and ``ok``; ``WIRE`` names them on the wire where the attribute says more
    (without ``WIRE`` the names are the attributes')."""

    __slots__ = ()
    WIRE: ClassVar[tuple[str, ...]] = ()
    OMITTED: ClassVar[frozenset[str]] = frozenset()

    def encode(self, request_id: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"v": schema.VERSION, "id": request_id, "ok": True}
        names: tuple[str, ...] = self.__slots__
        omitted = self.OMITTED
        for key, name in zip(self.WIRE or names, names, strict=True):
            value = getattr(self, name)
            if value is not None or name not in omitted:
                message[key] = value
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Self:
        """The reply of an unpacked map; ``ReplyError`` naming the field otherwise. A reply of no
        fields ignores whatever else its map holds."""
        del message
        return cls()


def field(message: dict[str, Any], name: str, kind: type | tuple[type, ...], *, default: Any = ...) -> Any:
    """One typed field of a reply (``schema.field``'s rule: a boolean is no number); ``ReplyError``."""
    try:
        return schema.field(message, name, kind, default=default)
    except schema.SchemaError as exc:
        raise ReplyError(f"reply: {exc}") from None


def strings(message: dict[str, Any], name: str) -> list[str]:
    values: list[Any] = field(message, name, list)
    if not all(type(v) is str for v in values):
        raise ReplyError(f"reply: field {name!r} must hold strings")
    return values


def maps(message: dict[str, Any], name: str, what: str) -> list[dict[str, Any]]:
    """A list of maps (``what`` they are: send results, messages, deliveries), each read by its user."""
    values = message.get(name)
    if type(values) is not list or not all(type(v) is dict for v in values):
        raise ReplyError(f"reply: field {name!r} must be a list of {what} maps, got {values!r}"[:200])
    return values


def mapping_of(message: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> dict[str, Any]:
    """A map from names to values of ``kind`` (topics' queue counts, actors' stats, ...)."""
    values: dict[Any, Any] = field(message, name, dict)
    for key, value in values.items():
        boolean = isinstance(value, bool) and bool not in _kinds(kind)
        if type(key) is not str or boolean or not isinstance(value, kind):
            raise ReplyError(f"reply: field {name!r} must map names to {_kind_name(kind)}, "
                             f"got {key!r}: {value!r}"[:200])
    return values


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))
