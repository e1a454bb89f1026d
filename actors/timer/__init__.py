"""The ``timer`` actor: RocketMQ 5's timer messages (``actors.timer.actor``)."""
