#!/usr/bin/env python3
"""The compiler cache: cold against warm, its output against a build without it, a one-line change rebuilt.

    python bench/compiler_cache.py                              # msgspec, sentencepiece, tiktoken
    python bench/compiler_cache.py msgspec --mode accelerated   # a subset, one mode
    python bench/compiler_cache.py --record NAME      # records/compiler-cache/NAME.json
    python bench/compiler_cache.py vllm --runs cold,change --change csrc/cpu/activation.cpp
    python bench/compiler_cache.py vllm --profile rv64gc --no-smoke   # the compiles alone

For each recipe, the runs that --runs names (default cold,warm,none), one `rvport build` each, one after
the other, in this order, each with a fresh --cache-dir (no artifact cache):

    cold    --compiler-cache DIR, DIR new, --no-cache: every compile misses and is stored, DIR exported
    warm    --compiler-cache DIR again, --no-cache: imported, the compiles hit
    change  --compiler-cache DIR again, --source-tree TREE: TREE is the recipe's pinned main source
            unpacked (bench/source_change.py) with one line appended to the file --change names, a
            declaration new in every run, so the preprocessed source of that file changes. Without
            --no-cache: the change is what bypasses the stage cache, as in a pull request's job. That
            file's compiles miss, the others' can hit
    none    --no-compiler-cache, --no-cache: every compile runs (the reference)

warm and change need cold (they use its DIR), or --compiler-cache DIR: a warm cache kept from before (say
the one bench/pr_job.py's job left), which cold may not use (cold means new); change is for one recipe, and
its tree is made (and --change checked) before the first build. --no-smoke passes --no-smoke to every
build: no smoke image is made and no smoke test runs, so the record measures the compiles and the artifacts
alone (vllm's smoke image installs Debian's torch under emulation); the record says so (figures.smoke).

The record is written again after each build, so a run cut short keeps what it measured. It prints each
build's wall time and build step, the compiler cache's hits, misses and uncacheable calls, the
cache's size after the build and what was exported, and whether the artifacts of cold, warm and none are
byte-identical (rvport.verify.compare: per artifact sha256). The change run's artifacts are built from
another source, so they are recorded (their sha256) and compared with nothing. result.json counts ccache's
calls and names no source, so which object missed is not told: the change run's misses are counted. The JSON
record (--record) holds the command, the commit, the machine, the load during each build, the change (file,
line, the file's sha256 before and after) and every figure.

What stays warm, on purpose, as in bench/accelerated.py: the base, toolchain and prefix images (their base
records are copied into each fresh cache), and the sources (fetched once into a mirror). Rust's compiles
(tiktoken) go through no compiler cache: rvport caches none of cargo's or rustc's work
(docs/compiler-cache.md),
so its cold and warm builds show what the cache does not reach.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402
import source_change  # noqa: E402

RECIPES = ("msgspec", "sentencepiece", "tiktoken")
# in this order: a run cut short still has cold against warm, then cold against the change
RUNS = ("cold", "warm", "change", "none")
DEFAULT_RUNS = ("cold", "warm", "none")
NEEDS_COLD = ("warm", "change")  # they use the DIR the cold run filled


def parse_runs(text: str) -> tuple[str, ...]:
    """--runs a,b: the named runs in the order they run (RUNS); each known, none twice, and warm and change
    only with cold."""
    names = [n.strip() for n in text.split(",")]
    unknown = [n for n in names if n not in RUNS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown run {', '.join(map(repr, unknown)) or repr(text)}: name some of {','.join(RUNS)}"
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"run {', '.join(twice)} named twice")
    return tuple(n for n in RUNS if n in names)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line; a bad one exits 2 with one line saying what to change."""
    from rvport.errors import UsageError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", nargs="*", default=list(RECIPES))
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--mode", default="accelerated")
    ap.add_argument(
        "--runs",
        type=parse_runs,
        default=DEFAULT_RUNS,
        help=f"the builds per recipe, some of {','.join(RUNS)} (default {','.join(DEFAULT_RUNS)})",
    )
    ap.add_argument(
        "--change",
        metavar="FILE",
        help="the change run's file, relative to the recipe's tree (e.g. csrc/cpu/activation.cpp for vllm)",
    )
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    ap.add_argument(
        "--compiler-cache",
        type=Path,
        metavar="DIR",
        help="a warm compiler cache kept from before, for warm and change without cold (it is exported to)",
    )
    ap.add_argument("--record", metavar="NAME", help="write the record records/compiler-cache/NAME.json")
    ap.add_argument(
        "--no-smoke",
        dest="smoke",
        action="store_false",
        help="pass --no-smoke to every build: the compiles and the artifacts alone",
    )
    args = ap.parse_args(list(argv))
    cold_needed = [n for n in args.runs if n in NEEDS_COLD]
    if args.compiler_cache is not None and "cold" in args.runs:
        ap.error("cold starts from a new compiler cache: leave --compiler-cache out, or cold out of --runs")
    if cold_needed and "cold" not in args.runs and args.compiler_cache is None:
        ap.error(
            f"{', '.join(cold_needed)} needs cold before it (its new compiler cache): add cold to --runs, "
            "or name a warm one with --compiler-cache DIR"
        )
    if args.compiler_cache is not None:
        args.compiler_cache = args.compiler_cache.absolute()
    if "change" in args.runs:
        if not args.change:
            ap.error("--runs change needs --change FILE, the file to change (e.g. csrc/cpu/activation.cpp)")
        if len(args.recipes) != 1:
            ap.error("--runs change is for one recipe: name exactly one (e.g. vllm)")
        try:
            args.change = source_change.check_name(args.change)
        except UsageError as e:
            ap.error(e.message)
    elif args.change:
        ap.error("--change is for the change run: add change to --runs (e.g. --runs cold,change)")
    return args


def fresh_cache(work: Path, name: str, warm: Path) -> Path:
    cache = work / "cache" / name
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    if (warm / "bases").is_dir():
        shutil.copytree(warm / "bases", cache / "bases")
    return cache


def build_args(
    recipe: str,
    run: str,
    *,
    work: Path,
    ccache: Path,
    mirror: Path,
    mode: str,
    profile: str,
    tree: Path | None = None,
    smoke: bool = True,
):
    """One run's output directory (emptied) and `rvport` arguments. change builds `tree` and leaves BuildKit's
    cache on: its changed tree is what makes the build step run; the other runs pass --no-cache. Without
    `smoke`, every run passes --no-smoke."""
    out = work / f"out-{recipe}-{run}"
    shutil.rmtree(out, ignore_errors=True)
    if run == "change":
        if tree is None:
            raise ValueError("the change run builds a tree: pass tree=")
        run_args = ["--source-tree", str(tree), "--compiler-cache", str(ccache)]
    elif run == "none":
        run_args = ["--no-cache", "--no-compiler-cache"]
    else:
        run_args = ["--no-cache", "--compiler-cache", str(ccache)]
    args = [
        "--ci",
        "build",
        recipe,
        "--profile",
        profile,
        "--mode",
        mode,
        "--tag",
        "bench",
        "--output",
        str(out),
        "--mirror",
        str(mirror),
        *run_args,
        *([] if smoke else ["--no-smoke"]),
    ]
    return out, args


def stage_figures(out: Path) -> dict:
    """What one build's result.json says of its one stage: status, timings, the compiler cache."""
    path = out / "result.json"
    if not path.is_file():
        return {"status": "no result.json"}
    doc = json.loads(path.read_text())
    (st,) = doc["stages"]
    return {
        "status": st["status"],
        "wall_s": doc["duration_s"],
        "build_s": st["timings"].get("build"),
        "timings": st["timings"],
        "compiler_cache": st.get("compiler_cache"),
        "artifacts": [{k: a[k] for k in ("path", "size", "sha256")} for a in st["artifacts"]],
    }


def one(recipe: str, run: str, **kw) -> dict:
    work, warm = kw["work"], kw.pop("warm")
    out, args = build_args(recipe, run, **kw)
    cache = fresh_cache(work, f"{recipe}-{run}", warm)
    with common.LoadAverage() as load:
        rc, wall = common.rvport([*args, "--cache-dir", str(cache)], log=work / f"{recipe}-{run}.log")
    res = {"rc": rc, "command": ["rvport", *args], "wall_measured_s": round(wall, 1), "load": load.summary()}
    res.update(stage_figures(out))
    c = res.get("compiler_cache") or {}
    print(
        f"  {recipe:14} {run:6} rc={rc} wall={wall:7.1f}s build={res.get('build_s') or 0:7.1f}s "
        f"hits={c.get('hits', '-')} misses={c.get('misses', '-')} uncacheable={c.get('uncacheable', '-')} "
        f"size_after={c.get('size_after', '-')} export={(c.get('export') or {}).get('status', '-')} "
        f"load={load.describe()}",
        flush=True,
    )
    return res


def identical(work: Path, recipe: str, runs: Sequence[str]) -> dict:
    """The artifacts of the builds made so far compared byte for byte: cold against warm, and each against
    the build without a cache when there is one. The change run is built from another tree: never compared."""
    from rvport.verify.compare import compare_dirs

    pairs = [
        (a, b) for a, b in (("cold", "warm"), ("none", "cold"), ("none", "warm")) if a in runs and b in runs
    ]
    out = {}
    for a, b in pairs:
        first, second = (work / f"out-{recipe}-{x}" / "artifacts" for x in (a, b))
        if not first.is_dir() or not second.is_dir():
            out[f"{a}-{b}"] = {"ok": False, "why": "a build left no artifacts"}
            continue
        c = compare_dirs(first, second)
        out[f"{a}-{b}"] = {
            "ok": c.ok,
            "identical": [f"{n} {sha}" for n, sha in c.identical],
            "differences": len(c.differences),
        }
    return out


def figures(
    *, started: str, profile: str, mode: str, runs: Sequence[str], results: dict, smoke: bool = True
) -> dict:
    """The record's figures: what ran and, per recipe, each run's figures, the comparisons and the change."""
    return {
        "started": started,
        "profile": profile,
        "mode": mode,
        "runs": list(runs),
        "smoke": smoke,
        "recipes": results,
    }


def make_change_tree(recipe: str, name: str, *, work: Path, warm: Path, mirror: Path) -> tuple[Path, dict]:
    """The change run's tree: the recipe's main source unpacked under `work`, `name` changed by one line."""
    tree = work / f"tree-{recipe}-change"
    source_change.unpack_main_source(recipe, tree, cache_dir=warm, mirror=mirror)
    change = source_change.apply_change(tree, name, secrets.token_hex(6))
    return tree, {"tree": str(tree), **change.to_json()}


def summary(results: dict, runs: Sequence[str]) -> int:
    """The table after the last build; 1 when a build failed or cold, warm and none differ, else 0."""
    print()
    print(f"{'recipe':14} " + " ".join(f"{r:>22}" for r in runs) + f" {'warm/none':>10}  identical")
    worst = 0
    for r, res in results.items():
        got = {run: res["runs"].get(run) or {} for run in runs}
        b = {run: got[run].get("build_s") or 0.0 for run in runs}
        same = all(v["ok"] for v in res["identical"].values())
        worst = max(worst, 0 if same and all(x["rc"] == 0 for x in res["runs"].values()) else 1)
        cells = []
        for run in runs:
            c = got[run].get("compiler_cache") or {}
            cells.append(f"{b[run]:8.1f}s {c.get('hits', '-')!s:>5}h {c.get('misses', '-')!s:>5}m")
        ratio = b["warm"] / b["none"] if b.get("warm") and b.get("none") else 0.0
        if ratio:
            res["build_ratio_warm_to_none"] = round(ratio, 3)
        print(f"{r:14} " + " ".join(f"{c:>22}" for c in cells) + f" {ratio:9.2f}x  {'yes' if same else 'NO'}")
    return worst


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    common.stop_on_signals()
    from rvport.errors import RvportError
    from rvport.sources.cache import default_cache_dir

    warm = default_cache_dir(dict(os.environ))
    made = common.work_and_mirror(args.work, prefix="rvport-bench-ccache-", recipes=args.recipes)
    if made is None:
        return 2
    work, mirror = made
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results: dict[str, dict] = {}
    loads: list[dict] = []
    trees: dict[str, Path] = {}
    if "change" in args.runs:  # before any build: a --change that names no file stops here
        (r,) = args.recipes
        try:
            trees[r], change = make_change_tree(r, args.change, work=work, warm=warm, mirror=mirror)
        except RvportError as e:
            print(f"bench/compiler_cache.py: {e.render()}", file=sys.stderr)
            return int(e.exit_code)
        print(f"  {r}: {change['file']} changed in {trees[r]}: {change['line']}", flush=True)
        results[r] = {"runs": {}, "identical": {}, "change": change}

    def record() -> None:
        if not args.record or not loads:
            return
        figs = figures(
            started=started,
            profile=args.profile,
            mode=args.mode,
            runs=args.runs,
            results=results,
            smoke=args.smoke,
        )
        command = ["python", "bench/compiler_cache.py", *argv]
        path = common.write_record(
            "compiler-cache", args.record, command=command, figures=figs, load=common.merge_loads(loads)
        )
        print(f"  wrote {path}", flush=True)

    for r in args.recipes:
        ccache = args.compiler_cache or work / f"ccache-{r}"
        if args.compiler_cache is None:
            shutil.rmtree(ccache, ignore_errors=True)  # cold means new
        kw = {"work": work, "ccache": ccache, "mirror": mirror, "mode": args.mode, "profile": args.profile}
        kw["smoke"] = args.smoke
        results.setdefault(r, {"runs": {}, "identical": {}})
        for run in args.runs:
            tree = {"tree": trees[r]} if run == "change" else {}
            results[r]["runs"][run] = one(r, run, warm=warm, **kw, **tree)
            loads.append(results[r]["runs"][run]["load"])
            results[r]["identical"] = identical(work, r, list(results[r]["runs"]))
            record()
    worst = summary(results, args.runs)
    record()  # with the ratios the table computed
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
