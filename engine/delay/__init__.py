"""RocketMQ's delay levels, one rule: the level table, where a delayed message waits, and how far each level was
delivered (``config/delayOffset.json``)."""
