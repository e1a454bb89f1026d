"""The remoting front's ACL under attack: a broker with a ``plain_acl.yml`` (``acl_setting``), clients
from other loopback addresses (127.0.0.2 and up) trying what an outsider would, while a legitimate
signed client on 127.0.0.1 keeps sending and pulling between every attack request.

    anonymous_send              SEND_MESSAGE to the legitimate topic, unsigned
    anonymous_offset_move       UPDATE_CONSUMER_OFFSET of the legitimate group back to 0
    anonymous_view              VIEW_MESSAGE_BY_ID at commitlog offset 0
    anonymous_end_transaction   END_TRANSACTION (rollback) at commitlog offset 0, as a call and oneway
    anonymous_unregister        UNREGISTER_CLIENT of the legitimate client from its group
    wrong_secret                the legitimate account's key with another secret
    forged_account              an account the file does not have, signed with a secret of its own

A finding: any attack request answered with anything but NO_PERMISSION (a oneway one, any answer at
all), the legitimate group's offset moved or its client unregistered, or a legitimate send or pull
not served."""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.signature import Credentials
from mqstore.scripts.harness import wait_for
from mqstore.scripts.survival.hostile.resource_attacks import GOOD_FRONT_GROUP, GOOD_FRONT_TOPIC

TOPIC, GROUP, CLIENT_ID = "AclGood", "CG_acl_good", "127.0.0.1@good"
LEGIT = Credentials("good-client", "good-client-secret", "ALIYUN")
ACL_FILE = f"""\
accounts:
  - accessKey: {LEGIT.access_key}
    secretKey: {LEGIT.secret_key}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}=PUB|SUB, {GOOD_FRONT_TOPIC}=PUB|SUB]
    groupPerms: [{GROUP}=SUB, {GOOD_FRONT_GROUP}=SUB]
"""
SERVED_PULL = (rm.SUCCESS, rm.PULL_NOT_FOUND, rm.PULL_RETRY_IMMEDIATELY)


def acl_setting(root: Path) -> str:
    """The [remoting] key naming the ACL file it writes under ``root``."""
    path = root / "plain_acl.yml"
    path.write_text(ACL_FILE)
    return f'acl_file = "{path}"\n'


class AclAttacks:
    def __init__(self, port: int, args: argparse.Namespace, findings: list[str]) -> None:
        self.port = port
        self.rounds = max(1, args.frames // 10)
        self.timeout_s = max(args.seconds, 5.0)
        self.findings = findings
        self.legit = rm.RemotingClient("127.0.0.1", port, timeout_s=self.timeout_s, credentials=LEGIT)
        self.sent = self.sends_ok = self.pulls_ok = self.pulled = self.next_offset = 0
        self.legit_failures: Counter[str] = Counter()
        self._source = 1

    def run(self) -> dict[str, Any]:
        try:
            return self._run()
        finally:
            self.legit.close()

    def _run(self) -> dict[str, Any]:
        beat = (f'{{"clientID":"{CLIENT_ID}","consumerDataSet":[{{"groupName":"{GROUP}","subscriptionDataSet":'
                f'[{{"topic":"{TOPIC}","subString":"*"}}]}}]}}').encode()
        self._legit_call(rm.HEART_BEAT, {}, beat, "heartbeat")
        self._legit_send()
        commit = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 1}
        # refused until the first send is in the consume queue (an offset past the queue's end)
        wait_for(lambda: self.legit.call(rm.UPDATE_CONSUMER_OFFSET, commit).code == rm.SUCCESS, 30,
                 "the legitimate group's first commit")
        send = {"producerGroup": "PG", "topic": TOPIC, "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0}
        end = {"producerGroup": "PG", "tranStateTableOffset": 0, "commitLogOffset": 0, "commitOrRollback": 12}
        attacks: dict[str, tuple[Credentials | None, int, dict[str, Any], bytes]] = {
            "anonymous_send": (None, rm.SEND_MESSAGE, send, b"intruder"),
            "anonymous_offset_move": (None, rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC,
                                                                       "queueId": 0, "commitOffset": 0}, b""),
            "anonymous_view": (None, rm.VIEW_MESSAGE_BY_ID, {"offset": 0}, b""),
            "anonymous_end_transaction": (None, rm.END_TRANSACTION, end, b""),
            "anonymous_unregister": (None, rm.UNREGISTER_CLIENT, {"clientID": CLIENT_ID, "consumerGroup": GROUP}, b""),
            "wrong_secret": (Credentials(LEGIT.access_key, "not-the-secret"), rm.SEND_MESSAGE, send, b"intruder"),
            "forged_account": (Credentials("forged-account", "forged-secret"), rm.SEND_MESSAGE, send, b"intruder"),
        }
        outcome: dict[str, Any] = {}
        for name, (credentials, code, ext, body) in attacks.items():
            outcome[name] = self._attack(name, credentials, code, ext, body)
        ended = self._attack("anonymous_end_transaction_oneway", None, rm.END_TRANSACTION, end, b"", oneway=True)
        outcome["anonymous_end_transaction_oneway"] = ended
        self._check_untouched()
        self._legit_drain()
        if self.pulled < self.sends_ok:
            self.findings.append(f"remoting_acl: the legitimate client pulled {self.pulled} of {self.sends_ok} sent")
        return {"attacks": outcome, "attack_requests": sum(sum(o.values()) for o in outcome.values()),
                "legit_sends_ok": self.sends_ok, "legit_pulls_ok": self.pulls_ok, "legit_pulled": self.pulled,
                "legit_failures": dict(self.legit_failures)}

    def _attack(self, name: str, credentials: Credentials | None, code: int, ext: dict[str, Any], body: bytes,
                oneway: bool = False) -> dict[str, int]:
        answers: Counter[str] = Counter()
        self._source = self._source % 250 + 1
        with rm.RemotingClient("127.0.0.1", self.port, timeout_s=self.timeout_s, credentials=credentials,
                               source_ip=f"127.0.0.{self._source + 1}") as attacker:
            for _ in range(self.rounds):
                if oneway:
                    attacker.oneway(code, ext, body)
                    answers["oneway_sent"] += 1
                else:
                    reply = attacker.call(code, ext, body)
                    answers["NO_PERMISSION" if reply.code == rm.NO_PERMISSION else f"code_{reply.code}"] += 1
                self._legit_send()
                self._legit_pull()
            if oneway:  # anything the front answered comes before the answer to this call
                attacker.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
                stray = [r for r in attacker.requests if r.code != rm.CHECK_TRANSACTION_STATE]
                answers["answered"] = len(stray)
        if set(answers) - {"NO_PERMISSION", "oneway_sent", "answered"} or answers.get("answered"):
            self.findings.append(f"remoting_acl {name}: answered {dict(answers)}")
        return dict(answers)

    def _check_untouched(self) -> None:
        offset = self._legit_call(rm.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0},
                                  b"", "query offset")
        if offset is not None and offset.ext.get("offset") != "1":
            self.findings.append(f"remoting_acl: the legitimate group's offset moved to {offset.ext.get('offset')}")
        members = self._legit_call(rm.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}, b"", "consumer list")
        if members is not None and CLIENT_ID.encode() not in members.body:
            self.findings.append("remoting_acl: the legitimate client was unregistered")

    def _legit_call(self, code: int, ext: dict[str, Any], body: bytes, what: str,
                    ok: Callable[[int], bool] = lambda code: code == rm.SUCCESS) -> rm.RemotingCommand | None:
        try:
            reply = self.legit.call(code, ext, body)
        except (OSError, rm.FrameError) as exc:
            self.legit_failures[f"{what}: {type(exc).__name__}"] += 1
            return None
        if not ok(reply.code):
            self.legit_failures[f"{what}: {reply.code} {reply.remark}"] += 1
            self.findings.append(f"remoting_acl: a legitimate {what} got {reply.code} {reply.remark}")
            return None
        return reply

    def _legit_send(self) -> None:
        ext = {"producerGroup": "PG_good", "topic": TOPIC, "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0}
        self.sent += 1
        if self._legit_call(rm.SEND_MESSAGE, ext, f"good-{self.sent}".encode(), "send") is not None:
            self.sends_ok += 1

    def _legit_pull(self) -> int:
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "queueOffset": self.next_offset,
               "maxMsgNums": 32, "sysFlag": 0}
        reply = self._legit_call(rm.PULL_MESSAGE, ext, b"", "pull", lambda code: code in SERVED_PULL)
        if reply is None:
            return 0
        self.pulls_ok += 1
        got = len(rm.decode_records(reply.body)) if reply.code == rm.SUCCESS else 0
        self.pulled += got
        self.next_offset = int(reply.ext.get("nextBeginOffset", self.next_offset))
        return got

    def _legit_drain(self) -> None:
        with contextlib.suppress(AssertionError):  # the consume queue lags the sends a little; short is a finding
            wait_for(lambda: self.pulled >= self.sends_ok or (self._legit_pull() >= 0 and self.pulled >= self.sends_ok),
                     10, "the legitimate client's last pulls")
