"""RocketMQ's request signature (ACL): what a client adds to a request and what a broker checks.

A signed request carries three more ``extFields``: ``AccessKey``, ``Signature`` and (C++ clients)
``OnsChannel``. The signature is HmacSHA1, keyed by the account's secret (UTF-8), over the values of
every ext field but ``Signature`` itself, in the order of their keys, joined with nothing between them,
UTF-8 encoded, with the request's body (as on the wire: compressed when the client compressed it)
appended; standard Base64 with padding (``AclUtils.combineRequestContent``, ``AclSigner.calSignature``).
A header ``version`` up to ``V4_9_3`` also leaves ``_UNIQUE_KEY_QUERY`` out: older Java clients did not
sign it (``DefaultAuthenticationContextBuilder``). Values are used exactly as received (a JSON number
is its decimal text, as fastjson gives it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
CHANNEL = "OnsChannel"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
V4_9_3 = 399  # MQVersion.Version.V4_9_3.ordinal(): clients up to it did not sign _UNIQUE_KEY_QUERY


@dataclass(frozen=True, slots=True)
class Credentials:
    """An account's keys, as a client holds them (``set_session_credentials``)."""

    access_key: str
    secret_key: str
    channel: str | None = None  # C++ clients send (and sign) OnsChannel; Java ones send none


def request_content(ext: Mapping[str, str], body: bytes, version: int = V4_9_3 + 1) -> bytes:
    """What the signature covers: the values of every field but ``Signature``, sorted by key, then the body."""
    skipped = {SIGNATURE, UNIQUE_KEY_QUERY} if version <= V4_9_3 else {SIGNATURE}
    text = "".join(ext[key] for key in sorted(ext) if key not in skipped)
    return text.encode() + body


def signature(content: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.new(secret_key.encode(), content, hashlib.sha1).digest()).decode()


def signed(ext: Mapping[str, str], body: bytes, credentials: Credentials, version: int = V4_9_3 + 1) -> dict[str, str]:
    """``ext`` with the account's fields and the signature added, as a client sends it."""
    out = {k: v for k, v in ext.items() if k != SIGNATURE}
    out[ACCESS_KEY] = credentials.access_key
    if credentials.channel is not None:
        out[CHANNEL] = credentials.channel
    out[SIGNATURE] = signature(request_content(out, body, version), credentials.secret_key)
    return out


def verify(ext: Mapping[str, str], body: bytes, secret_key: str, version: int) -> bool:
    """Whether ``Signature`` is the one ``secret_key`` gives this request (compared in constant time)."""
    given = ext.get(SIGNATURE)
    if given is None:
        return False
    expected = signature(request_content(ext, body, version), secret_key)
    return hmac.compare_digest(given.encode(), expected.encode())
