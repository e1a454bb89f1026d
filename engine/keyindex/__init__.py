"""The key index room: RocketMQ's IndexFiles under ``{store}/index/``, from ``topic#key`` to offsets.

``keys`` says which keys a record is indexed under and hashes them (one record or many at once);
``index_file`` is one file's byte layout and mapping, ``buckets`` every put into it (one key is a
batch of one) and every walk of its chains, ``file_names`` how the files are named and listed,
``pages`` a query's walk over the files a page at a time, and ``service`` the IndexService over the
directory: build, query, delete, truncate.
"""
