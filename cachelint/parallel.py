"""Per-file work over a process pool, when there is enough of it to repay starting the pool."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from cachelint import interrupts

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

Item = TypeVar("Item")
Result = TypeVar("Result")

# Work is counted in bytes of source to syntax-check (about 5 MB/s per core; to parse and summarize a
# byte costs four times as much). Starting and stopping a pool of two costs 15-50 ms, sending the
# results back a few per cent of the work: below this, one process is done first.
MIN_PARALLEL_WORK = 512 * 1024
# Once the pool runs, it takes less work to repay sending it there: a batch's round trip costs well
# under a millisecond.
MIN_POOLED_WORK = MIN_PARALLEL_WORK // 8
# Batches per worker: several, so that a worker given the largest files does not finish last alone.
BATCHES_PER_WORKER = 4

_in_worker = False
# What this process is to load the first time it waits for the pool (see `load_while_waiting`).
_loads: dict[Callable[[], object], None] = {}


def _start_worker(parent: int) -> None:
    global _in_worker
    _in_worker = True
    interrupts.ignore_in_worker()
    _die_with(parent)
    import gc

    gc.disable()  # as in the parent during the analysis (see engine.collector_paused)


# Linux's prctl option asking for a signal when the parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
# How often a worker that cannot ask for that signal looks whether its parent is still there.
PARENT_CHECK_SECONDS = 0.5


def _die_with(parent: int) -> None:
    """End this worker when the process that started the pool ends, however it ends (a parent killed by
    TERM, HUP or KILL cannot stop its workers, which would live on under init): on Linux the kernel
    kills it (PR_SET_PDEATHSIG); elsewhere a thread watches for the parent to be gone."""
    if sys.platform == "linux" and _ask_for_death_signal():
        if os.getppid() != parent:  # it died before the request was made
            os._exit(1)
        return
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="cachelint-parent-watch", daemon=True).start()


def _ask_for_death_signal() -> bool:
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def load_while_waiting(load: Callable[[], object]) -> None:
    """Have `load` (imports the rest of the run needs) run the first time this process waits for the
    pool's work, when a core may be idle, rather than after, when the run waits for it."""
    _loads[load] = None


def _load_now() -> None:
    """Run what waits to be loaded, whole: Ctrl-C inside an import can end in a traceback that Python
    prints and swallows (from the module lock's callback), so SIGINT is held back until it is done."""
    with interrupts.deferred():
        while _loads:
            load = next(iter(_loads))
            del _loads[load]
            load()


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
        self._count = 0  # the running pool's processes

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.close(abort=kind is not None)

    def close(self, abort: bool = False) -> None:
        """Stop the workers: let them finish, or with `abort` (an error or Ctrl-C in this process) kill
        them at once. Ctrl-C waits until they are gone, so that none is left behind."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        with interrupts.deferred():
            if not abort:
                pool.shutdown(cancel_futures=True)
                return
            _kill_workers(pool)
            pool.shutdown(wait=False)

    def map(
        self,
        work: Callable[[list[Item]], list[Result]],
        items: Sequence[Item],
        sizes: Sequence[int],
        done: Callable[[list[int]], None] | None = None,
        batches_per_worker: int = BATCHES_PER_WORKER,
    ) -> list[Result]:
        """`work` (a module-level function) over `items`, in batches of similar total `sizes`; the
        results in the order of `items`. `done` is told the indexes of each batch as it finishes."""
        work_size = sum(sizes)
        running = self._pool is not None and self.requested is None and work_size >= MIN_POOLED_WORK
        count = self._count if running else worker_count(work_size, self.requested)
        if count <= 1 or len(items) <= 1:
            return _run_here(work, items, done, range(len(items)))
        from concurrent.futures.process import BrokenProcessPool

        batches = _balanced_batches(sizes, min(len(items), count * batches_per_worker))
        results: dict[int, Result] = {}
        try:
            with interrupts.deferred():  # the pool starts whole: processes, then its threads
                pool = self._start(count)
                futures = [pool.submit(work, [items[index] for index in batch]) for batch in batches]
            _load_now()
            for batch, future in zip(batches, futures, strict=True):
                interrupts.check()
                results.update(zip(batch, future.result(), strict=True))
                if done is not None:
                    done(batch)
        except (OSError, BrokenProcessPool):  # no processes to be had: do the rest here
            self.close(abort=True)
            self.requested = 1
            rest = [index for index in range(len(items)) if index not in results]
            results.update(zip(rest, _run_here(work, items, done, rest), strict=True))
        return [results[index] for index in range(len(items))]

    def _start(self, count: int) -> ProcessPoolExecutor:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
            self._pool = ProcessPoolExecutor(
                max_workers=count, mp_context=context, initializer=_start_worker, initargs=(os.getpid(),)
            )
            self._count = count
        return self._pool


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's workers and wait for them. Before Python 3.14 ProcessPoolExecutor can only ask
    them to stop after their work, so this reaches into it as 3.14's `kill_workers` does; the read end
    of its task pipe is closed too (as CPython 3.12 does for a broken pool), or the thread feeding
    the pipe could wait forever for the dead workers to read."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for process in workers:
        process.kill()
    for process in workers:
        process.join(timeout=5)
    reader = getattr(getattr(pool, "_call_queue", None), "_reader", None)
    if reader is not None:
        with contextlib.suppress(OSError):
            reader.close()


def _run_here(
    work: Callable[[list[Item]], list[Result]],
    items: Sequence[Item],
    done: Callable[[list[int]], None] | None,
    indexes: Iterable[int],
) -> list[Result]:
    results = []
    for index in indexes:
        interrupts.check()
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
