"""``docs/reference/protocols.md``, written from the code that serves each wire: the remoting front's
handler table (``BrokerFront.request_codes``), the ``Op`` enum with the actors that serve each op and
the role each needs, the replication wire's byte tables (``mqstore.ipc.wire.ha`` and ``ha_hello``) and
the metrics listener's pages.

The remoting codes' names and descriptions are written here (``REMOTING_CODES``); rendering fails
when the front answers a code this table does not describe, so a new handler cannot go unlisted.
"""

from __future__ import annotations

import inspect

import mqstore.actors.metrics.listener as listener
import mqstore.ipc.transport.endpoints as endpoints
import mqstore.ipc.wire.ha as ha_wire
import mqstore.ipc.wire.ha_hello as ha_hello
import mqstore.ipc.wire.schema as schema
from mqstore.actors.config import load_config
from mqstore.actors.remoting.front import BrokerFront
from mqstore.actors.remoting.roles import slave_refusals
from mqstore.ipc.wire import requests
from mqstore.ipc.wire.requests import OP_ROLES, Op
from mqstore.scripts.docs.markdown import GENERATED_NOTE, cell, table

PAGE = "reference/protocols.md"
COMMAND = "python -m mqstore.scripts.docs"

# code -> (RocketMQ's RequestCode name, what the front does with it)
REMOTING_CODES: dict[int, tuple[str, str]] = {
    10: ("SEND_MESSAGE", "store a message (header fields by name)"),
    11: ("PULL_MESSAGE", "pull from a queue; long-polls when asked to suspend"),
    12: ("QUERY_MESSAGE", "find messages by key within a time range (the index)"),
    14: ("QUERY_CONSUMER_OFFSET", "a group's committed offset of a queue"),
    15: ("UPDATE_CONSUMER_OFFSET", "commit a group's offset of a queue"),
    21: ("GET_ALL_TOPIC_CONFIG", "the topic table (a slave's metadata sync; paged as RocketMQ 5 pages it)"),
    29: ("SEARCH_OFFSET_BY_TIMESTAMP", "the queue offset of the first message stored at or after a time"),
    30: ("GET_MAX_OFFSET", "one past a queue's last offset"),
    31: ("GET_MIN_OFFSET", "a queue's first offset"),
    33: ("VIEW_MESSAGE_BY_ID", "one message by its offset message id"),
    34: ("HEART_BEAT", "a client's producer and consumer groups and subscriptions"),
    35: ("UNREGISTER_CLIENT", "a client leaves its groups"),
    36: ("CONSUMER_SEND_MSG_BACK", "a failed message back for a retry (or %DLQ% past max_reconsume_times)"),
    37: ("END_TRANSACTION", "commit or roll back a half message"),
    38: ("GET_CONSUMER_LIST_BY_GROUP", "the client ids in a consumer group (rebalancing)"),
    41: ("LOCK_BATCH_MQ", "lock queues for an orderly consumer"),
    42: ("UNLOCK_BATCH_MQ", "unlock them"),
    43: ("GET_ALL_CONSUMER_OFFSET", "every group's offsets (a slave's metadata sync)"),
    45: ("GET_ALL_DELAY_OFFSET", "the scheduled-message progress (a slave's metadata sync)"),
    60: ("GET_TIMER_CHECK_POINT", "the timer's checkpoint (a slave's metadata sync)"),
    103: ("REGISTER_BROKER", "a broker registers its topics with this front as a NameServer"),
    104: ("UNREGISTER_BROKER", "a broker leaves"),
    105: ("GET_ROUTEINFO_BY_TOPIC", "a topic's route: its brokers and queues (the NameServer's answer)"),
    106: ("GET_BROKER_CLUSTER_INFO", "the cluster's brokers and their addresses"),
    310: ("SEND_MESSAGE_V2", "store a message (header fields by one-letter names)"),
    320: ("SEND_BATCH_MESSAGE", "store a batch of messages"),
    323: ("RESUME_CHECK_HALF_MESSAGE", "check a half message's state again now"),
    9001: ("GET_ALL_ACK_MARK", "ack mode's marks (mqstore's own code: a slave's metadata sync)"),
}
SERVED_BY = {served.actor: served for served in (requests.WRITER, requests.READER, requests.TRANSACTIONS,
                                                 requests.SUPERVISOR)}


def served_codes() -> frozenset[int]:
    """What a broker's front answers (a master's and a slave's answer the same codes)."""
    config = load_config("/nonexistent/mqstore-docs", remoting={"enabled": True})
    return BrokerFront(config, None).request_codes()  # type: ignore[arg-type]  # no call made: no channel needed


def _remoting() -> list[str]:
    codes = served_codes()
    missing = sorted(codes - set(REMOTING_CODES))
    if missing:
        raise KeyError(f"the remoting front answers codes {missing} that REMOTING_CODES does not describe")
    refused = set(slave_refusals())
    rows = [[str(code), f"`{REMOTING_CODES[code][0]}`", cell(REMOTING_CODES[code][1]),
             "refused" if code in refused else "served"] for code in sorted(codes)]
    return ["## RocketMQ remoting", "",
            "One TCP port (`[remoting] port`, 10911) answers both the NameServer's and the broker's requests, so a "
            "stock client's `namesrv_addr` is the broker itself. Frames are RocketMQ's: `int32 total | int32 "
            "(serializeType << 24 | headerLen) | header | body`, the header JSON or RocketMQ's binary layout, "
            "the reply in the request's type. Any other code is answered `REQUEST_CODE_NOT_SUPPORTED` (3). "
            "With `[remoting] acl_file` every request is signed and checked first (`NO_PERMISSION`, 16). "
            "A slave refuses sends (`SYSTEM_BUSY`, as RocketMQ's slave does) and transactions' ends "
            "(`SLAVE_NOT_AVAILABLE`).", "",
            *table(["Code", "Request", "What the front does", "On a slave"], rows), ""]


def _fields(cls: type) -> str:
    names: tuple[str, ...] = getattr(cls, "WIRE", ()) or getattr(cls, "__slots__", ())
    return ", ".join(f"`{name}`" for name in names) or "—"


def _ipc() -> list[str]:
    classes = {cls.OP: cls for served in SERVED_BY.values() for cls in served.ops.values()}
    rows = []
    for op in Op:
        actors = [name for name, served in SERVED_BY.items() if op.value in served.ops]
        role = OP_ROLES[op]
        doc = inspect.getdoc(classes[op]) if op in classes else ""
        if doc and doc.startswith(f"{classes[op].__name__}("):  # the dataclass's own signature: nothing said
            doc = ""
        rows.append([f"`{op.value}`", ", ".join(actors), role.value if role is not None else "any",
                     _fields(classes[op]) if op in classes else "—", cell((doc or "").split("\n\n")[0])])
    return ["## ipc: mqstore's ZeroMQ requests", "", _docstring(schema), "",
            _docstring(endpoints), "",
            "Each op, the actors that serve it, the role a CURVE client key with roles needs "
            "(`roles.toml`), and the fields of its map after `v`, `op` and `id`:", "",
            *table(["Op", "Served by", "Role", "Fields", "What it asks"], rows), ""]


def _docstring(module: object) -> str:
    return inspect.getdoc(module) or ""


def _ha() -> list[str]:
    return ["## HA: replication between a master and its slaves", "",
            "A master's HA port (`[ha] listen_port`, the remoting port + 1 by default) serves its commitlog to "
            "slaves; see [Replication](../operations/replication.md).", "",
            "### Frames", "", _body(ha_wire), "", "### The authenticated hello", "", _body(ha_hello), ""]


def _body(module: object) -> str:
    """A wire module's docstring past its first line, its byte tables kept as blocks."""
    text = _docstring(module)
    first, _, rest = text.partition("\n\n")
    return f"{first}\n\n{rest}".replace("::\n\n", ":\n\n")


def _http() -> list[str]:
    pages = [["`/metrics`", "Prometheus text exposition (the [metrics](metrics.md))"],
             ["`/api/status`", "the last collection as JSON (what the dashboard draws)"]]
    pages += [[f"`{path}`", f"the dashboard: `{name}`"] for path, (name, _) in listener.STATIC_FILES.items()]
    return ["## HTTP", "", "The metrics actor's listener (`[metrics] host:port`, 127.0.0.1:9469), GET and HEAD "
            "only:", "", *table(["Path", "What"], pages), "",
            *(part for part in _docstring(listener).split("\n\n")[1:] if not part.startswith(" ")), ""]


def render() -> str:
    out = ["# Protocols reference", "", GENERATED_NOTE.format(command=COMMAND), "",
           "What a broker serves, and on which wire: [RocketMQ remoting](#rocketmq-remoting) for stock clients, "
           "[ipc](#ipc-mqstores-zeromq-requests) for mqstore's own clients and the `mqstore` command, "
           "[HA](#ha-replication-between-a-master-and-its-slaves) between a master and its slaves, and "
           "[HTTP](#http) for metrics and the dashboard.", ""]
    return "\n".join([*out, *_remoting(), *_ipc(), *_ha(), *_http()])
