"""Progress that proves a build is alive: the engine's phase events rendered, heartbeats in plain and CI
output (a fake clock, and once a real timer thread with a short interval), and the live view's step column."""

from __future__ import annotations

import ast
import io
import re
import time
from pathlib import Path

import pytest
from rich.console import Console

from rvport.cli.progress_view import LiveReporter, Reporter, describe, duration
from rvport.engine.events import Phase


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reporter(ci: str | None = None, **kw) -> tuple[Reporter, io.StringIO]:
    buf = io.StringIO()
    return Reporter(Console(file=buf, width=60, no_color=True), ci, **kw), buf


@pytest.mark.parametrize(
    "event,expected",
    [
        (Phase(phase="configuring", done=45, total=213, what="zlib1g"), "configuring 45/213 (zlib1g)"),
        (Phase(phase="unpacking", done=0, total=212), "unpacking 0/212"),
        (Phase(phase="retrieving", done=2, what="zlib1g"), "retrieving 2 (zlib1g)"),
        (Phase(phase="configuring the base system"), "configuring the base system"),
        (Phase(phase="build", done=3, total=5, what="RUN make"), "build 3/5 (RUN make)"),
        (Phase(phase="internal", what="load build definition"), "internal (load build definition)"),
        (Phase(phase="first stage"), "first stage"),
        (Phase(phase=""), ""),
        (None, ""),
    ],
)
def test_a_phase_event_is_rendered_phase_count_and_what(event, expected):
    assert describe(event) == expected


def test_the_view_reads_no_line_of_rvports_own_output():
    """The phase comes as an event: this module imports no regular expressions, and a line that looks like a
    phase is only a line."""
    import rvport.cli.progress_view as view

    tree = ast.parse(Path(view.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "re" not in imported and "regex" not in imported
    rep, _buf = _reporter(None)
    rep.add("a", "qemu")
    rep.begin("a", "a==1 [qemu]")
    rep.line("a", "bootstrap: unpacking 12/213 libc6")
    assert rep.stages["a"].phase is None


def test_duration():
    assert duration(5.9) == "5s"
    assert duration(125) == "2m05s"
    assert duration(3720) == "1h02m"


def test_plain_output_prints_steps_and_a_heartbeat_every_interval_of_silence():
    clock = FakeClock()
    rep, buf = _reporter(None, heartbeat=30, clock=clock)
    rep.add("msgspec", "qemu")
    rep.begin("msgspec", "msgspec==0.23.0 [qemu]")
    rep.step("msgspec", "base image debian-trixie (linux/riscv64)")
    rep.line("msgspec", "bootstrap: unpacking 12/213 libc6")
    rep.phase("msgspec", Phase(phase="unpacking", done=12, total=213, what="libc6"))
    clock.now += 29
    rep.tick()
    assert "so far" not in buf.getvalue()  # not yet 30 s
    clock.now += 1
    rep.tick()
    beats = [ln for ln in buf.getvalue().splitlines() if "so far" in ln]
    assert len(beats) == 1
    assert re.search(
        r"msgspec: base image debian-trixie \(linux/riscv64\) \.\.\. 30s so far; unpacking 12/213 "
        r"\(libc6\); last: bootstrap: unpacking 12/213 libc6$",
        beats[0],
    )
    rep.tick()  # no second beat within the same 30 s
    assert sum("so far" in ln for ln in buf.getvalue().splitlines()) == 1
    clock.now += 95  # silence for longer: one beat per tick that is due
    rep.tick()
    assert (
        buf.getvalue()
        .splitlines()[-1]
        .split("] ", 1)[1]
        .startswith("msgspec: base image debian-trixie (linux/riscv64) ... 2m05s so far")
    )


def test_a_new_step_restarts_the_heartbeat_and_ended_stages_are_quiet():
    clock = FakeClock()
    rep, buf = _reporter("generic", heartbeat=30, clock=clock)
    rep.add("a", "qemu")
    rep.begin("a", "a==1 [qemu]")
    clock.now += 20
    rep.step("a", "building (no network)")
    clock.now += 20
    rep.tick()
    assert "so far" not in buf.getvalue()  # 40 s in the stage, 20 s in the step
    clock.now += 10
    rep.tick()
    assert "a: building (no network) ... 30s so far" in buf.getvalue()
    rep.end("a", "ok")
    clock.now += 300
    before = buf.getvalue()
    rep.tick()
    assert buf.getvalue() == before


def test_ci_output_also_beats_while_lines_stream():
    clock = FakeClock()
    rep, buf = _reporter("github", heartbeat=30, clock=clock)
    rep.add("a", "qemu")
    rep.begin("a", "a==1 [qemu]")
    for i in range(40):
        clock.now += 1
        rep.line("a", f"#7 {i}.0 compiling file{i}.c")
        rep.tick()
    beats = [ln for ln in buf.getvalue().splitlines() if "so far" in ln]
    assert len(beats) == 1 and beats[0].endswith("last: #7 29.0 compiling file29.c")


def test_the_timer_thread_beats_when_no_line_arrives():
    rep, buf = _reporter(None, heartbeat=0.05)
    rep.add("a", "qemu")
    with rep:
        rep.begin("a", "a==1 [qemu]")
        rep.step("a", "base image debian-trixie (linux/riscv64)")
        deadline = time.monotonic() + 5
        while buf.getvalue().count("so far") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        rep.end("a", "ok")
    assert buf.getvalue().count("a: base image debian-trixie (linux/riscv64) ... 0s so far") >= 2
    assert rep._thread is None  # stopped with the context


def test_the_live_step_column_shows_the_step_time_and_phase():
    clock = FakeClock()
    rep = LiveReporter(Console(file=io.StringIO(), width=120), None, clock=clock)
    rep.add("msgspec", "qemu")
    rep.begin("msgspec", "msgspec==0.23.0 [qemu]")
    rep.step("msgspec", "base image debian-trixie (linux/riscv64)")
    rep.line("msgspec", "bootstrap: configuring 45/213 libc6")
    rep.phase("msgspec", Phase(phase="configuring", done=45, total=213, what="libc6"))
    clock.now += 125
    v = rep.stages["msgspec"]
    assert (
        rep.step_text(v, clock())
        == "base image debian-trixie (linux/riscv64) [2m05s] configuring 45/213 (libc6)"
    )
    rep.end("msgspec", "ok")
    assert rep.step_text(v, clock()) == "base image debian-trixie (linux/riscv64)"


def test_the_live_reporter_keeps_the_plain_reporters_state_and_prints_none_of_its_lines():
    views = []
    for cls in (Reporter, LiveReporter):
        clock, buf = FakeClock(), io.StringIO()
        rep = cls(Console(file=buf, width=120), None, clock=clock)
        rep.add("msgspec", "qemu")
        rep.begin("msgspec", "msgspec==0.23.0 [qemu]")
        rep.step("msgspec", "building (no network)")
        rep.line("msgspec", "#7 [build 3/5] RUN make")
        rep.phase("msgspec", Phase(phase="build", done=3, total=5, what="RUN make"))
        clock.now += 7
        rep.end("msgspec", "ok")
        v = rep.stages["msgspec"]
        views.append((v.status, v.step, v.elapsed, list(v.tail), describe(v.phase)))
        if cls is LiveReporter:
            assert buf.getvalue() == ""  # the live view (not entered here) shows it all
        else:
            assert "msgspec: ok (7.0s)" in buf.getvalue()
    assert (
        views[0]
        == views[1]
        == ("ok", "building (no network)", 7, ["#7 [build 3/5] RUN make"], "build 3/5 (RUN make)")
    )


def test_ci_lines_escape_controls_keep_our_own_markers_and_give_github_no_commands():
    from rvport.cli.console import SafeConsole

    for ci in ("github", "gitlab", "generic"):
        buf = io.StringIO()
        rep = Reporter(SafeConsole(file=buf, width=60, no_color=True), ci)
        rep.add("demo\x1b[2J", "qemu")
        rep.begin("demo\x1b[2J", "build")
        rep.line("demo\x1b[2J", "\x1b[1;1HFAKE: all artifacts PASS")
        rep.line("demo\x1b[2J", "  ::endgroup::")
        rep.end("demo\x1b[2J", "ok")
        out = buf.getvalue()
        assert "\x1b[2J" not in out and "\x1b[1;1H" not in out and "\\x1b[1;1HFAKE" in out, (ci, out)
        if ci == "github":
            assert "\u200b  ::endgroup::" in out and out.count("\n::endgroup::") == 1
        if ci == "gitlab":  # GitLab's own section markers still reach the log raw
            assert out.count("\x1b[0Ksection_start:") == 1 and out.count("\x1b[0Ksection_end:") == 1


def test_a_phase_prints_no_line_of_its_own_and_a_new_step_has_none():
    clock = FakeClock()
    rep, buf = _reporter("github", heartbeat=30, clock=clock)
    rep.add("a", "qemu")
    rep.begin("a", "a==1 [qemu]")
    rep.line("a", "bootstrap: configuring 45/213 libc6")
    before = buf.getvalue()
    rep.phase("a", Phase(phase="configuring", done=45, total=213, what="libc6"))
    rep.phase("nobody", Phase(phase="x"))  # a row not shown: ignored
    assert buf.getvalue() == before  # CI logs hold the engine's lines, exactly as written
    assert before.splitlines() == ["::group::a: a==1 [qemu]", "bootstrap: configuring 45/213 libc6"]
    clock.now += 30
    rep.tick()
    beat = buf.getvalue().splitlines()[-1]
    assert beat.endswith(
        "a: a==1 [qemu] ... 30s so far; configuring 45/213 (libc6); last: bootstrap: configuring 45/213 libc6"
    )
    rep.step("a", "building (no network)")
    assert rep.stages["a"].phase is None


@pytest.mark.parametrize("ci", ["github", "gitlab", None])
def test_a_labelled_reporter_labels_every_line_and_opens_no_ci_group(ci):
    """A matrix's profiles built side by side (--matrix-jobs): their lines interleave, so each says its
    profile, and no collapsible group is opened that the other profile's lines would land in."""
    rep, out = _reporter(ci, label="rvv256")
    rep.add("vllm", "accelerated")
    rep.begin("vllm", "building")
    rep.line("vllm", "::endgroup::")
    rep.step("vllm", "smoke test")
    rep.end("vllm", "ok")
    text = out.getvalue()
    lines = [ln for ln in text.splitlines() if ln]
    assert lines and all(ln.startswith("[rvv256] ") for ln in lines)
    assert "::group::" not in text and "section_start" not in text and "section_end" not in text
    assert ("[rvv256] \u200b::endgroup::" in text) == (ci == "github")  # a build's own line, never a command
