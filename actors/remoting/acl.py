"""The remoting front's access control: RocketMQ's ACL, as its stock clients speak it.

Every request but the NameServer's route queries is checked before it is served, in ACL 1.0's order
(``PlainPermissionManager.validate``): a ``globalWhiteRemoteAddresses`` match lets it in; else it needs
an ``AccessKey`` of a known account; an account's own ``whiteRemoteAddress`` lets its requests in
unsigned; else the signature must be the account's (``mqstore.ipc.remoting.signature``), an admin
account may make every request, an admin code needs one, and each resource the request names must
be granted (``mqstore.actors.remoting.acl_resources``). A refusal is answered as ACL 2.0 answers it:
NO_PERMISSION (16) with its remark (``username cannot be null.``, ``User:u is not found.``,
``check signature failed.``, ``User:u has no permission to access Topic:t from ip, ...``), and
counted by reason in ``denied``; a oneway request gets no answer at all (the listener's rule).

The accounts come from the ``plain_acl.yml`` that ``[remoting] acl_file`` names
(``mqstore.actors.remoting.acl_file``), reloaded when its inode, size or mtime change (looked at no
more than once per ``poll_ms``); a file that no longer reads keeps the last good rules, logged. If
there never was a good one, every checked request is refused.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.remoting.acl_file import DENY, Account, AclFileError, AclRules, read_acl
from mqstore.actors.remoting.acl_resources import GROUP, TOPIC, Need, Needs, NeedsError, needs_of, topic_need
from mqstore.actors.remoting.headers import Peer
from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import offset_msg_id
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.signature import ACCESS_KEY, verify
from mqstore.ipc.wire import replies, requests
from mqstore.ipc.wire.messages import ReceivedMessage

log = logging.getLogger("mqstore.remoting")

POLL_MS = 1_000
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # anyone signed may publish traces (PlainPermissionManager)
REAL_TOPIC = "REAL_TOPIC"
# the reasons a refusal is counted under (mqstore_remoting_acl_denied{reason=...})
REASONS = ("unsigned", "unknown_account", "signature", "admin", "permission", "no_rules")

StoredMessage = Callable[[int], Awaitable[tuple[str, dict[str, str]] | None]]  # phys_offset -> topic, properties
Call = Callable[[str, requests.Request], Awaitable[dict[str, Any]]]  # the front's request to an actor


@dataclass(frozen=True, slots=True)
class StoredMessages:
    """The topic and properties of the message stored at a commitlog offset, from a reader (what a view
    or a transaction's end is checked against); None when there is none."""

    call: Call
    store_host: Host

    async def __call__(self, phys_offset: int) -> tuple[str, dict[str, str]] | None:
        if not 0 <= phys_offset < 1 << 63:
            return None
        view = requests.ViewId(offset_msg_id(self.store_host, phys_offset))
        msgs = replies.MessagesReply.decode(await self.call("reader0", view)).msgs
        if not msgs:
            return None
        message = ReceivedMessage.from_wire(msgs[0])
        return message.topic, dict(message.properties)


class AccessControl:
    """``check`` a request: None to serve it, else the remark to refuse it with."""

    def __init__(self, path: Path | str, stored: StoredMessage, *, poll_ms: int = POLL_MS,
                 clock: Callable[[], int] = monotonic_ms) -> None:
        self.path = Path(path)
        self.stored = stored
        self.poll_ms = poll_ms
        self.clock = clock
        self.denied: Counter[str] = Counter()
        self.rules: AclRules | None = None
        self.reloads = 0
        self._seen: tuple[int, ...] | None = None
        self._next_poll_ms = clock()
        self._reload()

    def _reload(self) -> None:
        seen: tuple[int, ...]
        try:
            st = os.stat(self.path)
            seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError as exc:
            seen = (-1, exc.errno or 0)
        if seen == self._seen:
            return
        self._seen = seen
        try:
            rules = read_acl(self.path)
        except AclFileError as exc:
            if self.rules is None:
                log.error("ACL: %s; every request but route queries is refused until it reads", exc)
            else:
                log.error("ACL: %s; keeping the rules read before", exc)
            return
        self.rules = rules
        self.reloads += 1
        log.info("ACL: %d account(s) and %d global white address(es) from %s", len(rules.accounts),
                 len(rules.global_white), self.path)

    def poll(self) -> None:
        now = self.clock()
        if now >= self._next_poll_ms:
            self._next_poll_ms = now + self.poll_ms
            self._reload()

    async def check(self, request: rm.RemotingCommand, peer: Peer) -> str | None:
        needs: Needs | None
        try:
            needs, unreadable = needs_of(request), ""
        except NeedsError as exc:
            needs, unreadable = None, str(exc)
        if needs is not None and needs.open:
            return None
        self.poll()
        rules = self.rules
        if rules is None:
            return self._deny("no_rules", "the broker's ACL file could not be read.")
        if any(p.matches(peer.ip) for p in rules.global_white):
            return None
        access_key = request.ext.get(ACCESS_KEY, "")
        if not access_key:
            return self._deny("unsigned", "username cannot be null.")
        account = rules.accounts.get(access_key)
        if account is None:
            return self._deny("unknown_account", f"User:{access_key} is not found.")
        if account.white_address is not None and account.white_address.matches(peer.ip):
            return None
        if not verify(request.ext, request.body, account.secret_key, request.version):
            return self._deny("signature", "check signature failed.")
        if account.admin:
            return None
        if needs is None:
            return self._deny("permission", f"User:{access_key}: {unreadable}")
        return await self._authorize(account, needs, request.code, peer.ip)

    async def _authorize(self, account: Account, needs: Needs, code: int, ip: str) -> str | None:
        if needs.admin:
            return self._deny("admin", f"User:{account.access_key} has no permission to make request code {code} "
                                       f"from {ip}: it needs an admin account.")
        wanted = list(needs.resources)
        if needs.stored is not None:
            found = await self.stored(needs.stored.phys_offset)
            if found is not None:  # none there: the request finds nothing to serve either
                topic, properties = found
                if needs.stored.real_topic:
                    topic = properties.get(REAL_TOPIC) or topic
                wanted.append(topic_need(topic, needs.stored.perm))
        for need in wanted:
            refusal = _refusal(account, need, ip)
            if refusal is not None:
                return self._deny("permission", refusal)
        return None

    def _deny(self, reason: str, remark: str) -> str:
        self.denied[reason] += 1
        return remark


def _refusal(account: Account, need: Need, ip: str) -> str | None:
    """Why ``account`` may not have ``need`` (ACL 1.0's ``checkPermission``), or None when it may."""
    if need.kind == TOPIC and need.name == TRACE_TOPIC:
        return None
    if need.kind == GROUP:
        own, default = account.group_perms.get(need.name), account.default_group_perm
    else:
        own, default = account.topic_perms.get(need.name), account.default_topic_perm
    perm = own if own is not None else default
    head = f"User:{account.access_key} has no permission to access {need.kind}:{need.name} from {ip}"
    if perm is None:
        return f"{head}, no matched policies."
    if perm & DENY or not perm & need.perm:  # PUB does not imply SUB, nor SUB PUB
        return f"{head}, the decision is deny."
    return None
