"""Work side by side (rvport/engine/parallel.py): results and errors by key, and an interrupt that stops the
workers' programs and waits for their cleanup before it goes on."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rvport import proc
from rvport.engine import parallel
from rvport.errors import BuildFailed


def test_results_and_errors_come_back_by_key_once_every_task_ended():
    def fail():
        raise BuildFailed("no")

    out = parallel.run([("a", lambda: 1), ("b", fail), ("c", lambda: 3)], workers=2)
    assert out["a"] == 1 and out["c"] == 3 and isinstance(out["b"], BuildFailed)
    assert parallel.run([]) == {}


def test_a_bug_in_a_task_is_raised_after_the_others_ended():
    ended = []

    def slow():
        time.sleep(0.2)
        ended.append("slow")

    with pytest.raises(ZeroDivisionError):
        parallel.run([("slow", slow), ("bug", lambda: 1 / 0)], workers=2)
    assert ended == ["slow"]


def test_an_interrupt_stops_the_workers_programs_and_waits_for_their_cleanup(tmp_path, sigint):
    cleaned = []

    def task(name):
        def run():
            try:
                return proc.stream(["sleep", "30"], on_line=lambda _l: None)
            finally:
                time.sleep(0.2)  # cleanup takes a moment: the interrupt waits for it
                cleaned.append(name)

        return run

    started = []
    not_started = lambda: started.append("late")  # noqa: E731 - queued behind the two: never starts
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        parallel.run([("a", task("a")), ("b", task("b")), ("late", not_started)], workers=2)
    assert time.monotonic() - t0 < 20
    assert sorted(cleaned) == ["a", "b"] and started == []
    # programs start again afterwards
    assert proc.stream(["true"], on_line=lambda _l: None) == 0


def test_a_task_can_be_asked_whether_it_was_handed_in_and_whether_it_ended():
    go = threading.Event()
    with parallel.SideBySide(2) as pool:
        pool.submit("slow", lambda: go.wait(10) and "late")
        pool.submit("quick", lambda: "now")
        assert pool.has("slow") and not pool.has("other")
        assert pool.result("quick") == "now" and pool.done("quick")
        assert not pool.done("slow")
        go.set()
        assert pool.result("slow") == "late" and pool.done("slow")
