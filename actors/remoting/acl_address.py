"""RocketMQ's remote-address patterns (``whiteRemoteAddress``, ``globalWhiteRemoteAddresses`` in
``plain_acl.yml``; ``RemoteAddressStrategyFactory``), tried in this order:

    blank                           never matches
    *  *.*.*.*  *:*:*:*:*:*:*:*     matches every address
    192.168.1.{1,2,3}               a set: the prefix with each of the braced endings (IPv6 too)
    192.168.1.1,192.168.1.2         a list of exact addresses
    192.168.*.*  192.168.1.1-100    a range on one octet, the first of octets 2-4 that is ``*`` or
    10.10.1-3.*                     ``a-b``; the octets before it must match, those after are ignored
    192.168.1.1  ::1                one exact address (IPv6 compared in its expanded form)

A pattern that is none of these is an ``AddressPatternError`` when the file is read.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mqstore.engine.errors import MqstoreError

ANY_FORMS = ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")


class AddressPatternError(MqstoreError, ValueError):
    """A remote-address pattern RocketMQ would not load."""


@dataclass(frozen=True, slots=True)
class AddressPattern:
    text: str
    any: bool = False
    exact: frozenset[str] = frozenset()   # expanded addresses
    prefix: tuple[int, ...] = ()          # a range: the octets before the ranged one
    low: int = 0
    high: int = -1

    def matches(self, ip: str) -> bool:
        if self.any:
            return True
        address = _expanded(ip)
        if address is None:
            return False
        if self.exact:
            return address in self.exact
        octets = _octets(address)
        n = len(self.prefix)
        return octets is not None and octets[:n] == self.prefix and self.low <= octets[n] <= self.high


def parse_pattern(text: str) -> AddressPattern | None:
    """The pattern ``text`` stands for; None for a blank one (it never matches)."""
    text = text.strip()
    if not text:
        return None
    if text in ANY_FORMS:
        return AddressPattern(text, any=True)
    if text.endswith("}"):
        head, brace, items = text[:-1].partition("{")
        if not brace or not items:
            raise AddressPatternError(f"address set {text!r} has no {{...}}")
        return AddressPattern(text, exact=frozenset(_exact(head + item.strip(), text) for item in items.split(",")))
    if "," in text:
        return AddressPattern(text, exact=frozenset(_exact(item.strip(), text) for item in text.split(",")))
    if "*" in text or "-" in text:
        return _range(text)
    return AddressPattern(text, exact=frozenset({_exact(text, text)}))


def _range(text: str) -> AddressPattern:
    parts = text.split(".")
    if len(parts) != 4:
        raise AddressPatternError(f"address range {text!r} is not four IPv4 octets")
    for i in (1, 2, 3):
        part = parts[i]
        if part == "*":
            low, high = 0, 255
        elif "-" in part:
            lo_text, _, hi_text = part.partition("-")
            low, high = _octet(lo_text, text), _octet(hi_text, text)
            if low > high:
                raise AddressPatternError(f"address range {text!r}: {low} is past {high}")
        else:
            continue
        return AddressPattern(text, prefix=tuple(_octet(p, text) for p in parts[:i]), low=low, high=high)
    raise AddressPatternError(f"address range {text!r}: only octets 2 to 4 may be '*' or 'a-b'")


def _octet(part: str, text: str) -> int:
    if not part.isdigit() or int(part) > 255:
        raise AddressPatternError(f"address pattern {text!r}: {part!r} is not an octet")
    return int(part)


def _exact(address: str, text: str) -> str:
    expanded = _expanded(address)
    if expanded is None:
        raise AddressPatternError(f"address pattern {text!r}: {address!r} is not an IP address")
    return expanded


def _expanded(address: str) -> str | None:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a v4 client on a dual-stack socket
    return ip.exploded.upper()


def _octets(expanded: str) -> tuple[int, ...] | None:
    parts = expanded.split(".")
    return tuple(int(p) for p in parts) if len(parts) == 4 else None
