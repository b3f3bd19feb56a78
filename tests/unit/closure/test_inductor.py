"""The inductor settings a wheelhouse ships (rvport/closure/inductor.py), the lock's system packages they
come from (rvport/catalogue/closure_lock.py), and the verification of a compile cache's shared objects."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from rvport import manifest, resources
from rvport.catalogue import closure_lock
from rvport.catalogue.closure_lock import SystemPackage
from rvport.catalogue.profiles import get_profile
from rvport.closure import inductor
from rvport.closure import wheelhouse as wh
from rvport.errors import IntegrityError
from tests.fixtures import elfwriter
from tests.fixtures.schemas import validate
from tests.unit.closure.test_wheelhouse import _lock, _opts, house  # noqa: F401 - fixtures used below
from tests.unit.sources.test_debarchive import archive, keyring  # noqa: F401 - fixtures used below

SHIPPED = resources.builtin("locks", "vllm-0.33.0-cp314.yaml")
RV64GC_ARCH = "rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_zicsr2p0_zifencei2p0"


def source(script: Path, probe: str = 'echo "$TORCHINDUCTOR_CPP_MARCH|$VLLM_CACHE_ROOT"', home: str = "/h"):
    """Source the file in a POSIX shell as a user does, then run `probe`."""
    return subprocess.run(
        ["sh", "-c", f'. "$1" && {probe}', "sh", str(script)],
        capture_output=True,
        text=True,
        env={"HOME": home, "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_the_shipped_lock_pins_what_inductor_needs_with_torchs_headers_at_torchs_version():
    lock = closure_lock.load_lock(SHIPPED)
    system = {p.package: p for p in lock.system}
    assert set(system) == {"g++", "g++-16", "libgcc-16-dev", "libtorch-dev", "libpython3.14-dev"}
    torch = lock.entry("torch").debian
    assert (
        system["libtorch-dev"].matches == "python3-torch" and system["libtorch-dev"].version == torch.version
    )
    assert system["libtorch-dev"].file == "/usr/include/torch/csrc/inductor/cpp_prefix.h"
    assert all(len(p.sha256) == 64 and p.why for p in lock.system)
    # the recipe builds against the same libtorch-dev the closure installs
    from rvport.catalogue.recipes import load_catalogue

    assert closure_lock.check_recipe_pins(lock, load_catalogue().resolve("vllm").toolchain.pins) == []
    validate(yaml.safe_load(SHIPPED.read_text()), json.loads(resources.schema_text("closure-lock")))


def _edited(tmp_path: Path, edit) -> Path:
    doc = yaml.safe_load(SHIPPED.read_text())
    edit(doc)
    doc["digest"] = closure_lock.digest_of(doc)
    out = tmp_path / SHIPPED.name
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def _system(doc: dict, package: str) -> dict:
    return next(p for p in doc["system"] if p["package"] == package)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            lambda d: _system(d, "libtorch-dev").update(version="2.14.0+dfsg-3"),
            "is not the version of python3-torch",
        ),
        (
            lambda d: _system(d, "libtorch-dev").update(matches="python3-nothing"),
            "which the lock does not hold",
        ),
        (lambda d: d["system"].append(dict(_system(d, "g++"))), "g++ is locked twice"),
        (lambda d: _system(d, "g++").update(package="python3-numpy"), "a Debian entry's package too"),
    ],
)
def test_a_system_package_that_does_not_fit_the_lock_is_refused(tmp_path, edit, said):
    with pytest.raises(closure_lock.LockConflict) as ei:
        closure_lock.load_lock(_edited(tmp_path, edit))
    assert said in ei.value.render() and ei.value.exit_code == 3


def test_a_lock_without_system_packages_keeps_its_document_and_ships_no_settings():
    lock = closure_lock.load_lock(SHIPPED)
    from dataclasses import replace

    bare = replace(lock, system=())
    assert "system" not in bare.body() and inductor.settings(bare, get_profile("rv64gc"), 16) is None


def test_the_settings_are_the_profiles_flags_and_caches_of_the_profiles_own(tmp_path):
    lock = closure_lock.load_lock(SHIPPED)
    gc = inductor.settings(lock, get_profile("rv64gc"), 16)
    assert gc.march_value == "rv64gc -mabi=lp64d"
    vec = inductor.settings(lock, get_profile("rvv256"), 16)
    assert vec.march == get_profile("rvv256").for_gcc(16).march and vec.march.startswith("rv64gcv")
    for s, other in ((gc, vec), (vec, gc)):
        script = tmp_path / f"{s.profile}.sh"
        script.write_text(inductor.env_text(s))
        out = source(script, 'echo "$TORCHINDUCTOR_CPP_MARCH|$TORCHINDUCTOR_CACHE_DIR|$VLLM_CACHE_ROOT"')
        if out.returncode == 0:  # this host has every file (a riscv64 board with the packages)
            march, cache, root = out.stdout.strip().split("|")
        else:  # the variables are set before the check: read them from the text
            march = s.march_value
            cache = f"/h/.cache/rvport/inductor/{s.profile}"
            root = f"/h/.cache/rvport/vllm/{s.profile}"
        assert march == s.march_value
        assert cache.endswith(f"/rvport/inductor/{s.profile}") and root.endswith(f"/rvport/vllm/{s.profile}")
        assert other.profile not in cache  # another profile's cache is another directory
    # vLLM's cache key holds inductor's config, and inductor reads the flags from this variable: so the two
    # profiles' settings differ where the key is made, not only in the directory
    assert gc.to_json()["env"]["TORCHINDUCTOR_CPP_MARCH"] != vec.to_json()["env"]["TORCHINDUCTOR_CPP_MARCH"]


def test_a_missing_compiler_or_header_stops_with_the_package_to_install_not_a_traceback(tmp_path):
    there = tmp_path / "g++"
    there.write_text("")
    s = inductor.make(
        recipe="vllm",
        version="0.33.0",
        profile="rv64gc",
        march="rv64gc",
        mabi="lp64d",
        checks=[("g++", "4:16.1.0-3", str(there)), ("libtorch-dev", "2.14.1+dfsg-1", str(tmp_path / "no.h"))],
    )
    script = tmp_path / inductor.ENV_FILE
    script.write_text(inductor.env_text(s))
    out = source(script, "echo ran")
    assert out.returncode == 1 and "ran" not in out.stdout
    assert "apt-get install libtorch-dev=2.14.1+dfsg-1" in out.stderr and "g++=" not in out.stderr
    assert "--enforce-eager" in out.stderr and "Traceback" not in out.stderr
    (tmp_path / "no.h").write_text("")
    ok = source(script)
    assert ok.returncode == 0 and ok.stdout.strip() == "rv64gc -mabi=lp64d|/h/.cache/rvport/vllm/rv64gc"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("march", "rv64gc'; rm -rf /; '"),
        ("mabi", "ilp32"),
        ("profile", "../x"),
        ("checks", [("g++", "1", "/usr/bin/g++ $(id)")]),
        ("checks", [("g++;x", "1", "/usr/bin/g++")]),
    ],
)
def test_a_value_that_could_break_out_of_the_shell_file_is_refused(field, value):
    kw = dict(recipe="vllm", version="0.33.0", profile="rv64gc", march="rv64gc", mabi="lp64d", checks=[])
    kw[field] = value
    with pytest.raises(IntegrityError) as ei:
        inductor.make(**kw)
    assert ei.value.exit_code == 4


def test_the_wheelhouse_ships_the_settings_and_refuses_them_changed(tmp_path, house, archive):  # noqa: F811
    from dataclasses import replace

    lock, mirror, art = house
    torch = lock.entry("torch").debian
    libtorch = SystemPackage(
        package="libtorch2.14",
        version=torch.version,
        sha256="3f6613a1271e07a010253ce30c1186a6c4b8b4165fd2588d810e9fe93b0ab9f2",
        file="/usr/lib/riscv64-linux-gnu/libtorch.so.2.14",
        matches="python3-torch",
        why="the library",
    )
    lock = _lock(tmp_path / "s", lock.entries)
    lock = replace(
        lock, system=(libtorch,), digest=closure_lock.digest_of(replace(lock, system=(libtorch,)).body())
    )
    opts = _opts(tmp_path, mirror, art, archive, profile="rv64gc")
    doc = wh.make(lock, replace(opts, gcc=16))
    validate(doc, manifest.schema("wheelhouse"))
    out = opts.output
    assert (out / wh.DEBIAN_LIST).read_text().splitlines()[1:] == [
        "libtorch2.14=2.14.1+dfsg-1",
        "python3-torch=2.14.1+dfsg-1",
    ]
    assert doc["system"][0]["package"] == "libtorch2.14" and doc["inductor"]["march"] == "rv64gc"
    text = (out / inductor.ENV_FILE).read_text()
    assert "export TORCHINDUCTOR_CPP_MARCH='rv64gc -mabi=lp64d'" in text
    got = wh.read(out)
    assert got.inductor().march_value == "rv64gc -mabi=lp64d"
    assert ("libtorch2.14", torch.version, libtorch.sha256) in got.debian()
    (out / inductor.ENV_FILE).write_text(text.replace("rv64gc -mabi", "rv64gcv -mabi"))
    with pytest.raises(IntegrityError) as ei:
        wh.read(out)
    assert "inductor-env.sh is not the one wheelhouse.json describes" in ei.value.render()


def _so(path: Path, arch: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(elfwriter.elf(type=elfwriter.ET_DYN, arch=arch, soname=path.name))
    return path


def test_the_objects_of_a_compile_cache_are_verified_for_the_profile(tmp_path):
    cache = tmp_path / "cache"
    assert inductor.verify_cache(cache, get_profile("rv64gc"))["passed"] is False  # nothing compiled
    _so(cache / "rvport/vllm/rv64gc/torch_compile_cache/ab/inductor_cache/xy/cxy.so", RV64GC_ARCH)
    (cache / "notes.txt").write_text("not an object")
    doc = inductor.verify_cache(cache, get_profile("rv64gc"))
    assert doc["passed"] and doc["objects"] == 1 and doc["arch"] == [RV64GC_ARCH]
    # an object compiled for a vector CPU (the running CPU's flags) does not fit rv64gc
    _so(
        cache / "rvport/inductor/rv64gc/zz/czz.so",
        RV64GC_ARCH
        + "_v1p0_zve32f1p0_zve32x1p0_zve64d1p0_zve64f1p0_zve64x1p0_zvl128b1p0_zvl32b1p0_zvl64b1p0",
    )
    doc = inductor.verify_cache(cache, get_profile("rv64gc"))
    assert not doc["passed"] and [f["path"] for f in doc["failed"]] == ["rvport/inductor/rv64gc/zz/czz.so"]
    assert doc["failed"][0]["reasons"]
