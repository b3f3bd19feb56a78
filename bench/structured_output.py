#!/usr/bin/env python3
"""A recipe (outlines-core, llguidance, candle-binding, router-nlp-binding) built, verified and rebuilt.

    python bench/structured_output.py outlines-core                 # rvv256, the mode `auto` picks
    python bench/structured_output.py llguidance --record llguidance-rvv256
    python bench/structured_output.py outlines-core --allow-expired-release sid
    python bench/structured_output.py outlines-core --python 3.13 --record outlines-core-cp313-rvv256
    python bench/structured_output.py candle-binding --mode cross --jobs 1 --mirror MIRROR --offline \
        --topic candle-binding --record cross-rvv256

Two `rvport build`s one after the other: `first` as a user runs it (the artifact cache and BuildKit's layer
cache as they are), then `rebuild` with --no-cache into another output, so its build step runs again. After
each, `rvport verify artifacts OUT/artifacts --profile P`. --jobs, --mirror, --offline and --python go to
both builds.
The record (--record NAME: records/TOPIC/NAME.json, TOPIC structured-output unless --topic says) holds each
build's exit status, wall time, the stage's build step and mode, the smoke test's status and the checks it
reported (candle-binding's classifier parity), the load during it, the verify exit status and every
artifact's size and sha256; then whether the two builds' artifacts are byte-identical
(rvport.verify.compare). It is written again after each step, so a run cut short keeps what it measured.
Exit status 0 only when both builds and both verifies pass and the artifacts are identical.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402

RUNS = ("first", "rebuild")
RECIPES = ("outlines-core", "llguidance", "candle-binding", "router-nlp-binding")


def build_args(
    recipe: str,
    run: str,
    *,
    work: Path,
    profile: str,
    mode: str,
    expired: list[str],
    jobs: int | None = None,
    mirror: Path | None = None,
    offline: bool = False,
    python: str | None = None,
) -> tuple:
    out = work / f"out-{recipe}-{run}"
    shutil.rmtree(out, ignore_errors=True)
    args = ["build", recipe, "--profile", profile, "--mode", mode, "--tag", "local", "--output", str(out)]
    for suite in expired:
        args += ["--allow-expired-release", suite]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    if mirror is not None:
        args += ["--mirror", str(mirror)]
    if offline:
        args.append("--offline")
    if python:
        args += ["--python", python]
    if run == "rebuild":
        args.append("--no-cache")
    return out, args


def stage_figures(out: Path, recipe: str) -> dict:
    """What one build's result.json says of the recipe's stage: status, mode, timings, smoke, artifacts."""
    path = out / "result.json"
    if not path.is_file():
        return {"status": "no result.json"}
    doc = json.loads(path.read_text())
    st = next((s for s in doc["stages"] if s.get("recipe") == recipe), doc["stages"][-1])
    smoke = st.get("smoke") or {}  # null when the build failed before it
    return {
        "status": st["status"],
        "stage": st.get("id"),
        "mode": st.get("mode"),
        "wall_s": doc["duration_s"],
        "build_s": st["timings"].get("build"),
        "timings": st["timings"],
        "smoke": smoke.get("status"),
        "smoke_said": (smoke.get("output") or [""])[-1:],
        "smoke_checks": smoke.get("checks") or [],  # what the test reported (candle-binding's parity)
        "artifacts": [{k: a[k] for k in ("path", "size", "sha256")} for a in st["artifacts"]],
    }


def one(recipe: str, run: str, **kw) -> dict:
    work, profile = kw["work"], kw["profile"]
    out, args = build_args(recipe, run, **kw)
    with common.LoadAverage() as load:
        rc, wall = common.rvport(args, log=work / f"{recipe}-{run}.log")
    res = {"rc": rc, "command": ["rvport", *args], "wall_measured_s": round(wall, 1), "load": load.summary()}
    res.update(stage_figures(out, recipe))
    verify = ["verify", "artifacts", str(out / "artifacts"), "--profile", profile]
    vrc, _ = common.rvport(verify, log=work / f"{recipe}-{run}-verify.log") if rc == 0 else (None, 0.0)
    res["verify"] = {"command": ["rvport", *verify], "rc": vrc}
    print(
        f"  {recipe:14} {run:7} rc={rc} wall={wall:7.1f}s build={res.get('build_s') or 0:7.1f}s "
        f"mode={res.get('mode')} smoke={res.get('smoke')} verify={vrc} load={load.describe()}",
        flush=True,
    )
    return res


def identical(work: Path, recipe: str) -> dict:
    from rvport.verify.compare import compare_dirs

    first, second = (work / f"out-{recipe}-{run}" / "artifacts" for run in RUNS)
    if not first.is_dir() or not second.is_dir():
        return {"ok": False, "why": "a build left no artifacts"}
    c = compare_dirs(first, second)
    same = [f"{n} {sha}" for n, sha in c.identical]
    return {"ok": c.ok, "identical": same, "differences": len(c.differences)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe", choices=RECIPES)
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--allow-expired-release", dest="expired", action="append", default=[], metavar="SUITE")
    ap.add_argument("--jobs", type=int, help="rvport build --jobs N")
    ap.add_argument("--mirror", type=Path, help="rvport build --mirror DIR (sources from a mirror)")
    ap.add_argument("--offline", action="store_true", help="rvport build --offline")
    ap.add_argument("--python", help="rvport build --python X.Y (the CPython, and so the base, to build for)")
    ap.add_argument(
        "--topic",
        default="structured-output",
        type=common.record_part,
        help="the record's folder under records/",
    )
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    ap.add_argument(
        "--record", metavar="NAME", type=common.record_part, help="write the record records/TOPIC/NAME.json"
    )
    args = ap.parse_args()
    common.stop_on_signals()
    work = args.work or Path(tempfile.mkdtemp(prefix="rvport-bench-so-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    if args.jobs is not None and args.jobs < 1:
        ap.error("--jobs takes 1 or more")
    kw = {
        "work": work,
        "profile": args.profile,
        "mode": args.mode,
        "expired": args.expired,
        "jobs": args.jobs,
        "mirror": args.mirror,
        "offline": args.offline,
        "python": args.python,
    }
    figures: dict = {"recipe": args.recipe, "profile": args.profile, "mode": args.mode, "runs": {}}
    if args.python:
        figures["python"] = args.python
    loads: list[dict] = []
    for run in RUNS:
        figures["runs"][run] = res = one(args.recipe, run, **kw)
        loads.append(res["load"])
        figures["identical"] = identical(work, args.recipe)
        if args.record:
            load = {
                "min": min(x["min"] for x in loads),
                "mean": round(sum(x["mean"] for x in loads) / len(loads), 2),
                "max": max(x["max"] for x in loads),
                "samples": sum(x["samples"] for x in loads),
            }
            command = ["python", "bench/structured_output.py", *sys.argv[1:]]
            path = common.write_record(args.topic, args.record, command=command, figures=figures, load=load)
            print(f"  wrote {path}", flush=True)
        if res["rc"] != 0:
            break
    runs = figures["runs"].values()
    ok = len(figures["runs"]) == len(RUNS) and all(r["rc"] == 0 and r["verify"]["rc"] == 0 for r in runs)
    same = figures["identical"]
    print(f"{args.recipe}: {'identical' if same['ok'] else 'NOT identical'}: {same}", flush=True)
    return 0 if ok and same["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
