"""RabbitMQ's classic queue index, which keeps ack-mode consumer groups: per (group, topic, queue),
at ``{store}/queueindex/{group}/{topic}/{queue}/``, a journal and segment files recording each
message's publish, deliver and ack (the messages themselves stay in the commitlog). Here are the
byte codecs of both files (``codec``), the files and their recovery (``files``), the index over
them (``queue_index.QueueIndex``), and the readers' low-water marks (``low_water``): the oldest
commitlog offset an ack-mode group still needs, which retention's ``keep_unacked`` reads.

Passive like the rest of the engine: whoever owns an index (one reader) drives it.
"""
