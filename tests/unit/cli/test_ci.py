"""CI renderings from result documents (no Docker): the GitHub job summary, JUnit XML, the buildx cache
options and the docker-driver refusal, and the CI progress lines (folded groups)."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

import rvport.engine
from rvport.cli import ci
from rvport.cli.progress_view import Reporter
from rvport.engine.buildx import BuildSpec, check_cache_export
from rvport.errors import UsageError

SHA = "688d089cd175f1fa94d6524ebbfa96d479760fc46c4411983e852779c1d5d244"


def stage(recipe: str, status: str, **kw) -> dict:
    doc = {
        "recipe": recipe,
        "version": "1.0",
        "kind": "python-wheel",
        "mode": "qemu",
        "status": status,
        "timings": {},
        "commands": [],
        "images": {},
        "artifacts": [],
        "verify": None,
        "smoke": None,
        "error": None,
        "log_tail": [],
    }
    doc.update(kw)
    return doc


OK_DOC = {
    "schema": 1,
    "kind": "rvport-result",
    "status": "ok",
    "failing_stage": None,
    "tag": "local",
    "profile": {"name": "rvv256"},
    "started": "2026-01-01T00:00:00Z",
    "duration_s": 75.5,
    "stages": [
        stage(
            "msgspec",
            "cached",
            timings={"fetch": 0.01, "base": 0.1, "toolchain": 1.0},
            artifacts=[
                {
                    "path": "msgspec/msgspec-0.23.0-cp313-cp313-linux_riscv64.whl",
                    "size": 240200,
                    "sha256": SHA,
                }
            ],
            verify={
                "ok": True,
                "reports": [
                    {"artifacts": [{"path": "/tmp/x/msgspec.whl", "verdict": "pass", "reasons": []}]}
                ],
            },
            smoke={"status": "passed", "output": ["msgspec ok 0.23.0"]},
        ),
        stage(
            "tiktoken",
            "ok",
            timings={"fetch": 2.0, "build": 60.25, "verify": 1.5, "smoke": 10.0},
            artifacts=[{"path": "tiktoken/t.whl", "size": 3 * 2**20, "sha256": "ab" * 32}],
            verify={"ok": True, "reports": []},
            smoke={"status": "passed", "output": []},
        ),
    ],
}
OK_DOC["artifacts"] = [dict(a, recipe=s["recipe"]) for s in OK_DOC["stages"] for a in s["artifacts"]]

FAILED_DOC = dict(
    OK_DOC,
    status="failed",
    failing_stage="broken",
    stages=[
        OK_DOC["stages"][0],
        stage(
            "broken",
            "failed",
            timings={"build": 3.0},
            error="broken==1.0: docker buildx build failed (exit status 3) <&>\n    hint: full log: "
            "/o/logs/broken.log",
            log_tail=["+ echo starting the build of broken", "+ exit 3"],
        ),
        stage("after", "not run"),
    ],
)


def test_summary_lists_stages_verdicts_cache_hits_timings_and_artifacts():
    md = ci.summary_markdown(OK_DOC)
    assert md.startswith("## rvport build: ok")
    assert "profile `rvv256`, tag `local`, 2 stage(s)" in md
    assert "Cache hits: 1 of 2 stage(s) reused verified artifacts (msgspec)" in md
    assert "| msgspec | 1.0 | qemu | cached | ok | passed | 1.1 s |" in md
    assert "| tiktoken | 1.0 | qemu | ok | ok | passed | 73.8 s |" in md
    # fetch images base toolchain accelerated build verify smoke_image smoke runtime check
    assert "| tiktoken | 2.0 | - | - | - | - | 60.2 | 1.5 | - | 10.0 | - | - |" in md
    assert f"| `msgspec/msgspec-0.23.0-cp313-cp313-linux_riscv64.whl` | 234.6 KiB | `{SHA}` |" in md
    assert "| `tiktoken/t.whl` | 3.0 MiB |" in md
    assert "<details>" not in md


def _timing_table(md: str) -> list[str]:
    rows = md[md.index("### Stage timings (s)") :].split("\n\n")[1]
    return rows.splitlines()


def test_summary_timings_show_every_step_in_the_order_a_stage_runs_them():
    every = {k: float(i) for i, k in enumerate(reversed(ci.TIMING_ORDER), 1)}
    header, rule, row = _timing_table(
        ci.summary_markdown(dict(OK_DOC, stages=[stage("all", "ok", timings=every)]))
    )
    assert header == (
        r"| stage | fetch | images | base | toolchain | accelerated | build | verify | smoke\_image | "
        r"smoke | smoke\_other\_vlen | tests | runtime | check |"
    )
    assert rule == "|---|" + "---:|" * 13
    assert row == "| all | 13.0 | 12.0 | 11.0 | 10.0 | 9.0 | 8.0 | 7.0 | 6.0 | 5.0 | 4.0 | 3.0 | 2.0 | 1.0 |"


def test_summary_timings_keep_a_step_not_in_the_order_after_the_known_ones():
    stages = [
        stage("a", "ok", timings={"build": 1.0, "later_step": 2.5}),
        stage("b", "ok", timings={"other|step": 4.0, "fetch": 0.5}),
        stage("c", "not run"),
    ]
    header, rule, *rows = _timing_table(ci.summary_markdown(dict(OK_DOC, stages=stages)))
    assert header.endswith(r"| check | later\_step | other\|step |")  # as first seen, escaped
    assert rule == "|---|" + "---:|" * 13
    assert rows == [
        "| a | - | - | - | - | - | 1.0 | - | - | - | - | - | 2.5 | - |",
        "| b | 0.5 | - | - | - | - | - | - | - | - | - | - | - | 4.0 |",
        "| c | - | - | - | - | - | - | - | - | - | - | - | - | - |",
    ]


def test_timing_order_has_every_key_the_build_writes():
    """Each `timer("...")` and `timings["..."]` in rvport/engine is a column of its own in the summary."""
    written = set()
    for path in Path(rvport.engine.__file__).parent.rglob("*.py"):
        written |= set(re.findall(r"""(?:\btimer\(|\btimings\[)["']([^"']+)["']""", path.read_text()))
    assert {"fetch", "images", "smoke_image", "smoke", "check"} <= written  # the scan finds them
    assert written <= set(ci.TIMING_ORDER)


def test_summary_of_a_failure_names_the_stage_and_carries_error_and_log_tail():
    md = ci.summary_markdown(FAILED_DOC)
    assert md.startswith("## rvport build: failed")
    assert "failing stage: **broken**" in md
    assert "| broken | 1.0 | qemu | failed | - | - | 3.0 s |" in md
    assert "| after | 1.0 | qemu | not run | - | - | 0.0 s |" in md
    details = md[md.index("<details>") :]
    assert "docker buildx build failed (exit status 3)" in details and "+ exit 3" in details


def test_summary_is_appended_not_overwritten(tmp_path):
    path = tmp_path / "step-summary.md"
    path.write_text("# earlier step\n")
    ci.append_summary(path, OK_DOC)
    ci.append_summary(path, OK_DOC)
    text = path.read_text()
    assert text.startswith("# earlier step\n") and text.count("## rvport build: ok") == 2


def test_junit_has_one_case_per_stage_with_verify_smoke_and_failure_details(tmp_path):
    path = ci.write_junit(tmp_path / "reports" / "rvport.xml", FAILED_DOC)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "3",
        "1",
        "0",
        "1",
    )
    (suite,) = root.findall("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["msgspec==1.0", "broken==1.0", "after==1.0"]
    ok = cases["msgspec==1.0"]
    props = {p.get("name"): p.get("value") for p in ok.iter("property")}
    assert props == {"status": "cached", "mode": "qemu", "verify": "ok", "smoke": "passed", "cache": "hit"}
    assert ok.find("failure") is None and ok.find("skipped") is None
    out = ok.find("system-out").text
    assert f"sha256 {SHA}" in out and "verify msgspec.whl: pass" in out and "smoke> msgspec ok 0.23.0" in out
    bad = cases["broken==1.0"]
    failure = bad.find("failure")
    assert failure.get("message") == "broken==1.0: docker buildx build failed (exit status 3) <&>"
    assert (
        "hint: full log" in failure.text
        and "--- log tail ---\n+ echo starting the build of broken\n+ exit 3" in failure.text
    )
    assert bad.get("time") == "3.0"
    assert cases["after==1.0"].find("skipped") is not None


def test_junit_marks_an_interrupted_stage_as_an_error():
    doc = dict(OK_DOC, status="interrupted", stages=[stage("slow", "interrupted", log_tail=["sleeping"])])
    root = ET.fromstring(ci.junit_xml(doc).split("\n", 1)[1])
    assert root.get("errors") == "1"
    assert root.find("testsuite/testcase/error").get("message") == "interrupted"


def test_buildspec_cache_options():
    spec = BuildSpec(
        context=Path("/c"),
        dockerfile=Path("/c/Dockerfile"),
        platform="linux/riscv64",
        cache_to=Path("/cache/new"),
        cache_from=Path("/cache/old"),
    )
    argv = spec.argv()
    assert argv[argv.index("--cache-from") + 1] == "type=local,src=/cache/old"
    assert argv[argv.index("--cache-to") + 1] == "type=local,dest=/cache/new,mode=max"
    assert argv[-1] == "/c"
    plain = BuildSpec(context=Path("/c"), dockerfile=Path("/c/Dockerfile"), platform="linux/riscv64").argv()
    assert "--cache-to" not in plain and "--cache-from" not in plain


def test_cache_export_is_refused_on_the_docker_driver_with_a_hint():
    with pytest.raises(UsageError) as e:
        check_cache_export(None, info={"name": "default", "driver": "docker", "platforms": []})
    assert "docker driver" in e.value.message
    assert "docker buildx create" in e.value.hint and "--driver docker-container" in e.value.hint
    check_cache_export("rv", info={"name": "rv", "driver": "docker-container", "platforms": []})  # accepted


def _lines(ci_name: str) -> list[str]:
    buf = io.StringIO()
    rep = Reporter(Console(file=buf, width=60, no_color=True), ci_name)
    rep.add("msgspec", "qemu")
    rep.begin("msgspec", "msgspec==0.23.0 [qemu]")
    rep.line("msgspec", "#7 [build 3/5] RUN " + "x" * 100)
    rep.end("msgspec", "ok")
    return buf.getvalue().splitlines()


def test_github_groups_fold_each_stage():
    lines = _lines("github")
    assert lines[0] == "::group::msgspec: msgspec==0.23.0 [qemu]"
    assert lines[1] == "#7 [build 3/5] RUN " + "x" * 100  # build output is never wrapped
    assert lines[2] == "::endgroup::"
    assert re.search(r"msgspec: ok \(\d+\.\ds\)$", lines[3]), lines[3]  # the time taken, whatever the load


def test_gitlab_sections_fold_each_stage():
    lines = _lines("gitlab")
    assert lines[0].startswith("\x1b[0Ksection_start:") and "rvport_1[collapsed=true]" in lines[0]
    assert any(ln.startswith("\x1b[0Ksection_end:") and "rvport_1" in ln for ln in lines)


CCACHE_DOC = dict(
    OK_DOC,
    stages=[
        dict(
            OK_DOC["stages"][0],
            compiler_cache={
                "tool": "ccache",
                "use": "dir",
                "status": "not used: the stage's artifacts were cached",
            },
        ),
        dict(
            OK_DOC["stages"][1],
            compiler_cache={
                "tool": "ccache",
                "use": "dir",
                "hits": 210,
                "misses": 3,
                "uncacheable": 12,
                "errors": 0,
                "calls": 225,
                "size_before": 40 * 2**20,
                "size_after": 41 * 2**20,
                "export": {"status": "exported", "files": 700, "bytes": 41 * 2**20},
            },
        ),
    ],
)


def test_summary_and_junit_show_each_stages_compiler_cache():
    md = ci.summary_markdown(CCACHE_DOC)
    assert "### Compiler cache (ccache)" in md
    assert "| tiktoken | dir | 210 | 3 | 12 | 40.0 MiB | 41.0 MiB | exported |" in md
    assert "| msgspec | dir | not used: the stage's artifacts were cached | - | - | - | - | - |" in md
    assert "Compiler cache" not in ci.summary_markdown(OK_DOC)  # no stage recorded one: no table
    root = ET.fromstring(ci.junit_xml(CCACHE_DOC))
    props = {
        p.get("name"): p.get("value")
        for p in root.find(".//testcase[@name='tiktoken==1.0']").find("properties")
    }
    assert props["ccache"] == "dir" and props["ccache_hits"] == "210" and props["ccache_misses"] == "3"
    assert props["ccache_uncacheable"] == "12" and props["ccache_size_after"] == str(41 * 2**20)


# ---------------------------------------------------------------------- `-`: the report on standard output
def _result_dir(tmp_path: Path, doc: dict) -> Path:
    import json

    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("flag", ["junit", "summary"])
def test_build_report_to_standard_output_alone_with_the_table_on_stderr(tmp_path, capsys, flag):
    from rvport.cli import console
    from rvport.cli.build_verbs import show_result

    console.configure()
    out = _result_dir(tmp_path, FAILED_DOC)
    show_result(out, **{"junit": None, "summary": None, flag: Path("-")})
    got = capsys.readouterr()
    if flag == "junit":
        root = ET.fromstring(got.out.split("\n", 1)[1])  # the XML alone: after its declaration, parseable
        assert root.tag == "testsuites" and "broken" in got.out
    else:
        assert got.out == ci.summary_markdown(FAILED_DOC)
    assert "broken" in got.err and f"wrote {out / 'result.json'}" in got.err  # the table, on stderr
    assert not (tmp_path / "-").exists() and not (Path.cwd() / "-").exists()


def test_build_report_to_a_file_keeps_the_table_on_stdout(tmp_path, capsys):
    from rvport.cli import console
    from rvport.cli.build_verbs import show_result

    console.configure()
    out = _result_dir(tmp_path, OK_DOC)
    show_result(out, junit=tmp_path / "j.xml", summary=None)
    got = capsys.readouterr()
    assert f"wrote {tmp_path / 'j.xml'}" in got.out and (tmp_path / "j.xml").read_text().startswith("<?xml")


def test_two_reports_on_standard_output_are_refused():
    from rvport.cli.outputs import one_stdout

    with pytest.raises(UsageError, match="--junit - and --summary - both ask for standard output"):
        one_stdout(junit=Path("-"), summary=Path("-"))
    assert one_stdout(junit=Path("-"), summary=Path("s.md"))
    assert not one_stdout(junit=Path.cwd() / "-", summary=None)  # a file named -, by its full path


def test_build_refuses_junit_and_summary_both_on_stdout_before_any_work(tmp_path):
    from tests.fixtures.cli import rvport_process

    cp = rvport_process(["build", "msgspec", "-o", str(tmp_path / "out"), "--junit", "-", "--summary", "-"])
    assert cp.returncode == 2, cp.stderr
    assert "both ask for standard output" in cp.stderr and not (tmp_path / "out").exists()
    assert "Traceback" not in cp.stderr
