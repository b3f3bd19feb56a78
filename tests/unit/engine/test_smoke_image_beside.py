"""The smoke image is made beside the stage's build (issue 24): a task of its own in the side-by-side pool
(rvport/engine/prepare.py), so the build starts once the build images are made; the smoke test takes that
image (waiting for it when it is not made yet), never makes it a second time; a smoke image that fails fails
the stage at the smoke step with its own error; --no-smoke makes none; an interrupt while the stage waits for
it stops it. `rvport build` runs whole here (Runner.run) against a fake engine at Docker's door (buildx)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import threading
import time

import pytest

from rvport import manifest, proc
from rvport.catalogue.recipes import load_catalogue
from rvport.engine import buildx, modes, prepare
from rvport.engine.runner import BuildOptions, Runner
from rvport.errors import BuildFailed, ExitCode
from tests.fixtures.schemas import validate
from tests.unit.engine.test_bake import RECIPE, _plan, _tarball, setup  # noqa: F401
from tests.unit.engine.test_prepare import FOUND, FakeEngine, Rec

SMOKED = RECIPE.replace(
    "outputs:", "smoke:\n  debian: [python3-pip]\n  script: python3 -c 'import tinysmoke'\noutputs:"
)


def _plan_smoked(setup, tmp_path):
    """tinysmoke: a toolchain image (python3-setuptools) to build in, a smoke image (python3-pip) to test
    in."""
    _cat, fopts, _out = setup
    fname, sha = _tarball("tinysmoke-1.0", {"setup.py": "print('hi')\n"}, fopts.mirror)
    recipes_dir = tmp_path / "smoked"
    recipes_dir.mkdir()
    (recipes_dir / "tinysmoke.yaml").write_text(
        SMOKED.format(name="tinysmoke", pkgs="python3-setuptools", depends="", fname=fname, sha=sha)
    )
    return _plan(load_catalogue([recipes_dir]), "tinysmoke")


class Engine(FakeEngine):
    """FakeEngine, and what happened in which order: the build images (`toolchain`), the smoke image (made
    on a worker thread; `smoke_image` runs the caller's hook first), the stage's build and its smoke test
    (each writes what the runner reads afterwards). An image's id is its tag's digest, whichever of the two
    images side by side is made first."""

    def __init__(self, smoke_image=None):
        super().__init__()
        self.events: list[str] = []
        self.smoke_tests: list[str] = []  # the FROM lines of the smoke tests
        self.built = threading.Event()  # the stage's build started
        self.smoke_image = smoke_image or (lambda spec, log_path: None)

    def build(self, spec, *, log_path, on_line=None, on_phase=None):
        if spec.tag and "-smoke-" in spec.tag:
            self.smoke_image(spec, log_path)
            self.events.append("smoke image made")
        elif spec.tag:
            self.events.append("toolchain image made")
        elif (spec.context / "rvport-smoke").exists():
            self.events.append("smoke test")
            text = spec.dockerfile.read_text()
            self.smoke_tests += [ln for ln in text.splitlines() if ln.startswith("FROM ")]
            spec.output_dir.mkdir(parents=True, exist_ok=True)
            (spec.output_dir / "rvport-smoke.log").write_text("ok\n")
            (spec.output_dir / "rvport-smoke.status").write_text("0\n")
            return
        else:
            self.events.append("stage build")
            self.built.set()
            spec.output_dir.mkdir(parents=True, exist_ok=True)
            (spec.output_dir / "tinysmoke-1.0-py3-none-any.whl").write_text("a wheel")
            return
        super().build(spec, log_path=log_path, on_line=on_line)
        self.images[spec.tag] = "sha256:" + hashlib.sha256(spec.tag.encode()).hexdigest()


@pytest.fixture
def calls(monkeypatch):
    """Every modes.smoke_image call, with the thread it ran on."""
    seen: list[str] = []
    real = modes.smoke_image

    def counted(env, base):
        seen.append(threading.current_thread().name)
        return real(env, base)

    monkeypatch.setattr(modes, "smoke_image", counted)
    return seen


def _fake(monkeypatch, engine):
    monkeypatch.setattr(buildx, "image_info", engine.image_info)
    monkeypatch.setattr(buildx, "build", engine.build)
    monkeypatch.setattr(buildx, "run_container", engine.run_container)
    monkeypatch.setattr(buildx, "builder_info", lambda _name: None)
    return engine


def _runner(plan, setup, rep=None, **opts):
    _cat, fopts, out = setup
    run = Runner(plan, BuildOptions(output=out, fetch=fopts, verify=False, **opts), rep or Rec())
    run.bases.update(FOUND)  # the bases are in the engine already
    return run


WAITING = ("tinysmoke", "waiting for its smoke image")


def _until(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def _result(out):
    doc = json.loads((out / "result.json").read_text())
    validate(doc, manifest.schema("result"))
    return doc


def test_the_build_starts_before_the_smoke_image_is_made_and_the_smoke_test_takes_that_image(
    setup, tmp_path, monkeypatch, calls
):
    plan = _plan_smoked(setup, tmp_path)

    def slow(spec, log_path):  # made only once the stage's build has started: the build does not wait for it
        assert engine.built.wait(10), "the stage's build waited for its smoke image"
        assert _until(lambda: WAITING in rep.steps), "the smoke test did not wait for its image"
        time.sleep(0.3)  # ... the smoke test waits meanwhile
        log_path.write_text("Setting up python3-pip\n")

    engine = _fake(monkeypatch, Engine(slow))
    rep = Rec()
    run = _runner(plan, setup, rep)
    doc = run.run()
    assert engine.events == ["toolchain image made", "stage build", "smoke image made", "smoke test"]
    assert len(calls) == 1 and calls[0].startswith("rvport-side")  # once, by the pool's smoke task
    (smoke_tag,) = [s.tag for s in engine.builds if "-smoke-" in s.tag]
    assert engine.smoke_tests == [f"FROM {smoke_tag} AS smoke", "FROM scratch AS export"]  # the one made
    assert ("tinysmoke images, smoke", "ok") in run.rep.ends  # a row of its own
    (st,) = _result(setup[2])["stages"]
    assert st["status"] == "ok" and st["smoke"]["status"] == "passed"
    # each wait counted once: for the build images, for the smoke image (the 0.3 s), the smoke test itself
    assert {"images", "build", "smoke_image", "smoke"} <= set(st["timings"])
    assert st["timings"]["smoke_image"] >= 0.25
    assert set(doc["images_ahead"]["stages"]) == set(doc["images_ahead"]["smoke"]) == {"tinysmoke"}
    assert doc["images_ahead"]["smoke"]["tinysmoke"] >= 0.25
    # the smoke image's log is its own while the stage builds, then added to the stage's where it is used
    logs = setup[2] / "logs"
    assert (logs / "tinysmoke.smoke-image.log").read_text() == "Setting up python3-pip\n"
    log = (logs / "tinysmoke.log").read_text()
    assert "Setting up python3-pip" in log.split("--- smoke image for tinysmoke==1.0")[1]


def test_a_smoke_image_that_fails_fails_the_stage_at_its_smoke_step_with_its_error(
    setup, tmp_path, monkeypatch, calls
):
    plan = _plan_smoked(setup, tmp_path)
    failed = BuildFailed("docker buildx build failed (exit status 100); last lines: no python3-pip")

    def broken(spec, log_path):
        assert engine.built.wait(10)
        log_path.write_text("E: Unable to locate package python3-pip\n")
        raise failed

    engine = _fake(monkeypatch, Engine(broken))
    run = _runner(plan, setup)
    with pytest.raises(BuildFailed) as e:
        run.run()
    assert e.value is failed and e.value.exit_code == ExitCode.BUILD_FAILED  # its own error, as before
    assert engine.events == ["toolchain image made", "stage build"]  # built, never smoke-tested
    doc = _result(setup[2])
    (st,) = doc["stages"]
    assert (doc["status"], doc["failing_stage"], st["status"]) == ("failed", "tinysmoke", "failed")
    assert st["error"] == failed.render() and st["smoke"] is None
    assert "build" in st["timings"] and "smoke_image" in st["timings"] and "smoke" not in st["timings"]
    # the log tail is the smoke image's: its log was added to the stage's when the stage took it
    assert "E: Unable to locate package python3-pip" in st["log_tail"]
    assert not list((setup[1].cache.root / "artifacts").glob("*"))  # nothing kept
    assert len(calls) == 1


def test_a_cached_stage_needs_no_smoke_image_so_its_failure_fails_nothing(setup, tmp_path, monkeypatch):
    plan = _plan_smoked(setup, tmp_path)
    _fake(monkeypatch, Engine())
    assert _runner(plan, setup).run()["stages"][0]["status"] == "ok"

    def broken(spec, log_path):
        raise BuildFailed("no python3-pip")

    engine = _fake(monkeypatch, Engine(broken))  # the same toolchain image id: the artifacts are cached
    run = _runner(plan, setup)
    doc = run.run()  # waits for the smoke image (as prepare makes it), then ends
    (st,) = doc["stages"]
    assert doc["status"] == "ok" and st["status"] == "cached" and st["smoke"]["status"] == "passed"
    assert engine.events == ["toolchain image made"] and "smoke_image" not in st["timings"]
    assert ("tinysmoke images, smoke", "failed") in run.rep.ends  # said, on its own row


def test_no_smoke_makes_no_smoke_image(setup, tmp_path, monkeypatch, calls):
    plan = _plan_smoked(setup, tmp_path)
    engine = _fake(monkeypatch, Engine())
    doc = _runner(plan, setup, smoke=False).run()
    assert engine.events == ["toolchain image made", "stage build"]
    assert calls == [] and doc["images_ahead"]["smoke"] == {}
    assert "smoke_image" not in doc["stages"][0]["timings"]
    assert not (setup[2] / "logs" / "tinysmoke.smoke-image.log").exists()


def test_ctrl_c_while_the_stage_waits_for_its_smoke_image_stops_it(setup, tmp_path, monkeypatch, sigint):
    plan = _plan_smoked(setup, tmp_path)
    cleaned = []

    def endless(spec, log_path):  # Ctrl-C once the stage waits for it
        assert engine.built.wait(10) and _until(lambda: WAITING in rep.steps)
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            proc.stream(["sleep", "60"], on_line=lambda _l: None, log_path=log_path)
            raise AssertionError("not stopped")
        finally:
            cleaned.append(spec.tag)

    engine = _fake(monkeypatch, Engine(endless))
    rep = Rec()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _runner(plan, setup, rep).run()
    assert time.monotonic() - t0 < 30
    assert len(cleaned) == 1  # the smoke task's program was stopped and its cleanup ran first
    assert engine.events == ["toolchain image made", "stage build"]
    doc = _result(setup[2])
    assert doc["status"] == "interrupted" and doc["stages"][0]["status"] == "interrupted"
    assert proc.stream(["true"], on_line=lambda _l: None) == 0  # programs start again afterwards


def test_prepare_makes_the_smoke_image_in_a_task_of_its_own_and_waits_for_it(setup, tmp_path, monkeypatch):
    plan = _plan_smoked(setup, tmp_path)
    failed = BuildFailed("no python3-pip")

    def broken(spec, log_path):
        raise failed

    _fake(monkeypatch, Engine(broken))
    _cat, fopts, out = setup
    rep = Rec()
    prep = prepare.Preparer(plan, BuildOptions(output=out, fetch=fopts), rep, bases=dict(FOUND))
    assert prep.make() == {"tinysmoke": failed}  # make waits for the smoke task: its error is the stage's
    assert sorted(rep.ends) == [("tinysmoke", "ok"), ("tinysmoke, smoke", "failed")]
    assert prep.smoke_log("tinysmoke") == out / "logs" / "prepare-tinysmoke.smoke-image.log"
    with pytest.raises(BuildFailed, match="no python3-pip"):
        prepare.Preparer(plan, BuildOptions(output=out, fetch=fopts), Rec(), bases=dict(FOUND)).run()


def test_a_runtime_check_without_a_smoke_test_still_gets_its_client_image(setup, tmp_path):
    from tests.unit.engine.test_check import stage

    _cat, fopts, out = setup
    opts = BuildOptions(output=out, fetch=fopts)
    checked, unchecked = stage(tmp_path / "a"), stage(tmp_path / "b", check_text="")
    assert not checked.recipe.smoke and checked.runtime.spec.check is not None
    plan = dataclasses.replace(_plan_smoked(setup, tmp_path), stages=(checked,))
    on, off = prepare.Preparer(plan, opts, Rec()), prepare.Preparer(plan, opts, Rec(), smoke=False)
    assert on.smokes(checked) and not on.smokes(unchecked) and not off.smokes(checked)
