"""semantic-router's riscv64 stub patch, proven on a tiny Go module of ours with upstream's pair of build
constraints (tests/fixtures/go-stub-constraints): for linux/riscv64 with cgo on, package route does not
type-check before the recipe's pinned patch and builds after it; amd64 and arm64 keep their cgo sources; a
patch that does not fit is exit 4."""

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

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "go-stub-constraints"
needs_go = pytest.mark.skipif(proc.which("go") is None, reason="needs a Go toolchain on the host")


@pytest.fixture(scope="module")
def stub_patch():
    r = load_catalogue(builtin("recipes")).resolve("semantic-router")
    (pf,) = [p for p in r.patches if p.rel.endswith("riscv64-stubs.patch")]
    verify_pinned(pf, "patch")
    return pf


def go(tree: Path, tmp_path: Path, arch: str, *args: str, cgo: str = "1", check: bool = False):
    env = dict(os.environ, GOOS="linux", GOARCH=arch, CGO_ENABLED=cgo, GOFLAGS="-mod=mod", GOPROXY="off",
               GOWORK="off", GOTOOLCHAIN="local", GOCACHE=str(tmp_path / "gocache"),
               GOPATH=str(tmp_path / "gopath"))
    return proc.run(["go", *args], cwd=tree, env=env, capture=True, check=check, timeout=300)


def files(tree: Path, tmp_path: Path, arch: str, cgo: str = "1") -> dict[str, list[str]]:
    """Per binding package: the Go files the toolchain selects (plain and cgo) for linux/<arch>."""
    cp = go(tree, tmp_path, arch, "list", "-f", "{{.ImportPath}} {{join .GoFiles \",\"}} {{join .CgoFiles \",\"}}",
            "example.org/candle", "example.org/nlp", cgo=cgo, check=True)
    out = {}
    for line in cp.stdout.splitlines():
        pkg, plain, cgo_files = (line.split(" ") + ["", ""])[:3]
        out[pkg] = sorted(f for f in (plain.split(",") + cgo_files.split(",")) if f)
    return out


@needs_go
def test_stub_patch_makes_riscv64_cgo_build_type_check(tmp_path, stub_patch):
    tree = tmp_path / "router"
    shutil.copytree(FIXTURE, tree)

    before = go(tree, tmp_path, "riscv64", "build", "./route")
    assert before.returncode != 0, before.stdout + before.stderr
    err = before.stderr
    assert "undefined: candle_binding.Classify" in err and "undefined: nlp_binding.Score" in err, err
    # neither the cgo source nor the stub: only the file without a constraint
    assert files(tree, tmp_path, "riscv64") == {"example.org/candle": ["common.go"], "example.org/nlp": ["common.go"]}

    apply_patch(stub_patch, tree)

    assert files(tree, tmp_path, "riscv64") == {
        "example.org/candle": ["common.go", "semantic-router_mock.go"],
        "example.org/nlp": ["common.go", "nlp_binding_mock.go"]}
    after = go(tree, tmp_path, "riscv64", "build", "./route")
    assert after.returncode == 0, after.stdout + after.stderr
    # what upstream builds elsewhere is unchanged: cgo sources on amd64/arm64, stubs without cgo
    for arch in ("amd64", "arm64"):
        assert files(tree, tmp_path, arch) == {
            "example.org/candle": ["common.go", "semantic-router.go"],
            "example.org/nlp": ["common.go", "nlp_binding.go"]}, arch
    assert files(tree, tmp_path, "amd64", cgo="0")["example.org/candle"] == ["common.go", "semantic-router_mock.go"]


def test_stub_patch_that_does_not_fit_is_exit_4(tmp_path, stub_patch):
    tree = tmp_path / "router"
    shutil.copytree(FIXTURE, tree)
    apply_patch(stub_patch, tree)
    with pytest.raises(IntegrityError) as again:          # already widened: refused, not applied twice
        apply_patch(stub_patch, tree)
    assert again.value.exit_code == ExitCode.INTEGRITY
    assert "0.3.0-riscv64-stubs.patch" in str(again.value)

    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    mock = other / "nlp-binding" / "nlp_binding_mock.go"
    mock.write_text(mock.read_text().replace("//go:build windows || !cgo", "//go:build !cgo", 1))
    with pytest.raises(IntegrityError) as changed:         # upstream's line differs: the hunk is rejected
        apply_patch(stub_patch, other)
    assert changed.value.exit_code == ExitCode.INTEGRITY
    assert "FAILED" in str(changed.value)
    assert not list(other.rglob("*.rej")) and not list(other.rglob("*.orig"))
