"""Fuzzing the decoders that take bytes from outside: no crash, no hang, a clear error.

    python -m mqstore.scripts.survival.fuzz [--inputs 1000000] [--seconds 3600] [--targets record wire ...] [--hang-s
    10]

- ``targets``: what a target is (a strategy, a check, its clear errors) and the input strategies they share;
- ``decoders``: the commitlog record decoder and the RocketMQ remoting front's frame decoders;
- ``wire``: ``mqstore.ipc.wire.schema`` and the writer's and a reader's request paths, in process;
- ``files``: the queue index's files, the TOML config, and recovery of a damaged store;
- ``command``: the targets by name, the loop that feeds each one (hangs caught by an alarm), the verdict.
"""
