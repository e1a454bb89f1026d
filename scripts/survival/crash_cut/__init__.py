"""The crash-consistency harness: a store's writes recorded, replayed cut at every write boundary
and at bytes inside records, and recovery checked to keep exactly the whole records before the cut.

    python -m scripts.survival.crash_cut [--ops 300] [--torn-per-step 2] [--seed 7] [--max-seconds 600]

See ``command`` for the whole story.
"""
