"""The stage environment and images without Docker: the engine (rvport.engine.buildx, the docker door) is made
to answer for the images it holds, to load nothing, and to run no container."""

from __future__ import annotations

import inspect

import pytest
from rich.console import Console

from rvport.catalogue.bases import load_base
from rvport.cli.progress_view import LiveReporter, Reporter
from rvport.engine import buildx
from rvport.engine.images import Bases, base_key, ensure_image, host_debian_mirror
from rvport.engine.progress import SILENT, Progress
from rvport.errors import HostNotReady

OVERRIDE = "registry.example/debian@sha256:" + "a" * 64


def engine(monkeypatch, present: dict[str, str]) -> list[buildx.BuildSpec]:
    """The docker edge: `present` images (ref -> id) exist; builds are recorded and load nothing; no container
    runs. Returns the list the builds are recorded in."""
    built: list[buildx.BuildSpec] = []

    def no_container(*a, **k):
        raise HostNotReady("no engine in unit tests")

    monkeypatch.setattr(
        buildx, "image_info", lambda ref: {"id": present[ref], "labels": {}} if ref in present else None
    )
    monkeypatch.setattr(buildx, "build", lambda spec, **kw: built.append(spec))
    monkeypatch.setattr(buildx, "run_container", no_container)
    return built


def xtc_base_tag() -> str:
    key = base_key(load_base("debian-trixie-xtc"), "linux/amd64", host_debian_mirror())
    return f"rvport/base:debian-trixie-xtc-amd64-{key[:12]}"


def test_base_image_override_names_the_riscv64_base_only(tmp_path, monkeypatch):
    """--base-image replaces the riscv64 base; the build-platform base of cross and accelerated stages is
    still the spec's own (rvport build used to replace it too)."""
    xtag = xtc_base_tag()
    built = engine(monkeypatch, {OVERRIDE: "sha256:" + "a" * 64, xtag: "sha256:" + "b" * 64})
    bases = Bases(cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs", override=OVERRIDE)
    rv = bases.get("debian-trixie", "linux/riscv64")
    x = bases.get("debian-trixie-xtc", "linux/amd64")
    assert (rv.tag, rv.source, rv.image_id) == (OVERRIDE, OVERRIDE, "sha256:" + "a" * 64)
    assert (x.tag, x.source, x.image_id) == (xtag, "debootstrap", "sha256:" + "b" * 64)
    assert set(bases.images) == {"debian-trixie@linux/riscv64", "debian-trixie-xtc@linux/amd64"}
    assert bases.get("debian-trixie", "linux/riscv64") is rv and built == []  # made once, nothing built


def test_an_image_built_but_not_in_the_engine_is_host_not_ready(tmp_path, monkeypatch):
    built = engine(monkeypatch, {})
    with pytest.raises(
        HostNotReady, match="toolchain image rvport/toolchain:t-build-x was built but is not in the engine"
    ) as e:
        ensure_image(
            "rvport/toolchain:t-build-x",
            {"Dockerfile": "FROM scratch\n"},
            platform="linux/riscv64",
            tmp_root=tmp_path / "tmp",
            log_path=tmp_path / "log",
            what="toolchain image",
        )
    assert "--load" in e.value.hint
    assert [(s.tag, s.load, s.platform) for s in built] == [
        ("rvport/toolchain:t-build-x", True, "linux/riscv64")
    ]
    assert list((tmp_path / "tmp").iterdir()) == []  # the build context is gone


def test_an_image_in_the_engine_is_reused_without_a_build(tmp_path, monkeypatch):
    built = engine(monkeypatch, {"rvport/toolchain:t": "sha256:" + "c" * 64})
    img = ensure_image(
        "rvport/toolchain:t",
        {"Dockerfile": "FROM scratch\n"},
        platform="linux/riscv64",
        tmp_root=tmp_path / "tmp",
        log_path=tmp_path / "log",
    )
    assert (img.tag, img.image_id, img.built) == ("rvport/toolchain:t", "sha256:" + "c" * 64, False)
    assert built == []


def test_the_cli_reporters_implement_the_build_progress_protocol():
    for cls in (Reporter, LiveReporter):
        assert isinstance(cls(Console(), None), Progress)
        for name in ("begin", "step", "line", "phase", "end"):
            assert list(inspect.signature(getattr(cls, name)).parameters) == list(
                inspect.signature(getattr(Progress, name)).parameters
            ), (cls, name)
    assert isinstance(SILENT, Progress)
    assert not isinstance(object(), Progress)


def test_the_runners_scratch_directories_are_gone_however_the_block_ends(tmp_path):
    from rvport.catalogue.recipes import load_catalogue
    from rvport.engine.runner import BuildOptions, Runner
    from rvport.sources import fetch_options
    from tests.unit.engine.test_bake import _plan

    fopts = fetch_options(cache_dir=tmp_path / "cache", offline=True)
    runner = Runner(
        _plan(load_catalogue(), "msgspec"), BuildOptions(output=tmp_path / "out", fetch=fopts), SILENT
    )
    with runner._scratch("ctx-", "out-") as (ctx, out):
        assert ctx.is_dir() and out.is_dir() and ctx.parent == out.parent == tmp_path / "cache" / "tmp"
        (ctx / "f").write_text("x")
    with pytest.raises(KeyboardInterrupt):
        with runner._scratch("ctx-", "out-"):
            raise KeyboardInterrupt
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []
