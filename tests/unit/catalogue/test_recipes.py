"""Recipe loading: the shipped catalogue, and every kind of bad input with file, line and hint."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from rvport.catalogue.recipe_file import recipe_schema
from rvport.catalogue.recipes import default_recipes_dir, load_catalogue
from rvport.errors import ExitCode, RecipeError, UsageError
from rvport.resources import builtin
from rvport.sources.cache import sha256_file
from tests.fixtures.schemas import validate

GOOD = """\
schema: 1
name: {name}
kind: python-wheel
build: [echo build]
outputs: [{{glob: "*.whl", type: wheel}}]
versions:
  - version: "1.0"
    sources:
      - name: sdist
        pypi: {{project: {name}, version: "1.0"}}
        sha256: {digest}
{extra}"""


def write(root: Path, name: str, extra: str = "", digest: str = "a" * 64, text: str | None = None) -> Path:
    p = root / f"{name}.yaml"
    p.write_text(text if text is not None else GOOD.format(name=name, digest=digest, extra=extra))
    return p


def problems(root: Path) -> list:
    with pytest.raises(RecipeError) as ei:
        load_catalogue(root)
    assert ei.value.exit_code == ExitCode.RECIPE_INVALID
    return ei.value.problems


def test_shipped_catalogue_validates_against_the_json_schema():
    root = default_recipes_dir()
    files = sorted(root.glob("*.yaml"))
    assert {f.stem for f in files} >= {
        "msgspec",
        "sentencepiece",
        "tiktoken",
        "torch",
        "vllm",
        "glide-ffi",
        "semantic-router",
    }
    for f in files:
        validate(yaml.safe_load(f.read_text()), recipe_schema())
    cat = load_catalogue(root)
    assert len(cat.names) == len(files)


def test_shipped_pins_are_the_published_ones():
    cat = load_catalogue()
    assert (
        cat.default("msgspec").sources[0].sha256
        == "a0d57d3ca7734542eb6861e72d974ab051e6cf73ea6b01b263f77170593362be"
    )
    assert cat.default("sentencepiece").version == "0.2.2"
    assert cat.resolve("sentencepiece==0.2.3").sources[0].sha256 == (
        "21618ad31f0453a1ebf5ec58defed99758d54af0b670546ecac639ddd8b86fbd"
    )
    assert (
        cat.default("tiktoken").sources[0].sha256
        == "231dec90efcdccf1b565a1416107736f1e09b1a08fe736ef9d6363e626d03874"
    )
    assert (
        cat.default("vllm").sources[0].sha256
        == "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"
    )
    glide = cat.default("glide-ffi").sources[0]
    assert glide.commit == "180f3883f8c98bbf6647e3da4660edcbc091c5bc" and glide.sha256 is None
    assert glide.tree == "sha256:a7a3a3c1a41f1313934af91c95378527ff6164fa5fb3d968048176c88907f506"
    assert glide.exclude == ()
    router = cat.default("semantic-router").sources[0]
    assert router.commit == "9afc5a421886f44085f9070a8fbd878b80724f64"
    assert router.tree == "sha256:ec07873d67dfdd61c6bb4ab34160c05af9820391a01b09efe4ce835593bd1a9c"
    assert "src/semantic-router/.cache/ml-models/" in router.exclude


def test_every_git_source_of_the_catalogue_is_pinned_by_commit_and_tree():
    """Trust on first use is for the user's own recipes (`rvport pin`), never for the built-in catalogue."""
    git = [
        (r.ref, s)
        for vs in load_catalogue().recipes.values()
        for r in vs
        for s in r.sources
        if s.kind.value == "git"
    ]
    assert git
    for ref, s in git:
        assert s.commit and len(s.commit) == 40, ref
        assert s.tree and s.tree.startswith("sha256:") and len(s.tree) == 71, ref


def test_every_shipped_patch_and_lock_file_matches_its_pin():
    cat = load_catalogue()
    for versions in cat.recipes.values():
        for r in versions:
            for pf in (*r.patches, *r.lockfiles):
                assert sha256_file(pf.path) == pf.sha256, pf.rel


def test_sentencepiece_022_patch_drops_the_abseil_clone():
    sp = load_catalogue().resolve("sentencepiece==0.2.2")
    text = sp.patches[0].path.read_text()
    assert "third_party/abseil-cpp/CMakeLists.txt" in text and "FetchContent_Populate" in text
    assert sp.hermetic and sp.is_default


def test_unknown_key_is_reported_with_its_line(tmp_path):
    write(tmp_path, "a", extra="    colour: blue\n")
    (p,) = problems(tmp_path)
    assert p.file.endswith("a.yaml") and p.line == 12
    assert "unknown key 'colour'" in p.message and "allowed keys" in p.hint


def test_bad_digest_is_reported_with_its_line_and_a_hint(tmp_path):
    write(tmp_path, "a", digest="abc123")
    (p,) = problems(tmp_path)
    assert p.line == 11 and "sha256" in p.message and "64 lowercase hex" in p.hint


def test_yaml_syntax_error_has_a_line(tmp_path):
    write(tmp_path, "a", text="schema: 1\nname: a\nkind: [python-wheel\n")
    (p,) = problems(tmp_path)
    assert "YAML syntax error" in p.message and p.line is not None


def test_unknown_dependency(tmp_path):
    write(tmp_path, "a", extra="    depends: [nothere]\n")
    (p,) = problems(tmp_path)
    assert "unknown recipe 'nothere'" in p.message and p.line == 12


def test_dependency_cycle(tmp_path):
    write(tmp_path, "a", extra="    depends: [b]\n")
    write(tmp_path, "b", extra="    depends: [a]\n")
    (p,) = problems(tmp_path)
    assert "dependency cycle: a -> b -> a" in p.message


def test_all_problems_of_a_run_are_reported_together(tmp_path):
    write(tmp_path, "a", digest="xyz")
    write(tmp_path, "b", extra="    colour: blue\n")
    write(tmp_path, "c", text="schema: 2\nname: c\n")
    probs = problems(tmp_path)
    files = {Path(p.file).name for p in probs}
    assert files == {"a.yaml", "b.yaml", "c.yaml"}
    assert len(probs) >= 4  # c: wrong schema, missing kind, missing versions


def test_name_must_match_file(tmp_path):
    write(tmp_path, "a", text=GOOD.format(name="zzz", digest="a" * 64, extra=""))
    (p,) = problems(tmp_path)
    assert "differs from its file name" in p.message


def test_missing_patch_file(tmp_path):
    write(tmp_path, "a", extra=f"    patches:\n      - file: a/x.patch\n        sha256: {'b' * 64}\n")
    (p,) = problems(tmp_path)
    assert "does not exist" in p.message


def test_versions_default_and_selection(tmp_path):
    text = GOOD.format(name="a", digest="a" * 64, extra="") + textwrap.indent(
        textwrap.dedent("""\
        - version: "2.0"
          hermetic: false
          sources:
            - name: sdist
              pypi: {project: a, version: "2.0"}
        - version: "1.5"
          sources:
            - name: sdist
              pypi: {project: a, version: "1.5"}
    """),
        "  ",
    )
    write(tmp_path, "a", text=text)
    cat = load_catalogue(tmp_path)
    assert [r.version for r in cat.recipes["a"]] == ["2.0", "1.5", "1.0"]
    assert cat.default("a").version == "1.5"  # newest hermetic
    assert cat.resolve("a==2.0").version == "2.0"
    with pytest.raises(UsageError, match="no version '9'"):
        cat.resolve("a==9")
    with pytest.raises(UsageError, match="unknown recipe"):
        cat.resolve("b")


def test_schema_file_is_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(recipe_schema())
    for name in ("plan", "result", "base"):
        path = builtin("schemas", f"{name}.schema.json")
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


@pytest.mark.parametrize("where", ["top", "version"])
def test_a_recipe_may_not_set_qemu_cpu(tmp_path, where):
    """The profile's QEMU CPU model is what every emulated stage runs as (its /proc/cpuinfo is what build
    systems
    read); a recipe that set its own would build for another ISA than the profile's."""
    if where == "top":
        text = GOOD.format(name="a", digest="a" * 64, extra="").replace(
            "build: [echo build]\n", "env:\n  CFLAGS: -O2\n  QEMU_CPU: max\nbuild: [echo build]\n"
        )
        line = 6
    else:
        text = GOOD.format(name="a", digest="a" * 64, extra="    env:\n      QEMU_CPU: rv64\n")
        line = 13
    write(tmp_path, "a", text=text)
    (p,) = problems(tmp_path)
    assert p.file.endswith("a.yaml") and p.line == line, (p.line, p.message)
    assert "env sets QEMU_CPU" in p.message and "/proc/cpuinfo" in p.message
    assert "--profile" in p.hint


@pytest.mark.parametrize(
    "toolchain, line, says, hint",
    [
        # rust: debian-rustc-web without its packages: native, qemu and accelerated stages would have no
        # rustc-web
        (
            "toolchain:\n  debian: [rustc-web]\n  rust: debian-rustc-web\n",
            6,
            "toolchain rust: debian-rustc-web needs cargo-web in toolchain.debian",
            "add cargo-web to toolchain.debian",
        ),
        (
            "toolchain:\n  rust: debian-rustc-web\n",
            5,
            "needs rustc-web and cargo-web in toolchain.debian",
            "add rustc-web, cargo-web",
        ),
        # rustc-web installed, but cross stages would add Debian's rustc and cargo, which conflict with it
        (
            "toolchain:\n  debian: [cmake, rustc-web, cargo-web]\n",
            5,
            "toolchain.debian installs rustc-web and cargo-web but rust: is not set (debian)",
            "rust: debian-rustc-web",
        ),
        (
            "toolchain:\n  debian: [cargo-web]\n  rust: debian\n",
            5,
            "toolchain.debian installs cargo-web but rust: is debian",
            "rust: debian-rustc-web",
        ),
    ],
)
def test_rust_and_its_debian_packages_must_agree(tmp_path, toolchain, line, says, hint):
    text = GOOD.format(name="a", digest="a" * 64, extra="").replace(
        "build: [echo build]\n", toolchain + "build: [echo build]\n"
    )
    write(tmp_path, "a", text=text)
    (p,) = problems(tmp_path)
    assert p.file.endswith("a.yaml") and p.line == line, (p.line, p.message)
    assert says in p.message and hint in p.hint, (p.message, p.hint)


def test_a_version_toolchain_is_checked_merged_with_the_top_one(tmp_path):
    """rust: at the top, the packages in a version's toolchain: one recipe, no problem; a version that lists
    other packages (a version's debian replaces the top one's) is refused at its own line."""
    top = "toolchain:\n  rust: debian-rustc-web\n  debian: [rustc-web, cargo-web]\n"
    text = GOOD.format(name="a", digest="a" * 64, extra="    toolchain: {debian: [cmake]}\n").replace(
        "build: [echo build]\n", top + "build: [echo build]\n"
    )
    write(tmp_path, "a", text=text)
    (p,) = problems(tmp_path)
    assert p.line == 15 and "needs rustc-web and cargo-web" in p.message, (p.line, p.message)
    write(tmp_path, "a", text=text.replace("    toolchain: {debian: [cmake]}\n", ""))
    assert load_catalogue(tmp_path).resolve("a").toolchain.rust == "debian-rustc-web"


@pytest.mark.parametrize(
    "entries, line, says",
    [
        (
            "    files:\n      - {file: a/x.go, sha256: '" + "b" * 64 + "', dest: cmd/main.go}\n"
            "      - {file: a/y.go, sha256: '" + "b" * 64 + "', dest: ./cmd/main.go}\n",
            14,
            "file 'a/y.go' goes to 'cmd/main.go', where file 'a/x.go' goes too",
        ),
        (
            "    lockfiles:\n      - {file: a/Cargo.lock, sha256: '" + "b" * 64 + "'}\n"
            "    files:\n      - {file: a/x.go, sha256: '" + "b" * 64 + "', dest: Cargo.lock}\n",
            15,
            "file 'a/x.go' goes to 'Cargo.lock', where lockfile 'a/Cargo.lock' goes too",
        ),
    ],
)
def test_two_files_with_one_dest_are_refused_on_load(tmp_path, entries, line, says):
    (tmp_path / "a").mkdir()
    for name in ("x.go", "y.go", "Cargo.lock"):
        (tmp_path / "a" / name).write_text("x\n")
    write(tmp_path, "a", extra=entries)
    (p,) = problems(tmp_path)
    assert p.line == line and says in p.message, (p.line, p.message)
    assert "a dest of its own" in p.hint


@pytest.mark.parametrize(
    "top, version, line",
    [
        ("", "    env: {CFLAGS: -O2, CARGO_HOME: /root/.cargo}\n", 13),
        ("env:\n  CARGO_HOME: /root/.cargo\n", "", 5),
    ],
)
def test_a_vendoring_cargo_recipe_may_not_set_cargo_home(tmp_path, top, version, line):
    """The planner's CARGO_HOME (the tree's cargo home with the vendored-source replacement) would be
    overridden by the recipe's env, and cargo would go to the network: refused on load. Without vendoring it
    is the recipe's own business."""
    text = GOOD.format(name="a", digest="a" * 64, extra="    vendor: cargo\n" + version).replace(
        "build: [echo build]\n", top + "build: [echo build]\n"
    )
    write(tmp_path, "a", text=text)
    (p,) = problems(tmp_path)
    assert p.line == line and "env sets CARGO_HOME, but this version vendors its crates" in p.message, (
        p.line,
        p.message,
    )
    assert "remove CARGO_HOME" in p.hint
    write(tmp_path, "a", text=text.replace("    vendor: cargo\n", ""))
    assert load_catalogue(tmp_path).resolve("a").env["CARGO_HOME"] == "/root/.cargo"


def test_lock_file_names_are_written_once():
    """Which lock file each vendoring reads is model.LOCK_NAMES; no other module spells the names."""
    import ast

    import rvport
    from rvport.catalogue.model import LOCK_NAMES

    pkg = Path(rvport.__file__).resolve().parent
    found = sorted(
        f"{p.relative_to(pkg)}:{n.lineno}"
        for p in pkg.rglob("*.py")
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.Constant) and n.value in LOCK_NAMES.values()
    )
    assert [f.split(":")[0] for f in found] == ["catalogue/model.py", "catalogue/model.py"], found
