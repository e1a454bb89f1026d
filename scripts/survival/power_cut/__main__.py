"""``python -m mqstore.scripts.survival.power_cut``: the command (``mqstore.scripts.survival.power_cut.command``)."""

import sys

from mqstore.scripts.survival.power_cut.command import main

if __name__ == "__main__":
    sys.exit(main())
