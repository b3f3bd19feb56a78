"""`rvport serve-check` without Docker: what it refuses before the engine is used (a wheelhouse that is not
one, made for another recipe or profile, an output directory of something else, no engine), the shape of
result.json and the exit code of a failed step, the image's Dockerfile and its check, and the pure parts of
the script that runs inside the container (resources/scripts/serve-check.py): which pip check lines are
judged, which steps run after a failure, a step's hard timeout. The real check is an integration run
(docs/closure.md, "The serving check")."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rvport import manifest, outdir, proc, resources
from rvport.catalogue.profiles import get_profile
from rvport.closure import servecheck, serveenv, serveimage
from rvport.closure import wheelhouse as wh
from rvport.errors import BuildFailed, ExitCode, HostNotReady, IntegrityError, UsageError
from rvport.sources import debarchive, fetch_options
from tests.fixtures.cli import rvport_process
from tests.fixtures.schemas import validate

SCRIPT = resources.builtin("scripts", "serve-check.py")
_spec = importlib.util.spec_from_file_location("serve_check_inside", SCRIPT)
inside = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(inside)

DIGEST = "sha256:" + "0" * 64


def make_house(d: Path, *, recipe: str = "vllm", profile: str = "rv64gc") -> Path:
    """A wheelhouse as `rvport wheelhouse` writes it: two wheels (their bytes need not be wheels here), its
    requirements.txt, debian-packages.txt and wheelhouse.json."""
    d.mkdir(parents=True)
    rows = []
    for name, file in (
        ("vllm", "vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl"),
        ("regex", "regex-1-py3-none-any.whl"),
    ):
        (d / file).write_bytes(name.encode())
        rows.append((name, file, hashlib.sha256(name.encode()).hexdigest()))
    debian = [{"name": "torch", "package": "python3-torch", "version": "2.14.1+dfsg-1", "sha256": "a" * 64}]
    (d / wh.REQUIREMENTS).write_text(wh.requirements_text(rows))
    (d / wh.DEBIAN_LIST).write_text(wh.debian_text("sid", [("python3-torch", "2.14.1+dfsg-1")]))
    doc = {
        "schema": 1,
        "kind": "rvport-wheelhouse",
        "recipe": recipe,
        "version": "0.33.0",
        "lock": {"file": None, "digest": DIGEST, "counts": {"recipe": 1, "pypi": 1, "debian": 1}},
        "profile": profile,
        "target": {"python": "3.14", "abi": "cp314", "base": "debian-sid", "suite": "sid"},
        "wheels": [{"name": n, "version": "1", "origin": "pypi", "file": f, "sha256": s} for n, f, s in rows],
        "debian": debian,
        "debian_release": None,
    }
    manifest.write(d / wh.MANIFEST, doc)
    return d


def opts(tmp_path: Path, **kw) -> servecheck.Options:
    return servecheck.Options(
        recipe=kw.pop("recipe", "vllm"),
        version=kw.pop("version", None),
        wheelhouse=kw.pop("wheelhouse", tmp_path / "wh"),
        output=kw.pop("output", tmp_path / "out"),
        profile=kw.pop("profile", None),
        fetch=fetch_options(cache_dir=tmp_path / "cache", offline=True),
        skip_tests=kw.pop("skip_tests", True),  # the tests step's own tests (test_servetests.py) give a tree
        **kw,
    )


# ------------------------------------------------------------------------------------ the wheelhouse
def test_a_wheelhouse_is_read_and_its_profile_is_the_checks_default(tmp_path):
    make_house(tmp_path / "wh")
    checked = servecheck.check_inputs(opts(tmp_path))
    assert checked.profile.name == "rv64gc" and checked.wheelhouse.wheel_names() == {"vllm", "regex"}
    assert (
        servecheck.check_inputs(opts(tmp_path, profile="rv64gc", version="0.33.0")).profile.name == "rv64gc"
    )


@pytest.mark.parametrize(
    ("damage", "kind", "said"),
    [
        (lambda d: None, UsageError, "no such directory"),
        (lambda d: d.mkdir(), UsageError, "is no wheelhouse: it has no wheelhouse.json"),
        (lambda d: (d.mkdir(), (d / "wheelhouse.json").write_text("{")), UsageError, "not JSON"),
        (lambda d: (d.mkdir(), (d / "wheelhouse.json").write_text('{"schema": 1}')), UsageError, "missing"),
    ],
)
def test_what_is_no_wheelhouse_is_a_usage_error(tmp_path, damage, kind, said):
    damage(tmp_path / "wh")
    with pytest.raises(kind) as ei:
        servecheck.check_inputs(opts(tmp_path))
    assert said in ei.value.render() and ei.value.exit_code == ExitCode.USAGE
    assert "rvport wheelhouse" in ei.value.render()


def test_a_wheelhouse_changed_after_it_was_made_is_refused_with_every_change(tmp_path):
    d = make_house(tmp_path / "wh")
    (d / "regex-1-py3-none-any.whl").write_bytes(b"other")
    (d / "vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl").unlink()
    with open(d / wh.REQUIREMENTS, "a") as f:
        f.write("extra==1\n")
    with pytest.raises(IntegrityError) as ei:
        servecheck.check_inputs(opts(tmp_path))
    text = ei.value.render()
    assert ei.value.exit_code == ExitCode.INTEGRITY and "changed since it was made (3 problem(s))" in text
    assert "requirements.txt is not the one" in text and "regex-1-py3-none-any.whl: sha256" in text
    assert "vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl: not a file of the wheelhouse" in text


def test_a_wheelhouse_for_another_profile_recipe_or_version_is_refused_with_what_to_do(tmp_path):
    make_house(tmp_path / "wh", profile="rv64gc")
    with pytest.raises(UsageError) as ei:
        servecheck.check_inputs(opts(tmp_path, profile="rvv256"))
    text = ei.value.render()
    assert "made for profile rv64gc, not rvv256" in text and "--profile rv64gc" in text
    with pytest.raises(UsageError, match="0.33.0's, not 0.34.0's"):
        servecheck.check_inputs(opts(tmp_path, version="0.34.0"))
    make_house(tmp_path / "other", recipe="sglang")
    with pytest.raises(UsageError, match="is sglang's, not vllm's"):
        servecheck.check_inputs(opts(tmp_path, wheelhouse=tmp_path / "other"))
    with pytest.raises(UsageError, match="msgspec has no serving check"):
        servecheck.check_inputs(opts(tmp_path, recipe="msgspec"))


def test_the_output_is_new_empty_or_a_checks_own(tmp_path):
    make_house(tmp_path / "wh")
    out = tmp_path / "out"
    (out / "logs").mkdir(parents=True)
    manifest.write(out / "result.json", {"kind": servecheck.KIND})
    with pytest.raises(UsageError, match="no rvport-output.json"):  # a result.json alone proves nothing
        servecheck.check_inputs(opts(tmp_path))
    outdir.write_manifest(out, outdir.Kind.SERVE_CHECK)
    servecheck.check_inputs(opts(tmp_path))  # a check's before: fine
    outdir.write_manifest(out, outdir.Kind.BUILD)  # a build's
    with pytest.raises(UsageError, match="rvport's build output, not a serve-check output"):
        servecheck.check_inputs(opts(tmp_path))
    outdir.write_manifest(out, outdir.Kind.SERVE_CHECK)
    (out / "artifacts").mkdir()
    with pytest.raises(UsageError, match="what rvport did not write there: artifacts"):
        servecheck.check_inputs(opts(tmp_path))


def test_no_docker_or_no_riscv64_emulation_is_host_not_ready(monkeypatch):
    monkeypatch.setattr(proc, "which", lambda name, env=None: None)
    with pytest.raises(HostNotReady, match="not found: docker") as ei:
        servecheck.check_engine()
    assert ei.value.exit_code == ExitCode.HOST_NOT_READY


def test_the_command_line_says_what_is_missing_and_exits_2(tmp_path):
    cp = rvport_process(["serve-check", "vllm", "--output", str(tmp_path / "o")])
    assert cp.returncode == 2 and "needs --wheelhouse DIR" in cp.stderr
    cp = rvport_process(
        ["serve-check", "vllm", "--wheelhouse", str(tmp_path / "nothing"), "-o", str(tmp_path)]
    )
    assert cp.returncode == 2 and "no such directory" in cp.stderr and "Traceback" not in cp.stderr
    cp = rvport_process(["serve-check", "vllm", "--wheelhouse", "x", "-o", "y", "--timeout", "0"])
    assert cp.returncode == 2 and "--timeout 0" in cp.stderr


# ---------------------------------------------------------------------------------- the container
def test_the_container_has_no_network_a_big_shm_the_wheelhouse_read_only_and_the_steps_timeout(tmp_path):
    o = opts(tmp_path, skip_serve=True, timeout=90.0)
    args = servecheck.container_args(o, tmp_path / "out" / "logs")
    assert args[args.index("--shm-size") + 1] == "1g"
    assert f"{(tmp_path / 'wh').absolute()}:/wheelhouse:ro" in args
    assert f"{SCRIPT}:/rvport/serve-check.py:ro" in args and "--user" in args
    cmd = servecheck.container_command(o)
    assert cmd[:3] == ["python3", "/rvport/serve-check.py", "run"] and cmd[-3:] == [
        "--timeout",
        "90",
        "--skip-serve",
    ]
    tests_only = servecheck.container_command(opts(tmp_path, skip_serve=True, skip_generate=True))
    assert tests_only[-2:] == ["--skip-generate", "--skip-serve"]
    assert "--skip-generate" not in cmd


def fake_inside(status: dict[str, str], logs: Path) -> dict:
    steps = []
    for name, st in status.items():
        rec = {"name": name, "status": st}
        if st in ("passed", "failed"):
            rec.update(
                seconds=1.5, exit_status=0 if st == "passed" else 1, timed_out=False, log=f"{name}.log"
            )
            (logs / f"{name}.log").write_text(f"$ {name}\n" + "".join(f"line {i}\n" for i in range(30)))
        steps.append(rec)
    by = {s["name"]: s for s in steps}
    if status.get("generate") == "passed":
        by["generate"]["result"] = inside.generate_figures(200.0, 0.3, 0.5, list(range(8)))
    if status.get("generate-eager") == "passed":
        by["generate-eager"]["result"] = inside.generate_figures(150.0, 0.4, 0.8, list(range(8)))
    if status.get("pip-check"):
        by["pip-check"].update(lines=["x"], judged=[], not_judged=["x"])
    if status.get("guided") == "passed":
        by["guided"].update(guided_inside({}))
    return {"steps": steps, "env": inside.RUN_ENV}


PET = '{"name":"Rex","kind":"dog","home":{"city":"oslo","indoor":true},"tags":["old","calm"]}'


def answer(text: str) -> str:
    return json.dumps(
        {"choices": [{"text": text, "finish_reason": "stop"}], "usage": {"completion_tokens": 9}}
    )


def guided_inside(bad: dict[str, str]) -> dict:
    """The guided step's fields as the container writes them: every backend answered every request within
    its constraint, but those in `bad` ({backend: the HTTP 400 body of its json request})."""
    found = {}
    for b in inside.BACKENDS:
        reqs = {}
        for kind, text in (("json", PET), ("regex", "ab-12"), ("choice", "red")):
            status, body = (400, bad[b]) if kind == "json" and b in bad else (200, answer(text))
            reqs[kind] = {**inside.judge_answer(kind, status, body), "seconds": 2.5}
        found[b] = {"guided": b, "mode": "eager", "startup_seconds": 300.0, "requests": reqs}
    programs = [{"exit_status": int(b in bad), "timed_out": False, "seconds": 400.0} for b in inside.BACKENDS]
    result, failures = inside.guided_outcome(found, programs)
    return {"result": result, "failures": failures, "programs": programs}


def make_record(tmp_path: Path, status: dict[str, str], exit_status: int = 0, **kw) -> dict:
    logs = tmp_path / "out" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    o = opts(tmp_path, **kw)
    made = make_house(tmp_path / "wh") if not (tmp_path / "wh").exists() else tmp_path / "wh"
    image = {"tag": "t", "image_id": "sha256:1", "base": {"tag": "b", "image_id": "sha256:2"}, "made": False,
             "seconds": 1.0, "debian_release": None}  # fmt: skip
    container = {"name": "c", "network": "none", "shm_size": "1g", "env": {"QEMU_CPU": "rv64"},
                 "timeout_per_step": 1800.0, "log": "logs/container.log", "timed_out": False,
                 "exit_status": exit_status, "seconds": 9.0,
                 "load_average": {"min": 1.0, "mean": 2.0, "max": 3.0, "samples": 4, "cpus": 2}}  # fmt: skip
    import datetime as dt

    return servecheck.record(
        o,
        wh.read(made),
        get_profile("rv64gc"),
        image=image,
        container=container,
        inside=fake_inside(status, logs),
        started=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
        seconds=12.0,
    )


ALL_PASS = {
    "install": "passed",
    "pip-check": "passed",
    "import": "passed",
    "generate": "passed",
    "generate-eager": "passed",
    "serve": "passed",
    "serve-eager": "passed",
    "guided": "passed",
}


def test_result_json_of_a_passing_check_has_every_step_the_figures_and_the_load(tmp_path):
    doc = make_record(tmp_path, ALL_PASS)
    validate(doc, manifest.schema("serve-check"))
    assert doc["passed"] is True and [s["name"] for s in doc["steps"]] == list(servecheck.STEPS)
    gen = doc["steps"][3]
    assert gen["log"] == "logs/generate.log" and gen["excerpt"][-1] == "line 29" and len(gen["excerpt"]) == 20
    assert doc["figures"]["ttft_seconds"] == 0.3 and doc["figures"]["tokens_per_second"] == 16.0
    assert doc["figures"]["decode_tokens_per_second"] == 35.0 and doc["figures"]["install_seconds"] == 1.5
    assert (
        doc["figures"]["eager"]["tokens_per_second"] == 10.0
        and doc["figures"]["eager"]["load_seconds"] == 150
    )
    assert doc["inductor"] is None  # this wheelhouse ships no inductor settings
    assert doc["qemu_cpu"] == get_profile("rv64gc").qemu_cpu and doc["load_average"]["mean"] == 2.0
    assert doc["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1" and doc["container"]["network"] == "none"


def test_a_failed_step_fails_the_check_with_exit_10_and_its_last_lines(tmp_path):
    doc = make_record(
        tmp_path, {"install": "passed", "pip-check": "passed", "import": "failed"}, exit_status=1
    )
    validate(doc, manifest.schema("serve-check"))
    assert doc["passed"] is False
    assert [s["status"] for s in doc["steps"]] == ["passed", "passed", "failed", *["not-run"] * 5, "skipped"]
    err = servecheck.failure(doc, tmp_path / "out")
    text = err.render()
    assert err.exit_code == ExitCode.CHECK_FAILED == 10
    assert (
        "import: failed (exit status 1)" in text
        and "line 29" in text
        and "not run: generate, generate-eager, serve, serve-eager, guided" in text
    )


def test_a_container_that_died_before_its_steps_is_a_failed_check(tmp_path):
    doc = make_record(tmp_path, {"install": "passed"}, exit_status=137)
    assert doc["passed"] is False and doc["steps"][1]["status"] == "not-run"
    assert (
        "the container ended before its steps did (exit status 137)"
        in servecheck.failure(doc, tmp_path).render()
    )


def test_serve_skipped_still_passes(tmp_path):
    skipped = {"serve": "skipped", "serve-eager": "skipped", "guided": "skipped"}
    doc = make_record(tmp_path, {**ALL_PASS, **skipped}, skip_serve=True)
    assert doc["passed"] is True and doc["steps"][5] == {"name": "serve", "status": "skipped"}
    assert doc["steps"][6] == {"name": "serve-eager", "status": "skipped"}
    assert doc["steps"][7] == {"name": "guided", "status": "skipped"}
    validate(doc, manifest.schema("serve-check"))
    # a container that never reached them: skipped too, with --skip-serve
    doc = make_record(tmp_path, {k: v for k, v in ALL_PASS.items() if k not in skipped}, skip_serve=True)
    assert [s["status"] for s in doc["steps"][5:8]] == ["skipped"] * 3 and doc["passed"] is True


def test_generate_skipped_still_passes_and_the_serve_steps_are_not_left_out_with_it(tmp_path):
    gen = {"generate": "skipped", "generate-eager": "skipped"}
    doc = make_record(tmp_path, {**ALL_PASS, **gen}, skip_generate=True)
    assert doc["passed"] is True
    assert doc["steps"][3:5] == [{"name": n, "status": "skipped"} for n in ("generate", "generate-eager")]
    assert doc["steps"][5]["status"] == "passed"  # serve
    validate(doc, manifest.schema("serve-check"))
    # a container that never reached them: skipped with --skip-generate, not run without it
    short = {k: v for k, v in ALL_PASS.items() if k in ("install", "pip-check", "import")}
    doc = make_record(tmp_path, short, skip_generate=True, skip_serve=True)
    assert [s["status"] for s in doc["steps"][3:8]] == ["skipped"] * 5 and doc["passed"] is True
    doc = make_record(tmp_path, short, skip_serve=True)
    assert doc["steps"][3]["status"] == "not-run" and doc["passed"] is False


def test_run_writes_result_json_whole_and_drops_an_earlier_record(tmp_path, monkeypatch):
    make_house(tmp_path / "wh")
    out = tmp_path / "out"
    outdir.claim(out, outdir.Kind.SERVE_CHECK)
    (out / "logs").mkdir(parents=True)
    manifest.write(out / "result.json", {"kind": servecheck.KIND, "passed": True})
    (out / "logs" / "serve.log").write_text("an earlier check's\n")
    made = serveimage.ServeImage(
        tag="t",
        image_id="sha256:1",
        base_tag="b",
        base_id="sha256:2",
        made=True,
        seconds=3,
        debian_release=None,
    )
    monkeypatch.setattr(servecheck, "check_engine", lambda: None)
    monkeypatch.setattr(serveimage, "ensure", lambda *a, **k: made)
    env = serveenv.ServeEnv(status="found", tag="e", image_id="sha256:env", wheels=1, left=("v.whl",))
    monkeypatch.setattr(serveenv, "ensure", lambda *a, **k: env)

    def container(o, profile, image_id, logs, log, tests=None, prepared=False):
        assert image_id == "sha256:env" and prepared  # from the environment image, its venv made
        assert not (out / "result.json").exists() and not (logs / "serve.log").exists()
        (logs / "steps.json").write_text(json.dumps(fake_inside({"install": "failed"}, logs)))
        return {"name": "c", "network": "none", "shm_size": "1g", "env": {}, "timeout_per_step": 5.0,
                "log": "logs/container.log", "timed_out": False, "exit_status": 1, "seconds": 1.0,
                "load_average": None}  # fmt: skip

    monkeypatch.setattr(servecheck, "run_container", container)
    doc = servecheck.run(opts(tmp_path))
    assert json.loads((out / "result.json").read_text()) == doc
    validate(doc, manifest.schema("serve-check"))
    assert [s["status"] for s in doc["steps"]] == ["failed"] + ["not-run"] * 7 + ["skipped"]


# -------------------------------------------------------------------------------------------- the image
PINS = [debarchive.DebPin(name="python3-torch", version="2.14.1+dfsg-1", sha256="a" * 64)]


def test_the_image_installs_each_package_at_its_version_on_the_scalar_cpu():
    text = serveimage.dockerfile("rvport/base:x", PINS).text
    assert "FROM rvport/base:x" in text and "python3-torch=2.14.1+dfsg-1" in text
    assert f"QEMU_CPU={get_profile('rv64gc').qemu_cpu}" in text
    assert serveimage.differences(PINS, {"python3-torch": "2.14.1+dfsg-1"}) == []
    assert serveimage.differences(PINS, {}) == ["python3-torch=2.14.1+dfsg-1 (the image has none)"]


def test_an_image_found_is_not_made_again_and_one_with_other_versions_is_refused(tmp_path, monkeypatch):
    from rvport.engine import buildx, debpins, images

    class Base:
        tag, image_id = "rvport/base:sid", "sha256:base"

    class FakeBases:
        def get(self, spec, platform, on_line=None):
            return Base()

    def no_index(*a, **k):
        raise AssertionError("the signed index is read only when the image is made")

    monkeypatch.setattr(debpins, "signed_index", no_index)
    monkeypatch.setattr(buildx, "image_info", lambda ref: {"id": "sha256:img", "labels": {}})
    installed = {"python3-torch": "2.14.1+dfsg-1"}
    monkeypatch.setattr(images, "read_packages", lambda tag, path: installed)
    kw = dict(base_spec="debian-sid", suite="sid", bases=FakeBases(), fetch=fetch_options(cache_dir=tmp_path),
              log_path=tmp_path / "image.log")  # fmt: skip
    got = serveimage.ensure("vllm", PINS, **kw)
    assert (
        got.made is False
        and got.image_id == "sha256:img"
        and got.tag.startswith("rvport/toolchain:vllm-serve-")
    )
    assert serveimage.ensure("vllm", PINS, **kw).tag == got.tag  # keyed by the base and the list
    other = [debarchive.DebPin(name="python3-torch", version="2.14.2", sha256="a" * 64)]
    installed["python3-torch"] = "2.14.2"
    assert serveimage.ensure("vllm", other, **kw).tag != got.tag
    installed["python3-torch"] = "2.14.0"
    with pytest.raises(BuildFailed, match="python3-torch=2.14.1"):
        serveimage.ensure("vllm", PINS, **kw)


# ------------------------------------------------------------------------------- inside the container
def test_pip_check_lines_are_judged_only_when_they_name_a_wheelhouse_distribution():
    ours = inside.wheelhouse_names(
        wh.requirements_text([("vllm", "vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl", "0" * 64)])
    )
    assert ours == {"vllm"}
    lines = [
        "sympy 1.14.0 has requirement mpmath<1.4,>=1.1.0, but you have mpmath 1.4.1.",
        "python-dateutil 3.0.0 requires tzdata, which is not installed.",
        "vllm 0.33.0+cpu requires xgrammar, which is not installed.",
        "torch 2.14.1 has requirement vllm<0.1, but you have vllm 0.33.0+cpu.",
        "something pip has never said",
        "No broken requirements found.",
        "[notice] A new release of pip is available",
    ]
    judged, other = inside.judge(lines, ours)
    assert other == [*lines[:2], lines[-1]]
    assert judged == lines[2:5]
    assert inside.judge(["A-B 1 is not supported on this platform"], {"a-b"}) == (
        ["A-B 1 is not supported on this platform"],
        [],
    )


def test_which_steps_run_after_a_failure():
    assert inside.next_step({}, False) == ("install", "run")
    assert inside.next_step({"install": "failed"}, False) == ("pip-check", "not-run")
    after_import = {"install": "passed", "pip-check": "failed", "import": "failed"}
    assert inside.next_step(after_import, False) == ("generate", "not-run")
    ok = {"install": "passed", "pip-check": "passed", "import": "passed", "generate": "failed"}
    # the eager run is measured although the default configuration failed, and serve after both
    assert inside.next_step(ok, False) == ("generate-eager", "run")
    ok["generate-eager"] = "passed"
    assert inside.next_step(ok, False) == ("serve", "run")
    assert inside.next_step(ok, True) == ("serve", "skipped")
    assert inside.next_step({**ok, "serve": "skipped"}, True) == ("serve-eager", "skipped")
    assert inside.next_step({**ok, "serve": "failed"}, False) == ("serve-eager", "run")
    served = {**ok, "serve": "passed", "serve-eager": "passed"}
    # guided after both serve steps, whatever they did; left out with them; not run after a failed import
    assert inside.next_step(served, False) == ("guided", "run")
    assert inside.next_step({**ok, "serve": "failed", "serve-eager": "failed"}, False) == ("guided", "run")
    assert inside.next_step({**ok, "serve": "skipped", "serve-eager": "skipped"}, True) == (
        "guided",
        "skipped",
    )
    failed_import = {"install": "passed", "pip-check": "passed", "import": "failed"}
    failed_import |= {n: "not-run" for n in ("generate", "generate-eager", "serve", "serve-eager")}
    assert inside.next_step(failed_import, False) == ("guided", "not-run")
    assert inside.next_step({**served, "guided": "failed"}, False) == ("tests", "skipped")  # no plan
    assert inside.next_step({**served, "guided": "failed"}, False, tests=True) == ("tests", "run")
    assert inside.next_step({**failed_import, "guided": "not-run"}, False, True) == ("tests", "not-run")
    assert inside.next_step({**served, "guided": "passed", "tests": "failed"}, False, True) is None
    # --skip-generate leaves out both generate steps, and only them
    imported = {"install": "passed", "pip-check": "passed", "import": "passed"}
    assert inside.next_step(imported, False, True, skip_generate=True) == ("generate", "skipped")
    gen_skipped = {**imported, "generate": "skipped", "generate-eager": "skipped"}
    assert inside.next_step({**imported, "generate": "skipped"}, False, True, True) == (
        "generate-eager",
        "skipped",
    )
    assert inside.next_step(gen_skipped, False, True, True) == ("serve", "run")
    both = {**gen_skipped, "serve": "skipped", "serve-eager": "skipped", "guided": "skipped"}
    assert inside.next_step(both, True, True, True) == ("tests", "run")
    assert inside.next_step({**failed_import, "guided": "not-run"}, False, True, True) == ("tests", "not-run")


def test_the_default_configuration_steps_source_the_wheelhouse_settings_and_cache_in_out(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    plain = inside.step_commands(wh)
    assert plain["generate"][0][1:3] == [
        str(Path(inside.__file__).resolve()),
        "generate",
    ]  # nothing to source
    (wh / inside.ENV_FILE).write_text("export TORCHINDUCTOR_CPP_MARCH='rv64gc -mabi=lp64d'\n")
    cmds = inside.step_commands(wh)
    for name in ("generate", "serve"):
        (argv,) = cmds[name]
        assert argv[:5] == ["sh", "-c", '. "$1" && shift && exec "$@"', "sh", str(wh / inside.ENV_FILE)]
        assert "--eager" not in argv
        (eager,) = cmds[f"{name}-eager"]
        assert eager[-1] == "--eager" and eager[0] != "sh"
    out = tmp_path / "out"
    assert inside.step_env("generate", out)["XDG_CACHE_HOME"] == str(out / inside.CACHE)
    assert "XDG_CACHE_HOME" not in inside.step_env("generate-eager", out)
    assert inside.step_env("install", out) == {}
    # the sourced file's settings reach the program, as a user's shell gives them
    (argv,) = cmds["generate"]
    probe = [sys.executable, "-c", "import os; print(os.environ['TORCHINDUCTOR_CPP_MARCH'])"]
    got = subprocess.run([*argv[:5], *probe], capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "rv64gc -mabi=lp64d"


def test_the_pip_install_is_the_documented_one_offline_hashed_and_resolved():
    args = inside.pip_install(Path("/wheelhouse"))
    assert args[:2] == ["pip", "install"] and {"--no-index", "--require-hashes"} <= set(args)
    assert "--no-deps" not in args  # pip's resolver runs: the lock meets what Debian's packages ask
    assert args[args.index("-r") + 1] == "/wheelhouse/requirements.txt"


def running(pid: int) -> bool:
    """Whether the process runs (a zombie, ended but not collected by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_step_is_timed_its_log_kept_and_a_hang_is_stopped_with_its_whole_group(tmp_path):
    py = sys.executable
    ok = inside.run_step(tmp_path, "a", [[py, "-c", "print('{\"x\": 1}')"]], 60)
    assert ok["status"] == "passed" and ok["exit_status"] == 0 and ok["log"] == "a.log"
    assert inside.last_json((tmp_path / "a.log").read_text()) == {"x": 1}
    bad = inside.run_step(tmp_path, "b", [[py, "-c", "raise SystemExit(3)"], [py, "-c", "print(1)"]], 60)
    assert (bad["status"], bad["exit_status"]) == ("failed", 3) and "print(1)" not in (
        tmp_path / "b.log"
    ).read_text()
    # a program that prints its result, starts a child and never exits (vLLM's engine core kept it alive)
    pidfile = tmp_path / "child.pid"
    hang = (
        "import subprocess, sys, time; "
        f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(pidfile)!r}, 'w').write(str(c.pid)); "
        "print('{\"tokens\": 8}', flush=True); time.sleep(600)"
    )
    t0 = time.monotonic()
    slow = inside.run_step(tmp_path, "c", [[py, "-c", hang]], 3, poll=0.2)
    assert time.monotonic() - t0 < 30 and slow["status"] == "failed" and slow["timed_out"] is True
    assert inside.last_json((tmp_path / "c.log").read_text()) == {"tokens": 8}
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not running(child)
    # with an exit grace: stopped soon after its result, not at the timeout
    t0 = time.monotonic()
    hung = inside.run_step(tmp_path, "e", [[py, "-c", hang]], 600, exit_grace=1, poll=0.2)
    assert time.monotonic() - t0 < 60 and hung["status"] == "failed" and hung["hung_after_result"] is True
    assert hung["timed_out"] is False and "did not exit in 1 s" in (tmp_path / "e.log").read_text()
    # a program that exits but leaves a process of its group running: stopped, and said
    left = inside.run_step(
        tmp_path, "d", [[py, "-c", "import subprocess, sys; subprocess.Popen(['sleep', '600'])"]], 60
    )
    assert left["status"] == "passed" and left["left_processes"] is True


SYMPY = "sympy 1.14.0 has requirement mpmath<1.4,>=1.1.0, but you have mpmath 1.4.1."


def test_the_steps_record_as_the_container_writes_it(tmp_path):
    wheels = tmp_path / "wheelhouse"
    wheels.mkdir()
    (wheels / "requirements.txt").write_text(
        wh.requirements_text([("vllm", "vllm-1-py3-none-any.whl", "0" * 64)])
    )
    py = sys.executable
    said = {
        "install": "print('installed')",
        "pip-check": f"print({SYMPY!r}); raise SystemExit(1)",
        "import": "print('{\"import_seconds\": 9.5}')",
        "generate": "print('{\"tokens\": 7}')",
        "generate-eager": "import os; assert 'XDG_CACHE_HOME' not in os.environ; print('{\"tokens\": 8}')",
        "serve": "import os; assert os.environ['XDG_CACHE_HOME'].endswith('/cache'); "
        'print(\'{"text": " Paris", "tokens": 8}\')',
        "serve-eager": 'print(\'{"text": " Paris", "tokens": 8}\')',
    }
    commands = {name: [[py, "-c", code]] for name, code in said.items()}
    # guided: one program a backend, each run although the one before failed; outlines prints nothing
    guided = {
        b: {"guided": b, "requests": {k: {"passed": True} for k in inside.KINDS}} for b in inside.BACKENDS
    }
    guided["guidance"]["requests"]["regex"] = {"passed": False, "why": "does not fully match the regex"}
    commands["guided"] = [
        [py, "-c", f"print({json.dumps(guided['xgrammar'])!r})"],
        [py, "-c", f"print({json.dumps(guided['guidance'])!r}); raise SystemExit(1)"],
        [py, "-c", "raise SystemExit(3)"],
    ]
    args = inside.argparse.Namespace(
        out=str(tmp_path),
        wheelhouse=str(wheels),
        timeout=60.0,
        skip_serve=False,
        skip_generate=False,
        tests=None,
    )
    assert inside.run(args, commands=commands) == 1
    doc = json.loads((tmp_path / "steps.json").read_text())
    by = {s["name"]: s for s in doc["steps"]}
    assert by["pip-check"]["status"] == "passed" and by["pip-check"]["not_judged"][0].startswith("sympy")
    assert by["import"]["result"] == {"import_seconds": 9.5}
    assert by["generate"]["status"] == "failed"  # 7 tokens, not 8
    assert by["serve"]["status"] == "passed" and doc["env"] == inside.RUN_ENV
    assert by["generate-eager"]["status"] == "passed" and by["serve-eager"]["status"] == "passed"
    g = by["guided"]
    assert g["status"] == "failed" and [x["exit_status"] for x in g["programs"]] == [0, 1, 3]
    assert g["exit_status"] == 1 and g["result"]["backends"]["xgrammar"]["passed"] is True
    assert g["failures"] == [
        "guidance regex: does not fully match the regex",
        "outlines: exited with status 3 before it printed a result",
    ]


def test_the_tiny_model_and_the_figures():
    assert (inside.TINY["hidden_size"], inside.TINY["head_dim"], inside.TINY["num_attention_heads"]) == (
        64,
        32,
        4,
    )
    assert inside.generate_passed({"tokens": 8}) and not inside.generate_passed({"tokens": 1})
    got = inside.serve_figures(
        {"choices": [{"text": " a"}], "usage": {"completion_tokens": 8, "prompt_tokens": 6}}, 2
    )
    assert got == {
        "text": " a",
        "tokens": 8,
        "prompt_tokens": 6,
        "request_seconds": 2,
        "tokens_per_second": 4.0,
    }
    assert inside.serve_passed(got) and not inside.serve_passed({**got, "text": ""})
    model = Path(os.environ.get("TMPDIR", "/tmp")) / f"rvport-tiny-{os.getpid()}"
    inside.save_tiny(model)
    config = json.loads((model / "config.json").read_text())
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"]
    (model / "config.json").unlink()
    model.rmdir()


def test_the_summary_lines_give_both_modes_and_inductors_verdict(tmp_path):
    from rvport.cli.closure_verbs import figures_lines

    doc = make_record(tmp_path, ALL_PASS)
    doc["inductor"] = {"objects": 4, "passed": True}
    lines = figures_lines(doc)
    assert lines[0].startswith("generate: time to first token 0.3 s, 16.0 tokens/s")
    assert any(x.startswith("generate-eager: time to first token 0.4 s, 10.0 tokens/s") for x in lines)
    assert "inductor: 4 shared object(s) compiled, verify for rv64gc: pass" in lines


def test_the_tests_steps_compiled_objects_are_judged_when_no_generate_or_serve_ran(tmp_path, monkeypatch):
    """A tests-only check (--skip-generate --skip-serve) judges what vLLM's own torch.compile cases left in
    the cache; an empty cache after the tests alone is no failure (the selection may compile nothing)."""

    class Settings:
        def to_json(self):
            return {"march": "rv64gc"}

    class House:
        def inductor(self):
            return Settings()

    found = {"objects": 2, "truncated": False, "arch": ["rv64i2p1"], "failed": [], "passed": True}
    monkeypatch.setattr(servecheck.inductor, "verify_cache", lambda cache, profile: dict(found))
    profile = get_profile("rv64gc")
    tests_only = {"steps": [{"name": "generate", "status": "skipped"}, {"name": "tests", "status": "passed"}]}
    assert servecheck.inductor_record(House(), profile, tmp_path, tests_only)["judged"] is True
    found.update(objects=0, passed=False)
    assert servecheck.inductor_record(House(), profile, tmp_path, tests_only)["judged"] is False
    generated = {"steps": [{"name": "generate", "status": "passed"}]}
    assert servecheck.inductor_record(House(), profile, tmp_path, generated)["judged"] is True
