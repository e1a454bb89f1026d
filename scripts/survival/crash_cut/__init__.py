"""The crash-consistency harness: a store's writes recorded, replayed cut at every write boundary
and at bytes inside records, and recovery checked to keep exactly the whole records before the cut.

    python -m mqstore.scripts.survival.crash_cut [--ops 300] [--torn-per-step 2] [--seed 7] [--max-seconds 600]

- ``recording``: the workload on a tiny store and the recorder of every state its directory passes through;
- ``cuts``: the cut points of a recording (write boundaries, steps torn inside) and the directory each leaves;
- ``oracle``: what recovery must keep at a cut, and the check of a recovered copy against it;
- ``command``: the run over every cut point and its JSON verdict.
"""
