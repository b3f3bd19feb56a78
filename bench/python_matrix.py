#!/usr/bin/env python3
"""One build for two Pythons against two builds for one Python each, from warm bases, in one run.

    python bench/python_matrix.py                       # msgspec, --python 3.13 and 3.14
    python bench/python_matrix.py msgspec --mode qemu   # every stage emulated (same mode for both Pythons)

First, untimed: the sources are fetched into a mirror, and `rvport prepare RECIPES --python A,B` makes every
base, toolchain, smoke and prefix image the builds need (sid's expired Release accepted). Then three timed
builds, each with a fresh --cache-dir (the warm cache's bases/ records copied in, as bench/accelerated.py
does), the mirror, --offline and --no-cache (no artifact cache, no BuildKit layer cache for the build step),
so each one really compiles:

    single A   rvport build RECIPES --python A
    single B   rvport build RECIPES --python B
    matrix     rvport build RECIPES --python A,B

The target (issue 26): the matrix run takes at most 1.6x one 1-Python run, meaning the second Python adds
only its own compile work. The bench prints the matrix wall time against each single run, their mean and
their sum (what two separate runs cost), and whether every stage passed verify and smoke. Runs are
sequential so that all three see the same (shared, busy) machine as nearly as possible.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402

TARGET = 1.6


def rvport(*args: str, log: Path) -> tuple[int, float]:
    return common.rvport(["--ci", *args], log=log)


def fresh_cache(work: Path, name: str, warm: Path) -> Path:
    cache = work / "cache" / name
    cache.mkdir(parents=True)
    if (warm / "bases").is_dir():
        shutil.copytree(warm / "bases", cache / "bases")
    return cache


def one(
    name: str, recipes: list[str], pythons: str, args: argparse.Namespace, work: Path, warm: Path
) -> dict:
    out = work / f"out-{name}"
    rc, wall = rvport(
        "build",
        *recipes,
        "--python",
        pythons,
        "--allow-expired-release",
        "sid",
        "--profile",
        args.profile,
        "--mode",
        args.mode,
        "--tag",
        "bench",
        "--output",
        str(out),
        "--cache-dir",
        str(fresh_cache(work, name, warm)),
        "--mirror",
        str(work / "mirror"),
        "--offline",
        "--no-cache",
        log=work / f"{name}.log",
    )
    res: dict = {"rc": rc, "wall": round(wall, 1), "ok": False, "stages": {}}
    doc_path = out / "result.json"
    if doc_path.is_file():
        doc = json.loads(doc_path.read_text())
        for st in doc["stages"]:
            res["stages"][st.get("id", st["recipe"])] = {
                "status": st["status"],
                "mode": st["mode"],
                "timings": st["timings"],
                "ok": st["status"] == "ok"
                and bool(st["verify"] and st["verify"]["ok"])
                and (st["smoke"] or {}).get("status") == "passed",
            }
        res["ok"] = rc == 0 and all(s["ok"] for s in res["stages"].values())
    builds = ", ".join(
        f"{i} {s['mode']} build {s['timings'].get('build', 0):.0f}s" for i, s in res["stages"].items()
    )
    print(
        f"  {name:10} --python {pythons:10} rc={rc} wall={wall:7.1f}s "
        f"{'ok' if res['ok'] else 'FAILED'}; {builds}",
        flush=True,
    )
    return res


def main() -> int:
    common.stop_on_signals()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", nargs="*", default=["msgspec"])
    ap.add_argument("--python", default="3.13,3.14", help="the two Pythons, comma-separated")
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    args = ap.parse_args()
    pythons = [p for p in args.python.split(",") if p]
    if len(pythons) != 2:
        ap.error("--python takes two Pythons, e.g. 3.13,3.14")
    from rvport.sources.cache import default_cache_dir

    warm = default_cache_dir(dict(os.environ))
    work = args.work or Path(tempfile.mkdtemp(prefix="rvport-bench-pymatrix-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "mirror").mkdir(exist_ok=True)
    print(f"work directory: {work}", flush=True)
    rc, _ = rvport("fetch", *args.recipes, "--to", str(work / "mirror"), log=work / "fetch.log")
    if rc != 0:
        print(f"fetching sources failed; see {work / 'fetch.log'}")
        return 2
    rc, warm_s = rvport(
        "prepare",
        *args.recipes,
        "--python",
        args.python,
        "--allow-expired-release",
        "sid",
        "--profile",
        args.profile,
        "--mode",
        args.mode,
        "--output",
        str(work / "prepare"),
        log=work / "prepare.log",
    )
    print(f"  warm-up (rvport prepare, untimed for the ratio): rc={rc} {warm_s:.1f}s", flush=True)
    if rc != 0:
        print(f"making the images failed; see {work / 'prepare.log'}")
        return 2
    with common.LoadAverage() as load:
        a = one("single-a", args.recipes, pythons[0], args, work, warm)
        b = one("single-b", args.recipes, pythons[1], args, work, warm)
        m = one("matrix", args.recipes, args.python, args, work, warm)
    mean = (a["wall"] + b["wall"]) / 2
    ratios = {
        f"matrix / single {pythons[0]}": m["wall"] / a["wall"],
        f"matrix / single {pythons[1]}": m["wall"] / b["wall"],
        "matrix / mean single": m["wall"] / mean,
        "matrix / both singles": m["wall"] / (a["wall"] + b["wall"]),
    }
    print()
    for k, v in ratios.items():
        print(f"  {k:24} {v:5.2f}x")
    verdict = "met" if ratios["matrix / mean single"] <= TARGET else "MISSED"
    print(f"  target: matrix <= {TARGET}x the mean 1-Python run: {verdict}; load {load.describe()}")
    summary = {
        "recipes": args.recipes,
        "pythons": pythons,
        "mode": args.mode,
        "profile": args.profile,
        "warm_up_s": round(warm_s, 1),
        "runs": {"single_a": a, "single_b": b, "matrix": m},
        "ratios": {k: round(v, 2) for k, v in ratios.items()},
        "target": TARGET,
        "verdict": verdict,
        "load": load.summary(),
    }
    (work / "python_matrix.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(f"  wrote {work / 'python_matrix.json'}")
    return 0 if a["ok"] and b["ok"] and m["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
