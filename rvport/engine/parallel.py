"""Work side by side on threads, stopped together: how the images a plan needs are made
(rvport/engine/prepare.py).

Each task runs on a worker thread, in the order given, `workers` at a time; what it returns, or the
RvportError it raised, is its result. A task that raises anything else is a bug: it is raised again where its
result is asked for. The caller may go on with its own work meanwhile and ask for one task's result when it
needs it, or whether it has ended (`rvport build` builds a stage as soon as that stage's build images are
made, and runs its smoke test once its smoke image is).

Only the main thread receives Ctrl-C and SIGTERM, and the programs the workers run are in sessions of their
own (proc.stream). When an interrupt (or any error) leaves the `with` block, every streamed program is stopped
(proc.stop_streams), no task that has not started starts, and the main thread waits, deferring a second
interrupt, until every started task has ended: each cleans up as after any failed program (a temporary rootfs,
a build context), so nothing is left half-made. Then the interrupt goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

from rvport import proc
from rvport.errors import RvportError

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

# Two at a time: a 2-core host's cores (an emulated chain such as apt in a toolchain image holds one; the
# split bootstrap uses the second one too while it configures), and what keeps memory and disk writes in
# bounds.
WORKERS = 2


class SideBySide(Generic[K, T]):
    """A pool of workers for one run; use it as a context manager."""

    def __init__(self, workers: int = WORKERS):
        self.workers = max(1, workers)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rvport-side")
        self._futures: dict[K, Future] = {}

    def __enter__(self) -> SideBySide[K, T]:
        return self

    def __exit__(self, exc_type: object, *_rest: object) -> None:
        if exc_type is None:
            self._pool.shutdown(wait=True)
        else:
            self.stop()

    def submit(self, key: K, fn: Callable[[], T]) -> None:
        self._futures[key] = self._pool.submit(fn)

    def has(self, key: K) -> bool:
        """Whether a task was handed in under `key`."""
        return key in self._futures

    def done(self, key: K) -> bool:
        """Whether the task has ended (its result is there without waiting)."""
        return self._futures[key].done()

    def result(self, key: K) -> T | RvportError:
        """The task's result, once it has ended (its RvportError, if it raised one)."""
        fut = self._futures[key]
        wait([fut])
        err = fut.exception()
        if err is None:
            return fut.result()
        if isinstance(err, RvportError):
            return err
        raise err

    def results(self) -> dict[K, T | RvportError]:
        """Every task's result, once all have ended."""
        wait(list(self._futures.values()))
        return {key: self.result(key) for key in self._futures}

    def stop(self) -> None:
        """Stop the running tasks' programs, drop the tasks not started, and wait for the running ones to
        end."""
        proc.stop_streams()
        try:
            with proc.uninterruptible():
                self._pool.shutdown(wait=True, cancel_futures=True)
        finally:
            proc.resume_streams()


def run(tasks: Sequence[tuple[K, Callable[[], T]]], workers: int = WORKERS) -> dict[K, T | RvportError]:
    """Run the tasks side by side; {key: result or RvportError} once all ended."""
    with SideBySide[K, T](workers) as pool:
        for key, fn in tasks:
            pool.submit(key, fn)
        return pool.results()
