#!/usr/bin/env python3
"""Where a warm rebuild's build step goes, at an earlier revision of rvport and at this one, side by side.

    python bench/build_phases.py vllm --before REV [--profile rvv256] [--source-tree TREE] \
        [--allow-expired-release sid] [--record NAME]

Two `rvport build RECIPE --profile P --no-cache --no-smoke` runs, one after the other, each into its own
output: `before`, rvport as it was at commit REV (a `git worktree` of it in the work directory, run with
`python -m rvport` from there), then `after`, this checkout. --no-cache makes each stage's build step run
again; the compiler cache is the engine's, as a user's second build has it, so both runs start with the
same warm cache when an earlier build of the recipe for this profile filled it. --source-tree goes to both.

From each stage's log (BuildKit's lines `#N SECONDS ...` of the build step) the step is cut in three: the
seconds before ninja's first `[1/N]` line (the recipe's commands, the build backend, CMake's configure),
ninja's own (to its last `[N/N]`), and what follows (linking aside: writing the wheel). With the wall time,
the build step of result.json, the compiler cache's hits and misses, the load beside each run and every
artifact's sha256, and whether the two runs' artifacts are byte-identical (rvport.verify.compare), since a
change of the recipe's commands that leaves the compiler's inputs alone must not change a byte.

The record (--record NAME: records/compiler-cache/NAME.json) is written again after each run. Exit status 0
when both builds pass.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

RUNS = ("before", "after")
_STEP = re.compile(r"^#(\d+) (\d+(?:\.\d+)?) (.*)$")
_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\] ")


def phases(log: Path) -> dict:
    """The build step's seconds before ninja, in ninja and after it, from a stage log; {} when the log has
    no ninja progress (a recipe without CMake's ninja)."""
    if not log.is_file():
        return {}
    lines = log.read_text(errors="replace").splitlines()
    step = None
    for ln in lines:  # the build step is the one whose lines show ninja's progress
        m = _STEP.match(ln)
        if m and _NINJA.match(m.group(3)):
            step = m.group(1)
            break
    if step is None:
        return {}
    times, first, last = [], None, None
    for ln in lines:
        m = _STEP.match(ln)
        if not m or m.group(1) != step:
            continue
        t = float(m.group(2))
        times.append(t)
        n = _NINJA.match(m.group(3))
        if n:
            first = t if first is None else first
            if n.group(1) == n.group(2):
                last = t
    end = max(times)
    last = last if last is not None else end
    return {
        "before_ninja_s": round(first, 1),
        "ninja_s": round(last - first, 1),
        "after_ninja_s": round(end - last, 1),
        "step_s": round(end, 1),
    }


def stage_log(out: Path, recipe: str) -> Path:
    logs = sorted(
        p
        for p in (out / "logs").glob(f"{recipe}*.log")
        if not p.name.endswith(".smoke-image.log") and not p.name.startswith("base-")
    )
    return logs[0] if logs else out / "logs" / f"{recipe}.log"


def figures_of(out: Path, recipe: str) -> dict:
    import json

    path = out / "result.json"
    if not path.is_file():
        return {"status": "no result.json"}
    doc = json.loads(path.read_text())
    st = next((s for s in doc["stages"] if s.get("recipe") == recipe), doc["stages"][-1])
    cc = st.get("compiler_cache") or {}
    return {
        "status": st["status"],
        "mode": st.get("mode"),
        "wall_s": doc["duration_s"],
        "build_s": st["timings"].get("build"),
        "compiler_cache": {k: cc.get(k) for k in ("use", "hits", "misses", "uncacheable")},
        "artifacts": [{k: a[k] for k in ("path", "size", "sha256")} for a in st["artifacts"]],
        "phases": phases(stage_log(out, recipe)),
    }


def worktree(rev: str, where: Path) -> Path:
    if where.exists():
        subprocess.run(
            ["git", "-C", str(common.ROOT), "worktree", "remove", "--force", str(where)], check=False
        )
    subprocess.run(
        ["git", "-C", str(common.ROOT), "worktree", "add", "--detach", str(where), rev],
        check=True,
        capture_output=True,
    )
    return where


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--before", required=True, metavar="REV", help="the earlier revision of rvport")
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--source-tree", type=Path)
    ap.add_argument("--allow-expired-release", dest="expired", action="append", default=[], metavar="SUITE")
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    ap.add_argument("--record", metavar="NAME", help="write the record records/compiler-cache/NAME.json")
    args = ap.parse_args()
    common.stop_on_signals()
    work = (args.work or Path(tempfile.mkdtemp(prefix="rvport-bench-phases-"))).absolute()
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    old = worktree(args.before, work / "before-tree")
    before_commit = subprocess.run(
        ["git", "-C", str(old), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    figures: dict = {
        "recipe": args.recipe,
        "profile": args.profile,
        "before_commit": before_commit,
        "source_tree": str(args.source_tree) if args.source_tree else None,
        "runs": {},
    }
    loads = []
    ok = True
    for run in RUNS:
        out = work / f"out-{run}"
        shutil.rmtree(out, ignore_errors=True)
        build = [
            "build",
            args.recipe,
            "--profile",
            args.profile,
            "--no-cache",
            "--no-smoke",
            "--output",
            str(out),
        ]
        if args.source_tree:
            build += ["--source-tree", str(args.source_tree.absolute())]
        for suite in args.expired:
            build += ["--allow-expired-release", suite]
        kw: dict = {}
        if run == "before":
            env = dict(os.environ, PYTHONPATH=str(old))
            kw = {"command": [sys.executable, "-m", "rvport"], "cwd": old, "env": env}
        with common.LoadAverage() as load:
            rc, wall = common.rvport(build, log=work / f"{run}.log", **kw)
        res = {
            "rc": rc,
            "command": ["rvport", *build],
            "wall_measured_s": round(wall, 1),
            "load": load.summary(),
        }
        res.update(figures_of(out, args.recipe))
        figures["runs"][run] = res
        loads.append(res["load"])
        ok = ok and rc == 0
        ph = res.get("phases") or {}
        print(
            f"  {run:6} rc={rc} wall={wall:7.1f}s build={res.get('build_s') or 0:7.1f}s phases={ph} "
            f"cache={res.get('compiler_cache')} load={load.describe()}",
            flush=True,
        )
        if rc == 0 and run == "after":
            from rvport.verify.compare import compare_dirs

            c = compare_dirs(work / "out-before" / "artifacts", out / "artifacts")
            figures["identical"] = {
                "ok": c.ok,
                "identical": [f"{n} {sha}" for n, sha in c.identical],
                "differences": len(c.differences),
            }
            print(f"  identical: {figures['identical']}", flush=True)
        if args.record:
            command = ["python", "bench/build_phases.py", *sys.argv[1:]]
            path = common.write_record(
                "compiler-cache",
                args.record,
                command=command,
                figures=figures,
                load=common.merge_loads(loads),
            )
            print(f"  wrote {path}", flush=True)
        if rc != 0:
            break
    subprocess.run(["git", "-C", str(common.ROOT), "worktree", "remove", "--force", str(old)], check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
