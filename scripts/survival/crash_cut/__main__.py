"""``python -m mqstore.scripts.survival.crash_cut``: the command (``mqstore.scripts.survival.crash_cut.command``)."""

import sys

from mqstore.scripts.survival.crash_cut.command import main

if __name__ == "__main__":
    sys.exit(main())
