"""`rvport build --no-cache` runs each build step again through a new RVPORT_FRESH, an ARG of that step, not
through buildx's --no-cache, which on Docker 20.10's BuildKit hands every cache mount over empty (the
compiler cache's too). tests/integration/test_compiler_cache.py shows the engine's cache kept between two
such builds."""

from __future__ import annotations

import pytest

from rvport import resources
from rvport.engine import buildx, render, runner
from rvport.vocab import BuildTree


@pytest.mark.parametrize("name", ["accelerated", "build", "cross"])
def test_the_build_step_of_every_stage_template_takes_rvport_fresh(name):
    lines = resources.builtin("dockerfiles", f"{name}.Dockerfile").read_text().splitlines()
    (i,) = [n for n, ln in enumerate(lines) if ln.startswith("RUN ") and "@@CCACHE_MOUNT@@" in lines[n + 1]]
    assert lines[i - 1] == "ARG RVPORT_FRESH", lines[i - 1]
    assert sum(ln.startswith("ARG ") for ln in lines) == 1  # nothing else can move the step's key


@pytest.mark.parametrize("name", ["accelerated", "build", "cross"])
def test_the_build_step_mounts_the_sources_and_deps_and_no_layer_copies_them(name):
    """The sources and the dependencies' artifacts are bind mounts of the build context (writable: what the
    build writes there is dropped with the step), so a changed tree costs no layer of its own and the build's
    objects never enter one; the mounts' content is in the step's cache key. With `build_tree: memory` the
    sources are bound read-only elsewhere and copied into a tmpfs at /src as the step's first command (after
    the cpuinfo check), which is dropped with the step too."""
    template = resources.builtin("dockerfiles", f"{name}.Dockerfile").read_text()
    assert "COPY src/" not in template and "COPY deps/" not in template
    for tree in BuildTree:
        text = template
        for key, value in render.source_mount(tree).items():
            text = text.replace(f"@@{key}@@", value)
        (i,) = [n for n, ln in enumerate(text.splitlines()) if ln.startswith("RUN ") and "source=src" in ln]
        lines = text.splitlines()
        run, command = lines[i], lines[i + 2].strip()
        if tree is BuildTree.DISK:
            assert run.split()[1:3] == [
                "--mount=type=bind,source=src,target=/src,rw",
                "--mount=type=bind,source=deps,target=/deps,rw",
            ]
            assert "/rvport/src-in" not in text
        else:
            assert run.split()[1:4] == [
                "--mount=type=bind,source=src,target=/rvport/src-in",
                "--mount=type=tmpfs,target=/src",
                "--mount=type=bind,source=deps,target=/deps,rw",
            ]
            command = command.replace("@@CPUINFO_CHECK@@", "")
            assert command.startswith("cp -a /rvport/src-in/. /src/ && "), command


def test_no_cache_is_a_new_rvport_fresh_each_time_and_never_buildx_no_cache(tmp_path):
    a, b = runner.fresh_args(True), runner.fresh_args(True)
    assert [k for k, _ in a] == ["RVPORT_FRESH"] and a != b and runner.fresh_args(False) == ()
    spec = buildx.BuildSpec(
        context=tmp_path, dockerfile=tmp_path / "Dockerfile", platform="linux/riscv64", build_args=a
    )
    argv = spec.argv()
    assert "--no-cache" not in argv and f"RVPORT_FRESH={a[0][1]}" in argv
