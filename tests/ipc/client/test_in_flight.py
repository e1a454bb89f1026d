"""``InFlight`` and ``Flushing``: a flush waits for the sends in flight when it was made, whatever their
outcome, and names how many are still pending when its timeout passes."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from mqstore.ipc.client.in_flight import FlushTimeoutError, InFlight
from mqstore.ipc.transport.channel import BrokerTimeoutError


def running() -> Future[Any]:
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    return future


def test_a_flush_with_nothing_in_flight_is_done_at_once() -> None:
    flushing = InFlight().flushing()
    assert flushing.done()
    flushing.wait(0)


def test_a_flush_waits_for_answers_failed_or_not_and_only_those_made_before_it() -> None:
    in_flight = InFlight()
    first, second = running(), running()
    in_flight.add(first)
    in_flight.add(second)
    flushing = in_flight.flushing()
    later = running()
    in_flight.add(later)
    first.set_result("stored")
    assert not flushing.done() and flushing.pending_count() == 1
    second.set_exception(RuntimeError("refused"))  # a failure answers it too: the future carries it
    assert flushing.done()
    flushing.wait(0)
    assert len(in_flight) == 1  # the later send, still in flight
    later.set_result("stored")
    assert len(in_flight) == 0


def test_a_flush_timed_out_names_the_pending_count() -> None:
    in_flight = InFlight()
    for _ in range(3):
        in_flight.add(running())
    with pytest.raises(FlushTimeoutError, match=r"^3 send\(s\) still pending after the flush's 0.01 s$") as raised:
        in_flight.flushing().wait(0.01)
    assert raised.value.pending_count == 3
    assert isinstance(raised.value, BrokerTimeoutError) and isinstance(raised.value, TimeoutError)


def test_a_send_done_before_it_is_added_is_not_in_flight() -> None:
    in_flight = InFlight()
    done: Future[Any] = Future()
    done.set_result(None)
    in_flight.add(done)
    assert len(in_flight) == 0 and in_flight.flushing().done()
