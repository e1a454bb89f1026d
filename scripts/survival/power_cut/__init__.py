"""The power-cut harness: a running broker's processes recorded down to what each sync made
durable, power cut under load, crash images built from the durable bytes plus any subset of the
rest, and each image recovered and checked.

    python -m mqstore.scripts.survival.power_cut [--images 1000] [--flush both] [--seed 7]

- ``shim``: the ``LD_PRELOAD`` recorder (``shim.c``), built on demand, and the environment that loads it;
- ``durable``: what the recorder saw, read back (the durable bytes of each file and the names made durable);
- ``images``: crash images from a durable record and a copy of the live store;
- ``workload``, ``cut``, ``oracle``, ``command``: the broker under load, the cut, the check, the run.
"""
