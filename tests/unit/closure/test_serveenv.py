"""The serving check's environment image without Docker (closure/serveenv.py): what it holds (every wheel but
the recipe's, by sha256), what its tag is keyed by, how it is found, made (its build context, no network) or
given up for an install of everything in the container; and the check's use of it (the container's image and
its --prepared-venv, result.json, --fresh-install), and the inside script's install step with a venv made."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rvport import manifest
from rvport.closure import servecheck, serveenv, serveimage
from rvport.closure import wheelhouse as wh
from rvport.engine import buildx, images
from rvport.errors import BuildFailed, IntegrityError
from tests.fixtures.schemas import validate
from tests.unit.closure.test_servecheck import fake_inside, inside, make_house, opts


def house(tmp_path: Path) -> wh.Wheelhouse:
    return wh.read(make_house(tmp_path / "wh"))


def test_it_holds_every_wheel_but_the_recipes_by_sha256(tmp_path):
    plan = serveenv.plan_env(house(tmp_path), "rvport/toolchain:vllm-serve-x", "sha256:serve", "1000:1000")
    assert [w["name"] for w in plan.wheels] == ["regex"]
    assert plan.left == ("vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl",)
    ((name, requirements),) = plan.rendered.files
    assert name == "requirements.txt" and "vllm" not in requirements.split("#   pip check")[1]
    assert f"regex==1 \\\n    --hash=sha256:{hashlib.sha256(b'regex').hexdigest()}" in requirements
    text = plan.rendered.text
    assert "FROM rvport/toolchain:vllm-serve-x\n" in text and "USER 1000:1000\n" in text
    assert "--no-index" in text and "--require-hashes" in text and "/tmp/rvport-venv" in text
    assert plan.tag.startswith("rvport/toolchain:vllm-serve-env-")


def test_its_tag_changes_with_a_wheel_the_checks_image_and_the_user(tmp_path):
    h = house(tmp_path)
    tag = serveenv.plan_env(h, "t", "sha256:serve", "0:0").tag
    assert serveenv.plan_env(h, "t", "sha256:serve", "0:0").tag == tag
    assert serveenv.plan_env(h, "t", "sha256:other", "0:0").tag != tag
    assert serveenv.plan_env(h, "t", "sha256:serve", "1000:1000").tag != tag

    def changed(name: str) -> wh.Wheelhouse:
        doc = json.loads(json.dumps(h.doc))
        next(w for w in doc["wheels"] if w["name"] == name)["sha256"] = "f" * 64
        return wh.Wheelhouse(directory=h.directory, doc=doc)

    assert serveenv.plan_env(changed("regex"), "t", "sha256:serve", "0:0").tag != tag  # another file
    # vllm's: a pull request's new wheel, the same environment
    assert serveenv.plan_env(changed("vllm"), "t", "sha256:serve", "0:0").tag == tag


def test_a_wheelhouse_of_the_recipes_wheel_alone_has_none_and_a_strange_file_name_is_refused(tmp_path):
    h = house(tmp_path)
    alone = {**h.doc, "wheels": [w for w in h.doc["wheels"] if w["name"] == "vllm"]}
    assert serveenv.plan_env(wh.Wheelhouse(directory=h.directory, doc=alone), "t", "i", "0:0") is None
    bad = json.loads(json.dumps(h.doc))
    next(w for w in bad["wheels"] if w["name"] == "regex")["file"] = "../regex.whl"
    with pytest.raises(IntegrityError, match="file name"):
        serveenv.plan_env(wh.Wheelhouse(directory=h.directory, doc=bad), "t", "i", "0:0")


def ensure(tmp_path: Path, h: wh.Wheelhouse) -> serveenv.ServeEnv:
    return serveenv.ensure(h, "t", "sha256:serve", tmp_root=tmp_path / "tmp", log_path=tmp_path / "env.log")


def test_found_under_its_tag_it_is_not_made(tmp_path, monkeypatch):
    monkeypatch.setattr(buildx, "image_info", lambda ref: {"id": "sha256:env", "labels": {}})
    monkeypatch.setattr(images, "load_image", lambda *a, **k: pytest.fail("made again"))
    got = ensure(tmp_path, house(tmp_path))
    assert got.ready and got.status == "found" and got.image_id == "sha256:env" and got.wheels == 1


def test_made_from_a_context_of_the_checked_wheels_with_no_network(tmp_path, monkeypatch):
    seen = {}

    def load(ctx, tag, **kw):
        seen.update(kw, tag=tag, files=sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*")))
        seen["wheel"] = (ctx / "wheels" / "regex-1-py3-none-any.whl").read_bytes()
        return "sha256:made"

    monkeypatch.setattr(buildx, "image_info", lambda ref: None)
    monkeypatch.setattr(images, "load_image", load)
    got = ensure(tmp_path, house(tmp_path))
    assert got.status == "made" and got.image_id == "sha256:made" and got.tag == seen["tag"]
    assert seen["network"] == "none" and seen["platform"] == "linux/riscv64"
    assert seen["files"] == ["Dockerfile", "requirements.txt", "wheels", "wheels/regex-1-py3-none-any.whl"]
    assert seen["wheel"] == b"regex"
    assert not list((tmp_path / "tmp").iterdir())  # the context is removed


def test_a_failed_build_or_a_wheel_changed_since_read_installs_everything_in_the_container(
    tmp_path, monkeypatch
):
    h = house(tmp_path)
    monkeypatch.setattr(buildx, "image_info", lambda ref: None)

    def fails(*a, **k):
        raise BuildFailed("the serving check environment image failed: pip said no")

    monkeypatch.setattr(images, "load_image", fails)
    got = ensure(tmp_path, h)
    assert got.status == "failed" and not got.ready and "pip said no" in got.reason
    assert str(tmp_path / "env.log") in got.reason
    (h.directory / "regex-1-py3-none-any.whl").write_bytes(b"changed")
    monkeypatch.setattr(images, "load_image", lambda *a, **k: pytest.fail("built from a changed wheel"))
    got = ensure(tmp_path, h)
    assert got.status == "failed" and "the wheelhouse says" in got.reason


def check(tmp_path: Path, monkeypatch, env: serveenv.ServeEnv | None, **kw) -> tuple[dict, dict]:
    make_house(tmp_path / "wh")
    made = serveimage.ServeImage(
        tag="t", image_id="sha256:serve", base_tag="b", base_id="sha256:b", made=False, seconds=1.0,
        debian_release=None,
    )  # fmt: skip
    monkeypatch.setattr(servecheck, "check_engine", lambda: None)
    monkeypatch.setattr(serveimage, "ensure", lambda *a, **k: made)
    if env is not None:
        monkeypatch.setattr(serveenv, "ensure", lambda *a, **k: env)
    else:
        monkeypatch.setattr(serveenv, "ensure", lambda *a, **k: pytest.fail("--fresh-install made one"))
    seen: dict = {}

    def container(o, profile, image_id, logs, log, tests=None, prepared=False):
        seen.update(
            image_id=image_id, prepared=prepared, command=servecheck.container_command(o, False, prepared)
        )
        (logs / "steps.json").write_text(json.dumps(fake_inside({"install": "passed"}, logs)))
        return {"name": "c", "network": "none", "shm_size": "1g", "env": {}, "timeout_per_step": 5.0,
                "log": "logs/container.log", "timed_out": False, "exit_status": 0, "seconds": 1.0,
                "load_average": None}  # fmt: skip

    monkeypatch.setattr(servecheck, "run_container", container)
    doc = servecheck.run(opts(tmp_path, **kw))
    validate(doc, manifest.schema("serve-check"))
    return doc, seen


def test_the_check_starts_from_the_environment_image_and_records_it(tmp_path, monkeypatch):
    env = serveenv.ServeEnv(
        status="made", tag="e", image_id="sha256:env", wheels=1, left=("v.whl",), seconds=9
    )
    doc, seen = check(tmp_path, monkeypatch, env)
    assert seen["image_id"] == "sha256:env" and seen["prepared"] and "--prepared-venv" in seen["command"]
    assert doc["image"]["image_id"] == "sha256:serve"  # the check's image, and on it the environment
    assert doc["image"]["environment"] == {
        "status": "made", "seconds": 9, "tag": "e", "image_id": "sha256:env", "wheels": 1, "left": ["v.whl"],
    }  # fmt: skip


def test_a_failed_environment_image_or_fresh_install_installs_everything_in_the_container(
    tmp_path, monkeypatch
):
    failed = serveenv.ServeEnv(status="failed", wheels=1, reason="pip said no (see logs/environment.log)")
    doc, seen = check(tmp_path, monkeypatch, failed)
    assert seen["image_id"] == "sha256:serve" and not seen["prepared"]
    assert "--prepared-venv" not in seen["command"]
    assert doc["image"]["environment"]["status"] == "failed"
    doc, seen = check(tmp_path / "b", monkeypatch, None, fresh_install=True)
    assert seen["image_id"] == "sha256:serve" and not seen["prepared"]
    assert doc["image"]["environment"] == {"status": "off", "seconds": 0.0, "reason": "--fresh-install"}


def test_inside_a_prepared_venv_install_is_pips_command_alone(tmp_path, monkeypatch):
    fresh = inside.step_commands(tmp_path)["install"]
    assert fresh[0][1:3] == ["-m", "venv"] and len(fresh) == 2
    prepared = inside.step_commands(tmp_path, prepared=True)["install"]
    assert prepared == fresh[1:]  # the same pip command on the whole requirements.txt
    monkeypatch.setattr(inside, "VENV", str(tmp_path / "venv"))
    assert not inside.prepared_venv(True)  # asked, but the image has no venv there: made as without it
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert inside.prepared_venv(True) and not inside.prepared_venv(False)
