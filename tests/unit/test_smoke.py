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
from rvport.build import buildx, render
from rvport.build import runner as runner_mod
from rvport.build.runner import BuildOptions, Runner, smoke_failure, smoke_record
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import Kind, load_catalogue
from rvport.errors import BuildFailed, ExitCode, SmokeFailed
from rvport.host import HostFacts
from rvport.plan.planner import Request, make_plan
from rvport.sources import Cache, FetchOptions

SCRIPT = "#!/bin/sh\necho building nothing\necho the smoke marker 7f3a\nexit 3\n"


def run_line(tmp_path: Path, script: str) -> tuple[int, Path]:
    """The rendered smoke stage's RUN line, run by sh with / moved to tmp_path."""
    install, run = render.smoke_commands(Kind.GO_BINARY, script)
    text = render.render("smoke", {"IMAGE": "img", "QEMU_CPU": "max", "INSTALL": install, "RUN": run}).text
    line = re.search(r"^RUN (.*?)(?<!\\)$", text.replace("\\\n", " "), re.M).group(1)
    (tmp_path / "rvport").mkdir()
    (tmp_path / "rvport" / "smoke").write_text(script)
    line = line.replace("/rvport", f"{tmp_path}/rvport").replace("cd /tmp", f"cd {tmp_path}")
    cp = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60)
    return cp.returncode, tmp_path


def test_the_smoke_step_succeeds_and_exports_the_output_and_exit_status_of_a_failing_test(tmp_path):
    rc, out = run_line(tmp_path, SCRIPT)
    assert rc == 0  # the build step never fails: the runner judges
    assert (out / "rvport-smoke.status").read_text().strip() == "3"
    assert "the smoke marker 7f3a" in (out / "rvport-smoke.log").read_text()
    text = render.render("smoke", {"IMAGE": "i", "QEMU_CPU": "max", "INSTALL": "true", "RUN": "true"}).text
    assert "COPY --from=smoke /rvport-smoke.log /rvport-smoke.status /" in text


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


def test_the_runner_records_the_failed_smoke_test_before_failing_the_stage(tmp_path, monkeypatch):
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
    seen = {}

    def fake_build(spec: buildx.BuildSpec, *, log_path, on_line=None):
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
    jsonschema.validate(doc, manifest.schema("result"))
    rec.smoke = {"status": "failed", "output": []}  # a failed one names its exit status
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(doc, stages=[rec.to_json()]), manifest.schema("result"))
