"""A shared install layer on the real engine (catalogue/layers.py, toolchain.Dockerfile): two images of the
riscv64 trixie base made by rvport's own code, whose lists both name a layer's packages and differ in the
rest, run the layer's apt once and hold the same layer. The table is this test's own (Debian's small `hello`
as its layer), so no torch is installed here; tests/unit/engine/test_shared_layers.py checks that vllm's
three images give the real table's layer one text."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from rvport.catalogue import layers
from rvport.catalogue.profiles import scalar_profile
from rvport.engine import images, render
from rvport.sources.cache import default_cache_dir
from rvport.target import PLATFORM as RISCV64

pytestmark = pytest.mark.integration


def diff_ids(tag: str) -> list[str]:
    out = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", tag],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


def test_two_images_naming_one_layer_share_it(engine, tmp_path, monkeypatch):
    table = (layers.Layer(name="under-test", packages=("hello",)),)
    monkeypatch.setattr(layers, "layers", lambda: table)
    base = images.Bases(cache_dir=default_cache_dir(), log_dir=tmp_path / "logs").get(
        "debian-trixie", RISCV64
    )
    cpu = scalar_profile().qemu_cpu
    # a fresh word in the layer's list makes its RUN new to the build cache, so the first image really runs it
    nonce = uuid.uuid4().hex[:8]
    made = {}
    for n, rest in enumerate(("file", "less")):
        rendered = render.toolchain_dockerfile(base.tag, cpu, ("hello", rest))
        assert rendered.text.count("apt-get $ca install") == 2
        text = rendered.text.replace(
            "rm -rf /var/lib/apt/lists/*", f"rm -rf /var/lib/apt/lists/* # {nonce}", 1
        )
        tag = f"rvport/toolchain:shared-layer-test-{nonce}-{n}"
        log = tmp_path / f"image-{n}.log"
        try:
            images.ensure_image(
                tag,
                {"Dockerfile": text},
                platform=RISCV64,
                tmp_root=tmp_path,
                log_path=log,
                what="toolchain image",
            )
            made[n] = (diff_ids(tag), log.read_text(errors="replace"))
        finally:
            if n == 1:
                subprocess.run(["docker", "image", "rm", "-f", tag, tag[:-1] + "0"], capture_output=True)
    (first, first_log), (second, second_log) = made[0], made[1]
    base_layers = len(diff_ids(base.tag))
    # base, the layer, the rest, the package list: the first two shared, the rest each image's own
    assert first[: base_layers + 1] == second[: base_layers + 1]
    assert first[base_layers + 1] != second[base_layers + 1]
    assert "Setting up hello" in first_log and "Setting up hello" not in second_log, second_log[-2000:]
