"""Which actors a broker runs, by its role, and in which order they start and stop.

A master (ASYNC_MASTER, SYNC_MASTER) runs the writer and the actors that put through it (scheduler,
timer, transactions), and the ``ha`` actor when it serves slaves (``mqstore.actors.config_ha.serves_slaves``),
started after the writer and stopped after it, so the last sends reach the slaves. A SLAVE runs no writer,
scheduler, timer nor transactions actor: its ``ha`` actor is the only writer of the commitlog (it appends
the master's bytes and publishes what the writer would), the builders derive the rest as on a master, the
readers serve pulls; it stops first, so nothing is appended while the rest stop. The slave's metadata
sync (``SLAVE_ONLY``) is started when the registry knows its kind.
"""

from __future__ import annotations

from mqstore.actors.config import BrokerConfig
from mqstore.actors.config_ha import serves_slaves

START_ORDER = ("flusher", "cqbuilder", "indexbuilder", "writer", "scheduler")
SLAVE_START_ORDER = ("flusher", "cqbuilder", "indexbuilder", "ha")
SLAVE_ONLY = ("metasync",)  # started on a slave once ``mqstore.actors.registry`` builds it


def actor_names(config: BrokerConfig, known_kinds: frozenset[str] | set[str]) -> list[str]:
    """The actors of a broker of this configuration, in start order."""
    readers = [f"reader-{i}" for i in range(config.broker.readers)]
    edge = [*(["remoting"] if config.remoting.enabled else []), *(["metrics"] if config.metrics.enabled else [])]
    if config.is_slave:
        return [*SLAVE_START_ORDER, *readers, *(k for k in SLAVE_ONLY if k in known_kinds), *edge]
    timer = ["timer"] if config.store.timer_wheel_enable else []
    ha = ["ha"] if serves_slaves(config.broker.role, config.ha) else []
    return [*START_ORDER, *timer, *ha, *readers, "transactions", *edge]


def stop_groups(config: BrokerConfig, names: list[str]) -> list[list[str]]:
    """The groups stopped one after the other: the edge and what puts through the writer first
    (no new requests, no new re-puts), the readers (they persist offsets), the writer (it answers
    what waits for a flush), a master's ``ha`` (what the writer appended reaches its slaves), the
    builders, and the flush service last (its final fsync covers everything). A slave's ``ha``
    goes first: no byte is appended while the others stop."""
    readers = [n for n in names if n.startswith("reader")]
    first = ["ha", *SLAVE_ONLY] if config.is_slave else []
    groups = [first, ["remoting", "metrics", "scheduler", "timer"], ["transactions"], readers, ["writer"],
              [] if config.is_slave else ["ha"], ["cqbuilder", "indexbuilder"], ["flusher"]]
    return [group for group in groups if group]
