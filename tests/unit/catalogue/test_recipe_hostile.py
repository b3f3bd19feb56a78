"""Hostile recipes (issue 28): every field that reaches a Dockerfile, a shell line, a path or the terminal is
checked when the recipe loads, with file, line and exit 3; documents that would exhaust the loader (deep
nesting, aliases, unhashable keys, special files, huge files) are located errors too. Each hostile recipe is
made here, from a good one."""

from __future__ import annotations

import copy
import hashlib
import os
import re
import threading
from pathlib import Path

import pytest
import yaml

from rvport.catalogue import yamlsrc
from rvport.catalogue.recipes import load_catalogue
from rvport.catalogue.schema import pattern
from rvport.errors import ExitCode, RecipeError

SHIPPED = b"echo shipped\n"

BASE: dict = {
    "schema": 1,
    "name": "app",
    "description": "a good recipe\nover two lines",
    "kind": "go-binary",
    "toolchain": {"debian": ["golang-go", "libc6-dev"]},
    "env": {"CGO_ENABLED": "1"},
    "build": ["go build -o $RVPORT_OUT/app ."],
    "outputs": [{"glob": "app", "type": "executable"}],
    "smoke": {"script": "#!/bin/sh\n/artifacts/app -h\n", "debian": ["ca-certificates"]},
    "runtime": {
        "user": {"name": "app", "uid": 10001},
        "debian": ["ca-certificates"],
        "tmpfs": ["/tmp"],
        "workdir": "/app",
        "env": {"APP_MODE": "serve"},
        "files": [
            {"artifact": "app", "dest": "/app/app"},
            {"file": "app/start.sh", "sha256": hashlib.sha256(SHIPPED).hexdigest(), "dest": "/app/start.sh"},
        ],
        "entrypoint": ["/app/start.sh"],
        "check": {"script": "true", "env": {"ROUTE": "/"}},
    },
    "versions": [
        {
            "version": "1.0",
            "note": "the first",
            "env": {"GOFLAGS": "-mod=vendor"},
            "sources": [
                {
                    "name": "src",
                    "url": "https://example.invalid/app-1.0.tar.gz",
                    "sha256": "a" * 64,
                },
                {
                    "name": "extra",
                    "pypi": {"project": "extra", "version": "2.0", "filename": "extra-2.0.tar.gz"},
                    "sha256": "b" * 64,
                    "dest": "_deps/extra",
                },
                {
                    "name": "lib",
                    "git": {"repo": "https://example.invalid/lib", "commit": "c" * 40, "tag": "v1"},
                    "tree": "sha256:" + "d" * 64,
                },
            ],
            "files": [
                {"file": "app/start.sh", "sha256": hashlib.sha256(SHIPPED).hexdigest(), "dest": "s.sh"}
            ],
        }
    ],
}


# libyaml's emitter where PyYAML has it (the hostile recipes are written a thousand times; the Python emitter
# was a third of test_dockerfile_injection's time): the same documents, read back by rvport's own loader
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write(root: Path, doc: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "app").mkdir(exist_ok=True)
    (root / "app" / "start.sh").write_bytes(SHIPPED)
    path = root / f"{doc['name']}.yaml"
    path.write_text(yaml.dump(doc, Dumper=_DUMPER, sort_keys=False, allow_unicode=False, width=1000))
    return path


def problems(root: Path) -> list:
    with pytest.raises(RecipeError) as ei:
        load_catalogue(root, builtin=False)
    assert ei.value.exit_code == ExitCode.RECIPE_INVALID
    for p in ei.value.problems:
        assert p.file and p.file.startswith(str(root)), p
    return ei.value.problems


def test_the_good_recipe_loads(tmp_path):
    write(tmp_path, BASE)
    r = load_catalogue(tmp_path, builtin=False).resolve("app")
    assert r.runtime.workdir == "/app" and r.sources[1].filename == "extra-2.0.tar.gz"


def with_value(path: str, value):
    """BASE with the value at a dotted path (list indexes as numbers) replaced."""
    doc = copy.deepcopy(BASE)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = doc
    for p in parents:
        node = node[p]
    node[last] = value
    return doc


NEWLINE_ENDED = [
    ("name", "app\n"),
    ("versions.0.version", "1.0\n"),
    ("versions.0.sources.0.sha256", "a" * 64 + "\n"),
    ("versions.0.sources.2.git.commit", "c" * 40 + "\n"),
    ("versions.0.sources.2.tree", "sha256:" + "d" * 64 + "\n"),
    ("versions.0.sources.1.pypi.version", "2.0\n"),
    ("versions.0.sources.1.pypi.project", "extra\n"),
    ("runtime.user.name", "app\n"),
    ("runtime.files.1.sha256", hashlib.sha256(SHIPPED).hexdigest() + "\n"),
]


@pytest.mark.parametrize("path,value", NEWLINE_ENDED, ids=[p for p, _ in NEWLINE_ENDED])
def test_values_ending_in_a_newline_are_refused(tmp_path, path, value):
    doc = with_value(path, value)
    if path == "name":
        doc["name"] = "app\n"
        root = tmp_path
        write(root, {**doc, "name": "app"})  # the file name stays app.yaml
        (root / "app.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
    else:
        write(tmp_path, doc)
    probs = problems(tmp_path)
    assert probs and all(p.line for p in probs), probs


ENV_MAPS = ["env", "versions.0.env", "runtime.env", "runtime.check.env"]
BAD_KEYS = ["A\nRUN id", "A B", "1A", "A=B", "", "A-B", "A\rB", "Ä"]


@pytest.mark.parametrize("where", ENV_MAPS)
@pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
def test_env_keys_are_names(tmp_path, where, key):
    doc = copy.deepcopy(BASE)
    node = doc
    for p in where.split("."):
        node = node[int(p) if p.isdigit() else p]
    node[key] = "x"
    write(tmp_path, doc)
    (p,) = [p for p in problems(tmp_path) if "does not match" in p.message or "control" in p.message][:1]
    assert p.line and p.hint


@pytest.mark.parametrize("where", ENV_MAPS)
@pytest.mark.parametrize("value", ["a\nRUN id", "a\rb", "a\x1b[2Jb", "a\x00", "a\x85", "tab\there"], ids=repr)
def test_env_values_hold_no_control_characters(tmp_path, where, value):
    doc = copy.deepcopy(BASE)
    node = doc
    for p in where.split("."):
        node = node[int(p) if p.isdigit() else p]
    node["GOOD"] = value
    write(tmp_path, doc)
    (p,) = problems(tmp_path)
    assert "control characters" in p.message and p.line
    assert "\x1b" not in p.message and "\n" not in p.message


DEBIAN_LISTS = ["toolchain.debian", "smoke.debian", "runtime.debian"]
BAD_PACKAGES = ["gcc\nRUN id", "gcc'; id; '", "Gcc", "a", "-gcc", "gcc=1.0", "gcc:riscv64", "gcc ", "gcc\n"]


@pytest.mark.parametrize("where", DEBIAN_LISTS)
@pytest.mark.parametrize("pkg", BAD_PACKAGES, ids=repr)
def test_debian_packages_are_debian_names(tmp_path, where, pkg):
    doc = copy.deepcopy(BASE)
    node = doc
    for p in where.split("."):
        node = node[p]
    node.append(pkg)
    write(tmp_path, doc)
    assert problems(tmp_path)


def test_debian_names_that_debian_allows_load(tmp_path):
    doc = with_value("toolchain.debian", ["g++-14", "libstdc++6", "python3.13-dev", "r-base", "0ad"])
    write(tmp_path, doc)
    load_catalogue(tmp_path, builtin=False)


BAD_IMAGE_PATHS = [
    "app",
    "/app\nRUN id",
    "/app dir",
    "/app/../etc",
    "/",
    "/app/",
    "/$HOME",
    "/a\\b",
    "/tmp:exec",
    "/tmp,size=1",
    "/a\tb",
    '/a"b',
]


@pytest.mark.parametrize(
    "where", ["runtime.workdir", "runtime.tmpfs.0", "runtime.files.0.dest", "runtime.entrypoint.0"]
)
@pytest.mark.parametrize("path", BAD_IMAGE_PATHS, ids=repr)
def test_image_paths_are_plain_absolute_paths(tmp_path, where, path):
    doc = with_value(where, path)
    write(tmp_path, doc)
    assert all(p.line for p in problems(tmp_path))


@pytest.mark.parametrize(
    "name", ["../x.tar.gz", "/etc/shadow", "a/b.tar.gz", "..", ".", ".hidden", "x\n", "a b", ""], ids=repr
)
def test_the_pypi_filename_is_one_plain_path_component(tmp_path, name):
    write(tmp_path, with_value("versions.0.sources.1.pypi.filename", name))
    assert problems(tmp_path)


@pytest.mark.parametrize("where", ["versions.0.sources.1.dest", "versions.0.files.0.dest"])
@pytest.mark.parametrize("dest", ["../x", "a/../../x", "/abs", "a b", "a\nb", "a//b", "a/"], ids=repr)
def test_tree_paths_stay_inside_the_tree(tmp_path, where, dest):
    write(tmp_path, with_value(where, dest))
    assert problems(tmp_path)


def test_pinned_files_stay_inside_the_recipe_directory(tmp_path):
    outside = tmp_path / "secret"
    outside.write_bytes(b"root only\n")
    root = tmp_path / "recipes"
    digest = "e" * 64
    cases = {
        "../secret": "not inside the recipe directory",
        str(outside): "does not match",  # absolute: refused by the schema (a relative path)
        "app/link": "not inside the recipe directory",  # a link that leads out
        "app/../../secret": "not inside",
        "app": "not a regular file",  # a directory
        "app/fifo": "not a regular file",
    }
    for i, (name, _) in enumerate(cases.items()):
        doc = copy.deepcopy(BASE)
        doc["name"] = f"app{i}"
        doc["versions"][0]["patches"] = [{"file": name, "sha256": digest}]
        write(root, doc)
    (root / "app" / "link").symlink_to(outside)
    os.mkfifo(root / "app" / "fifo")
    probs = problems(root)
    for i, (name, why) in enumerate(cases.items()):
        mine = [p for p in probs if p.file.endswith(f"app{i}.yaml")]
        assert mine and why in mine[0].message, (name, mine)
        assert hashlib.sha256(b"root only\n").hexdigest() not in str(mine)


def test_a_link_inside_the_recipe_directory_is_fine(tmp_path):
    write(tmp_path, BASE)
    (tmp_path / "app" / "again.sh").symlink_to("start.sh")
    doc = copy.deepcopy(BASE)
    doc["versions"][0]["files"][0]["file"] = "app/again.sh"
    write(tmp_path, doc)
    load_catalogue(tmp_path, builtin=False)


@pytest.mark.parametrize(
    "where",
    [
        "description",
        "homepage",
        "versions.0.note",
        "outputs.0.glob",
        "build.0",
        "smoke.script",
        "runtime.check.script",
    ],
)
@pytest.mark.parametrize(
    "text",
    [
        "\x1b[2J\x1b[HFAKE: all artifacts PASS",
        "a\x07",
        "\x9b31m",
        "a\rb",
        "\x00",
        "\u202eevil",
        "a\u200bb",
        "\u2028",
    ],
    ids=repr,
)
def test_control_characters_in_text_fields_are_refused(tmp_path, where, text):
    write(tmp_path, with_value(where, text))
    probs = problems(tmp_path)
    assert probs and all(p.line for p in probs)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", "".join(p.render() for p in probs))


def test_prose_scripts_and_build_commands_may_span_lines(tmp_path):
    doc = with_value("build", ["set -e\n\tgo build ./...\n", "echo done"])
    doc["versions"][0]["note"] = "line one\nline two\n"
    write(tmp_path, doc)
    assert load_catalogue(tmp_path, builtin=False).resolve("app").build[0].startswith("set -e")


# ---- the loader itself: documents that would exhaust it


def test_deep_nesting_is_a_located_error_not_a_recursion_error(tmp_path):
    root = tmp_path
    for name, text in {
        "flow": "schema: 1\nname: flow\nx: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "block": "schema: 1\nname: block\n"
        + "".join("  " * i + f"k{i}:\n" for i in range(200))
        + "  " * 200
        + "v\n",
        "maps": "a: " + "{b: " * 20_000 + "1" + "}" * 20_000 + "\n",
    }.items():
        (root / f"{name}.yaml").write_text(text)
    probs = problems(root)
    assert len(probs) == 3 and all("nested deeper" in p.message and p.line for p in probs), probs


@pytest.mark.parametrize(
    "text,what",
    [
        ("schema: 1\n? [a, b]\n: 1\n", "mapping key"),
        ("schema: 1\n? {a: 1}\n: 1\n", "mapping key"),
        ("a: &x [1, 2]\nb: *x\n", "anchor"),
        ("a: [&x 1]\nb: [*x, *x]\n", "anchor"),
        ("a: !!int nope\n", "cannot be read"),
        ("schema: !!binary '@@@'\n", "must be"),  # bytes: not a string, not a mapping
        ("a: !!float [1]\n", "YAML"),
    ],
    ids=repr,
)
def test_yaml_that_python_cannot_hold_is_a_located_error(tmp_path, text, what):
    (tmp_path / "app.yaml").write_text(text)
    probs = problems(tmp_path)
    assert any(what in p.message for p in probs), probs


def test_billion_laughs_is_refused(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]
    (tmp_path / "app.yaml").write_text("\n".join(lines) + "\n")
    (p,) = problems(tmp_path)
    assert "anchor" in p.message or "alias" in p.message


def test_a_fifo_recipe_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "app.yaml")
    done = []
    t = threading.Thread(target=lambda: done.append(problems(tmp_path)), daemon=True)
    t.start()
    t.join(20)
    assert done, "the loader waited on the FIFO"
    (p,) = done[0]
    assert "is a FIFO: only regular files are read" in p.message


def test_a_device_or_a_huge_recipe_is_refused(tmp_path, monkeypatch):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "app.yaml").symlink_to("/dev/zero")
    (p,) = problems(tmp_path / "dev")
    assert "is a symbolic link leading out of the directory that holds it: not followed" in p.message
    os.mkfifo(tmp_path / "dev" / "pipe")
    (tmp_path / "dev" / "app.yaml").unlink()
    (tmp_path / "dev" / "app.yaml").symlink_to("pipe")  # a link inside: followed, refused, never waited on
    (p,) = problems(tmp_path / "dev")
    assert "is a FIFO" in p.message
    monkeypatch.setattr(yamlsrc, "MAX_BYTES", 1000)
    write(tmp_path, BASE)
    (tmp_path / "app.yaml").write_text((tmp_path / "app.yaml").read_text() + "#" * 2000 + "\n")
    (p,) = problems(tmp_path)
    assert "over the cap of 1000" in p.message


# ---- the schema interpreter's patterns are JSON Schema's (search semantics; `$` is the very end)


@pytest.mark.parametrize(
    "rx,text,ok",
    [
        ("^[a-z]+$", "abc", True),
        ("^[a-z]+$", "abc\n", False),
        ("^[0-9a-f]{64}$", "a" * 64 + "\n", False),
        ("^[A-Za-z_.$][A-Za-z0-9_.$@]*$", "$x@y", True),  # `$` inside a class is a character
        ("^[A-Za-z_.$][A-Za-z0-9_.$@]*$", "$x\n", False),
        ("^[]a]+$", "a]a", True),
        ("^https?://", "https://x/y", True),  # unanchored at the end: a prefix
        (r"^a\$$", "a$", True),
        (r"^a\$$", "a$\n", False),
        (r"^\d{4}-\d{2}$", "2026-01", True),
        (r"^\d{4}-\d{2}$", "\u0662\u0660\u0662\u0666-01", False),  # other scripts' digits are not \d
        (r"^[\w.]+$", "a_b.c", True),
        (r"^[\w.]+$", "\u00e9", False),
    ],
)
def test_schema_patterns_end_at_the_very_end(rx, text, ok):
    assert bool(pattern(rx).search(text)) is ok


# ---- rvport pin edits a linked recipe where it points, whole


def test_pin_edits_the_target_of_a_linked_recipe_and_keeps_the_link(tmp_path):
    import datetime as dt

    from rvport.sources import pin_recipe
    from tests.unit.sources.test_tree import MAIN, options, routes, serve, sha, write_recipes

    with serve(routes()) as srv:
        root = write_recipes(tmp_path / "recipes", srv.base)
        shared = root / "shared" / "demo-recipe.yaml"  # a link is followed inside the recipe directory only
        shared.parent.mkdir()
        (root / "demo.yaml").rename(shared)
        shared.chmod(0o640)
        (root / "demo.yaml").symlink_to(shared)
        recipe = load_catalogue(root).resolve("demo")
        (pinned,) = pin_recipe(recipe, options(tmp_path), today=dt.date(2026, 1, 2))
        assert pinned.sha256 == sha(MAIN)
        assert (root / "demo.yaml").is_symlink() and (root / "demo.yaml").resolve() == shared
        assert f"sha256: {sha(MAIN)}" in shared.read_text() and shared.stat().st_mode & 0o777 == 0o640
        assert sorted(p.name for p in shared.parent.iterdir()) == ["demo-recipe.yaml"]  # no temporary left
        assert load_catalogue(root).resolve("demo").sources[0].sha256 == sha(MAIN)


def test_a_pinned_file_over_the_cap_is_refused(tmp_path, monkeypatch):
    from rvport.catalogue import recipe_file

    monkeypatch.setattr(recipe_file, "PINNED_MAX_BYTES", 4)
    write(tmp_path, BASE)
    probs = problems(tmp_path)
    assert probs and all("over the cap of 4" in p.message for p in probs)


def test_a_recipe_file_name_with_control_characters_is_refused_and_shown_escaped(tmp_path):
    write(tmp_path, BASE)
    (tmp_path / "\x1b[2Japp.yaml").write_text("schema: 1\n")
    (p,) = problems(tmp_path)
    assert "'\\x1b[2Japp.yaml'" in p.message and "\x1b" not in p.render()


# ---- through the command line: exit 3, every problem located, nothing raw on the terminal


def test_the_cli_reports_hostile_recipes_with_exit_3_and_no_raw_escapes(tmp_path):
    from tests.fixtures.cli import rvport_process

    root = tmp_path / "recipes"
    write(root, with_value("description", "\x1b[2J\x1b[HFAKE: all artifacts PASS"))
    doc = with_value("toolchain.debian", ["gcc\nRUN id"])
    doc["name"] = "inj"
    doc["env"]["A\nADD https://example.invalid/x /x"] = "x"
    doc["versions"][0]["version"] = "1.0\n"
    write(root, doc)
    (root / "deep.yaml").write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    (root / "keys.yaml").write_text("? [a, b]\n: 1\n")
    os.mkfifo(root / "fifo.yaml")
    cp = rvport_process(
        ("plan", "app", "--recipes", str(root), "-o", str(tmp_path / "out")),
        env={**os.environ, "COLUMNS": "300"},
        main="app",
        timeout=120,
    )
    assert cp.returncode == 3 and "Traceback" not in cp.stderr, cp.stderr
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", cp.stdout + cp.stderr)
    for where in ("app.yaml:3:", "inj.yaml:", "deep.yaml:1:", "keys.yaml:1:", "fifo.yaml:"):
        assert where in cp.stderr, where
    assert not (tmp_path / "out").exists()


def test_a_pinned_file_swapped_for_a_fifo_after_loading_is_refused_not_waited_on(tmp_path):
    from rvport.errors import IntegrityError
    from rvport.sources.pin import check_pinned_files

    write(tmp_path, BASE)
    recipe = load_catalogue(tmp_path, builtin=False).resolve("app")
    (tmp_path / "app" / "start.sh").unlink()
    os.mkfifo(tmp_path / "app" / "start.sh")
    done = []

    def check():
        with pytest.raises(IntegrityError) as e:
            check_pinned_files([recipe])
        done.append(e.value.render())

    t = threading.Thread(target=check, daemon=True)
    t.start()
    t.join(20)
    assert done and "not a regular file" in done[0]


def test_a_toolchain_file_is_held_to_the_same_rules(tmp_path):
    from rvport.catalogue.toolchains import load_toolchain_file

    good = (Path(__file__).parents[3] / "rvport/resources/toolchains/go-1.25.14.yaml").read_text()
    path = tmp_path / "go-1.25.14.yaml"
    path.write_text(good)
    assert load_toolchain_file(path)[1] == []
    path.write_text(good.replace("GOTOOLCHAIN: local", '"A\\nRUN id": "\\e[2J"'))
    spec, probs = load_toolchain_file(path)
    assert spec is None and {p.line for p in probs} == {10}, probs


@pytest.mark.parametrize("key", ["patches", "lockfiles"])
def test_a_patch_or_lock_file_dest_stays_inside_the_tree(tmp_path, key):
    doc = copy.deepcopy(BASE)
    doc["versions"][0][key] = [{"file": "app/start.sh", "sha256": hashlib.sha256(SHIPPED).hexdigest()}]
    write(tmp_path, doc)
    load_catalogue(tmp_path, builtin=False)
    doc["versions"][0][key][0]["dest"] = "sub/../../up"
    write(tmp_path, doc)
    (p,) = problems(tmp_path)
    assert "climbs out with '..'" in p.message and p.line


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[1, 2]", '"x"', "{"])
def test_a_cache_ref_that_is_deep_or_not_a_mapping_is_no_entry(tmp_path, text):
    from rvport.catalogue.model import Source, SourceKind
    from rvport.sources import Cache

    cache = Cache(root=tmp_path)
    src = Source(name="s", kind=SourceKind.URL, url="https://example.invalid/a.tar.gz", sha256=None)
    cache.ref_path(src).parent.mkdir(parents=True)
    cache.ref_path(src).write_text(text)
    assert cache.read_ref(src) is None


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000 + b"]" * 100_000, b"{not json", b"[1]", b'{"files": [{"url": 1}]}', b'{"files": 3}'],
)
def test_an_index_page_that_is_not_the_simple_api_is_a_miss_not_an_internal_error(tmp_path, body):
    from rvport.catalogue.model import Source, SourceKind
    from rvport.errors import SourceUnavailable
    from rvport.sources.fetch import IndexConfig
    from rvport.sources.pypi import find_sdist
    from tests.unit.sources.test_tree import Route, serve

    routes = {"/simple/demo/": Route(body=body, content_type="application/vnd.pypi.simple.v1+json")}
    with serve(routes) as srv:
        import requests

        src = Source(name="sdist", kind=SourceKind.PYPI, project="demo", version="1.0", sha256="a" * 64)
        with pytest.raises(SourceUnavailable, match="project page cannot be read"):
            find_sdist(requests.Session(), src, IndexConfig(index_url=srv.url("/simple"), origin="test"))


def test_a_value_of_the_wrong_type_is_said_in_yaml_words_never_a_python_class(tmp_path):
    """ "must be a object, got LList" read as a bug: the kinds are the document's (a mapping, a list)."""
    from rvport.catalogue.schema import validate
    from rvport.catalogue.yamlsrc import load_yaml

    f = tmp_path / "x.yaml"
    f.write_text("a: [1, 2]\nb: {c: 1}\nn: 5\n")
    doc, problem = load_yaml(f)
    assert problem is None
    schema = {
        "type": "object",
        "properties": {"a": {"type": "object"}, "b": {"type": "array"}, "n": {"type": "boolean"}},
    }
    said = [p.message for p in validate(doc, schema, file=str(f))]
    assert said == [
        "a: must be a mapping, got a list",
        "b: must be a list, got a mapping",
        "n: must be a boolean, got an integer (5)",
    ], said
