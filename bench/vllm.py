#!/usr/bin/env python3
"""vLLM's CPU wheel built for real, timed in one run on this machine: the vector build from warm images
against issue 24's target (the rvv256 wheel in under 20 minutes on 2 cores), and accelerated against plain
QEMU on the rv64gc build.

    python bench/vllm.py --mirror DIR --allow-expired-release sid              # rvv256, then rv64gc both ways
    python bench/vllm.py --mirror DIR --allow-expired-release sid --skip-qemu  # no rv64gc QEMU build (hours)
    python bench/vllm.py --mirror DIR --profiles rvv256,rvv256-bf16 --skip-rv64gc --no-smoke

Each build is `rvport build vllm --profile P --mode M --no-cache` with a fresh --cache-dir (its bases/*.json
records copied from the warm cache, so the base images are found, not bootstrapped again): no artifact
cache and no BuildKit layer cache for the build step, so the stage really configures and compiles. What
stays warm, on purpose: the riscv64 and build-platform base images, the accelerated prefix image and the
stage's toolchain image (reused by tag; `rvport prepare vllm --profile P --mode M` makes them beforehand, and
a build that has to make its own says so in its `images` time). The sources come from --mirror (oneDNN's
git source for the vector profiles: GitHub may be out of reach; `rvport fetch vllm --from-git CLONE --to DIR`
fills one), or from the network into a mirror of the run's own.

Per build it prints the wall time, the stage's own steps from result.json (images; smoke_image, its wait for
the smoke image made beside the build; build), whether verify (and the smoke test, unless --no-smoke)
passed, the wheel's size and sha256, and the load average while it ran: the machine is shared, so every
figure carries its load. The rv64gc pair gives the ratio qemu/accelerated of the wall time and of the build
step. Everything is written to WORK/bench.json.
Builds run one after another, never side by side; Ctrl-C stops the running build and its children.
"""

from __future__ import annotations

import argparse
import hashlib
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

TARGET_SECONDS = 20 * 60  # issue 24: the rvv256 wheel from warm bases, on this 2-core machine
STEPS = ("images", "smoke_image", "build")  # the stage's timings printed (bench.json keeps them all)


def rvport(*args: str, log: Path) -> tuple[int, float]:
    return common.rvport(["--ci", *args], log=log)


def fresh_cache(work: Path, name: str, warm: Path) -> Path:
    """An empty cache that still knows the warm base images (their records, not their bytes)."""
    cache = work / "cache" / name
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    if (warm / "bases").is_dir():
        shutil.copytree(warm / "bases", cache / "bases")
    return cache


def wheels(out: Path) -> list[dict]:
    found = []
    for whl in sorted((out / "artifacts").glob("*/*.whl")):
        found.append(
            {
                "name": whl.name,
                "bytes": whl.stat().st_size,
                "sha256": hashlib.sha256(whl.read_bytes()).hexdigest(),
            }
        )
    return found


def steps(t: dict) -> str:
    """The stage's steps on a build's own line: `images=12.0s smoke_image=0.0s build=900.5s`."""
    return " ".join(f"{k}={t.get(k, 0):.1f}s" for k in STEPS)


def table(runs: list[dict]) -> list[str]:
    """The closing table: a line per build, each step in a column as wide as its name (8 at least)."""
    widths = {k: max(8, len(k)) for k in STEPS}
    lines = [
        f"{'build':28} {'rc':>3} {'wall':>8} "
        + " ".join(f"{k:>{w}}" for k, w in widths.items())
        + "  verify smoke  load (1 min)"
    ]
    for r in runs:
        t = r.get("timings", {})
        lines.append(
            f"{'vllm ' + r['profile'] + ' ' + r['mode']:28} {r['rc']:3d} {r['wall']:7.1f}s "
            + " ".join(f"{t.get(k, 0):{w - 1}.1f}s" for k, w in widths.items())
            + f"  {'ok' if r.get('verify') else 'NO':6} "
            f"{str(r.get('smoke')):6} {r['load']['min']:.1f}-{r['load']['max']:.1f} "
            f"(mean {r['load']['mean']:.1f})"
        )
    return lines


def build(profile: str, mode: str, args: argparse.Namespace, work: Path, warm: Path) -> dict:
    name = f"vllm-{profile}-{mode}"
    out = work / f"out-{name}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["build", "vllm", "--profile", profile, "--mode", mode, "--tag", "bench", "--no-cache"]
    cmd += ["--output", str(out), "--cache-dir", str(fresh_cache(work, name, warm))]
    cmd += ["--mirror", str(args.mirror)]
    if args.allow_expired_release:
        cmd += ["--allow-expired-release", args.allow_expired_release]
    if args.no_smoke:
        cmd.append("--no-smoke")
    print(f"  {name}: rvport {' '.join(cmd)}", flush=True)
    with common.LoadAverage() as load:
        rc, wall = rvport(*cmd, log=work / f"{name}.log")
    res: dict = {"profile": profile, "mode": mode, "rc": rc, "wall": round(wall, 1), "load": load.summary()}
    doc_path = out / "result.json"
    if doc_path.is_file():
        (st,) = json.loads(doc_path.read_text())["stages"]
        smoke = (st.get("smoke") or {}).get("status")
        res.update(
            status=st["status"],
            timings={k: round(v, 1) for k, v in st["timings"].items()},
            verify=bool(st.get("verify") and st["verify"]["ok"]),
            smoke=smoke or ("skipped" if args.no_smoke else None),
            wheels=wheels(out),
            log=st.get("log"),
        )
    t = res.get("timings", {})
    print(
        f"  {name}: rc={rc} wall={wall:.1f}s {steps(t)} "
        f"verify={'ok' if res.get('verify') else 'FAILED'} smoke={res.get('smoke')} "
        f"load {load.describe()}",
        flush=True,
    )
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", type=Path, help="source mirror (default: fetched from the network)")
    ap.add_argument("--profiles", default="rvv256", help="vector profiles to build (comma-separated)")
    ap.add_argument("--skip-rv64gc", action="store_true", help="no rv64gc builds (so no ratio)")
    ap.add_argument("--skip-qemu", action="store_true", help="rv64gc accelerated only (no ratio)")
    ap.add_argument("--no-smoke", action="store_true", help="pass --no-smoke to every build")
    ap.add_argument("--allow-expired-release", metavar="SUITE", help="passed to rvport build (sid here)")
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    args = ap.parse_args()

    from rvport.sources.cache import default_cache_dir

    common.stop_on_signals()
    warm = default_cache_dir(dict(os.environ))
    work = args.work or Path(tempfile.mkdtemp(prefix="rvport-bench-vllm-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    if args.mirror is None:
        args.mirror = work / "mirror"
        rc, _ = rvport("fetch", "vllm", "--to", str(args.mirror), log=work / "fetch.log")
        if rc != 0:
            print(f"fetching the sources failed; see {work / 'fetch.log'}")
            return 2
    runs: list[dict] = []
    try:
        for p in (p for p in args.profiles.split(",") if p):
            runs.append(build(p, "accelerated", args, work, warm))
        if not args.skip_rv64gc:
            for mode in ("accelerated",) if args.skip_qemu else ("accelerated", "qemu"):
                runs.append(build("rv64gc", mode, args, work, warm))
    finally:
        (work / "bench.json").write_text(json.dumps({"runs": runs}, indent=1))

    print()
    print("\n".join(table(runs)))
    failed = [r for r in runs if r["rc"] != 0]
    for r in runs:
        if r["profile"] == "rvv256" and r["rc"] == 0:
            met = "met" if r["wall"] < TARGET_SECONDS else "MISSED"
            print(f"rvv256 from warm images: {r['wall']:.0f} s against the target {TARGET_SECONDS} s: {met}")
    pair = {r["mode"]: r for r in runs if r["profile"] == "rv64gc" and r["rc"] == 0}
    if len(pair) == 2:
        q, a = pair["qemu"], pair["accelerated"]
        qb, ab = q["timings"].get("build"), a["timings"].get("build")
        print(
            f"rv64gc qemu/accelerated: wall {q['wall'] / a['wall']:.2f}x"
            + (f", build step {qb / ab:.2f}x ({qb:.0f} s / {ab:.0f} s)" if qb and ab else "")
        )
    print(f"details: {work / 'bench.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
