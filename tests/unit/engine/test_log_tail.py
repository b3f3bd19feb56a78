"""A failed stage's log tail (result.json's stages[].log_tail): its last lines, read from the log's end only
(runner._tail, LOG_TAIL_BYTES at most), since a big build's log is hundreds of MB; a small log's tail is
what reading it whole as a text file gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvport.engine import runner
from rvport.errors import BuildFailed
from rvport.fileio import read_ends


def _whole(log: Path, n: int = 30) -> list[str]:
    """The tail as rvport took it before: the log read whole as a text file."""
    with open(log, encoding="utf-8", errors="replace") as f:
        return [ln.rstrip("\n") for ln in f.readlines()[-n:]]


@pytest.fixture
def reads(monkeypatch) -> list[tuple[int, int, int]]:
    """Each read_ends call of the runner: (head asked, tail asked, bytes it returned)."""
    seen: list[tuple[int, int, int]] = []

    def spy(path, *, head, tail, **kw):
        got = read_ends(path, head=head, tail=tail, **kw)
        seen.append((head, tail, len(got.head) + len(got.tail)))
        return got

    monkeypatch.setattr(runner, "read_ends", spy)
    return seen


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"one line, no newline",
        b"+ make\nok\n",
        b"a\r\nb\rc\n\n\nd\x0ce  \n",  # universal newlines; a form feed is no line break in a text file
        b"\xff\xfe not UTF-8\n\xe2\x82 cut\n",
        b"".join(b"line %d\n" % i for i in range(100)),
    ],
)
def test_a_small_log_s_tail_is_what_reading_it_whole_gave(tmp_path, reads, data):
    log = tmp_path / "x.log"
    log.write_bytes(data)
    assert runner._tail(str(log)) == _whole(log)
    assert runner._tail(str(log), n=2) == _whole(log, n=2)
    assert [r[2] for r in reads] == [len(data)] * 2


def test_no_log_or_one_that_cannot_be_read_has_no_tail(tmp_path, monkeypatch):
    assert runner._tail(None) == [] and runner._tail(str(tmp_path / "absent.log")) == []
    assert runner._tail(str(tmp_path)) == []  # not a file

    def refuse(path, **kw):
        raise BuildFailed(f"cannot read stage log {path}: Permission denied")

    monkeypatch.setattr(runner, "read_ends", refuse)
    log = tmp_path / "x.log"
    log.write_text("+ make\n")
    assert runner._tail(str(log)) == []  # the stage's own error is what the run reports


def test_a_log_over_the_bound_gives_its_last_lines_from_a_bounded_read(tmp_path, reads):
    log = tmp_path / "big.log"
    line = "%06d " + "x" * 93 + "\n"  # 101 bytes
    with open(log, "w") as f:
        f.writelines(line % i for i in range(3 * runner.LOG_TAIL_BYTES // 101))
    assert log.stat().st_size > 2 * runner.LOG_TAIL_BYTES
    assert runner._tail(str(log)) == _whole(log)
    assert runner._tail(str(log), n=1) == [(line % (3 * runner.LOG_TAIL_BYTES // 101 - 1)).rstrip("\n")]
    assert reads == [(0, runner.LOG_TAIL_BYTES, runner.LOG_TAIL_BYTES)] * 2


def test_the_line_cut_by_the_bound_is_dropped_unless_it_is_all_there_is(tmp_path, monkeypatch, reads):
    monkeypatch.setattr(runner, "LOG_TAIL_BYTES", 64)
    log = tmp_path / "x.log"
    log.write_text("a" * 100 + "\n" + "b" * 80 + "\nlast\n")  # the last 64 bytes begin inside the b line
    assert runner._tail(str(log)) == ["last"]
    log.write_text("start " + "y" * 200 + " the end\n")  # one line longer than the bound: its end
    assert runner._tail(str(log)) == ["y" * 55 + " the end"]
    assert all(r[2] == 64 for r in reads)
