"""rvport/plan/checked.py: the planner's plan made complete and checked in plan/, not by the command line: the
pinned files of its recipes held to their sha256, and each stage's closure lock as a typed value."""

from __future__ import annotations

import json
import shutil

import pytest

from rvport import manifest, resources
from rvport.catalogue.closure_lock import Lock
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import IntegrityError
from rvport.host import HostFacts
from rvport.plan.checked import make_checked_plan
from rvport.plan.planner import Request, StageClosure
from tests.fixtures.schemas import validate

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)


def _plan(cat, *refs: str):
    req = Request(refs=refs, profile=get_profile("rvv256"))
    return make_checked_plan(cat, req, X86, locate=lambda s: "cache")


def test_the_plan_carries_each_stage_s_closure_lock_typed():
    plan = _plan(load_catalogue(), "vllm", "msgspec")
    (c,) = plan.closures
    assert isinstance(c, StageClosure) and isinstance(c.lock, Lock)
    assert c.stage == "vllm" and c.lock.recipe == "vllm" and c.lock.target.abi == "cp314"
    doc = plan.to_json()
    validate(doc, manifest.schema("plan"))
    (shown,) = doc["closures"]
    assert shown == {"stage": "vllm", **c.lock.summary()} and shown["digest"] == c.lock.digest
    assert json.loads(manifest.dumps(doc)) == doc
    assert _plan(load_catalogue(), "msgspec").closures == ()


def test_a_pinned_file_that_does_not_match_stops_the_plan(tmp_path):
    src = resources.builtin("recipes")
    shutil.copy(src / "sentencepiece.yaml", tmp_path / "sentencepiece.yaml")
    shutil.copytree(src / "sentencepiece", tmp_path / "sentencepiece")
    cat = load_catalogue([tmp_path])
    assert _plan(cat, "sentencepiece==0.2.2").stages  # as shipped
    patch = tmp_path / "sentencepiece" / "0.2.2-use-bundled-abseil.patch"
    patch.write_bytes(patch.read_bytes() + b"\n")
    with pytest.raises(IntegrityError) as e:
        _plan(cat, "sentencepiece==0.2.2")
    assert str(patch) in e.value.render() and "does not match its pin" in e.value.render()
