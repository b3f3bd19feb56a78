"""`rvport prepare` without Docker: the images it makes are the runner's (same Dockerfiles, same tags), made
once, and an image already in the engine is not made again. Docker is replaced at its door (buildx)."""

from __future__ import annotations

import pytest

from rvport.build import buildx, prepare, stage
from rvport.build.modes import cross
from rvport.build import render as dockerfiles
from rvport.plan.planner import Mode
from tests.unit.test_bake import BASE, STATICLIB, XBASE, _plan, _tarball, setup  # noqa: F401 (fixture)


class FakeEngine:
    """buildx.image_info / buildx.build: images appear when built; builds are recorded."""

    def __init__(self, present=()):
        self.images = {t: f"sha256:{i:064d}" for i, t in enumerate(present, 1)}
        self.builds = []

    def image_info(self, ref):
        return {"id": self.images[ref], "labels": {}} if ref in self.images else None

    def build(self, spec, *, log_path, on_line=None):
        self.builds.append(spec)
        self.images[spec.tag] = f"sha256:{len(self.images) + 100:064d}"
        if on_line:
            on_line("#1 [1/2] FROM base")


class Rec:
    def __init__(self):
        self.steps, self.lines = [], []

    def step(self, name, text):
        self.steps.append((name, text))

    def line(self, name, text):
        self.lines.append((name, text))


@pytest.fixture
def engine(monkeypatch):
    e = FakeEngine()
    monkeypatch.setattr(buildx, "image_info", e.image_info)
    monkeypatch.setattr(buildx, "build", e.build)
    return e


def _preparer(plan, tmp_path, rep, smoke=True):
    p = prepare.Preparer(plan, prepare.PrepareOptions(logs=tmp_path / "logs", tmp_root=tmp_path / "tmp",
                                                      cache_dir=tmp_path / "cache", smoke=smoke), rep)
    p.bases = {"debian-trixie@linux/riscv64": BASE, "debian-trixie-xtc@linux/amd64": XBASE}
    return p


def test_prepare_makes_the_runners_toolchain_image_once(setup, engine, tmp_path):
    cat, _fopts, _out = setup
    plan = _plan(cat, "tinylib")
    rep = Rec()
    made = _preparer(plan, tmp_path, rep).run()
    st = plan.stage("tinylib")
    rendered = dockerfiles.toolchain_dockerfile(BASE.tag, plan.request.profile.qemu_cpu, st.recipe.toolchain.debian)
    tag, key = stage.toolchain_tag("tinylib", "build", BASE.image_id, rendered)
    assert [(i.what, i.tag, i.made) for i in made] == [("build", tag, True)]
    (spec,) = engine.builds
    assert spec.tag == tag and spec.load and spec.platform == "linux/riscv64"
    assert ("org.rvport.key", key) in spec.labels
    assert ("tinylib", f"build image {tag}") in rep.steps and ("tinylib", "#1 [1/2] FROM base") in rep.lines
    assert not list((tmp_path / "tmp").iterdir())          # the build context is gone
    again = _preparer(plan, tmp_path, Rec()).run()           # already in the engine: not made again
    assert [i.made for i in again] == [False] and len(engine.builds) == 1


def test_a_cross_stage_gets_the_cross_toolchain_on_the_build_platform_base(setup, engine, tmp_path):
    cat, fopts, _out = setup
    mirror = fopts.mirror
    fname, sha = _tarball("tinystatic-1.0", {"Cargo.toml": "[package]\n"}, mirror)
    recipes_dir = tmp_path / "more"
    recipes_dir.mkdir()
    (recipes_dir / "tinystatic.yaml").write_text(STATICLIB.format(fname=fname, sha=sha))
    from rvport.catalogue.recipes import load_catalogue
    plan = _plan(load_catalogue([recipes_dir]), "tinystatic", mode=Mode.CROSS)
    made = _preparer(plan, tmp_path, Rec()).run()
    st = plan.stage("tinystatic")
    tag, _ = stage.toolchain_tag("tinystatic", "cross", XBASE.image_id,
                                  cross.render_toolchain(st.recipe, XBASE.tag))
    assert [(i.what, i.tag) for i in made] == [("cross", tag)]
    assert engine.builds[0].platform == XBASE.platform
