"""The commitlog-writer process (``actor``: its loop), and what the loop hands its work to: parsing
requests (``ingress``), the two kinds of send round (``sends``: maps of messages, ``encoded``:
records the producer encoded), the answers and batches that wait for a flush (``sync``), the state
the rounds share (``state``), the sockets they answer and publish on (``outlets``), and the thread
that prefaults the commitlog ahead of the appends (``prefault``)."""
