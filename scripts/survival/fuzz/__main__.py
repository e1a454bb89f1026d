"""``python -m scripts.survival.fuzz``: the command (``scripts.survival.fuzz.command``)."""

import sys

from scripts.survival.fuzz.command import main

if __name__ == "__main__":
    sys.exit(main())
