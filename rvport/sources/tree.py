"""Prepared source trees: unpack, copy lock files and recipe-local files, apply patches, check the tree's own
lock file, vendor crates or Go modules; content-addressed and atomic.

The tree for a recipe lives at <cache>/trees/<key>/, key = digest of (sources, patches, lock files,
recipe-local files, vendoring and its lock). It is built in a temporary directory beside it and renamed into
place, under a lock; a present tree is reused. Each archive is checked against its cache name while it is
unpacked (a corrupt one is fetched again and the tree started over), and a source pinned by its tree digest
must unpack to exactly that tree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rvport import proc
from rvport.catalogue.model import LOCK_NAMES, PinnedFile, Recipe
from rvport.errors import IntegrityError, RecipeError, SourceUnavailable
from rvport.sources.archive import unpack
from rvport.sources.cache import NO_SPACE, CorruptEntry, atomic_write_text, disk_error, sha256_file
from rvport.sources.fetch import Fetched, Fetcher, FetchOptions, ca_bundle
from rvport.sources.local import copy_into
from rvport.target import CARGO_HOME, RVPORT_DIR

# bump when the way trees are made changes, so old trees are not reused (5: rvport writes every member itself;
# a zip's links, exec bits and times are kept)
TREE_FORMAT = 5


@dataclass(frozen=True, kw_only=True)
class PreparedTree:
    recipe: str  # name==version
    key: str
    path: Path  # the tree: hand it to docker buildx as the build context
    fetched: tuple[Fetched, ...]  # per source: digest and where it came from in this run
    reused: bool  # True: the tree was already in the cache

    def to_json(self) -> dict:
        return {
            "recipe": self.recipe,
            "key": self.key,
            "path": str(self.path),
            "reused": self.reused,
            "sources": [f.to_json() for f in self.fetched],
        }


def verify_pinned(pf: PinnedFile, what: str) -> None:
    if not pf.path.is_file():
        raise IntegrityError(
            f"{what} {pf.rel} is missing ({pf.path})", hint="restore it from the recipe repository"
        )
    actual = sha256_file(pf.path)
    if actual != pf.sha256:
        raise IntegrityError(
            f"{what} {pf.rel} does not match its pin",
            detail=[f"  expected sha256 {pf.sha256}", f"  actual   sha256 {actual}"],
            hint="restore the file, or if the change is intended, update its sha256 in the recipe",
        )


def tree_key(recipe: Recipe, digests: dict[str, str]) -> str:
    """Key of the prepared tree: digests of sources (by name), patches, lock files and files, plus
    vendoring."""
    doc = {
        "format": TREE_FORMAT,
        "sources": [
            [s.name, digests[s.name], s.dest or "", s.tree or "", list(s.exclude)] for s in recipe.sources
        ],
        "patches": [[p.rel, p.sha256, p.strip] for p in recipe.patches],
        "lockfiles": [[p.rel, p.sha256, p.dest or ""] for p in recipe.lockfiles],
        "vendor": recipe.vendor or "",
    }
    if recipe.files:  # only when there are any: the keys of every other tree stay what they were
        doc["files"] = [[p.rel, p.sha256, p.dest] for p in recipe.files]
    if recipe.lock:
        doc["lock"] = [recipe.lock.path, recipe.lock.sha256]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def prepare_tree(recipe: Recipe, options: FetchOptions, *, fetcher: Fetcher | None = None) -> PreparedTree:
    """Fetch every source of `recipe` and return its prepared source tree (built once, then reused).

    The archives are checked while they are unpacked, not before (no second read): a reused tree reads none
    of them, and its `fetched` entries say verified=False.
    """
    for pf in recipe.patches:
        verify_pinned(pf, "patch")
    for pf in recipe.lockfiles:
        verify_pinned(pf, "lock file")
    for pf in recipe.files:
        verify_pinned(pf, "file")
    own = fetcher is None
    fetcher = fetcher or Fetcher(options=options)
    try:
        fetched = [fetcher.fetch(s, check=False) for s in recipe.sources]
        for _ in range(2 * len(fetched) + 1):
            try:
                return _prepare(recipe, tuple(fetched), options)
            except CorruptEntry as e:
                i = next((i for i, f in enumerate(fetched) if f.path == e.path), None)
                if i is None:
                    raise
                fetched[i] = fetcher.refetch(fetched[i], e)
        raise IntegrityError(
            f"{recipe.ref}: cache entries keep turning out corrupt while the tree is made",
            hint="check the disk holding the cache (--cache-dir)",
        )
    finally:
        if own:
            fetcher.close()


def _key_digest(f: Fetched) -> str:
    """What names a source in the tree's key: its archive's sha256, or a local tree's digest and epoch (the
    time its copy's files get)."""
    local = f.source.local
    return f"local:{local.digest}@{local.epoch}" if local is not None else f.sha256


def _prepare(recipe: Recipe, fetched: tuple[Fetched, ...], options: FetchOptions) -> PreparedTree:
    key = tree_key(recipe, {f.source.name: _key_digest(f) for f in fetched})
    cache = options.cache
    final = cache.tree(key)
    with cache.lock(f"tree-{key}"):
        if final.is_dir():
            return PreparedTree(recipe=recipe.ref, key=key, path=final, fetched=fetched, reused=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        for stale in final.parent.glob(f".{key}.*"):  # left by a killed run; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        work = None
        try:
            work = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{key}."))
            tree = work / "tree"
            _assemble(recipe, fetched, tree, work, options)
            os.replace(tree, final)
        except OSError as e:
            if (
                e.errno in NO_SPACE
            ):  # copying lock files and recipe files, vendoring: the disk, not the source
                raise disk_error(e, final.parent, f"preparing the tree of {recipe.ref}") from e
            raise
        finally:
            if work is not None:
                shutil.rmtree(work, ignore_errors=True)
        fetched = tuple(dataclasses.replace(f, verified=True) for f in fetched)
        meta = {
            "recipe": recipe.ref,
            "key": key,
            "format": TREE_FORMAT,
            "sources": [f.to_json() for f in fetched],
            "patches": [p.to_json() for p in recipe.patches],
            "lockfiles": [p.to_json() for p in recipe.lockfiles],
            "files": [p.file_json() for p in recipe.files],
            "vendor": recipe.vendor,
            "lock": recipe.lock.to_json() if recipe.lock else None,
        }
        try:
            atomic_write_text(final.parent / f"{key}.json", json.dumps(meta, sort_keys=True, indent=2) + "\n")
        except OSError as e:
            if e.errno in NO_SPACE:
                shutil.rmtree(final, ignore_errors=True)  # no tree without its record
                raise disk_error(e, final.parent, f"recording the tree of {recipe.ref}") from e
            raise
    return PreparedTree(recipe=recipe.ref, key=key, path=final, fetched=fetched, reused=False)


def _assemble(
    recipe: Recipe, fetched: tuple[Fetched, ...], tree: Path, work: Path, options: FetchOptions
) -> None:
    main = next((f for f in fetched if f.source.dest is None), None)
    if main is None:
        tree.mkdir()
    for f in fetched:
        dest = (
            tree
            if f is main
            else _inside(tree, f.source.dest or f"_deps/{f.source.name}", recipe, f.source.line)
        )
        if f.source.local is not None:
            _copy_local(recipe, f, dest, options)
            continue
        unpack(
            f.path,
            dest,
            name=f.filename,
            scratch=work,
            blob=True,
            source=f.source,
            where=f"cache entry {f.path}, from {f.origin}",
            limits=options.limits,
            at=_at(recipe, f.source.line),
        )
    epoch = source_epoch(tree)
    for pf in recipe.lockfiles:
        target = _inside(tree, pf.dest or pf.path.name, recipe, pf.line)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pf.path, target)
    for pf in recipe.files:
        copy_recipe_file(recipe, pf, tree)
    for pf in recipe.patches:
        apply_patch(pf, tree)
    if recipe.lock:
        check_tree_lock(recipe, tree)
    if recipe.vendor == "cargo":
        vendor_crates(recipe, tree, options)
    elif recipe.vendor == "go":
        vendor_go_modules(recipe, tree, options)
    clamp_mtimes(tree, epoch)


def _copy_local(recipe: Recipe, f: Fetched, dest: Path, options: FetchOptions) -> None:
    """A local tree (--source-tree) copied where its source would be unpacked: into a place nothing holds
    yet."""
    if os.path.lexists(dest):
        raise RecipeError(
            f"{recipe.ref}: the local tree for source {f.source.name!r} would be copied over "
            f"{dest.name}, which another source already holds (in {_at(recipe, f.source.line)})",
            hint="give the source a dest of its own",
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    assert f.source.local is not None
    copy_into(f.source.local, dest, limits=options.limits)


def source_epoch(tree: Path) -> int:
    """The newest modification time in the unpacked sources: the sdist's or archive's own member times."""
    newest = 0
    for root, _dirs, files in os.walk(tree):
        for name in files:
            newest = max(newest, int(os.lstat(os.path.join(root, name)).st_mtime))
    return newest


def clamp_mtimes(tree: Path, epoch: int) -> None:
    """Files that rvport added or changed (lock files, patched files, vendored crates) get no time later than
    the sources' own, so the newest time in the tree is the same in every run: the build stage takes it as
    SOURCE_DATE_EPOCH (reproducible wheels: zip member times, embedded dates)."""
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.lstat(path).st_mtime > epoch:
                os.utime(path, (epoch, epoch), follow_symlinks=False)
    if tree.stat().st_mtime > epoch:
        os.utime(tree, (epoch, epoch))


def copy_recipe_file(recipe: Recipe, pf: PinnedFile, tree: Path) -> None:
    """A recipe-local file (`files:`, checked against its pin already) into the tree at its dest, mode 0644.
    It
    adds to the source and never replaces a file of it (a patch does that, visibly)."""
    rel = pf.dest or pf.path.name
    target = _inside(tree, rel, recipe, pf.line)
    # the path as written first: a symlink there (dangling or not) is the source's, and resolving it would
    # write through it; then the resolved one (a symlinked directory on the way)
    if os.path.lexists(tree / rel) or target.exists():
        raise RecipeError(
            f"{recipe.ref}: file {pf.rel} would replace {pf.dest}, which the source already has "
            f"(in {_at(recipe, pf.line)})",
            hint="choose a dest the source does not have, or change the source's file with a patch",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pf.path, target)
    os.chmod(target, 0o644)


def _at(recipe: Recipe, line: int | None) -> str:
    """Where in the recipe file: file:line when the line is known."""
    return f"{recipe.file}:{line}" if line else str(recipe.file)


def _inside(tree: Path, rel: str, recipe: Recipe, line: int | None = None) -> Path:
    target = (tree / rel).resolve()
    if not target.is_relative_to(tree.resolve()):
        raise RecipeError(
            f"{recipe.ref}: destination {rel!r} leaves the source tree (in {_at(recipe, line)})",
            hint="use a relative path inside the tree",
        )
    return target


def check_tree_lock(recipe: Recipe, tree: Path) -> None:
    """The lock file the recipe names inside the tree (`lock:`) is there and matches its pin."""
    lock = recipe.lock
    target = _inside(tree, lock.path, recipe, lock.line)
    where = f"{lock.path} in the source tree of {recipe.ref}"
    if not target.is_file():
        raise IntegrityError(
            f"{where} is missing (the recipe's lock: names it, in {_at(recipe, lock.line)})",
            hint="check the source pin and the lock's path",
        )
    actual = sha256_file(target)
    if actual != lock.sha256:
        raise IntegrityError(
            f"{where} does not match its pin",
            detail=[f"  expected sha256 {lock.sha256}", f"  actual   sha256 {actual}"],
            hint="the sources or a patch changed the lock file: check them, or if the change is "
            "intended, update the lock's sha256 in the recipe",
        )


_REJECT = re.compile(
    r"(Hunk #\d+ FAILED.*|.*can't find file to patch.*|.*malformed patch.*|"
    r".*Reversed \(or previously applied\) patch detected.*|.*saving rejects to file.*)"
)


def apply_patch(pf: PinnedFile, tree: Path) -> None:
    """Apply one pinned patch with `patch -p<strip>`; a rejected hunk is an IntegrityError naming the
    patch."""
    cmd = [
        "patch",
        f"-p{pf.strip}",
        "--batch",
        "--forward",
        "--no-backup-if-mismatch",
        "-r",
        "-",
        "-i",
        str(pf.path),
    ]
    cp = proc.run(cmd, cwd=tree, capture=True, check=False, timeout=300)
    if cp.returncode != 0:
        out = (cp.stdout or "") + (cp.stderr or "")
        lines = rejected(out) or out.strip().splitlines()[-8:]
        raise IntegrityError(
            f"patch {pf.rel} does not apply (patch -p{pf.strip}):",
            detail=["  " + ln for ln in lines],
            hint="the patch does not fit this source: fix or regenerate the patch, check its "
            "strip level, and update its sha256 in the recipe (a --source-tree: the tree changed the "
            "lines the recipe's patch edits)",
        )


_PATCHING = re.compile(r"^(?:patching|checking) file (.+)$")


def rejected(out: str) -> list[str]:
    """patch's lines that say what did not apply, each rejected hunk with the file it is of."""
    lines, current = [], None
    for raw in out.splitlines():
        ln = raw.strip()
        m = _PATCHING.match(ln)
        if m:
            current = m.group(1).strip("'\"")
            continue
        if _REJECT.match(ln):
            lines.append(f"{current}: {ln}" if current and "FAILED" in ln else ln)
    return lines


# What rvport adds to a tree, in a directory of its own (RVPORT_DIR, CARGO_HOME: rvport.target): the source's
# files (its own .cargo/config.toml included) are never overwritten. Paths relative to the tree's top
# directory; /src/<path> in a stage.
CARGO_VENDOR = f"{RVPORT_DIR}/vendor"  # the vendored crates
# Cargo resolves a relative path in a config file against the parent of the directory holding that file: in
# <tree>/.rvport/cargo-home/config.toml, "vendor" is <tree>/.rvport/vendor, wherever the tree is.
CARGO_CONFIG = """\
# written by rvport: crates come from the vendored directory (.rvport/vendor), never the network
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"

[net]
offline = true
"""


def vendor_crates(recipe: Recipe, tree: Path, options: FetchOptions) -> None:
    """`cargo vendor --locked` on the host into <tree>/.rvport/vendor, and a cargo home for the stage.

    The source replacement goes into <tree>/.rvport/cargo-home/config.toml, not into the source's own
    .cargo/config.toml: cargo reads the config files from its working directory upwards and then
    $CARGO_HOME/config.toml, merging them, so the source's own settings ([env], build flags) still apply.
    The planner sets CARGO_HOME to that directory in every stage of a `vendor: cargo` recipe.
    """
    name = LOCK_NAMES["cargo"]
    locks = [pf for pf in recipe.lockfiles if (pf.dest or pf.path.name).endswith(name)]
    if recipe.lock:
        lock_rel = recipe.lock.path
    else:
        lock_rel = (locks[0].dest or locks[0].path.name) if locks else name
    manifest = tree / Path(lock_rel).parent / "Cargo.toml"
    if not manifest.is_file():
        raise RecipeError(
            f"{recipe.ref}: vendor: cargo needs {manifest.relative_to(tree)} in the source tree",
            hint="set the lock file's dest beside the Cargo.toml to vendor for",
        )
    own = tree / RVPORT_DIR
    if own.exists():
        raise RecipeError(
            f"{recipe.ref}: the source tree already has {RVPORT_DIR}/, where rvport puts its cargo "
            "home and vendored crates",
            hint="remove it from the source (a patch, or `exclude:`)",
        )
    own.mkdir()
    cargo = proc.which("cargo") or (
        str(Path.home() / ".cargo/bin/cargo") if (Path.home() / ".cargo/bin/cargo").is_file() else "cargo"
    )
    env = dict(os.environ)
    env["CARGO_HTTP_CAINFO"] = str(options.ca_bundle or ca_bundle())
    # cwd = <tree>/.rvport and a relative "vendor": the snippet cargo prints then names the directory as the
    # cargo home's config must (see CARGO_CONFIG), wherever the tree goes
    cmd = [cargo, "vendor", "--locked", "--versioned-dirs", "--manifest-path", str(manifest), "vendor"]
    if options.offline:
        cmd.insert(2, "--offline")
    try:
        cp = proc.run(cmd, cwd=own, env=env, capture=True, timeout=1800)
    except proc.CommandFailed as e:
        said = ((e.stderr or "") + (e.stdout or "")).strip().splitlines()[-10:]
        tail = ["  " + ln for ln in said]
        if any("needs to be updated" in ln or "--locked was passed" in ln for ln in said):
            raise IntegrityError(
                f"{recipe.ref}: the pinned {name} does not fit the sources:",
                detail=tail,
                hint="regenerate the lock file for this version and update its pin",
            ) from e
        raise SourceUnavailable(
            f"{recipe.ref}: cargo vendor failed ({e.reason}):",
            detail=tail,
            hint="crates are downloaded on the host: check network/proxy (--ca-bundle); "
            "offline, reuse a tree prepared earlier",
        ) from e
    (tree / CARGO_VENDOR).mkdir(exist_ok=True)  # a crate without dependencies gets none, cargo still wants it
    cfg = tree / CARGO_HOME / "config.toml"
    cfg.parent.mkdir(parents=True)
    printed = (cp.stdout or "").strip()
    if "[source.vendored-sources]" in printed and 'directory = "vendor"' in printed:
        # cargo's own snippet also covers git dependencies, which CARGO_CONFIG alone would not; it names
        # crates-io only when some crate comes from there, but replacing it always keeps the stage offline
        crates_io = (
            ""
            if "[source.crates-io]" in printed
            else '[source.crates-io]\nreplace-with = "vendored-sources"\n\n'
        )
        cfg.write_text(
            f"# written by rvport from `cargo vendor`: crates come from {CARGO_VENDOR}, never the network\n"
            + crates_io
            + printed
            + "\n\n[net]\noffline = true\n"
        )
    else:
        cfg.write_text(CARGO_CONFIG)


# ------------------------------------------------------------------------------------------ vendor: go
_GO_VERSION = re.compile(r"\bgo([0-9]{1,9})\.([0-9]{1,9})(?![0-9])")
_GO_DIRECTIVE = re.compile(r"^go\s+([0-9]{1,9})\.([0-9]{1,9})(?![0-9])", re.M)
_NO_NETWORK = (
    "dial tcp",
    "no such host",
    "lookup ",
    "connection refused",
    "i/o timeout",
    "network is unreachable",
    "GOPROXY=off",
    "module lookup disabled",
)


def go_modules(tree: Path) -> list[Path]:
    """Directories of every go.mod in the tree (outside vendor/ and testdata/), shallowest first."""
    mods = [
        p.parent
        for p in tree.rglob("go.mod")
        if not {"vendor", "testdata"} & set(p.relative_to(tree).parts[:-1])
    ]
    return sorted(mods, key=lambda d: (len(d.relative_to(tree).parts), str(d)))


def vendored_go_modules(recipe: Recipe, tree: Path) -> list[Path]:
    """The modules `vendor: go` vendors: the one whose go.sum the recipe names (`lock:`), else every module of
    the tree. A repository with many go.mod files (semantic-router has 15: its bindings, tools, tests, an
    operator) builds one of them; the others' dependencies are neither fetched nor vendored."""
    if recipe.lock:
        mod = _inside(tree, recipe.lock.dir or ".", recipe, recipe.lock.line)
        if not (mod / "go.mod").is_file():
            raise RecipeError(
                f"{recipe.ref}: lock {recipe.lock.path} has no go.mod beside it "
                f"(in {_at(recipe, recipe.lock.line)})",
                hint="name the go.sum of the module the build compiles",
            )
        return [mod]
    mods = go_modules(tree)
    if not mods:
        raise RecipeError(
            f"{recipe.ref}: vendor: go but the source tree has no go.mod",
            hint="drop `vendor: go`, or check the source and its dest",
        )
    return mods


def vendor_go_modules(recipe: Recipe, tree: Path, options: FetchOptions) -> None:
    """`go mod vendor` on the host in the module the recipe names by its go.sum (`lock:`), else in every
    module of the tree, so the offline stage builds with -mod=vendor.

    Runs the host's `go` (Go >= 1.21 switches itself to the recipe's pinned version through GOTOOLCHAIN,
    fetching it as a module). Modules come from the Go module proxy and are checked against go.sum; local
    `replace` directories are copied in without any network. Where the proxy cannot be reached the error
    says so: the tree must then be prepared on a host that reaches it (see docs/recipes.md).
    """
    mods = vendored_go_modules(recipe, tree)
    go = proc.which("go")
    if go is None:
        raise SourceUnavailable(
            f"{recipe.ref}: vendor: go needs a Go toolchain on the host to run `go mod vendor`",
            hint="install Go >= 1.21 on the host (Debian: golang-go), or prepare the tree on "
            "a host that has one",
        )
    have = _GO_VERSION.search(proc.run([go, "version"], capture=True, timeout=60).stdout or "")
    host_go = (int(have.group(1)), int(have.group(2))) if have else (0, 0)
    env = dict(
        os.environ, GOFLAGS="-mod=mod", GOWORK="off", SSL_CERT_FILE=str(options.ca_bundle or ca_bundle())
    )
    pinned = _pinned_go(recipe)
    env["GOTOOLCHAIN"] = f"go{pinned}" if pinned else "local"
    if options.offline:
        env["GOPROXY"] = "off"  # only modules already in the host's module cache, or local replaces
    for mod in mods:
        rel = mod.relative_to(tree)
        need = _GO_DIRECTIVE.search((mod / "go.mod").read_text(errors="replace"))
        wants = (int(need.group(1)), int(need.group(2))) if need else (0, 0)
        if wants > host_go and host_go < (1, 21):
            raise SourceUnavailable(
                f"{recipe.ref}: {rel}/go.mod needs go {wants[0]}.{wants[1]} but the host has "
                f"go{host_go[0]}.{host_go[1]}, which cannot switch toolchains (GOTOOLCHAIN needs Go >= 1.21)",
                hint="install Go >= 1.21 on the host (Debian trixie: golang-go), or prepare the tree "
                "elsewhere",
            )
        try:
            proc.run([go, "mod", "vendor"], cwd=mod, env=env, capture=True, timeout=1800)
        except proc.CommandFailed as e:
            said = ((e.stderr or "") + (e.stdout or "")).strip().splitlines()[-10:]
            tail = ["  " + ln for ln in said]
            joined = "\n".join(said)
            if "verifying" in joined and "checksum mismatch" in joined:
                raise IntegrityError(
                    f"{recipe.ref}: go.sum does not match a module in {rel}:",
                    detail=tail,
                    hint="the module proxy served other bytes than go.sum pins; do not build",
                ) from e
            unreachable = any(m in joined for m in _NO_NETWORK)
            raise SourceUnavailable(
                f"{recipe.ref}: `go mod vendor` in {rel or '.'} failed ({e.reason})"
                + (": the Go module proxy cannot be reached" if unreachable else "")
                + ":",
                detail=tail,
                hint=(
                    "Go modules are downloaded on the host through GOPROXY (passed through from the "
                    "environment; --offline allows only the host's module cache): run where a Go module "
                    "proxy is reachable, then reuse the prepared tree"
                )
                if unreachable
                else "check the module's go.mod/go.sum at this source pin",
            ) from e


def _pinned_go(recipe: Recipe) -> str | None:
    """The version of the recipe's pinned Go (toolchains/<toolchain.go>.yaml), if it names one."""
    if not recipe.toolchain.go:
        return None
    from rvport.catalogue.toolchains import load_toolchains

    spec = load_toolchains().get(recipe.toolchain.go)
    if spec is None:
        raise RecipeError(
            f"{recipe.ref}: toolchain go: {recipe.toolchain.go} is not in toolchains/",
            hint="name a file of toolchains/ (e.g. go-1.25.14)",
        )
    return spec.version
