"""Progress as typed events (rvport/engine/events.py): the reader that turns a tool's lines into Phase
events by a table of rules, buildx's table (buildx.py), and buildx.build giving its lines to on_line and its
phases to on_phase."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rvport.engine import buildx
from rvport.engine.events import MAX_COUNT, Phase, PhaseReader, Rule, ignore, reading

RULES = (
    Rule(re.compile(r"^step (?P<n>[0-9]{1,9})/(?P<m>[0-9]{1,9}) (?P<what>\S+)"), "stepping"),
    Rule(re.compile(r"^get (?P<what>\S+)"), "getting"),
    Rule(re.compile(r"^== (?P<phase>[A-Za-z ]+) ==$")),
)


def _read(rules, lines: list[str]) -> list[Phase]:
    seen: list[Phase] = []
    reader = PhaseReader(rules, seen.append)
    for line in lines:
        reader(line)
    return seen


def test_a_count_and_its_total_come_from_the_line_and_lines_of_one_phase_are_counted():
    assert _read(RULES, ["get a", "noise", "get b", "step 3/9 x", "get c", "== Cleaning Up ==", "get d"]) == [
        Phase(phase="getting", done=1, what="a"),
        Phase(phase="getting", done=2, what="b"),
        Phase(phase="stepping", done=3, total=9, what="x"),
        Phase(phase="getting", done=1, what="c"),  # a new phase counts from one again
        Phase(phase="cleaning up"),  # a phase named by the line, lower case, nothing counted
        Phase(phase="getting", done=1, what="d"),
    ]


def test_reading_gives_every_line_on_and_the_phases_beside_them():
    lines: list[str] = []
    phases: list[Phase] = []
    each = reading(RULES, lines.append, phases.append)
    for line in ("get a", "noise"):
        each(line)
    assert lines == ["get a", "noise"] and phases == [Phase(phase="getting", done=1, what="a")]
    quiet = reading(RULES, None, None)  # neither wanted: nothing read, nothing fails
    quiet("get a")
    ignore(Phase(phase="x"))


def test_a_phase_holds_bounded_counts():
    with pytest.raises(ValueError, match="done out of range"):
        Phase(phase="x", done=-1)
    with pytest.raises(ValueError, match="total out of range"):
        Phase(phase="x", total=MAX_COUNT + 1)
    (last,) = _read(RULES, ["get " + "x" * 500])
    assert len(last.what) == 160  # what a line names is kept short


def test_a_phase_is_frozen():
    with pytest.raises(AttributeError):
        Phase(phase="x").done = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "lines,expected",
    [
        (
            ["#7 [build 3/5] RUN sh -eux /rvport/build.sh"],
            Phase(phase="build", done=3, total=5, what="RUN sh -eux /rvport/build.sh"),
        ),
        (
            ["#5 [linux/riscv64 build 1/2] FROM docker.io/x"],
            Phase(phase="linux/riscv64 build", done=1, total=2, what="FROM docker.io/x"),
        ),
        (
            ["#1 [internal] load build definition from Dockerfile"],
            Phase(phase="internal", what="load build definition from Dockerfile"),
        ),
        (["#9 12.3 Setting up cmake (3.31.6-2) ..."], Phase(phase="configuring", done=1, what="cmake")),
        (
            ["#9 1.0 Unpacking gcc-14 (14.2.0-19) ...", "#9 2.0 Unpacking g++-14 (14.2.0-19) ..."],
            Phase(phase="unpacking", done=2, what="g++-14"),
        ),
        (
            ["#9 0.5 Get:12 http://m/debian trixie/main riscv64 cmake riscv64 3.31.6-2 [12.3 MB]"],
            Phase(phase="retrieving", done=1, what="cmake"),
        ),
        (
            ["#9 13.0 Processing triggers for libc-bin (2.41-12) ..."],
            Phase(phase="triggers", done=1, what="libc-bin"),
        ),
        (["#7 12.0 gcc -O2 -c foo.c", "#7 DONE 3.1s", "Setting up cmake (3.31.6-2) ..."], None),
    ],
)
def test_buildx_plain_progress_is_read_into_phases_by_its_own_table(lines, expected):
    seen = _read(buildx.PHASES, lines)
    assert (seen[-1] if seen else None) == expected


def test_buildx_build_gives_each_line_to_on_line_and_what_it_does_to_on_phase(tmp_path, monkeypatch):
    out = ["#7 [build 3/5] RUN make", "#7 1.2 cc -c a.c"]

    def stream(argv, *, on_line, log_path):
        for line in out:
            on_line(line)
        return 0

    monkeypatch.setattr(buildx.proc, "stream", stream)
    lines: list[str] = []
    phases: list[Phase] = []
    spec = buildx.BuildSpec(context=tmp_path, dockerfile=tmp_path / "Dockerfile", platform="linux/riscv64")
    blog = buildx.build(spec, log_path=tmp_path / "log", on_line=lines.append, on_phase=phases.append)
    assert lines == out and blog.tail == out
    assert phases == [Phase(phase="build", done=3, total=5, what="RUN make")]
    assert buildx.build(spec, log_path=Path(tmp_path / "log")).tail == out  # neither callback: fine
