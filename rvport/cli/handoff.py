"""The options the layers below are given, each built from a verb's options value (rvport/cli/options.py) by
one function here: the plan's Request, the sources' FetchOptions, and the RunOptions of a run over a plan
(BuildOptions for `rvport build` and `rvport reproduce`, BakeOptions for `rvport plan --format bake`).

A verb that has no setting for a value gives it as a class constant of its options value (ReproduceArgs.tag),
so every function reads the same names from every verb it serves. Heavy modules are imported when a function
is called: `rvport --help` imports this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rvport.cli.options import (
    BuildArgs,
    FetchArgs,
    LockArgs,
    PinArgs,
    PlanArgs,
    PrepareArgs,
    ReproduceArgs,
    ServeCheckArgs,
    WheelhouseArgs,
)
from rvport.errors import UsageError

if TYPE_CHECKING:
    from rvport.engine.bake import BakeOptions
    from rvport.engine.runner import BuildOptions
    from rvport.engine.stage import RunOptions
    from rvport.plan.planner import Request
    from rvport.sources.fetch import FetchOptions

# the verbs that make a plan, the verbs that run one, the verbs that locate or fetch sources
Planning = PlanArgs | BuildArgs | PrepareArgs | ReproduceArgs
Running = PlanArgs | BuildArgs | PrepareArgs | ReproduceArgs
Building = BuildArgs | ReproduceArgs
Sourcing = (
    FetchArgs
    | PinArgs
    | LockArgs
    | WheelhouseArgs
    | ServeCheckArgs
    | PlanArgs
    | BuildArgs
    | PrepareArgs
    | ReproduceArgs
)


def profile_names(o: Planning) -> tuple[str, ...]:
    """The profiles the command line names: `rvport build`'s one or several (a build matrix), or the one of
    the other verbs that plan."""
    return o.profiles if isinstance(o, BuildArgs) else (o.profile,)


def request(o: Planning, *, profile: str | None = None) -> Request:
    """What the command line asks the planner for (the values are checked already, by their settings), for
    `profile` (default: the first it names)."""
    from rvport.catalogue.profiles import get_profile
    from rvport.plan.planner import Mode, Request

    if o.all and o.recipes:
        raise UsageError(
            "give recipe names or --all, not both", hint="drop --all to use only the named recipes"
        )
    return Request(
        refs=o.recipes,
        all=o.all,
        profile=get_profile(profile or profile_names(o)[0]),
        mode=Mode(o.mode),
        tag=o.tag,
        jobs=o.jobs,
        builder=o.builder,
        manylinux=o.manylinux,
        allow_expired_release=o.allow_expired_release,
        pythons=o.python,
    )


def fetch_options(o: Sourcing, *, cache_dir: Path | None = None) -> FetchOptions:
    """Where sources are found and how (cache, mirror, network, CA bundle, unpack bound); `cache_dir` replaces
    the verb's (each build of `rvport reproduce` has its own). `rvport fetch` alone fills a mirror or takes
    git sources from local clones."""
    from rvport.sources import fetch_options as make

    filling = o if isinstance(o, FetchArgs) else None
    return make(
        cache_dir=cache_dir or o.cache_dir,
        mirror=o.mirror,
        offline=o.offline,
        ca=o.ca_bundle,
        to=filling.to if filling else None,
        from_git=filling.from_git if filling else (),
        unpack_limit=o.unpack_limit,
    )


def _run(o: Running, fetch: FetchOptions, output: Path | None) -> dict[str, Any]:
    """RunOptions' fields: the same for every run over a plan."""
    return {
        "output": o.output if output is None else output,
        "fetch": fetch,
        "builder": o.builder,
        "base_image": o.base_image,
        "allow_expired_release": o.allow_expired_release,
        "bootstrap": o.bootstrap,
    }


def run_options(o: Running, fetch: FetchOptions) -> RunOptions:
    """A run over a plan's stages (`rvport prepare`: the images of the build it prepares for)."""
    from rvport.engine.stage import RunOptions

    return RunOptions(**_run(o, fetch, None))


def bake_options(o: PlanArgs, fetch: FetchOptions) -> BakeOptions:
    """`rvport plan --format bake`'s export."""
    from rvport.engine.bake import BakeOptions

    return BakeOptions(**_run(o, fetch, None))


def build_options(
    o: Building,
    fetch: FetchOptions,
    *,
    output: Path | None = None,
    compiler_cache: Any = None,
    other_vlen: int | None = None,
) -> BuildOptions:
    """A build (`rvport build`, each of `rvport reproduce`'s two: `output` is its own directory);
    `compiler_cache`: its CompilerCache (planning.compiler_cache; None: the engine's); `other_vlen`: a build
    matrix's vector profile, whose smoke test also runs on a CPU of that VLEN."""
    from rvport.engine.compcache import CompilerCache
    from rvport.engine.runner import BuildOptions

    return BuildOptions(
        **_run(o, fetch, output),
        smoke=not o.no_smoke,
        tests=not o.no_smoke and not o.no_tests,
        no_cache=o.no_cache,
        cache_to=o.cache_to,
        cache_from=o.cache_from,
        compiler_cache=compiler_cache or CompilerCache(),
        other_vlen=other_vlen,
    )
