"""Accelerated mode for real: msgspec's wheel built in a riscv64 stage whose C compiler is Debian's native
riscv64 cross GCC (same version as the stage's), verified and smoke-tested like any build, and compared
with the plain-QEMU build of the same inputs: same verdicts, same object code.

Both builds use the default cache: the QEMU one is usually already in the artifact cache from the wheel
tests (test_build_wheels.py); a fresh accelerated build costs about 3 minutes on the 2-core CI machine.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import jsonschema
import pytest
from elftools.elf.elffile import ELFFile

from rvport import manifest

from .conftest import ONE_TARBALL, offline_mirror, rvport, tarball

pytestmark = [pytest.mark.integration, pytest.mark.network]


def _build(out: Path, mode: str) -> dict:
    cp = rvport(
        "build", "msgspec", "--profile", "rvv256", "--tag", "local", "--mode", mode, "--output", str(out)
    )
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    return doc


@pytest.fixture(scope="module")
def builds(engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("accelerated")
    acc = _build(root / "accelerated", "accelerated")
    qemu = _build(root / "qemu", "qemu")
    return root, acc, qemu


def _stage(doc: dict) -> dict:
    (st,) = doc["stages"]
    return st


def _so(out: Path) -> bytes:
    whl = next((out / "artifacts" / "msgspec").glob("*.whl"))
    with zipfile.ZipFile(whl) as z:
        (name,) = [n for n in z.namelist() if n.startswith("msgspec/_core") and n.endswith(".so")]
        return z.read(name)


def _exec_sections(blob: bytes) -> dict[str, bytes]:
    elf = ELFFile(io.BytesIO(blob))
    assert elf["e_machine"] == "EM_RISCV"
    return {s.name: s.data() for s in elf.iter_sections() if s["sh_flags"] & 0x4}  # SHF_EXECINSTR


def _verdicts(st: dict) -> list:
    """What the verifier decided, without sizes and digests."""
    out = []
    for rep in st["verify"]["reports"]:
        for a in rep["artifacts"]:
            out.append(
                (
                    a["verdict"],
                    a["reasons"],
                    [(m["name"], m["verdict"], m["reasons"], m["elf"]) for m in a.get("members", [])],
                )
            )
    return out


def test_accelerated_build_is_verified_smoke_tested_and_records_its_cross_toolchain(builds):
    root, acc, _ = builds
    st = _stage(acc)
    assert st["mode"] == "accelerated" and st["platform"] == "linux/riscv64"
    assert st["status"] in ("ok", "cached")
    assert st["verify"]["ok"] and st["smoke"]["status"] == "passed"
    assert "msgspec ok" in "\n".join(st["smoke"]["output"])
    assert st["images"]["xtc"].startswith("sha256:") and st["images"]["xtc_tag"].startswith("rvport/xtc:")
    gcc = st["toolchain_packages"]["xtc:gcc-14-riscv64-linux-gnu"]
    assert gcc.startswith("14.") and "cross" in gcc
    xtc_bases = [b for k, b in acc["base_images"].items() if b["spec"] == "debian-trixie-xtc"]
    assert xtc_bases and xtc_bases[0]["packages"]["gcc-14-riscv64-linux-gnu"] == gcc
    if st["status"] == "ok":  # freshly built: the log shows the prefix copied in, linked and offline
        log = (root / "accelerated" / "logs" / "msgspec.log").read_text()
        assert f"COPY --from={st['images']['xtc_tag']} /opt/xtc/ /opt/xtc/" in log
        # the prefix's setup step prints its GCC, unless BuildKit reused that step from an earlier build
        setup = re.search(r"#(\d+) \[build +\d+/\d+\] RUN sh -eu /opt/xtc/setup\.sh\n#\1 CACHED", log)
        assert setup or "rvport accelerated: GCC 14." in log
        assert any(
            ln.startswith("$ docker buildx build") and "--network none" in ln for ln in log.splitlines()
        )


def test_same_verdicts_as_plain_emulation(builds):
    _, acc, qemu = builds
    assert _stage(qemu)["mode"] == "qemu" and _stage(qemu)["smoke"]["status"] == "passed"
    assert _verdicts(_stage(acc)) == _verdicts(_stage(qemu))


def test_same_object_code_as_plain_emulation(builds):
    root, _, _ = builds
    acc_so, qemu_so = _so(root / "accelerated"), _so(root / "qemu")
    acc_text, qemu_text = _exec_sections(acc_so), _exec_sections(qemu_so)
    assert set(acc_text) == set(qemu_text) and ".text" in acc_text
    assert len(acc_text[".text"]) > 100_000
    for name in acc_text:
        assert acc_text[name] == qemu_text[name], f"{name} differs between the accelerated and the qemu build"


LATE_HEADER = (
    """\
schema: 1
name: lateheader
kind: python-wheel
modes: [qemu, accelerated]
build:
  - mkdir -p /usr/local/include
  - echo '#define LATE 1' > /usr/local/include/late_header_{nonce}.h
outputs:
  - {{glob: "*.whl", type: wheel}}
"""
    + ONE_TARBALL
)


def test_a_build_that_adds_headers_to_usr_local_include_is_refused(engine, tmp_path):
    """The cross compiler sees /usr/local/include as it was when the stage was set up (its entries are linked
    where the stage's GCC searches it); a build that adds to it afterwards fails instead of compiling
    differently from its emulated build."""
    import uuid

    mirror, recipes = tmp_path / "mirror", tmp_path / "recipes"
    offline_mirror(mirror)
    recipes.mkdir()
    f, sha = tarball("lateheader-1.0.0", {"README": "adds a header late\n"}, mirror)
    nonce = uuid.uuid4().hex[:12]  # BuildKit must run the step
    (recipes / "lateheader.yaml").write_text(LATE_HEADER.format(fname=f, sha=sha, nonce=nonce))
    out = tmp_path / "out"
    cp = rvport(
        "build",
        "lateheader",
        "--recipes",
        str(recipes),
        "--mirror",
        str(mirror),
        "--offline",
        "--output",
        str(out),
        "--profile",
        "rvv256",
        "--tag",
        "test",
        "--mode",
        "accelerated",
    )
    assert cp.returncode == 7, cp.stdout[-4000:] + cp.stderr[-4000:]
    log = (out / "logs" / "lateheader.log").read_text()
    assert f"the build added late_header_{nonce}.h to /usr/local/include" in log
    assert "build this recipe with --mode qemu" in log
    assert not (out / "artifacts" / "lateheader").exists()


LTO_RECIPE = (
    """\
schema: 1
name: ltoext
kind: python-wheel
modes: [qemu, accelerated]
env:
  CFLAGS: -O2 -flto ${{RVPORT_CFLAGS}}
  CCACHE_DISABLE: "1"
build:
  - python3 -m pip wheel --no-deps --no-build-isolation --no-index --wheel-dir "$RVPORT_OUT" .
  # the objects hold GIMPLE for the link-time optimizer and, by GCC's default, no code: only an LTO link can
  # make a working library of them
  - for o in build/temp.*/*.o; do grep -q -a .gnu.lto_ "$o"; done
outputs:
  - {{glob: "*.whl", type: wheel}}
smoke:
  script: |
    import ltoext
    assert ltoext.mix(7) == 7 * 7 + 3 * 7 + {nonce_int}, ltoext.mix(7)
    print("ltoext ok", ltoext.mix(7))
"""
    + ONE_TARBALL
)
LTO_FILES = {
    "setup.py": "from setuptools import Extension, setup\n"
    "setup(name='ltoext', version='1.0.0', ext_modules=[Extension('ltoext', ['mod.c', 'poly.c'])])\n",
    # poly() is hidden and defined in another translation unit: only LTO can inline it into mix() and drop it
    "poly.c": '__attribute__((visibility("hidden"))) long poly(long x) '
    "{{ return x * x + 3 * x + {nonce_int}; }}\n",
    "mod.c": """#define PY_SSIZE_T_CLEAN
#include <Python.h>
__attribute__((visibility("hidden"))) long poly(long x);
static PyObject *mix(PyObject *self, PyObject *arg) {
    long x = PyLong_AsLong(arg);
    if (x == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(poly(x));
}
static PyMethodDef methods[] = {{"mix", mix, METH_O, "x*x + 3x + k"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "ltoext", NULL, -1, methods};
PyMODINIT_FUNC PyInit_ltoext(void) { return PyModule_Create(&mod); }
""",
}


def _poly_project(tmp_path: Path, name: str, recipe: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A tiny C extension's sdist in a new offline mirror and its recipe in a new recipe directory: poly.c and
    the recipe get a constant new in every run, so BuildKit and the artifact cache must build. (mirror,
    recipes)."""
    import uuid

    nonce_int = int(uuid.uuid4().hex[:6], 16)
    mirror, recipes = tmp_path / "mirror", tmp_path / "recipes"
    offline_mirror(mirror)
    recipes.mkdir()
    sources = {k: v.format(nonce_int=nonce_int) if k == "poly.c" else v for k, v in files.items()}
    f, sha = tarball(f"{name}-1.0.0", sources, mirror)
    (recipes / f"{name}.yaml").write_text(recipe.format(fname=f, sha=sha, nonce_int=nonce_int))
    return mirror, recipes


def test_lto_builds_link_through_the_native_lto_plugin_and_match_plain_emulation(engine, tmp_path):
    """-flto in an accelerated stage: the native cc1 writes GIMPLE objects, the native cross ld loads the
    prefix's own (native) LTO plugin, which runs the native lto-wrapper and lto1. The wheel is verified and
    smoke-tested like any other, and its code equals the plain-QEMU build's, where all of that is emulated."""
    mirror, recipes = _poly_project(tmp_path, "ltoext", LTO_RECIPE, LTO_FILES)
    code = {}
    for mode in ("accelerated", "qemu"):
        out = tmp_path / mode
        cp = rvport(
            "build",
            "ltoext",
            "--recipes",
            str(recipes),
            "--mirror",
            str(mirror),
            "--offline",
            "--output",
            str(out),
            "--profile",
            "rvv256",
            "--tag",
            "test",
            "--mode",
            mode,
        )
        assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
        (st,) = json.loads((out / "result.json").read_text())["stages"]
        assert st["mode"] == mode and st["status"] == "ok"
        assert st["verify"]["ok"] and st["smoke"]["status"] == "passed", st
        whl = next((out / "artifacts" / "ltoext").glob("*.whl"))
        with zipfile.ZipFile(whl) as z:
            (so,) = [n for n in z.namelist() if n.endswith(".so")]
            elf = ELFFile(io.BytesIO(z.read(so)))
            names = [s.name for s in elf.iter_sections()]
            assert not [n for n in names if n.startswith(".gnu.lto_")], names
            symbols = {sym.name for sym in elf.get_section_by_name(".symtab").iter_symbols()}
            assert "mix" in symbols and "poly" not in symbols, "poly() was not inlined across files by LTO"
            code[mode] = _exec_sections(z.read(so))
    assert code["accelerated"] == code["qemu"]


AR_RECIPE = (
    """\
schema: 1
name: arext
kind: python-wheel
modes: [qemu, accelerated]
build_tree: memory
env:
  CFLAGS: -O2 ${{RVPORT_CFLAGS}}
build:
  - echo "src is $(awk '$2 == "/src" {{print $3}}' /proc/mounts)"
  # a static library made by the archiver that PATH gives by its plain name, as CMake's and make's rules do
  - cc $CFLAGS -fPIC -c poly.c -o poly.o
  - ar rcs libpoly.a poly.o
  - ranlib libpoly.a
  - echo "archiver $(readlink -f "$(command -v ar)") $(readlink -f "$(command -v ranlib)")"
  - echo "archive $(sha256sum libpoly.a)"
  - python3 -m pip wheel --no-deps --no-build-isolation --no-index --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel}}
smoke:
  script: |
    import arext
    assert arext.mix(5) == 5 * 5 + {nonce_int}, arext.mix(5)
    print("arext ok", arext.mix(5))
"""
    + ONE_TARBALL
)
AR_FILES = {
    "setup.py": "from setuptools import Extension, setup\n"
    "setup(name='arext', version='1.0.0',\n"
    "      ext_modules=[Extension('arext', ['mod.c'], extra_objects=['libpoly.a'])])\n",
    "poly.c": '__attribute__((visibility("hidden"))) long poly(long x) {{ return x * x + {nonce_int}; }}\n',
    "mod.c": LTO_FILES["mod.c"].replace("ltoext", "arext").replace("x*x + 3x + k", "x*x + k"),
}


def test_the_archiver_is_the_native_one_and_writes_the_archive_of_plain_emulation(engine, tmp_path):
    """`ar` and `ranlib` by their plain names are the prefix's native cross binutils in an accelerated stage
    (CMake finds its archiver by name on PATH; the stage's own would archive a library's objects emulated)
    and the stage's own in a qemu one. The archive is the same file in both, and so is the extension's
    code. The recipe's `build_tree: memory` puts /src on a tmpfs in both modes."""
    mirror, recipes = _poly_project(tmp_path, "arext", AR_RECIPE, AR_FILES)
    code, archive, archiver = {}, {}, {}
    for mode in ("accelerated", "qemu"):
        out = tmp_path / mode
        cp = rvport(
            "build", "arext", "--recipes", str(recipes), "--mirror", str(mirror), "--offline",
            "--output", str(out), "--profile", "rvv256", "--tag", "test", "--mode", mode,
        )  # fmt: skip
        assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
        (st,) = json.loads((out / "result.json").read_text())["stages"]
        assert st["mode"] == mode and st["status"] == "ok"
        assert st["verify"]["ok"] and st["smoke"]["status"] == "passed", st
        log = (out / "logs" / "arext.log").read_text()
        # BuildKit's log interleaves the shell's trace (stderr) and the output: a value is found in either
        assert set(re.findall(r"src is (\S+)$", log, re.M)) == {"tmpfs"}, log[-3000:]
        archiver[mode] = set(re.findall(r"archiver (/\S+) (/\S+)$", log, re.M))
        archive[mode] = set(re.findall(r"archive ([0-9a-f]{64})  libpoly\.a$", log, re.M))
        whl = next((out / "artifacts" / "arext").glob("*.whl"))
        with zipfile.ZipFile(whl) as z:
            (so,) = [n for n in z.namelist() if n.endswith(".so")]
            code[mode] = _exec_sections(z.read(so))
    xtc = "/opt/xtc/bin/riscv64-linux-gnu-"
    assert archiver["accelerated"] == {(xtc + "ar", xtc + "ranlib")}, archiver
    (qemu_ar,) = archiver["qemu"]
    assert not any(p.startswith("/opt/xtc/") for p in qemu_ar), archiver
    assert len(archive["accelerated"]) == 1 and archive["accelerated"] == archive["qemu"], archive
    assert code["accelerated"] == code["qemu"]
