"""``python -m scripts.survival.crash_cut``: the command (``scripts.survival.crash_cut.command``)."""

import sys

from scripts.survival.crash_cut.command import main

if __name__ == "__main__":
    sys.exit(main())
