"""One recipe file loaded into the model's values (catalogue/model.py): `load_recipe_file` reads it through
the one document loader (catalogue/document.py: its schema, control characters, its name), then checks what
a schema cannot say (paths, pinned files, the toolchain's rules, runtime images), every problem with its file
and line, all collected. A field a file leaves out gets the model's default: only what the file says is
passed.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion

from rvport import bounds
from rvport.catalogue.bases import recipe_base_problems
from rvport.catalogue.document import load_document, schema
from rvport.catalogue.kinds import WHEEL_KINDS
from rvport.catalogue.model import (
    BUILTIN,
    LOCK_NAMES,
    RUST_WEB,
    RUST_WEB_PACKAGES,
    RVPORT_CHECK_ENV,
    DebianPin,
    OnBase,
    Output,
    PinnedFile,
    Recipe,
    RecipeToolchain,
    Runtime,
    RuntimeCheck,
    RuntimeFile,
    Source,
    SourceKind,
    TestWheel,
    TreeLock,
    UpstreamTestFile,
    UpstreamTests,
)
from rvport.catalogue.profiles import load_profiles
from rvport.catalogue.yamlsrc import LDict, line_of
from rvport.errors import Problem
from rvport.target import CARGO_HOME, RVPORT_DIR
from rvport.vocab import EXPORTING_OUTPUTS, BuildTree, Kind, Mode, OutputIsa, OutputType, OutputVlen


def _given(d: Mapping, **fields: str) -> dict:
    """The model's fields (name=key) that the file gives: a field it leaves out gets the model's default,
    which is written there alone (catalogue/model.py). The schema has held each value to its type."""
    return {name: d[key] for name, key in fields.items() if key in d}


def recipe_schema() -> dict:
    return schema("recipe")


def _tests(
    d: LDict | None, doc: LDict, file: str, problems: list[Problem], key: str = "tests"
) -> UpstreamTests | None:
    """`tests:` or `serve_tests:` (`key`; a version's, else the recipe's) as a value; its problems (for
    `tests:` a kind whose artifacts are no wheels or no smoke test; an unknown profile, a wheel file name that
    is no wheel's) collected. `serve_tests:` runs in the serving check's environment (the wheelhouse's), so it
    needs no smoke test."""
    if not d:
        return None
    line = getattr(d, "line", None)
    smoked = Kind(doc["kind"]) in WHEEL_KINDS and (doc.get("smoke") or {}).get("script")
    if key == "tests" and not smoked:
        problems.append(
            Problem(
                message="tests: runs in the smoke test's image with the wheels installed: it needs a kind "
                "whose artifacts are wheels and a smoke: script",
                file=file,
                line=line,
                hint="add a smoke: test, or drop tests:",
            )
        )
    known = set(load_profiles())
    files = []
    for i, f in enumerate(d["files"]):
        fl = line_of(d["files"], i) or line
        bad = [p for p in f.get("profiles", ()) if p not in known]
        if bad:
            problems.append(
                Problem(
                    message=f"{key}: file {f['path']}: unknown profile(s) {', '.join(bad)}",
                    file=file,
                    line=fl,
                    hint=f"profiles: {', '.join(sorted(known))}",
                )
            )
        files.append(
            UpstreamTestFile(
                path=f["path"],
                select=f.get("select"),
                profiles=tuple(f.get("profiles", ())),
                timeout=f.get("timeout"),
                line=fl,
            )
        )
    wheels = []
    for i, w in enumerate(d.get("wheels", ())):
        wl = line_of(d["wheels"], i) or line
        tw = TestWheel(file=w["file"], sha256=w["sha256"], line=wl)
        try:
            tw.source()
        except ValueError as e:
            problems.append(
                Problem(
                    message=f"{key}: wheel {w['file']!r} is not a wheel's file name: {e}", file=file, line=wl
                )
            )
            continue
        wheels.append(tw)
    copy = tuple(d.get("copy") or dict.fromkeys(f.path.split("/", 1)[0] for f in files))
    for c in copy:
        _rel_ok(c, f"{key}: copy", file, line, problems)
    for f in files:
        _rel_ok(f.path, f"{key}: file", file, f.line, problems)
        if not any(f.path == c or f.path.startswith(c.rstrip("/") + "/") for c in copy):
            problems.append(
                Problem(
                    message=f"{key}: file {f.path} is not under any path of {key}: copy ({', '.join(copy)})",
                    file=file,
                    line=f.line,
                    hint="add its directory to copy:",
                )
            )
    return UpstreamTests(
        files=tuple(files),
        copy=copy,
        **_given(d, timeout="timeout"),
        wheels=tuple(wheels),
        line=line,
    )


def _rel_ok(path: str, what: str, file: str, line: int | None, problems: list[Problem]) -> None:
    parts = PurePosixPath(path).parts
    if not _REL_PATH.fullmatch(path) or ".." in parts or "." in parts or parts[0] == RVPORT_DIR:
        problems.append(
            Problem(
                message=f"{what} {path!r} is not a relative path inside the source tree",
                file=file,
                line=line,
                hint="letters, digits and _ . + @ = , ~ - between single slashes; no '..'",
            )
        )


def _source(d: LDict, file: str, problems: list[Problem]) -> Source:
    _dotdot(d, "dest", file, problems)
    common = dict(
        name=d["name"],
        sha256=d.get("sha256"),
        dest=d.get("dest"),
        cmake_var=d.get("cmake_var"),
        recorded=(d.get("recorded") or {}).get("date"),
        tree=d.get("tree"),
        exclude=tuple(d.get("exclude", ())),
        profiles=tuple(d.get("profiles", ())),
        line=d.line,
    )
    if common["exclude"] and not common["tree"]:
        problems.append(
            Problem(
                message=f"source {d['name']!r}: exclude needs a tree digest (tree: sha256:...)",
                file=file,
                line=line_of(d, "exclude"),
                hint="exclude leaves paths out of the tree digest; without `tree:` it means nothing",
            )
        )
    for i, path in enumerate(common["exclude"]):
        p = PurePosixPath(path)
        if not path.strip() or p.is_absolute() or ".." in p.parts or str(p) == ".":
            problems.append(
                Problem(
                    message=f"source {d['name']!r}: exclude {path!r} is not a path inside the tree",
                    file=file,
                    line=line_of(d["exclude"], i) or d.line,
                    hint="write a path relative to the source's top directory, e.g. go/rustbin/",
                )
            )
    if "pypi" in d:
        p = d["pypi"]
        name = p.get("filename")
        if isinstance(name, str) and not _one_file_name(name):
            problems.append(
                Problem(
                    message=f"source {d['name']!r}: pypi filename {name!r} is not a single file name",
                    file=file,
                    line=line_of(p, "filename"),
                    hint="name the sdist's file as the index lists it (e.g. demo-1.0.tar.gz): one path "
                    "component, no '/', no '..', no control characters",
                )
            )
        return Source(
            kind=SourceKind.PYPI,
            project=p["project"],
            version=p["version"],
            filename=p.get("filename"),
            **common,
        )
    if "git" in d:
        g = d["git"]
        return Source(kind=SourceKind.GIT, repo=g["repo"], commit=g["commit"], tag=g.get("tag"), **common)
    return Source(kind=SourceKind.URL, url=d["url"], **common)


def _one_file_name(name: str) -> bool:
    """One path component: it is joined to the cache and mirror directories (rvport/sources checks again)."""
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and not any(ord(c) < 32 or ord(c) == 127 for c in name)
    )


# A relative path in the source tree (files' and lock's dest): recipe.schema.json's rel_path, checked here so
# that the message says what it is for.
_REL_PATH = re.compile(r"[A-Za-z0-9_.+@=,~-]+(/[A-Za-z0-9_.+@=,~-]+)*")


def _dotdot(d: LDict, key: str, file: str, problems: list[Problem]) -> None:
    """A relative path of the recipe (its schema already holds it to rel_path) must not climb with `..`."""
    if key in d and ".." in PurePosixPath(d[key]).parts:
        problems.append(
            Problem(
                message=f"{key} {d[key]!r} climbs out with '..'",
                file=file,
                line=line_of(d, key),
                hint="write a path that stays below its top directory, without '..'",
            )
        )


PINNED_MAX_BYTES = 64 << 20  # a patch, lock file or shipped file (the largest built-in one is 90 KiB)


def _pinned(d: LDict, root: Path, file: str, problems: list[Problem]) -> PinnedFile:
    """A file shipped with the recipe: a regular file inside the recipe directory `root`, links resolved (a
    pinned file naming a host file outside it would be read, and its digest shown, by a mismatch)."""
    top = root.resolve()
    path = (top / d["file"]).resolve()
    where = None
    if ".." in PurePosixPath(d["file"]).parts or not path.is_relative_to(top):
        where = "is not inside the recipe directory (no '..', no link that leads out of it)"
    else:
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                where = "is not a regular file"
            elif st.st_size > PINNED_MAX_BYTES:
                where = f"is {st.st_size} bytes, over the cap of {PINNED_MAX_BYTES} for a shipped file"
        except OSError:
            where = "does not exist"
    if where:
        problems.append(
            Problem(
                message=f"pinned file {d['file']!r} {where}",
                file=file,
                line=d.line,
                hint=f"add it under {top}/ and name it relative to that directory",
            )
        )
    return PinnedFile(
        path=path,
        rel=d["file"],
        sha256=d["sha256"],
        dest=d.get("dest"),
        **_given(d, strip="strip"),
        note=d.get("note"),
        line=d.line,
    )


def _same_dest(v: LDict, file: str, vline: int | None) -> list[Problem]:
    """Each lock file and recipe-local file goes to a dest of its own (a lock file's default: its file
    name)."""
    taken: dict[str, str] = {}
    out = []
    for key in ("lockfiles", "files"):
        for j, d in enumerate(v.get(key, [])):
            dest = str(PurePosixPath(d.get("dest") or PurePosixPath(d["file"]).name))
            what = f"{key[:-1]} {d['file']!r}"
            if dest in taken:
                out.append(
                    Problem(
                        message=f"{what} goes to {dest!r}, where {taken[dest]} goes too",
                        file=file,
                        line=line_of(v[key], j) or vline,
                        hint="give each file a dest of its own (a lock file's dest defaults to its name)",
                    )
                )
            else:
                taken[dest] = what
    return out


def _source_profiles(v: LDict, file: str, vline: int | None) -> list[Problem]:
    """A source's `profiles:` must name profiles of profiles.yaml, and the first source (the tree every build
    starts from) serves every profile."""
    known = load_profiles()
    out = []
    for i, s in enumerate(v["sources"]):
        names = s.get("profiles") or []
        line = line_of(s, "profiles") or line_of(v["sources"], i) or vline
        if names and i == 0:
            out.append(
                Problem(
                    message=f"source {s['name']!r} is the tree every build starts from: it cannot be "
                    "for some profiles only",
                    file=file,
                    line=line,
                    hint="remove its profiles:, or list the source after the one that is the tree",
                )
            )
        for n in names:
            if n not in known:
                out.append(
                    Problem(
                        message=f"source {s['name']!r}: profiles names {n!r}, which is not a profile",
                        file=file,
                        line=line,
                        hint=f"choose from {', '.join(known)} (rvport/resources/profiles.yaml)",
                    )
                )
    return out


def _tree_lock(v: LDict, file: str, problems: list[Problem]) -> TreeLock | None:
    d = v.get("lock")
    if d is None:
        return None
    lock = TreeLock(path=d["path"], sha256=d["sha256"], line=d.line)
    p = PurePosixPath(d["path"])
    want = LOCK_NAMES.get(v.get("vendor") or "")
    if not _REL_PATH.fullmatch(d["path"]) or ".." in p.parts or str(p) == ".":
        problems.append(
            Problem(
                message=f"lock {d['path']!r} is not a path inside the source tree",
                file=file,
                line=line_of(d, "path") or d.line,
                hint="write its path relative to the tree's top, e.g. ml-binding/Cargo.lock (letters, digits "
                "and _ . + @ = , ~ - between single slashes)",
            )
        )
    elif want is None:
        problems.append(
            Problem(
                message="lock names the lock file vendoring reads, but this version vendors none",
                file=file,
                line=d.line,
                hint="add `vendor: cargo` or `vendor: go`, or drop `lock`",
            )
        )
    elif p.name != want:
        problems.append(
            Problem(
                message=f"lock {d['path']!r}: vendor: {v['vendor']} reads {want}",
                file=file,
                line=line_of(d, "path") or d.line,
                hint=f"name the {want} in the source tree",
            )
        )
    shipped = [x for x in v.get("lockfiles", []) if PurePosixPath(x.get("dest") or x["file"]).name == want]
    if want and shipped:
        problems.append(
            Problem(
                message=f"both lock ({d['path']}) and a shipped lock file ({shipped[0]['file']}) "
                f"give vendoring its {want}",
                file=file,
                line=d.line,
                hint="keep one: `lock` for the tree's own, `lockfiles` for a shipped one",
            )
        )
    return lock


# An absolute path in the image (runtime files, workdir, tmpfs, the entrypoint): it is written into the
# Dockerfile (COPY, WORKDIR) and into `docker run --tmpfs PATH:OPTIONS`, so no whitespace, quote, `$`, `\`,
# `:` or `,`; components of letters, digits and _ . + @ ~ -.
_IMAGE_PATH = re.compile(r"(/[A-Za-z0-9_.+@~-]+)+")
IMAGE_PATH_HINT = "letters, digits and _ . + @ ~ - between single slashes, no '..'"


def _image_path(path: str) -> bool:
    """An absolute path in the image without whitespace, control or shell characters, and without '..'."""
    p = PurePosixPath(path)
    return bool(_IMAGE_PATH.fullmatch(path)) and ".." not in p.parts


def _runtime(doc: LDict, root: Path, file: str, problems: list[Problem]) -> Runtime | None:
    d = doc.get("runtime")
    if d is None:
        return None
    globs = [o["glob"] for o in doc.get("outputs", [])]
    files, seen = [], set()
    for i, f in enumerate(d["files"]):
        line = line_of(d["files"], i)
        if not _image_path(f["dest"]):
            problems.append(
                Problem(
                    message=f"runtime file {f['dest']!r} is not an absolute path in the image",
                    file=file,
                    line=line,
                    hint=f"write it as /app/NAME ({IMAGE_PATH_HINT})",
                )
            )
        if f["dest"] in seen:
            problems.append(
                Problem(
                    message=f"runtime file {f['dest']} is given twice",
                    file=file,
                    line=line,
                    hint="keep one entry per dest",
                )
            )
        seen.add(f["dest"])
        art = f.get("artifact")
        if art is not None and not any(fnmatch.fnmatchcase(art, g) for g in globs):
            problems.append(
                Problem(
                    message=f"runtime artifact {art!r} is none of the recipe's outputs",
                    file=file,
                    line=line,
                    hint=f"name a file the build leaves: {', '.join(globs) or '-'}",
                )
            )
        pinned = _pinned(f, root, file, problems) if "file" in f else None
        files.append(
            RuntimeFile(
                dest=f["dest"], mode=f.get("mode", "0755" if art else "0644"), artifact=art, pinned=pinned
            )
        )
    user = d["user"]
    if user["name"] == "root":
        problems.append(
            Problem(
                message="the runtime image must not run as root",
                file=file,
                line=line_of(d, "user"),
                hint="name a user of its own, e.g. {name: app, uid: 10001}",
            )
        )
    entry = tuple(d["entrypoint"])
    if not _image_path(entry[0]):
        problems.append(
            Problem(
                message=f"runtime entrypoint {entry[0]!r} is not an absolute path in the image",
                file=file,
                line=line_of(d, "entrypoint"),
                hint=f"start a file the image holds, e.g. a start script under files ({IMAGE_PATH_HINT})",
            )
        )
    located = [(p, line_of(d["tmpfs"], i)) for i, p in enumerate(d.get("tmpfs", ()))]
    located += [(d["workdir"], line_of(d, "workdir"))] if "workdir" in d else []
    for path, line in located:
        if not _image_path(path):
            problems.append(
                Problem(
                    message=f"runtime path {path!r} is not an absolute path in the image",
                    file=file,
                    line=line or d.line,
                    hint=f"write it as /NAME ({IMAGE_PATH_HINT})",
                )
            )
    return Runtime(
        user=user["name"],
        uid=int(user["uid"]),
        files=tuple(files),
        entrypoint=entry,
        debian=tuple(d.get("debian", ())),
        **_given(d, read_only="read_only", workdir="workdir"),
        tmpfs=tuple(d.get("tmpfs", ())),
        env=dict(d.get("env") or {}),
        ports=tuple(int(x) for x in d.get("ports", ())),
        check=_check(d, file, problems),
    )


def _check(d: LDict, file: str, problems: list[Problem]) -> RuntimeCheck | None:
    c = d.get("check")
    if c is None:
        return None
    if not c["script"].strip():
        problems.append(
            Problem(
                message="runtime check script is empty",
                file=file,
                line=line_of(c, "script"),
                hint="write a sh script that reaches the service as $SERVICE_HOST and exits 0 when "
                "it answers right",
            )
        )
    env = c.get("env") or {}
    for name in RVPORT_CHECK_ENV:
        if name in env:
            problems.append(
                Problem(
                    message=f"runtime check env sets {name}, which rvport sets in the check's client "
                    "(SERVICE_HOST: the service's name on the check network, "
                    "RVPORT_CHECK_ROUND: 1, then 2 after a restart, QEMU_CPU: the profile's)",
                    file=file,
                    line=line_of(env, name),
                    hint=f"remove {name} from runtime.check.env",
                )
            )
    return RuntimeCheck(
        script=c["script"],
        **_given(c, restart="restart", timeout="timeout"),
        env=dict(env),
    )


def _pins(items: list) -> tuple[DebianPin, ...]:
    return tuple(DebianPin(name=p["name"], version=p["version"], sha256=p["sha256"]) for p in items)


def _toolchain(d: dict | None, base: RecipeToolchain | None = None) -> RecipeToolchain:
    base = base or RecipeToolchain()
    if not d:
        return base
    return RecipeToolchain(
        base=d.get("base", base.base),
        debian=tuple(d.get("debian", base.debian)),
        go=d.get("go", base.go),
        rust=d.get("rust", base.rust),
        pins=_pins(d["pins"]) if "pins" in d else base.pins,
        python=d.get("python", base.python),
        on_base=tuple(
            OnBase(
                base=name,
                debian=tuple(o["debian"]) if "debian" in o else None,
                rust=o.get("rust"),
                pins=_pins(o["pins"]) if "pins" in o else None,
            )
            for name, o in d["on_base"].items()
        )
        if "on_base" in d
        else base.on_base,
        host=tuple((str(k), str(v)) for k, v in d["host"].items()) if "host" in d else base.host,
    )


def _rust_problems(
    tc: RecipeToolchain, file: str, docs: tuple[dict | None, ...], fallback: int | None
) -> list[Problem]:
    """`rust:` against toolchain.debian; `docs` are the toolchain mappings it was merged from, nearest
    first."""

    def line(*keys: str) -> int | None:  # the nearest mapping with one of the keys, the first key preferred
        return next(
            (
                line_of(d, next(k for k in keys if k in d))
                for d in docs
                if isinstance(d, dict) and any(k in d for k in keys)
            ),
            fallback,
        )

    web = [p for p in RUST_WEB_PACKAGES if p in tc.debian]
    if tc.rust == RUST_WEB and len(web) < len(RUST_WEB_PACKAGES):
        missing = [p for p in RUST_WEB_PACKAGES if p not in web]
        return [
            Problem(
                message=f"toolchain rust: {RUST_WEB} needs {' and '.join(missing)} in toolchain.debian",
                file=file,
                line=line("rust", "debian"),
                hint=f"add {', '.join(missing)} to toolchain.debian (native, qemu and accelerated stages "
                "install only what it lists)",
            )
        ]
    if tc.rust != RUST_WEB and web:
        return [
            Problem(
                message=f"toolchain.debian installs {' and '.join(web)} but rust: is "
                f"{tc.rust or 'not set (debian)'}: cross stages would install rustc and cargo, "
                "which conflict with them",
                file=file,
                line=line("debian", "rust"),
                hint=f"set `rust: {RUST_WEB}` in the toolchain, or install rustc and cargo instead",
            )
        ]
    return []


def _on_base_problems(
    tc: RecipeToolchain, file: str, docs: tuple[dict | None, ...], fallback: int | None
) -> list[Problem]:
    """`toolchain: on_base:`: each key a riscv64 base other than the recipe's own, and the toolchain it gives
    held to the `rust:` rules; `docs` are the toolchain mappings it was merged from, nearest first."""
    on = next((d["on_base"] for d in docs if isinstance(d, dict) and "on_base" in d), None)
    problems: list[Problem] = []
    for name in (o.base for o in tc.on_base):
        line = line_of(on, name) if isinstance(on, dict) else fallback
        if name == tc.base:
            problems.append(
                Problem(
                    message=f"toolchain on_base names {name!r}, the recipe's own base",
                    file=file,
                    line=line,
                    hint="write what the recipe needs on its own base in the toolchain itself; on_base is "
                    "for the other bases --python plans it on",
                )
            )
            continue
        problems += recipe_base_problems(name, file, line)
        problems += [
            replace(p, message=f"toolchain on_base {name}: {p.message}")
            for p in _rust_problems(tc.for_base(name), file, (on.get(name) if on else None,), line)
        ]
    return problems


def _host_problems(
    tc: RecipeToolchain, file: str, docs: tuple[dict | None, ...], fallback: int | None
) -> list[Problem]:
    """`toolchain: host:`: each key a program rvport knows how to find and tell the version of
    (rvport.catalogue.hosttools.TOOLS)."""
    from rvport.catalogue.hosttools import TOOLS

    host = next((d["host"] for d in docs if isinstance(d, dict) and "host" in d), None)
    return [
        Problem(
            message=f"toolchain host names {name!r}, a program rvport does not check on the host",
            file=file,
            line=line_of(host, name) if isinstance(host, dict) else fallback,
            hint=f"name one of {', '.join(TOOLS)} (rvport/catalogue/hosttools.py)",
        )
        for name, _version in tc.host
        if name not in TOOLS
    ]


# Set by rvport in every stage from the profile, never by a recipe: QEMU_CPU is the CPU model every emulated
# process runs as, /proc/cpuinfo included, which build systems read to choose their ISA (docs/profiles.md).
RVPORT_OWNED_ENV = ("QEMU_CPU",)


def _pinned_by_rvport(env: dict | None, file: str) -> list[Problem]:
    return [
        Problem(
            message=f"env sets {name}: the QEMU CPU model of every emulated stage is the profile's, "
            "so that /proc/cpuinfo shows the build exactly the profile's ISA",
            file=file,
            line=line_of(env, name),
            hint=f"remove {name}; choose the target with --profile (rvport/resources/profiles.yaml)",
        )
        for name in RVPORT_OWNED_ENV
        if name in (env or {})
    ]


# Set by rvport in every stage of a `vendor: cargo` version, never by its recipe: CARGO_HOME is the cargo home
# rvport writes into the tree, whose config.toml replaces crates-io with the vendored crates (planner, tree).
RVPORT_OWNED_CARGO_ENV = ("CARGO_HOME",)


def _cargo_home_by_rvport(v: dict, doc: dict, file: str) -> list[Problem]:
    if v.get("vendor") != "cargo":
        return []
    out = []
    for name in RVPORT_OWNED_CARGO_ENV:
        env = next(
            (e for e in (v.get("env"), doc.get("env")) if e and name in e), None
        )  # the version's first
        if env is not None:
            out.append(
                Problem(
                    message=f"env sets {name}, but this version vendors its crates (vendor: cargo): "
                    f"rvport sets {name} to the cargo home it writes into the tree "
                    f"({CARGO_HOME}), whose config makes cargo use the vendored crates",
                    file=file,
                    line=line_of(env, name),
                    hint=f"remove {name}; cargo still reads the source's own .cargo/config.toml",
                )
            )
    return out


def _manylinux(doc: LDict) -> dict:
    """The recipe's `manylinux:` mapping ({} without one)."""
    return dict(doc.get("manylinux") or {})


def _smoke_problems(doc: LDict, file: str) -> list[Problem]:
    """A smoke test whose script is empty (or only blanks) proves nothing: refused, where it stands."""
    smoke = doc.get("smoke")
    if not isinstance(smoke, dict) or not isinstance(smoke.get("script"), str) or smoke["script"].strip():
        return []
    return [
        Problem(
            message="smoke.script is empty: a smoke test that runs nothing proves nothing",
            file=file,
            line=line_of(smoke, "script"),
            hint="write a script that loads the artifact and checks what it computes, or leave smoke: out",
        )
    ]


def _repair_problems(doc: LDict, file: str) -> list[Problem]:
    """`manylinux:` (the recipe's own wheel repair choice) only where a stage makes wheels."""
    if "manylinux" not in doc or Kind(doc["kind"]) in WHEEL_KINDS:
        return []
    return [
        Problem(
            message=f"manylinux: a {doc['kind']} recipe makes no wheels to repair",
            file=file,
            line=line_of(doc, "manylinux"),
            hint="remove `manylinux:`; it is for the kinds that make wheels ("
            + ", ".join(sorted(k.value for k in WHEEL_KINDS))
            + ")",
        )
    ]


# The recipe text that may span lines (newlines and tabs allowed): prose, scripts and build commands.
# Nothing else may hold a control character (schema.control_characters).
MULTILINE = re.compile(
    r"description|(versions\[\d+\]\.)?build\[\d+\]|smoke\.script|runtime\.check\.script"
    r"|versions\[\d+\]\.((patches|lockfiles|files)\[\d+\]\.)?note"
)


def load_recipe_file(path: Path, root: Path, origin: str = BUILTIN) -> tuple[list[Recipe], list[Problem]]:
    file = str(path)
    doc, problems = load_document(
        path,
        "recipe",
        what="a recipe file",
        hint="see docs/recipes.md for the format",
        multiline=MULTILINE,
        named=True,
    )
    if doc is None:
        return [], problems
    for i, o in enumerate(doc.get("outputs", [])):
        if o.get("exports") and o["type"] not in EXPORTING_OUTPUTS:
            problems.append(
                Problem(
                    message=f"output {o['glob']!r} of type {o['type']} declares exports",
                    file=file,
                    line=line_of(doc["outputs"], i),
                    hint=f"exports are checked in outputs of type {', '.join(EXPORTING_OUTPUTS)}",
                )
            )
    problems += _pinned_by_rvport(doc.get("env"), file)
    problems += _repair_problems(doc, file)
    problems += _smoke_problems(doc, file)
    recipes: list[Recipe] = []
    top_tc = _toolchain(doc.get("toolchain"))
    runtime = _runtime(doc, root, file, problems)
    seen: set[str] = set()
    for i, v in enumerate(doc["versions"]):
        vline = line_of(doc["versions"], i)
        try:
            bounds.version(v["version"])
        except InvalidVersion:
            problems.append(
                Problem(
                    message=f"version {v['version']!r} is not a PEP 440 version",
                    file=file,
                    line=vline,
                    hint="use a version such as 1.2.3",
                )
            )
        if v["version"] in seen:
            problems.append(Problem(message=f"version {v['version']} is listed twice", file=file, line=vline))
        seen.add(v["version"])
        names = [s["name"] for s in v["sources"]]
        if len(set(names)) != len(names):
            problems.append(
                Problem(message="source names must be unique within a version", file=file, line=vline)
            )
        for j, f in enumerate(v.get("files", [])):
            dest = PurePosixPath(f["dest"])
            if (
                not _REL_PATH.fullmatch(f["dest"])
                or dest.is_absolute()
                or ".." in dest.parts
                or str(dest) == "."
                or f["dest"].endswith("/")
                or dest.parts[0] == RVPORT_DIR
            ):
                problems.append(
                    Problem(
                        message=f"file {f['file']!r}: dest {f['dest']!r} is not a file path inside "
                        "the source tree",
                        file=file,
                        line=line_of(v["files"], j) or vline,
                        hint="write a path relative to the tree's top directory, with the file "
                        f"name, e.g. smoke/main.go ({RVPORT_DIR}/ is rvport's own; letters, digits and "
                        "_ . + @ = , ~ - between single slashes)",
                    )
                )
        problems += _same_dest(v, file, vline)
        problems += _source_profiles(v, file, vline)
        for key in ("patches", "lockfiles"):  # files' dest is checked above, runtime files' by _image_path
            for pf in v.get(key, []):
                _dotdot(pf, "dest", file, problems)
        env = {**(doc.get("env") or {}), **(v.get("env") or {})}
        problems += _pinned_by_rvport(v.get("env"), file)
        problems += _cargo_home_by_rvport(v, doc, file)
        toolchain = _toolchain(v.get("toolchain"), top_tc)
        problems += _rust_problems(toolchain, file, (v.get("toolchain"), doc.get("toolchain")), vline)
        base_line = next(
            (line_of(d, "base") for d in (v.get("toolchain"), doc.get("toolchain")) if d and "base" in d),
            vline,
        )
        problems += recipe_base_problems(toolchain.base, file, base_line, python=toolchain.python)
        problems += _on_base_problems(toolchain, file, (v.get("toolchain"), doc.get("toolchain")), vline)
        problems += _host_problems(toolchain, file, (v.get("toolchain"), doc.get("toolchain")), vline)
        repair = _manylinux(doc)
        recipes.append(
            Recipe(
                name=doc["name"],
                version=v["version"],
                kind=Kind(doc["kind"]),
                **_given(doc, description="description"),
                file=path,
                sources=tuple(_source(s, file, problems) for s in v["sources"]),
                patches=tuple(_pinned(p, root, file, problems) for p in v.get("patches", [])),
                lockfiles=tuple(_pinned(p, root, file, problems) for p in v.get("lockfiles", [])),
                files=tuple(_pinned(p, root, file, problems) for p in v.get("files", [])),
                vendor=v.get("vendor"),
                lock=_tree_lock(v, file, problems),
                depends=tuple(v.get("depends", [])),
                toolchain=toolchain,
                env=env,
                build=tuple(v.get("build") or doc.get("build") or ()),
                outputs=tuple(
                    Output(
                        glob=o["glob"],
                        type=OutputType(o["type"]),
                        exports=tuple(o.get("exports", ())),
                        **({"isa": OutputIsa(o["isa"])} if "isa" in o else {}),
                        **({"vlen": OutputVlen(o["vlen"])} if "vlen" in o else {}),
                    )
                    for o in doc.get("outputs", [])
                ),
                smoke=(doc.get("smoke") or {}).get("script"),
                smoke_debian=tuple((doc.get("smoke") or {}).get("debian", [])),
                smoke_without_vector=(doc.get("smoke") or {}).get("without_vector"),
                no_repair=repair.get("reason") if repair.get("repair") is False else None,
                repair_exclude=tuple(repair.get("exclude", ())),
                repair_exclude_reason=repair.get("reason") if repair.get("exclude") else None,
                runtime=runtime,
                tests=_tests(v.get("tests") or doc.get("tests"), doc, file, problems),
                serve_tests=_tests(
                    v.get("serve_tests") or doc.get("serve_tests"), doc, file, problems, "serve_tests"
                ),
                **({"modes": tuple(Mode(m) for m in doc["modes"])} if "modes" in doc else {}),
                **({"build_tree": BuildTree(doc["build_tree"])} if "build_tree" in doc else {}),
                **_given(v, hermetic="hermetic", is_default="default"),
                note=v.get("note"),
                origin=origin,
            )
        )
        if not recipes[-1].build:
            problems.append(
                Problem(
                    message="no build commands",
                    file=file,
                    line=vline,
                    hint="add `build:` at the top level or in this version",
                )
            )
    return recipes, problems
