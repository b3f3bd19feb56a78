"""manylinux repair in the riscv64 stage, for real: a tiny extension that links a shared library of its own
(installed in the stage only) is repaired by the pinned auditwheel, which grafts the library into the wheel;
the wheel carries the tag rvport verify computes, and imports in a clean riscv64 container that lacks the
library. With --manylinux off the same wheel stays linux_riscv64."""

from __future__ import annotations

import json

import pytest

from .conftest import ONE_TARBALL, offline_mirror, rvport, tarball

pytestmark = pytest.mark.integration

PROJECT = {
    "tinyadd/tinyadd.c": "int tiny_add(int a, int b) { return a + b; }\n",
    "tinygraft/__init__.py": "from ._core import add\n",
    "tinygraft/_core.c": (
        "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\nint tiny_add(int a, int b);\n"
        "static PyObject *add(PyObject *self, PyObject *args) {\n"
        '  int a, b;\n  if (!PyArg_ParseTuple(args, "ii", &a, &b)) return NULL;\n'
        "  return PyLong_FromLong(tiny_add(a, b));\n}\n"
        'static PyMethodDef methods[] = {{"add", add, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};\n'
        'static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods};\n'
        "PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&mod); }\n"
    ),
    "setup.py": (
        "from setuptools import Extension, setup\n"
        "setup(name='tinygraft', version='1.0.0', packages=['tinygraft'],\n"
        "      ext_modules=[Extension('tinygraft._core', ['tinygraft/_core.c'], libraries=['tinyadd'],\n"
        "                             library_dirs=['/usr/local/lib'])])\n"
    ),
}
RECIPE = (
    """\
schema: 1
name: tinygraft
kind: python-wheel
env:
  CFLAGS: -O2 ${{RVPORT_CFLAGS}}
build:
  # a library of the project's own, installed in the stage only: the wheel must carry it to work elsewhere
  - gcc -O2 -shared -fPIC -Wl,-soname,libtinyadd.so.1 -o /usr/local/lib/libtinyadd.so.1 tinyadd/tinyadd.c
  - ln -sf libtinyadd.so.1 /usr/local/lib/libtinyadd.so && ldconfig
  - python3 -m pip wheel --no-deps --no-build-isolation --no-index --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel, isa: baseline}}
smoke:
  script: |
    import glob
    import tinygraft
    assert not glob.glob("/usr/local/lib/libtinyadd*"), "the library must come from the wheel"
    assert tinygraft.add(2, 3) == 5
    print("tinygraft ok", tinygraft.add(40, 2))
"""
    + ONE_TARBALL
)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("graft")
    mirror, recipes = offline_mirror(root / "mirror"), root / "recipes"
    recipes.mkdir()
    fname, sha = tarball("tinygraft-1.0.0", PROJECT, mirror)
    (recipes / "tinygraft.yaml").write_text(RECIPE.format(fname=fname, sha=sha))
    return root


def _build(project, out, *extra):
    return rvport(
        "build",
        "tinygraft",
        "--recipes",
        str(project / "recipes"),
        "--mirror",
        str(project / "mirror"),
        "--offline",
        "--output",
        str(out),
        "--profile",
        "rvv256",
        "--tag",
        "test",
        "--mode",
        "qemu",
        *extra,
    )


def test_a_library_of_the_projects_own_is_grafted_and_the_tags_agree(engine, project, tmp_path):
    out = tmp_path / "out"
    cp = _build(project, out)
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    (st,) = json.loads((out / "result.json").read_text())["stages"]
    (repair,) = st["manylinux"]
    assert repair["repaired"] and repair["platform"] == "manylinux_2_31_riscv64", repair
    assert [g.split("/")[0] for g in repair["grafted"]] == ["tinygraft.libs"], repair
    assert repair["grafted"][0].split("/")[1].startswith("libtinyadd-")
    (art,) = st["artifacts"]
    assert art["path"] == f"tinygraft/{repair['wheel']}" and repair["wheel"].endswith(
        "manylinux_2_31_riscv64.whl"
    )
    (report,) = st["verify"]["reports"]
    assert report["artifacts"][0]["wheel"]["manylinux"] == "manylinux_2_31_riscv64"
    assert st["smoke"]["status"] == "passed" and "tinygraft ok 42" in st["smoke"]["output"]
    assert not (out / "artifacts" / "tinygraft" / ".rvport-repair").exists()


def test_manylinux_off_keeps_the_wheel_as_built(engine, project, tmp_path):
    out = tmp_path / "out"
    cp = _build(project, out, "--manylinux", "off", "--no-smoke")
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    (st,) = json.loads((out / "result.json").read_text())["stages"]
    assert st["manylinux"] == []
    (art,) = st["artifacts"]
    assert art["path"].endswith("-linux_riscv64.whl")
