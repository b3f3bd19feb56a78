#!/usr/bin/env python3
"""What one install of Debian's torch saves a cold job: a recipe's build image, then its smoke image, made
from an empty build cache with the shared layer found again, and with it gone.

    python bench/shared_layer.py [--recipe vllm] [--profile rvv256] [--mode accelerated] \
        [--arms shared,unshared] [--work DIR] [--record NAME]

vllm's build image, its smoke image and the serving check's image each install Debian's torch, the longest
emulated apt of rvport's images, and each installs it first, in a RUN of its own
(rvport/resources/layers.yaml, docs/bootstrap.md "One install of Debian's torch"), so that the engine's build
cache makes that layer once. Each arm, in the order --arms gives (default shared, then unshared):

    drop      every image of the recipe but the bases and the accelerated prefix (`docker rmi`), then the
              engine's whole build cache (`docker builder prune --all --force`)
    first     rvport prepare RECIPE --no-smoke    (the build image: torch installed)
    [prune]   unshared only: the build cache emptied again, so the next image cannot find the torch layer,
              as each image made it before the layer was shared
    second    rvport prepare RECIPE               (the smoke image)

Each step is timed, with the load beside it. A step's BuildKit log says whether the torch RUN was found in
the cache (`#N CACHED`) or ran: in the shared arm the second image's must be found, in the unshared arm
neither may be; an arm where that does not hold is reported as not valid, and the bench exits 1. The figure:
the second image's time in the unshared arm less in the shared arm, what each further image of the same
profile that installs torch (the smoke image, the serving check's) saves in a cold job.

The bases and the prefix must exist or are made by a first `rvport prepare RECIPE --no-smoke` (step
`setup`, not measured). The bench empties the engine's build cache: run it where nothing else builds.
The record (--record NAME: records/vllm-ci/NAME.json) holds each arm's steps, their logs' verdicts and the
figure. Exit status 0 when every step passed and both arms are valid.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

ARMS = ("shared", "unshared")
KEPT = ("rvport/base:", "rvport/xtc:")  # made once, not by the recipe's images; never dropped
LAYER = ("python3-torch=", "libtorch-dev=")  # the shared layer's RUN names both (layers.yaml, pinned)
_RUN = re.compile(r"^#(\d+) \[[^\]]*\] RUN ")


def parse_arms(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if sorted(names) != sorted(ARMS):
        raise argparse.ArgumentTypeError(f"name both arms once each, in any order: {','.join(ARMS)}")
    return names


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="vllm")
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--mode", default="accelerated")
    ap.add_argument("--arms", type=parse_arms, default=ARMS)
    ap.add_argument("--work", type=Path, help="work directory (default: a new temporary one)")
    ap.add_argument("--record", type=common.record_part, help="write records/vllm-ci/NAME.json")
    return ap.parse_args(argv)


def layer_runs(logs: Path) -> list[bool]:
    """For each torch RUN in the BuildKit logs under `logs`: True when it was found in the cache."""
    found = []
    for log in sorted(logs.rglob("*.log")):
        ids: dict[str, bool] = {}
        for line in log.read_text(errors="replace").splitlines():
            m = _RUN.match(line)
            if m and all(p in line for p in LAYER):
                ids.setdefault(m.group(1), False)
            elif line.startswith("#") and line.rstrip().endswith(" CACHED"):
                n = line[1:].split(" ", 1)[0]
                if n in ids:
                    ids[n] = True
        found += ids.values()
    return found


def docker(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, stdout=subprocess.DEVNULL)


def drop(tags_file: Path) -> list[str]:
    """Remove the recipe's images the tags file lists (not the bases, not the prefix) and the build cache."""
    tags = [t for t in tags_file.read_text().split() if not t.startswith(KEPT)]
    for t in tags:
        subprocess.run(["docker", "rmi", "--force", t], check=False, stdout=subprocess.DEVNULL)
    docker("builder", "prune", "--all", "--force")
    return tags


def prepare(args: argparse.Namespace, out: Path, *, smoke: bool) -> list[str]:
    cmd = ["prepare", args.recipe, "--profile", args.profile, "--mode", args.mode, "--output", str(out)]
    cmd += ["--tags", str(out.with_suffix(".tags"))]
    return cmd if smoke else [*cmd, "--no-smoke"]


def step(name: str, rv_args: list[str], out: Path) -> dict:
    with common.LoadAverage() as load:
        rc, wall = common.rvport(rv_args, log=out.with_suffix(".log"))
    runs = layer_runs(out / "logs") if (out / "logs").is_dir() else []
    res = {
        "command": ["rvport", *rv_args],
        "rc": rc,
        "wall_s": round(wall, 1),
        "load": load.summary(),
        "torch_layer_runs": len(runs),
        "torch_layer_cached": sum(runs),
    }
    print(
        f"  {name:16} rc={rc} wall={wall:7.1f}s torch layer: {sum(runs)} of {len(runs)} found in the cache "
        f"load={load.describe()}",
        flush=True,
    )
    return res


def arm(args: argparse.Namespace, name: str, work: Path, tags_file: Path) -> dict:
    t0 = time.monotonic()
    dropped = drop(tags_file)
    res: dict = {"dropped": dropped, "steps": {}}
    res["steps"]["first"] = step(
        f"{name} first", prepare(args, work / f"{name}-first", smoke=False), work / f"{name}-first"
    )
    if name == "unshared":
        docker("builder", "prune", "--all", "--force")
    res["steps"]["second"] = step(
        f"{name} second", prepare(args, work / f"{name}-second", smoke=True), work / f"{name}-second"
    )
    first, second = res["steps"]["first"], res["steps"]["second"]
    # the first image always runs the layer; the second finds it only when shared
    res["valid"] = (
        first["torch_layer_runs"] == 1
        and first["torch_layer_cached"] == 0
        and second["torch_layer_runs"] == 1
        and second["torch_layer_cached"] == (1 if name == "shared" else 0)
    )
    res["wall_s"] = round(time.monotonic() - t0, 1)
    if not res["valid"]:
        print(
            f"  {name}: NOT VALID: the torch layer was not made and found as this arm needs (see the logs"
            f" under {work}/{name}-*/logs); rerun on an engine where nothing else builds",
            flush=True,
        )
    return res


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    common.stop_on_signals()
    work = (args.work or Path(tempfile.mkdtemp(prefix="rvport-shared-layer-"))).absolute()
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    setup = work / "setup"
    rc, _ = common.rvport(prepare(args, setup, smoke=True), log=setup.with_suffix(".log"))
    if rc != 0:
        print(f"setup failed (exit {rc}); see {setup.with_suffix('.log')}", flush=True)
        return 1
    tags_file = setup.with_suffix(".tags")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    arms: dict[str, dict] = {}
    for name in args.arms:
        arms[name] = arm(args, name, work, tags_file)
    ok = all(a["valid"] and all(s["rc"] == 0 for s in a["steps"].values()) for a in arms.values())
    shared, unshared = arms["shared"]["steps"]["second"], arms["unshared"]["steps"]["second"]
    saved = round(unshared["wall_s"] - shared["wall_s"], 1)
    print(
        f"second image: {shared['wall_s']:.1f}s shared, {unshared['wall_s']:.1f}s unshared: "
        f"{saved:.1f}s saved per image that shares the layer",
        flush=True,
    )
    if args.record:
        figures = {
            "recipe": args.recipe,
            "profile": args.profile,
            "mode": args.mode,
            "started": started,
            "arms": arms,
            "order": list(args.arms),
            "second_image_saved_s": saved,
            "valid": ok,
        }
        loads = [s["load"] for a in arms.values() for s in a["steps"].values()]
        path = common.write_record(
            "vllm-ci",
            args.record,
            command=["python", "bench/shared_layer.py", *argv],
            figures=figures,
            load=common.merge_loads(loads),
        )
        print(f"  wrote {path}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
