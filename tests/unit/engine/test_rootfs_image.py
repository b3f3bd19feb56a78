"""rootfs_image: the layer GNU tar writes, the docker-archive around it, and its loading (docker load and the
engine's answer mocked at the edge; tar is real)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from rvport.engine import buildx, rootfs_image
from rvport.engine.events import Phase
from rvport.errors import HostNotReady


def _rootfs(tmp_path: Path) -> Path:
    r = tmp_path / "rootfs"
    for d in ("proc/1", "sys/kernel", "dev/pts", "usr/share/proc", "etc"):
        (r / d).mkdir(parents=True)
    for f in ("proc/1/status", "sys/kernel/x", "dev/pts/0", "usr/share/proc/keep", "etc/a"):
        (r / f).write_text(f)
    os.link(r / "etc/a", r / "etc/b")
    (r / "etc/c").symlink_to("a")
    return r


def test_the_layer_holds_the_rootfs_with_proc_sys_and_dev_empty(tmp_path):
    r = _rootfs(tmp_path)
    out = tmp_path / "layer.tar"
    subprocess.run(rootfs_image.layer_argv(r, out), check=True)
    with tarfile.open(out) as t:
        members = {m.name: m for m in t}
    assert set(members) == {
        "dev",
        "etc",
        "etc/a",
        "etc/b",
        "etc/c",
        "proc",
        "sys",
        "usr",
        "usr/share",
        "usr/share/proc",
        "usr/share/proc/keep",
    }  # no "." entry, no mounted contents
    assert members["proc"].isdir() and members["etc/c"].issym() and members["etc/c"].linkname == "a"
    assert {members["etc/a"].islnk(), members["etc/b"].islnk()} == {True, False}  # one file, two names
    assert all(m.uname == "" for m in members.values())  # numeric owners only


def test_the_archive_names_the_tag_the_config_by_its_digest_and_the_layer_by_its_diff_id(tmp_path):
    layer = tmp_path / "layer.tar"
    layer.write_bytes(os.urandom(3 * 512 + 7))
    seen = []

    def config_for(diff_id):
        seen.append(diff_id)
        return rootfs_image.image_config(
            platform="linux/riscv64",
            diff_id=diff_id,
            env={"LANG": "C.UTF-8"},
            cmd=["/bin/bash"],
            labels={"org.rvport.base": "x"},
            created="2026-12-01T00:00:00Z",
            made_by="test",
        )

    image_id = rootfs_image.write_archive(
        layer, tmp_path / "image.tar", tag="rvport/base:x-1", config_for=config_for
    )
    with tarfile.open(tmp_path / "image.tar") as t:
        manifest = json.loads(t.extractfile("manifest.json").read())
        [entry] = manifest
        config_bytes = t.extractfile(entry["Config"]).read()
        assert t.extractfile(entry["Layers"][0]).read() == layer.read_bytes()
    assert entry["RepoTags"] == ["rvport/base:x-1"]
    assert (
        image_id == "sha256:" + hashlib.sha256(config_bytes).hexdigest() == "sha256:" + entry["Config"][:-5]
    )
    config = json.loads(config_bytes)
    assert (
        seen == config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer.read_bytes()).hexdigest()]
    )
    assert (config["architecture"], config["os"]) == ("riscv64", "linux") and "variant" not in config
    assert config["config"]["Env"] == [f"PATH={rootfs_image.DEFAULT_PATH}", "LANG=C.UTF-8"]
    assert config["config"]["Cmd"] == ["/bin/bash"] and config["config"]["Labels"] == {"org.rvport.base": "x"}


def test_a_platform_variant_goes_into_the_config():
    config = rootfs_image.image_config(
        platform="linux/arm/v7", diff_id="sha256:0", env={}, cmd=[], labels={}, created="", made_by=""
    )
    assert (config["os"], config["architecture"], config["variant"]) == ("linux", "arm", "v7")


def _load(tmp_path, monkeypatch, *, load_rc=0, engine_id=None, tar_rc=None):
    """load_rootfs with a real tar and a mocked `docker load` and engine; returns (result or error,
    commands)."""
    ran = []
    real = rootfs_image.proc.stream

    def stream(cmd, *, on_line, log_path=None, **k):
        ran.append(cmd[:2])
        if cmd[0] == "docker":
            archive = Path(cmd[-1].split("=", 1)[1])
            with tarfile.open(archive) as t:
                loaded["id"] = "sha256:" + json.loads(t.extractfile("manifest.json").read())[0]["Config"][:-5]
            return load_rc
        return real(cmd, on_line=on_line, log_path=log_path) if tar_rc is None else tar_rc

    loaded: dict = {}
    said: list = []
    monkeypatch.setattr(rootfs_image.proc, "stream", stream)
    monkeypatch.setattr(
        buildx, "image_info", lambda ref: {"id": engine_id or loaded["id"]} if loaded else None
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    try:
        got = rootfs_image.load_rootfs(
            _rootfs(tmp_path),
            scratch,
            tag="rvport/base:t",
            platform="linux/riscv64",
            env={},
            cmd=["/bin/bash"],
            labels={},
            made_by="test",
            log_path=tmp_path / "log",
            on_line=said.append,
            on_phase=said.append,
        )
    except HostNotReady as e:
        got = e
    return got, ran, scratch, said


def test_loading_returns_the_engines_id_of_the_image_and_drops_the_layer_file(tmp_path, monkeypatch):
    got, ran, scratch, said = _load(tmp_path, monkeypatch)
    assert isinstance(got, str) and got.startswith("sha256:")
    assert ran == [["tar", "--create"], ["docker", "load"]]
    # each step a line for people and its phase as an event
    assert said == [
        "image: writing the layer (linux/riscv64)...",
        Phase(phase="writing the image's layer"),
        "image: loading rvport/base:t into the engine...",
        Phase(phase="loading the image"),
    ]
    assert not (scratch / "layer.tar").exists()  # the archive holds it; the caller removes the scratch


@pytest.mark.parametrize(
    "case, kw, message",
    [
        ("tar fails", {"tar_rc": 2}, "tar could not write the image's layer"),
        ("load fails", {"load_rc": 1}, "the engine did not load the image rvport/base:t"),
        ("another image", {"engine_id": "sha256:" + "0" * 64}, "but as sha256:0000"),
    ],
)
def test_a_layer_or_load_that_failed_or_an_image_not_ours_is_an_error(
    tmp_path, monkeypatch, case, kw, message
):
    got, ran, _, _said = _load(tmp_path, monkeypatch, **kw)
    assert isinstance(got, HostNotReady) and message in got.message, case
    if case == "tar fails":
        assert ran == [["tar", "--create"]]  # nothing loaded after a failed layer
