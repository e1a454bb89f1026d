"""``handed``: a consumer's future awaited by a task that may be cancelled, on every side of the moment
the I/O thread serves it."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

from mqstore.ipc.client.aio.handover import handed


def test_a_future_done_already_is_returned_even_to_a_task_being_cancelled() -> None:
    got: list[int] = []

    async def poll(served: Future[list[int]]) -> None:
        asyncio.current_task().cancel()  # type: ignore[union-attr]  # lands at the next await that suspends
        got.extend(await handed(served, lambda taken: None))  # which this one does not
        await asyncio.sleep(0)

    async def main() -> BaseException:
        served: Future[list[int]] = Future()
        served.set_result([1, 2])
        return (await asyncio.gather(poll(served), return_exceptions=True))[0]

    assert isinstance(asyncio.run(main()), asyncio.CancelledError)
    assert got == [1, 2]


def test_cancelled_before_it_is_served_the_future_is_cancelled_and_nothing_is_given_back() -> None:
    given_back: list[list[int]] = []

    async def main() -> Future[list[int]]:
        waiting: Future[list[int]] = Future()
        task = asyncio.create_task(handed(waiting, given_back.append))
        await asyncio.sleep(0)  # the task awaits
        task.cancel()
        assert (await asyncio.gather(task, return_exceptions=True))[0].__class__ is asyncio.CancelledError
        return waiting

    waiting = asyncio.run(main())
    assert waiting.cancelled()
    assert not waiting.set_running_or_notify_cancel()  # so a consumer serving it takes nothing
    assert given_back == []


def test_served_and_then_cancelled_before_the_task_ran_gives_back_what_it_took() -> None:
    given_back: list[list[int]] = []

    async def main() -> None:
        waiting: Future[list[int]] = Future()
        task = asyncio.create_task(handed(waiting, given_back.append))
        await asyncio.sleep(0)
        assert waiting.set_running_or_notify_cancel()  # the I/O thread serves it: the messages are taken
        task.cancel()  # before the loop hands the result to the task
        assert given_back == []
        waiting.set_result([7, 8])
        assert (await asyncio.gather(task, return_exceptions=True))[0].__class__ is asyncio.CancelledError

    asyncio.run(main())
    assert given_back == [[7, 8]]


def test_an_error_is_raised_to_the_task_and_nothing_is_given_back() -> None:
    given_back: list[list[int]] = []

    async def main() -> BaseException:
        waiting: Future[list[int]] = Future()
        task = asyncio.create_task(handed(waiting, given_back.append))
        await asyncio.sleep(0)
        waiting.set_running_or_notify_cancel()
        waiting.set_exception(ValueError("malformed"))
        return (await asyncio.gather(task, return_exceptions=True))[0]

    assert isinstance(asyncio.run(main()), ValueError) and given_back == []
