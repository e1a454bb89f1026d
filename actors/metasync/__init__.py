"""The ``metasync`` actor: a slave's metadata kept in step with its master's (``mqstore.actors.metasync.actor``)."""
