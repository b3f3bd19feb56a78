#!/usr/bin/env python3
"""Plain QEMU vs accelerated riscv64 builds of the same recipes, in one run on this machine.

    python bench/accelerated.py                          # msgspec, sentencepiece, tiktoken
    python bench/accelerated.py msgspec --no-lower-bound # a subset

For each recipe it runs `rvport build --mode qemu` and then `rvport build --mode accelerated`, each with a
fresh --cache-dir and --no-cache (no artifact cache, no BuildKit layer cache for the build step), so the stage
really compiles in every run, and prints both wall times (and the build step alone), the
ratio, whether both runs passed verify and smoke with the same verdicts, and whether the executable sections of
their wheels' ELF files are identical (the compilers are the same versions). Next to them, the lower bound:
msgspec's C source compiled by the native cross compiler alone (no pip, no build backend) inside the same
riscv64 stage.

What stays warm, on purpose: the riscv64 and build-platform base images and the per-recipe toolchain images
(reused by tag; their bases/*.json records are copied from the warm cache into each fresh cache, since a
cache without them bootstraps the base again), the accelerated prefix image, and the sources (fetched once
into a mirror; each fresh cache takes them from there; tiktoken's crates are vendored again for each build).
Both modes get CCACHE_DISABLE=1 through a temporary copy of the recipes: the QEMU stage's ccache lives in a
BuildKit cache mount that outlives --cache-dir and would otherwise serve it compiler results from earlier
builds. Runs are sequential, so both modes see the same (shared, busy) machine as nearly as possible.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = {"msgspec": 6.0, "sentencepiece": 5.0, "tiktoken": 3.0}


def rvport(*args: str, log: Path) -> tuple[int, float]:
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, "-m", "rvport", "--ci", *args], stdout=f, stderr=subprocess.STDOUT,
                            cwd=ROOT, check=False).returncode
    return rc, time.monotonic() - t0


def bench_recipes(work: Path) -> Path:
    """A copy of recipes/ where every recipe disables ccache and lists the accelerated mode."""
    dest = work / "recipes"
    shutil.copytree(ROOT / "recipes", dest)
    for f in dest.glob("*.yaml"):
        text = f.read_text()
        text = re.sub(r"^env:\n", 'env:\n  CCACHE_DISABLE: "1"\n', text, count=1, flags=re.MULTILINE)
        if not re.search(r"^modes:", text, re.MULTILINE):
            text = re.sub(r"^kind: (.*)\n", r"kind: \1\nmodes: [native, qemu, accelerated]\n", text, count=1,
                          flags=re.MULTILINE)
        elif "accelerated" not in re.search(r"^modes:.*$", text, re.MULTILINE).group(0):
            text = re.sub(r"^modes: \[(.*)\]", r"modes: [\1, accelerated]", text, count=1, flags=re.MULTILINE)
        f.write_text(text)
    return dest


def fresh_cache(work: Path, name: str, warm: Path) -> Path:
    cache = work / "cache" / name
    cache.mkdir(parents=True)
    if (warm / "bases").is_dir():
        shutil.copytree(warm / "bases", cache / "bases")
    return cache


def verdicts(stage: dict) -> list:
    out = []
    for rep in (stage.get("verify") or {}).get("reports", []):
        for a in rep["artifacts"]:
            out.append((a["verdict"], a["reasons"], [(m["name"], m["verdict"], m["reasons"], m["elf"])
                                                     for m in a.get("members", [])]))
    return out


def one(recipe: str, mode: str, work: Path, recipes: Path, mirror: Path, warm: Path, profile: str) -> dict:
    out = work / f"out-{recipe}-{mode}"
    cache = fresh_cache(work, f"{recipe}-{mode}", warm)
    rc, wall = rvport("build", recipe, "--profile", profile, "--tag", "bench", "--mode", mode, "--output", str(out),
                      "--cache-dir", str(cache), "--mirror", str(mirror), "--recipes", str(recipes), "--no-cache",
                      log=work / f"{recipe}-{mode}.log")
    res = {"rc": rc, "wall": wall, "build": None, "ok": False, "verdicts": None}
    doc_path = out / "result.json"
    if doc_path.is_file():
        (st,) = json.loads(doc_path.read_text())["stages"]
        res.update(build=st["timings"].get("build"), status=st["status"], verdicts=verdicts(st),
                   ok=st["status"] == "ok" and bool(st["verify"] and st["verify"]["ok"])
                   and (st["smoke"] or {}).get("status") == "passed", timings=st["timings"])
    print(f"  {recipe:14} {mode:12} rc={rc} wall={wall:7.1f}s build={res['build'] or 0:7.1f}s "
          f"verify+smoke={'ok' if res['ok'] else 'FAILED'}", flush=True)
    return res


def code_digests(out: Path) -> dict[str, str]:
    """sha256 of every executable section of every ELF member of the wheels in one build's artifacts."""
    import hashlib
    import io
    import zipfile

    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile

    digests = {}
    for whl in sorted((out / "artifacts").glob("*/*.whl")):
        with zipfile.ZipFile(whl) as z:
            for name in sorted(z.namelist()):
                data = z.read(name)
                if not data.startswith(b"\x7fELF"):
                    continue
                for sec in ELFFile(io.BytesIO(data)).iter_sections():
                    if sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and sec["sh_type"] == "SHT_PROGBITS":
                        digests[f"{name}:{sec.name}"] = hashlib.sha256(sec.data()).hexdigest()
    return digests


def same_code(work: Path, recipe: str) -> str:
    q, a = (code_digests(work / f"out-{recipe}-{mode}") for mode in ("qemu", "accelerated"))
    if not q or not a:
        return "-"
    return "identical" if q == a else f"differs in {sum(q.get(k) != v for k, v in a.items())}/{len(a)} sections"


def lower_bound(work: Path, profile_name: str) -> float | None:
    """msgspec's _core.c compiled once by the native cross compiler inside an accelerated riscv64 stage."""
    from rvport import buildx
    from rvport.profiles import get_profile

    tc = next((t for t in buildx.image_tags("rvport/toolchain") if t.startswith("rvport/toolchain:msgspec-build-")),
              None)
    result = work / "out-msgspec-accelerated" / "result.json"
    xtc = json.loads(result.read_text())["stages"][0]["images"].get("xtc_tag") if result.is_file() else None
    found = sorted((work / "cache").glob("msgspec-*/trees/**/_core.c"))   # the tree the builds compiled
    if not (tc and xtc and found):
        return None
    src = found[0].parent
    profile = get_profile(profile_name)
    ctx = work / "lower-bound"
    ctx.mkdir()
    shutil.copytree(src, ctx / "m")
    flags = " ".join(["-O2", *profile.cflags, "-fPIC"])
    (ctx / "Dockerfile").write_text(
        f"FROM {tc}\nENV QEMU_CPU={profile.qemu_cpu}\nCOPY --from={xtc} /opt/xtc/ /opt/xtc/\n"
        "RUN sh -eu /opt/xtc/setup.sh\nENV PATH=/opt/xtc/bin:/usr/sbin:/usr/bin:/sbin:/bin\nCOPY m/ /m/\n"
        f"RUN cd /m && inc=$(python3-config --includes) && date +%s.%N > /t && gcc {flags} $inc -c _core.c "
        "-o core.o && date +%s.%N >> /t\nFROM scratch\nCOPY --from=0 /t /\n")
    buildx.build(buildx.BuildSpec(context=ctx, dockerfile=ctx / "Dockerfile", platform="linux/riscv64",
                                  output_dir=ctx / "out", network="none", no_cache=True),
                 log_path=work / "lower-bound.log")
    t0, t1 = (float(x) for x in (ctx / "out" / "t").read_text().split())
    return t1 - t0


SPM_CONFIGURE = ("cd /m && cmake sentencepiece -B build -DSPM_ENABLE_SHARED=OFF -DSPM_DISABLE_EMBEDDED_DATA=ON "
                 "-DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "
                 "-DCMAKE_CXX_FLAGS='-fPIC -fvisibility=default -ffunction-sections -fdata-sections' >/dev/null "
                 "&& python3 /commands.py build/compile_commands.json > /m/compile.txt")
# compile_commands.json -> one shell line per compile (its directory, the object's directory, the command)
SPM_COMMANDS_PY = """import json, os, shlex, sys
for c in json.load(open(sys.argv[1])):
    out = os.path.dirname(c["output"]) or "."
    print(f"cd {shlex.quote(c['directory'])} && mkdir -p {shlex.quote(out)} && {c['command']}")
"""


def lower_bound_sentencepiece(work: Path, profile_name: str, jobs: int) -> tuple[float, int] | None:
    """sentencepiece's C++ library (what its setup.py builds with CMake) compiled by the cross compiler alone,
    natively on the build platform: configured in the accelerated riscv64 stage exactly as build_bundled.sh
    does (with the recipe's CXXFLAGS), its compile commands then run with `xargs -P jobs` in the
    build-platform base, where /opt/xtc/bin/{cc,c++} are Debian's riscv64 cross GCC and the stage's tree is
    copied whole (headers included). No CMake, make, pip or shell runs emulated in the timed part."""
    from rvport import buildx
    from rvport.profiles import get_profile

    tc = next((t for t in buildx.image_tags("rvport/toolchain")
               if t.startswith("rvport/toolchain:sentencepiece-build-")), None)
    result = work / "out-sentencepiece-accelerated" / "result.json"
    if not (tc and result.is_file()):
        return None
    doc = json.loads(result.read_text())
    xtc = doc["stages"][0]["images"].get("xtc_tag")
    xbase = next((b["tag"] for k, b in doc["base_images"].items() if k.startswith("debian-trixie-xtc@")), None)
    found = sorted((work / "cache").glob("sentencepiece-*/trees/*/build_bundled.sh"))
    if not (xtc and xbase and found):
        return None
    profile = get_profile(profile_name)
    ctx = work / "lower-bound-spm"
    ctx.mkdir()
    shutil.copytree(found[0].parent, ctx / "m", symlinks=True)
    cxxflags = " ".join(["-O2", *profile.cflags])
    (ctx / "commands.py").write_text(SPM_COMMANDS_PY)
    (ctx / "Dockerfile").write_text(
        f"FROM {tc} AS configure\nENV QEMU_CPU={profile.qemu_cpu} CFLAGS=\"{cxxflags}\" CXXFLAGS=\"{cxxflags}\"\n"
        f"COPY --from={xtc} /opt/xtc/ /opt/xtc/\nRUN sh -eu /opt/xtc/setup.sh\n"
        "ENV PATH=/opt/xtc/bin:/usr/sbin:/usr/bin:/sbin:/bin\nCOPY m/ /m/\nCOPY commands.py /\n"
        f"RUN {SPM_CONFIGURE}\n"
        f"FROM --platform={doc['host'].get('platform', 'linux/amd64')} {xbase} AS compile\n"
        "COPY --from=configure /m/ /m/\n"
        "COPY --from=configure /usr/include/ /usr/riscv64-stage-include/\n"
        "RUN mkdir -p /opt/xtc/bin && ln -s /usr/bin/riscv64-linux-gnu-g++-14 /opt/xtc/bin/c++ "
        "&& ln -s /usr/bin/riscv64-linux-gnu-gcc-14 /opt/xtc/bin/cc\n"
        f"RUN n=$(wc -l < /m/compile.txt) && date +%s.%N > /t && tr '\\n' '\\0' < /m/compile.txt "
        f"| xargs -0 -P {jobs} -n 1 sh -c && date +%s.%N >> /t && echo $n >> /t\n"
        "FROM scratch\nCOPY --from=compile /t /\n")
    buildx.build(buildx.BuildSpec(context=ctx, dockerfile=ctx / "Dockerfile", platform="linux/riscv64",
                                  output_dir=ctx / "out", network="none", no_cache=True),
                 log_path=work / "lower-bound-spm.log")
    t0, t1, n = (ctx / "out" / "t").read_text().split()
    return float(t1) - float(t0), int(n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", nargs="*", default=list(TARGETS))
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    ap.add_argument("--no-lower-bound", action="store_true")
    args = ap.parse_args()
    from rvport.sources.cache import default_cache_dir

    warm = default_cache_dir(dict(os.environ))
    work = args.work or Path(tempfile.mkdtemp(prefix="rvport-bench-acc-"))
    work.mkdir(parents=True, exist_ok=True)
    recipes = bench_recipes(work)
    mirror = work / "mirror"
    mirror.mkdir(exist_ok=True)
    print(f"work directory: {work}", flush=True)
    rc, _ = rvport("fetch", *args.recipes, "--to", str(mirror), "--recipes", str(recipes), log=work / "fetch.log")
    if rc != 0:
        print(f"fetching sources failed; see {work / 'fetch.log'}")
        return 2
    rows = []
    for r in args.recipes:
        q = one(r, "qemu", work, recipes, mirror, warm, args.profile)
        a = one(r, "accelerated", work, recipes, mirror, warm, args.profile)
        rows.append((r, q, a))
    lb = lb_spm = None
    if not args.no_lower_bound and "msgspec" in args.recipes:
        try:
            lb = lower_bound(work, args.profile)
        except Exception as e:  # noqa: BLE001 - the lower bound is informative only
            print(f"  lower bound failed: {e}")
    if not args.no_lower_bound and "sentencepiece" in args.recipes:
        try:
            lb_spm = lower_bound_sentencepiece(work, args.profile, os.cpu_count() or 1)
        except Exception as e:  # noqa: BLE001 - the lower bound is informative only
            print(f"  sentencepiece lower bound failed: {e}")
    print()
    print(f"{'recipe':14} {'qemu wall':>10} {'accel wall':>11} {'ratio':>6} {'target':>7} "
          f"{'qemu build':>11} {'accel build':>12} {'ratio':>6}  verdicts, smoke (target), machine code")
    worst = 0
    codes = {r: same_code(work, r) for r, _, _ in rows}
    for r, q, a in rows:
        ratio = q["wall"] / a["wall"] if a["wall"] else 0.0
        bratio = (q["build"] / a["build"]) if q["build"] and a["build"] else 0.0
        same = "same" if q["verdicts"] == a["verdicts"] and q["ok"] and a["ok"] else "DIFFERENT/FAILED"
        met = "met" if ratio >= TARGETS.get(r, 0) else "MISSED"
        print(f"{r:14} {q['wall']:9.1f}s {a['wall']:10.1f}s {ratio:5.1f}x {TARGETS.get(r, 0):5.1f}x "
              f"{q['build'] or 0:10.1f}s {a['build'] or 0:11.1f}s {bratio:5.1f}x  {same} ({met}), "
              f"{codes[r]}")
        worst = max(worst, 0 if same == "same" else 1)
    if lb is not None:
        print(f"lower bound: msgspec _core.c alone, native cross gcc in the riscv64 stage: {lb:.1f}s")
    if lb_spm is not None:
        acc_build = next((a["build"] for r, _, a in rows if r == "sentencepiece"), None)
        ratio = f", accelerated build step {acc_build / lb_spm[0]:.2f}x of it (target 1.5x)" if acc_build else ""
        print(f"lower bound: sentencepiece's C++ library, {lb_spm[1]} compiles by the cross g++ alone on the "
              f"build platform, -P {os.cpu_count()}: {lb_spm[0]:.1f}s{ratio}")
    (work / "bench.json").write_text(json.dumps(
        {"rows": [{"recipe": r, "qemu": q, "accelerated": a, "machine_code": codes[r]} for r, q, a in rows],
         "lower_bound_s": lb, "lower_bound_sentencepiece_s": lb_spm and lb_spm[0]},
        indent=1, default=str))
    print(f"details: {work / 'bench.json'}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
