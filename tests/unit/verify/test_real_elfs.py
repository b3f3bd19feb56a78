"""The verifier on real ELF files: riscv64, x86-64 and Go objects, shared objects and executables written
by tests/fixtures/elfwriter.py with what GCC 14 and Go record in them (no compiler, no container); ar archives
and wheels assembled from them. tests/integration/test_verify_elfs_built.py runs these tests again on the
files that Debian's riscv64 cross GCC 14 (in Docker), the host's gcc and the host's Go compile."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.errors import UsageError
from rvport.resources import builtin
from rvport.verify import elf_ranges, pool, verify_paths, zip_member
from tests.fixtures.cli import rvport_process
from tests.fixtures.elfs import ElfFixtures, make_wheel, record_hash
from tests.fixtures.hosttools import need
from tests.fixtures.schemas import validate


def verify(paths, profile="rv64gc", isa="carries"):
    return verify_paths([Path(p) for p in paths], get_profile(profile), isa=isa)


def one(path, profile="rv64gc", isa="carries"):
    r = verify([path], profile, isa)
    assert len(r.artifacts) == 1
    return r.artifacts[0]


def reasons(artifact) -> str:
    return "\n".join(artifact.all_reasons())


# ---- objects, shared objects, executables ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,profile,ok,why",
    [
        ("rv64gc.o", "rv64gc", True, ""),
        ("rvv128.o", "rvv128", True, ""),
        ("rvv256.o", "rvv256", True, ""),
        ("intrin256.o", "rvv256", True, ""),
        ("rvv128.o", "rv64gc", False, "needs v, zvfh, beyond profile rv64gc"),
        ("rvv256.o", "rvv128", False, "needs zvl256b, beyond profile rvv128"),
        ("rvv128.o", "rvv256", False, "lacks zvl256b that profile rvv256 promises"),
        ("rv64gc.o", "rvv128", False, "lacks v, zvfh, zvl128b that profile rvv128 promises"),
        (
            "soft.o",
            "rv64gc",
            False,
            "float ABI is soft (e_flags 0x1) but profile rv64gc needs double (lp64d)",
        ),
        ("x86.o", "rv64gc", False, "machine is x86-64 (EM_X86_64), not RISC-V"),
        ("librv64gc.so", "rv64gc", True, ""),
        ("librvv128.so", "rvv128", True, ""),
        ("librvv256.so", "rvv256", True, ""),
        ("librvv256.so", "rv64gc", False, "beyond profile rv64gc"),
        ("libx86.so", "rv64gc", False, "not RISC-V"),
        ("hello", "rv64gc", True, ""),
        ("hello-x86", "rv64gc", False, "not RISC-V"),
    ],
)
def test_single_elf_files(elf_fixtures: ElfFixtures, name, profile, ok, why):
    a = one(elf_fixtures.path(name), profile)
    assert a.ok is ok, reasons(a)
    assert why in reasons(a)
    assert a.kind == "elf" and a.sha256 and a.size


def test_facts_of_real_files(elf_fixtures: ElfFixtures):
    m = one(elf_fixtures.path("rvv256.o"), "rvv256").members[0]
    f = m.facts
    assert f.elf_class == 64 and f.little_endian and f.is_riscv and f.elf_type == "ET_REL"
    assert f.float_abi == "double" and f.rvc is True
    assert f.extensions["v"] == "1p0" and "zvl256b" in f.extensions and "zvfh" in f.extensions
    so = one(elf_fixtures.path("libnewglibc.so"), "rv64gc").members[0]
    assert so.facts.max_glibc == (2, 36) and "libc.so.6" in so.facts.needed
    assert any("GLIBC_2.36" in n and "manylinux_2_36_riscv64" in n for n in so.notes)
    exe = one(elf_fixtures.path("hello"), "rv64gc").members[0]
    assert exe.facts.elf_type in ("ET_DYN", "ET_EXEC") and "libc.so.6" in exe.facts.needed
    soft = one(elf_fixtures.path("soft.o"), "rv64gc").members[0].facts
    assert soft.float_abi == "soft" and "d" not in soft.extensions


@pytest.mark.parametrize(
    "name,profile,runs_on,carries",
    [
        # the brief's cases: a library for rv64gcv_zvl128b runs on rvv128 (which also promises zvfh) ...
        ("librvv128-nozvfh.so", "rvv128", True, False),
        ("librvv128-nozvfh.so", "rvv256", True, False),
        ("librv64gc.so", "rvv256", True, False),
        ("librv64gc.so", "rv64gc", True, True),
        ("librvv128.so", "rvv256", True, False),
        # ... a vlen-256 library does not, nor does any vector code on rv64gc
        ("librvv256.so", "rvv128", False, False),
        ("librvv128-nozvfh.so", "rv64gc", False, False),
        ("intrin256.o", "rvv128", False, False),
    ],
)
def test_runs_on_and_carries(elf_fixtures: ElfFixtures, name, profile, runs_on, carries):
    r, c = one(elf_fixtures.path(name), profile, "runs-on"), one(elf_fixtures.path(name), profile, "carries")
    assert (r.ok, c.ok) == (runs_on, carries), (reasons(r), reasons(c))
    if not carries and runs_on:
        assert f"that profile {profile} promises" in reasons(c)
    if not runs_on:
        assert f"beyond profile {profile}" in reasons(r)


@pytest.mark.parametrize(
    "name,profile,ok",
    [
        ("librvv128.so", "rvv128", True),
        ("librvv128.so", "rvv256", False),
        ("librvv128-nozvfh.so", "rvv256", False),
        ("rvv128.o", "rvv256-bf16", False),
        ("librvv256.so", "rvv256", True),
        ("librv64gc.so", "rvv256", True),
    ],
)
def test_vlen_exact_vector_code_runs_only_at_its_own_vlen(elf_fixtures: ElfFixtures, name, profile, ok):
    """The arch string a compiler writes is the same whether the code is VLEN-agnostic or VLEN-exact
    (-mrvv-vector-bits=zvl, vLLM's kernels): these were compiled without it, and `vlen_exact` (a recipe's
    `vlen: exact`, --vlen-exact) is what makes verify judge them as exact. Runs on the compiled files too."""
    path = elf_fixtures.path(name)
    plain = verify_paths([path], get_profile(profile), isa="runs-on")
    exact = verify_paths([path], get_profile(profile), isa="runs-on", vlen_exact=True)
    assert plain.ok and exact.ok is ok, reasons(exact.artifacts[0])
    if not ok:
        assert "built VLEN-exact for VLEN 128 (zvl128b)" in reasons(exact.artifacts[0])
        assert any("only if it is VLEN-agnostic" in n for n in plain.artifacts[0].members[0].notes)


def test_nozvfh_library_is_what_it_says(elf_fixtures: ElfFixtures):
    f = one(elf_fixtures.path("librvv128-nozvfh.so"), "rvv128", "runs-on").members[0].facts
    assert "v" in f.extensions and "zvl128b" in f.extensions and "zvfh" not in f.extensions
    assert "lacks zvfh that profile rvv128 promises" in reasons(
        one(elf_fixtures.path("librvv128-nozvfh.so"), "rvv128", "carries")
    )


def test_go_binaries(elf_fixtures: ElfFixtures):
    if not elf_fixtures.go:
        need("go")
    go = elf_fixtures.path("hello-go-riscv64")
    m = one(go, "rv64gc", "runs-on").members[0]
    assert m.facts.go.goarch == "riscv64" and m.facts.go.goos == "linux" and m.facts.rvc is False
    assert m.facts.arch is None  # no .riscv.attributes: judged by its build info
    assert m.facts.go.go_version.startswith("go1.") and m.facts.go.main_module.startswith("example.com/hello")
    for profile in ("rv64gc", "rvv128", "rvv256", "rvv256-bf16"):
        a = one(go, profile, "runs-on")
        assert a.ok, reasons(a)
    level = m.facts.go.settings.get("GORISCV64", "rva20u64")
    assert one(go, "rv64gc", "carries").ok
    a = one(go, "rvv128", "carries")
    assert (
        not a.ok
        and "lacks v, zvfh, zvl128b that profile rvv128 promises" in reasons(a)
        and level in reasons(a)
    )
    a = one(elf_fixtures.path("hello-go-amd64"), "rv64gc", "runs-on")
    assert not a.ok and "GOARCH=amd64" in reasons(a) and "not RISC-V" in reasons(a)


# ---- archives ----------------------------------------------------------------------------------------------


def test_archive_of_rv64gc_objects(elf_fixtures: ElfFixtures):
    a = one(elf_fixtures.path("librv64gc.a"))
    assert a.ok and a.kind == "archive", reasons(a)
    assert [m.name for m in a.members] == ["rv64gc.o", "a_long_member_name_for_the_gnu_table_rv64gc.o"]


def test_mixed_archive_names_the_bad_members(elf_fixtures: ElfFixtures):
    a = one(elf_fixtures.path("libmixed.a"))
    assert not a.ok
    by = {m.name: m for m in a.members}
    assert by["rv64gc.o"].ok
    assert "not RISC-V" in " ".join(by["x86.o"].reasons)
    assert "beyond profile rv64gc" in " ".join(by["another_long_member_name_rvv256.o"].reasons)
    assert "x86.o: machine is x86-64" in reasons(a)


# ---- wheels ------------------------------------------------------------------------------------------------

TAG39 = "cp312-cp312-manylinux_2_39_riscv64"


def test_good_wheel(elf_fixtures: ElfFixtures, tmp_path):
    whl = make_wheel(
        tmp_path,
        "demo",
        "1.0",
        TAG39,
        {
            "demo/__init__.py": b"",
            "demo/_vec.cpython-312-riscv64-linux-gnu.so": elf_fixtures.read("librvv256.so"),
            "demo/libs/libnew.so": elf_fixtures.read("libnewglibc.so"),
        },
    )
    a = one(whl, "rvv256", "runs-on")
    assert a.ok and a.kind == "wheel", reasons(a)
    assert a.wheel.record_checked == 5 and a.wheel.max_glibc == "2.36"
    assert a.wheel.manylinux == "manylinux_2_36_riscv64"
    assert {m.name for m in a.members} == {
        "demo/_vec.cpython-312-riscv64-linux-gnu.so",
        "demo/libs/libnew.so",
    }


def test_wheel_glibc_above_its_tag(elf_fixtures: ElfFixtures, tmp_path):
    whl = make_wheel(
        tmp_path,
        "demo",
        "1.0",
        "cp312-cp312-manylinux_2_31_riscv64",
        {"demo/libs/libnew.so": elf_fixtures.read("libnewglibc.so")},
    )
    a = one(whl)
    assert not a.ok
    assert (
        "tagged manylinux_2_31_riscv64 but its ELF files allow no tag lower than manylinux_2_36_riscv64"
        in reasons(a)
    )


def test_wheel_with_x86_member_or_x86_tag(elf_fixtures: ElfFixtures, tmp_path):
    whl = make_wheel(tmp_path, "demo", "1.0", TAG39, {"demo/_x.so": elf_fixtures.read("libx86.so")})
    a = one(whl)
    assert not a.ok and "demo/_x.so: machine is x86-64" in reasons(a)
    whl = make_wheel(
        tmp_path,
        "demo",
        "2.0",
        "cp312-cp312-manylinux_2_17_x86_64",
        {"demo/_x.so": elf_fixtures.read("librv64gc.so")},
    )
    a = one(whl)
    assert not a.ok and "manylinux_2_17_x86_64 is for x86_64, not riscv64" in reasons(a)


def test_wheel_containing_archive_names_member(elf_fixtures: ElfFixtures, tmp_path):
    whl = make_wheel(tmp_path, "demo", "1.0", TAG39, {"demo/lib/libmixed.a": elf_fixtures.read("libmixed.a")})
    a = one(whl)
    assert "demo/lib/libmixed.a(x86.o): machine is x86-64" in reasons(a)


def test_wheel_record_checks(elf_fixtures: ElfFixtures, tmp_path):
    so = elf_fixtures.read("librv64gc.so")
    whl = make_wheel(
        tmp_path,
        "demo",
        "1.0",
        TAG39,
        {"demo/_x.so": so},
        record_overrides={"demo/_x.so": record_hash(b"something else")},
    )
    assert "demo/_x.so: RECORD sha256 mismatch" in reasons(one(whl))
    whl = make_wheel(
        tmp_path,
        "demo",
        "1.1",
        TAG39,
        {"demo/_x.so": so, "demo/extra.py": b"x=1\n"},
        omit_from_record=("demo/extra.py",),
    )
    assert "demo/extra.py: not listed in RECORD" in reasons(one(whl))
    whl = make_wheel(
        tmp_path, "demo", "1.2", TAG39, {"demo/_x.so": so}, record_overrides={"demo/_x.so": "md5=abc"}
    )
    assert "RECORD hash algorithm 'md5' is not accepted" in reasons(one(whl))


def test_wheel_tags_file_must_match_name(elf_fixtures: ElfFixtures, tmp_path):
    whl = make_wheel(
        tmp_path, "demo", "1.0", "cp312-cp312-linux_x86_64", {"demo/_x.so": elf_fixtures.read("librv64gc.so")}
    )
    renamed = whl.with_name("demo-1.0-cp312-cp312-linux_riscv64.whl")
    whl.rename(renamed)
    assert "WHEEL lists tags cp312-cp312-linux_x86_64 but the file name says cp312-cp312-linux_riscv64" in (
        reasons(one(renamed))
    )


def test_stored_wheel_and_bad_name(elf_fixtures: ElfFixtures, tmp_path):
    whl = make_wheel(
        tmp_path,
        "demo",
        "1.0",
        TAG39,
        {"demo/_x.so": elf_fixtures.read("librv64gc.so")},
        compression=zipfile.ZIP_STORED,
    )
    assert one(whl).ok
    bad = tmp_path / "not-a-wheel-name.whl"
    shutil.copy(whl, bad)
    assert "invalid wheel file name" in reasons(one(bad))


def test_wheel_same_report_on_threads_and_kept_in_ranges(elf_fixtures: ElfFixtures, tmp_path, monkeypatch):
    """Real ELF layouts (section headers last): read on threads, big members inflated ahead and kept only in
    elf_ranges.py's ranges (a head of 4 KiB here, so most are read again whole), the report is the same."""
    names = ["librvv256.so", "libnewglibc.so", "librv64gc.so", "hello", "libmixed.a", "soft.o", "libx86.so"]
    names += ["hello-go-riscv64", "hello-go-amd64"] if elf_fixtures.go else []
    files = {f"demo/{n}": elf_fixtures.read(n) for n in names}
    whl = make_wheel(tmp_path, "demo", "1.0", TAG39, files | {"demo/__init__.py": b"x = 1\n"})
    plain = one(whl, "rvv256", "runs-on").to_json()
    monkeypatch.setattr(pool, "THREADS", 3)
    monkeypatch.setattr(pool, "PARALLEL_MIN_COST", 0)
    monkeypatch.setattr(pool, "BATCH_COST", 1)
    monkeypatch.setattr(zip_member, "AHEAD_MIN", 0)
    monkeypatch.setattr(elf_ranges, "HEAD", 4096)
    monkeypatch.setattr(elf_ranges, "NEAR", 1024)
    assert one(whl, "rvv256", "runs-on").to_json() == plain
    assert plain["wheel"]["record_checked"] == len(files) + 3


# ---- corrupt and truncated input: a failed verdict, never a crash ------------------------------------------


def test_truncated_and_corrupt_files(elf_fixtures: ElfFixtures, tmp_path):
    so = elf_fixtures.read("librvv256.so")
    (tmp_path / "trunc.so").write_bytes(so[:200])
    mixed = elf_fixtures.read("libmixed.a")
    (tmp_path / "trunc.a").write_bytes(mixed[: len(mixed) // 2])
    (tmp_path / "elfmagic.so").write_bytes(b"\x7fELF" + b"\xff" * 60)
    (tmp_path / "notes.txt").write_text("hello")
    whl = make_wheel(tmp_path, "demo", "1.0", TAG39, {"demo/_x.so": so})
    blob = whl.read_bytes()
    (tmp_path / "demo-1.0-cp312-cp312-linux_riscv64.whl").write_bytes(blob[: len(blob) // 2])
    whl.unlink()
    r = verify([tmp_path], "rvv256")
    by = {Path(a.path).name: a for a in r.artifacts}
    assert set(by) == {"trunc.so", "trunc.a", "elfmagic.so", "demo-1.0-cp312-cp312-linux_riscv64.whl"}
    assert all(not a.ok for a in r.artifacts)
    assert "corrupt or truncated ELF file" in reasons(by["trunc.so"])
    assert "truncated" in reasons(by["trunc.a"])
    assert "corrupt or truncated ELF file" in reasons(by["elfmagic.so"])
    assert "not a readable zip file" in reasons(by["demo-1.0-cp312-cp312-linux_riscv64.whl"])
    assert "not an ELF file" in reasons(one(tmp_path / "notes.txt"))


def test_random_corruption_never_crashes(elf_fixtures: ElfFixtures, tmp_path):
    rng = random.Random(5)
    originals = [elf_fixtures.read(n) for n in ("librvv256.so", "rvv128.o", "hello", "libmixed.a")]
    for i in range(150):
        data = bytearray(rng.choice(originals))
        for _ in range(rng.randint(1, 40)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(4, len(data))]
        p = tmp_path / f"m{i}.bin"
        p.write_bytes(bytes(data))
        r = verify([p], "rvv256")
        assert len(r.artifacts) == 1  # a verdict, whatever it is


# ---- directories, API errors -------------------------------------------------------------------------------


def test_directory_walk(elf_fixtures: ElfFixtures, tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(elf_fixtures.path("librvv256.so"), tmp_path / "a" / "b" / "libv.so")
    shutil.copy(elf_fixtures.path("rvv256.o"), tmp_path / "a" / "v.o")
    (tmp_path / "a" / "README").write_text("not an artifact")
    (tmp_path / "a" / "link.so").symlink_to(tmp_path / "a" / "b" / "libv.so")
    r = verify([tmp_path], "rvv256")
    assert r.ok and [Path(a.path).name for a in r.artifacts] == ["v.o", "libv.so"]
    empty = tmp_path / "empty"
    empty.mkdir()
    r = verify([empty])
    assert not r.ok and "no wheel, ELF file or ar archive" in reasons(r.artifacts[0])


def test_usage_errors(tmp_path):
    with pytest.raises(UsageError):
        verify([tmp_path / "missing"])
    with pytest.raises(UsageError):
        verify([tmp_path], isa="everything")
    with pytest.raises(UsageError):
        verify([])


# ---- the CLI -----------------------------------------------------------------------------------------------


def rvport(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a process of its own with a minimal environment (tests/fixtures/cli.py)."""
    return rvport_process(args, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}, main="app", timeout=None)


def test_cli_pass_fail_and_outputs(elf_fixtures: ElfFixtures, tmp_path):
    js, xml = tmp_path / "v.json", tmp_path / "v.xml"
    r = rvport(
        "verify",
        "artifacts",
        str(elf_fixtures.path("librvv256.so")),
        str(elf_fixtures.path("rvv256.o")),
        "--profile",
        "rvv256",
        "--json",
        str(js),
        "--junit",
        str(xml),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout
    schema = json.loads(builtin("schemas", "verify.schema.json").read_text())
    doc = json.loads(js.read_text())
    validate(doc, schema)
    assert doc["ok"] and doc["profile"]["name"] == "rvv256" and doc["isa"] == "runs-on"
    assert len(ET.parse(xml).getroot().findall("./testsuite/testcase")) == 2

    r = rvport(
        "verify", "artifacts", str(elf_fixtures.path("libmixed.a")), "--json", str(js), "--junit", str(xml)
    )
    assert r.returncode == 1
    assert "x86.o" in r.stdout and "FAIL" in r.stdout and "not RISC-V" in r.stdout
    doc = json.loads(js.read_text())
    validate(doc, schema)
    assert doc["ok"] is False and doc["summary"]["failed"] == 1
    failure = ET.parse(xml).getroot().find("./testsuite/testcase/failure")
    assert failure is not None and "x86.o" in failure.text

    # runs on (the default): an rv64gc library runs on rvv256; it does not carry what rvv256 promises
    r = rvport("verify", "artifacts", str(elf_fixtures.path("librv64gc.so")), "--profile", "rvv256")
    assert r.returncode == 0, r.stdout + r.stderr
    r = rvport(
        "verify",
        "artifacts",
        str(elf_fixtures.path("librv64gc.so")),
        "--profile",
        "rvv256",
        "--isa",
        "carries",
    )
    assert r.returncode == 1 and "promises" in r.stdout, r.stdout + r.stderr
    r = rvport(
        "verify",
        "artifacts",
        str(elf_fixtures.path("librv64gc.so")),
        "--profile",
        "rvv256",
        "--isa",
        "baseline",
    )  # the older name of runs-on
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "artifacts", "/nonexistent/x.whl"],
        ["verify", "artifacts", ".", "--profile", "rv128x"],
        ["verify", "artifacts", ".", "--isa", "everything"],
        ["verify", "artifacts", ".", "--json", "/nonexistent/dir/v.json"],
    ],
)
def test_cli_usage_errors(args):
    r = rvport(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "error:" in r.stderr


# ---- exports: the artifact's own ELF symbol tables ---------------------------------------------------------


def test_archive_exports(elf_fixtures: ElfFixtures):
    lib = elf_fixtures.path("libexports.a")
    r = verify_paths(
        [lib], get_profile("rv64gc"), exports=["create_client", "close_client", "second_fn", "hidden_fn"]
    )
    a = r.artifacts[0]
    assert a.ok, reasons(a)
    assert any("exports create_client, close_client, second_fn, hidden_fn (functions)" in n for n in a.notes)
    # second_fn lives in a member that also carries an .llvmbc section: its ELF symbol table still says FUNC
    r = verify_paths(
        [lib],
        get_profile("rv64gc"),
        exports=["create_client", "counter", "local_only", "undefined_fn", "destroy_client"],
    )
    text = reasons(r.artifacts[0])
    assert not r.ok and len(r.artifacts[0].reasons) == 4, text
    assert "counter is not exported: it is GLOBAL OBJECT (STT_OBJECT) in exports.o, not a function" in text
    assert "local_only is not exported: it is defined only as a LOCAL symbol in exports.o" in text
    assert "undefined_fn is not exported: it is referenced in exports.o but defined in no member" in text
    assert "destroy_client is not exported: no member defines or references it" in text
    assert "create_client" not in text


def test_shared_object_exports(elf_fixtures: ElfFixtures):
    so = elf_fixtures.path("libexports.so")
    assert verify_paths([so], get_profile("rv64gc"), exports=["create_client", "close_client"]).ok
    r = verify_paths([so], get_profile("rv64gc"), exports=["hidden_fn", "counter", "undefined_fn"])
    text = reasons(r.artifacts[0])
    assert not r.ok
    assert "hidden_fn is not exported: it is not in its .dynsym" in text
    assert "counter is not exported: it is GLOBAL OBJECT (STT_OBJECT), not a function" in text
    assert "undefined_fn is not exported: it is referenced but defined elsewhere" in text


def test_exports_of_a_wheel_or_a_bad_archive_fail(elf_fixtures: ElfFixtures, tmp_path):
    whl = make_wheel(tmp_path, "demo", "1.0", TAG39, {"demo/_x.so": elf_fixtures.read("libexports.so")})
    r = verify_paths([whl], get_profile("rv64gc"), exports=["create_client"])
    assert not r.ok and "checked in ELF files and ar archives, not in a wheel" in reasons(r.artifacts[0])
    bad = tmp_path / "libtrunc.a"
    lib = elf_fixtures.read("libexports.a")
    bad.write_bytes(lib[: len(lib) // 2])
    r = verify_paths([bad], get_profile("rv64gc"), exports=["create_client"])
    assert not r.ok and "exports not checked: bad ar archive" in reasons(r.artifacts[0])


def test_cli_exports(elf_fixtures: ElfFixtures):
    lib = str(elf_fixtures.path("libexports.a"))
    r = rvport("verify", "artifacts", lib, "--export", "create_client,close_client", "--export", "second_fn")
    assert r.returncode == 0, r.stdout + r.stderr
    r = rvport("verify", "artifacts", lib, "--export", "create_client", "--export", "counter")
    assert r.returncode == 1 and "counter" in r.stdout and "not a function" in r.stdout, r.stdout + r.stderr
    r = rvport("verify", "artifacts", lib, "--export", "create_client,,x")
    assert r.returncode == 2 and "not a symbol name" in r.stderr, r.stdout + r.stderr
