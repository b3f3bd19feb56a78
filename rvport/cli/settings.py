"""The one table of settings: every argument and option of every verb, and every RVPORT_* environment
variable.

Each `Setting` says its destination (the field of the verb's options value and the Typer parameter's name),
its flags, type, default, metavar, help, choices, the check of its value, the environment variable that gives
its default and which verbs use it. From the table come:

- the Typer parameters of every verb (`command` turns a function of one options value into a Typer command);
- the values of the verb's one frozen, keyword-only options value (rvport/cli/options.py, a dataclass written
  there; tests/unit/cli/test_options.py checks it against this table), each checked once by `make_options`;
- the environment defaults: RVPORT_* variables are read here and nowhere deeper (lower layers are given the
  values in their options);
- docs/commands.md (scripts/commands-doc renders the Typer app; tests/unit/cli/test_settings.py checks the app
  against this table, and tests/unit/project/test_ci_files.py the document against the app).

Several settings may share a flag when they mean different things in different verbs (`--all`: every
recipe, every version of every recipe, every ELF row); one verb never has two settings with one flag. A
setting used by several verbs with a different default or help in one of them says so in `per_verb`.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import typer

from rvport import bounds
from rvport.catalogue import modes
from rvport.catalogue.profiles import default_profile, get_profile, load_profiles
from rvport.cli import outputs
from rvport.cli.options import ARGS
from rvport.errors import RecipeError, UsageError
from rvport.verify.policy import IsaLevel


def default_profile_name() -> str | None:
    """The profile a verb targets when --profile names none (profiles.yaml: `default`); None when the table
    cannot be read: the settings table is built at import, for every command and --help, and a command that
    needs a profile says then what is wrong with the table (located)."""
    try:
        return default_profile().name
    except RecipeError:
        return None


# the verbs, as their command paths below `rvport` ("" is `rvport` itself: the global options)
GLOBAL = ""
PLAN, BUILD, PREPARE, REPRODUCE = "plan", "build", "prepare", "reproduce"
FETCH, PIN, DOCTOR = "fetch", "pin", "doctor"
LOCK, WHEELHOUSE, SERVE_CHECK = "lock", "wheelhouse", "serve-check"
RECIPES_LIST, RECIPES_SHOW, VERIFY_ARTIFACTS = "recipes list", "recipes show", "verify artifacts"
VERBS = (
    GLOBAL,
    FETCH,
    PIN,
    LOCK,
    WHEELHOUSE,
    SERVE_CHECK,
    REPRODUCE,
    PLAN,
    BUILD,
    PREPARE,
    DOCTOR,
    VERIFY_ARTIFACTS,
    RECIPES_LIST,
    RECIPES_SHOW,
)
PLANNING = frozenset({PLAN, BUILD, PREPARE, REPRODUCE})  # verbs that make a plan
SOURCING = frozenset(
    {PLAN, BUILD, PREPARE, REPRODUCE, FETCH, PIN, LOCK, WHEELHOUSE}
)  # verbs that locate or fetch sources
CATALOGUE = SOURCING | {RECIPES_LIST, RECIPES_SHOW, DOCTOR}  # verbs that load the recipe catalogue


@dataclass(frozen=True, kw_only=True)
class Setting:
    dest: str  # the options value's field; the Typer parameter's name
    verbs: frozenset[str]
    type: Any  # the annotation Typer reads (list[X] | None: repeatable; the options value holds a tuple)
    flags: tuple[str, ...] = ()  # empty: an argument, or (with env) a setting of the environment alone
    argument: bool = False
    default: Any = None
    metavar: str | None = None
    help: str = ""
    env: str | None = None  # the RVPORT_* variable that gives the default
    env_shown: bool = False  # Typer reads `env` and shows it in --help; else `parse_env` reads it here
    parse_env: Callable[[str], Any] = str
    # the value from the command line's and the environment's together (instead of the environment's as the
    # default when the command line gives none)
    combine: Callable[[Any, Mapping[str, str]], Any] | None = None
    choices: tuple[str, ...] = ()  # a value outside them: "unknown NOUN 'x'" (exit 2), NOUN the flag's name
    check: Callable[[Any], None] | None = (
        None  # raises UsageError on a bad value (a given one, or the default)
    )
    required: bool = False
    hidden: bool = False
    show_default: bool = True
    callback: Callable[[Any], Any] | None = None
    is_eager: bool = False
    per_verb: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # {verb: {field: value}}

    def for_verb(self, verb: str) -> Setting:
        """This setting as `verb` sees it (its per_verb fields applied)."""
        return dataclasses.replace(self, per_verb={}, **self.per_verb.get(verb, {}))

    @property
    def on_command_line(self) -> bool:
        return self.argument or bool(self.flags)

    def parameter(self) -> typer.models.ParameterInfo:
        """The Typer argument or option."""
        common: dict[str, Any] = {"metavar": self.metavar, "hidden": self.hidden}
        if self.argument:
            if not self.show_default:
                common["show_default"] = False
            return typer.Argument(... if self.required else self.default, **common)
        extra: dict[str, Any] = {}
        if self.env and self.env_shown:
            extra.update(envvar=self.env, show_envvar=True)
        if self.callback is not None:
            extra.update(callback=self.callback, is_eager=self.is_eager)
        return typer.Option(self.default, *self.flags, help=self.help or None, **common, **extra)

    def from_env(self, environ: Mapping[str, str]) -> Any:
        """The value the environment gives (read here, at the edge, for settings Typer does not read)."""
        if self.env is None or self.env_shown or self.combine is not None:
            return None
        raw = environ.get(self.env, "")
        return self.parse_env(raw) if raw else None


# ---------------------------------------------------------------------------------------------- checks
def _check_jobs(jobs: int | None) -> None:
    if jobs is not None and jobs < 1:
        raise UsageError(
            f"--jobs {jobs}: give 1 or more",
            hint="or leave --jobs out: rvport then runs as many as the cores and memory allow",
        )


MATRIX_JOBS_MAX = 8  # the catalogue has four profiles; a bound on threads and engine load


def _check_matrix_jobs(jobs: int) -> None:
    if not 1 <= jobs <= MATRIX_JOBS_MAX:
        raise UsageError(
            f"--matrix-jobs {jobs}: give 1 to {MATRIX_JOBS_MAX}",
            hint="profiles built side by side share the host's cores; 2 suits a 2-core host",
        )


def _check_pinned(base_image: str | None) -> None:
    """--base-image names its image by digest (no tag that could move)."""
    if base_image and "@sha256:" not in base_image:
        raise UsageError(
            f"--base-image {base_image!r} is not pinned by digest", hint="name it as REF@sha256:<64 hex>"
        )


def _check_cache_size(size: str) -> None:
    """--compiler-cache-size: a size between 16M and 1T."""
    from rvport.engine.compcache import parse_size

    try:
        parse_size(size)
    except ValueError as e:
        raise UsageError(f"--compiler-cache-size: {e}", hint="write e.g. 2G or 500M") from None


def _check_mode(mode: str) -> None:
    """--mode: auto or a mode of the registry (read when checked, so a mode added to it is accepted)."""
    if mode not in modes.choices():
        raise UsageError(f"unknown mode {mode!r}", hint=f"choose {modes.choices_text()}")


def _check_wheelhouse_dir(path: Path | None) -> None:
    if path is None:
        raise UsageError("rvport wheelhouse needs --output DIR", hint="e.g. --output wheelhouse")
    outputs.check_output(path, outputs.Kind.WHEELHOUSE)


def _check_required_dir(
    flag: str, verb: str, example: str, kind: outputs.Kind | None = None
) -> Callable[[Path | None], None]:
    """A directory the verb needs; kind: an output directory of that kind (rvport.outdir's rule)."""

    def check(path: Path | None) -> None:
        if path is None:
            raise UsageError(f"rvport {verb} needs {flag} DIR", hint=f"e.g. {flag} {example}")
        if kind is not None:
            outputs.check_output(path, kind, flag=flag)

    return check


def _check_timeout(seconds: int) -> None:
    if seconds < 1:
        raise UsageError(f"--timeout {seconds}: give 1 or more seconds")


def _check_profile(name: str | None) -> None:
    if name is not None:
        get_profile(name)


def _check_profiles(names: tuple[str, ...]) -> None:
    for name in names:
        get_profile(name)


def _check_build_output(path: Path | None) -> None:
    """`rvport build --output`: a build's output directory (one profile), or a build matrix's (several);
    the build then claims it as the one it makes (rvport.outdir), which says which it holds."""
    try:
        outputs.check_output(path, outputs.Kind.BUILD)
    except UsageError as first:
        try:
            outputs.check_output(path, outputs.Kind.MATRIX)
        except UsageError:
            raise first from None


def _profile_list(values: tuple[str, ...] | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """`rvport build --profile`, repeated or a comma list (rv64gc,rvv256), in the order given: several make
    a build matrix. An empty item, or a profile named twice, is refused; none given is the default profile."""
    out: list[str] = []
    for value in values or ():
        for item in value.split(","):
            name = item.strip()
            if not name:
                raise UsageError(
                    f"--profile {value!r} has an empty item", hint="give profiles such as rv64gc,rvv256"
                )
            if name in out:
                raise UsageError(f"--profile names {name} twice", hint="name each profile of the matrix once")
            out.append(name)
    if not out:
        out.append(default_profile().name)
    return tuple(out)


_report_file = partial(
    outputs.check_file, make_parents=False
)  # verify's --json, --junit: an existing directory


def _truthy(value: str) -> bool:
    return value.lower() in ("1", "true", "yes")


VERIFY_THREADS_MAX = 1024


def _threads(value: str) -> int | None:
    """RVPORT_VERIFY_THREADS: a count from 1 to VERIFY_THREADS_MAX; anything else is a UsageError (exit 2),
    read before Python turns it into an int (bounds.count): 5,000 digits are refused, not exit 9."""
    try:
        return bounds.count(value, name="RVPORT_VERIFY_THREADS", low=1, high=VERIFY_THREADS_MAX)
    except ValueError as e:
        raise UsageError(
            str(e), hint="set it to the threads verify may use (1: none), or unset it for the CPUs"
        ) from None


def _path_list(value: str) -> tuple[Path, ...]:
    return tuple(Path(p) for p in value.split(os.pathsep) if p)


def _expired_suites(values: tuple[str, ...] | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """--allow-expired-release and RVPORT_ALLOW_EXPIRED_RELEASE together."""
    from rvport.sources.debarchive import accepted_suites

    return accepted_suites(values or (), environ)


def _python_list(values: tuple[str, ...] | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """--python, repeated or a comma list (3.13,3.14), in the order given; the planner checks each version
    against the bases' `python:` (unknown, twice). An empty item is refused here."""
    out: list[str] = []
    for value in values or ():
        for item in value.split(","):
            if not item.strip():
                raise UsageError(
                    f"--python {value!r} has an empty item", hint="give versions such as 3.13,3.14"
                )
            out.append(item.strip())
    return tuple(out)


def _or_list(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


def _print_version(value: bool) -> None:
    if value:
        from rvport import __version__

        print(f"rvport {__version__}")
        raise typer.Exit(0)


def _profile_help(extra: str = "") -> str:
    try:
        names = f": {', '.join(load_profiles())}"
    except RecipeError:  # said, located, by the command that needs a profile; --help still works
        names = ""
    return f"Target profile{names} (docs/profiles.md)." + (f" {extra}" if extra else "")


_RECIPE_ARG = "RECIPE[==VERSION]"
_BASE_IMAGE = "REF@sha256:DIGEST"

# ----------------------------------------------------------------------------------------------- the table
SETTINGS: tuple[Setting, ...] = (
    # global options (`rvport --ci build ...`)
    Setting(
        dest="debug",
        verbs=frozenset({GLOBAL}),
        type=bool,
        flags=("--debug",),
        default=False,
        help="Show full commands and tracebacks.",
    ),
    Setting(
        dest="ci",
        verbs=frozenset({GLOBAL}),
        type=bool,
        flags=("--ci",),
        default=False,
        help="Behave as in CI: plain timestamped progress, folded groups.",
    ),
    # the environment alone: where the shipped resources are replaced, how many threads verification uses
    Setting(
        dest="bases_dir",
        verbs=frozenset({GLOBAL}),
        type=Path | None,
        env="RVPORT_BASES",
        parse_env=Path,
        help="A directory of base image specs instead of the built-in resources/bases/.",
    ),
    Setting(
        dest="toolchains_dir",
        verbs=frozenset({GLOBAL}),
        type=Path | None,
        env="RVPORT_TOOLCHAINS",
        parse_env=Path,
        help="A directory of toolchain specs instead of the built-in resources/toolchains/.",
    ),
    Setting(
        dest="dockerfiles_dir",
        verbs=frozenset({GLOBAL}),
        type=Path | None,
        env="RVPORT_DOCKERFILES",
        parse_env=Path,
        help="A directory of stage Dockerfile templates instead of the built-in resources/dockerfiles/.",
    ),
    Setting(
        dest="locks_dir",
        verbs=frozenset({GLOBAL}),
        type=Path | None,
        env="RVPORT_LOCKS",
        parse_env=Path,
        help="A directory of closure locks and lock policies instead of the built-in resources/locks/.",
    ),
    Setting(
        dest="verify_threads",
        verbs=frozenset({GLOBAL}),
        type=int | None,
        env="RVPORT_VERIFY_THREADS",
        parse_env=_threads,
        help="Threads that verify an artifact's members (1: none; default: the CPUs this process may use).",
    ),
    Setting(
        dest="version",
        verbs=frozenset({GLOBAL}),
        type=bool,
        flags=("--version",),
        default=False,
        help="Print the version.",
        callback=_print_version,
        is_eager=True,
    ),
    # arguments
    Setting(
        dest="recipes",
        verbs=PLANNING | {FETCH, DOCTOR},
        type=list[str] | None,
        argument=True,
        metavar=_RECIPE_ARG,
        show_default=False,
        hidden=True,
    ),
    Setting(
        dest="recipe",
        verbs=frozenset({PIN, LOCK, WHEELHOUSE, SERVE_CHECK, RECIPES_SHOW}),
        type=str,
        argument=True,
        required=True,
        metavar=_RECIPE_ARG,
        hidden=True,
    ),
    Setting(
        dest="paths",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=list[Path],
        argument=True,
        required=True,
        metavar="PATH",
        hidden=True,
    ),
    # what to plan and how
    Setting(
        dest="all",
        verbs=frozenset({PLAN, BUILD, PREPARE}),
        type=bool,
        flags=("--all",),
        default=False,
        help="Every recipe whose sources are all pinned (default versions); with --python, the Pythons each "
        "can have. What it leaves out is said in one note.",
    ),
    Setting(
        dest="all_versions",
        verbs=frozenset({FETCH}),
        type=bool,
        flags=("--all",),
        default=False,
        help="Every version of every recipe.",
    ),
    Setting(
        dest="profile",
        verbs=(PLANNING - {BUILD}) | {VERIFY_ARTIFACTS, WHEELHOUSE, SERVE_CHECK},
        type=str,
        flags=("--profile", "-p"),
        default=default_profile_name(),
        metavar="PROFILE",
        help=_profile_help(),
        check=_check_profile,
        per_verb={
            VERIFY_ARTIFACTS: {
                "type": str | None,
                "default": None,
                "help": _profile_help(
                    f"[default: the provenance's profile with --provenance, else {default_profile_name()}]"
                ),
            },
            SERVE_CHECK: {
                "type": str | None,
                "default": None,
                "help": _profile_help(
                    "Its QEMU CPU runs the check; the wheelhouse must be made for it. [default: the "
                    "wheelhouse's profile]"
                ),
            },
        },
    ),
    Setting(
        dest="profiles",
        verbs=frozenset({BUILD}),
        type=list[str] | None,
        flags=("--profile", "-p"),
        metavar="PROFILE[,PROFILE]",
        combine=_profile_list,
        check=_check_profiles,
        help=_profile_help(
            "Several (a comma list, or repeated) make a build matrix: each profile built and tested into "
            "DIR/PROFILE/ as a build of it alone would be, and DIR/matrix.json with a row per profile "
            f"(docs/vllm-ci.md). [default: {default_profile_name()}]"
        ),
    ),
    Setting(
        dest="mode",
        verbs=PLANNING,
        type=str,
        flags=("--mode", "-m"),
        default="auto",
        metavar="MODE",
        help=modes.help_text(),  # the mode registry's (rvport/catalogue/modes.py)
        check=_check_mode,
        per_verb={REPRODUCE: {"help": modes.help_text(" The same in both builds.")}},
    ),
    Setting(
        dest="tag",
        verbs=frozenset({PLAN, BUILD, PREPARE}),
        type=str,
        flags=("--tag", "-t"),
        default="local",
        metavar="TAG",
        help="Tag for the images and the result.",
    ),
    Setting(
        dest="output",
        verbs=PLANNING,
        type=Path,
        flags=("--output", "-o"),
        default=Path("out"),
        metavar="DIR",
        help="Output directory (plan.json, result.json, artifacts/, logs/): new, empty, or one rvport wrote "
        "(its rvport-output.json says so).",
        check=partial(outputs.check_output, kind=outputs.Kind.BUILD),
        per_verb={
            BUILD: {
                "check": _check_build_output,
                "help": "Output directory (plan.json, result.json, artifacts/, logs/; with several "
                "profiles, DIR/matrix.json and a directory of these per profile): new, empty, or one rvport "
                "wrote (its rvport-output.json says so).",
            },
            REPRODUCE: {
                "check": partial(outputs.check_output, kind=outputs.Kind.REPRODUCE),
                "default": Path("reproduce"),
                "help": "Directory for both builds (DIR/first, DIR/second) and DIR/reproduce.json: new, "
                "empty, or one rvport reproduce wrote.",
            },
        },
    ),
    Setting(
        dest="jobs",
        verbs=frozenset({PLAN, BUILD, REPRODUCE}),
        type=int | None,
        flags=("--jobs", "-j"),
        metavar="N",
        help="Parallel compile jobs, 1 or more (default: bounded by cores and memory).",
        check=_check_jobs,
    ),
    Setting(
        dest="matrix_jobs",
        verbs=frozenset({BUILD}),
        type=int,
        flags=("--matrix-jobs",),
        default=1,
        metavar="N",
        env="RVPORT_MATRIX_JOBS",
        env_shown=True,
        help="With several profiles (a build matrix): build and test this many profiles side by side, each "
        "on its own threads, its lines labelled with its profile (1: one after another).",
        check=_check_matrix_jobs,
    ),
    Setting(
        dest="builder",
        verbs=PLANNING | {DOCTOR},
        type=str | None,
        flags=("--builder",),
        metavar="NAME",
        help="A buildx builder (remote BuildKit, kubernetes, native riscv64 node).",
    ),
    Setting(
        dest="manylinux",
        verbs=frozenset({PLAN, BUILD, REPRODUCE}),
        type=str,
        flags=("--manylinux",),
        default="auto",
        metavar="auto|off|2_X",
        help="Repair wheels to a manylinux tag in the stage (auditwheel): auto (the most compatible tag the "
        "wheel allows), a policy such as 2_31, or off (keep linux_riscv64).",
    ),
    Setting(
        dest="python",
        verbs=PLANNING,
        type=list[str] | None,
        flags=("--python",),
        metavar="3.N[,3.N]",
        combine=_python_list,
        help="Build wheels for these CPythons (a comma list, or repeated), each on the riscv64 base that "
        "gives it (its spec's python:); stage ids get the ABI tag (msgspec-cp314). Default: each recipe on "
        "its own base. Kinds without a Python are built once (docs/wheels.md).",
    ),
    Setting(
        dest="source_tree",
        verbs=frozenset({PLAN, BUILD, PREPARE, SERVE_CHECK}),
        type=list[str] | None,
        flags=("--source-tree",),
        metavar="[SOURCE=]DIR",
        help="Build this local tree (a git checkout at any commit, dirty or not, or an unpacked sdist) "
        "instead of the named recipe's main source (the one without dest:), or of its source SOURCE; "
        "copied, never written, and named by its tree digest in plan.json, result.json and the provenance "
        "(docs/sources.md).",
        per_verb={
            SERVE_CHECK: {
                "type": Path | None,
                "metavar": "DIR",
                "help": "Take the tests step's tests from this local tree (a git checkout or an unpacked "
                "sdist, read and copied as build's --source-tree reads it) instead of the recipe's pinned "
                "sdist (docs/vllm-ci.md).",
            }
        },
    ),
    Setting(
        dest="format",
        verbs=frozenset({PLAN}),
        type=str,
        flags=("--format",),
        default="json",
        metavar="json|bake",
        help="json (plan.json) or bake (docker-bake.json too).",
        choices=("json", "bake"),
    ),
    Setting(
        dest="base_image",
        verbs=frozenset({PLAN, BUILD, PREPARE}),
        type=str | None,
        flags=("--base-image",),
        metavar=_BASE_IMAGE,
        help="Use this image as the riscv64 base instead of bootstrapping one.",
        check=_check_pinned,
        per_verb={
            PLAN: {"help": "With --format bake: the riscv64 base image instead of a bootstrapped one."}
        },
    ),
    Setting(
        dest="allow_expired_release",
        verbs=frozenset({PLAN, BUILD, PREPARE, REPRODUCE, LOCK, WHEELHOUSE, SERVE_CHECK}),
        type=list[str] | None,
        flags=("--allow-expired-release",),
        metavar="SUITE",
        env="RVPORT_ALLOW_EXPIRED_RELEASE",
        combine=_expired_suites,
        help="Accept this Debian suite's Release although its Valid-Until has passed (a frozen copy you "
        "trust); repeatable; also RVPORT_ALLOW_EXPIRED_RELEASE=SUITE[,SUITE]. Shown in plan.json and "
        'result.json (docs/bootstrap.md, "Debian sid").',
    ),
    Setting(
        dest="bootstrap",
        verbs=PLANNING,
        type=str | None,
        env="RVPORT_BOOTSTRAP",
        help="How the riscv64 base is made when it must be: debootstrap or split (default: chosen per host; "
        "docs/bootstrap.md).",
    ),
    # build and prepare
    Setting(
        dest="no_smoke",
        verbs=frozenset({BUILD, PREPARE, REPRODUCE}),
        type=bool,
        flags=("--no-smoke",),
        default=False,
        help="Skip the smoke tests and runtime checks.",
        per_verb={PREPARE: {"help": "Skip the smoke test images."}},
    ),
    Setting(
        dest="no_tests",
        verbs=frozenset({BUILD, REPRODUCE}),
        type=bool,
        flags=("--no-tests",),
        default=False,
        help="Skip the recipes' upstream tests (a recipe's `tests:` step, run after its smoke test); "
        "--no-smoke skips them too.",
    ),
    Setting(
        dest="no_cache",
        verbs=frozenset({BUILD}),
        type=bool,
        flags=("--no-cache",),
        default=False,
        help="Compile every stage afresh: rvport's artifact cache is not used and each stage's build step "
        "runs again, past BuildKit's layer cache (images, sources and the compiler cache still are; "
        "--no-compiler-cache goes without it).",
    ),
    Setting(
        dest="compiler_cache",
        verbs=frozenset({BUILD, REPRODUCE}),
        type=Path | None,
        flags=("--compiler-cache",),
        metavar="DIR",
        env="RVPORT_COMPILER_CACHE",
        parse_env=Path,
        help="Keep the compiler cache (ccache) in DIR, for a CI cache: imported into each build stage and "
        "exported after it, atomically. Default: the engine's cache, per toolchain (docs/compiler-cache.md).",
        per_verb={
            REPRODUCE: {
                "help": "The second build uses the compiler cache in DIR (the first always builds without "
                "one): a warm cache must give the same bytes. Default: neither build uses a compiler cache."
            }
        },
    ),
    Setting(
        dest="no_compiler_cache",
        verbs=frozenset({BUILD}),
        type=bool,
        flags=("--no-compiler-cache",),
        default=False,
        help="Compile without a compiler cache: every compile runs.",
    ),
    Setting(
        dest="compiler_cache_size",
        verbs=frozenset({BUILD, REPRODUCE}),
        type=str,
        flags=("--compiler-cache-size",),
        metavar="SIZE",
        default="2G",
        env="RVPORT_COMPILER_CACHE_SIZE",
        help="The compiler cache's size limit per toolchain (e.g. 2G, 500M; 16M to 1T): older objects are "
        "evicted beyond it.",
        check=_check_cache_size,
    ),
    Setting(
        dest="junit",
        verbs=frozenset({BUILD, SERVE_CHECK}),
        type=Path | None,
        flags=("--junit",),
        metavar="FILE",
        help="Write JUnit XML to FILE: one test case per stage (serve-check: per step), and one per upstream "
        "test id a tests step ran (- for standard output: the result table then goes to stderr).",
        check=outputs.check_file,
    ),
    Setting(
        dest="summary",
        verbs=frozenset({BUILD}),
        type=Path | None,
        flags=("--summary",),
        metavar="FILE",
        help="Append a Markdown summary to FILE (default on GitHub Actions: $GITHUB_STEP_SUMMARY; - for "
        "standard output).",
    ),
    Setting(
        dest="cache_to",
        verbs=frozenset({BUILD}),
        type=Path | None,
        flags=("--cache-to",),
        metavar="DIR",
        help="Export the buildx layer cache to DIR (needs a docker-container builder).",
        check=outputs.check_dir,
    ),
    Setting(
        dest="cache_from",
        verbs=frozenset({BUILD}),
        type=Path | None,
        flags=("--cache-from",),
        metavar="DIR",
        help="Import the buildx layer cache from DIR.",
    ),
    Setting(
        dest="tags",
        verbs=frozenset({PREPARE}),
        type=Path | None,
        flags=("--tags",),
        metavar="FILE",
        help="Write the images' tags to FILE, one a line (for docker save; - for standard output: the table "
        "then goes to stderr).",
        check=outputs.check_file,
    ),
    # fetch
    Setting(
        dest="to",
        verbs=frozenset({FETCH}),
        type=Path | None,
        flags=("--to",),
        metavar="DIR",
        help="Also copy every source into this mirror directory.",
        check=outputs.check_dir,
    ),
    Setting(
        dest="tree",
        verbs=frozenset({FETCH}),
        type=bool,
        flags=("--tree",),
        default=False,
        help="Also prepare the source trees (patches, vendored crates).",
    ),
    Setting(
        dest="from_git",
        verbs=frozenset({FETCH}),
        type=list[Path] | None,
        flags=("--from-git",),
        metavar="CLONE",
        help="Take git sources from this local clone (or git bundle) at their pinned commit instead of the "
        "mirror or the network; checked against their tree digest (repeatable). With --to, fills a mirror.",
    ),
    # pin
    Setting(
        dest="into",
        verbs=frozenset({PIN}),
        type=Path | None,
        flags=("--into",),
        metavar="DIR",
        help="Where a built-in recipe is copied first, with the files beside it, to be pinned there: a "
        "recipe directory of your own (default: the first --recipes directory, else ./recipes).",
        check=outputs.check_dir,
    ),
    # lock
    Setting(
        dest="lock_file",
        verbs=frozenset({LOCK}),
        type=Path | None,
        flags=("--output", "-o"),
        metavar="FILE",
        help="Write the lock to FILE (default: RECIPE-VERSION-cpXY.yaml in the current directory; the "
        "catalogue's own are in rvport/resources/locks/; - for standard output, the rest then on stderr).",
        check=outputs.check_file,
    ),
    # wheelhouse
    Setting(
        dest="wheelhouse_dir",
        verbs=frozenset({WHEELHOUSE}),
        type=Path | None,
        flags=("--output", "-o"),
        metavar="DIR",
        help="The wheelhouse directory (required): new, empty, or a wheelhouse rvport made before (replaced "
        "whole, at the end).",
        check=_check_wheelhouse_dir,
    ),
    Setting(
        dest="artifacts",
        verbs=frozenset({WHEELHOUSE}),
        type=list[Path] | None,
        flags=("--artifacts",),
        metavar="DIR",
        help="Where the wheels rvport builds are: a build's artifacts directory, e.g. out/artifacts, "
        "searched recursively (repeatable). Every recipe the lock names must have its wheel there, for the "
        "profile.",
    ),
    # serve-check
    Setting(
        dest="wheelhouse",
        verbs=frozenset({SERVE_CHECK}),
        type=Path | None,
        flags=("--wheelhouse",),
        metavar="DIR",
        help="The wheelhouse to check (required): what `rvport wheelhouse` wrote for this recipe.",
        check=_check_required_dir("--wheelhouse", SERVE_CHECK, "wheelhouse"),
    ),
    Setting(
        dest="check_dir",
        verbs=frozenset({SERVE_CHECK}),
        type=Path | None,
        flags=("--output", "-o"),
        metavar="DIR",
        help="Where the check writes result.json and logs/ (required): new, empty, or a check's rvport made "
        "before.",
        check=_check_required_dir("--output", SERVE_CHECK, "serve-check", outputs.Kind.SERVE_CHECK),
    ),
    Setting(
        dest="skip_serve",
        verbs=frozenset({SERVE_CHECK}),
        type=bool,
        flags=("--skip-serve",),
        default=False,
        help="Leave out the serve steps and guided (install, pip check, import and both generate steps still "
        "run, unless --skip-generate).",
    ),
    Setting(
        dest="skip_generate",
        verbs=frozenset({SERVE_CHECK}),
        type=bool,
        flags=("--skip-generate",),
        default=False,
        help="Leave out both generate steps (the default configuration's and the eager one); with "
        "--skip-serve, a check of vLLM's own tests alone: install, pip check, import, tests.",
    ),
    Setting(
        dest="skip_tests",
        verbs=frozenset({SERVE_CHECK}),
        type=bool,
        flags=("--skip-tests",),
        default=False,
        help="Leave out the tests step (the recipe's serve_tests: from its source tree, in the installed "
        "environment); recorded as skipped.",
    ),
    Setting(
        dest="fresh_install",
        verbs=frozenset({SERVE_CHECK}),
        type=bool,
        flags=("--fresh-install",),
        default=False,
        help="Install every wheel in the check's container, as a user's first install does. Without it the "
        "check starts from an image with every wheel but the recipe's installed (made once per set of those "
        "wheels, docs/closure.md), and its install step installs the recipe's wheel.",
    ),
    Setting(
        dest="timeout",
        verbs=frozenset({SERVE_CHECK}),
        type=int,
        flags=("--timeout",),
        default=1800,
        metavar="SECONDS",
        help="The most a step may take; a step that runs longer is stopped and fails.",
        check=_check_timeout,
    ),
    # verify artifacts
    Setting(
        dest="isa",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=str,
        flags=("--isa",),
        default=IsaLevel.RUNS_ON.value,
        metavar="runs-on|carries",
        help="runs-on: everything an artifact needs is within the profile (it runs on the profile's CPUs); "
        "carries: it also carries every extension the profile promises (catches a silent scalar fallback). "
        "Older names: baseline, profile.",
    ),
    Setting(
        dest="export",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=list[str],
        flags=("--export",),
        default=[],
        metavar="NAME",
        help="A function every artifact must export (defined, global or weak, STT_FUNC): in a shared "
        "object's "
        "dynamic symbols or some member of an archive. Repeat it, or separate names with commas.",
    ),
    Setting(
        dest="vlen_exact",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=bool,
        flags=("--vlen-exact",),
        default=False,
        help="The artifacts' vector code assumes the VLEN it was built for (compiled with "
        "-mrvv-vector-bits=zvl, as vLLM's kernels are): refuse it on a profile of another VLEN. The ELF file "
        "cannot show it; a recipe's `vlen: exact` output, recorded in its provenance, says it too.",
    ),
    Setting(
        dest="provenance",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=Path | None,
        flags=("--provenance",),
        metavar="FILE",
        help="A build's provenance.json (in-toto SLSA v1): each artifact must be one of its subjects, with "
        "the same sha256.",
    ),
    Setting(
        dest="json_out",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=Path | None,
        flags=("--json",),
        metavar="FILE",
        help="Write the report as JSON to FILE (- for standard output: the table then goes to stderr).",
        check=_report_file,
    ),
    Setting(
        dest="junit_out",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=Path | None,
        flags=("--junit",),
        metavar="FILE",
        help="Write JUnit XML to FILE (one case per artifact; - for standard output).",
        check=_report_file,
    ),
    Setting(
        dest="every_member",
        verbs=frozenset({VERIFY_ARTIFACTS}),
        type=bool,
        flags=("--all",),
        default=False,
        help="Show a row for every ELF file, not only failures.",
    ),
    # recipes and sources
    Setting(
        dest="recipes_dir",
        verbs=CATALOGUE | {SERVE_CHECK},
        type=list[Path] | None,
        flags=("--recipes",),
        metavar="DIR",
        env="RVPORT_RECIPE_PATH",
        parse_env=_path_list,
        help="A directory of your own recipes, layered over the built-in catalogue (repeatable; the first "
        "wins). Default: RVPORT_RECIPE_PATH, directories joined with ':'.",
    ),
    Setting(
        dest="unpack_limit",
        verbs=SOURCING | {SERVE_CHECK},
        type=str | None,
        env="RVPORT_UNPACK_LIMIT",
        help="The most bytes one source archive may unpack to, e.g. 32G (docs/sources.md).",
    ),
    Setting(
        dest="cache_dir",
        verbs=(SOURCING - {REPRODUCE}) | {SERVE_CHECK},
        type=Path | None,
        flags=("--cache-dir",),
        metavar="DIR",
        env="RVPORT_CACHE_DIR",
        env_shown=True,
        help="Download cache (default: $XDG_CACHE_HOME/rvport or ~/.cache/rvport).",
    ),
    Setting(
        dest="mirror",
        verbs=SOURCING | {SERVE_CHECK},
        type=Path | None,
        flags=("--mirror",),
        metavar="DIR",
        env="RVPORT_MIRROR",
        env_shown=True,
        help="Directory of source archives consulted before the network (see docs/sources.md).",
    ),
    Setting(
        dest="offline",
        verbs=SOURCING | {SERVE_CHECK},
        type=bool,
        flags=("--offline",),
        default=False,
        env="RVPORT_OFFLINE",
        parse_env=_truthy,
        help="Never use the network; fail when a source is missing.",
    ),
    Setting(
        dest="ca_bundle",
        verbs=(SOURCING - {PLAN}) | {SERVE_CHECK},
        type=Path | None,
        flags=("--ca-bundle",),
        metavar="FILE",
        env="RVPORT_CA_BUNDLE",
        env_shown=True,
        help="CA certificates to verify TLS with (default: REQUESTS_CA_BUNDLE, SSL_CERT_FILE, PIP_CERT, "
        "CURL_CA_BUNDLE, the system bundle, certifi).",
    ),
)


# --------------------------------------------------------------------------------------------- the verbs
def settings_of(verb: str) -> tuple[Setting, ...]:
    """The settings `verb` uses, as it sees them, in table order (the order of its --help)."""
    if verb not in VERBS:
        raise KeyError(f"no verb {verb!r} in the settings table")
    return tuple(s.for_verb(verb) for s in SETTINGS if verb in s.verbs)


def _value_type(annotation: Any) -> Any:
    """The options value's type of a setting: a repeatable one (list[X] | None) holds tuple[X, ...]."""
    args = typing.get_args(annotation)
    inner = (
        [a for a in args if a is not type(None)] if isinstance(annotation, types.UnionType) else [annotation]
    )
    if len(inner) == 1 and typing.get_origin(inner[0]) is list:
        return tuple[typing.get_args(inner[0])[0], ...]
    return annotation


def make_options(verb: str, values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Any:
    """The options value of `verb` (rvport/cli/options.py: ARGS[verb]) from the command line's `values`: the
    environment's defaults filled in (RVPORT_* read here, at the edge), every value checked by its setting, in
    table order."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for s in settings_of(verb):
        value = values.get(s.dest, s.default) if s.on_command_line else s.default
        if s.combine is not None:
            value = s.combine(value, environ)
        elif not value:
            env_value = s.from_env(environ)
            if env_value is not None:
                value = env_value
        if s.choices and value not in s.choices:
            noun = (s.flags[0] if s.flags else s.dest).lstrip("-")
            raise UsageError(f"unknown {noun} {value!r}", hint=f"choose {_or_list(s.choices)}")
        if s.check is not None:
            s.check(value)
        if _value_type(s.type) is not s.type:
            value = tuple(value or ())
        out[s.dest] = value
    _outside_the_cache(out, environ)
    return ARGS[verb](**out)


# the settings naming a directory rvport writes or replaces, which must not lie inside the download cache
_OUTPUT_DIRS = {"output": "--output", "wheelhouse_dir": "--output", "check_dir": "--output", "to": "--to"}


def _outside_the_cache(values: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """An output directory inside the download cache is refused: the cache's entries are rvport's to check
    and remove, and an output among them would mix with them. (A cache inside an output directory, as
    reproduce makes for each build, is another matter.)"""
    if "cache_dir" not in values:
        return
    from rvport.sources.cache import default_cache_dir

    cache = (values["cache_dir"] or default_cache_dir(dict(environ))).absolute().resolve()
    for dest, flag in _OUTPUT_DIRS.items():
        path = values.get(dest)
        if path is None:
            continue
        where = Path(path).absolute().resolve()
        if where == cache or cache in where.parents:
            raise UsageError(
                f"{flag} {path} lies inside the download cache {cache}",
                hint="name a directory outside the cache (or another --cache-dir)",
            )


def command(
    verb: str, *, short_help: str | None = None
) -> Callable[[Callable[[Any], None]], Callable[..., None]]:
    """Decorator: a function of `verb`'s options value becomes a Typer command with the table's parameters;
    rvport/cli/app.py registers it under `verb` (with `short_help` in `rvport --help`, if given)."""

    def wrap(body: Callable[[Any], None]) -> Callable[..., None]:
        params = [
            inspect.Parameter(
                s.dest, inspect.Parameter.KEYWORD_ONLY, default=s.parameter(), annotation=s.type
            )
            for s in settings_of(verb)
            if s.on_command_line
        ]

        def run(**values: Any) -> None:
            body(make_options(verb, values))

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        run.__name__, run.__qualname__, run.__doc__ = body.__name__, body.__qualname__, body.__doc__
        run.__module__ = body.__module__
        run.verb = verb  # type: ignore[attr-defined]
        run.short_help = short_help  # type: ignore[attr-defined]
        return run

    return wrap


def global_switches() -> tuple[str, ...]:
    """The global options that take no value (--debug, --ci, --version): given after the verb, they still
    count (rvport/cli/argv.py)."""
    return tuple(f for s in SETTINGS if GLOBAL in s.verbs and s.type is bool for f in s.flags)
