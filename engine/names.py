"""What a topic may be called: RocketMQ's topic rule.

A topic names a directory (``consumequeue/{topic}``, ``queueindex/{group}/{topic}``) and travels in
every request, so every path that takes one from outside (the writer's ingress, the readers, the
remoting front, the notices, the topic table, a batch's plan) asks this one rule. A leaf: it imports
nothing of the engine, so nothing that checks a name depends on the store's configuration.
"""

from __future__ import annotations

import re

MAX_TOPIC_LENGTH = 127
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def check_topic(topic: str) -> str | None:
    """RocketMQ's topic rule; returns the reason a topic is refused, or None."""
    if not topic:
        return "topic is empty"
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"topic is longer than {MAX_TOPIC_LENGTH} characters"
    if not TOPIC_PATTERN.match(topic):
        return f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
    return None
