"""The hostile harness's attacks on the ipc path's trust: a client sending to the topics only the broker
writes, a request over the broker's limit, a run directory planted before the broker or a client
comes, and (over TCP) a CURVE key let in without the admin role making admin requests, and a client
key subscribing to the broker's internal notice streams. A mixin of
``Attacks`` (``mqstore.scripts.survival.hostile.attacks``), which lists ``IPC_ATTACKS``."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from mqstore.engine.log.record import SCHEDULE_TOPIC
from mqstore.engine.put.transactions import CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC
from mqstore.engine.reclaim.move import MOVED_TOPIC
from mqstore.engine.timer.put_rule import TIMER_TOPIC
from mqstore.ipc.client.api import Producer
from mqstore.ipc.transport.channel import REQUEST_TOO_LARGE, BrokerError, BrokerTimeoutError
from mqstore.ipc.transport.curve import DEFAULT_CLIENT, CurveContext, CurveKeys, generate_keys
from mqstore.ipc.transport.endpoints import INTERNAL, EndpointError, Endpoints
from mqstore.ipc.transport.roles import ROLES_FILE
from mqstore.ipc.wire import schema
from mqstore.scripts.survival.hostile.observers import GOOD_TOPIC

SYSTEM_TOPICS = (SCHEDULE_TOPIC, HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC, TIMER_TOPIC, MOVED_TOPIC, "rmq_sys_planted")
IPC_ATTACKS = ("system_topic_sends", "oversized_request", "premade_run_dir", "keyed_admin", "notice_snooping")


def handshake_refused(monitor: zmq.Socket[Any], deadline_s: float) -> bool:
    """Whether the monitored socket's handshake was refused by the ZAP handler before the deadline;
    False at once if it succeeded."""
    end = time.monotonic() + deadline_s
    while (left_ms := int((end - time.monotonic()) * 1000)) > 0:
        if not monitor.poll(left_ms):
            break
        event = recv_monitor_message(monitor)["event"]
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            return False
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return True
    return False
ROLE_KEY = "nonadmin"  # a client key the broker lets in, with the produce and consume roles only


def grant_roles(keys_dir: Path) -> None:
    """Before a CURVE broker starts: the ``ROLE_KEY`` keypair beside the harness's own key, and a roles
    file giving the harness's key (the good client's) every role and ``ROLE_KEY`` all but admin."""
    generate_keys(keys_dir, [ROLE_KEY])
    (keys_dir / ROLES_FILE).write_text(f'{DEFAULT_CLIENT} = ["produce", "consume", "admin"]\n'
                                       f'{ROLE_KEY} = ["produce", "consume"]\n')


class IpcAttacks:
    ctx: zmq.Context[Any]
    ep: Endpoints
    args: Any
    findings: list[str]
    role_keys_dir: Path | None = None  # with --tcp: where ``grant_roles`` put ROLE_KEY

    def _exchange(self, endpoint: str, frames: list[list[bytes]], timeout_s: float | None = None,
                  window: int = 32, ctx: zmq.Context[Any] | None = None) -> dict[str, int]:
        raise NotImplementedError  # Attacks's

    def keyed_admin(self) -> dict[str, Any]:
        """Over TCP with CURVE roles: a key let in, with produce and consume but not admin, deletes the
        good client's topic, creates one, deletes the topic's offsets and resets the good group: each
        refused NO_PERMISSION, while the same key's send is served."""
        if self.ep.curve is None or self.role_keys_dir is None:
            return {"skipped": "the broker is not on TCP with CURVE (--tcp)"}
        ctx = CurveContext(CurveKeys.for_client(self.role_keys_dir, ROLE_KEY))
        try:
            writer = self._exchange(self.ep.ingress, [
                [schema.pack(schema.request("delete_topic", 1, topic=GOOD_TOPIC))],
                [schema.pack(schema.request("create_topic", 2, topic="HostileAdmin", queues=1))]], ctx=ctx)
            reader = self._exchange(self.ep.reader(0), [
                [schema.pack(schema.request("delete_topic_offsets", 3, topic=GOOD_TOPIC))],
                [schema.pack(schema.request("commit_offset", 4, group="good", topic=GOOD_TOPIC, queue=0, offset=0,
                                            admin=True))]], ctx=ctx)
            sent = self._exchange(self.ep.ingress, [[schema.pack(schema.request(
                "send", 5, msgs=[{"topic": "HostileRoles", "body": b"a produce role's send"}]))]], ctx=ctx)
        finally:
            ctx.destroy(0)
        if writer != {schema.NO_PERMISSION: 2} or reader != {schema.NO_PERMISSION: 2}:
            self.findings.append(f"a key without the admin role made an admin request: writer {writer}, "
                                 f"reader {reader}")
        if sent != {"OK:PUT_OK": 1}:
            self.findings.append(f"a key with the produce role could not send: {sent}")
        return {"writer": writer, "reader": reader, "send": sent}

    def notice_snooping(self) -> dict[str, Any]:
        """Over TCP with CURVE: the client's key, let in for requests, subscribes to every internal
        notice stream (the dispatch stream carries every send's body); each handshake is refused."""
        if self.ep.curve is None:
            return {"skipped": "the broker is not on TCP with CURVE (--tcp)"}
        outcomes: dict[str, str] = {}
        for name in INTERNAL:
            if name == "replicated":
                continue  # bound by a master's HA actor alone, which this broker does not run (nothing to snoop)
            address = self.ep.role(name)
            sock = self.ctx.socket(zmq.SUB)
            monitor = sock.get_monitor_socket()
            try:
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.SUBSCRIBE, b"")
                sock.connect(address)
                outcomes[name] = "refused" if handshake_refused(monitor, max(self.args.seconds, 5.0)) else "admitted"
            finally:
                sock.disable_monitor()
                monitor.close(0)
                sock.close(0)
        if set(outcomes.values()) != {"refused"}:
            self.findings.append(f"a client key subscribed to the broker's notice streams: {outcomes}")
        return {"outcomes": outcomes}

    def system_topic_sends(self) -> dict[str, Any]:
        """Sends, creates and deletes naming a system topic, as a raw client on the ingress."""
        frames = []
        for i, topic in enumerate(SYSTEM_TOPICS):
            frames += [[schema.pack(schema.request("send", 3 * i, msgs=[{"topic": topic, "body": b"forged"}]))],
                       [schema.pack(schema.request("create_topic", 3 * i + 1, topic=topic, queues=1))],
                       [schema.pack(schema.request("delete_topic", 3 * i + 2, topic=topic))]]
        replies = self._exchange(self.ep.ingress, frames)
        if set(replies) != {schema.NO_PERMISSION}:
            self.findings.append(f"system topics: a client's request was not refused NO_PERMISSION ({replies})")
        return {"replies": replies}

    def oversized_request(self) -> dict[str, Any]:
        """The client library's send of a body past the broker's request limit: refused before it goes."""
        with Producer(endpoints=self.ep, retries=0) as producer:
            try:
                producer.send("Hostile", bytes(self.args.max_request_bytes + 1))
                outcome = "sent"
            except BrokerError as exc:
                outcome = exc.status
            except BrokerTimeoutError:
                outcome = "timed_out"
        if outcome != REQUEST_TOO_LARGE:
            self.findings.append(f"an oversized request was not refused by the client: {outcome}")
        return {"outcome": outcome}

    def premade_run_dir(self) -> dict[str, Any]:
        """``mqstore-{uid}`` made before the broker, open to all or a symlink to someone's directory: the
        broker's prepare and a client both refuse it."""
        outcomes: dict[str, str] = {}
        base = Path(tempfile.mkdtemp(prefix="mqh", dir=self.args.dir))
        try:
            for plant in ("open_to_all", "symlink"):
                root = base / plant / f"mqstore-{os.getuid()}"
                root.parent.mkdir()
                if plant == "open_to_all":
                    root.mkdir()
                    os.chmod(root, 0o777)
                else:
                    (base / plant / "theirs").mkdir(mode=0o700)
                    root.symlink_to(base / plant / "theirs")
                planted = Endpoints(root / "0123456789abcdef", 1)
                for who, trust in (("broker", planted.prepare), ("client", partial(Producer, endpoints=planted))):
                    try:
                        made = trust()
                        if isinstance(made, Producer):
                            made.close()
                        outcomes[f"{plant}:{who}"] = "trusted"
                    except EndpointError:
                        outcomes[f"{plant}:{who}"] = "refused"
        finally:
            shutil.rmtree(base, ignore_errors=True)
        if set(outcomes.values()) != {"refused"}:
            self.findings.append(f"a planted run directory was trusted: {outcomes}")
        return {"outcomes": outcomes}
