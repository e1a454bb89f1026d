"""REGISTER_BROKER's header and body against RocketMQ's layouts, written out by hand as a Java broker
sends them (RegisterBrokerRequestHeader, RegisterBrokerBody as JSON and in its compressed form)."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from mqstore.ipc.remoting.registration import (
    BrokerKey,
    BrokerRegistration,
    RegistrationError,
    TopicQueues,
    body_crc32,
    decode_key,
    decode_register,
    encode_register,
)

# a RocketMQ 4.9 broker's body, as fastjson writes it (field order and all)
JAVA_BODY = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"stateVersion":0,'
             b'"timestamp":1700000000000},"topicConfigTable":{"TBW102":{"order":false,"perm":7,"readQueueNums":8,'
             b'"topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8},'
             b'"Orders":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
             b'"topicName":"Orders","topicSysFlag":0,"writeQueueNums":4}}}}')
HEADER = {"brokerName": "broker-b", "brokerAddr": "10.0.0.2:10911", "clusterName": "DefaultCluster",
          "haServerAddr": "10.0.0.2:10912", "brokerId": "1", "enableActingMaster": "false", "compressed": "false"}


def test_a_java_brokers_json_body_gives_its_topics_and_identity() -> None:
    reg = decode_register({**HEADER, "bodyCrc32": str(zlib.crc32(JAVA_BODY) & 0x7FFFFFFF)}, JAVA_BODY)
    assert reg.key == BrokerKey("DefaultCluster", "broker-b", "10.0.0.2:10911", 1)
    assert reg.ha_addr == "10.0.0.2:10912"
    assert reg.topics == {"TBW102": TopicQueues("TBW102", 8, 8, 7), "Orders": TopicQueues("Orders", 4, 4, 6)}
    assert reg.data_version == {"counter": 7, "stateVersion": 0, "timestamp": 1700000000000}
    assert reg.heartbeat_timeout_ms is None


def test_a_bare_topic_config_wrapper_from_an_old_broker_is_read_too() -> None:
    bare = json.dumps(json.loads(JAVA_BODY)["topicConfigSerializeWrapper"]).encode()
    assert set(decode_register(HEADER, bare).topics) == {"TBW102", "Orders"}


def test_a_body_its_crc_does_not_match_is_refused_and_zero_means_unchecked() -> None:
    crc = body_crc32(JAVA_BODY)
    with pytest.raises(RegistrationError, match="crc32 not match"):
        decode_register({**HEADER, "bodyCrc32": str(crc ^ 1)}, JAVA_BODY)
    assert decode_register({**HEADER, "bodyCrc32": "0"}, JAVA_BODY).topics
    # Java's UtilAll.crc32 masks the sign bit: never negative
    assert all(body_crc32(bytes([b])) >= 0 for b in range(256))


def test_the_compressed_form_of_a_rocketmq_4_broker() -> None:
    def chunk(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data
    raw = (chunk(b'{"counter":3,"stateVersion":0,"timestamp":1}') + struct.pack(">i", 2)
           + chunk(b"Orders 4 4 6 SINGLE_TAG {}") + chunk(b"TBW102 8 8 7 SINGLE_TAG")
           + chunk(b"[]") + struct.pack(">i", 0))
    reg = decode_register({**HEADER, "compressed": "true"}, zlib.compress(raw, 9))
    assert reg.topics == {"Orders": TopicQueues("Orders", 4, 4, 6), "TBW102": TopicQueues("TBW102", 8, 8, 7)}
    assert reg.data_version["counter"] == 3
    with pytest.raises(RegistrationError, match="runs past its end"):
        decode_register({**HEADER, "compressed": "true"}, zlib.compress(raw[:60]))
    with pytest.raises(RegistrationError, match="inflate"):
        decode_register({**HEADER, "compressed": "true"}, raw)


def test_encode_writes_rocketmqs_layout_and_decodes_back() -> None:
    reg = BrokerRegistration(BrokerKey("C", "broker-a", "127.0.0.1:10911", 0), "127.0.0.1:10912",
                             {"T": TopicQueues("T", 4, 4, 6)}, {"counter": 1, "stateVersion": 0, "timestamp": 5}, 9000)
    ext, body = encode_register(reg)
    assert ext["brokerId"] == "0" and ext["compressed"] == "false" and ext["heartbeatTimeoutMillis"] == "9000"
    assert int(ext["bodyCrc32"]) == zlib.crc32(body) & 0x7FFFFFFF
    doc = json.loads(body)
    assert doc["filterServerList"] == []
    assert doc["topicConfigSerializeWrapper"]["topicConfigTable"]["T"] == {
        "topicName": "T", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": False, "attributes": {}}
    assert decode_register(ext, body) == reg


@pytest.mark.parametrize("missing", ["brokerName", "brokerAddr", "clusterName", "brokerId"])
def test_a_header_without_a_required_field_names_it(missing: str) -> None:
    with pytest.raises(RegistrationError, match=missing):
        decode_key({k: v for k, v in HEADER.items() if k != missing})


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"topicConfigTable": {"T": {"readQueueNums": -1}}}',
                                  b'{"topicConfigTable": {"T": 3}}', b'{"topicConfigTable": []}'])
def test_a_bad_body_is_a_registration_error(body: bytes) -> None:
    with pytest.raises(RegistrationError):
        decode_register(HEADER, body)
