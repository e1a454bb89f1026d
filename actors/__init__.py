"""The broker's processes: each actor is one OS process, and actors hold the only loops.

    runtime.py      what an actor is handed: its name and configuration, the process's ZeroMQ
                    context, the stop flag, and reports to the supervisor (``Runtime``)
    clock.py        the clocks actors read (``monotonic_ms``, ``wall_ms``)
    process.py      an actor process from start to exit; ``run_actor`` is the target the fork server runs
    registry.py     which class runs each kind of actor (only the process entry point imports it)
    supervisor.py   recovers the store, starts the actors in order, restarts a dead one, serves
                    the control socket, stops them in order
    config.py       the broker's configuration tree, loaded and validated once
    builder.py      the consumequeue-builder and the index-builder
    flusher.py      the flush/commit service: durability
    writer/         the commitlog writer
    reader/         the readers: pull, long polling, queries, offsets, acks
    remoting/       the RocketMQ remoting front

Actors import the engine and ``ipc``; nothing in ``engine`` or ``ipc`` imports them.
"""
