"""A running slave made a master by command (``mqstore promote``), in place of RocketMQ's controller.

The supervisor stops every actor of the slave in order (its HA actor first: nothing is appended
while the rest stop), promotes the stopped store (``mqstore.engine.ha.promotion.promote_store``: the
torn tail cut, a new epoch, the promotion recorded), and starts again under the master's settings:
the role asked for, broker id 0, and the HA port open (``[ha] serve``) so the old master, or a new
slave, can follow it. Clients reconnect to the same sockets and ports.
"""

from __future__ import annotations

from dataclasses import replace

from mqstore.actors.config import BrokerConfig, ConfigError
from mqstore.actors.config_ha import MASTER_ID


def promoted_config(config: BrokerConfig, role: str) -> BrokerConfig:
    """The settings a promoted slave runs under; ConfigError when they cannot work (checked before
    anything stops)."""
    return replace(config, broker=replace(config.broker, role=role, broker_id=MASTER_ID),
                   ha=replace(config.ha, serve=True)).validate()


def refusal(config: BrokerConfig, role: str) -> str | None:
    """Why this broker cannot be promoted to ``role`` now; None when it can."""
    if not config.is_slave:
        return f"this broker is a {config.broker.role}, not a SLAVE: nothing to promote"
    try:
        promoted_config(config, role)
    except ConfigError as exc:
        return f"as a {role} it could not run: {exc}"
    return None
