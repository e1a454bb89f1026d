"""Read paths: pull, queries by key and id, consumer lag, and read-only access to a store's files."""
