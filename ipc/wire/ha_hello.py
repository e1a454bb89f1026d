"""mqstore's authenticated hello on the replication port, run before any HA frame
(``mqstore.ipc.wire.ha``) when ``[ha] secret`` is set. RocketMQ's HA wire has none: anyone who
reaches the port could read the log, or, as a fake master, feed a slave bytes.

Fixed sizes, no state int, integers big-endian::

    challenge, master to slave, 37 B   "MQHA" | byte version=1 | 32 B master_nonce
    answer,    slave to master, 76 B   "MQHA" | 32 B slave_nonce | long broker_id | 32 B slave_mac
    proof,     master to slave, 36 B   "MQHA" | 32 B master_mac

    slave_mac  = HMAC-SHA256(secret, b"mqstore-ha-slave-v1\\0"  + master_nonce + slave_nonce + broker_id)
    master_mac = HMAC-SHA256(secret, b"mqstore-ha-master-v1\\0" + master_nonce + slave_nonce + broker_id)

(``broker_id`` in the MACs: its 8 bytes as sent.) The master's fresh nonce keeps an answer from being
replayed; the slave's keeps a proof from being replayed, and the proof tells the slave its master
holds the secret too. The two labels keep either MAC from being reflected as the other. MACs are
compared in constant time (``hmac.compare_digest``). The broker id of the answer is the one the
slave's handshake must then carry: the caller checks they are equal. A slave whose hello fails, or a
master whose proof does, is disconnected before any frame.
"""

from __future__ import annotations

import hmac
import secrets
import struct
from dataclasses import dataclass

from mqstore.ipc.wire.ha import HaWireError, non_negative

HELLO_MAGIC = b"MQHA"
HELLO_VERSION = 1
NONCE_SIZE = 32
MAC_SIZE = 32
CHALLENGE_SIZE = 4 + 1 + NONCE_SIZE
ANSWER_SIZE = 4 + NONCE_SIZE + 8 + MAC_SIZE
PROOF_SIZE = 4 + MAC_SIZE
SLAVE_LABEL = b"mqstore-ha-slave-v1\0"
MASTER_LABEL = b"mqstore-ha-master-v1\0"

_LONG = struct.Struct(">q")


class HaAuthError(HaWireError):
    """A hello whose MAC does not match: the peer does not hold the secret."""


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_SIZE)


def _mac(secret: bytes, label: bytes, master_nonce: bytes, slave_nonce: bytes, broker_id: int) -> bytes:
    return hmac.new(secret, label + master_nonce + slave_nonce + _LONG.pack(broker_id), "sha256").digest()


def _magic(data: bytes | bytearray | memoryview, size: int, what: str) -> bytes:
    raw = bytes(data)
    if len(raw) != size:
        raise HaWireError(f"hello {what} of {len(raw)} bytes, not {size}")
    if raw[:4] != HELLO_MAGIC:
        raise HaWireError(f"hello {what} without the {HELLO_MAGIC!r} magic")
    return raw


def encode_challenge(master_nonce: bytes) -> bytes:
    if len(master_nonce) != NONCE_SIZE:
        raise ValueError(f"nonce of {len(master_nonce)} bytes, not {NONCE_SIZE}")
    return HELLO_MAGIC + bytes((HELLO_VERSION,)) + master_nonce


def decode_challenge(data: bytes | bytearray | memoryview) -> bytes:
    """The master's nonce, from its challenge."""
    raw = _magic(data, CHALLENGE_SIZE, "challenge")
    if raw[4] != HELLO_VERSION:
        raise HaWireError(f"hello version {raw[4]}, this broker speaks {HELLO_VERSION}")
    return raw[5:]


@dataclass(frozen=True, slots=True)
class HelloAnswer:
    slave_nonce: bytes
    broker_id: int


def encode_answer(secret: bytes, master_nonce: bytes, slave_nonce: bytes, broker_id: int) -> bytes:
    if len(slave_nonce) != NONCE_SIZE:
        raise ValueError(f"nonce of {len(slave_nonce)} bytes, not {NONCE_SIZE}")
    return (HELLO_MAGIC + slave_nonce + _LONG.pack(non_negative("broker id", broker_id))
            + _mac(secret, SLAVE_LABEL, master_nonce, slave_nonce, broker_id))


def check_answer(secret: bytes, master_nonce: bytes, data: bytes | bytearray | memoryview) -> HelloAnswer:
    """The slave's nonce and broker id, once its MAC over ``master_nonce`` proves it holds
    ``secret``; HaAuthError when it does not."""
    raw = _magic(data, ANSWER_SIZE, "answer")
    slave_nonce = raw[4:4 + NONCE_SIZE]
    (broker_id,) = _LONG.unpack_from(raw, 4 + NONCE_SIZE)
    non_negative("broker id", broker_id)
    expected = _mac(secret, SLAVE_LABEL, master_nonce, slave_nonce, broker_id)
    if not hmac.compare_digest(expected, raw[ANSWER_SIZE - MAC_SIZE:]):
        raise HaAuthError("the slave's hello MAC does not match: another secret, or none")
    return HelloAnswer(slave_nonce, broker_id)


def encode_proof(secret: bytes, master_nonce: bytes, answer: HelloAnswer) -> bytes:
    return HELLO_MAGIC + _mac(secret, MASTER_LABEL, master_nonce, answer.slave_nonce, answer.broker_id)


def check_proof(secret: bytes, master_nonce: bytes, slave_nonce: bytes, broker_id: int,
                data: bytes | bytearray | memoryview) -> None:
    """HaAuthError unless the master's proof shows it holds ``secret``."""
    raw = _magic(data, PROOF_SIZE, "proof")
    expected = _mac(secret, MASTER_LABEL, master_nonce, slave_nonce, broker_id)
    if not hmac.compare_digest(expected, raw[4:]):
        raise HaAuthError("the master's hello MAC does not match: another secret, or none")
