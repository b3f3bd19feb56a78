"""Shared install layers (resources/layers.yaml, catalogue/layers.py): an image of the toolchain template
whose list names every package of a layer installs those entries first, in a RUN of its own, so that the
images which give them the same entries share that layer in the build cache. For Debian's torch that is the
vllm build image, vllm's smoke image and the vllm serving check's image: their first RUN must be one text."""

from __future__ import annotations

import re

import pytest

from rvport.catalogue import layers
from rvport.catalogue.closure_lock import find_lock
from rvport.catalogue.profiles import scalar_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.closure import serveimage
from rvport.closure.wheelhouse import all_apt_packages
from rvport.engine import render
from rvport.resources import builtin
from rvport.sources import debarchive

TORCH = layers.Layer(name="torch", packages=("python3-torch", "libtorch2.14"))
BASE = "rvport/base:debian-sid-riscv64-under-test"


def runs(text: str) -> list[str]:
    """The Dockerfile's RUN instructions, each with its continuation lines joined."""
    return [m.group(0) for m in re.finditer(r"^RUN (?:.*\\\n)*.*$", text, re.MULTILINE)]


def installs(text: str) -> list[list[str]]:
    """What each apt install of the Dockerfile names, in order."""
    return [
        r.split("--no-install-recommends ", 1)[1].split(";", 1)[0].split()
        for r in runs(text)
        if "apt-get" in r
    ]


def test_a_layer_takes_its_entries_first_with_their_versions():
    shared, rest = layers.split(
        ("cmake", "python3-torch=2.14.1", "libtorch2.14=2.14.1", "python3-numpy", "cmake"), (TORCH,)
    )
    assert shared == (("libtorch2.14=2.14.1", "python3-torch=2.14.1"),)
    assert rest == ("cmake", "python3-numpy")


def test_a_layer_applies_only_when_every_package_of_it_is_named():
    assert layers.split(("python3-torch", "cmake"), (TORCH,)) == ((), ("cmake", "python3-torch"))
    # a name that only starts like one of the layer's is not it
    assert layers.split(("python3-torch", "libtorch2.14-dbg"), (TORCH,))[0] == ()


def test_an_image_of_only_the_layer_has_no_second_install():
    text = render.toolchain_dockerfile(BASE, "rv64", ("python3-torch", "libtorch-dev")).text
    assert installs(text) == [["libtorch-dev", "python3-torch"]]
    assert runs(text)[-1].startswith("RUN dpkg-query ") and "/rvport-toolchain-packages.txt" in runs(text)[-1]


def test_an_image_without_a_layer_installs_in_one_run_and_writes_its_list_after_it():
    text = render.toolchain_dockerfile(BASE, "rv64", ("cmake", "python3-dev")).text
    assert installs(text) == [["cmake", "python3-dev"]]
    assert len(runs(text)) == 2 and "dpkg-query" in runs(text)[1]


@pytest.fixture(scope="module")
def vllm_images() -> dict[str, str]:
    """The Dockerfiles of the three images of the sid base that hold Debian's torch, rendered by the code that
    makes them: vllm's build image and smoke image (StageEnv.with_packages's lists) and the serving check's
    image of the vllm lock (serveimage.dockerfile)."""
    recipe = load_catalogue(builtin("recipes")).resolve("vllm")
    cpu = scalar_profile().qemu_cpu
    pinned = tuple(f"{p.name}={p.version}" for p in recipe.toolchain.pins)
    lock = find_lock("vllm", recipe.version, "3.14")
    assert lock is not None
    pins = [
        debarchive.DebPin(name=d.package, version=d.version, sha256=d.sha256) for d in all_apt_packages(lock)
    ]
    return {
        "build": render.toolchain_dockerfile(BASE, cpu, recipe.toolchain.apt_packages).text,
        "smoke": render.toolchain_dockerfile(BASE, cpu, recipe.smoke_debian + pinned).text,
        "serve": serveimage.dockerfile(BASE, pins).text,
    }


def test_vllms_build_smoke_and_serve_images_share_one_install_of_torch(vllm_images):
    first = {what: runs(text)[0] for what, text in vllm_images.items()}
    assert len(set(first.values())) == 1, first
    (torch,) = set(first.values())
    named = installs(torch)[0]
    assert sorted(layers.package_name(e) for e in named) == ["libtorch-dev", "python3-torch"]
    assert all(re.fullmatch(r"[a-z0-9.+-]+=2\.14\.1\+dfsg-1", e) for e in named), named
    # and what comes before it, the parent the build cache keys that step on, is one text too
    heads = {
        re.search(r"^FROM .*?(?=^RUN )", t, re.MULTILINE | re.DOTALL).group(0) for t in vllm_images.values()
    }
    assert len(heads) == 1, heads


def test_each_vllm_image_still_installs_all_it_lists(vllm_images):
    for what, text in vllm_images.items():
        got = [e for group in installs(text) for e in group]
        assert len(got) == len(set(got)) and len(installs(text)) == 2, what
    recipe = load_catalogue(builtin("recipes")).resolve("vllm")
    build = [e for g in installs(vllm_images["build"]) for e in g]
    assert sorted(build) == sorted(set(recipe.toolchain.apt_packages))
