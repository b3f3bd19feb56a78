"""A tiny C++ extension with RVV intrinsics (python-wheel kind) built for rvv256 under QEMU: the wheel
carries zvl256b, its smoke test runs it with VLEN 256 and dies with SIGILL on the rv64gc CPU
(`smoke: without_vector: sigill`), and `rvport verify --profile rvv128` refuses it. A smoke test that never
reaches the vector code passes without V, which fails the stage (exit 7): the silent scalar fallback."""

from __future__ import annotations

import json
import zipfile

import jsonschema
import pytest

from rvport import manifest
from rvport.verify.elf import read_elf_bytes

from .conftest import ONE_TARBALL, offline_mirror, rvport, tarball

pytestmark = pytest.mark.integration

CXX = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <riscv_vector.h>

// sum(a[i] * b[i]) with RVV 1.0 intrinsics: strip-mined loop, one reduction at the end
static float dot(const float *a, const float *b, size_t n) {
    size_t vlmax = __riscv_vsetvlmax_e32m1();
    vfloat32m1_t acc = __riscv_vfmv_v_f_f32m1(0.0f, vlmax);
    for (size_t i = 0; i < n;) {
        size_t vl = __riscv_vsetvl_e32m1(n - i);
        vfloat32m1_t va = __riscv_vle32_v_f32m1(a + i, vl);
        vfloat32m1_t vb = __riscv_vle32_v_f32m1(b + i, vl);
        acc = __riscv_vfmacc_vv_f32m1_tu(acc, va, vb, vl);
        i += vl;
    }
    vfloat32m1_t zero = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    return __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32m1_f32m1(acc, zero, vlmax));
}

// dot(n): a = 0..n-1, b = 2 everywhere, so the answer is n * (n - 1)
static PyObject *py_dot(PyObject *, PyObject *args) {
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n) || n < 0) return nullptr;
    float *a = static_cast<float *>(PyMem_Malloc(sizeof(float) * (n + 1)));
    float *b = static_cast<float *>(PyMem_Malloc(sizeof(float) * (n + 1)));
    if (!a || !b) { PyMem_Free(a); PyMem_Free(b); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < n; i++) { a[i] = static_cast<float>(i); b[i] = 2.0f; }
    float r = dot(a, b, static_cast<size_t>(n));
    PyMem_Free(a); PyMem_Free(b);
    return PyFloat_FromDouble(r);
}

// elements of 32 bits in one vector register: VLEN / 32
static PyObject *py_vlmax(PyObject *, PyObject *) {
    return PyLong_FromSize_t(__riscv_vsetvlmax_e32m1());
}

static PyMethodDef methods[] = {
    {"dot", py_dot, METH_VARARGS, "RVV dot product of 0..n-1 and 2s"},
    {"vlmax_e32", py_vlmax, METH_NOARGS, "VLEN / 32"},
    {nullptr, nullptr, 0, nullptr},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rvvdot", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_rvvdot(void) { return PyModule_Create(&module); }
"""
PROJECT = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
    "setup.py": 'from setuptools import Extension, setup\n\nsetup(name="rvvdot", version="1.0.0", '
    'ext_modules=[Extension("rvvdot", ["rvvdot.cpp"], language="c++")])\n',
    "rvvdot.cpp": CXX,
}
RECIPE = (
    """\
schema: 1
name: rvvdot
kind: python-wheel
env:
  CFLAGS: -O2 ${{RVPORT_CFLAGS}}
  CXXFLAGS: -O2 ${{RVPORT_CFLAGS}}
build:
  - python3 -m pip wheel --no-deps --no-build-isolation --no-index --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel, isa: profile}}
smoke:
  without_vector: sigill
  script: |
    import rvvdot
    assert rvvdot.dot(100) == 9900.0, rvvdot.dot(100)
    assert rvvdot.vlmax_e32() == 8, rvvdot.vlmax_e32()   # VLEN 256: QEMU runs the profile's CPU
    print("rvvdot ok: dot", rvvdot.dot(100), "vlmax_e32", rvvdot.vlmax_e32())
"""
    + ONE_TARBALL
)


def test_cxx_rvv_extension_for_rvv256(engine, tmp_path):
    mirror, recipes, out = tmp_path / "mirror", tmp_path / "recipes", tmp_path / "out"
    offline_mirror(mirror)
    recipes.mkdir()
    f, s = tarball("rvvdot-1.0.0", PROJECT, mirror)
    (recipes / "rvvdot.yaml").write_text(RECIPE.format(fname=f, sha=s))
    cp = rvport(
        "build",
        "rvvdot",
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
        "qemu",
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    (st,) = doc["stages"]
    assert st["mode"] == "qemu" and st["env"]["QEMU_CPU"].startswith("rv64,v=true,vlen=256")
    assert st["env"]["CXXFLAGS"] == "-O2 -march=rv64gcv_zvfh_zvl256b -mabi=lp64d -ffile-prefix-map=/src=."
    assert st["verify"]["ok"]
    assert st["smoke"]["status"] == "passed"
    assert "rvvdot ok: dot 9900.0 vlmax_e32 8" in "\n".join(st["smoke"]["output"])
    wv = st["smoke"]["without_vector"]
    assert (wv["expected"], wv["observed"], wv["exit_status"], wv["status"]) == (
        "sigill",
        "sigill",
        132,
        "passed",
    )
    assert wv["cpu"].startswith("rv64,v=false") and "v" not in wv["isa"].split("_")[0][4:], wv

    (wheel,) = (out / "artifacts" / "rvvdot").glob("rvvdot-1.0.0-*riscv64.whl")  # repaired to a manylinux tag
    with zipfile.ZipFile(wheel) as z:
        (so,) = [n for n in z.namelist() if n.endswith(".so")]
        facts = read_elf_bytes(z.read(so))
    assert facts.is_riscv and facts.float_abi == "double"
    assert "zvl256b" in facts.extensions and "v" in facts.extensions, facts.arch

    ok = rvport("verify", "artifacts", str(out / "artifacts"), "--profile", "rvv256")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    refused = rvport("verify", "artifacts", str(out / "artifacts"), "--profile", "rvv128")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "zvl256b" in refused.stdout + refused.stderr


def test_a_smoke_test_that_never_runs_the_vector_code_fails_the_stage(engine, tmp_path):
    """The same extension, but the smoke test only imports it (no vector instruction runs at import): it
    passes on the CPU without V, where a vector build's test must die with SIGILL."""
    mirror, recipes, out = tmp_path / "mirror", tmp_path / "recipes", tmp_path / "out"
    offline_mirror(mirror)
    recipes.mkdir()
    f, s = tarball("rvvdot-1.0.0", PROJECT, mirror)
    text = RECIPE.format(fname=f, sha=s)
    start = text.index("    assert rvvdot.dot(100)")
    text = text[:start] + '    print("imported", rvvdot.__name__)\n' + text[text.index("versions:") :]
    (recipes / "rvvdot.yaml").write_text(text)
    args = ["--recipes", str(recipes), "--mirror", str(mirror), "--offline", "--output", str(out)]
    cp = rvport("build", "rvvdot", *args, "--profile", "rvv256", "--tag", "test", "--mode", "qemu")
    assert cp.returncode == 7, cp.stdout + cp.stderr
    assert "must die with SIGILL" in cp.stdout + cp.stderr and "silent scalar" in cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    (st,) = doc["stages"]
    wv = st["smoke"]["without_vector"]
    assert st["smoke"]["status"] == "passed" and (wv["status"], wv["observed"]) == ("failed", "pass")
    assert not (out / "artifacts" / "rvvdot").exists()  # a failed check keeps nothing
