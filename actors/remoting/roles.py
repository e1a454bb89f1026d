"""What a broker's role changes in the front's answers (RocketMQ's processors on a master and a slave).

On a SLAVE sends are refused as a RocketMQ slave's remoting layer refuses them (SYSTEM_BUSY,
"[REJECTREQUEST]system busy, start flow control for a while", so a stock producer moves on to
another broker) and END_TRANSACTION is SLAVE_NOT_AVAILABLE; pulls, queries and offset updates are
served as on a master (mqstore's slaves always serve reads: RocketMQ's slaveReadEnable on).

Every pull's answer says where to pull next (``suggestWhichBrokerId``, PullMessageProcessor's rule):
a master suggests its slave (1) when the pull was far behind the commitlog's end (more than a share
of the machine's memory, suggestPullingFromSlave: those pages are likely not cached) and a slave is
registered, else itself (0); a slave suggests the master (0) while one is live and the pull was not
far behind, turning an answer without messages into PULL_RETRY_IMMEDIATELY so the consumer asks the
master at once, and otherwise itself.

How far behind a pull was is measured from the commitlog's last file: its first offset, less the
physical offset of the last record the pull returned. That is a lower bound (the log's end is at
most one file further), so the slave is suggested only when the gap is certainly that large.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.remoting.headers import Peer
from mqstore.engine.log.record import PHYS_OFFSET_POS
from mqstore.ipc.remoting import codec as rm

Handler = Callable[[rm.RemotingCommand, Peer], Awaitable[rm.RemotingCommand]]

REJECT_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"
MEMORY_RATIO_PERCENT = 40  # accessMessageInMemoryMaxRatio
FALLBACK_MEMORY_BYTES = 24 * 1024 ** 3  # StoreUtil's when the machine's memory cannot be read
SLOW_CONSUMER_BROKER_ID = 1  # SubscriptionGroupConfig.whichBrokerWhenConsumeSlowly
LAST_FILE_CACHE_MS = 1_000
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


def far_behind_bytes() -> int:
    """The gap past which a pull reads what memory likely no longer caches."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = FALLBACK_MEMORY_BYTES
    return memory * MEMORY_RATIO_PERCENT // 100


def last_phys_offset(records: bytes) -> int | None:
    """The physical offset of the last of stored records back to back (None: no whole record)."""
    pos, last = 0, None
    while pos + PHYS_OFFSET_POS + 8 <= len(records):
        (size,) = _INT.unpack_from(records, pos)
        if size <= PHYS_OFFSET_POS + 8 or pos + size > len(records):
            break
        (last,) = _LONG.unpack_from(records, pos + PHYS_OFFSET_POS)
        pos += size
    return None if last is None else int(last)


class LastFileBase:
    """The first offset of the commitlog's last file, from its name (read at most once a second)."""

    def __init__(self, store_dir: str | Path) -> None:
        self.commitlog = Path(store_dir) / "commitlog"
        self._at_ms = -LAST_FILE_CACHE_MS
        self._base = 0

    def __call__(self) -> int:
        now = monotonic_ms()
        if now - self._at_ms >= LAST_FILE_CACHE_MS:
            self._at_ms = now
            with contextlib.suppress(OSError):  # keep the last one seen
                self._base = max((int(n) for n in os.listdir(self.commitlog) if n.isdigit()), default=0)
        return self._base


def slave_refusals() -> dict[int, Handler]:
    """The handlers that replace a master's on a slave."""
    return {code: refuse_on_slave(code)
            for code in (rm.SEND_MESSAGE, rm.SEND_MESSAGE_V2, rm.SEND_BATCH_MESSAGE, rm.END_TRANSACTION)}


def refuse_on_slave(code: int) -> Handler:
    """A slave's answer to a request it does not serve (a send, a transaction's end)."""
    answer = ((rm.SLAVE_NOT_AVAILABLE, "this broker is a slave: end the transaction on its master")
              if code == rm.END_TRANSACTION else (rm.SYSTEM_BUSY, REJECT_REMARK))

    async def refuse(request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        return request.reply(*answer)
    return refuse


class PullAdvice:
    """Sets a pull answer's ``suggestWhichBrokerId`` by the broker's role (see the module's page)."""

    def __init__(self, broker_id: int, *, is_slave: bool, master_live: Callable[[], bool],
                 slave_live: Callable[[], bool], log_end: Callable[[], int], far_behind: int) -> None:
        self.broker_id = broker_id
        self.is_slave = is_slave
        self.master_live = master_live
        self.slave_live = slave_live
        self.log_end = log_end
        self.far_behind = far_behind

    @classmethod
    def for_broker(cls, config: BrokerConfig, *, master_live: Callable[[], bool],
                   slave_live: Callable[[], bool]) -> PullAdvice:
        return cls(config.broker.broker_id, is_slave=config.is_slave, master_live=master_live, slave_live=slave_live,
                   log_end=LastFileBase(config.store_dir), far_behind=far_behind_bytes())

    def wrap(self, pull: Handler) -> Handler:
        async def advised(request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
            return self.advise(await pull(request, peer))
        return advised

    def advise(self, reply: rm.RemotingCommand) -> rm.RemotingCommand:
        if "suggestWhichBrokerId" not in reply.ext:
            return reply  # not a pull's answer (a refused request)
        last = last_phys_offset(reply.body) if reply.code == rm.SUCCESS else None
        slow = last is not None and self.log_end() - last > self.far_behind
        if self.is_slave:
            if not slow and self.master_live():
                suggest = 0
                if reply.code != rm.SUCCESS:
                    reply.code, reply.remark = rm.PULL_RETRY_IMMEDIATELY, "pull from the master"
            else:
                suggest = self.broker_id
        else:
            suggest = SLOW_CONSUMER_BROKER_ID if slow and self.slave_live() else 0
        reply.ext["suggestWhichBrokerId"] = str(suggest)
        return reply
