"""The commitlog room: every record of every topic, in one sequence of mapped files.

``record`` is the byte layout of one record (RocketMQ's, byte for byte) and ``host`` / ``msgid`` the
addresses and message ids it carries; ``message`` is what a producer hands over and how it becomes
a record. ``mapped_file`` and ``mapped_file_queue`` are the files and their run under one offset,
``commitlog`` the log over them. ``prefault`` and ``page_warmer`` fault pages in ahead of the
writer and ready its next file. The lower room: a batch, the put path and the derived files are
built on it, and it imports none of them (``tests/test_layers.py``).
"""
