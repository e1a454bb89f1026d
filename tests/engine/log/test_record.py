from __future__ import annotations

import ipaddress
import string
import struct
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.java.jhash import java_hash
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    PROP_CRC_KEY,
    PROP_CRC_SIZE,
    DecodeKind,
    decode_properties,
    decode_record,
    encode_blank,
    encode_properties,
    encode_record,
    patch_record,
    prop_crc_digits,
    record_size,
    seal_record,
    store_ms_pos,
)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
MIN_V1_SIZE = 91
MIN_V2_SIZE = 92


def ipv4(ip: str) -> bytes:
    return ipaddress.IPv4Address(ip).packed


def ipv6(ip: str) -> bytes:
    return ipaddress.IPv6Address(ip).packed


def masked_crc(data: bytes) -> int:
    return zlib.crc32(data) & 0x7FFFFFFF


# -- fixed vectors, built field by field from reference §1.2 / §1.9 ----------------------------------

BODY = b"Hello RocketMQ"
PROPS = {"TAGS": "TagA", "KEYS": "k1 k2"}
PROPS_TEXT = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
BORN_V4 = Host("192.168.1.10", 51234)
STORE_V4 = Host("10.0.0.5", 10911)
BORN_V6 = Host("2001:db8::1", 40000)
STORE_V6 = Host("fe80::1234:5678", 10911)

FIELDS: dict[str, Any] = dict(queue_id=3, flag=7, queue_offset=42, phys_offset=123_456, born_ms=1_700_000_000_000,
                              store_ms=1_700_000_000_123, reconsume_times=1, prepared_tx_offset=0)


def hand_record(*, topic: bytes, magic: int, topic_len_field: bytes, sys_flag: int, born: bytes, store: bytes,
                props: bytes = PROPS_TEXT, body: bytes = BODY) -> bytes:
    host_bytes = len(born) + len(store)
    total = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + host_bytes + 8 + 4 + 8 + 4 + len(body) \
        + len(topic_len_field) + len(topic) + 2 + len(props)
    out = struct.pack(">i", total)
    out += struct.pack(">i", magic)
    out += struct.pack(">i", masked_crc(body))
    out += struct.pack(">i", FIELDS["queue_id"])
    out += struct.pack(">i", FIELDS["flag"])
    out += struct.pack(">q", FIELDS["queue_offset"])
    out += struct.pack(">q", FIELDS["phys_offset"])
    out += struct.pack(">i", sys_flag)
    out += struct.pack(">q", FIELDS["born_ms"])
    out += born
    out += struct.pack(">q", FIELDS["store_ms"])
    out += store
    out += struct.pack(">i", FIELDS["reconsume_times"])
    out += struct.pack(">q", FIELDS["prepared_tx_offset"])
    out += struct.pack(">i", len(body)) + body
    out += topic_len_field + topic
    out += struct.pack(">h", len(props)) + props
    assert len(out) == total
    return out


def test_ipv4_v1_record_matches_the_byte_table() -> None:
    topic = b"TopicTest"
    expected = hand_record(topic=topic, magic=MAGIC_V1, topic_len_field=struct.pack(">b", len(topic)), sys_flag=0,
                           born=ipv4("192.168.1.10") + struct.pack(">i", 51234),
                           store=ipv4("10.0.0.5") + struct.pack(">i", 10911))
    encoded = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                            **FIELDS)
    assert bytes(encoded) == expected
    assert len(expected) == MIN_V1_SIZE + len(BODY) + len(topic) + len(PROPS_TEXT)
    # spot-check the documented positions of the fields the writer patches
    assert expected[4:8] == bytes.fromhex("DAA320A7")
    assert struct.unpack_from(">q", expected, 20)[0] == 42
    assert struct.unpack_from(">q", expected, 28)[0] == 123_456
    assert struct.unpack_from(">q", expected, 56)[0] == FIELDS["store_ms"]
    assert store_ms_pos(0) == 56


def test_ipv6_born_and_store_hosts_set_sysflag_0x30_and_20_byte_hosts() -> None:
    topic = b"TopicTest"
    expected = hand_record(topic=topic, magic=MAGIC_V1, topic_len_field=bytes([len(topic)]), sys_flag=0x30,
                           born=ipv6("2001:db8::1") + struct.pack(">i", 40000),
                           store=ipv6("fe80::1234:5678") + struct.pack(">i", 10911))
    encoded = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V6, store_host=STORE_V6,
                            **FIELDS)
    assert bytes(encoded) == expected
    # §1.2: 84 fixed + 12 per IPv6 host, + 4 body length + 1 topic length + 2 properties length
    assert len(expected) == MIN_V1_SIZE + 24 + len(BODY) + len(topic) + len(PROPS_TEXT)
    assert len(expected) == record_size(0x30, len(BODY), len(topic), len(PROPS_TEXT))
    assert store_ms_pos(0x30) == 68
    assert struct.unpack_from(">q", expected, 68)[0] == FIELDS["store_ms"]
    decoded = decode_record(expected)
    assert decoded.kind is DecodeKind.RECORD and decoded.record is not None
    assert decoded.record.born_host == BORN_V6
    assert decoded.record.store_host == STORE_V6
    assert decoded.record.sys_flag == 0x30


def test_mixed_hosts_set_only_their_own_v6_bit() -> None:
    born_v6 = encode_record(topic="T", body=b"", properties={}, born_host=BORN_V6, store_host=STORE_V4)
    store_v6 = encode_record(topic="T", body=b"", properties={}, born_host=BORN_V4, store_host=STORE_V6)
    assert struct.unpack_from(">i", born_v6, 36)[0] == 0x10
    assert struct.unpack_from(">i", store_v6, 36)[0] == 0x20
    assert len(born_v6) == len(store_v6) == MIN_V1_SIZE + 12 + 1


def test_stale_v6_bits_are_replaced_by_the_hosts_families() -> None:
    encoded = encode_record(topic="T", body=b"", properties={}, born_host=BORN_V4, store_host=STORE_V4,
                            sys_flag=0x30 | 0x8 | 0x1)
    assert struct.unpack_from(">i", encoded, 36)[0] == 0x9
    assert len(encoded) == MIN_V1_SIZE + 1


def test_topic_over_127_chars_is_a_v2_record_with_a_short_topic_length() -> None:
    topic = "T" * 130
    expected = hand_record(topic=topic.encode(), magic=MAGIC_V2, topic_len_field=struct.pack(">h", 130), sys_flag=0,
                           born=ipv4("192.168.1.10") + struct.pack(">i", 51234),
                           store=ipv4("10.0.0.5") + struct.pack(">i", 10911))
    encoded = encode_record(topic=topic, body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                            **FIELDS)
    assert bytes(encoded) == expected
    assert expected[4:8] == bytes.fromhex("DAA320AB")
    assert len(expected) == MIN_V2_SIZE + len(BODY) + 130 + len(PROPS_TEXT)
    decoded = decode_record(expected)
    assert decoded.record is not None and decoded.record.version == 2 and decoded.record.topic == topic


def test_topic_of_exactly_127_chars_stays_v1() -> None:
    encoded = encode_record(topic="T" * 127, body=b"", properties={}, born_host=BORN_V4, store_host=STORE_V4)
    assert struct.unpack_from(">i", encoded, 4)[0] == MAGIC_V1
    assert encoded[88] == 127
    decoded = decode_record(encoded)
    assert decoded.record is not None and decoded.record.version == 1 and decoded.record.topic == "T" * 127


def test_fixed_vector_decodes_to_every_field() -> None:
    encoded = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                            sys_flag=0x8, **FIELDS)
    decoded = decode_record(encoded)
    assert decoded.kind is DecodeKind.RECORD and decoded.size == len(encoded)
    r = decoded.record
    assert r is not None
    assert (r.size, r.version, r.body_crc) == (len(encoded), 1, masked_crc(BODY))
    assert (r.queue_id, r.flag, r.queue_offset, r.phys_offset) == (3, 7, 42, 123_456)
    assert (r.sys_flag, r.born_ms, r.store_ms) == (0x8, 1_700_000_000_000, 1_700_000_000_123)
    assert (r.born_host, r.store_host) == (BORN_V4, STORE_V4)
    assert (r.reconsume_times, r.prepared_tx_offset) == (1, 0)
    assert (r.body, r.topic, r.properties) == (BODY, "TopicTest", PROPS)
    assert r.tags == "TagA" and r.keys == ["k1", "k2"]
    assert DispatchRequest.from_record(r).tags_code == java_hash("TagA")
    assert r.transaction_type == 0x8


def test_read_body_false_skips_the_body_but_keeps_the_fields() -> None:
    encoded = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                            **FIELDS)
    decoded = decode_record(encoded, read_body=False)
    assert decoded.record is not None
    assert decoded.record.body == b"" and decoded.record.properties == PROPS and decoded.size == len(encoded)


def test_record_at_a_position_inside_a_larger_buffer() -> None:
    first = encode_record(topic="A", body=b"one", properties={}, born_host=BORN_V4, store_host=STORE_V4)
    second = encode_record(topic="B", body=b"two", properties=PROPS, born_host=BORN_V6, store_host=STORE_V4)
    buf = bytes(first + second) + bytes(16)
    d1 = decode_record(buf, 0)
    d2 = decode_record(memoryview(buf), len(first))
    assert d1.record is not None and d1.record.topic == "A" and d1.size == len(first)
    assert d2.record is not None and d2.record.topic == "B" and d2.record.properties == PROPS
    assert decode_record(buf, len(first) + len(second)).kind is DecodeKind.CORRUPT  # zeros: magic 0


def test_patch_record_stamps_the_writer_fields() -> None:
    for born in (BORN_V4, BORN_V6):
        buf = bytearray(8) + encode_record(topic="T", body=b"x", properties={}, born_host=born, store_host=STORE_V6)
        patch_record(buf, 8, queue_offset=9, phys_offset=1 << 40, store_ms=77)
        decoded = decode_record(buf, 8)
        assert decoded.record is not None
        assert (decoded.record.queue_offset, decoded.record.phys_offset, decoded.record.store_ms) == (9, 1 << 40, 77)
        assert decoded.record.born_ms == 0


# -- blank record ----------------------------------------------------------------------------------


def test_blank_record_bytes() -> None:
    assert encode_blank(124) == bytes.fromhex("0000007c" "cbd43194")
    assert encode_blank(124) == struct.pack(">ii", 124, BLANK_MAGIC)
    assert struct.unpack(">i", bytes.fromhex("cbd43194"))[0] == BLANK_MAGIC


def test_blank_record_decodes_with_its_declared_size() -> None:
    decoded = decode_record(encode_blank(124) + bytes(116))
    assert (decoded.kind, decoded.size, decoded.record) == (DecodeKind.BLANK, 124, None)
    # only the 8-byte header needs to be there: the rest of the file is whatever it was
    assert decode_record(encode_blank(1 << 20)).kind is DecodeKind.BLANK
    assert decode_record(encode_blank(8)).size == 8


@pytest.mark.parametrize("size", [-1, 0, 4, 7])
def test_blank_smaller_than_its_header_is_corrupt(size: int) -> None:
    assert decode_record(encode_blank(size)).kind is DecodeKind.CORRUPT


# -- whole-record CRC property --------------------------------------------------------------------


@pytest.mark.parametrize(("crc", "digits"), [
    (123, b"3210000000"),
    (0, b"0000000000"),
    (7, b"7000000000"),
    (1_000_000_000, b"0000000001"),
    (INT_MAX, b"7463847412"),
])
def test_prop_crc_digits_are_least_significant_first(crc: int, digits: bytes) -> None:
    assert prop_crc_digits(crc) == digits


def sealed_fixed_record() -> bytearray:
    buf = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                        prop_crc=True, **FIELDS)
    seal_record(buf, 0, len(buf))
    return buf


def test_prop_crc_reserves_20_bytes_inside_the_properties() -> None:
    unsealed = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                             prop_crc=True, **FIELDS)
    plain = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                          **FIELDS)
    assert PROP_CRC_SIZE == 20
    assert len(unsealed) == len(plain) + 20
    assert bytes(unsealed[-20:]) == b"__CRC32#\x01" + b"0" * 10 + b"\x02"
    props_len_pos = len(unsealed) - 2 - len(PROPS_TEXT) - 20
    assert struct.unpack_from(">h", unsealed, props_len_pos)[0] == len(PROPS_TEXT) + 20
    assert bytes(unsealed[4:props_len_pos]) == bytes(plain[4:props_len_pos])  # all but TOTALSIZE
    sealed = sealed_fixed_record()
    crc = masked_crc(bytes(sealed[:-20]))
    assert bytes(sealed[-20:]) == b"__CRC32#\x01" + prop_crc_digits(crc) + b"\x02"


def test_sealed_record_decodes_with_the_crc_checked_and_the_property_hidden() -> None:
    sealed = sealed_fixed_record()
    for require in (False, True):
        decoded = decode_record(sealed, check_crc=True, require_prop_crc=require)
        assert decoded.kind is DecodeKind.RECORD, decoded.reason
        assert decoded.record is not None and decoded.record.properties == PROPS
    plain = encode_record(topic="T", body=b"x", properties={}, born_host=BORN_V4, store_host=STORE_V4)
    assert decode_record(plain, require_prop_crc=True).kind is DecodeKind.CORRUPT
    assert decode_record(plain, require_prop_crc=False).kind is DecodeKind.RECORD


def test_unsealed_prop_crc_record_fails_the_crc_but_decodes_without_checking() -> None:
    unsealed = encode_record(topic="TopicTest", body=BODY, properties=PROPS, born_host=BORN_V4, store_host=STORE_V4,
                             prop_crc=True, **FIELDS)
    assert decode_record(unsealed, check_crc=True).kind is DecodeKind.CORRUPT
    assert decode_record(unsealed, check_crc=False).kind is DecodeKind.RECORD


def flipped_kind_for_size_field(buf: bytes | bytearray) -> DecodeKind:
    """What a record whose TOTALSIZE was damaged must decode as, alone in ``buf``."""
    size = struct.unpack_from(">i", buf, 0)[0]
    return DecodeKind.INCOMPLETE if size > len(buf) else DecodeKind.CORRUPT


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_any_flip_before_the_crc_tail_is_corrupt(mask: int) -> None:
    sealed = sealed_fixed_record()
    for i in range(len(sealed) - PROP_CRC_SIZE):
        damaged = bytearray(sealed)
        damaged[i] ^= mask
        strict = decode_record(damaged, check_crc=True, require_prop_crc=True)
        expected = flipped_kind_for_size_field(damaged) if i < 4 else DecodeKind.CORRUPT
        assert strict.kind is expected, (i, strict.reason)


def test_flips_inside_the_crc_tail_are_corrupt_when_the_crc_is_required() -> None:
    sealed = sealed_fixed_record()
    for i in range(len(sealed) - PROP_CRC_SIZE, len(sealed)):
        for mask in range(1, 256):
            damaged = bytearray(sealed)
            damaged[i] ^= mask
            assert decode_record(damaged, require_prop_crc=True).kind is DecodeKind.CORRUPT, (i, mask)


def test_without_require_prop_crc_a_flip_that_erases_the_crc_property_goes_unnoticed() -> None:
    # Like RocketMQ (forceVerifyPropCRC with no __CRC32# found), the CRC is only checked when the
    # property parses. Turning the separator before it into text merges the two properties: the
    # record decodes, with a different KEYS value. Stores that always seal must pass require_prop_crc.
    sealed = sealed_fixed_record()
    damaged = bytearray(sealed)
    sep = len(sealed) - PROP_CRC_SIZE - 1
    assert damaged[sep] == 0x02
    damaged[sep] = ord("X")
    lax = decode_record(damaged, check_crc=True, require_prop_crc=False)
    assert lax.kind is DecodeKind.RECORD and lax.record is not None
    assert lax.record.properties["KEYS"].startswith("k1 k2X__CRC32#\x01")
    assert decode_record(damaged, check_crc=True, require_prop_crc=True).kind is DecodeKind.CORRUPT


# -- hypothesis: round trip, prefixes, flips ------------------------------------------------------

TOPIC_CHARS = string.ascii_letters + string.digits + "_-"
TOPICS = st.one_of(st.text(TOPIC_CHARS, min_size=1, max_size=127),  # [A-Za-z0-9_-]{1,127}: v1
                   st.text(TOPIC_CHARS, min_size=128, max_size=300))  # v2
PROP_TEXT = st.text(alphabet=st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]),
                    min_size=1, max_size=16)
PROPERTIES = st.dictionaries(PROP_TEXT.filter(lambda k: k != PROP_CRC_KEY), PROP_TEXT, max_size=6)
IPV4_HOSTS = st.builds(lambda a, p: Host(str(ipaddress.IPv4Address(a)), p), st.integers(0, 2**32 - 1),
                       st.integers(0, 65535))
IPV6_HOSTS = st.builds(lambda a, p: Host(str(ipaddress.IPv6Address(a)), p), st.integers(0, 2**128 - 1),
                       st.integers(0, 65535))
HOSTS = st.one_of(IPV4_HOSTS, IPV6_HOSTS)

RECORD_ARGS = st.fixed_dictionaries({
    "topic": TOPICS,
    "body": st.binary(max_size=2000),
    "properties": PROPERTIES,
    "queue_id": st.integers(0, INT_MAX),
    "flag": st.integers(-(2**31), INT_MAX),
    "sys_flag": st.integers(0, INT_MAX).map(lambda f: f & ~0x30),
    "born_ms": st.integers(0, LONG_MAX),
    "born_host": HOSTS,
    "store_host": HOSTS,
    "store_ms": st.integers(0, LONG_MAX),
    "queue_offset": st.integers(0, LONG_MAX),
    "phys_offset": st.integers(0, LONG_MAX),
    "reconsume_times": st.integers(0, INT_MAX),
    "prepared_tx_offset": st.integers(0, LONG_MAX),
    "prop_crc": st.booleans(),
})


def build(args: dict[str, Any]) -> bytes:
    buf = encode_record(**args)
    if args["prop_crc"]:
        seal_record(buf, 0, len(buf))
    return bytes(buf)


def expected_sys_flag(args: dict[str, Any]) -> int:
    sys_flag: int = args["sys_flag"]
    return sys_flag | (0x10 if args["born_host"].is_v6 else 0) | (0x20 if args["store_host"].is_v6 else 0)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(RECORD_ARGS)
def test_round_trip_returns_every_field(args: dict[str, Any]) -> None:
    buf = build(args)
    props_size = len(encode_properties(args["properties"])) + (PROP_CRC_SIZE if args["prop_crc"] else 0)
    sys_flag = expected_sys_flag(args)
    version = 2 if len(args["topic"]) > 127 else 1
    assert len(buf) == record_size(sys_flag, len(args["body"]), len(args["topic"]), props_size, version)
    decoded = decode_record(buf, check_crc=True, require_prop_crc=args["prop_crc"])
    assert decoded.kind is DecodeKind.RECORD, decoded.reason
    assert decoded.size == len(buf)
    r = decoded.record
    assert r is not None
    for name in ("topic", "body", "properties", "queue_id", "flag", "born_ms", "born_host", "store_host",
                 "store_ms", "queue_offset", "phys_offset", "reconsume_times", "prepared_tx_offset"):
        assert getattr(r, name) == args[name], name
    assert r.sys_flag == sys_flag
    assert r.version == version
    assert r.body_crc == masked_crc(args["body"])
    assert r.size == len(buf)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(RECORD_ARGS, st.binary(max_size=16))
def test_every_strict_prefix_is_incomplete(args: dict[str, Any], lead: bytes) -> None:
    buf = build(args)
    for n in range(len(buf)):
        assert decode_record(buf[:n]).kind is DecodeKind.INCOMPLETE, n
        assert decode_record(lead + buf[:n], len(lead)).kind is DecodeKind.INCOMPLETE, n
    assert decode_record(lead + buf, len(lead)).kind is DecodeKind.RECORD


FLIPS = st.lists(st.tuples(st.integers(0, 2**16), st.integers(1, 255)), min_size=1, max_size=24)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(RECORD_ARGS, FLIPS)
def test_a_flipped_byte_is_caught_or_keeps_the_record_size(args: dict[str, Any], flips: list[tuple[int, int]]
                                                           ) -> None:
    buf = build(args)
    for where, mask in flips:
        i = where % len(buf)
        damaged = bytearray(buf)
        damaged[i] ^= mask
        lax = decode_record(damaged, check_crc=True)
        strict = decode_record(damaged, check_crc=True, require_prop_crc=args["prop_crc"])
        assert lax.kind in (DecodeKind.RECORD, DecodeKind.CORRUPT, DecodeKind.INCOMPLETE), (i, lax)
        if lax.kind is DecodeKind.RECORD:
            assert lax.size == len(buf)
            assert i >= 4  # a RECORD never comes out of a damaged TOTALSIZE
        if i < 4:
            assert lax.kind is flipped_kind_for_size_field(damaged)
        if args["prop_crc"]:
            # The whole-record CRC catches every single-byte flip when it is required...
            assert strict.kind is not DecodeKind.RECORD, (i, mask)
            # ...and when it is not, a flip passes only by taking the __CRC32# property itself out.
            if lax.kind is DecodeKind.RECORD:
                assert strict.kind is DecodeKind.CORRUPT
                assert "whole-record CRC property missing" in strict.reason


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(RECORD_ARGS, st.integers(0, 2**16), st.integers(1, 255))
def test_a_flipped_body_byte_is_a_body_crc_mismatch(args: dict[str, Any], where: int, mask: int) -> None:
    if not args["body"]:
        return
    buf = build(args)
    body_pos = 48 + len(args["born_host"].packed) + 8 + len(args["store_host"].packed) + 16
    i = body_pos + where % len(args["body"])
    damaged = bytearray(buf)
    damaged[i] ^= mask
    decoded = decode_record(damaged, check_crc=True)
    assert (decoded.kind, decoded.reason, decoded.size) == (DecodeKind.CORRUPT, "body CRC mismatch", len(buf))
    unchecked = decode_record(damaged, check_crc=False)
    assert unchecked.record is not None and unchecked.record.body != args["body"]


@settings(max_examples=500)
@given(st.binary(max_size=400), st.integers(0, 16))
def test_garbage_never_raises(data: bytes, pos: int) -> None:
    decoded = decode_record(data, pos)
    assert decoded.kind in DecodeKind


@settings(max_examples=500)
@given(st.sampled_from([MAGIC_V1, MAGIC_V2, BLANK_MAGIC]), st.integers(-(2**31), 600), st.binary(max_size=600),
       st.booleans())
def test_garbage_behind_a_valid_magic_never_raises(magic: int, size: int, rest: bytes, crc: bool) -> None:
    buf = struct.pack(">ii", size, magic) + rest
    decoded = decode_record(buf, check_crc=crc, require_prop_crc=crc)
    if decoded.kind is DecodeKind.RECORD:
        assert decoded.size == size <= len(buf)
    elif decoded.kind is DecodeKind.BLANK:
        assert magic == BLANK_MAGIC and decoded.size == size >= 8


# -- properties parser ----------------------------------------------------------------------------


def java_string2message_properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties, transcribed loop for loop (reference §1.4)."""
    out: dict[str, str] = {}
    length, index = len(text), 0
    while index < length:
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv = text.find("\x01", index)
            if index < kv < new_index - 1:
                out[text[index:kv]] = text[kv + 1:new_index]
        index = new_index + 1
    return out


@pytest.mark.parametrize(("text", "expected"), [
    ("", {}),
    ("TAGS\x01TagA\x02KEYS\x01k1 k2\x02", {"TAGS": "TagA", "KEYS": "k1 k2"}),
    ("a\x01b", {"a": "b"}),                          # the last separator may be missing
    ("a\x01b\x02c\x01d", {"a": "b", "c": "d"}),
    ("\x01b\x02", {}),                               # empty name
    ("a\x01\x02", {}),                               # empty value
    ("ab\x02", {}),                                  # no name/value separator
    ("a\x01b\x01c\x02", {"a": "b\x01c"}),            # the first \x01 splits; the value keeps the rest
    ("a\x01x\x02a\x01y\x02", {"a": "y"}),            # a later duplicate wins, as in a HashMap
    ("\x02\x02a\x01b\x02\x02", {"a": "b"}),
    ("\x01\x01\x01\x02", {}),
])
def test_decode_properties_follows_the_rocketmq_parser(text: str, expected: dict[str, str]) -> None:
    assert decode_properties(text.encode()) == expected
    assert java_string2message_properties(text) == expected


@given(st.text(alphabet="ab\x01\x02", max_size=40))
def test_decode_properties_matches_the_java_loop(text: str) -> None:
    assert decode_properties(text.encode()) == java_string2message_properties(text)


@given(PROPERTIES)
def test_properties_round_trip(props: dict[str, str]) -> None:
    encoded = encode_properties(props)
    assert encoded.endswith(b"\x02") or not props
    assert decode_properties(encoded) == props
    assert decode_properties(encoded.removesuffix(b"\x02")) == props
