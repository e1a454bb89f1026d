"""Hostile clients against a real broker, while a good producer and consumer keep working.

    python -m mqstore.scripts.survival.hostile [--connections 500] [--frames 200] [--seconds 3] [--rss-limit-mb 1024]

- ``requests``: what hostile clients send: a valid request of every op, junk field values, invalid
  frames, producer-encoded sends in every malformed shape (``mqstore.scripts.survival.fuzz`` feeds them too);
- ``attacks``: the attacks, each bounded in count and time, and the replies they got;
- ``observers``: the good client kept working beside them, and the broker's memory;
- ``command``: the broker, the attacks in turn, and the JSON verdict.
"""
