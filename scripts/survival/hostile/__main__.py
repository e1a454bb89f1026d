"""``python -m scripts.survival.hostile``: the command (``scripts.survival.hostile.command``)."""

import sys

from scripts.survival.hostile.command import main

if __name__ == "__main__":
    sys.exit(main())
