"""No recipe field writes a Dockerfile instruction of its own (issue 28 item 3).

Every template in rvport/resources/dockerfiles is rendered through the code that builds with it (the modes'
stage and toolchain files, the toolchain image of the build, smoke and runtime packages, the smoke stage, the
runtime image, the accelerated prefix) for a recipe that carries an injection payload in one field. Each
hostile recipe is either refused on load (exit 3) or renders with the same instructions, line for line, as
the same recipe with a plain value there."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from rvport.catalogue.kinds import compiles_rust
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.closure import serveenv
from rvport.engine import modes, render, runtime
from rvport.engine import tests as upstream
from rvport.engine.modes import accelerated, cross
from rvport.engine.stage import Toolchain
from rvport.errors import ExitCode, RecipeError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from tests.unit.catalogue.test_recipe_hostile import BASE, write

X86 = HostFacts(arch="x86_64", cpus=8, mem_bytes=32 * 2**30, binfmt_riscv64=True)
RISCV = HostFacts(arch="riscv64", cpus=8, mem_bytes=32 * 2**30)
PROFILE = "rvv256"
TC = "rvport/toolchain:under-test"

PAYLOADS = [
    "x\nRUN id",
    "x\rRUN id",
    "x\r\nRUN id",
    "x \\\nRUN id",
    "x\\",
    "x\\\\",
    "x\nCOPY / /stolen",
    "x\nADD https://example.invalid/p /p",
    'x"\nRUN id\n"',
    'x" && id && "',
    "x' && id && '",
    "$(id)",
    "`id`",
    "${PATH}",
    "<<EOF\nRUN id\nEOF",
    "<<EOF",
    "x\x00y",
    "\x1b[2J\x1b[HFAKE",
    "\x9b2J",
    "x\u2028RUN id",
    "x\x85RUN id",
    "x\x0bRUN id",
    "x\x0cRUN id",
    "a b",
    "# comment",
    "x\\\n",
    "x\n\\",
    "é",
]

# (where, how): "value" replaces the value at the dotted path; "key"/"keyed" add an entry to the mapping at
# the path, with the payload as its key or its value; "item" appends to the list at the path.
FIELDS = [
    ("env", "key"),
    ("env", "keyed"),
    ("versions.0.env", "key"),
    ("versions.0.env", "keyed"),
    ("runtime.env", "key"),
    ("runtime.env", "keyed"),
    ("runtime.check.env", "key"),
    ("runtime.check.env", "keyed"),
    ("toolchain.debian", "item"),
    ("smoke.debian", "item"),
    ("runtime.debian", "item"),
    ("toolchain.base", "value"),
    ("runtime.workdir", "value"),
    ("runtime.tmpfs.0", "value"),
    ("runtime.files.0.dest", "value"),
    ("runtime.files.1.mode", "value"),
    ("runtime.files.0.artifact", "value"),
    ("runtime.user.name", "value"),
    ("runtime.entrypoint.0", "value"),
    ("runtime.entrypoint", "item"),
    ("versions.0.version", "value"),
    ("versions.0.sources.1.dest", "value"),
    ("versions.0.sources.1.cmake_var", "value"),
    ("versions.0.sources.1.pypi.filename", "value"),
    ("versions.0.files.0.dest", "value"),
    ("outputs.0.glob", "value"),
    ("smoke.script", "value"),
    ("description", "value"),
    ("homepage", "value"),
    ("toolchain.go", "value"),
    ("versions.0.sources.0.url", "value"),
    ("versions.0.sources.2.git.tag", "value"),
    ("versions.0.note", "value"),
    (
        "build.0",
        "value",
    ),  # commands are shell by design: they go to the build script, never a Dockerfile line
    ("runtime.check.script", "value"),
]

# what stands in for the payload in the benign twin
BENIGN = {"key": "BENIGN", "keyed": "plain", "item": "benign-pkg"}
BENIGN_VALUE = {
    "toolchain.base": "debian-trixie",
    "runtime.workdir": "/srv",
    "runtime.tmpfs.0": "/run",
    "runtime.files.0.dest": "/app/bin",
    "runtime.files.1.mode": "0700",
    "runtime.files.0.artifact": "app",
    "runtime.user.name": "svc",
    "runtime.entrypoint.0": "/app/start.sh",
    "versions.0.version": "1.1",
    "versions.0.sources.1.dest": "_deps/other",
    "versions.0.sources.1.cmake_var": "OTHER_DIR",
    "versions.0.sources.1.pypi.filename": "extra-2.0.zip",
    "versions.0.files.0.dest": "t.sh",
    "outputs.0.glob": "app*",
    "smoke.script": "#!/bin/sh\ntrue\n",
    "description": "plain",
    "homepage": "https://example.invalid/app",
    "toolchain.go": "go-1.25.14",
    "versions.0.sources.0.url": "https://example.invalid/other-1.0.tar.gz",
    "versions.0.sources.2.git.tag": "v2",
    "versions.0.note": "plain",
    "build.0": "make",
    "runtime.check.script": "true",
}


def hostile(where: str, how: str, payload: str) -> dict:
    doc = copy.deepcopy(BASE)
    doc["modes"] = ["native", "qemu", "cross", "accelerated"]
    *parents, last = [int(p) if p.isdigit() else p for p in where.split(".")]
    node = doc
    for p in parents:
        node = node[p]
    if how == "value":
        node[last] = payload
    elif how == "item":
        node[last].append(payload)
    elif how == "key":
        node[last][payload] = "x"
    else:
        node[last]["GOOD"] = payload
    return doc


def benign(where: str, how: str) -> dict:
    return hostile(where, how, BENIGN_VALUE.get(where) or BENIGN[how])


def render_all(cat) -> dict[str, str]:
    """Every Dockerfile a build of `app` would use, by template and mode, rendered by the code that builds."""
    r = cat.resolve("app")
    out: dict[str, str] = {}
    xtc = accelerated.XtcImage(
        tag="rvport/xtc:under-test", image_id="sha256:" + "1" * 64, platform="linux/amd64", gcc_major="14"
    )
    stage = None
    for mode, host in ((Mode.NATIVE, RISCV), (Mode.QEMU, X86), (Mode.CROSS, X86), (Mode.ACCELERATED, X86)):
        plan = make_plan(cat, Request(refs=("app",), profile=get_profile(PROFILE), mode=mode), host)
        stage = plan.stage("app")
        assert stage.mode is mode
        if mode is Mode.ACCELERATED:
            rendered = accelerated.render_stage(
                toolchain=TC, xtc=xtc, env=stage.env, profile=get_profile(PROFILE)
            )
        else:
            env = SimpleNamespace(
                stage=stage, profile=get_profile(PROFILE), ccache_values=lambda packages: None
            )
            rendered = modes.of(mode).dockerfile(env, Toolchain(tag=TC))
        out[f"{rendered.template} ({mode})"] = rendered.text
    for what, packages in (
        ("build", r.toolchain.debian),
        ("smoke", r.smoke_debian),
        ("runtime", r.runtime.debian),
    ):
        rendered = render.toolchain_dockerfile("rvport/base:under-test", "rv64,v=true", packages)
        out[f"{rendered.template} ({what})"] = rendered.text
        # the toolchain template's install fragment, as it is rendered into it (once per layer, and the rest)
        rendered = render.render("toolchain-install", {"PACKAGES": render.packages_arg(packages)})
        out[f"{rendered.template} ({what})"] = rendered.text
    rendered = cross.render_toolchain(r, "rvport/xbase:under-test")
    out[rendered.template] = rendered.text
    rendered = accelerated.render_prefix(
        "rvport/xbase:under-test", "14", "linux/amd64", rust=compiles_rust(r)
    )
    out[rendered.template] = rendered.text
    install, run = render.smoke_commands(r.kind, r.smoke or "")
    rendered = render.smoke_dockerfile(
        image="rvport/smoke:under-test",
        qemu_cpu="rv64",
        profile=get_profile("rvv256"),
        install=install,
        run=run,
        without_vector_cpu=get_profile("rv64gc").qemu_cpu,
    )
    out[rendered.template] = rendered.text
    rendered = upstream.dockerfile(
        image="rvport/smoke:under-test", qemu_cpu="rv64", profile=get_profile("rvv256")
    )
    out[rendered.template] = rendered.text
    rendered = runtime.dockerfile(stage.runtime, "rvport/runtime-base:under-test", r.ref)
    out[rendered.template] = rendered.text
    # the serving check's environment image: no recipe field reaches it (a tag rvport made, the uid:gid)
    rendered = serveenv.dockerfile("rvport/toolchain:under-test-serve-0", "0:0")
    out[rendered.template] = rendered.text
    return out


CONTINUED = re.compile(r"\\[ \t]*$")


def instructions(text: str) -> list[tuple[str, int]]:
    """The Dockerfile's instructions as a parser sees them: (keyword, physical lines), comments and blank
    lines skipped, `\\` continuations joined, heredoc bodies (<<WORD ... WORD) kept with their instruction."""
    out: list[tuple[str, int]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        start, logical = i, line
        while CONTINUED.search(lines[i]) and i + 1 < len(lines):
            i += 1
            logical += "\n" + lines[i]
        heredocs = logical.split(None, 1)[0].upper() in ("RUN", "COPY", "ADD")  # as BuildKit reads them
        for word in re.findall(r"<<-?[\"']?([A-Za-z_][A-Za-z0-9_]*)", logical) if heredocs else ():
            while i + 1 < len(lines) and lines[i + 1].strip() != word:
                i += 1
            i += 1
        out.append((logical.split(None, 1)[0].upper(), i - start + 1))
        i += 1
    return out


def shape(files: dict[str, str]) -> dict[str, object]:
    return {name: (instructions(text), text.count("\n"), text.count("\r")) for name, text in files.items()}


def templates() -> set[str]:
    return {p.name for p in Path(render.default_dockerfiles_dir()).glob("*" + render.TEMPLATE_SUFFIX)}


def test_the_templates_are_the_ones_rendered_here():
    assert templates() == {
        f"{n}.Dockerfile"
        for n in (
            "toolchain",
            "toolchain-install",
            "build",
            "smoke",
            "runtime",
            "cross",
            "cross-toolchain",
            "accelerated",
            "accelerated-prefix",
            "tests",
            "serve-env",
        )
    }


@pytest.fixture(scope="module")
def benign_shapes(tmp_path_factory):
    shapes = {}
    for where, how in FIELDS:
        root = tmp_path_factory.mktemp("benign")
        write(root, benign(where, how))
        files = render_all(load_catalogue(root, builtin=False))
        assert {name.split(" ")[0] for name in files} == templates()
        shapes[(where, how)] = shape(files)
    return shapes


@pytest.mark.parametrize("payload", PAYLOADS, ids=repr)
def test_no_field_writes_an_instruction(tmp_path, benign_shapes, payload):
    refused, rendered = [], []
    for n, (where, how) in enumerate(FIELDS):
        root = tmp_path / str(n)
        doc = hostile(where, how, payload)
        write(root, doc)
        try:
            cat = load_catalogue(root, builtin=False)
        except RecipeError as e:
            assert e.exit_code == ExitCode.RECIPE_INVALID
            assert all(p.file and p.file.startswith(str(root)) for p in e.problems)
            refused.append(where)
            continue
        files = render_all(cat)
        got = shape(files)
        want = benign_shapes[(where, how)]
        for name in want:
            assert got[name] == want[name], (where, how, name, files[name])
        for name, text in files.items():
            assert "\x00" not in text and "\r" not in text and "\x1b" not in text, (where, name)
        rendered.append(where)
    # the fields that land inside an instruction never take a line break
    if re.search("[\n\r\x0b\x0c\x85\u2028]", payload):
        inside = {
            "toolchain.debian",
            "smoke.debian",
            "runtime.debian",
            "runtime.workdir",
            "runtime.files.0.dest",
        }
        assert inside <= set(refused), rendered
