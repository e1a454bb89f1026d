"""``python -m mqstore.scripts.survival.fuzz``: the command (``mqstore.scripts.survival.fuzz.command``)."""

import sys

from mqstore.scripts.survival.fuzz.command import main

if __name__ == "__main__":
    sys.exit(main())
