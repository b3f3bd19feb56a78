"""`rvport prepare` without Docker: the images it makes are the runner's (made by modes.setup in a StageEnv
with the runner's LoadedToolchains: same Dockerfiles, same tags), made once, and an image already in the
engine is not made again. Docker is replaced at its door (buildx); everything between runs as it is."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.engine import buildx, modes, prepare, render, stage
from rvport.engine.events import Phase
from rvport.engine.modes import accelerated, cross
from rvport.engine.runner import BuildOptions
from rvport.plan.planner import Mode, Request, make_plan
from tests.fixtures.schemas import validate
from tests.unit.engine.test_bake import (  # noqa: F401
    BASE,
    GCC,
    RECIPE,
    RUNTIME,
    STATICLIB,
    X86,
    XBASE,
    XGCC,
    _plan,
    _tarball,
    _with_runtime,
    setup,
)

# the bases are in the engine already (`rvport prepare` lists them as found, not made)
FOUND = {
    "debian-trixie@linux/riscv64": dataclasses.replace(BASE, reused=True),
    "debian-trixie-xtc@linux/amd64": dataclasses.replace(XBASE, reused=True),
}


class FakeEngine:
    """buildx.image_info / buildx.build / buildx.run_container: images appear when built; builds are recorded;
    a container prints nothing (an image's package list reads as empty)."""

    def __init__(self, present=()):
        self.images = {t: f"sha256:{i:064d}" for i, t in enumerate(present, 1)}
        self.labels = {}  # by tag
        self.builds = []

    def image_info(self, ref):
        return {"id": self.images[ref], "labels": self.labels.get(ref, {})} if ref in self.images else None

    def build(self, spec, *, log_path, on_line=None, on_phase=None):
        self.builds.append(spec)
        self.images[spec.tag] = f"sha256:{len(self.images) + 100:064d}"
        if on_line:
            on_line("#1 [1/2] FROM base")

    def run_container(self, image, cmd, **kw):
        return subprocess.CompletedProcess(["docker", "run", image, *cmd], 0, stdout="", stderr="")


class Rec:
    """The build's Progress: what the user is told."""

    def __init__(self):
        self.steps, self.lines, self.phases, self.ends = [], [], [], []

    def begin(self, name, what):
        self.steps.append((name, what))

    def step(self, name, text):
        self.steps.append((name, text))

    def line(self, name, text):
        self.lines.append((name, text))

    def phase(self, name, event):
        self.phases.append((name, event))

    def end(self, name, status):
        self.ends.append((name, status))


@pytest.fixture
def engine(monkeypatch):
    e = FakeEngine()
    monkeypatch.setattr(buildx, "image_info", e.image_info)
    monkeypatch.setattr(buildx, "build", e.build)
    monkeypatch.setattr(buildx, "run_container", e.run_container)
    return e


def _preparer(plan, setup, rep, smoke=True, bases=None):
    _cat, fopts, out = setup
    opts = BuildOptions(output=out, fetch=fopts)
    return prepare.Preparer(plan, opts, rep, smoke=smoke, bases=dict(FOUND if bases is None else bases))


def test_prepare_makes_the_runners_toolchain_image_once(setup, engine):
    cat, fopts, out = setup
    plan = _plan(cat, "tinylib")
    rep = Rec()
    made = _preparer(plan, setup, rep).run()
    st = plan.stage("tinylib")
    rendered = render.toolchain_dockerfile(
        BASE.tag, get_profile("rv64gc").qemu_cpu, st.recipe.toolchain.debian
    )
    tag, key = stage.toolchain_tag("tinylib", "build", BASE.image_id, rendered)
    assert [(i.what, i.stage, i.tag, i.made) for i in made] == [
        ("base", None, BASE.tag, False),
        ("build", "tinylib", tag, True),
    ]
    (spec,) = engine.builds
    assert spec.tag == tag and spec.load and spec.platform == "linux/riscv64"
    assert ("org.rvport.key", key) in spec.labels
    assert ("tinylib", f"build image {tag}") in rep.steps and ("tinylib", "#1 [1/2] FROM base") in rep.lines
    assert rep.ends == [("tinylib", "ok")]
    assert (out / "logs" / "prepare-tinylib.log").parent.is_dir()
    assert not list((fopts.cache.root / "tmp").iterdir())  # the build context is gone
    again = _preparer(plan, setup, Rec()).run()  # already in the engine: not made again
    assert [i.made for i in again] == [False, False] and len(engine.builds) == 1


def test_one_toolchain_image_serves_every_profile(setup, engine):
    """apt runs on the scalar CPU whatever the profile, so a recipe's toolchain image is made once for all
    four profiles (vllm's holds Debian's torch, 20 minutes of emulated apt); each build stage still runs on
    its own profile's CPU (its QEMU_CPU in the plan's env)."""
    cat, _fopts, _out = setup
    tags, cpus = set(), set()
    for profile in ("rv64gc", "rvv128", "rvv256", "rvv256-bf16"):
        req = Request(refs=("tinylib",), profile=get_profile(profile), mode=Mode.QEMU, manylinux="off")
        plan = make_plan(cat, req, X86)
        made = _preparer(plan, setup, Rec()).run()
        tags |= {i.tag for i in made if i.what == "build"}
        cpus.add(plan.stage("tinylib").env["QEMU_CPU"])
    assert len(tags) == 1 and len(engine.builds) == 1
    assert len(cpus) == 4  # the stages' CPUs differ
    packages = plan.stage("tinylib").recipe.toolchain.debian
    scalar = render.toolchain_dockerfile(BASE.tag, get_profile("rv64gc").qemu_cpu, packages)
    assert tags == {stage.toolchain_tag("tinylib", "build", BASE.image_id, scalar)[0]}


def test_a_stage_without_packages_needs_the_base_alone(setup, engine):
    cat, _fopts, _out = setup
    made = _preparer(_plan(cat, "tinyapp"), setup, Rec()).run()
    assert [(i.what, i.tag) for i in made] == [("base", BASE.tag), ("build", made[1].tag)]  # tinylib's
    assert [i.stage for i in made] == [None, "tinylib"]


def test_a_cross_stage_gets_the_cross_toolchain_on_the_build_platform_base(setup, engine, tmp_path):
    cat, fopts, _out = setup
    fname, sha = _tarball("tinystatic-1.0", {"Cargo.toml": "[package]\n"}, fopts.mirror)
    recipes_dir = tmp_path / "more"
    recipes_dir.mkdir()
    (recipes_dir / "tinystatic.yaml").write_text(STATICLIB.format(fname=fname, sha=sha))
    from rvport.catalogue.recipes import load_catalogue

    plan = _plan(load_catalogue([recipes_dir]), "tinystatic", mode=Mode.CROSS)
    made = _preparer(plan, setup, Rec()).run()
    st = plan.stage("tinystatic")
    tag, _ = stage.toolchain_tag(
        "tinystatic", "cross", XBASE.image_id, cross.render_toolchain(st.recipe, XBASE.tag)
    )
    assert [(i.what, i.tag) for i in made] == [("base", BASE.tag), ("base", XBASE.tag), ("cross", tag)]
    assert [s.platform for s in engine.builds] == [XBASE.platform]


SMOKED = RECIPE.replace(
    "outputs:", "smoke:\n  debian: [python3-pip]\n  script: python3 -c 'import tinysmoke'\noutputs:"
)


def _smoked(setup, tmp_path):
    from rvport.catalogue.recipes import load_catalogue

    _cat, fopts, _out = setup
    fname, sha = _tarball("tinysmoke-1.0", {"setup.py": "print('hi')\n"}, fopts.mirror)
    recipes_dir = tmp_path / "smoked"
    recipes_dir.mkdir()
    (recipes_dir / "tinysmoke.yaml").write_text(
        SMOKED.format(name="tinysmoke", pkgs="", depends="", fname=fname, sha=sha)
    )
    return _plan(load_catalogue([recipes_dir]), "tinysmoke")


def test_the_smoke_image_is_the_runners_and_no_smoke_leaves_it_out(setup, engine, tmp_path):
    plan = _smoked(setup, tmp_path)
    # one smoke image for every profile: its packages are installed on the scalar profile's CPU
    rendered = render.toolchain_dockerfile(BASE.tag, get_profile("rv64gc").qemu_cpu, ("python3-pip",))
    tag, _ = stage.toolchain_tag("tinysmoke", "smoke", BASE.image_id, rendered)
    made = _preparer(plan, setup, Rec()).run()
    assert [(i.what, i.tag, i.made) for i in made] == [("base", BASE.tag, False), ("smoke", tag, True)]
    assert [(i.what, i.tag) for i in _preparer(plan, setup, Rec(), smoke=False).run()] == [("base", BASE.tag)]


def test_an_accelerated_stage_gets_the_prefix_image_checked_against_the_stage(setup, engine):
    cat, _fopts, _out = setup
    plan = _plan(cat, "tinylib")
    plan = dataclasses.replace(plan, stages=(dataclasses.replace(plan.stages[0], mode=Mode.ACCELERATED),))
    bases = dict(
        FOUND,
        **{
            "debian-trixie@linux/riscv64": dataclasses.replace(
                FOUND["debian-trixie@linux/riscv64"], packages=GCC
            ),
            "debian-trixie-xtc@linux/amd64": dataclasses.replace(
                FOUND["debian-trixie-xtc@linux/amd64"], packages=XGCC
            ),
        },
    )
    rep = Rec()
    made = _preparer(plan, setup, rep, bases=bases).run()
    assert [(i.what, i.made) for i in made] == [
        ("base", False),
        ("build", True),
        ("base", False),
        ("xtc", True),
    ]
    xtc = made[3]
    assert xtc.tag.startswith("rvport/xtc:debian-trixie-xtc-amd64-") and xtc.image_id
    # the prefix needs only the build-platform base: made first (early), while the riscv64 base would be made
    assert [s.tag for s in engine.builds] == [xtc.tag, made[1].tag]
    assert ("tinylib, early", "ok") in rep.ends
    assert any("the cross toolchain matches the stage: gcc-14 14.2.0-19" in text for _n, text in rep.lines)


def test_an_accelerated_stage_with_another_gcc_fails_as_its_build_would(setup, engine):
    cat, _fopts, _out = setup
    plan = _plan(cat, "tinylib")
    plan = dataclasses.replace(plan, stages=(dataclasses.replace(plan.stages[0], mode=Mode.ACCELERATED),))
    bases = dict(
        FOUND,
        **{
            "debian-trixie@linux/riscv64": dataclasses.replace(
                BASE, packages=dict(GCC, **{"gcc-14": "14.2.0-20"})
            ),
            "debian-trixie-xtc@linux/amd64": dataclasses.replace(XBASE, packages=XGCC),
        },
    )
    rep = Rec()
    with pytest.raises(accelerated.ToolchainMismatch, match="stage gcc-14 14.2.0-20"):
        _preparer(plan, setup, rep, bases=bases).run()
    assert rep.ends == [
        ("tinylib, early", "ok"),
        ("tinylib", "failed"),
    ]  # the prefix was made; the check fails


def test_the_runtime_image_is_listed_when_the_engine_has_it_else_left_to_the_build(setup, engine, tmp_path):
    from rvport.engine import runtime

    plan = _with_runtime(setup, tmp_path)
    rt = plan.stage("tinyrt").runtime
    rendered = render.toolchain_dockerfile(BASE.tag, get_profile("rv64gc").qemu_cpu, ("ca-certificates",))
    from_tag, _ = stage.toolchain_tag("tinyrt", "runtime", BASE.image_id, rendered)
    rep = Rec()
    made = _preparer(plan, setup, rep).run()
    # the FROM image is made (as the runner makes it); the runtime image is not: it holds artifacts
    assert [(i.what, i.tag, i.made, i.pending) for i in made] == [
        ("base", BASE.tag, False, False),
        ("runtime", from_tag, True, False),
        ("app", rt.tag, False, True),
    ]
    assert made[2].image_id == "" and made[2].to_json()["pending"] is True
    assert [s.tag for s in engine.builds] == [from_tag]
    assert ("tinyrt", f"runtime image {rt.tag}: not in the engine, made by rvport build") in rep.steps
    # an image under the tag with another runtime key or FROM image is not what a build would make
    engine.images[rt.tag] = "sha256:" + "9" * 64
    engine.labels[rt.tag] = {runtime.KEY_LABEL: "other", runtime.FROM_LABEL: engine.images[from_tag]}
    assert _preparer(plan, setup, Rec()).run()[2].pending
    # with the plan's key and FROM image it is listed (whatever artifacts it holds: the build checks those)
    engine.labels[rt.tag] = {
        runtime.KEY_LABEL: rt.key,
        runtime.FROM_LABEL: engine.images[from_tag],
        runtime.ARTIFACTS_LABEL: "any",
    }
    again = _preparer(plan, setup, Rec()).run()
    assert [(i.what, i.tag, i.image_id, i.made, i.pending) for i in again][2] == (
        "app",
        rt.tag,
        "sha256:" + "9" * 64,
        False,
        False,
    )
    assert len(engine.builds) == 1


@pytest.mark.parametrize("to_stdout", [False, True])
def test_prepare_tags_file_has_the_runtime_image_only_when_in_the_engine(
    setup, engine, tmp_path, monkeypatch, to_stdout
):
    from typer.testing import CliRunner

    from rvport.cli.app import app
    from rvport.engine import prepare as prep

    made = [
        prep.Prepared(
            what="base", stage=None, tag="rvport/base:x", image_id="sha256:" + "1" * 64, made=False
        ),
        prep.Prepared(
            what="app", stage="tinyrt", tag="rvport/tinyrt:local", image_id="", made=False, pending=True
        ),
    ]
    seen = []
    monkeypatch.setattr(prep.Preparer, "run", lambda self: seen.append(self.plan.request.tag) or made)
    _cat, _fopts, out = setup
    tags = tmp_path / "tags.txt"
    res = CliRunner().invoke(
        app,
        [
            "prepare",
            "tinylib",
            "--recipes",
            str(tmp_path / "recipes"),
            "--output",
            str(out),
            "--tags",
            "-" if to_stdout else str(tags),
            "--offline",
            "--mirror",
            str(tmp_path / "mirror"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--mode",
            "qemu",
            "--tag",
            "v1",
        ],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert seen == ["v1"]  # the runtime tag is the build's
    if to_stdout:  # `--tags -`: the tags alone on standard output, the table on stderr
        assert res.stdout == "rvport/base:x\n" and not tags.exists() and not (out / "-").exists()
        assert "rvport/tinyrt:local" in res.stderr and "made by rvport build" in res.stderr
    else:
        assert tags.read_text() == "rvport/base:x\n"
        assert "rvport/tinyrt:local" in res.stdout and "made by rvport build" in res.stdout


def test_the_bases_a_stage_needs_are_the_ones_its_setup_asks_for(setup, engine):
    cat, _fopts, _out = setup
    plan = _plan(cat, "tinylib")
    for mode in (Mode.QEMU, Mode.ACCELERATED):
        st = dataclasses.replace(plan.stages[0], mode=mode)
        bases = dict(
            FOUND,
            **{
                "debian-trixie@linux/riscv64": dataclasses.replace(BASE, reused=True, packages=GCC),
                "debian-trixie-xtc@linux/amd64": dataclasses.replace(XBASE, reused=True, packages=XGCC),
            },
        )
        made = _preparer(dataclasses.replace(plan, stages=(st,)), setup, Rec(), bases=bases).run()
        tags = {b.tag: (b.spec, b.platform) for b in bases.values()}
        assert [tags[i.tag] for i in made if i.what == "base"] == list(modes.bases(st, plan.host))


def test_bases_are_made_side_by_side_and_a_failed_one_fails_the_stages_that_need_it(
    setup, engine, monkeypatch
):
    import threading
    import time

    from rvport.engine import images
    from rvport.errors import HostNotReady

    cat, _fopts, _out = setup
    plan = _plan(cat, "tinylib")
    plan = dataclasses.replace(plan, stages=(dataclasses.replace(plan.stages[0], mode=Mode.ACCELERATED),))
    running, overlap = set(), []
    lock = threading.Lock()

    def fake_base(spec, *, platform, on_line, on_phase, **_kw):
        on_line(f"bootstrap: {spec.name}")
        on_phase(Phase(phase="unpacking", done=1, total=2, what=spec.name))
        with lock:
            running.add(spec.name)
            overlap.append(len(running))
        time.sleep(0.3)
        with lock:
            running.discard(spec.name)
        if spec.name == "debian-trixie-xtc":
            raise HostNotReady("debootstrap failed for debian-trixie-xtc")
        return dataclasses.replace(BASE, packages=GCC)

    monkeypatch.setattr(images, "ensure_base", fake_base)
    rep = Rec()
    prep = _preparer(plan, setup, rep, bases={})
    errors = prep.make()
    assert max(overlap) == 2  # both bases at once
    assert list(errors) == ["tinylib"] and "debian-trixie-xtc" in errors["tinylib"].message
    assert sorted(rep.ends) == [
        ("base debian-trixie (linux/riscv64)", "ok"),
        ("base debian-trixie-xtc (linux/amd64)", "failed"),
        ("tinylib", "failed"),
        ("tinylib, early", "failed"),
    ]
    assert len(overlap) == 2  # the failed base is not tried a second time
    # a base's lines and its phase events reach its own row
    row = "base debian-trixie (linux/riscv64)"
    assert (row, "bootstrap: debian-trixie") in rep.lines
    assert (row, Phase(phase="unpacking", done=1, total=2, what="debian-trixie")) in rep.phases
    assert engine.builds == []  # the prefix failed with it: nothing more is tried
    with pytest.raises(HostNotReady, match="debian-trixie-xtc"):
        _preparer(plan, setup, Rec(), bases={}).run()


def test_ctrl_c_while_a_base_is_made_stops_it_cleans_up_and_records_the_run_as_interrupted(
    setup, engine, monkeypatch, tmp_path, sigint
):
    """`rvport build` makes its bases on worker threads; only the main thread receives Ctrl-C. The base's
    program
    is stopped, its scratch directory removed, and result.json says interrupted."""
    import json
    import os
    import signal
    import threading
    import time

    from rvport import manifest, proc
    from rvport.engine import images
    from rvport.engine.runner import Runner

    cat, fopts, out = setup
    scratch = tmp_path / "rootfs"

    def slow_base(spec, *, platform, log_path, on_line=None, **_kw):
        scratch.mkdir(exist_ok=True)
        try:
            proc.stream(["sleep", "60"], on_line=on_line or (lambda _l: None), log_path=log_path)
            raise AssertionError("not stopped")
        finally:
            (scratch / "cleaned").write_text("")

    monkeypatch.setattr(images, "ensure_base", slow_base)
    opts = BuildOptions(output=out, fetch=fopts)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        Runner(_plan(cat, "tinylib"), opts, Rec()).run()
    assert time.monotonic() - t0 < 30
    assert (scratch / "cleaned").exists()  # the worker's cleanup ran before the interrupt went on
    doc = json.loads((out / "result.json").read_text())
    validate(doc, manifest.schema("result"))  # result.json as the runner writes it
    assert doc["status"] == "interrupted" and doc["stages"][0]["status"] == "interrupted"
    assert doc["images_ahead"]["workers"] == 2 and engine.builds == []
    assert proc.stream(["true"], on_line=lambda _l: None) == 0  # programs start again afterwards
