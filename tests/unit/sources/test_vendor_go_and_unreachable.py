"""`vendor: go` (go mod vendor on the host, into the prepared tree) and sources that cannot be reached:
each failure says what happened and points at the way out (--mirror, a host that reaches the proxy)."""

from __future__ import annotations

import hashlib
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rvport.catalogue.recipes import load_catalogue
from rvport.errors import ExitCode, RecipeError, SourceUnavailable
from rvport.sources import Cache, FetchOptions, prepare_tree
from rvport.sources.tree import go_modules, vendored_go_modules
from tests.fixtures.cli import rvport_process
from tests.fixtures.hosttools import needs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_tree import sha, targz  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
needs_go = needs("go")


def recipe(
    tmp_path: Path, files: dict[str, str], *, url: str = "http://127.0.0.1:9/m-1.0.tar.gz", vendor: str = "go"
) -> tuple[Path, Path]:
    blob = targz(files, "m-1.0")
    root, mirror = tmp_path / "recipes", tmp_path / "mirror"
    root.mkdir()
    mirror.mkdir()
    (mirror / url.rsplit("/", 1)[1]).write_bytes(blob)
    (root / "m.yaml").write_text(
        textwrap.dedent(f"""\
        schema: 1
        name: m
        kind: go-binary
        build: [go build ./...]
        versions:
          - version: "1.0"
            sources:
              - name: src
                url: {url}
                sha256: {sha(blob)}
            vendor: {vendor}
        """)
    )
    return root, mirror


def opts(tmp_path: Path, mirror: Path | None, **kw) -> FetchOptions:
    return FetchOptions(cache=Cache(root=tmp_path / "cache"), mirror=mirror, backoff=0.01, **kw)


MAIN = {
    "go.mod": "module example.org/app\n\ngo 1.18\n\nrequire example.org/dep v0.0.0\n\n"
    "replace example.org/dep => ./dep\n",
    "main.go": 'package main\n\nimport "example.org/dep"\n\nfunc main() { println(dep.Answer()) }\n',
    "dep/go.mod": "module example.org/dep\n\ngo 1.18\n",
    "dep/dep.go": "package dep\n\nfunc Answer() int { return 42 }\n",
}


@needs_go
def test_vendor_go_copies_local_replacements_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomod"))
    root, mirror = recipe(tmp_path, MAIN)
    pt = prepare_tree(load_catalogue(root).resolve("m"), opts(tmp_path, mirror, offline=True))
    modules = (pt.path / "vendor" / "modules.txt").read_text()
    assert "# example.org/dep v0.0.0 => ./dep" in modules
    assert (pt.path / "vendor" / "example.org" / "dep" / "dep.go").is_file()
    assert [p.relative_to(pt.path).as_posix() for p in go_modules(pt.path)] == [".", "dep"]


@needs_go
def test_vendor_go_says_when_the_module_proxy_is_unreachable(tmp_path, monkeypatch):
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomod"))
    monkeypatch.setenv("GOPROXY", "http://127.0.0.1:9")  # refused at once: nothing listens there
    monkeypatch.setenv("GOSUMDB", "off")
    files = {
        "go.mod": "module example.org/app\n\ngo 1.18\n\nrequire example.org/far v1.0.0\n",
        "go.sum": "example.org/far v1.0.0 h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
        "example.org/far v1.0.0/go.mod h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
        "main.go": 'package main\n\nimport _ "example.org/far"\n\nfunc main() {}\n',
    }
    root, mirror = recipe(tmp_path, files)
    t0 = time.monotonic()
    with pytest.raises(SourceUnavailable) as e:
        prepare_tree(load_catalogue(root).resolve("m"), opts(tmp_path, mirror))
    assert time.monotonic() - t0 < 30
    text = e.value.render()
    assert "go mod vendor" in text and "the Go module proxy cannot be reached" in text
    assert "GOPROXY" in e.value.hint


# a repository with two modules, as semantic-router has 15: the one the build compiles (app/) and another
# whose requirement no proxy serves here (tools/)
TWO = {
    **{f"app/{k}": v for k, v in MAIN.items()},
    "app/go.sum": "",
    "tools/go.mod": "module example.org/tools\n\ngo 1.18\n\nrequire example.org/far v1.0.0\n",
    "tools/go.sum": "example.org/far v1.0.0 h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
    "tools/main.go": 'package main\n\nimport _ "example.org/far"\n\nfunc main() {}\n',
}


def with_lock(root: Path, path: str, digest: str) -> None:
    f = root / "m.yaml"
    f.write_text(
        f.read_text().replace(
            "    vendor: go\n", f"    lock: {{path: {path}, sha256: '{digest}'}}\n    vendor: go\n"
        )
    )


@needs_go
def test_vendor_go_only_in_the_module_its_lock_names(tmp_path, monkeypatch):
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomod"))
    root, mirror = recipe(tmp_path, TWO)
    # every module: tools/ needs a module nothing serves offline
    with pytest.raises(SourceUnavailable, match="in tools failed"):
        prepare_tree(load_catalogue(root).resolve("m"), opts(tmp_path, mirror, offline=True))
    with_lock(root, "app/go.sum", hashlib.sha256(b"").hexdigest())
    r = load_catalogue(root).resolve("m")
    pt = prepare_tree(r, opts(tmp_path, mirror, offline=True))
    assert "# example.org/dep v0.0.0 => ./dep" in (pt.path / "app" / "vendor" / "modules.txt").read_text()
    assert not (pt.path / "tools" / "vendor").exists() and not (pt.path / "vendor").exists()
    assert [p.relative_to(pt.path).as_posix() for p in vendored_go_modules(r, pt.path)] == ["app"]


def test_vendor_go_lock_without_go_mod_beside_it_is_a_recipe_error(tmp_path):
    files = {**TWO, "docs/go.sum": ""}
    root, mirror = recipe(tmp_path, files)
    with_lock(root, "docs/go.sum", hashlib.sha256(b"").hexdigest())
    with pytest.raises(RecipeError, match="lock docs/go.sum has no go.mod beside it") as e:
        prepare_tree(load_catalogue(root).resolve("m"), opts(tmp_path, mirror, offline=True))
    assert e.value.exit_code == ExitCode.RECIPE_INVALID
    line = next(i for i, ln in enumerate((root / "m.yaml").read_text().splitlines(), 1) if "lock:" in ln)
    assert f"(in {root / 'm.yaml'}:{line})" in e.value.message  # the lock's own line
    assert not [p for p in (tmp_path / "cache" / "trees").iterdir() if p.is_dir()]


def test_vendor_go_without_go_mod_is_a_recipe_error(tmp_path):
    root, mirror = recipe(tmp_path, {"README": "no module here\n"})
    with pytest.raises(RecipeError, match="has no go.mod"):
        prepare_tree(load_catalogue(root).resolve("m"), opts(tmp_path, mirror, offline=True))


def test_unreachable_url_points_at_the_mirror_quickly(tmp_path):
    """The fetcher's error as `rvport build` shows it, for a host that does not answer (no long waits)."""
    root, _ = recipe(tmp_path, MAIN, url="http://127.0.0.1:9/gone-1.0.tar.gz", vendor="cargo")
    t0 = time.monotonic()
    with pytest.raises(SourceUnavailable) as e:
        prepare_tree(load_catalogue(root).resolve("m"), opts(tmp_path, None, retries=1))
    assert time.monotonic() - t0 < 10
    assert "download of http://127.0.0.1:9/gone-1.0.tar.gz failed" in e.value.message
    assert "--mirror DIR" in e.value.hint


def test_build_of_a_heavy_recipe_offline_points_at_the_mirror(tmp_path):
    """`rvport build glide-ffi --offline` with nothing cached: exit 5 before any docker, naming --mirror."""
    t0 = time.monotonic()
    cp = rvport_process(
        [
            "--ci",
            "build",
            "glide-ffi",
            "--offline",
            "--mode",
            "qemu",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--output",
            str(tmp_path / "out"),
        ],
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert cp.returncode == ExitCode.SOURCE_UNAVAILABLE, cp.stdout + cp.stderr
    err = " ".join(cp.stderr.split())
    assert "valkey-io/valkey-glide" in err and "--offline forbids the network" in err
    assert "--mirror DIR" in err and "rvport fetch --all --to DIR" in err
    assert time.monotonic() - t0 < 60
