"""The batch room: many records at a time, as columns instead of objects.

On the way in, ``record_batch`` is the producer-encoded batch (records, their ``COLUMNS``, the
writer's ``REPLY_ROW``s and ``BatchOutcome``, what it appended), ``key_text`` its records' UNIQ_KEYs
and KEYS as one text (carried on to the index builder), and ``plan`` the writer's work on it. On the
way out, ``record_columns`` decodes many records of a mapped file at once and ``column_scan`` walks
the commitlog by the thousand. In between, ``dispatch`` is what a derived file learns of a record (``DispatchRequest``,
and ``DispatchBatch`` as ``DISPATCH_COLUMNS`` rows) and ``dispatch_columns`` the same rows decoded
from the commitlog's bytes for re-dispatch.
"""
