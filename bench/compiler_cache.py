#!/usr/bin/env python3
"""The compiler cache, cold against warm, and its output against a build without it, in one run.

    python bench/compiler_cache.py                              # msgspec, sentencepiece, tiktoken
    python bench/compiler_cache.py msgspec --mode accelerated   # a subset, one mode
    python bench/compiler_cache.py --record NAME      # records/compiler-cache/NAME.json

For each recipe, three `rvport build`s one after the other, each with a fresh --cache-dir and --no-cache (no
artifact cache, no BuildKit layer cache for the build step), so each one really runs its build:

    none   --no-compiler-cache: every compile runs (the reference)
    cold   --compiler-cache DIR, DIR new: every compile misses and is stored, DIR exported after the build
    warm   --compiler-cache DIR again: imported, the compiles hit

The record is written again after each build, so a run cut short keeps what it measured. It prints each
build's wall time and build step, the compiler cache's hits, misses and uncacheable calls, the
cache's size after the build and what was exported, and whether the artifacts of the three builds are
byte-identical (rvport.verify.compare: per artifact sha256). The JSON record (--record) holds the command, the
commit, the machine, the load during each build and every figure.

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
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402

RECIPES = ("msgspec", "sentencepiece", "tiktoken")
RUNS = ("cold", "warm", "none")  # in this order: a run cut short still has cold against warm


def fresh_cache(work: Path, name: str, warm: Path) -> Path:
    cache = work / "cache" / name
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    if (warm / "bases").is_dir():
        shutil.copytree(warm / "bases", cache / "bases")
    return cache


def build_args(recipe: str, run: str, *, work: Path, ccache: Path, mirror: Path, mode: str, profile: str):
    out = work / f"out-{recipe}-{run}"
    shutil.rmtree(out, ignore_errors=True)
    cache_args = ["--no-compiler-cache"] if run == "none" else ["--compiler-cache", str(ccache)]
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
        "--no-cache",
        *cache_args,
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
        f"  {recipe:14} {run:5} rc={rc} wall={wall:7.1f}s build={res.get('build_s') or 0:7.1f}s "
        f"hits={c.get('hits', '-')} misses={c.get('misses', '-')} uncacheable={c.get('uncacheable', '-')} "
        f"size_after={c.get('size_after', '-')} export={(c.get('export') or {}).get('status', '-')} "
        f"load={load.describe()}",
        flush=True,
    )
    return res


def identical(work: Path, recipe: str, runs: list[str]) -> dict:
    """The artifacts of the builds made so far compared byte for byte: cold against warm, and each against
    the build without a cache when there is one."""
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", nargs="*", default=list(RECIPES))
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--mode", default="accelerated")
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    ap.add_argument("--record", metavar="NAME", help="write the record records/compiler-cache/NAME.json")
    args = ap.parse_args()
    common.stop_on_signals()
    from rvport.sources.cache import default_cache_dir

    warm = default_cache_dir(dict(os.environ))
    work = args.work or Path(tempfile.mkdtemp(prefix="rvport-bench-ccache-"))
    work.mkdir(parents=True, exist_ok=True)
    mirror = work / "mirror"
    mirror.mkdir(exist_ok=True)
    print(f"work directory: {work}", flush=True)
    rc, _ = common.rvport(["fetch", *args.recipes, "--to", str(mirror)], log=work / "fetch.log")
    if rc != 0:
        print(f"fetching sources failed; see {work / 'fetch.log'}")
        return 2
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results: dict[str, dict] = {}
    loads: list[dict] = []

    def record() -> None:
        if not args.record or not loads:
            return
        load = {
            "min": min(x["min"] for x in loads),
            "mean": round(sum(x["mean"] for x in loads) / len(loads), 2),
            "max": max(x["max"] for x in loads),
            "samples": sum(x["samples"] for x in loads),
        }
        figures = {"started": started, "profile": args.profile, "mode": args.mode, "recipes": results}
        command = ["python", "bench/compiler_cache.py", *sys.argv[1:]]
        path = common.write_record("compiler-cache", args.record, command=command, figures=figures, load=load)
        print(f"  wrote {path}", flush=True)

    for r in args.recipes:
        ccache = work / f"ccache-{r}"
        shutil.rmtree(ccache, ignore_errors=True)  # cold means new
        kw = {"work": work, "ccache": ccache, "mirror": mirror, "mode": args.mode, "profile": args.profile}
        results[r] = {"runs": {}, "identical": {}}
        for run in RUNS:
            results[r]["runs"][run] = one(r, run, warm=warm, **kw)
            loads.append(results[r]["runs"][run]["load"])
            results[r]["identical"] = identical(work, r, list(results[r]["runs"]))
            record()
    print()
    print(f"{'recipe':14} {'none':>9} {'cold':>9} {'warm':>9} {'warm/none':>10} {'hits warm':>10}  identical")
    worst = 0
    for r, res in results.items():
        b = {run: (res["runs"].get(run) or {}).get("build_s") or 0.0 for run in RUNS}
        c = (res["runs"].get("warm") or {}).get("compiler_cache") or {}
        same = all(v["ok"] for v in res["identical"].values())
        worst = max(worst, 0 if same and all(x["rc"] == 0 for x in res["runs"].values()) else 1)
        ratio = b["warm"] / b["none"] if b["none"] else 0.0
        res["build_ratio_warm_to_none"] = round(ratio, 3)
        print(
            f"{r:14} {b['none']:8.1f}s {b['cold']:8.1f}s {b['warm']:8.1f}s {ratio:9.2f}x "
            f"{c.get('hits', '-')!s:>10}  {'yes' if same else 'NO'}"
        )
    return worst


if __name__ == "__main__":
    sys.exit(main())
