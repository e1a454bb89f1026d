"""Which class runs each kind of actor: the one module that knows them all.

Only the supervisor's side imports it: ``mqstore.actors.process.run_actor``, the entry point of every actor
process, builds its actor here. The runtime the actors are built on knows none of them, so no actor
module imports its way back into the others.

A kind's module is imported when an actor of that kind is built, so each process loads the code of
its own actor only (a reader does not import the writer, nor the remoting front's asyncio).
"""

from __future__ import annotations

from collections.abc import Callable

from mqstore.actors.runtime import Actor, Runtime


def _writer(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.writer.actor import CommitLogWriterActor
    return CommitLogWriterActor(runtime)


def _flusher(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.flusher import FlushActor
    return FlushActor(runtime)


def _cqbuilder(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.builder import ConsumeQueueBuilderActor
    return ConsumeQueueBuilderActor(runtime)


def _indexbuilder(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.builder import IndexBuilderActor
    return IndexBuilderActor(runtime)


def _reader(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.reader.actor import ReaderActor
    return ReaderActor(runtime, int(index))


def _scheduler(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.scheduler.actor import SchedulerActor
    return SchedulerActor(runtime)


def _remoting(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.remoting.listener import RemotingActor
    return RemotingActor(runtime)


def _metrics(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.metrics.actor import MetricsActor
    return MetricsActor(runtime)


def _transactions(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.transactions.actor import TransactionsActor
    return TransactionsActor(runtime)


def _timer(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.timer.actor import TimerActor
    return TimerActor(runtime)


def _ha(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.ha.actor import HaActor
    return HaActor(runtime)


def _metasync(runtime: Runtime, index: str) -> Actor:
    from mqstore.actors.metasync.actor import MetadataSyncActor
    return MetadataSyncActor(runtime)


# an actor's name is its kind, and for the kinds that run several processes, "-" and its index
ACTOR_KINDS: dict[str, Callable[[Runtime, str], Actor]] = {
    "writer": _writer, "flusher": _flusher, "cqbuilder": _cqbuilder, "indexbuilder": _indexbuilder,
    "reader": _reader, "remoting": _remoting, "metrics": _metrics, "scheduler": _scheduler,
    "transactions": _transactions, "timer": _timer, "ha": _ha, "metasync": _metasync,
}


def build_actor(name: str, runtime: Runtime) -> Actor:
    kind, _, index = name.partition("-")
    build = ACTOR_KINDS.get(kind)
    if build is None:
        raise ValueError(f"unknown actor {name!r}")
    return build(runtime, index)
