"""The reader process (``reader-{i}``): pulls by queue offset with long polling, queries, consumer
offsets and the ack-mode groups, over the store mapped read-only.

    actor.py         the loop: sockets, the error boundary, pulls and queries (``ReaderActor``)
    state.py         the published state: the files read only as far as the builders published them
    long_poll.py     long polling: plain and ack-mode pulls parked until their queue grows or time is up
    fields.py        SYSTEM_ERROR, the status of a fault
    offsets.py       consumer offsets, which reader 0 serves
    ack_groups.py    the ack-mode ops: ack_pull, ack, nack, ack_release
    ack_requests.py  ack-mode requests with the reader's defaults and bounds
    ack_queues.py    the ack-mode queues this reader owns, and its low-water mark
    ack_queue.py     one ack-mode queue: fresh, in flight, due again, dead
    dead_letters.py  dead letters on their way to ``%DLQ%{group}`` through the writer

The queue index's formats and files, and the low-water marks retention reads, are ``mqstore.engine.ackindex``.
"""
