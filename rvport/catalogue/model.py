"""The recipe model: one version of one recipe as frozen values (`Recipe` and the values it holds).

Every default a recipe field has is written here, once: the loader (recipe_file.py) passes only what a recipe
file says. The recipe's default build modes come from the mode registry (modes.defaults()). Nothing here reads
a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path, PurePosixPath

from rvport.catalogue import modes
from rvport.vocab import BuildTree, Kind, Mode, OutputIsa, OutputType, OutputVlen

BUILTIN = "built-in"

# what each kind of vendoring reads as its lock file
LOCK_NAMES = {"cargo": "Cargo.lock", "go": "go.sum"}

# `toolchain: rust:` names. debian-rustc-web is Debian's rustc-web and cargo-web, which conflict with its
# rustc and cargo: a recipe naming it installs them itself (toolchain.debian) for native, qemu and accelerated
# stages, and cross stages then install them instead of rustc and cargo (kinds.CROSS_RUST); a recipe that
# installs them without naming it would get rustc and cargo beside them in a cross stage.
RUST_WEB = "debian-rustc-web"
RUST_WEB_PACKAGES = ("rustc-web", "cargo-web")


class SourceKind(StrEnum):
    PYPI = "pypi"
    URL = "url"
    GIT = "git"
    # a local tree under test (`--source-tree`), never written in a recipe: the planner puts it in place of a
    # pinned source (rvport.plan.planner.with_source_trees)
    LOCAL = "local"


@dataclass(frozen=True, kw_only=True)
class GitState:
    """What a local tree's git checkout says of it: its commit (None in a repository without one) and whether
    the tree's files differ from the commit's (changed, added or removed files; ignored files are no part of
    the tree)."""

    commit: str | None
    dirty: bool

    def to_json(self) -> dict:
        return {"commit": self.commit, "dirty": self.dirty}


@dataclass(frozen=True, kw_only=True)
class LocalTree:
    """A local source tree as it was read (rvport.sources.local.inspect): where it is, its tree digest (the
    canonical digest of docs/sources.md, "Tree digests"), its size, the modification time every copy of it
    gets (SOURCE_DATE_EPOCH), and its git state when it is a checkout."""

    path: str  # absolute
    digest: str  # "sha256:<hex>"
    files: int  # files and links
    bytes: int
    epoch: int
    git: GitState | None = None

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "tree": self.digest,
            "files": self.files,
            "bytes": self.bytes,
            "epoch": self.epoch,
            "git": self.git.to_json() if self.git else None,
        }


@dataclass(frozen=True, kw_only=True)
class Source:
    name: str
    kind: SourceKind
    sha256: str | None  # the archive's digest; None: pinned by `tree`, or to be recorded (`rvport pin`)
    url: str | None = None  # for url sources
    project: str | None = None  # for pypi sources
    version: str | None = None
    filename: str | None = None
    repo: str | None = None  # for git sources
    commit: str | None = None
    tag: str | None = None
    recorded: str | None = None  # date the digest was recorded by rvport, if it was
    dest: str | None = None  # where it is unpacked inside the source tree (None: it is the tree)
    cmake_var: str | None = None  # handed to CMake as -D<var>=<dir> (FetchContent source dirs)
    tree: str | None = None  # "sha256:<hex>": the digest of the unpacked tree (docs/sources.md)
    exclude: tuple[str, ...] = ()  # paths left out of the tree digest, and removed from the prepared tree
    profiles: tuple[str, ...] = ()  # the profiles whose builds need it (empty: every profile)
    line: int | None = None
    local: LocalTree | None = None  # kind local: the tree that replaces the recipe's pinned source

    def serves(self, profile: str) -> bool:
        """Whether a build for `profile` needs this source (the planner leaves out the others)."""
        return not self.profiles or profile in self.profiles

    @property
    def pinned(self) -> bool:
        """Whether nothing is left to record (`rvport pin`): a local tree is named by its digest, though it is
        no pin."""
        return self.sha256 is not None or self.tree is not None or self.kind is SourceKind.LOCAL

    @property
    def archive_name(self) -> str:
        """A file name for the downloaded archive."""
        if self.kind is SourceKind.PYPI:
            return self.filename or f"{self.project}-{self.version}.tar.gz"
        if self.kind is SourceKind.GIT:
            return f"{self.repo.rstrip('/').rsplit('/', 1)[-1]}-{self.commit}.tar.gz"
        if self.kind is SourceKind.LOCAL:
            return f"{self.name}-local-tree"
        return self.url.rsplit("/", 1)[-1]

    @property
    def origin(self) -> str:
        if self.kind is SourceKind.PYPI:
            return f"pypi:{self.project}=={self.version}"
        if self.kind is SourceKind.GIT:
            return f"git:{self.repo}@{self.commit}"
        if self.kind is SourceKind.LOCAL and self.local:
            return f"local:{self.local.path}"
        return self.url or ""

    @property
    def fetch_url(self) -> str | None:
        """The URL to download, when it is known without asking an index."""
        if self.kind is SourceKind.URL:
            return self.url
        if self.kind is SourceKind.GIT and self.repo and "github.com" in self.repo:
            return f"{self.repo.rstrip('/').removesuffix('.git')}/archive/{self.commit}.tar.gz"
        return None

    def to_json(self) -> dict:
        d = {
            "name": self.name,
            "kind": self.kind.value,
            "origin": self.origin,
            "archive": self.archive_name,
            "sha256": self.sha256
            or (
                "a local tree, not pinned"
                if self.kind is SourceKind.LOCAL
                else "pinned by its tree digest"
                if self.tree
                else "to be recorded on first verified fetch"
            ),
        }
        if self.local:
            d["local"] = self.local.to_json()
        for k in (
            "url",
            "project",
            "version",
            "filename",
            "repo",
            "commit",
            "tag",
            "recorded",
            "dest",
            "cmake_var",
            "tree",
        ):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.exclude:
            d["exclude"] = list(self.exclude)
        if self.profiles:
            d["profiles"] = list(self.profiles)
        if self.fetch_url:
            d["fetch_url"] = self.fetch_url
        return d


@dataclass(frozen=True, kw_only=True)
class PinnedFile:
    path: Path  # absolute path of the file shipped with the recipe
    rel: str  # path relative to recipes/
    sha256: str
    dest: str | None = None
    strip: int = 1
    note: str | None = None
    line: int | None = None

    def to_json(self) -> dict:
        d = {"file": self.rel, "sha256": self.sha256, "strip": self.strip}
        if self.dest:
            d["dest"] = self.dest
        return d

    def file_json(self) -> dict:
        """A recipe-local file (`files:`): no strip level, always a dest."""
        d = {"file": self.rel, "sha256": self.sha256, "dest": self.dest}
        if self.note:
            d["note"] = self.note
        return d


@dataclass(frozen=True, kw_only=True)
class RuntimeFile:
    """One file of a runtime image: an artifact of the build, or a file pinned with the recipe."""

    dest: str  # absolute path in the image
    mode: str = "0644"
    artifact: str | None = None  # a file the build left in $RVPORT_OUT (matches an output glob)
    pinned: PinnedFile | None = None

    def to_json(self) -> dict:
        d = {"dest": self.dest, "mode": self.mode}
        if self.artifact:
            d["artifact"] = self.artifact
        if self.pinned:
            d["file"], d["sha256"] = self.pinned.rel, self.pinned.sha256
        return d


CHECK_TIMEOUT_S = 300  # a runtime check's round, by default (seconds)
# Set by rvport in a runtime check's client container, never by the recipe's check env
# (rvport/engine/check.py)
RVPORT_CHECK_ENV = ("SERVICE_HOST", "RVPORT_CHECK_ROUND", "QEMU_CPU")


@dataclass(frozen=True, kw_only=True)
class RuntimeCheck:
    """What `rvport build` runs against the runtime image as a service (`runtime: check:`): a script in a
    client container (the stage's smoke image, the artifacts at /artifacts) that reaches the service as
    $SERVICE_HOST on a network of their own; exit 0 passes. With `restart`, the service is restarted and the
    script runs again."""

    script: str
    restart: bool = True
    timeout: int = CHECK_TIMEOUT_S  # seconds per round
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        return 2 if self.restart else 1

    def to_json(self) -> dict:
        return {
            "script": self.script,
            "restart": self.restart,
            "timeout": self.timeout,
            "env": dict(sorted(self.env.items())),
        }


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """The image a build's artifacts run in: the riscv64 base, Debian packages, the artifacts and pinned files
    (configuration, start script), a non-root user, and how it must be run (read-only root, tmpfs, ports)."""

    user: str
    uid: int
    files: tuple[RuntimeFile, ...]
    entrypoint: tuple[str, ...]
    debian: tuple[str, ...] = ()
    read_only: bool = True
    tmpfs: tuple[str, ...] = ()
    workdir: str = "/"
    env: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = ()
    check: RuntimeCheck | None = None  # run against the image, not part of it: to_json leaves it out

    def to_json(self) -> dict:
        """What the image is made of and how it runs (the runtime key covers exactly this); not its check."""
        return {
            "user": self.user,
            "uid": self.uid,
            "files": [f.to_json() for f in self.files],
            "entrypoint": list(self.entrypoint),
            "debian": list(self.debian),
            "read_only": self.read_only,
            "tmpfs": list(self.tmpfs),
            "workdir": self.workdir,
            "env": dict(sorted(self.env.items())),
            "ports": list(self.ports),
        }


@dataclass(frozen=True, kw_only=True)
class TreeLock:
    """The lock file vendoring reads, already in the source tree (e.g. ml-binding/Cargo.lock): its digest is
    checked once the tree is made, and vendoring runs beside it alone."""

    path: str  # relative to the tree's top, /-separated
    sha256: str
    line: int | None = None

    @property
    def dir(self) -> str:
        """The directory it sits in, relative to the tree's top ("" for the top)."""
        parent = str(PurePosixPath(self.path).parent)
        return "" if parent == "." else parent

    def to_json(self) -> dict:
        return {"path": self.path, "sha256": self.sha256}


@dataclass(frozen=True, kw_only=True)
class DebianPin:
    """A Debian package of the base's suite (riscv64) by exact version and the .deb's sha256 from the
    archive's signed index (`toolchain: pins:`)."""

    name: str
    version: str
    sha256: str

    def to_json(self) -> dict:
        return {"name": self.name, "version": self.version, "sha256": self.sha256}


@dataclass(frozen=True, kw_only=True)
class OnBase:
    """A `toolchain: on_base:` entry: what the toolchain is on another riscv64 base, each field None where the
    recipe's own stands (sid has no rustc-web; trixie's maturin is another version than sid's)."""

    base: str
    debian: tuple[str, ...] | None = None
    rust: str | None = None
    pins: tuple[DebianPin, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class RecipeToolchain:
    base: str = "debian-trixie"
    debian: tuple[str, ...] = ()
    go: str | None = None
    rust: str | None = None
    pins: tuple[DebianPin, ...] = ()  # installed at exactly these versions, checked against the signed index
    python: str | None = None  # the one CPython it builds for (its base's): --python plans no other for it
    # `on_base:` what changes when --python plans it on another riscv64 base; what a base lacks (sid has no
    # rustc-web) or has at another version (a pinned package) is said here, per base, not found in apt
    on_base: tuple[OnBase, ...] = ()
    # `host:` the least version of a program the host runs for it, beyond what rvport.catalogue.hosttools's
    # rules say: (program, version), e.g. ("go", "1.24.1") for a go.mod the host's `go mod vendor` must meet
    host: tuple[tuple[str, str], ...] = ()

    def for_base(self, name: str) -> RecipeToolchain:
        """The toolchain as a stage on riscv64 base `name` has it: that base, with its `on_base:` entry's
        packages, Rust and pins where it has one."""
        for o in self.on_base:
            if o.base == name:
                return replace(
                    self,
                    base=name,
                    debian=self.debian if o.debian is None else o.debian,
                    rust=self.rust if o.rust is None else o.rust,
                    pins=self.pins if o.pins is None else o.pins,
                    on_base=(),
                )
        return replace(self, base=name, on_base=())

    @property
    def apt_packages(self) -> tuple[str, ...]:
        """What apt installs: the packages by name, and the pinned ones as name=version."""
        return self.debian + tuple(f"{p.name}={p.version}" for p in self.pins)

    def to_json(self) -> dict:
        d = {"base": self.base, "debian": list(self.debian), "go": self.go, "rust": self.rust}
        if self.pins:  # only where there are some: other plans stay as they were
            d["pins"] = [p.to_json() for p in self.pins]
        if self.python is not None:
            d["python"] = self.python
        return d


@dataclass(frozen=True, kw_only=True)
class Output:
    glob: str
    type: OutputType
    isa: OutputIsa = OutputIsa.PROFILE
    exports: tuple[str, ...] = ()  # functions it must export (verify: ELF symbol tables, any archive member)
    vlen: OutputVlen = OutputVlen.AGNOSTIC

    @property
    def vlen_exact(self) -> bool:
        return self.vlen is OutputVlen.EXACT

    def to_json(self) -> dict:
        """plan.json's entry; `vlen` only where it is exact, so other plans stay as they were."""
        return {"glob": self.glob, "type": self.type, "isa": self.isa} | (
            {"vlen": self.vlen} if self.vlen_exact else {}
        )


DEFAULT_TEST_TIMEOUT = 1800  # seconds for one test file's run, when the recipe's `tests:` says none


@dataclass(frozen=True, kw_only=True)
class UpstreamTestFile:
    """One test file of the source tree that `tests:` runs, with its `-k` selection, the profiles it runs
    for (empty: all) and its own timeout."""

    path: str  # relative to the source tree's top
    select: str | None = None  # pytest -k
    profiles: tuple[str, ...] = ()
    timeout: int | None = None
    line: int | None = None

    def serves(self, profile: str) -> bool:
        return not self.profiles or profile in self.profiles

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "select": self.select,
            "profiles": list(self.profiles),
            "timeout": self.timeout,
        }


@dataclass(frozen=True, kw_only=True)
class TestWheel:
    """A wheel the test environment needs (pytest and what it requires), fetched from the package index by its
    file name and checked by its sha256, as a closure lock's index wheels are."""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    file: str
    sha256: str
    line: int | None = None

    def source(self) -> Source:
        from packaging.utils import parse_wheel_filename

        name, version, _build, _tags = parse_wheel_filename(self.file)
        return Source(
            name=f"test-wheel-{name}",
            kind=SourceKind.PYPI,
            sha256=self.sha256,
            project=str(name),
            version=str(version),
            filename=self.file,
            line=self.line,
        )

    def to_json(self) -> dict:
        return {"file": self.file, "sha256": self.sha256}


@dataclass(frozen=True, kw_only=True)
class UpstreamTests:
    """A recipe's `tests:`: the source tree's own tests, run after the smoke test in the smoke image under the
    profile's QEMU CPU with no network (docs/recipes.md)."""

    files: tuple[UpstreamTestFile, ...]
    copy: tuple[str, ...]  # the tree's paths copied into the test container
    timeout: int = DEFAULT_TEST_TIMEOUT
    wheels: tuple[TestWheel, ...] = ()
    line: int | None = None

    def to_json(self) -> dict:
        return {
            "files": [f.to_json() for f in self.files],
            "copy": list(self.copy),
            "timeout": self.timeout,
            "wheels": [w.to_json() for w in self.wheels],
        }


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """One version of one recipe, with the recipe-wide fields merged in."""

    name: str
    version: str
    kind: Kind
    description: str = ""
    file: Path
    sources: tuple[Source, ...]
    patches: tuple[PinnedFile, ...] = ()
    lockfiles: tuple[PinnedFile, ...] = ()
    files: tuple[PinnedFile, ...] = ()  # recipe-local files copied into the tree at their dest
    vendor: str | None = None
    lock: TreeLock | None = None  # vendoring's lock file inside the source tree (instead of a shipped one)
    depends: tuple[str, ...] = ()
    toolchain: RecipeToolchain = field(default_factory=RecipeToolchain)
    env: Mapping[str, str] = field(default_factory=dict)
    build: tuple[str, ...] = ()
    outputs: tuple[Output, ...] = ()
    smoke: str | None = None
    smoke_debian: tuple[str, ...] = ()
    # `smoke: without_vector:` sigill or pass: the smoke test runs again on a QEMU CPU without V and must die
    # with SIGILL under a vector profile (pass under rv64gc), or pass under all (planner.smoke_without_vector)
    smoke_without_vector: str | None = None
    # `manylinux: {repair: false, reason: ...}`: why its wheels are never repaired, whatever --manylinux says
    # (a wheel linked against the system's libraries, e.g. Debian's libtorch); None: --manylinux decides
    no_repair: str | None = None
    # `manylinux: {exclude: [...], reason: ...}`: libraries its wheels' repair leaves out (auditwheel
    # --exclude), which a wheel they require ships (xgrammar: apache-tvm-ffi's libtvm_ffi.so), and why
    repair_exclude: tuple[str, ...] = ()
    repair_exclude_reason: str | None = None
    runtime: Runtime | None = None  # the image the artifacts run in (`runtime:`), made after the stage
    tests: UpstreamTests | None = None  # the source tree's own tests (`tests:`), run after the smoke test
    # the source tree's own tests run by `rvport serve-check` in the wheelhouse's environment (`serve_tests:`)
    serve_tests: UpstreamTests | None = None
    # the build modes it may be built in: `modes:`, else the registry's defaults (modes.defaults())
    modes: tuple[Mode, ...] = field(default_factory=modes.defaults)
    build_tree: BuildTree = BuildTree.DISK  # `build_tree:`, where the stage's /src lives
    hermetic: bool = True
    is_default: bool = False
    note: str | None = None
    origin: str = BUILTIN  # "built-in", or the user recipe directory it came from

    @property
    def ref(self) -> str:
        return f"{self.name}=={self.version}"
