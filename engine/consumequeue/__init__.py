"""The consume-queue room: per (topic, queue id), one 20-byte entry per message pointing into the
commitlog. ``consume_queue`` is one queue's files and entry codec, ``store`` every queue of a
store under ``{store}/consumequeue/``.
"""
