"""Smoke tests: the smoke stage always exports what the test printed and its exit status; the runner records
both (stages[].smoke) and fails the stage with the test's last lines (exit 7). No docker: the stage's RUN
line is run by sh with its paths moved into a scratch directory, and buildx is replaced by a fake."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest

from rvport import manifest
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine import buildx, render
from rvport.engine import runner as runner_mod
from rvport.engine.runner import BuildOptions, Runner, smoke_failure, smoke_record
from rvport.errors import BuildFailed, ExitCode, SmokeFailed
from rvport.host import HostFacts
from rvport.plan.planner import Request, make_plan
from rvport.sources import Cache, FetchOptions
from rvport.vocab import Kind
from tests.fixtures.schemas import validate

SCRIPT = "#!/bin/sh\necho building nothing\necho the smoke marker 7f3a\nexit 3\n"


def smoke_text(install="true", run="true", without_vector_cpu=None, profile="rvv256") -> str:
    return render.smoke_dockerfile(
        image="img",
        qemu_cpu="max",
        profile=get_profile(profile),
        install=install,
        run=run,
        without_vector_cpu=without_vector_cpu,
    ).text


def run_line(
    tmp_path: Path, script: str, without_vector_cpu: str | None = None, isa: str = "rv64imafdc_zicsr"
) -> tuple[int, Path]:
    """The rendered smoke stage's RUN lines, run in order by sh with / moved to tmp_path; /proc/cpuinfo is a
    file of ours whose isa line is `isa` (what QEMU shows of the CPU without V)."""
    install, run = render.smoke_commands(Kind.GO_BINARY, script)
    text = smoke_text(install, run, without_vector_cpu)
    lines = re.findall(r"^RUN (.*?)(?<!\\)$", text.replace("\\\n", " "), re.M)
    assert len(lines) == 2
    (tmp_path / "rvport").mkdir()
    (tmp_path / "rvport" / "smoke").write_text(script)
    (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nhart\t\t: 0\nisa\t\t: {isa}\nmmu\t\t: sv57\n")
    for line in lines:
        line = line.replace("/rvport", f"{tmp_path}/rvport").replace("cd /tmp", f"cd {tmp_path}")
        line = line.replace("/proc/cpuinfo", f"{tmp_path}/cpuinfo")
        cp = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60)
        if cp.returncode:
            return cp.returncode, tmp_path
    return 0, tmp_path


def test_the_smoke_step_succeeds_and_exports_the_output_and_exit_status_of_a_failing_test(tmp_path):
    rc, out = run_line(tmp_path, SCRIPT)
    assert rc == 0  # the build step never fails: the runner judges
    assert (out / "rvport-smoke.status").read_text().strip() == "3"
    assert "the smoke marker 7f3a" in (out / "rvport-smoke.log").read_text()
    text = smoke_text()
    assert "COPY --from=smoke /rvport-smoke.log /rvport-smoke.status /rvport-smoke-report.json" in text
    assert (out / "rvport-smoke-report.json").read_bytes() == b""  # made empty: a test that writes none


REPORT = (
    '{"checks": [{"name": "classifier parity with x86-64", "passed": true, '
    '"figures": {"texts": 10, "max_confidence_difference": 2.5e-07, "tolerance": 0.001}}]}'
)


def test_the_checks_a_smoke_test_reports_are_recorded_with_it(tmp_path):
    script = f"#!/bin/sh\necho parity ok\nprintf '%s' '{REPORT}' > \"$RVPORT_SMOKE_REPORT\"\n"
    rc, out = run_line(tmp_path, script)
    assert rc == 0
    record = smoke_record("x==1", out)
    assert record["status"] == "passed" and record["output"] == ["parity ok"]
    assert record["checks"] == [
        {
            "name": "classifier parity with x86-64",
            "passed": True,
            "figures": {"texts": 10, "max_confidence_difference": 2.5e-07, "tolerance": 0.001},
        }
    ]
    validate(record, _smoke_schema())


def test_a_reported_check_that_failed_fails_the_smoke_test_with_its_name(tmp_path):
    (tmp_path / "rvport-smoke.log").write_text("parity failed\n")
    (tmp_path / "rvport-smoke.status").write_text("0\n")
    (tmp_path / "rvport-smoke-report.json").write_text(REPORT.replace("true", "false"))
    record = smoke_record("x==1", tmp_path)
    assert record["status"] == "failed" and record["exit_status"] == 0
    assert record["problem"] == "its report says these checks failed: classifier parity with x86-64"
    validate(record, _smoke_schema())
    text = smoke_failure("x==1", record, Path("l")).render()
    assert "x==1: the smoke test failed (its report says these checks failed: classifier parity" in text
    assert smoke_failure("x==1", record, Path("l")).exit_code == ExitCode.BUILD_FAILED


@pytest.mark.parametrize(
    ("report", "why"),
    [
        ("not json", "it is not JSON"),
        ('{"checks": []}', "it holds 0 checks"),
        ('{"checks": [{"name": "a", "passed": "yes"}]}', "has no passed: true or false"),
        ('{"checks": [{"name": "a", "passed": true, "figures": {"x": [1]}}]}', "figure x is not a number"),
        ('{"checks": [{"name": "a\\nb", "passed": true}]}', "name is not a printable string"),
        ('{"checks": [{"name": "a", "passed": true}, {"name": "a", "passed": true}]}', "the same name"),
        ('{"checks": [{"name": "a", "passed": true, "figures": {"x": NaN}}]}', "figure x is not a number"),
        ('{"checks": [], "more": 1}', "not an object"),
        ("[" * 30000, "it is not JSON"),
    ],
)
def test_a_smoke_report_not_of_its_shape_fails_the_test_and_says_why(tmp_path, report, why):
    (tmp_path / "rvport-smoke.log").write_text("ok\n")
    (tmp_path / "rvport-smoke.status").write_text("0\n")
    (tmp_path / "rvport-smoke-report.json").write_text(report)
    record = smoke_record("x==1", tmp_path)
    assert record["status"] == "failed" and "checks" not in record
    assert record["problem"].startswith("its report ($RVPORT_SMOKE_REPORT) was refused: ")
    assert why in record["problem"]


def test_a_smoke_report_that_is_a_link_or_too_big_is_not_read(tmp_path):
    (tmp_path / "rvport-smoke.log").write_text("ok\n")
    (tmp_path / "rvport-smoke.status").write_text("0\n")
    secret = tmp_path / "secret"
    secret.write_text(REPORT)
    (tmp_path / "rvport-smoke-report.json").symlink_to(secret)
    with pytest.raises(BuildFailed, match="smoke report .* is a symbolic link"):
        smoke_record("x==1", tmp_path)
    (tmp_path / "rvport-smoke-report.json").unlink()
    (tmp_path / "rvport-smoke-report.json").write_text(" " * (70 << 10))
    with pytest.raises(BuildFailed, match="over the cap of 65536"):
        smoke_record("x==1", tmp_path)
    (tmp_path / "rvport-smoke-report.json").unlink()  # none exported (another rvport's template): no checks
    assert smoke_record("x==1", tmp_path) == {"status": "passed", "output": ["ok"]}


def test_a_passing_smoke_test_is_recorded_with_its_last_lines(tmp_path):
    rc, out = run_line(tmp_path, "#!/bin/sh\nfor i in 1 2 3 4 5 6 7; do echo line $i; done\n")
    assert rc == 0
    assert smoke_record("x==1", out) == {"status": "passed", "output": [f"line {i}" for i in range(3, 8)]}


def test_a_failing_smoke_test_is_recorded_and_raised_with_its_last_lines(tmp_path):
    (tmp_path / "rvport-smoke.log").write_text(
        "".join(f"line {i}\n" for i in range(30)) + "the smoke marker 7f3a\n"
    )
    (tmp_path / "rvport-smoke.status").write_text("3\n")
    record = smoke_record("x==1", tmp_path)
    assert record["status"] == "failed" and record["exit_status"] == 3
    assert len(record["output"]) == 20 and record["output"][-1] == "the smoke marker 7f3a"
    err = smoke_failure("x==1", record, Path("/out/logs/x.log"))
    assert (
        isinstance(err, SmokeFailed)
        and isinstance(err, BuildFailed)
        and err.exit_code == ExitCode.BUILD_FAILED == 7
    )
    text = err.render()
    assert "x==1: the smoke test failed (exit status 3)" in text and "    the smoke marker 7f3a" in text
    assert "/out/logs/x.log" in text and err.log_tail == record["output"]


def test_a_smoke_stage_that_exports_no_status_is_a_clear_build_failure(tmp_path):
    (tmp_path / "rvport-smoke.log").write_text("old template\n")
    with pytest.raises(BuildFailed, match="exported no rvport-smoke.status"):
        smoke_record("x==1", tmp_path)


def _smoke_schema() -> dict:
    """The result schema's stages[].smoke, for checking one record."""
    return manifest.schema("result")["properties"]["stages"]["items"]["properties"]["smoke"]


def test_a_smoke_log_over_the_cap_is_read_from_its_end_and_the_record_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_mod, "SMOKE_LOG_TAIL", 1000)
    lines = [f"line {i:04d} " + "x" * 40 for i in range(200)]
    text = "\n".join(lines) + "\nthe smoke marker 7f3a\n"
    (tmp_path / "rvport-smoke.log").write_text(text)
    (tmp_path / "rvport-smoke.status").write_text("3\n")
    record = smoke_record("x==1", tmp_path)
    assert record["truncated"] is True and record["log_bytes"] == len(text)
    assert record["output"][-1] == "the smoke marker 7f3a" and record["output"][:-1] == lines[-19:]
    validate(record, _smoke_schema())
    shown = smoke_failure("x==1", record, Path("/out/logs/x.log")).render()
    assert f"its log is {len(text)} bytes: only the last 1000 were read" in shown
    # the first line of what is read begins before it: it is left out, not shown cut
    (tmp_path / "rvport-smoke.log").write_text("a" * 5000 + "\nlast\n")
    assert smoke_record("x==1", tmp_path)["output"] == ["last"]
    (tmp_path / "rvport-smoke.log").write_text("short\n")
    assert "truncated" not in smoke_record("x==1", tmp_path)


def test_the_run_without_v_keeps_its_isa_line_when_its_log_is_over_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_mod, "SMOKE_LOG_TAIL", 200)
    (tmp_path / "rvport-smoke.log").write_text("ok\n")
    (tmp_path / "rvport-smoke.status").write_text("0\n")
    novector = "isa: rv64imafdc_zicsr\n" + "".join(f"noise {i}\n" for i in range(500)) + "kernels ok\n"
    (tmp_path / "rvport-smoke-novector.log").write_text(novector)
    (tmp_path / "rvport-smoke-novector.status").write_text("0\n")
    wv = smoke_record("x==1", tmp_path, {"cpu": "c", "expected": "sigill"})["without_vector"]
    assert wv["isa"] == "rv64imafdc_zicsr" and wv["truncated"] is True and wv["log_bytes"] == len(novector)
    assert wv["output"][-1] == "kernels ok" and wv["status"] == "failed"
    assert "only the last 200 were read" in runner_mod.without_vector_failure("x==1", wv, Path("l")).render()
    validate({"status": "passed", "output": [], "without_vector": wv}, _smoke_schema())


@pytest.mark.parametrize("name", ["rvport-smoke.log", "rvport-smoke.status"])
def test_a_smoke_export_that_is_a_link_or_too_big_is_a_build_failure_not_read(tmp_path, name):
    (tmp_path / "rvport-smoke.log").write_text("ok\n")
    (tmp_path / "rvport-smoke.status").write_text("0\n")
    secret = tmp_path / "secret"
    secret.write_text("0\n")
    (tmp_path / name).unlink()
    (tmp_path / name).symlink_to(secret)
    with pytest.raises(BuildFailed, match=f"x==1's smoke export .*{name} is a symbolic link") as e:
        smoke_record("x==1", tmp_path)
    assert e.value.exit_code == ExitCode.BUILD_FAILED
    (tmp_path / name).unlink()
    (tmp_path / name).symlink_to(tmp_path / "dangling")  # a link to nothing is no missing file either
    with pytest.raises(BuildFailed, match="is a symbolic link: not followed"):
        smoke_record("x==1", tmp_path)
    (tmp_path / "rvport-smoke.status").unlink()
    (tmp_path / "rvport-smoke.status").write_text("0" * 5000)
    (tmp_path / "rvport-smoke.log").unlink(missing_ok=True)
    (tmp_path / "rvport-smoke.log").write_text("ok\n")
    with pytest.raises(BuildFailed, match="over the cap of 4096"):
        smoke_record("x==1", tmp_path)


RECIPE = """\
schema: 1
name: tiny
kind: go-binary
build: [go build -o "$RVPORT_OUT/tiny" .]
outputs: [{glob: tiny, type: executable, isa: baseline}]
smoke:
  script: |
    #!/bin/sh
    echo the smoke marker 7f3a
    exit 3
versions:
  - version: "1.0"
    sources:
      - {name: src, url: "https://example.invalid/tiny-1.0.tar.gz", sha256: "%s"}
""" % ("a" * 64)


def _tiny_runner(tmp_path):
    """A runner of RECIPE's plan for rvv256, its recipe directory, output and cache under tmp_path."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "tiny.yaml").write_text(RECIPE)
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    plan = make_plan(
        load_catalogue(tmp_path / "recipes"), Request(refs=("tiny",), profile=get_profile("rvv256")), host
    )
    run = Runner(
        plan,
        BuildOptions(output=tmp_path / "out", fetch=FetchOptions(cache=Cache(root=tmp_path / "c"))),
        rep=SimpleNamespace(),
    )
    return run


def test_the_runner_records_the_failed_smoke_test_before_failing_the_stage(tmp_path, monkeypatch):
    run = _tiny_runner(tmp_path)
    seen = {}

    def fake_build(spec: buildx.BuildSpec, *, log_path, on_line=None, on_phase=None):
        seen["dockerfile"] = spec.dockerfile.read_text()
        seen["script"] = (spec.context / "rvport-smoke").read_text()
        seen["install"] = (spec.context / "rvport-smoke-install.sh").read_text()
        spec.output_dir.mkdir(parents=True, exist_ok=True)
        (spec.output_dir / "rvport-smoke.log").write_text("the smoke marker 7f3a\n")
        (spec.output_dir / "rvport-smoke.status").write_text("3\n")

    monkeypatch.setattr(runner_mod.buildx, "build", fake_build)
    rec = run.records[0]
    env = SimpleNamespace(
        stage=rec.stage,
        record=rec,
        log_path=tmp_path / "tiny.log",
        line=lambda _: None,
        phase=lambda _: None,
        riscv64_env={"QEMU_CPU": "rv64,the-profiles-cpu"},
    )
    files = tmp_path / "files"
    files.mkdir()
    (files / "tiny").write_text("not really a binary")
    with pytest.raises(SmokeFailed) as e:
        run._smoke(env, files, "rvport/base:under-test")
    assert "exit 3" in seen["script"] and "FROM rvport/base:under-test" in seen["dockerfile"]
    assert seen["install"] == render.smoke_scripts()["rvport-smoke-install.sh"]  # what the Dockerfile copies
    assert "ENV QEMU_CPU=rv64,the-profiles-cpu " in seen["dockerfile"]  # StageEnv.riscv64_env, the one rule
    assert rec.smoke == {"status": "failed", "exit_status": 3, "output": ["the smoke marker 7f3a"]}
    assert "the smoke marker 7f3a" in e.value.render()
    assert not list((tmp_path / "c" / "tmp").iterdir())  # its scratch directories are gone
    # what result.json says of it is valid
    rec.status, rec.error, rec.log_tail = "failed", e.value.render(), e.value.log_tail
    doc = {
        "schema": manifest.RESULT_SCHEMA,
        "kind": "rvport-result",
        "status": "failed",
        "failing_stage": "tiny",
        "tag": "t",
        "profile": {},
        "host": {},
        "started": "2026-01-01T00:00:00Z",
        "duration_s": 1,
        "base_images": {},
        "stages": [rec.to_json()],
        "artifacts": [],
    }
    validate(doc, manifest.schema("result"))
    rec.smoke = {"status": "failed", "output": []}  # a failed one names its exit status
    with pytest.raises(jsonschema.ValidationError):
        validate(dict(doc, stages=[rec.to_json()]), manifest.schema("result"))


# --- `smoke: without_vector:`: the same test again on a QEMU CPU without V (bug class 2, the silent scalar
# fallback). The fake test dies with SIGILL when QEMU_CPU is the CPU without V, as a vector kernel does there.
SIGILL_ON_NOV = (
    '#!/bin/sh\necho "cpu $QEMU_CPU"\n[ "$QEMU_CPU" = "rv64,v=false" ] && kill -ILL $$\necho kernels ok\n'
)
NOV = {"cpu": "rv64,v=false", "expected": "sigill"}


def test_the_run_without_v_gets_that_cpu_and_its_sigill_is_recorded_as_expected(tmp_path):
    rc, out = run_line(tmp_path, SIGILL_ON_NOV, without_vector_cpu="rv64,v=false")
    assert rc == 0
    assert (out / "rvport-smoke-novector.status").read_text().strip() == "132"  # 128 + SIGILL
    rec = smoke_record("x==1", out, NOV)
    assert rec["status"] == "passed" and "kernels ok" in rec["output"][-1]
    wv = rec["without_vector"]
    assert wv == {
        "cpu": "rv64,v=false",
        "expected": "sigill",
        "observed": "sigill",
        "exit_status": 132,
        "isa": "rv64imafdc_zicsr",
        "status": "passed",
        "output": ["isa: rv64imafdc_zicsr", "cpu rv64,v=false"],
    }


def test_a_test_that_passes_without_v_when_sigill_was_expected_fails_the_stage(tmp_path):
    """The silent scalar fallback: the vector profile's kernels ran on a CPU without V."""
    rc, out = run_line(tmp_path, "#!/bin/sh\necho scalar kernels ok\n", without_vector_cpu="rv64,v=false")
    assert rc == 0
    rec = smoke_record("x==1", out, NOV)
    assert rec["status"] == "passed"  # the test itself passed
    wv = rec["without_vector"]
    assert (wv["status"], wv["observed"], wv["exit_status"]) == ("failed", "pass", 0)
    err = runner_mod.without_vector_failure("x==1", wv, Path("/out/logs/x.log"))
    assert isinstance(err, SmokeFailed) and err.exit_code == ExitCode.BUILD_FAILED == 7
    text = err.render()
    assert "QEMU_CPU rv64,v=false" in text and "must die with SIGILL" in text and "silent scalar" in text
    assert "    scalar kernels ok" in text and err.log_tail == wv["output"]


@pytest.mark.parametrize(
    "status, expected, outcome, observed",
    [
        ("0\n", "pass", "passed", "pass"),  # rv64gc: the same kernels pass without V
        ("132\n", "pass", "failed", "sigill"),  # needs V where it must not
        ("139\n", "sigill", "failed", "exit 139"),  # a crash is not the SIGILL asked for
        ("1\n", "pass", "failed", "exit 1"),
    ],
)
def test_each_outcome_without_v_is_judged_against_the_expected_one(
    tmp_path, status, expected, outcome, observed
):
    (tmp_path / "rvport-smoke.log").write_text("ok\n")
    (tmp_path / "rvport-smoke.status").write_text("0\n")
    (tmp_path / "rvport-smoke-novector.log").write_text("isa: rv64imafdc\nsomething\n")
    (tmp_path / "rvport-smoke-novector.status").write_text(status)
    wv = smoke_record("x==1", tmp_path, {"cpu": "c", "expected": expected})["without_vector"]
    assert (wv["status"], wv["observed"], wv["exit_status"]) == (outcome, observed, int(status))
    if outcome == "failed":
        assert (
            "x==1: the smoke test again on a CPU without V"
            in runner_mod.without_vector_failure("x==1", wv, Path("l")).render()
        )


def test_a_cpu_that_still_shows_v_is_a_native_engine_and_the_check_is_skipped_with_its_reason(tmp_path):
    rc, out = run_line(tmp_path, SIGILL_ON_NOV, without_vector_cpu="rv64,v=false", isa="rv64imafdcv_zvl256b")
    assert rc == 0
    wv = smoke_record("x==1", out, NOV)["without_vector"]
    assert wv["status"] == "skipped" and wv["observed"] is None and wv["isa"] == "rv64imafdcv_zvl256b"
    assert "natively" in wv["reason"]
    assert not (out / "rvport-smoke-novector.log").read_text().count("cpu rv64,v=false")  # never run


def test_after_a_failing_test_it_is_not_run_again_and_without_the_field_nothing_runs(tmp_path):
    (tmp_path / "a").mkdir()
    rc, out = run_line(tmp_path / "a", SCRIPT, "rv64,v=false")
    assert rc == 0
    rec = smoke_record("x==1", out, NOV)
    assert rec["status"] == "failed" and rec["without_vector"]["status"] == "not run"
    (tmp_path / "b").mkdir()
    rc, out = run_line(tmp_path / "b", SIGILL_ON_NOV)
    assert rc == 0 and (out / "rvport-smoke-novector.status").read_text().strip() == "not-asked"
    assert "without_vector" not in smoke_record("x==1", out)
    assert "QEMU_CPU" not in (out / "rvport-smoke-novector.log").read_text()


def test_an_old_smoke_dockerfile_without_the_second_run_is_a_clear_build_failure(tmp_path):
    (tmp_path / "rvport-smoke.log").write_text("ok\n")
    (tmp_path / "rvport-smoke.status").write_text("0\n")
    with pytest.raises(BuildFailed, match="exported no rvport-smoke-novector"):
        smoke_record("x==1", tmp_path, NOV)


def test_the_smoke_dockerfile_names_the_profile_and_quotes_the_cpu_and_refuses_a_cpu_that_could_inject():
    text = smoke_text(without_vector_cpu="rv64,v=false,zvfh=false", profile="rvv256")
    assert "RVPORT_PROFILE=rvv256 RVPORT_VLEN=256" in text
    assert "cpu=rv64,v=false,zvfh=false;" in text and "ulimit -c 0" in text
    assert "cpu='';" in smoke_text()
    assert "RVPORT_VLEN=0" in smoke_text(profile="rv64gc")
    for bad in ("rv64 ; id", "rv64,v=$(id)", "rv64\nRUN id", "rv64,'x'"):
        with pytest.raises(ValueError, match="cannot be written into the smoke stage"):
            smoke_text(without_vector_cpu=bad)


def test_the_summary_and_junit_show_the_check():
    from rvport.cli import ci

    def stage(wv):
        return {
            "recipe": "vllm",
            "status": "ok",
            "smoke": {"status": "passed", "output": [], "without_vector": wv},
        }

    ok = {
        "cpu": "c",
        "expected": "sigill",
        "observed": "sigill",
        "status": "passed",
        "output": ["isa: rv64i"],
    }
    bad = dict(ok, observed="pass", status="failed")
    assert ci.smoke_word(stage(ok)) == "passed; without V: sigill as expected"
    assert ci.smoke_word(stage(bad)) == "passed; without V: pass, expected sigill"
    assert ci.smoke_word(stage({"status": "skipped", "reason": "r"})) == "passed; without V: skipped"
    assert ci.smoke_word({"smoke": {"status": "passed", "output": []}}) == "passed"
    md = ci.summary_markdown({"status": "ok", "profile": {"name": "rvv256"}, "stages": [stage(ok)]})
    assert "passed; without V: sigill as expected" in md
    xml = ci.junit_xml({"status": "ok", "profile": {"name": "rvv256"}, "stages": [stage(ok)]})
    assert (
        "smoke without V: sigill as expected (QEMU_CPU c)" in xml and "smoke without V&gt; isa: rv64i" in xml
    )


def test_the_summary_and_junit_show_the_checks_a_smoke_test_reported():
    from rvport.cli import ci

    checks = [
        {"name": "classifier parity", "passed": True, "figures": {"texts": 10, "max": 2.5e-07}},
        {"name": "a | b", "passed": False, "figures": {}},
    ]
    stage = {
        "recipe": "candle-binding",
        "status": "ok",
        "smoke": {"status": "passed", "output": [], "checks": checks},
    }
    assert ci.smoke_word(stage) == "passed; classifier parity: passed; a | b: failed"
    md = ci.summary_markdown({"status": "ok", "profile": {"name": "rvv256"}, "stages": [stage]})
    assert "classifier parity: passed" in md and "a | b" not in md  # the cell's | is escaped
    xml = ci.junit_xml({"status": "ok", "profile": {"name": "rvv256"}, "stages": [stage]})
    assert "smoke check classifier parity: passed (texts 10, max 2.5e-07)" in xml
    assert "smoke check a | b: failed" in xml


def test_the_plan_derives_the_expected_outcome_from_the_profile_and_shows_it(tmp_path):
    from rvport.plan.planner import smoke_without_vector

    cat = load_catalogue()
    vllm = cat.resolve("vllm")
    assert vllm.smoke_without_vector == "sigill"
    scalar = get_profile("rv64gc").qemu_cpu
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    keys = {}
    for profile, expected in (
        ("rv64gc", "pass"),
        ("rvv128", "sigill"),
        ("rvv256", "sigill"),
        ("rvv256-bf16", "sigill"),
    ):
        assert smoke_without_vector(vllm, get_profile(profile)) == {"cpu": scalar, "expected": expected}
        plan = make_plan(cat, Request(refs=("vllm",), profile=get_profile(profile)), host)
        doc = plan.to_json()
        validate(doc, manifest.schema("plan"))
        assert doc["stages"][0]["smoke"]["without_vector"] == {"cpu": scalar, "expected": expected}
        keys[profile] = plan.stages[0].key
    # `pass`: it must pass under every profile; no field, or no smoke test: no second run
    from dataclasses import replace

    assert (
        smoke_without_vector(replace(vllm, smoke_without_vector="pass"), get_profile("rvv256"))["expected"]
        == "pass"
    )
    assert smoke_without_vector(replace(vllm, smoke_without_vector=None), get_profile("rvv256")) is None
    assert smoke_without_vector(replace(vllm, smoke=None), get_profile("rvv256")) is None
    msgspec = make_plan(cat, Request(refs=("msgspec",), profile=get_profile("rvv256")), host).to_json()
    assert "without_vector" not in msgspec["stages"][0]["smoke"]


def test_the_field_is_checked_on_load_and_is_part_of_the_stage_key(tmp_path):
    from rvport.errors import RecipeError

    (tmp_path / "tiny.yaml").write_text(RECIPE.replace("smoke:\n", "smoke:\n  without_vector: segv\n"))
    with pytest.raises(RecipeError) as e:
        load_catalogue(tmp_path)
    assert any("without_vector" in p.message for p in e.value.problems)
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    keys = []
    for extra in ("", "  without_vector: sigill\n", "  without_vector: pass\n"):
        (tmp_path / "tiny.yaml").write_text(RECIPE.replace("smoke:\n", "smoke:\n" + extra))
        plan = make_plan(
            load_catalogue(tmp_path), Request(refs=("tiny",), profile=get_profile("rvv256")), host
        )
        keys.append(plan.stages[0].key)
    assert len(set(keys)) == 3


def test_one_smoke_image_serves_every_profile():
    """rv64gc and the vector profiles ask for the same smoke image (each container gets its profile's CPU
    when it runs); that apt runs on the scalar CPU in every such image is test_prepare's
    test_one_toolchain_image_serves_every_profile."""
    from rvport.engine import modes

    cat = load_catalogue()
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    seen = []
    for profile in ("rv64gc", "rvv256"):
        stage = make_plan(cat, Request(refs=("vllm",), profile=get_profile(profile)), host).stages[0]
        env = SimpleNamespace(
            stage=stage,
            with_packages=lambda base, pkgs, what: seen.append((pkgs, what)),
        )
        modes.smoke_image(env, SimpleNamespace(tag="b", image_id="i"))
    assert seen[0] == seen[1] and seen[0][1] == "smoke"
    assert "python3-torch=2.14.1+dfsg-1" in seen[0][0]


def test_the_runner_hands_the_cpu_to_the_stage_and_fails_a_stage_whose_vector_code_did_not_run(
    tmp_path, monkeypatch
):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "tiny.yaml").write_text(
        RECIPE.replace("smoke:\n", "smoke:\n  without_vector: sigill\n")
    )
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    plan = make_plan(
        load_catalogue(tmp_path / "recipes"), Request(refs=("tiny",), profile=get_profile("rvv256")), host
    )
    run = Runner(
        plan,
        BuildOptions(output=tmp_path / "out", fetch=FetchOptions(cache=Cache(root=tmp_path / "c"))),
        rep=SimpleNamespace(),
    )
    seen = {}

    def fake_build(spec: buildx.BuildSpec, *, log_path, on_line=None, on_phase=None):
        seen["dockerfile"] = spec.dockerfile.read_text()
        spec.output_dir.mkdir(parents=True, exist_ok=True)
        (spec.output_dir / "rvport-smoke.log").write_text("kernels ok\n")
        (spec.output_dir / "rvport-smoke.status").write_text("0\n")
        (spec.output_dir / "rvport-smoke-novector.log").write_text("isa: rv64imafdc\nkernels ok\n")
        (spec.output_dir / "rvport-smoke-novector.status").write_text("0\n")

    monkeypatch.setattr(runner_mod.buildx, "build", fake_build)
    rec = run.records[0]
    env = SimpleNamespace(
        stage=rec.stage,
        record=rec,
        log_path=tmp_path / "tiny.log",
        line=lambda _: None,
        phase=lambda _: None,
        riscv64_env={"QEMU_CPU": get_profile("rvv256").qemu_cpu},
    )
    files = tmp_path / "files"
    files.mkdir()
    (files / "tiny").write_text("not really a binary")
    with pytest.raises(SmokeFailed, match="must die with SIGILL"):
        run._smoke(env, files, "rvport/base:under-test")
    assert f"cpu={get_profile('rv64gc').qemu_cpu};" in seen["dockerfile"]
    assert "RVPORT_PROFILE=rvv256 RVPORT_VLEN=256" in seen["dockerfile"]
    wv = rec.smoke["without_vector"]
    assert rec.smoke["status"] == "passed" and (wv["status"], wv["observed"]) == ("failed", "pass")
    stage_schema = manifest.schema("result")["properties"]["stages"]["items"]
    validate(rec.to_json(), stage_schema)


WHEEL_RECIPE = """\
schema: 1
name: %(name)s
kind: python-wheel
build: [python3 -m pip wheel --no-deps --no-build-isolation --no-index --wheel-dir "$RVPORT_OUT" .]
outputs: [{glob: "*.whl", type: wheel}]
smoke:
  script: import %(name)s
versions:
  - version: "1.0"
    %(depends)s
    sources:
      - {name: sdist, url: "https://example.invalid/%(name)s-1.0.tar.gz", sha256: "%(sha)s"}
"""


def test_a_wheel_stage_s_smoke_test_installs_the_wheels_of_its_dependencies_too(tmp_path, monkeypatch):
    # xgrammar imports tvm_ffi at run time: its smoke test needs apache-tvm-ffi's wheel beside its own
    (tmp_path / "recipes").mkdir()
    for name, depends in (("base", "hermetic: true"), ("app", "depends: [base]")):
        (tmp_path / "recipes" / f"{name}.yaml").write_text(
            WHEEL_RECIPE % {"name": name, "depends": depends, "sha": "b" * 64}
        )
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    plan = make_plan(
        load_catalogue(tmp_path / "recipes"), Request(refs=("app",), profile=get_profile("rv64gc")), host
    )
    assert [s.name for s in plan.stages] == ["base", "app"] and plan.stages[1].depends == ("base",)
    run = Runner(
        plan,
        BuildOptions(output=tmp_path / "out", fetch=FetchOptions(cache=Cache(root=tmp_path / "c"))),
        rep=SimpleNamespace(),
    )
    dep_out = tmp_path / "out" / "artifacts" / "base"
    (dep_out / "sub").mkdir(parents=True)
    (dep_out / "sub" / "base-1.0-cp314-cp314-manylinux_2_31_riscv64.whl").write_text("the dep wheel")
    (dep_out / "libbase.a").write_text("not a wheel")
    run.stage_outputs["base"] = dep_out
    seen = {}

    def fake_build(spec: buildx.BuildSpec, *, log_path, on_line=None, on_phase=None):
        seen["dockerfile"] = spec.dockerfile.read_text()
        seen["deps"] = sorted(
            str(p.relative_to(spec.context / "deps")) for p in (spec.context / "deps").rglob("*")
        )
        spec.output_dir.mkdir(parents=True, exist_ok=True)
        (spec.output_dir / "rvport-smoke.log").write_text("ok\n")
        (spec.output_dir / "rvport-smoke.status").write_text("0\n")

    monkeypatch.setattr(runner_mod.buildx, "build", fake_build)
    rec = run.records[1]
    env = SimpleNamespace(
        stage=rec.stage,
        record=rec,
        log_path=tmp_path / "app.log",
        line=lambda _: None,
        phase=lambda _: None,
        riscv64_env={"QEMU_CPU": "rv64"},
    )
    files = tmp_path / "files"
    files.mkdir()
    (files / "app-1.0-cp314-cp314-manylinux_2_31_riscv64.whl").write_text("")
    run._smoke(env, files, "rvport/base:under-test")
    # only the wheel, under the dependency's stage name; the Dockerfile copies it and installs both
    assert seen["deps"] == ["base", "base/base-1.0-cp314-cp314-manylinux_2_31_riscv64.whl"]
    assert "COPY deps/ /rvport/deps/" in seen["dockerfile"]
    assert "sh -eu /rvport/smoke-install.sh /artifacts /rvport/deps" in seen["dockerfile"]
    assert rec.smoke == {
        "status": "passed",
        "output": ["ok"],
        "deps": ["base-1.0-cp314-cp314-manylinux_2_31_riscv64.whl"],
    }


def test_a_stage_without_dependencies_gets_an_empty_deps_directory(tmp_path):
    from rvport.engine.runner import smoke_deps

    assert smoke_deps(tmp_path / "deps", {}) == []
    assert (tmp_path / "deps").is_dir() and not list((tmp_path / "deps").iterdir())
    staticlib = tmp_path / "glide"
    staticlib.mkdir()
    (staticlib / "libglide_ffi.a").write_text("")
    assert smoke_deps(tmp_path / "deps", {"glide-ffi": staticlib}) == []  # no wheel: nothing to install
    assert not list((tmp_path / "deps").iterdir())


@pytest.mark.parametrize(
    ("profile", "other", "exact", "status", "want"),
    [
        ("rvv128", 256, False, "0", "passed"),
        ("rvv128", 256, False, "1", "failed"),
        ("rvv256", 128, False, "134", "passed"),  # below the profile's zvl256b: nothing is promised
        ("rvv256", 128, False, "0", "passed"),
        ("rvv256", 128, True, "1", "passed"),
        ("rvv256", 128, True, "132", "passed"),
        ("rvv256", 128, True, "0", "finding"),
    ],
)
def test_a_matrix_s_vector_wheel_runs_once_more_at_the_other_vlen(
    tmp_path, monkeypatch, profile, other, exact, status, want
):
    """BuildOptions.other_vlen (a build matrix's vector profile): the smoke test again on the profile's CPU
    with that VLEN. A wheel without `vlen: exact` must pass at a larger VLEN (else exit 7), and is only
    recorded at a smaller one; a VLEN-exact one is expected to be refused, and passing there is recorded as a
    finding, not a failure."""
    text = RECIPE.replace("smoke:\n", "smoke:\n  without_vector: sigill\n")
    if exact:
        text = text.replace("isa: baseline}", "isa: baseline, vlen: exact}")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "tiny.yaml").write_text(text)
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    plan = make_plan(
        load_catalogue(tmp_path / "recipes"), Request(refs=("tiny",), profile=get_profile(profile)), host
    )
    assert any(o.vlen_exact for o in plan.stages[0].recipe.outputs) is exact
    opts = BuildOptions(
        output=tmp_path / "out", fetch=FetchOptions(cache=Cache(root=tmp_path / "c")), other_vlen=other
    )
    run = Runner(plan, opts, rep=SimpleNamespace(step=lambda *_: None))
    seen = {}

    def fake_build(spec: buildx.BuildSpec, *, log_path, on_line=None, on_phase=None):
        seen["dockerfile"] = spec.dockerfile.read_text()
        spec.output_dir.mkdir(parents=True, exist_ok=True)
        (spec.output_dir / "rvport-smoke.log").write_text("vlmax 4\n")
        (spec.output_dir / "rvport-smoke.status").write_text(f"{status}\n")
        (spec.output_dir / "rvport-smoke-novector.log").write_text("")
        (spec.output_dir / "rvport-smoke-novector.status").write_text("not-asked\n")

    monkeypatch.setattr(runner_mod.buildx, "build", fake_build)
    rec = run.records[0]
    rec.smoke = {"status": "passed", "output": []}
    env = SimpleNamespace(
        stage=rec.stage, record=rec, log_path=tmp_path / "tiny.log", line=lambda _: None, phase=lambda _: None
    )
    files = tmp_path / "files"
    files.mkdir()
    (files / "tiny").write_text("not really a binary")
    check = run._other_vlen(rec.stage)
    own = get_profile(profile).vlen
    assert check == {
        "vlen": other,
        "cpu": get_profile(profile).qemu_cpu.replace(f"vlen={own}", f"vlen={other}"),
        "expected": "refused" if exact else "pass" if other > own else "any",
    }
    if want == "failed":
        with pytest.raises(SmokeFailed, match=f"on a CPU of VLEN {other} .* must pass"):
            run._smoke_other_vlen(env, files, "rvport/base:under-test", check)
    else:
        run._smoke_other_vlen(env, files, "rvport/base:under-test", check)
    assert f"QEMU_CPU={check['cpu']} " in seen["dockerfile"] and "cpu='';" in seen["dockerfile"]
    assert f"RVPORT_PROFILE={profile} RVPORT_VLEN={own}" in seen["dockerfile"]  # the stage's own VLEN still
    ov = rec.smoke["other_vlen"]
    assert (ov["status"], ov["vlen"], ov["exit_status"]) == (want, other, int(status))
    stage_schema = manifest.schema("result")["properties"]["stages"]["items"]
    jsonschema.validate(rec.to_json(), stage_schema)


def test_no_other_vlen_run_for_a_single_build_a_scalar_profile_or_without_smoke(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "tiny.yaml").write_text(RECIPE)
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    cat = load_catalogue(tmp_path / "recipes")
    fetch = FetchOptions(cache=Cache(root=tmp_path / "c"))
    for profile, other, smoke in (("rvv256", None, True), ("rv64gc", 128, True), ("rvv256", 128, False)):
        plan = make_plan(cat, Request(refs=("tiny",), profile=get_profile(profile)), host)
        opts = BuildOptions(output=tmp_path / "o", fetch=fetch, other_vlen=other, smoke=smoke)
        assert Runner(plan, opts, rep=SimpleNamespace())._other_vlen(plan.stages[0]) is None


def test_failed_verdicts_are_returned_for_the_record_not_only_raised(tmp_path):
    """The stage's verify step: what fails verification comes back as verdicts (stages[].verify, ok false)
    with its reasons, so result.json keeps them when the stage then fails, as the hint says."""
    run = _tiny_runner(tmp_path)
    files = tmp_path / "files"
    files.mkdir()
    (files / "tiny").write_text("not really a binary")
    verify, failures = run._verify(run.records[0].stage, files)
    assert verify["ok"] is False and failures and failures[0].startswith("tiny: ")
    (artifact,) = verify["reports"][0]["artifacts"]
    assert artifact["path"] == "tiny" and artifact["verdict"] == "fail"
