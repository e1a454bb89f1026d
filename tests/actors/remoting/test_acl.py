"""The remoting front's ACL on requests built here: RocketMQ's plain_acl.yml, its order of checks, its
permission rules and address patterns, ACL 2.0's remarks, and the reload when the file changes."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from mqstore.actors.remoting.acl import AccessControl
from mqstore.actors.remoting.acl_address import AddressPatternError, parse_pattern
from mqstore.actors.remoting.acl_file import PUB, SUB, AclFileError, parse_acl, read_acl
from mqstore.actors.remoting.headers import Peer
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.signature import Credentials, signed

ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicP=PUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: nodefaults
    secretKey: 0123456
    admin: no
  - accessKey: rocketmq2
    secretKey: 87654321
    whiteRemoteAddress: 192.168.1.*
    admin: true
dataVersion:
  - timestamp: 1700000000000
    counter: 1
"""
USER = Credentials("RocketMQ", "12345678")
HALF = 1000  # a half message of topicB at this commitlog offset
LOCAL = Peer(1, "127.0.0.1", 50000)


def control(tmp_path: Path, text: str = ACL, **kwargs: int) -> AccessControl:
    path = tmp_path / "plain_acl.yml"
    path.write_text(text)

    async def stored(phys_offset: int) -> tuple[str, dict[str, str]] | None:
        if phys_offset == HALF:
            return "RMQ_SYS_TRANS_HALF_TOPIC", {"REAL_TOPIC": "topicB"}
        return ("topicC", {}) if phys_offset == 0 else None

    return AccessControl(path, stored, **kwargs)


def request(code: int, ext: dict[str, str] | None = None, body: bytes = b"",
            credentials: Credentials | None = USER) -> rm.RemotingCommand:
    fields = dict(ext or {})
    if credentials is not None:
        fields = signed(fields, body, credentials, 63)
    return rm.RemotingCommand(code, 1, 0, None, fields, body, "CPP", 63)


def check(acl: AccessControl, command: rm.RemotingCommand, peer: Peer = LOCAL) -> str | None:
    return asyncio.run(acl.check(command, peer))


def test_the_file_reads_every_value_as_a_string() -> None:
    rules = parse_acl(ACL)
    assert rules.accounts["nodefaults"].secret_key == "0123456"  # not 83, as safe_load would give
    user = rules.accounts["RocketMQ"]
    assert (user.admin, user.default_topic_perm, user.default_group_perm) == (False, 1, SUB)
    assert user.topic_perms == {"topicA": 1, "topicB": PUB | SUB, "topicC": SUB, "topicP": PUB}
    assert rules.accounts["rocketmq2"].admin and not rules.accounts["nodefaults"].admin
    assert rules.accounts["nodefaults"].default_topic_perm is None


@pytest.mark.parametrize("text, why", [
    ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "longer than 6"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: maybe\n", "admin must be"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    colour: red\n", "unknown keys"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [topicA]\n", "name=PERM"),
    ("globalWhiteRemoteAddresses: [1-2.3.4.5]\n", "octets 2 to 4"),
    ("accounts: [1, 2\n", "not YAML"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n  - accessKey: RocketMQ\n"
     "    secretKey: 12345678\n", "twice"),
])
def test_a_file_rocketmq_would_not_load_is_an_error(text: str, why: str) -> None:
    with pytest.raises(AclFileError, match=why):
        parse_acl(text)


@pytest.mark.parametrize("pattern, yes, no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4", "192.168.1.22"]),
    ("192.168.1.1,192.168.1.9", ["192.168.1.9"], ["192.168.1.2"]),
    ("192.168.*.*", ["192.168.200.1"], ["192.169.0.1"]),
    ("192.168.1.1-100", ["192.168.1.100", "192.168.1.1"], ["192.168.1.101", "192.168.2.50"]),
    ("10.10.1-3.*", ["10.10.3.255"], ["10.10.4.0"]),
    ("127.0.0.1", ["127.0.0.1", "::ffff:127.0.0.1"], ["127.0.0.2"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
])
def test_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    matcher = parse_pattern(pattern)
    assert matcher is not None
    assert all(matcher.matches(ip) for ip in yes) and not any(matcher.matches(ip) for ip in no)


def test_blank_patterns_never_match_and_bad_ones_are_errors() -> None:
    assert parse_pattern("  ") is None
    for bad in ("300.1.1.1", "1.2.3.{", "a.b.c.*", "1.2.9-3.4"):
        with pytest.raises(AddressPatternError):
            parse_pattern(bad)


def test_authentication_refusals_say_what_acl_2_says(tmp_path: Path) -> None:
    acl = control(tmp_path)
    send = {"topic": "topicB", "producerGroup": "PG"}
    assert check(acl, request(rm.SEND_MESSAGE, send)) is None
    assert check(acl, request(rm.SEND_MESSAGE, send, credentials=None)) == "username cannot be null."
    assert check(acl, request(rm.SEND_MESSAGE, send, credentials=Credentials("", "", "ALIYUN"))) == (
        "username cannot be null.")  # the C++ client without credentials
    assert check(acl, request(rm.SEND_MESSAGE, send, credentials=Credentials("Forged1", "12345678"))) == (
        "User:Forged1 is not found.")
    assert check(acl, request(rm.SEND_MESSAGE, send, credentials=Credentials("RocketMQ", "wrong-secret"))) == (
        "check signature failed.")
    tampered = request(rm.SEND_MESSAGE, send, b"body")
    tampered.body = b"other"
    assert check(acl, tampered) == "check signature failed."
    assert acl.denied == {"unsigned": 2, "unknown_account": 1, "signature": 2}


def test_route_queries_stay_open_and_white_addresses_skip_the_checks(tmp_path: Path) -> None:
    acl = control(tmp_path)
    assert check(acl, request(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "topicA"}, credentials=None)) is None
    assert check(acl, request(rm.SEND_MESSAGE, {"topic": "topicA"}, credentials=None),
                 Peer(2, "10.10.103.7", 1)) is None  # global white list: anything, unsigned
    admin_unsigned = request(17, {"topic": "x"}, credentials=None)
    admin_unsigned.ext["AccessKey"] = "rocketmq2"  # the account's own white address: no signature needed
    assert check(acl, admin_unsigned, Peer(3, "192.168.1.9", 1)) is None
    assert check(acl, admin_unsigned, Peer(3, "192.168.2.9", 1)) == "check signature failed."


def test_permissions_follow_the_entries_then_the_defaults(tmp_path: Path) -> None:
    acl = control(tmp_path)
    deny = "User:RocketMQ has no permission to access {} from 127.0.0.1, the decision is deny."
    assert check(acl, request(rm.SEND_MESSAGE, {"topic": "topicA"})) == deny.format("Topic:topicA")
    assert check(acl, request(rm.SEND_MESSAGE, {"topic": "topicC"})) == deny.format("Topic:topicC")  # SUB only
    assert check(acl, request(rm.SEND_MESSAGE, {"topic": "other"})) == deny.format("Topic:other")  # default DENY
    assert check(acl, request(rm.SEND_MESSAGE_V2, {"b": "topicP", "a": "PG"})) is None
    assert check(acl, request(rm.SEND_MESSAGE, {"topic": "RMQ_SYS_TRACE_TOPIC"})) is None
    pull = {"consumerGroup": "groupB", "topic": "topicB", "queueId": "0", "queueOffset": "0"}
    assert check(acl, request(rm.PULL_MESSAGE, pull)) is None
    assert check(acl, request(rm.PULL_MESSAGE, {**pull, "topic": "topicP"})) == deny.format("Topic:topicP")
    assert check(acl, request(rm.UPDATE_CONSUMER_OFFSET, {**pull, "consumerGroup": "groupA"})) == (
        deny.format("Group:groupA"))
    assert check(acl, request(rm.PULL_MESSAGE, {**pull, "topic": "%RETRY%groupA"})) == deny.format("Group:groupA")
    assert check(acl, request(rm.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "anyGroup"})) is None  # default SUB
    assert check(acl, request(rm.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": ""})) is None
    assert check(acl, request(17, {"topic": "topicB"})) == (
        "User:RocketMQ has no permission to make request code 17 from 127.0.0.1: it needs an admin account.")
    missing = Credentials("nodefaults", "0123456")
    assert check(acl, request(rm.SEND_MESSAGE, {"topic": "t"}, credentials=missing)) == (
        "User:nodefaults has no permission to access Topic:t from 127.0.0.1, no matched policies.")


def test_bodies_name_the_groups_and_topics_of_heartbeats_and_locks(tmp_path: Path) -> None:
    acl = control(tmp_path)
    beat = {"clientID": "c", "producerDataSet": [{"groupName": "anything"}],
            "consumerDataSet": [{"groupName": "groupB", "subscriptionDataSet": [{"topic": "topicB"},
                                                                                {"topic": "%RETRY%groupB"}]}]}
    assert check(acl, request(rm.HEART_BEAT, body=json.dumps(beat).encode())) is None
    beat["consumerDataSet"][0]["subscriptionDataSet"].append({"topic": "topicA"})
    assert "Topic:topicA" in str(check(acl, request(rm.HEART_BEAT, body=json.dumps(beat).encode())))
    lock = {"consumerGroup": "groupA", "clientId": "c", "mqSet": [{"topic": "topicB", "queueId": 0}]}
    assert "Group:groupA" in str(check(acl, request(rm.LOCK_BATCH_MQ, body=json.dumps(lock).encode())))
    assert "not JSON" in str(check(acl, request(rm.HEART_BEAT, body=b"{nope")))


def test_views_and_transaction_ends_are_checked_against_the_stored_message(tmp_path: Path) -> None:
    acl = control(tmp_path)
    assert check(acl, request(rm.VIEW_MESSAGE_BY_ID, {"offset": "0"})) is None  # topicC: SUB
    end = {"producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": str(HALF), "commitOrRollback": "12"}
    assert check(acl, request(rm.END_TRANSACTION, end)) is None  # its REAL_TOPIC topicB: PUB
    sub_only = ACL.replace("topicB=PUB|SUB", "topicB=SUB")
    acl = control(tmp_path, sub_only)
    assert "Topic:topicB" in str(check(acl, request(rm.END_TRANSACTION, end)))
    acl = control(tmp_path, ACL.replace("topicC=SUB", "topicC=PUB"))
    assert "Topic:topicC" in str(check(acl, request(rm.VIEW_MESSAGE_BY_ID, {"offset": "0"})))


def test_a_changed_file_is_reloaded_and_a_broken_one_keeps_the_last_good(tmp_path: Path) -> None:
    now = [0]
    acl = control(tmp_path, poll_ms=1000, clock=lambda: now[0])
    send = request(rm.SEND_MESSAGE, {"topic": "topicC"})
    assert check(acl, send) is not None
    path = tmp_path / "plain_acl.yml"
    fresh = tmp_path / "fresh.yml"
    fresh.write_text(ACL.replace("topicC=SUB", "topicC=PUB"))
    os.replace(fresh, path)
    assert check(acl, send) is not None  # not looked at again within poll_ms
    now[0] = 1000
    assert check(acl, send) is None and acl.reloads == 2
    path.write_text("accounts: [oops\n")
    now[0] = 2000
    assert check(acl, send) is None and acl.reloads == 2  # the broken file is logged, the last rules kept
    path.unlink()
    now[0] = 3000
    assert check(acl, send) is None


def test_with_no_readable_file_every_checked_request_is_refused(tmp_path: Path) -> None:
    acl = AccessControl(tmp_path / "missing.yml", lambda offset: asyncio.sleep(0, None))
    assert check(acl, request(rm.SEND_MESSAGE, {"topic": "topicB"})) == "the broker's ACL file could not be read."
    assert check(acl, request(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "topicB"})) is None
    with pytest.raises(AclFileError):
        read_acl(tmp_path / "missing.yml")
