"""The store's small metadata files: checkpoint, consumer offsets, topics, the lock, written atomically."""
