"""The ``timer`` actor: RocketMQ 5's timer messages (``mqstore.actors.timer.actor``)."""
