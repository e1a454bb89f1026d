"""``python -m mqstore.scripts.survival.hostile``: the command (``mqstore.scripts.survival.hostile.command``)."""

import sys

from mqstore.scripts.survival.hostile.command import main

if __name__ == "__main__":
    sys.exit(main())
