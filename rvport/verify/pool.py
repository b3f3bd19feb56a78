"""Map a function over items on worker threads, results in the items' order.

Verifying a wheel is reading, inflating and hashing its members; zlib, hashlib and os.pread release the GIL
while they work, so threads keep every core busy without copying bytes between processes. Small inputs are
mapped in the calling thread."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

THREADS: int | None = None  # set by `configure` (the command line's RVPORT_VERIFY_THREADS); None: the CPUs
PARALLEL_MIN_COST = 16 << 20  # below this much work (bytes), threads cost more than they save
BATCH_COST = 4 << 20  # small items go to a thread in batches of about this much work
BATCH_ITEMS = 256


def configure(threads: int | None) -> None:
    """How many threads verification may use (1: no threads at all; None: the CPUs this process may run on).
    The command line calls it with RVPORT_VERIFY_THREADS."""
    global THREADS
    THREADS = threads if threads is not None and threads > 0 else None


def thread_count() -> int:
    """What `configure` was given, else the CPUs this process may run on."""
    if THREADS:
        return THREADS
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def map_ordered(
    fn: Callable[[T], R], items: Sequence[T], cost: Callable[[T], int], threads: int | None = None
) -> list[R]:
    """[fn(x) for x in items], run on threads when there is enough work. The costliest batches start first, so
    that the longest item (a wheel's biggest library) does not start last and finish alone."""
    n = threads or thread_count()
    costs = [max(cost(x), 0) for x in items]
    if n <= 1 or len(items) < 2 or sum(costs) < PARALLEL_MIN_COST:
        return [fn(x) for x in items]
    batches: list[list[int]] = [[]]
    batch_cost = 0
    for i, c in enumerate(costs):
        if batches[-1] and (batch_cost + c > BATCH_COST or len(batches[-1]) >= BATCH_ITEMS):
            batches.append([])
            batch_cost = 0
        batches[-1].append(i)
        batch_cost += c
    order = sorted(range(len(batches)), key=lambda b: -sum(costs[i] for i in batches[b]))
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="rvport-verify") as ex:
        futures = {b: ex.submit(lambda idx: [fn(items[i]) for i in idx], batches[b]) for b in order}
        return [r for b in range(len(batches)) for r in futures[b].result()]


_END = object()


def read_ahead(items: Iterator[T], depth: int = 4) -> Iterator[T]:
    """Yield what items yields, produced on a helper thread up to depth items ahead: a big member is inflated
    there while the caller hashes what came before. Exceptions reach the caller; stopping early stops it."""
    q: queue.Queue[object] = queue.Queue(depth)
    stop = threading.Event()

    def put(x: object) -> bool:
        while not stop.is_set():
            try:
                q.put(x, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for x in items:
                if not put(x):
                    return
            put(_END)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            put(e)

    t = threading.Thread(target=produce, name="rvport-verify-ahead", daemon=True)
    t.start()
    try:
        while True:
            x = q.get()
            if x is _END:
                return
            if isinstance(x, BaseException):
                raise x
            yield x  # type: ignore[misc]  # only items and the two markers go in the queue
    finally:
        stop.set()
        t.join()
