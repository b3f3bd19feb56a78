"""The VLEN matrix as planned (rvport/plan/matrix.py): a request per profile, each into OUTPUT/PROFILE/, that
differs from the command line's by its profile alone, so each profile's plan is the plan of a build of it
alone. No Docker."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rvport import manifest
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.matrix import cells, other_vlen, other_vlen_check
from rvport.plan.planner import Mode, Request, make_plan

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
NAMES = ("rv64gc", "rvv128", "rvv256", "rvv256-bf16")


def _req(profile: str = "rvv256") -> Request:
    return Request(refs=("msgspec",), profile=get_profile(profile), mode=Mode.QEMU, tag="ci", jobs=2)


def test_a_cell_per_profile_in_the_order_given_each_in_its_own_directory():
    out = Path("/tmp/out")
    got = cells(_req(), [get_profile(n) for n in reversed(NAMES)], out)
    assert [c.profile.name for c in got] == list(reversed(NAMES))
    assert [c.output for c in got] == [out / n for n in reversed(NAMES)]
    for c in got:  # the command line's request, its profile alone changed
        assert c.request == dataclasses.replace(_req(), profile=c.profile)


def test_a_profile_named_twice_or_none_is_a_usage_error():
    with pytest.raises(UsageError, match="rvv256 twice"):
        cells(_req(), [get_profile("rvv256"), get_profile("rv64gc"), get_profile("rvv256")], Path("o"))
    with pytest.raises(UsageError, match="needs a profile"):
        cells(_req(), [], Path("o"))


@pytest.mark.parametrize("name", NAMES)
def test_each_cell_s_plan_json_is_byte_for_byte_the_single_profile_plan(name):
    cat = load_catalogue()
    (cell,) = [
        c for c in cells(_req("rv64gc"), [get_profile(n) for n in NAMES], Path("o")) if c.profile.name == name
    ]
    alone = make_plan(cat, _req(name), X86)
    assert manifest.dumps(make_plan(cat, cell.request, X86).to_json()) == manifest.dumps(alone.to_json())


def test_a_vector_profile_s_other_vlen_and_its_cpu():
    every = [get_profile(n) for n in NAMES]
    got = {c.profile.name: c.other_vlen for c in cells(_req(), every, Path("o"), every=every)}
    assert got == {"rv64gc": None, "rvv128": 256, "rvv256": 128, "rvv256-bf16": 128}
    assert other_vlen(get_profile("rvv256"), [get_profile("rvv256")]) is None  # no other VLEN known
    bf16 = get_profile("rvv256-bf16")
    check = other_vlen_check(bf16, 128, exact=True)
    # the profile's own CPU (its bfloat16 extensions too), with the other VLEN: only the VLEN differs
    assert check == {"vlen": 128, "cpu": bf16.qemu_cpu.replace("vlen=256", "vlen=128"), "expected": "refused"}
    assert other_vlen_check(get_profile("rvv128"), 256, exact=False)["expected"] == "pass"
    # below the profile's zvl256b a wheel that does not assume its VLEN promises nothing: recorded only
    assert other_vlen_check(get_profile("rvv256"), 128, exact=False)["expected"] == "any"
    with pytest.raises(ValueError, match="names no vlen"):
        other_vlen_check(get_profile("rv64gc"), 128, exact=False)
