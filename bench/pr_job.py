#!/usr/bin/env python3
"""A vLLM pull request's whole riscv64 job, as ci/vllm's workflow runs it, timed phase by phase in one run.

    python bench/pr_job.py [--compiler-cache DIR] [--profiles rv64gc,rvv256] [--mode accelerated] \
        [--change csrc/cpu/activation.cpp] [--closure-tests tests] [--matrix-jobs N] [--work DIR] \
        [--record NAME]

The pull request is vllm's pinned sdist unpacked by rvport with one line appended to one kernel source
(bench/source_change.py: a declaration new in every run, so the stage cache cannot answer it and the
compiler cache misses that file only). Then the job's two steps, one after the other, as the action runs
them:

    build   rvport --ci build vllm --source-tree TREE --profile PROFILES --mode MODE --mirror MIRROR
            [--compiler-cache DIR] --output WORK/out --junit WORK/out/junit.xml
            (--matrix-jobs N: RVPORT_MATRIX_JOBS=N in both steps' environment, as the CI files set it: the
            profiles built, and checked, N side by side)
    tests   ci/closure-tests vllm PROFILES WORK/out TREE WORK/tests MODE --mode MODE --mirror MIRROR
            [--compiler-cache DIR]    (the closure's other wheels, each profile's wheelhouse, then
            rvport serve-check with vLLM's own tests from TREE; `tests` mode: --skip-generate --skip-serve)

`rvport` is this checkout's (`python -m rvport`, through a shim on PATH for ci/closure-tests). What is warm
is what the machine has: run the bench once to fill the images, rvport's cache and DIR, and again for the
figures of a warm job. Without --compiler-cache the builds use the engine's own compiler cache (a runner
with a persistent engine), which a build of the same profiles before has filled.

The record (--record NAME: records/vllm-ci/NAME.json) holds the change, each step's exit status, wall time
and load, each profile's build stage (status, timings, compiler cache hits and misses, the wheel's sha256),
each profile's check (every step's status and seconds, vLLM's tests per file), the job's total against the
target of issue 40 (TARGET_S: 20 minutes), and the closure script's own time per profile. Exit status 0
when both steps passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import source_change  # noqa: E402
from compiler_cache import stage_figures  # noqa: E402
from default_config import figures_of  # noqa: E402

TARGET_S = 20 * 60  # issue 40: rv64gc and rvv256 built and tested, warm, in under 20 minutes
CLOSURE_TESTS = common.ROOT / "ci" / "closure-tests"
MODES = ("tests", "generate", "serve")
_PER_PROFILE = re.compile(r"^\[closure-tests\] ([a-z0-9-]+): exit (\d+) in (\d+) s$")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--compiler-cache", type=Path, help="the compiler cache DIR the job keeps (default: the engine's)"
    )
    ap.add_argument("--profiles", default="rv64gc,rvv256")
    ap.add_argument("--mode", default="accelerated")
    ap.add_argument("--change", default="csrc/cpu/activation.cpp", help="the kernel source the PR changes")
    ap.add_argument("--closure-tests", default="tests", choices=MODES)
    ap.add_argument(
        "--matrix-jobs", type=int, default=1, choices=range(1, 9), metavar="N", help="RVPORT_MATRIX_JOBS"
    )
    ap.add_argument("--work", type=Path, help="keep the tree, logs and outputs here (default: a new one)")
    ap.add_argument("--record", metavar="NAME", type=common.record_part, help="records/vllm-ci/NAME.json")
    args = ap.parse_args(list(argv))
    from rvport.errors import UsageError

    try:
        args.change = source_change.check_name(args.change)
    except UsageError as e:
        ap.error(e.render())
    args.profile_list = [p.strip() for p in args.profiles.split(",") if p.strip()]
    if not args.profile_list:
        ap.error("--profiles names no profile")
    return args


def shim(work: Path) -> Path:
    """WORK/bin/rvport: this checkout's rvport for ci/closure-tests, which calls `rvport` from PATH."""
    bin_ = work / "bin"
    bin_.mkdir(exist_ok=True)
    path = bin_ / "rvport"
    root, python = shlex.quote(str(common.ROOT)), shlex.quote(sys.executable)
    path.write_text(
        f'#!/bin/sh\nPYTHONPATH={root}${{PYTHONPATH:+:$PYTHONPATH}} exec {python} -m rvport "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_


def per_profile_seconds(log: Path) -> dict[str, dict]:
    """ci/closure-tests' own line per profile (its wheelhouse and check): exit status and seconds."""
    out: dict[str, dict] = {}
    if not log.is_file():
        return out
    for line in log.read_text(errors="replace").splitlines():
        if m := _PER_PROFILE.match(line.strip()):
            out[m.group(1)] = {"exit": int(m.group(2)), "seconds": int(m.group(3))}
    return out


def checks(tests_out: Path, profiles: Sequence[str], seconds: dict[str, dict]) -> dict[str, dict]:
    """Each profile's serving check (its result.json, as bench/default_config.py records one)."""
    out: dict[str, dict] = {}
    for p in profiles:
        path = tests_out / f"check-{p}" / "result.json"
        got = seconds.get(p, {})
        if not path.is_file():
            out[p] = {"result": "no result.json", **got}
            continue
        doc = json.loads(path.read_text())
        out[p] = {**figures_of(doc, got.get("exit", -1), float(got.get("seconds", 0))), **got}
    return out


def total(results: dict) -> dict:
    """The job's wall time (the steps that ran) against TARGET_S: `passed` when both steps ran and passed,
    and `under_target` only for a job that passed in less."""
    wall = round(sum(results[s]["wall_s"] for s in ("build", "tests") if s in results), 1)
    passed = all(s in results and results[s].get("rc") == 0 for s in ("build", "tests"))
    return {
        "wall_s": wall,
        "target_s": TARGET_S,
        "passed": passed,
        "under_target": passed and wall < TARGET_S,
    }


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    common.stop_on_signals()
    from rvport.errors import RvportError
    from rvport.sources.cache import default_cache_dir

    made = common.work_and_mirror(args.work, prefix="rvport-bench-pr-job-", recipes=["vllm"])
    if made is None:
        return 2
    work, mirror = made
    tree = work / "tree-pr"
    try:
        cache = default_cache_dir(dict(os.environ))
        source_change.unpack_main_source("vllm", tree, cache_dir=cache, mirror=mirror)
        change = source_change.apply_change(tree, args.change, secrets.token_hex(6))
    except RvportError as e:
        print(f"bench/pr_job.py: {e.render()}", file=sys.stderr)
        return int(e.exit_code)
    out, tests_out = work / "out", work / "tests"
    for d in (out, tests_out):
        shutil.rmtree(d, ignore_errors=True)
    profiles = ",".join(args.profile_list)
    cc = ["--compiler-cache", str(args.compiler_cache.absolute())] if args.compiler_cache else []
    results: dict = {"change": change.to_json(), "profiles": args.profile_list, "mode": args.mode}
    results["matrix_jobs"] = args.matrix_jobs
    side = {**os.environ, "RVPORT_MATRIX_JOBS": str(args.matrix_jobs)}
    results["closure_tests"] = args.closure_tests

    def record() -> None:
        if args.record:
            loads = [results[s]["load"] for s in ("build", "tests") if s in results]
            path = common.write_record(
                "vllm-ci",
                args.record,
                command=["python", "bench/pr_job.py", *argv],
                figures=results,
                load=common.merge_loads(loads) if loads else None,
            )
            print(f"  wrote {path}", flush=True)

    build = ["--ci", "build", "vllm", "--source-tree", str(tree), "--profile", profiles, "--mode", args.mode]
    build += ["--mirror", str(mirror), *cc, "--output", str(out)]
    build += ["--junit", str(out / "junit.xml")]
    with common.LoadAverage() as load:
        rc, wall = common.rvport(build, log=work / "build.log", env=side)
    single = len(args.profile_list) == 1
    results["build"] = {
        "command": ["rvport", *build],
        "rc": rc,
        "wall_s": round(wall, 1),
        "load": load.summary(),
        "stages": {p: stage_figures(out if single else out / p) for p in args.profile_list},
    }
    results["total"] = total(results)  # the build's alone, until the tests step adds its own
    print(f"  build  rc={rc} wall={wall:7.1f}s load={load.describe()}", flush=True)
    record()
    if rc != 0:
        return 1
    tests = [str(CLOSURE_TESTS), "vllm", profiles, str(out), str(tree), str(tests_out), args.closure_tests]
    tests += ["--mode", args.mode, "--mirror", str(mirror), *cc]
    env = {**side, "PATH": f"{shim(work)}{os.pathsep}{os.environ.get('PATH', '')}"}
    with common.LoadAverage() as load:
        rc2, wall2 = common.rvport([], log=work / "tests.log", env=env, command=["bash", *tests], cwd=work)
    seconds = per_profile_seconds(work / "tests.log")
    results["tests"] = {
        "command": ["ci/closure-tests", *tests[1:]],
        "rc": rc2,
        "wall_s": round(wall2, 1),
        "load": load.summary(),
        "checks": checks(tests_out, args.profile_list, seconds),
    }
    results["total"] = total(results)
    print(f"  tests  rc={rc2} wall={wall2:7.1f}s load={load.describe()}", flush=True)
    print(f"  job    {results['total']['wall_s']:.1f}s (target {TARGET_S} s)", flush=True)
    record()
    return 0 if rc2 == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
