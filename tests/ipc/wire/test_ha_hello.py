"""The authenticated hello: its bytes stated independently, and each way it refuses a peer."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.ipc.wire.ha import HaWireError
from mqstore.ipc.wire.ha_hello import (
    ANSWER_SIZE,
    CHALLENGE_SIZE,
    PROOF_SIZE,
    HaAuthError,
    HelloAnswer,
    check_answer,
    check_proof,
    decode_challenge,
    encode_answer,
    encode_challenge,
    encode_proof,
    new_nonce,
)

SECRET = b"s3cret"


def _hello(master_secret: bytes, slave_secret: bytes) -> tuple[bytes, bytes, bytes]:
    master_nonce = new_nonce()
    challenge = encode_challenge(master_nonce)
    slave_nonce = new_nonce()
    answer = encode_answer(slave_secret, decode_challenge(challenge), slave_nonce, 4)
    return master_nonce, slave_nonce, answer


def test_hello_layouts() -> None:
    nonce_m, nonce_s = bytes(range(32)), bytes(range(32, 64))
    assert encode_challenge(nonce_m) == b"MQHA" + b"\x01" + nonce_m
    answer = encode_answer(SECRET, nonce_m, nonce_s, 4)
    mac = hmac.new(SECRET, b"mqstore-ha-slave-v1\0" + nonce_m + nonce_s + struct.pack(">q", 4), hashlib.sha256)
    assert answer == b"MQHA" + nonce_s + struct.pack(">q", 4) + mac.digest()
    proof = encode_proof(SECRET, nonce_m, HelloAnswer(nonce_s, 4))
    mac = hmac.new(SECRET, b"mqstore-ha-master-v1\0" + nonce_m + nonce_s + struct.pack(">q", 4), hashlib.sha256)
    assert proof == b"MQHA" + mac.digest()
    assert (len(encode_challenge(nonce_m)), len(answer), len(proof)) == (CHALLENGE_SIZE, ANSWER_SIZE, PROOF_SIZE)


def test_hello_with_one_secret_passes_both_ways() -> None:
    master_nonce, slave_nonce, answer = _hello(SECRET, SECRET)
    checked = check_answer(SECRET, master_nonce, answer)
    assert checked == HelloAnswer(slave_nonce, 4)
    check_proof(SECRET, master_nonce, slave_nonce, 4, encode_proof(SECRET, master_nonce, checked))


def test_a_slave_without_the_secret_is_refused() -> None:
    master_nonce, _, answer = _hello(SECRET, b"other")
    with pytest.raises(HaAuthError):
        check_answer(SECRET, master_nonce, answer)


def test_a_replayed_answer_is_refused() -> None:
    """An answer recorded on one connection fails against the next connection's challenge."""
    _, _, answer = _hello(SECRET, SECRET)
    with pytest.raises(HaAuthError):
        check_answer(SECRET, new_nonce(), answer)


def test_a_master_without_the_secret_is_refused() -> None:
    master_nonce, slave_nonce, _answer = _hello(SECRET, SECRET)
    fake = encode_proof(b"guess", master_nonce, HelloAnswer(slave_nonce, 4))
    with pytest.raises(HaAuthError):
        check_proof(SECRET, master_nonce, slave_nonce, 4, fake)


def test_the_slave_mac_cannot_be_reflected_as_the_master_proof() -> None:
    master_nonce, slave_nonce, answer = _hello(SECRET, SECRET)
    with pytest.raises(HaAuthError):
        check_proof(SECRET, master_nonce, slave_nonce, 4, b"MQHA" + answer[-32:])


def test_a_changed_broker_id_breaks_the_mac() -> None:
    master_nonce, _, answer = _hello(SECRET, SECRET)
    forged = answer[:36] + struct.pack(">q", 5) + answer[44:]
    with pytest.raises(HaAuthError):
        check_answer(SECRET, master_nonce, forged)


@pytest.mark.parametrize("data", [b"", b"MQHA", b"XXXX" + b"\x01" + bytes(32), b"MQHA" + b"\x02" + bytes(32)])
def test_a_malformed_challenge_is_refused(data: bytes) -> None:
    with pytest.raises(HaWireError):
        decode_challenge(data)


@given(st.binary(max_size=100))
def test_any_hello_bytes_give_ha_wire_error_or_pass(data: bytes) -> None:
    for check in (lambda: decode_challenge(data), lambda: check_answer(SECRET, bytes(32), data),
                  lambda: check_proof(SECRET, bytes(32), bytes(32), 1, data)):
        with contextlib.suppress(HaWireError):
            check()
