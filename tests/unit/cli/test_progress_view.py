"""Progress that proves a build is alive: phases read from log lines, heartbeats in plain and CI output (a
fake
clock, and once a real timer thread with a short interval), and the live view's step column."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from rvport.cli.progress_view import Activity, LiveReporter, Reporter, duration


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reporter(ci: str | None = None, **kw) -> tuple[Reporter, io.StringIO]:
    buf = io.StringIO()
    return Reporter(Console(file=buf, width=60, no_color=True), ci, **kw), buf


def _feed(lines: list[str]) -> Activity:
    a = Activity()
    for line in lines:
        a.feed(line)
    return a


@pytest.mark.parametrize(
    "lines,expected",
    [
        (["I: Retrieving libc6 2.41-12", "I: Retrieving zlib1g 1:1.3"], "retrieving 2 (zlib1g)"),
        (
            [
                "I: Unpacking required packages...",
                "I: Unpacking apt...",
                "I: Unpacking python3.13-minimal...",
            ],
            "unpacking 2 (python3.13-minimal)",
        ),
        (["I: Configuring the base system..."], "configuring the base system"),
        (
            ["I: Unpacking libc6:riscv64...", "I: Configuring libc6:riscv64..."],
            "configuring 1 (libc6:riscv64)",
        ),
        (
            ["Setting up libc6:riscv64 (2.41-12) ...", "Setting up zlib1g:riscv64 (1:1.3) ..."],
            "configuring 2 (zlib1g:riscv64)",
        ),
        (
            ["bootstrap: unpacking 12/213 libc6", "bootstrap: configuring 45/213 zlib1g"],
            "configuring 45/213 (zlib1g)",
        ),
        (["bootstrap: compiling Python bytecode..."], "compiling python bytecode"),
        (["bootstrap: first stage: resolving, retrieving and extracting natively"], "first stage"),
        (["bootstrap: unpacking 0/212 (natively)"], "unpacking 0/212"),
        (["I: extracting archives..."], "extracting archives"),
        (["bootstrap: fetching 214 packages, 8 at a time, for debootstrap"], "fetching packages ahead"),
        (
            [
                "image: writing the layer (linux/riscv64)...",
                "image: loading rvport/base:x into the engine...",
            ],
            "loading the image",
        ),
        (["#7 [build 3/5] RUN sh -eux /rvport/build.sh"], "build 3/5] RUN sh -eux /rvport/build.sh"),
        (["#9 12.3 Setting up cmake (3.31.6-2) ..."], "configuring 1 (cmake)"),
        (["gcc -O2 -c foo.c"], ""),
    ],
)
def test_activity_reads_the_phase_from_bootstrap_dpkg_and_buildx_lines(lines, expected):
    assert _feed(lines).describe() == expected


def test_a_line_that_names_no_phase_keeps_the_last_one():
    a = _feed(["I: Configuring libc6:riscv64...", "dpkg: warning: something"])
    assert a.describe() == "configuring 1 (libc6:riscv64)"


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
        clock.now += 7
        rep.end("msgspec", "ok")
        v = rep.stages["msgspec"]
        views.append((v.status, v.step, v.elapsed, list(v.tail), v.activity.describe()))
        if cls is LiveReporter:
            assert buf.getvalue() == ""  # the live view (not entered here) shows it all
        else:
            assert "msgspec: ok (7.0s)" in buf.getvalue()
    assert (
        views[0]
        == views[1]
        == ("ok", "building (no network)", 7, ["#7 [build 3/5] RUN make"], "build 3/5] RUN make")
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
