"""Per-file work over a process pool, when there is enough of it to repay starting the pool."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

Item = TypeVar("Item")
Result = TypeVar("Result")

# Work is counted in bytes of source to syntax-check (about 5 MB/s per core; to parse and summarize a
# byte costs four times as much). Starting and stopping a pool of two costs 15-50 ms, sending the
# results back a few per cent of the work: below this, one process is done first.
MIN_PARALLEL_WORK = 512 * 1024
# Batches per worker: several, so that a worker given the largest files does not finish last alone.
BATCHES_PER_WORKER = 4

_in_worker = False


def _start_worker() -> None:
    global _in_worker
    _in_worker = True
    import gc

    gc.disable()  # as in the parent during the analysis (see engine.collector_paused)


def available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def can_start_pool() -> bool:
    """Not inside a worker of ours, nor in a daemonic process (which may not have children)."""
    if _in_worker:
        return False
    import multiprocessing

    return not multiprocessing.current_process().daemon


def worker_count(work: int, requested: int | None = None) -> int:
    """How many processes to use for `work` (see MIN_PARALLEL_WORK): `requested` when given, else
    every core once the work is large enough; 1 means do it here."""
    if (requested is None and work < MIN_PARALLEL_WORK) or requested == 1 or not can_start_pool():
        return 1
    return max(1, requested) if requested is not None else available_cores()


class Workers:
    """The process pool of one run, started when a batch of work first deserves it, then reused.

    `requested` fixes the number of processes (1: never start any); by default every core is used
    for a batch of at least MIN_PARALLEL_WORK."""

    def __init__(self, requested: int | None = None) -> None:
        self.requested = requested
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def map(
        self,
        work: Callable[[list[Item]], list[Result]],
        items: Sequence[Item],
        sizes: Sequence[int],
        done: Callable[[list[int]], None] | None = None,
    ) -> list[Result]:
        """`work` (a module-level function) over `items`, in batches of similar total `sizes`; the
        results in the order of `items`. `done` is told the indexes of each batch as it finishes."""
        count = worker_count(sum(sizes), self.requested)
        if count <= 1 or len(items) <= 1:
            return _run_here(work, items, done, range(len(items)))
        from concurrent.futures.process import BrokenProcessPool

        batches = _balanced_batches(sizes, min(len(items), count * BATCHES_PER_WORKER))
        results: dict[int, Result] = {}
        try:
            outcomes = self._start(count).map(work, [[items[index] for index in batch] for batch in batches])
            for batch, outcome in zip(batches, outcomes, strict=True):
                results.update(zip(batch, outcome, strict=True))
                if done is not None:
                    done(batch)
        except (OSError, BrokenProcessPool):  # no processes to be had: do the rest here
            self.close()
            self.requested = 1
            rest = [index for index in range(len(items)) if index not in results]
            results.update(zip(rest, _run_here(work, items, done, rest), strict=True))
        return [results[index] for index in range(len(items))]

    def _start(self, count: int) -> ProcessPoolExecutor:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
            self._pool = ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_start_worker)
        return self._pool


def _run_here(
    work: Callable[[list[Item]], list[Result]],
    items: Sequence[Item],
    done: Callable[[list[int]], None] | None,
    indexes: Iterable[int],
) -> list[Result]:
    results = []
    for index in indexes:
        results.extend(work([items[index]]))
        if done is not None:
            done([index])
    return results


def _balanced_batches(sizes: Sequence[int], count: int) -> list[list[int]]:
    """Indexes of `sizes` dealt into `count` batches, largest first, each to the lightest batch."""
    batches: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lightest = loads.index(min(loads))
        batches[lightest].append(index)
        loads[lightest] += sizes[index]
    return [batch for batch in batches if batch]
