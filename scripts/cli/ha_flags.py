"""``mqstore start``'s replication flags, over the config file's ``[broker]`` and ``[ha]`` values:

    --role ROLE          [broker] role (ASYNC_MASTER, SYNC_MASTER, SLAVE)
    --broker-id N        [broker] broker_id (0 a master, 1.. its slaves)
    --ha-port PORT       [ha] listen_port; on a master it also sets [ha] serve (the port is opened)
    --master HOST:PORT   [ha] master_address, a slave's master's HA port

What they make is checked with the rest of the configuration (``mqstore.actors.config_ha.validate_ha``),
so a slave without a master, or a master with a slave's id, stops the start with the config's error.
"""

from __future__ import annotations

import argparse
from typing import Any

from mqstore.actors.config_ha import ROLES, SLAVE
from mqstore.scripts.cli.arguments import host_port, non_negative, port


def add_ha_flags(start: Any) -> None:
    start.add_argument("--role", choices=ROLES, help="the broker's role (overrides [broker] role; ASYNC_MASTER)")
    start.add_argument("--broker-id", type=non_negative,
                       help="0 for a master, 1.. for its slaves (overrides [broker] broker_id)")
    start.add_argument("--ha-port", type=port, help="the HA port a master serves its slaves on (overrides "
                       "[ha] listen_port, the remoting port + 1; on a master it opens the port)")
    start.add_argument("--master", type=host_port, metavar="HOST:PORT",
                       help="a slave's master: the HA port to follow (overrides [ha] master_address)")


def ha_overrides(args: argparse.Namespace, overrides: dict[str, dict[str, Any]]) -> None:
    """Put the flags given into ``overrides`` (``load_config``'s ``section={key: value}`` maps)."""
    broker = overrides.setdefault("broker", {})
    ha: dict[str, Any] = {}
    if args.role is not None:
        broker["role"] = args.role
    if args.broker_id is not None:
        broker["broker_id"] = args.broker_id
    if args.ha_port is not None:
        ha["listen_port"] = args.ha_port
        if args.role != SLAVE:  # a slave listens on no HA port: the flag names where it would as a master
            ha["serve"] = True
    if args.master is not None:
        host, number = args.master
        ha["master_address"] = f"{host}:{number}"
    if ha:
        overrides["ha"] = ha
    if not broker:
        del overrides["broker"]
