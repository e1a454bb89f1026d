"""The ``transactions`` actor: END_TRANSACTION for every front, and RocketMQ's transaction check service."""
