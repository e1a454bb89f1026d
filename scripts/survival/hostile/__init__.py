"""Hostile clients against a real broker, while a good producer and consumer keep working.

    python -m scripts.survival.hostile [--connections 500] [--frames 200] [--seconds 3] [--rss-limit-mb 1024]

See ``command`` for the attacks and the verdict.
"""
