"""semantic-router's riscv64 stub edit, proven on a tiny Go tree of ours laid out like the router's, with
upstream's pair of build constraints and a candle stub that lags its cgo API the way v0.3.0's does
(tests/fixtures/go-stub-constraints). For linux/riscv64 with cgo on, package route does not type-check
before; after the recipe's pinned patch, `go mod vendor` and the recipe's edit commands (run on the vendored
copies, as the stage does) it builds from the vendored tree; amd64 and arm64 with cgo keep their cgo sources
and never see our file; a stub whose first line or functions differ stops the edit; a patch that does not
fit is exit 4."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rvport import proc
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import ExitCode, IntegrityError
from rvport.resources import builtin
from rvport.sources.tree import apply_patch, verify_pinned
from tests.fixtures.hosttools import needs

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "go-stub-constraints"
ROUTER = Path("src/semantic-router")  # the router's module, inside the tree
VENDORED = "src/semantic-router/vendor/github.com/vllm-project/semantic-router"
CANDLE = "github.com/vllm-project/semantic-router/candle-binding"
NLP = "github.com/vllm-project/semantic-router/nlp-binding"
OURS = "rvport_riscv64_stubs.go"
needs_go = needs("go")


@pytest.fixture(scope="module")
def recipe():
    return load_catalogue(builtin("recipes")).resolve("semantic-router")


@pytest.fixture(scope="module")
def stub_patch(recipe):
    (pf,) = [p for p in recipe.patches if p.rel.endswith("riscv64-candle-stub.patch")]
    verify_pinned(pf, "patch")
    return pf


def edit_commands(recipe) -> str:
    """The recipe's stub edit: its build commands from the `cd` into the vendored bindings up to the `cd`
    back to the router's module, as one script."""
    build = list(recipe.build)
    start = build.index(f"cd {VENDORED}")
    end = build.index("cd /src/src/semantic-router")
    assert start < end and all("go build" not in c for c in build[start:end])
    return "\n".join(build[start:end]) + "\n"


def go(
    cwd: Path, tmp_path: Path, arch: str, *args: str, cgo: str = "1", mod: str = "vendor", check: bool = False
):
    env = dict(
        os.environ,
        GOOS="linux",
        GOARCH=arch,
        CGO_ENABLED=cgo,
        GOFLAGS=f"-mod={mod}",
        GOPROXY="off",
        GOWORK="off",
        GOTOOLCHAIN="local",
        GOCACHE=str(tmp_path / "gocache"),
        GOPATH=str(tmp_path / "gopath"),
    )
    return proc.run(["go", *args], cwd=cwd, env=env, capture=True, check=check, timeout=300)


def prepared(tmp_path: Path, name: str, patch=None) -> Path:
    """A copy of the fixture as tree preparation leaves it: patched (if given), then vendored."""
    tree = tmp_path / name
    shutil.copytree(FIXTURE, tree)
    if patch is not None:
        apply_patch(patch, tree)
    go(tree / ROUTER, tmp_path, "riscv64", "mod", "vendor", mod="mod", check=True)
    return tree


def run_edit(tree: Path, script: str):
    return proc.run(["sh", "-eu", "-c", script], cwd=tree, capture=True, check=False, timeout=60)


def files(tree: Path, tmp_path: Path, arch: str, cgo: str = "1") -> dict[str, list[str]]:
    """Per binding package: the Go files the toolchain selects (plain and cgo) for linux/<arch>."""
    cp = go(
        tree / ROUTER,
        tmp_path,
        arch,
        "list",
        "-f",
        '{{.ImportPath}} {{join .GoFiles ","}} {{join .CgoFiles ","}}',
        CANDLE,
        NLP,
        cgo=cgo,
        check=True,
    )
    out = {}
    for line in cp.stdout.splitlines():
        pkg, plain, cgo_files = (line.split(" ") + ["", ""])[:3]
        out[pkg.rsplit("/", 1)[-1]] = sorted(f for f in (plain.split(",") + cgo_files.split(",")) if f)
    return out


@needs_go
def test_stub_edit_makes_riscv64_cgo_build(tmp_path, recipe, stub_patch):
    # upstream as it is: neither the cgo source nor the stub, only the file without a constraint
    plain = prepared(tmp_path, "plain")
    before = go(plain / ROUTER, tmp_path, "riscv64", "build", "./route")
    assert before.returncode != 0, before.stdout + before.stderr
    assert (
        "undefined: candle_binding.Classify" in before.stderr
        and "undefined: nlp_binding.Score" in before.stderr
    )
    assert files(plain, tmp_path, "riscv64") == {
        "candle-binding": ["common.go"],
        "nlp-binding": ["common.go"],
    }

    # the constraint edit alone selects the stubs, but the candle stub lags its cgo API
    cp = run_edit(plain, edit_commands(recipe))
    assert cp.returncode == 0, cp.stderr
    alone = go(plain / ROUTER, tmp_path, "riscv64", "build", "./route")
    assert alone.returncode != 0 and "undefined: MultiModalEmbeddingOutput" in alone.stderr, alone.stderr

    # the pinned patch, vendored, then the edit on the vendored copies: it builds
    tree = prepared(tmp_path, "router", stub_patch)
    assert (tree / VENDORED / "candle-binding" / OURS).is_file()
    cp = run_edit(tree, edit_commands(recipe))
    assert cp.returncode == 0, cp.stderr
    assert files(tree, tmp_path, "riscv64") == {
        "candle-binding": ["common.go", OURS, "semantic-router_mock.go"],
        "nlp-binding": ["common.go", "nlp_binding_mock.go"],
    }
    after = go(tree / ROUTER, tmp_path, "riscv64", "build", "./route")
    assert after.returncode == 0, after.stdout + after.stderr
    # the edit touched only the vendored copies the build reads
    assert (tree / "candle-binding" / "semantic-router_mock.go").read_text() == (
        FIXTURE / "candle-binding" / "semantic-router_mock.go"
    ).read_text()

    # what upstream builds elsewhere is unchanged: cgo sources on amd64/arm64, without our file
    for arch in ("amd64", "arm64"):
        assert files(tree, tmp_path, arch) == {
            "candle-binding": ["common.go", "semantic-router.go"],
            "nlp-binding": ["common.go", "nlp_binding.go"],
        }, arch
    assert files(tree, tmp_path, "amd64", cgo="0")["candle-binding"] == [
        "common.go",
        "semantic-router_mock.go",
    ]


@needs_go
def test_stub_edit_stops_on_another_stub(tmp_path, recipe, stub_patch):
    tree = prepared(tmp_path, "router", stub_patch)
    mock = tree / VENDORED / "nlp-binding" / "nlp_binding_mock.go"
    mock.write_text(mock.read_text().replace("//go:build windows || !cgo", "//go:build !cgo", 1))
    cp = run_edit(tree, edit_commands(recipe))
    assert cp.returncode != 0
    assert "nlp-binding/nlp_binding_mock.go: its first line is not upstream's stub constraint" in cp.stderr

    other = prepared(tmp_path, "other", stub_patch)
    mock = other / VENDORED / "candle-binding" / "semantic-router_mock.go"
    mock.write_text(mock.read_text().replace("func ClassifyFeedbackText(", "func classifyFeedback(", 1))
    cp = run_edit(other, edit_commands(recipe))
    assert cp.returncode != 0 and "no func ClassifyFeedbackText to replace" in cp.stderr, cp.stderr


def test_stub_patch_that_does_not_fit_is_exit_4(tmp_path, stub_patch):
    tree = tmp_path / "router"
    shutil.copytree(FIXTURE, tree)
    apply_patch(stub_patch, tree)
    with pytest.raises(IntegrityError) as again:  # already there: refused, not applied twice
        apply_patch(stub_patch, tree)
    assert again.value.exit_code == ExitCode.INTEGRITY
    assert "0.3.0-riscv64-candle-stub.patch" in str(again.value)

    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    theirs = other / "candle-binding" / OURS  # a file of that name upstream: never overwritten
    theirs.write_text("package candle_binding\n")
    with pytest.raises(IntegrityError) as exists:
        apply_patch(stub_patch, other)
    assert exists.value.exit_code == ExitCode.INTEGRITY and "already exists" in str(exists.value)
    assert theirs.read_text() == "package candle_binding\n"
    assert not list(other.rglob("*.rej")) and not list(other.rglob("*.orig"))
