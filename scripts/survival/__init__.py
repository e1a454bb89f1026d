"""Survival harnesses: each tries to break a broker or a store, checks every promise on the files
afterwards, and prints one JSON verdict with ``ok``.

- ``chaos``: actors and the whole tree killed, frozen and restarted under load;
- ``crash_cut/``: a store's writes replayed cut at every boundary and inside records;
- ``full_disk``: a store on a small tmpfs filled up again and again under load;
- ``hostile/``: hostile clients against a broker while a good one keeps working;
- ``fuzz/``: the decoders that take bytes from outside, fed by hypothesis;
- ``send_log`` (what producers were told and consumers saw) and ``ack_check`` (acknowledged sends
  checked against the stopped store): the records and the check chaos and full_disk share.
"""
