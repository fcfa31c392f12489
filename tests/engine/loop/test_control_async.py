"""RunControl's waits for a loop that serves others too (oakwatch mcp plays and serves on one event
loop), and the tool desk's future hand-off: a pause or a pacing wait must not stop the loop, a
running trial must not pay a thread hop, and a cancelled wait must release what it waited on."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future

from engine.loop.control import HOLD, RunControl
from engine.policies.tools import _awaitable


async def _tick(ticks: list[float]) -> None:
    """Proof the event loop is free: a time stamp every 10 ms for as long as it runs."""
    while True:
        ticks.append(time.monotonic())
        await asyncio.sleep(0.01)


def test_checkpoint_without_wait_reports_a_hold_and_consumes_nothing():
    control = RunControl()
    assert control.checkpoint(wait=False) is None  # running: nothing holds
    control.pause()
    assert control.checkpoint(wait=False) is HOLD
    control.step()
    assert control.checkpoint(wait=False) is None  # the step is consumed by this decision
    assert control.checkpoint(wait=False) is HOLD  # and the next one holds again
    control.end_trial("enough")
    assert control.checkpoint(wait=False).reason == "operator-abort"


def test_a_paused_checkpoint_leaves_the_event_loop_serving_until_a_step():
    control = RunControl()
    control.pause()
    ticks: list[float] = []

    async def main():
        ticker = asyncio.ensure_future(_tick(ticks))
        held = asyncio.ensure_future(control.checkpoint_async())
        await asyncio.sleep(0.3)
        assert not held.done()
        threading.Timer(0.05, control.step).start()
        request = await asyncio.wait_for(held, 5)
        ticker.cancel()
        return request

    started = time.monotonic()
    assert asyncio.run(main()) is None
    during = [t for t in ticks if t - started < 0.3]
    assert len(during) >= 10  # the loop kept running while the checkpoint held
    assert control.held_seconds >= 0.3  # and the hold is counted apart from the agent's time


def test_pace_async_waits_off_the_loop_and_not_at_all_when_unpaced():
    control = RunControl(speed=1.0)
    ticks: list[float] = []

    async def main():
        ticker = asyncio.ensure_future(_tick(ticks))
        started = time.monotonic()
        await control.pace_async(0.25, started)  # 0.25 emulated seconds at 1x
        waited = time.monotonic() - started
        ticker.cancel()
        return waited

    waited = asyncio.run(main())
    assert waited >= 0.24 and len(ticks) >= 10
    unpaced = RunControl(speed=None)
    started = time.monotonic()
    assert asyncio.run(unpaced.pace_async(10.0, started)) is None
    assert time.monotonic() - started < 1.0


def test_awaitable_hands_over_from_this_thread_and_from_another():
    async def main():
        same: Future = Future()
        waiter = _awaitable(same)
        same.set_result("here")  # set on the loop's own thread
        assert await waiter == "here"
        other: Future = Future()
        waiter = _awaitable(other)
        threading.Timer(0.02, lambda: other.set_exception(ValueError("there"))).start()
        try:
            await waiter
        except ValueError as exc:
            return str(exc)

    assert asyncio.run(main()) == "there"


def test_a_cancelled_awaitable_cancels_what_it_waited_on():
    """The desk relies on it: a turn the loop stopped waiting for refuses a late call."""
    async def main():
        source: Future = Future()
        waiter = _awaitable(source)
        try:
            await asyncio.wait_for(waiter, 0.01)
        except TimeoutError:
            pass
        await asyncio.sleep(0)
        return source

    source = asyncio.run(main())
    assert source.cancelled()



def test_a_hold_is_counted_from_when_it_began_not_from_when_a_thread_got_to_it():
    """checkpoint_async and pace_async hand the wait to a worker thread with the time they found it
    (`since`): the thread may start late, the hold is the same."""
    control = RunControl()
    control.pause()
    since = time.monotonic() - 1.0  # taken before the timer starts: its 0.05 s all fall after `since` + 1 s
    threading.Timer(0.05, control.resume).start()
    assert control.checkpoint(since=since) is None
    assert control.held_seconds >= 1.05
    paced = RunControl(speed=1.0)
    started = time.monotonic()
    assert paced.pace(0.05, started, since=started - 1.0) is None
    assert paced.held_seconds >= 1.05
