"""Prepared trees, patches, lock files, pin and the CLI, against a loopback server and tiny real archives."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from tests.fixtures.hosttools import needs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fixtures.httpserver import Route, serve  # noqa: E402

from rvport.catalogue.recipes import load_catalogue  # noqa: E402
from rvport.errors import ExitCode, IntegrityError  # noqa: E402
from rvport.sources import Cache, FetchOptions, insert_pin, pin_recipe, prepare_tree  # noqa: E402
from tests.fixtures.cli import rvport_process


def targz(files: dict[str, str], top: str | None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


MAIN = targz({"hello.c": "int main(void) {\n    return 1;\n}\n", "README": "demo\n"}, "demo-1.0")
DEP = targz({"dep.h": "#define DEP 1\n"}, "dep-2.0")
GOOD_PATCH = textwrap.dedent("""\
    --- a/hello.c
    +++ b/hello.c
    @@ -1,3 +1,3 @@
     int main(void) {
    -    return 1;
    +    return 0;
     }
""")
BAD_PATCH = GOOD_PATCH.replace("return 1;", "return 42;").replace("return 0;", "return 7;")
LOCK = "# a lock file\n"


def write_recipes(
    root: Path,
    base: str,
    *,
    patch: str = GOOD_PATCH,
    main_sha: str | None = None,
    patch_sha: str | None = None,
) -> Path:
    (root / "demo").mkdir(parents=True, exist_ok=True)
    (root / "demo" / "fix.patch").write_text(patch)
    (root / "demo" / "demo.lock").write_text(LOCK)
    text = textwrap.dedent(f"""\
        schema: 1
        name: demo
        kind: go-binary  # not a wheel kind: `rvport fetch` adds no tool (auditwheel) from the package index
        build:
          - make
        versions:
          # the only version
          - version: "1.0"
            sources:
              - name: main
                url: {base}/demo-1.0.tar.gz
              - name: dep   # an extra source
                url: {base}/dep-2.0.tar.gz
                sha256: {sha(DEP)}
                dest: third_party/dep
            patches:
              - file: demo/fix.patch
                sha256: {patch_sha or sha(patch.encode())}
            lockfiles:
              - file: demo/demo.lock
                sha256: {sha(LOCK.encode())}
                dest: locks/demo.lock
        """)
    if main_sha:
        text = text.replace("demo-1.0.tar.gz\n", f"demo-1.0.tar.gz\n        sha256: {main_sha}\n")
    (root / "demo.yaml").write_text(text)
    return root


def routes() -> dict[str, Route]:
    return {"/demo-1.0.tar.gz": Route(body=MAIN), "/dep-2.0.tar.gz": Route(body=DEP)}


def options(tmp_path: Path, **kw) -> FetchOptions:
    return FetchOptions(cache=Cache(root=tmp_path / "cache"), backoff=0.01, **kw)


def test_prepared_tree_is_built_once_and_reused(tmp_path):
    with serve(routes()) as srv:
        root = write_recipes(tmp_path / "recipes", srv.base, main_sha=sha(MAIN))
        recipe = load_catalogue(root).resolve("demo")
        pt = prepare_tree(recipe, options(tmp_path))
        assert not pt.reused and pt.path.parent == tmp_path / "cache" / "trees"
        assert (pt.path / "hello.c").read_text().count("return 0;") == 1  # patched, top dir stripped
        assert (pt.path / "third_party" / "dep" / "dep.h").is_file()  # extra source at dest
        assert (pt.path / "locks" / "demo.lock").read_text() == LOCK
        assert not list(pt.path.rglob("*.orig")) and not list(pt.path.rglob("*.rej"))
        assert [f.origin for f in pt.fetched] == ["network", "network"]
        meta = (pt.path.parent / f"{pt.key}.json").read_text()
        assert '"from": "network"' in meta
        again = prepare_tree(recipe, options(tmp_path))
        assert (
            again.reused and again.path == pt.path and [f.origin for f in again.fetched] == ["cache", "cache"]
        )
        assert srv.hits("/demo-1.0.tar.gz") == 1
    assert not [p for p in (tmp_path / "cache" / "trees").iterdir() if p.name.startswith(".")]


def test_patch_that_does_not_apply_is_a_clear_error(tmp_path):
    with serve(routes()) as srv:
        root = write_recipes(tmp_path / "recipes", srv.base, patch=BAD_PATCH, main_sha=sha(MAIN))
        recipe = load_catalogue(root).resolve("demo")
        with pytest.raises(IntegrityError) as e:
            prepare_tree(recipe, options(tmp_path))
    msg = e.value.render()
    assert "demo/fix.patch does not apply" in msg and "Hunk #1 FAILED" in msg
    assert e.value.exit_code == ExitCode.INTEGRITY
    trees = tmp_path / "cache" / "trees"
    assert [p.name for p in trees.iterdir() if not p.name.startswith(".")] == []
    assert not [p for p in trees.iterdir() if p.is_dir()]  # no half-made tree left behind


def test_patch_whose_digest_does_not_match_its_pin_is_refused(tmp_path):
    root = write_recipes(tmp_path / "recipes", "http://127.0.0.1:9", main_sha=sha(MAIN), patch_sha="e" * 64)
    recipe = load_catalogue(root).resolve("demo")
    with pytest.raises(IntegrityError, match="demo/fix.patch does not match its pin"):
        prepare_tree(recipe, options(tmp_path))
    assert not (tmp_path / "cache" / "sha256").exists()  # refused before any download


SMOKE_GO = 'package main\n\nfunc main() { println("smoke") }\n'


def with_files(root: Path, entries: str, content: str = SMOKE_GO) -> Path:
    """The demo recipe with a `files:` list (entries: its YAML items) and demo/smoke.go beside it."""
    (root / "demo" / "smoke.go").write_text(content)
    path = root / "demo.yaml"
    path.write_text(path.read_text() + "    files:\n" + textwrap.indent(textwrap.dedent(entries), " " * 6))
    return root


def test_recipe_files_are_checked_copied_into_the_tree_and_part_of_its_key(tmp_path):
    from rvport.sources.tree import tree_key
    from rvport.verify.provenance import statement

    with serve(routes()) as srv:
        plain = load_catalogue(write_recipes(tmp_path / "plain", srv.base, main_sha=sha(MAIN))).resolve(
            "demo"
        )
        root = with_files(
            write_recipes(tmp_path / "recipes", srv.base, main_sha=sha(MAIN)),
            f"""\
            - file: demo/smoke.go
              sha256: {sha(SMOKE_GO.encode())}
              dest: cmd/smoke/main.go
              note: our smoke program
            """,
        )
        recipe = load_catalogue(root).resolve("demo")
        (f,) = recipe.files
        assert (f.rel, f.dest, f.note) == ("demo/smoke.go", "cmd/smoke/main.go", "our smoke program")
        pt = prepare_tree(recipe, options(tmp_path))
        target = pt.path / "cmd" / "smoke" / "main.go"
        assert target.read_text() == SMOKE_GO and target.stat().st_mode & 0o777 == 0o644
        meta = json.loads((pt.path.parent / f"{pt.key}.json").read_text())
        assert meta["files"] == [
            {
                "file": "demo/smoke.go",
                "sha256": sha(SMOKE_GO.encode()),
                "dest": "cmd/smoke/main.go",
                "note": "our smoke program",
            }
        ]
    digests = {"main": sha(MAIN), "dep": sha(DEP)}
    assert pt.key == tree_key(recipe, digests) != tree_key(plain, digests)
    other = with_files(
        write_recipes(tmp_path / "other", "http://127.0.0.1:9", main_sha=sha(MAIN)),
        f"""\
        - file: demo/smoke.go
          sha256: {sha(b"// v2" + SMOKE_GO.encode())}
          dest: cmd/smoke/main.go
        """,
        "// v2" + SMOKE_GO,
    )
    assert tree_key(load_catalogue(other).resolve("demo"), digests) != pt.key
    # in the plan (and its key), and in the provenance like a lock file
    from rvport.catalogue.profiles import get_profile
    from rvport.host import HostFacts
    from rvport.plan.planner import Request, make_plan

    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    cat = load_catalogue(root)
    plan = make_plan(cat, Request(refs=("demo",), profile=get_profile("rvv256")), host)
    doc = plan.to_json()
    assert doc["stages"][0]["files"] == [f.file_json()]
    plain_plan = make_plan(
        load_catalogue(tmp_path / "plain"), Request(refs=("demo",), profile=get_profile("rvv256")), host
    )
    assert plan.stages[0].key != plain_plan.stages[0].key
    result = {
        "stages": [{"recipe": "demo", "version": "1.0", "sources": [], "artifacts": [], "images": {}}],
        "base_images": {},
        "started": "2026-01-02T00:00:00Z",
        "duration_s": 1,
    }
    deps = {
        d["name"]: d for d in statement(result, doc)["predicate"]["buildDefinition"]["resolvedDependencies"]
    }
    assert deps["demo/file/demo/smoke.go"]["digest"] == {"sha256": sha(SMOKE_GO.encode())}
    assert deps["demo/file/demo/smoke.go"]["annotations"]["dest"] == "cmd/smoke/main.go"


def test_a_recipe_file_that_does_not_match_its_pin_or_would_replace_a_source_file_is_refused(tmp_path):
    from rvport.errors import RecipeError
    from rvport.sources.pin import check_pinned_files

    root = with_files(
        write_recipes(tmp_path / "r1", "http://127.0.0.1:9", main_sha=sha(MAIN)),
        f"""\
        - file: demo/smoke.go
          sha256: {"e" * 64}
          dest: smoke.go
        """,
    )
    recipe = load_catalogue(root).resolve("demo")
    with pytest.raises(IntegrityError, match="file demo/smoke.go does not match its pin"):
        prepare_tree(recipe, options(tmp_path))
    with pytest.raises(IntegrityError) as e:
        check_pinned_files([recipe])  # what `rvport plan` checks
    assert "demo/smoke.go" in e.value.render() and "e" * 64 in e.value.render()
    with serve(routes()) as srv:
        root = with_files(
            write_recipes(tmp_path / "r2", srv.base, main_sha=sha(MAIN)),
            f"""\
            - file: demo/smoke.go
              sha256: {sha(SMOKE_GO.encode())}
              dest: hello.c
            """,
        )
        with pytest.raises(RecipeError, match="would replace hello.c, which the source already has"):
            prepare_tree(load_catalogue(root).resolve("demo"), options(tmp_path))
    assert not [p for p in (tmp_path / "cache" / "trees").iterdir() if p.is_dir()]  # nothing half-made
    # a symlink of the source's at the dest, even a dangling one, is the source's file: never written through
    from rvport.sources.tree import copy_recipe_file

    root = with_files(
        write_recipes(tmp_path / "r3", "http://127.0.0.1:9", main_sha=sha(MAIN)),
        f"""\
        - file: demo/smoke.go
          sha256: {sha(SMOKE_GO.encode())}
          dest: link.go
        """,
    )
    recipe = load_catalogue(root).resolve("demo")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link.go").symlink_to("sub/missing.go")
    with pytest.raises(RecipeError, match="would replace link.go, which the source already has") as e:
        copy_recipe_file(recipe, recipe.files[0], tree)
    assert (
        f"(in {recipe.file}:{recipe.files[0].line})" in e.value.message and recipe.files[0].line
    )  # its line
    assert not (tree / "sub").exists() and os.readlink(tree / "link.go") == "sub/missing.go"
    # a dest outside the tree, or without a file name, is a recipe error with its line
    for dest in ("../smoke.go", "/etc/smoke.go", "cmd/", ".rvport/x"):
        root = with_files(
            write_recipes(tmp_path / f"r-{len(dest)}", "http://127.0.0.1:9"),
            f"""\
            - file: demo/smoke.go
              sha256: {sha(SMOKE_GO.encode())}
              dest: {dest}
            """,
        )
        with pytest.raises(RecipeError) as e:
            load_catalogue(root)
        assert f"dest {dest!r} is not a file path inside the source tree" in e.value.render()
        assert "demo.yaml:" in e.value.render()


def test_pin_writes_the_digest_in_place_and_later_fetches_check_it(tmp_path):
    with serve(routes()) as srv:
        root = write_recipes(tmp_path / "recipes", srv.base)
        path = root / "demo.yaml"
        before = path.read_text()
        recipe = load_catalogue(root).resolve("demo")
        assert recipe.sources[0].sha256 is None
        import datetime as dt

        pinned = pin_recipe(recipe, options(tmp_path), today=dt.date(2026, 1, 2))
        assert [p.source for p in pinned] == ["main"] and pinned[0].sha256 == sha(MAIN)
        after = path.read_text()
        added = [ln for ln in after.splitlines() if ln not in before.splitlines()]
        assert added == [f"        sha256: {sha(MAIN)}", "        recorded: {by: rvport, date: '2026-01-02'}"]
        assert after.splitlines()[pinned[0].line - 1].strip() == f"sha256: {sha(MAIN)}"
        assert "# the only version" in after and "# an extra source" in after  # comments kept
        again = load_catalogue(root).resolve("demo")
        assert again.sources[0].sha256 == sha(MAIN) and again.sources[0].recorded == "2026-01-02"
        assert pin_recipe(again, options(tmp_path)) == []
        # upstream changes the file: a fresh cache now refuses it
        srv.routes["/demo-1.0.tar.gz"] = Route(body=targz({"hello.c": "evil\n"}, "demo-1.0"))
        with pytest.raises(IntegrityError, match="'main'"):
            prepare_tree(again, FetchOptions(cache=Cache(root=tmp_path / "cache2"), backoff=0.01))


def test_insert_pin_handles_nested_mappings_and_end_of_file(tmp_path):
    from rvport.catalogue.model import Source, SourceKind

    text = "versions:\n  - sources:\n      - name: a\n        pypi:\n          project: a\n"
    text += "          version: '1'"
    src = Source(name="a", kind=SourceKind.PYPI, project="a", version="1", sha256=None, line=3)
    out, line = insert_pin(text, src, "f" * 64, "2026-01-02")
    assert out.endswith(
        "version: '1'\n        sha256: " + "f" * 64 + "\n        recorded: {by: rvport, date: '2026-01-02'}\n"
    )
    assert line == 7
    import yaml

    assert yaml.safe_load(out)["versions"][0]["sources"][0]["sha256"] == "f" * 64


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own (tests/fixtures/cli.py)."""
    return rvport_process(args, env={**os.environ, "COLUMNS": "300", **env}, main="app", timeout=120)


def test_cli_fetch_fill_mirror_and_offline(tmp_path):
    with serve(routes()) as srv:
        root = write_recipes(tmp_path / "recipes", srv.base, main_sha=sha(MAIN))
        env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "c1")}
        cp = run_cli("fetch", "--all", "--to", str(tmp_path / "mirror"), env=env)
        assert cp.returncode == 0, cp.stderr
        assert "network" in cp.stdout and sha(MAIN) in cp.stdout and "main" in cp.stdout
    assert (tmp_path / "mirror" / "demo-1.0.tar.gz").is_file()
    assert (tmp_path / "mirror" / "sha256" / sha(DEP)).is_file()
    # air-gapped: a fresh cache, no server, the mirror only
    env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "c2")}
    cp = run_cli("fetch", "demo", "--offline", "--mirror", str(tmp_path / "mirror"), "--tree", env=env)
    assert cp.returncode == 0, cp.stderr
    assert "mirror" in cp.stdout and "tree prepared" in cp.stderr
    # without the mirror: a clear message and the source-unavailable exit code
    env["RVPORT_CACHE_DIR"] = str(tmp_path / "c3")
    cp = run_cli("fetch", "demo", "--offline", env=env)
    assert cp.returncode == ExitCode.SOURCE_UNAVAILABLE, cp.stderr
    assert "--offline forbids the network" in cp.stderr and "--mirror" in cp.stderr


def test_cli_integrity_exit_code(tmp_path):
    with serve(routes()) as srv:
        root = write_recipes(tmp_path / "recipes", srv.base, main_sha="a" * 64)
        env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "c")}
        cp = run_cli("fetch", "demo", env=env)
    assert cp.returncode == ExitCode.INTEGRITY
    assert "expected sha256 " + "a" * 64 in cp.stderr and "actual   sha256 " + sha(MAIN) in cp.stderr


def test_cli_pin(tmp_path):
    with serve(routes()) as srv:
        root = write_recipes(tmp_path / "recipes", srv.base)
        env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "c")}
        cp = run_cli("pin", "demo", env=env)
        assert cp.returncode == 0, cp.stderr
        assert f"sha256 {sha(MAIN)} written" in cp.stdout
        assert load_catalogue(root).resolve("demo").sources[0].sha256 == sha(MAIN)


CRATE_TOML = '[package]\nname = "tiny"\nversion = "0.1.0"\nedition = "2021"\n\n[lib]\npath = "src/lib.rs"\n'
CRATE_LOCK = (
    "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\n"
    'version = 3\n\n[[package]]\nname = "tiny"\nversion = "0.1.0"\n'
)


def host_cargo() -> str | None:
    import shutil

    return shutil.which("cargo") or (
        str(Path.home() / ".cargo/bin/cargo") if (Path.home() / ".cargo/bin/cargo").exists() else None
    )


def cargo_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path.home() / '.cargo/bin'}:{os.environ.get('PATH', '')}", **extra}


@needs("cargo")
def test_cargo_vendoring_writes_an_offline_cargo_home(tmp_path):
    crate = targz({"Cargo.toml": CRATE_TOML, "src/lib.rs": "pub fn one() -> u32 { 1 }\n"}, "tiny-0.1.0")
    root = tmp_path / "recipes"
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "Cargo.lock").write_text(CRATE_LOCK)
    (root / "tiny.yaml").write_text(
        textwrap.dedent(f"""\
        schema: 1
        name: tiny
        kind: cargo-staticlib
        build: [cargo build --release]
        versions:
          - version: "0.1.0"
            sources:
              - name: crate
                url: http://127.0.0.1:9/tiny-0.1.0.tar.gz
                sha256: {sha(crate)}
            lockfiles:
              - file: tiny/Cargo.lock
                sha256: {sha(CRATE_LOCK.encode())}
                dest: Cargo.lock
            vendor: cargo
        """)
    )
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny-0.1.0.tar.gz").write_bytes(crate)
    recipe = load_catalogue(root).resolve("tiny")
    pt = prepare_tree(recipe, options(tmp_path, mirror=mirror, offline=True))
    cfg = (pt.path / ".rvport" / "cargo-home" / "config.toml").read_text()
    assert (
        'replace-with = "vendored-sources"' in cfg
        and 'directory = "vendor"' in cfg
        and "offline = true" in cfg
    )
    assert not (pt.path / ".cargo").exists()  # the source's own config directory is the source's
    assert (pt.path / "Cargo.lock").read_text() == CRATE_LOCK and (pt.path / ".rvport" / "vendor").is_dir()
    from rvport import proc

    proc.run(
        ["cargo", "metadata", "--offline", "--locked", "--format-version", "1"],
        cwd=pt.path,
        capture=True,
        env=cargo_env(CARGO_HOME=str(pt.path / ".rvport" / "cargo-home")),
        timeout=120,
    )


@needs("cargo", "git")
def test_vendored_crates_and_the_sources_own_cargo_config_both_apply_offline(tmp_path):
    """GLIDE's shape: a root .cargo/config.toml and ffi/.cargo/config.toml with [env] settings, the crate in
    ffi/ with a pinned lock file and one dependency (a git one, so no registry is needed here). After
    vendoring, with the git repository gone and cargo offline, a build from ffi/ with CARGO_HOME at rvport's
    cargo home
    compiles the vendored dependency and both [env] settings in; the source's config files are untouched."""
    import json
    import shutil

    from rvport import proc
    from rvport.plan.planner import BUILD_DIR
    from rvport.sources.tree import CARGO_HOME

    home = tmp_path / "host-cargo-home"  # the host's own cargo home stays out of it
    home.mkdir()
    dep = tmp_path / "tinydep"
    (dep / "src").mkdir(parents=True)
    (dep / "Cargo.toml").write_text('[package]\nname = "tinydep"\nversion = "0.3.0"\nedition = "2021"\n')
    (dep / "src" / "lib.rs").write_text("pub fn answer() -> u32 { 42 }\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for cmd in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "tinydep"]):
        subprocess.run(git + cmd, cwd=dep, check=True, capture_output=True)
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=dep, check=True, capture_output=True, text=True
    ).stdout.strip()
    files = {
        ".cargo/config.toml": '[env]\nROOT_SETTING = "from-the-root-config"\n',
        "ffi/.cargo/config.toml": '[env]\nFFI_SETTING = "from-the-ffi-config"\n',
        "ffi/Cargo.toml": (
            '[package]\nname = "glidey"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
            f'tinydep = {{ git = "{dep.as_uri()}", rev = "{rev}" }}\n'
        ),
        "ffi/src/main.rs": (
            'fn main() { println!("{} {} {}", env!("ROOT_SETTING"), env!("FFI_SETTING"), '
            "tinydep::answer()); }\n"
        ),
    }
    scratch = tmp_path / "lock"
    for rel, text in files.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_text(text)
    proc.run(
        [host_cargo(), "generate-lockfile"],
        cwd=scratch / "ffi",
        capture=True,
        env=cargo_env(CARGO_HOME=str(home)),
        timeout=300,
    )
    lock = (scratch / "ffi" / "Cargo.lock").read_text()
    crate = targz(files, "glidey-0.1.0")
    root = tmp_path / "recipes"
    (root / "glidey").mkdir(parents=True)
    (root / "glidey" / "Cargo.lock").write_text(lock)
    (root / "glidey.yaml").write_text(
        textwrap.dedent(f"""\
        schema: 1
        name: glidey
        kind: cargo-staticlib
        build: [cd ffi && cargo run --release --locked]
        versions:
          - version: "0.1.0"
            sources:
              - name: glidey
                url: http://127.0.0.1:9/glidey-0.1.0.tar.gz
                sha256: {sha(crate)}
            lockfiles:
              - file: glidey/Cargo.lock
                sha256: {sha(lock.encode())}
                dest: ffi/Cargo.lock
            vendor: cargo
        """)
    )
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "glidey-0.1.0.tar.gz").write_bytes(crate)
    recipe = load_catalogue(root).resolve("glidey")
    os.environ["CARGO_HOME"], saved = str(home), os.environ.get("CARGO_HOME")
    try:
        pt = prepare_tree(recipe, options(tmp_path, mirror=mirror))
    finally:
        os.environ.pop("CARGO_HOME") if saved is None else os.environ.__setitem__("CARGO_HOME", saved)
    for rel in (".cargo/config.toml", "ffi/.cargo/config.toml"):
        assert (pt.path / rel).read_text() == files[rel]
    cfg = (pt.path / CARGO_HOME / "config.toml").read_text()
    assert f'[source."git+{dep.as_uri()}?rev={rev}"]' in cfg and "offline = true" in cfg, cfg
    assert (pt.path / ".rvport" / "vendor" / "tinydep-0.3.0" / "src" / "lib.rs").is_file()
    # the stage: a copy of the tree (the build never writes into the cache), no git repository, no network
    shutil.rmtree(dep)
    shutil.rmtree(home)
    src = tmp_path / "src"
    shutil.copytree(pt.path, src, symlinks=True)
    env = cargo_env(
        CARGO_HOME=str(src / CARGO_HOME), CARGO_NET_OFFLINE="true", CARGO_TARGET_DIR=str(tmp_path / "t")
    )
    cp = proc.run(
        ["cargo", "run", "--release", "--locked", "--offline", "-q"],
        cwd=src / "ffi",
        capture=True,
        env=env,
        timeout=600,
    )
    assert cp.stdout.strip() == "from-the-root-config from-the-ffi-config 42", cp.stdout + cp.stderr
    meta = json.loads(
        proc.run(
            ["cargo", "metadata", "--locked", "--offline", "--format-version", "1"],
            cwd=src / "ffi",
            capture=True,
            env=env,
            timeout=120,
        ).stdout
    )
    (tinydep,) = [p for p in meta["packages"] if p["name"] == "tinydep"]
    assert Path(tinydep["manifest_path"]).is_relative_to(src / ".rvport" / "vendor"), tinydep["manifest_path"]
    # and it is that cargo home that does it: with another one, cargo offline cannot find the dependency
    (tmp_path / "empty-home").mkdir()
    cp = proc.run(
        ["cargo", "metadata", "--locked", "--offline", "--format-version", "1"],
        cwd=src / "ffi",
        capture=True,
        check=False,
        env={**env, "CARGO_HOME": str(tmp_path / "empty-home")},
        timeout=120,
    )
    assert cp.returncode != 0 and "tinydep" in cp.stderr, cp.stderr
    # the stage's CARGO_HOME is that directory under /src
    from rvport.catalogue.profiles import load_profiles
    from rvport.plan.planner import Mode, stage_env

    env = stage_env(recipe, next(iter(load_profiles().values())), Mode.QEMU, 1)
    assert env["CARGO_HOME"] == f"{BUILD_DIR}/.rvport/cargo-home"
