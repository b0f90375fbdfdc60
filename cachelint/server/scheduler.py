"""When to analyse: debounced per scope, one analysis at a time, results of a stale state dropped.

The debounce is leading and trailing: a request after a quiet spell (nothing requested for `delay`)
starts at once, so a single edit, an applied fix or an undo is checked without waiting; a request
soon after another waits until `delay` passes without one, so a burst of keystrokes is checked once,
after its last key (and the check its first key started is dropped as stale)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Result = TypeVar("Result")


@dataclass
class _State:
    generation: int = 0  # bumped by every request: a result of an older generation is stale
    requested_at: float = float("-inf")  # the event loop's time of the last request
    settled_generation: int = -1  # the generation whose result was delivered last
    timer: asyncio.TimerHandle | None = None
    running: bool = False
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


class Scheduler(Generic[Key, Result]):
    """Runs jobs per key on `executor` (a single thread: jobs never overlap).

    `prepare(key)` is called on the event loop when a job starts and returns the job, built from the
    state at that moment (None: nothing to do); its result goes to `deliver(key, result)` unless a
    request for the key came in meanwhile, in which case it is dropped and the job runs again. A job
    that raises goes to `failed(key, error)`."""

    def __init__(
        self,
        executor: Executor,
        prepare: Callable[[Key], Callable[[], Result] | None],
        deliver: Callable[[Key, Result], None],
        failed: Callable[[Key, BaseException], None],
    ) -> None:
        self._executor = executor
        self._prepare = prepare
        self._deliver = deliver
        self._failed = failed
        self._states: dict[Key, _State] = {}

    def request(self, key: Key, delay: float) -> None:
        """Something `key`'s job depends on changed: run it now if nothing was requested in the last
        `delay` seconds and no job of it runs, else once `delay` seconds pass without another request."""
        state = self._states.setdefault(key, _State())
        state.generation += 1
        loop = asyncio.get_running_loop()
        now = loop.time()
        quiet = now - state.requested_at >= delay and not state.running
        state.requested_at = now
        if state.timer is not None:
            state.timer.cancel()
        state.timer = loop.call_later(0 if quiet else delay, self._start, key)

    async def settled(self, key: Key, timeout: float) -> None:
        """Return once the result for the latest request of `key` was delivered (or dropped for
        failing), starting a waiting job at once; or after `timeout` seconds."""
        state = self._states.get(key)
        if state is None or state.settled_generation == state.generation:
            return
        if state.timer is not None:
            state.timer.cancel()
            self._start(key)
        waiter = asyncio.get_running_loop().create_future()
        state.waiters.append(waiter)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(waiter, timeout)

    def forget(self, key: Key) -> None:
        """Drop `key`: no job of it will start, a running one's result is dropped."""
        state = self._states.pop(key, None)
        if state is not None:
            if state.timer is not None:
                state.timer.cancel()
            self._wake(state)

    def _start(self, key: Key) -> None:
        state = self._states.get(key)
        if state is None:
            return
        state.timer = None
        if state.running:  # `_finished` starts it again, the generation having moved on
            return
        generation = state.generation
        job = self._prepare(key)
        if job is None:
            state.settled_generation = generation
            self._wake(state)
            return
        state.running = True
        future = asyncio.get_running_loop().run_in_executor(self._executor, job)
        future.add_done_callback(lambda done: self._finished(key, state, generation, done))

    def _finished(self, key: Key, state: _State, generation: int, done: asyncio.Future[Result]) -> None:
        state.running = False
        if done.cancelled() or self._states.get(key) is not state:  # shutting down, or forgotten meanwhile
            return
        if generation == state.generation:
            try:
                error = done.exception()
                if error is None:
                    self._deliver(key, done.result())
                else:
                    self._failed(key, error)
            finally:  # whatever happened, nobody waits for this generation any longer
                state.settled_generation = generation
                self._wake(state)
        elif state.timer is None:
            self._start(key)

    @staticmethod
    def _wake(state: _State) -> None:
        for waiter in state.waiters:
            if not waiter.done():
                waiter.set_result(None)
        state.waiters.clear()
