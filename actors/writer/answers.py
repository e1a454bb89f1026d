"""A round's way out, whichever kind of send it served (``mqstore.actors.writer.sends``, ``encoded``):
its answers, its dispatch notice and its ``written`` notice, in the order they go and with what waits.

What the round stored is announced (``written``) under SYNC_FLUSH, for the flush service to fsync at
once, and on a master whose HA actor serves slaves, which pushes the new bytes as soon as it hears
of them. Under SYNC_FLUSH, and on a SYNC_MASTER, the answers wait (``mqstore.actors.writer.sync``), and
so does the batch. Otherwise the batch goes to the builders before the answers, since a consumer
waits on them and a producer only on its answer; but a round of one send of one message is answered
first, as nothing else in the round waits on the notice and that producer's whole round trip waits
on its one reply (the notice follows it by a send, microseconds: its frames are made before the answer goes).
"""

from __future__ import annotations

from typing import Any

from mqstore.actors.writer.outlets import Outlets
from mqstore.actors.writer.state import WriterState
from mqstore.ipc.wire.notices import Dispatch, Written
from mqstore.ipc.wire.replies import SendEncodedReply, SendReply

Answer = tuple[bytes, Any, SendReply | SendEncodedReply]  # a request's sender, its id, and its reply


def answer_round(state: WriterState, outlets: Outlets, answers: list[Answer], notice: Dispatch | None,
                 store_ms: int, *, messages: int) -> None:
    """Send or hold the ``answers`` of a round of ``messages`` messages, and publish or hold its
    ``notice`` (None when it stored nothing); ``store_ms`` is the store time of its records."""
    waiters = state.waiters
    flush = notice is not None and waiters.sync_flush
    hold = flush or (notice is not None and waiters.replicas is not None)  # SYNC_MASTER: for the copies
    answer_first = len(answers) == 1 and messages == 1 and not hold
    # the notice's frames are made before the lone answer goes, so that the two sends go back to back:
    # ZeroMQ's I/O thread, woken by the first, most often finds the second there too (one wake-up, not two)
    frames = notice.frames() if notice is not None and not waiters.holds_dispatch else None
    if answer_first:
        identity, request_id, reply = answers[0]
        outlets.reply(identity, reply.encode(request_id))
    if notice is not None:
        outlets.progress.last_store_ms = store_ms
        if waiters.holds_dispatch:  # for its flush (SYNC_FLUSH), its copies (SYNC_MASTER), or both
            waiters.hold_dispatch(notice)
        else:
            outlets.dispatch(notice, frames)
        if flush or state.tells_slaves:
            outlets.written(Written(notice.to_phys, store_ms, flush))
    if hold:
        assert notice is not None
        for identity, request_id, reply in answers:
            waiters.hold(notice.to_phys, identity, request_id, reply, flush=flush)
    elif not answer_first:
        for identity, request_id, reply in answers:
            outlets.reply(identity, reply.encode(request_id))
