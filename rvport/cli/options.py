"""Each verb's options value: a frozen, keyword-only dataclass written here, one field per setting of the verb
in the settings table (rvport/cli/settings.py), of the type and default the table gives it
(tests/unit/cli/test_options.py checks both ways: every setting of a verb is a field, no field lacks a
setting).

A setting the command line repeats (list[X] in the table) is a tuple here. What a verb has no setting for but
a lower layer's options need is a class constant (ClassVar), not a field: `rvport plan` takes no
--ca-bundle, `rvport reproduce` always tags "reproduce". The options of the layers below are built from these
values by one function each (rvport/cli/handoff.py).

Only the standard library is imported: `rvport --help` reads this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True, kw_only=True)
class GlobalArgs:
    """`rvport` itself: the options before the verb, and the environment's settings for the whole run."""

    debug: bool = False
    ci: bool = False
    bases_dir: Path | None = None
    toolchains_dir: Path | None = None
    dockerfiles_dir: Path | None = None
    locks_dir: Path | None = None
    verify_threads: int | None = None
    version: bool = False


@dataclass(frozen=True, kw_only=True)
class FetchArgs:
    recipes: tuple[str, ...] = ()
    all_versions: bool = False
    to: Path | None = None
    tree: bool = False
    from_git: tuple[Path, ...] = ()
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None


@dataclass(frozen=True, kw_only=True)
class PinArgs:
    recipe: str
    into: Path | None = (
        None  # a built-in recipe is copied there first (default: the first --recipes, ./recipes)
    )
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None


@dataclass(frozen=True, kw_only=True)
class LockArgs:
    recipe: str
    allow_expired_release: tuple[str, ...] = ()
    lock_file: Path | None = None
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None


@dataclass(frozen=True, kw_only=True)
class WheelhouseArgs:
    recipe: str
    profile: str = "rvv256"
    allow_expired_release: tuple[str, ...] = ()
    wheelhouse_dir: Path | None = None  # checked: required
    artifacts: tuple[Path, ...] = ()
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None


@dataclass(frozen=True, kw_only=True)
class ServeCheckArgs:
    recipe: str
    profile: str | None = None  # None: the wheelhouse's
    source_tree: Path | None = None  # the tests step's tree
    allow_expired_release: tuple[str, ...] = ()
    wheelhouse: Path | None = None  # checked: required
    check_dir: Path | None = None  # checked: required
    skip_serve: bool = False
    skip_generate: bool = False
    skip_tests: bool = False
    fresh_install: bool = False
    timeout: int = 1800
    junit: Path | None = None
    # it installs from a wheelhouse; the tests step's source tree is located and unpacked as a build's
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None


@dataclass(frozen=True, kw_only=True)
class ReproduceArgs:
    recipes: tuple[str, ...] = ()
    profile: str = "rvv256"
    mode: str = "auto"
    output: Path = Path("reproduce")
    jobs: int | None = None
    builder: str | None = None
    manylinux: str = "auto"
    python: tuple[str, ...] = ()
    allow_expired_release: tuple[str, ...] = ()
    bootstrap: str | None = None
    no_smoke: bool = False
    no_tests: bool = False
    compiler_cache: Path | None = None
    compiler_cache_size: str = "2G"
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None
    # named recipes only, under one tag; each build from nothing: a fresh cache of its own, no BuildKit cache,
    # the riscv64 base bootstrapped
    all: ClassVar[bool] = False
    tag: ClassVar[str] = "reproduce"
    cache_dir: ClassVar[None] = None
    base_image: ClassVar[None] = None
    no_cache: ClassVar[bool] = True
    cache_to: ClassVar[None] = None
    cache_from: ClassVar[None] = None


@dataclass(frozen=True, kw_only=True)
class PlanArgs:
    recipes: tuple[str, ...] = ()
    all: bool = False
    profile: str = "rvv256"
    mode: str = "auto"
    tag: str = "local"
    output: Path = Path("out")
    jobs: int | None = None
    builder: str | None = None
    manylinux: str = "auto"
    python: tuple[str, ...] = ()
    source_tree: tuple[str, ...] = ()
    format: str = "json"
    base_image: str | None = None
    allow_expired_release: tuple[str, ...] = ()
    bootstrap: str | None = None
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: ClassVar[None] = None  # a plan fetches nothing (--format bake: what the cache and mirror hold)


@dataclass(frozen=True, kw_only=True)
class BuildArgs:
    recipes: tuple[str, ...] = ()
    all: bool = False
    profiles: tuple[str, ...] = ()  # the settings give the default profile when none is named
    mode: str = "auto"
    tag: str = "local"
    output: Path = Path("out")
    jobs: int | None = None
    matrix_jobs: int = 1
    builder: str | None = None
    manylinux: str = "auto"
    python: tuple[str, ...] = ()
    source_tree: tuple[str, ...] = ()
    base_image: str | None = None
    allow_expired_release: tuple[str, ...] = ()
    bootstrap: str | None = None
    no_smoke: bool = False
    no_tests: bool = False
    no_cache: bool = False
    junit: Path | None = None
    summary: Path | None = None
    cache_to: Path | None = None
    cache_from: Path | None = None
    compiler_cache: Path | None = None
    no_compiler_cache: bool = False
    compiler_cache_size: str = "2G"
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None


@dataclass(frozen=True, kw_only=True)
class PrepareArgs:
    recipes: tuple[str, ...] = ()
    all: bool = False
    profile: str = "rvv256"
    mode: str = "auto"
    tag: str = "local"
    output: Path = Path("out")
    builder: str | None = None
    python: tuple[str, ...] = ()
    source_tree: tuple[str, ...] = ()
    base_image: str | None = None
    allow_expired_release: tuple[str, ...] = ()
    bootstrap: str | None = None
    no_smoke: bool = False
    tags: Path | None = None
    recipes_dir: tuple[Path, ...] = ()
    unpack_limit: str | None = None
    cache_dir: Path | None = None
    mirror: Path | None = None
    offline: bool = False
    ca_bundle: Path | None = None
    # images are made for the build's stages whatever their jobs; wheels are repaired as a build's default
    jobs: ClassVar[None] = None
    manylinux: ClassVar[str] = "auto"


@dataclass(frozen=True, kw_only=True)
class DoctorArgs:
    recipes: tuple[str, ...] = ()  # empty: every recipe --all selects
    builder: str | None = None
    recipes_dir: tuple[Path, ...] = ()


@dataclass(frozen=True, kw_only=True)
class VerifyArtifactsArgs:
    paths: tuple[Path, ...]
    profile: str | None = None  # None: the provenance's, else the default profile
    isa: str = "runs-on"
    export: tuple[str, ...] = ()
    vlen_exact: bool = False
    provenance: Path | None = None
    json_out: Path | None = None
    junit_out: Path | None = None
    every_member: bool = False


@dataclass(frozen=True, kw_only=True)
class RecipesListArgs:
    recipes_dir: tuple[Path, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RecipesShowArgs:
    recipe: str
    recipes_dir: tuple[Path, ...] = ()


# every verb's options value, by the verb's command path below `rvport` ("": the global options)
ARGS: dict[str, type] = {
    "": GlobalArgs,
    "fetch": FetchArgs,
    "pin": PinArgs,
    "lock": LockArgs,
    "wheelhouse": WheelhouseArgs,
    "serve-check": ServeCheckArgs,
    "reproduce": ReproduceArgs,
    "plan": PlanArgs,
    "build": BuildArgs,
    "prepare": PrepareArgs,
    "doctor": DoctorArgs,
    "verify artifacts": VerifyArtifactsArgs,
    "recipes list": RecipesListArgs,
    "recipes show": RecipesShowArgs,
}
