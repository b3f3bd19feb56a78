"""SLSA provenance v1 (in-toto Statement v1): made from result.json and plan.json documents as the runner
writes them, validated against the schema written from the specifications; written atomically beside
result.json; and artifacts checked against it (`verify artifacts --provenance`). No Docker."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from rvport import __version__, manifest
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.verify import provenance, verify_paths
from tests.fixtures.cli import rvport_process
from tests.fixtures.schemas import validate
from tests.unit.verify.test_policy import V128_ARCH, _riscv_elf, _wheel

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plan_doc(*refs: str) -> dict:
    req = Request(refs=refs, all=False, profile=get_profile("rvv256"), mode=Mode.AUTO, jobs=None)
    return make_plan(load_catalogue(), req, X86).to_json()


def _result_doc(plan: dict, status: str = "ok") -> dict:
    """A result.json document shaped as Runner._write_result writes it, for the stages of `plan`."""
    stages, artifacts = [], []
    for i, p in enumerate(plan["stages"]):
        arts = [{"path": f"{p['recipe']}/out-{i}.bin", "size": 10 + i, "sha256": sha(p["recipe"].encode())}]
        stages.append(
            {
                "recipe": p["recipe"],
                "version": p["version"],
                "kind": p["kind"],
                "mode": p["mode"],
                "platform": p["platform"],
                "status": "ok",
                "timings": {"build": 1.0},
                "commands": p["commands"],
                "env": p["env"],
                "key": sha(b"key" + bytes([i])),
                "plan_key": p["key"],
                "artifacts": arts,
                "images": {"base": "sha256:" + "b" * 64, "toolchain": "sha256:" + sha(b"tc" + bytes([i]))},
                "sources": [
                    {
                        "name": s["name"],
                        "origin": s["origin"],
                        "from": "cache",
                        "sha256": sha(s["name"].encode()),
                        "size": 100,
                        "filename": s["archive"],
                    }
                    for s in p["sources"]
                ],
                "toolchain_packages": {"gcc-14": "14.2.0-19"},
                "toolchain": None,
                "verify": {"ok": True},
                "smoke": None,
                "build_command": "docker buildx build ...",
                "error": None,
                "log_tail": [],
                "log": None,
            }
        )
        artifacts += [dict(a, recipe=p["recipe"]) for a in arts]
    return {
        "schema": 1,
        "kind": "rvport-result",
        "status": status,
        "failing_stage": None,
        "tag": "t1",
        "profile": plan["profile"],
        "host": plan["host"],
        "builder": None,
        "started": "2026-11-30T10:00:00Z",
        "duration_s": 125.4,
        "stages": stages,
        "artifacts": artifacts,
        "base_images": {
            "debian-trixie@linux/riscv64": {
                "spec": "debian-trixie",
                "tag": "rvport/base:x",
                "image_id": "sha256:" + "b" * 64,
                "platform": "linux/riscv64",
                "key": "k",
                "source": "debootstrap",
                "release_sha256": "c" * 64,
                "packages": {},
                "reused": True,
            }
        },
    }


@pytest.fixture(scope="module")
def schema() -> dict:
    return manifest.schema("provenance")


def _validate(doc: dict, schema: dict) -> None:
    validate(doc, schema, format_checker=jsonschema.FormatChecker())


def test_statement_of_a_build_validates_and_holds_every_input(schema):
    plan = _plan_doc("tiktoken", "semantic-router")
    result = _result_doc(plan)
    st = provenance.statement(result, plan, builder={"name": "rvport", "driver": "docker-container"})
    _validate(st, schema)
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "https://slsa.dev/provenance/v1"
    # subjects: every artifact with its sha256
    assert {(s["name"], s["digest"]["sha256"]) for s in st["subject"]} == {
        (a["path"], a["sha256"]) for a in result["artifacts"]
    }
    bd = st["predicate"]["buildDefinition"]
    assert bd["buildType"] == provenance.BUILD_TYPE
    ext = bd["externalParameters"]
    assert ext["profile"] == "rvv256" and ext["tag"] == "t1" and ext["mode"] == "auto"
    assert set(ext["recipes"]) == {f"{s['recipe']}=={s['version']}" for s in plan["stages"]}
    assert [s["mode"] for s in bd["internalParameters"]["stages"]] == [s["mode"] for s in plan["stages"]]
    deps = {d["name"]: d for d in bd["resolvedDependencies"]}
    # every source, with a URI and the digest it was fetched with
    tik = next(s for s in plan["stages"] if s["recipe"] == "tiktoken")
    src = deps[f"tiktoken/source/{tik['sources'][0]['name']}"]
    assert src["uri"].startswith("pkg:pypi/tiktoken@") and src["digest"]["sha256"] == sha(
        tik["sources"][0]["name"].encode()
    )
    router = next(s for s in plan["stages"] if s["recipe"] == "semantic-router")
    git = next(s for s in router["sources"] if "repo" in s)
    assert deps[f"semantic-router/source/{git['name']}"]["uri"] == f"git+{git['repo']}@{git['commit']}"
    # patches and lock files by their pins; vendored crates by the pinned Cargo.lock's digest
    for s in plan["stages"]:
        for pf in s["patches"]:
            assert deps[f"{s['recipe']}/patch/{pf['file']}"]["digest"]["sha256"] == pf["sha256"]
        for pf in s["lockfiles"]:
            assert deps[f"{s['recipe']}/lockfile/{pf['file']}"]["digest"]["sha256"] == pf["sha256"]
    assert (
        tik["lockfiles"]
        and deps["tiktoken/vendor/cargo"]["digest"]["sha256"] == tik["lockfiles"][0]["sha256"]
    )
    # go.sum lives in the source tree and the recipe pins it (`lock:`): named by that digest
    assert router["vendor"] == "go" and router["lock"]["path"] == "src/semantic-router/go.sum"
    assert deps["semantic-router/vendor/go"]["digest"]["sha256"] == router["lock"]["sha256"]
    # a lock file the tree holds (`lock:`): named by its own pinned digest
    ml = next(s for s in plan["stages"] if s["recipe"] == "router-ml-binding")
    assert ml["lock"] == {"path": "ml-binding/Cargo.lock", "sha256": ml["lock"]["sha256"]}
    assert deps["router-ml-binding/vendor/cargo"]["digest"]["sha256"] == ml["lock"]["sha256"]
    assert (
        deps["router-ml-binding/vendor/cargo"]["annotations"]["lock"]
        == "ml-binding/Cargo.lock inside the source tree"
    )
    assert any(n.startswith("semantic-router/depends/router-ml-binding/") for n in deps)
    # images: the base once, each stage's toolchain; and the artifacts of a dependency
    assert deps["base/debian-trixie@linux/riscv64"]["digest"]["sha256"] == "b" * 64
    assert deps["tiktoken/image/toolchain"]["annotations"]["packages"] == {"gcc-14": "14.2.0-19"}
    assert not any(n.endswith("/image/base") for n in deps)
    assert "semantic-router/depends/glide-ffi/out-0.bin" in deps or any(
        n.startswith("semantic-router/depends/glide-ffi/") for n in deps
    )
    run = st["predicate"]["runDetails"]
    assert run["builder"]["id"] == "https://rvport.dev/builder/buildx/docker-container"
    assert run["builder"]["version"] == {
        "rvport": __version__,
        "buildx.builder": "rvport",
        "buildx.driver": "docker-container",
    }
    assert run["metadata"] == {"startedOn": "2026-11-30T10:00:00Z", "finishedOn": "2026-11-30T10:02:05Z"}


def test_statement_without_plan_or_builder_still_validates(schema):
    plan = _plan_doc("msgspec")
    st = provenance.statement(_result_doc(plan))
    _validate(st, schema)
    assert st["predicate"]["runDetails"]["builder"] == {
        "id": "https://rvport.dev/builder/buildx",
        "version": {"rvport": __version__, "buildx.builder": "default"},
    }


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d.update(_type="https://in-toto.io/Statement/v0.1"),
        lambda d: d.update(subject=[]),
        lambda d: d["subject"][0].pop("digest"),
        lambda d: d["subject"][0]["digest"].update(sha256="ABC"),
        lambda d: d["predicate"]["buildDefinition"].pop("buildType"),
        lambda d: d["predicate"]["buildDefinition"].pop("externalParameters"),
        lambda d: d["predicate"]["runDetails"]["builder"].pop("id"),
        lambda d: d["predicate"]["runDetails"]["metadata"].update(startedOn="yesterday"),
        lambda d: d["predicate"]["buildDefinition"]["resolvedDependencies"].append(
            {"name": "nothing to point at"}
        ),
        lambda d: d.update(predicateType="not a uri"),
    ],
)
def test_the_schema_refuses_what_the_specification_forbids(schema, breakage):
    st = provenance.statement(_result_doc(_plan_doc("msgspec")), _plan_doc("msgspec"))
    _validate(st, schema)
    broken = copy.deepcopy(st)
    breakage(broken)
    with pytest.raises(jsonschema.ValidationError):
        _validate(broken, schema)


# ---- written beside result.json
# ---------------------------------------------------------------------------------


def test_write_beside_is_atomic_and_only_for_a_finished_build(tmp_path, schema, monkeypatch):
    plan = _plan_doc("msgspec")
    path = provenance.write_beside(tmp_path, _result_doc(plan), plan, {"name": "default", "driver": "docker"})
    assert path == tmp_path / "provenance.json"
    _validate(json.loads(path.read_text()), schema)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["provenance.json"]
    # a failed run: no statement, and the earlier one is gone (it would describe other artifacts)
    assert provenance.write_beside(tmp_path, _result_doc(plan, status="failed"), plan) is None
    assert list(tmp_path.iterdir()) == []

    # interrupted while writing: nothing half-written is left
    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)  # the rename of rvport.fileio.atomic_file
    with pytest.raises(KeyboardInterrupt):
        provenance.write_beside(tmp_path, _result_doc(plan), plan)
    assert list(tmp_path.iterdir()) == []


# ---- checking artifacts against it
# ------------------------------------------------------------------------------


def _statement_file(tmp_path: Path, files: dict[str, bytes]) -> Path:
    plan = _plan_doc("glide-ffi")
    result = _result_doc(plan)
    result["artifacts"] = [
        {"path": f"glide-ffi/{n}", "size": len(b), "sha256": sha(b), "recipe": "glide-ffi"}
        for n, b in files.items()
    ]
    p = provenance.write_beside(tmp_path, result, plan)
    assert p is not None
    return p


def test_check_by_name_and_by_digest(tmp_path):
    prov = provenance.load(_statement_file(tmp_path, {"libx.so": b"one", "liby.so": b"two"}))
    assert prov.profile == "rvv256" and len(prov.subjects) == 2
    assert provenance.check(prov, "out/artifacts/glide-ffi/libx.so", sha(b"one")) == (
        [],
        ["provenance: subject glide-ffi/libx.so, sha256 matches"],
    )
    reasons, _ = provenance.check(prov, "out/artifacts/glide-ffi/libx.so", sha(b"onE"))
    assert reasons == [
        f"sha256 {sha(b'onE')} differs from provenance subject glide-ffi/libx.so ({sha(b'one')}): "
        "the file changed after the build"
    ]
    assert provenance.check(prov, "/elsewhere/renamed.so", sha(b"two"))[1] == [
        "provenance: sha256 matches subject glide-ffi/liby.so"
    ]
    reasons, _ = provenance.check(prov, "/elsewhere/other.so", sha(b"three"))
    assert reasons and "not a subject of provenance" in reasons[0]


def test_one_changed_byte_fails_verify(tmp_path):
    art = tmp_path / "artifacts" / "glide-ffi"
    art.mkdir(parents=True)
    elf = _riscv_elf()
    (art / "libx.so").write_bytes(elf)
    prov = provenance.load(_statement_file(tmp_path, {"libx.so": elf}))
    report = verify_paths([art], get_profile("rv64gc"), provenance=prov)
    assert report.ok, report.artifacts[0].all_reasons()
    changed = bytearray(elf)
    changed[-1] ^= 1
    (art / "libx.so").write_bytes(bytes(changed))
    report = verify_paths([art], get_profile("rv64gc"), provenance=prov)
    assert not report.ok and "the file changed after the build" in report.artifacts[0].reasons[-1]


@pytest.mark.parametrize(
    "text,msg",
    [
        ('{\n  "_type": 1,\n  oops\n}', ":3: not JSON"),
        ('{"_type": "https://in-toto.io/Statement/v0.1", "subject": []}', "not an in-toto Statement v1"),
        ('{"_type": "https://in-toto.io/Statement/v1", "subject": []}', "has no subject"),
        (
            '{"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "x", "digest": {"sha1": '
            '"ab"}}]}',
            "subject 0 has no sha256 digest",
        ),
        ("[1, 2]", "not an in-toto Statement v1"),
    ],
)
def test_bad_provenance_files_are_usage_errors(tmp_path, text, msg):
    p = tmp_path / "p.json"
    p.write_text(text)
    with pytest.raises(UsageError, match=msg):
        provenance.load(p)
    with pytest.raises(UsageError, match="cannot read provenance"):
        provenance.load(tmp_path / "missing.json")


def rvport(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a process of its own with a minimal environment (tests/fixtures/cli.py), its tables wide
    enough that a reason is never wrapped, however long the temporary path (pytest-xdist adds to it)."""
    return rvport_process(args, env={"COLUMNS": "500", "PATH": "/usr/bin:/bin"}, main="app", timeout=None)


def test_cli_provenance(tmp_path):
    art = tmp_path / "artifacts" / "glide-ffi"
    art.mkdir(parents=True)
    elf = _riscv_elf()
    (art / "libx.so").write_bytes(elf)
    stmt = _statement_file(tmp_path, {"libx.so": elf})
    cp = rvport("verify", "artifacts", "--provenance", str(stmt), str(art / "libx.so"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "rvv256" in cp.stdout  # the profile comes from the statement when --profile is not given
    (art / "libx.so").write_bytes(elf[:-1] + bytes([elf[-1] ^ 1]))
    cp = rvport("verify", "artifacts", "--provenance", str(stmt), str(art / "libx.so"))
    assert cp.returncode == 1 and "changed after the build" in cp.stdout, cp.stdout + cp.stderr
    (tmp_path / "bad.json").write_text("{")
    cp = rvport("verify", "artifacts", "--provenance", str(tmp_path / "bad.json"), str(art / "libx.so"))
    assert cp.returncode == 2 and "bad.json:1: not JSON" in cp.stderr and "Traceback" not in cp.stderr


def test_provenance_from_a_special_file_too_big_or_too_deep_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: reading it would wait for ever
    for path, kind in ((Path("/dev/zero"), "character device"), (fifo, "FIFO")):
        with pytest.raises(UsageError, match=f"provenance {path} is a {kind}: only regular files are read"):
            provenance.load(path)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 2_000 + "]" * 2_000)
    with pytest.raises(UsageError, match="nests deeper than"):
        provenance.load(deep)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(provenance.PROVENANCE_MAX_BYTES + 1)
    with pytest.raises(UsageError, match="over the cap"):
        provenance.load(big)


def test_provenance_of_too_many_arrays_or_subjects_is_refused_before_it_is_parsed(tmp_path):
    """16 MiB of empty arrays would cost the parser gigabytes: the arrays and objects are counted first."""
    empty = tmp_path / "empty.json"
    head = f'{{"_type": "{provenance.STATEMENT_TYPE}", "subject": ['.encode()
    n = (provenance.PROVENANCE_MAX_BYTES - len(head) - 8) // 3
    empty.write_bytes(head + b"[]," * n + b"[]]}")
    with pytest.raises(UsageError, match="more than 100000 JSON arrays and objects"):
        provenance.load(empty)
    many = tmp_path / "many.json"
    one = {"name": "x.whl", "digest": {"sha256": "a" * 64}}
    doc = {"_type": provenance.STATEMENT_TYPE, "subject": [one] * (provenance.PROVENANCE_MAX_SUBJECTS + 1)}
    many.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="10001 subjects, over the cap of 10000"):
        provenance.load(many)


@pytest.mark.parametrize(
    "subject",
    ['"abc"', "5", '[{"name": "x", "digest": "ab"}]', '[{"name": "x", "digest": [1]}]', "[7]"],
)
def test_provenance_subjects_of_the_wrong_shape_are_usage_errors(tmp_path, subject):
    p = tmp_path / "p.json"
    p.write_text(f'{{"_type": "{provenance.STATEMENT_TYPE}", "subject": {subject}, "predicate": 3}}')
    with pytest.raises(UsageError, match="subject 0 has no sha256 digest"):
        provenance.load(p)


def test_cli_provenance_from_dev_zero_is_exit_2_at_once(tmp_path):
    (tmp_path / "x.so").write_bytes(_riscv_elf())
    cp = rvport("verify", "artifacts", "--provenance", "/dev/zero", str(tmp_path / "x.so"))
    assert cp.returncode == 2 and "only regular files are read" in cp.stderr, cp.stderr


def test_a_vlen_exact_output_is_said_in_the_plan_the_provenance_and_judged_so_by_verify(tmp_path):
    """vllm.yaml's wheel is `vlen: exact`: plan.json says it, the statement annotates the wheel's subject, and
    `verify --provenance` refuses the rvv128 wheel on rvv256 (its kernels corrupt memory at VLEN 256), where
    plain runs-on, from the ELF files alone, passes it with a note."""
    plan = _plan_doc("vllm")
    (vllm,) = [s for s in plan["stages"] if s["recipe"] == "vllm"]
    assert vllm["outputs"] == [{"glob": "vllm-*.whl", "type": "wheel", "isa": "profile", "vlen": "exact"}]
    assert all("vlen" not in o for s in _plan_doc("glide-ffi")["stages"] for o in s["outputs"])
    wheel = _wheel(
        tmp_path,
        {"demo/_C.so": _riscv_elf(V128_ARCH)},
        name="vllm-0.33.0-cp312-cp312-manylinux_2_31_riscv64.whl",
    )
    other = tmp_path / "libother.so"
    other.write_bytes(_riscv_elf(V128_ARCH))
    result = _result_doc(plan)
    result["artifacts"] = [
        {"path": f"vllm/{p.name}", "size": p.stat().st_size, "sha256": sha(p.read_bytes()), "recipe": "vllm"}
        for p in (wheel, other)
    ]
    stmt = provenance.statement(result, plan)
    notes = {s["name"]: s["annotations"] for s in stmt["subject"]}
    assert notes[f"vllm/{wheel.name}"]["vlen"] == "exact" and "vlen" not in notes["vllm/libother.so"]
    path = tmp_path / "provenance.json"
    path.write_text(json.dumps(stmt))
    prov = provenance.load(path)
    assert provenance.is_vlen_exact(prov, sha(wheel.read_bytes()))
    assert not provenance.is_vlen_exact(prov, sha(other.read_bytes())) and not provenance.is_vlen_exact(
        prov, None
    )
    plain = verify_paths([wheel, other], get_profile("rvv256"))
    assert plain.ok
    checked = verify_paths([wheel, other], get_profile("rvv256"), provenance=prov)
    by_name = {Path(a.path).name: a for a in checked.artifacts}
    assert not by_name[wheel.name].ok and by_name["libother.so"].ok
    assert any("VLEN-exact for VLEN 128" in r for r in by_name[wheel.name].all_reasons())
    assert any("sha256 matches" in n for n in by_name[wheel.name].notes)  # still checked against its subject
    assert verify_paths([wheel], get_profile("rvv128"), provenance=prov).ok


def test_a_vlen_exact_output_of_a_python_matrix_stage_is_annotated_too():
    """In a --python plan result.json's artifacts name their stage by its id (vllm-cp314), not the recipe."""
    req = Request(refs=("vllm",), profile=get_profile("rvv256"), mode=Mode.AUTO, pythons=("3.14",))
    plan = make_plan(load_catalogue(), req, X86).to_json()
    (stage,) = [s for s in plan["stages"] if s["recipe"] == "vllm"]
    assert stage["id"] == "vllm-cp314"
    result = _result_doc(plan)
    result["artifacts"] = [
        {"path": f"vllm-cp314/{n}", "size": 1, "sha256": sha(n.encode()), "recipe": "vllm-cp314"}
        for n in ("vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl", "notes.txt")
    ]
    notes = {s["name"]: s["annotations"] for s in provenance.statement(result, plan)["subject"]}
    assert notes["vllm-cp314/vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl"].get("vlen") == "exact"
    assert "vlen" not in notes["vllm-cp314/notes.txt"]


def test_cli_vlen_exact(tmp_path):
    lib = tmp_path / "lib.so"
    lib.write_bytes(_riscv_elf(V128_ARCH))
    cp = rvport("verify", "artifacts", "--profile", "rvv256", str(lib))
    assert cp.returncode == 0 and "VLEN-agnostic" in cp.stdout + cp.stderr, cp.stdout + cp.stderr
    cp = rvport(
        "verify",
        "artifacts",
        "--profile",
        "rvv256",
        "--vlen-exact",
        "--json",
        str(tmp_path / "r.json"),
        str(lib),
    )
    assert cp.returncode == 1 and "VLEN-exact for VLEN 128" in cp.stdout, cp.stdout + cp.stderr
    assert json.loads((tmp_path / "r.json").read_text())["vlen_exact"] is True
    assert rvport("verify", "artifacts", "--profile", "rvv128", "--vlen-exact", str(lib)).returncode == 0
