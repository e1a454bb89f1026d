"""The request signature, held to RocketMQ's rule (``AclUtils.combineRequestContent`` + ``AclSigner``):
the expected value is rebuilt here from the rule itself, with hmac, on random ext fields and bodies."""

from __future__ import annotations

import base64
import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.signature import Credentials, request_content, signature, signed, verify

KEYS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
VALUES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
EXT = st.dictionaries(KEYS, VALUES, max_size=12)
BODIES = st.binary(max_size=300)
SECRETS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=7, max_size=30)


def rocketmq_signature(ext: dict[str, str], body: bytes, secret: str, version: int) -> str:
    """The rule, written out independently: values of a TreeMap of every field but Signature (and, up to
    V4_9_3, _UNIQUE_KEY_QUERY), joined, UTF-8, the body after; HmacSHA1 keyed by the secret; Base64."""
    content = bytearray()
    for key in sorted(ext):
        if key == "Signature" or (key == "_UNIQUE_KEY_QUERY" and version <= 399):
            continue
        content += ext[key].encode("utf-8")
    content += body
    return base64.b64encode(hmac.new(secret.encode("utf-8"), bytes(content), hashlib.sha1).digest()).decode()


@given(EXT, BODIES, SECRETS, st.sampled_from([0, 63, 399, 400, 500]))
def test_signature_follows_rocketmqs_rule(ext: dict[str, str], body: bytes, secret: str, version: int) -> None:
    assert signature(request_content(ext, body, version), secret) == rocketmq_signature(ext, body, secret, version)


@given(EXT, BODIES, SECRETS, st.sampled_from([None, "ALIYUN"]), st.sampled_from([0, 400]))
def test_a_signed_request_verifies_and_any_change_breaks_it(ext: dict[str, str], body: bytes, secret: str,
                                                            channel: str | None, version: int) -> None:
    out = signed(ext, body, Credentials("RocketMQ", secret, channel), version)
    assert out["AccessKey"] == "RocketMQ" and out.get("OnsChannel") == channel
    assert out["Signature"] == rocketmq_signature(out, body, secret, version)
    assert verify(out, body, secret, version)
    assert not verify(out, body + b"x", secret, version)
    assert not verify(out, body, secret + "x", version)
    assert not verify({**out, "topic": out.get("topic", "") + "x"}, body, secret, version)
    assert not verify({k: v for k, v in out.items() if k != "Signature"}, body, secret, version)


def test_rocketmqs_own_vectors() -> None:
    """AclSignerTest's, and those the C++ client was seen to send (reference: rocketmq-acl.md 1.5)."""
    assert signature(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    ext = {"AccessKey": "RocketMQ", "OnsChannel": "ALIYUN", "consumerGroup": "CG_ACL"}
    assert signature(request_content(ext, b"", 63), "12345678") == "+D03FJ368MaBUhhAJHGhjPEaj30="
    send = {"AccessKey": "RocketMQ", "OnsChannel": "ALIYUN", "batch": "0", "bornTimestamp": "1700000000000",
            "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "flag": "0", "producerGroup": "PG_ACL",
            "properties": "KEYS\x01k1\x02TAGS\x01TagA\x02WAIT\x01true\x02", "queueId": "0", "reconsumeTimes": "0",
            "sysFlag": "0", "topic": "TopicA", "unitMode": "0"}
    assert signature(request_content(send, b"hello", 63), "12345678") == "cjY35AH82hUMvqmiSHl/Ls3DITE="
    assert signature(request_content({"OnsChannel": "ALIYUN", "consumerGroup": "CG_ACL"}, b"", 63), "") == (
        "rwGXHq5D32Z99dpPlhAVMe6R1dI=")


def test_json_numbers_are_signed_as_their_decimal_text() -> None:
    """The C++ client puts queueId and sysFlag as JSON numbers and signs their text: the codec keeps that text."""
    frame = (b'{"code":10,"opaque":1,"flag":0,"version":63,"extFields":{"queueId":3,"topic":"T",'
             b'"AccessKey":"RocketMQ"}}')
    command = rm.decode_command(len(frame).to_bytes(4, "big") + frame + b"body")
    assert request_content(command.ext, command.body, command.version) == b"RocketMQ3Tbody"
