#!/usr/bin/env python3
"""Plain QEMU vs accelerated riscv64 builds of the same recipes, in one run on this machine.

    python bench/accelerated.py                          # msgspec, sentencepiece, tiktoken
    python bench/accelerated.py msgspec --no-pure-cross  # a subset
    python bench/accelerated.py sentencepiece --modes accelerated   # compiler work only, no QEMU build

For each recipe it runs `rvport build --mode qemu` and then `rvport build --mode accelerated`, each with a
fresh --cache-dir and --no-cache (no artifact cache, no BuildKit layer cache for the build step), so the stage
really compiles in every run, and prints both wall times (and the build step alone), the ratio, whether both
runs passed verify and smoke with the same verdicts, and whether the executable sections of their wheels' ELF
files are identical (the compilers are the same versions).

Compiler work, from the kernel's process accounting (bench/procacct.py, so the builds run unchanged): the
elapsed time of every GCC driver run in each build, against a pure cross-compile of the same sources: the
compile commands the accelerated build ran (setuptools prints them: the bench's recipe copy runs `pip wheel
-v`; CMake's come from its compile_commands.json, configured and built in an untimed accelerated stage exactly
as the recipe's build does) replayed with the same parallelism by Debian's riscv64 cross GCC on the build
platform, in a build-platform container with nothing emulated. The stage's count includes every compile it ran
(CMake's compiler probes too), so the ratio errs against the accelerated build.

Run it as root (acct(2) needs it) and alone: process accounting is machine-wide, and the unit test of procacct
turns it off when it ends.

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
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from rvport.resources import builtin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402
import procacct  # noqa: E402

TARGETS = {"msgspec": 6.0, "sentencepiece": 5.0, "tiktoken": 3.0}


def rvport(*args: str, log: Path) -> tuple[int, float]:
    return common.rvport(["--ci", *args], log=log)


def bench_recipes(work: Path) -> Path:
    """A copy of recipes/ where every recipe disables ccache, lists the accelerated mode and builds with
    `pip wheel -v` (setuptools then prints every compile command; the build is otherwise the same)."""
    dest = work / "recipes"
    shutil.copytree(builtin("recipes"), dest)
    for f in dest.glob("*.yaml"):
        text = f.read_text()
        text = re.sub(r"^env:\n", 'env:\n  CCACHE_DISABLE: "1"\n', text, count=1, flags=re.MULTILINE)
        text = text.replace(
            "python3 -m pip wheel ", "python3 -m pip wheel -v "
        )  # setuptools shows its commands
        if not re.search(r"^modes:", text, re.MULTILINE):
            text = re.sub(
                r"^kind: (.*)\n",
                r"kind: \1\nmodes: [native, qemu, accelerated]\n",
                text,
                count=1,
                flags=re.MULTILINE,
            )
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
            out.append(
                (
                    a["verdict"],
                    a["reasons"],
                    [(m["name"], m["verdict"], m["reasons"], m["elf"]) for m in a.get("members", [])],
                )
            )
    return out


def one(recipe: str, mode: str, work: Path, recipes: Path, mirror: Path, warm: Path, profile: str) -> dict:
    out = work / f"out-{recipe}-{mode}"
    cache = fresh_cache(work, f"{recipe}-{mode}", warm)
    acct = work / f"{recipe}-{mode}.acct"
    with procacct.accounting(acct):
        rc, wall = rvport(
            "build",
            recipe,
            "--profile",
            profile,
            "--tag",
            "bench",
            "--mode",
            mode,
            "--output",
            str(out),
            "--cache-dir",
            str(cache),
            "--mirror",
            str(mirror),
            "--recipes",
            str(recipes),
            "--no-cache",
            log=work / f"{recipe}-{mode}.log",
        )
    procs = procacct.parse(acct.read_bytes())
    res = {
        "rc": rc,
        "wall": wall,
        "build": None,
        "ok": False,
        "verdicts": None,
        "log": None,
        "compiler": procacct.compiler_work(procs).__dict__,
        "compiles": procacct.compiler_work(procs, compiles_only=True).__dict__,
        "commands": procacct.by_command(procs),
    }
    doc_path = out / "result.json"
    if doc_path.is_file():
        (st,) = json.loads(doc_path.read_text())["stages"]
        res.update(
            build=st["timings"].get("build"),
            status=st["status"],
            verdicts=verdicts(st),
            log=st.get("log"),
            ok=st["status"] == "ok"
            and bool(st["verify"] and st["verify"]["ok"])
            and (st["smoke"] or {}).get("status") == "passed",
            timings=st["timings"],
        )
    print(
        f"  {recipe:14} {mode:12} rc={rc} wall={wall:7.1f}s build={res['build'] or 0:7.1f}s "
        f"verify+smoke={'ok' if res['ok'] else 'FAILED'}; compiles: {res['compiles']['compiles']} "
        f"in {res['compiles']['elapsed']:.1f}s",
        flush=True,
    )
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
    return (
        "identical" if q == a else f"differs in {sum(q.get(k) != v for k, v in a.items())}/{len(a)} sections"
    )


# a compile line as setuptools prints it under `pip wheel -v`, after BuildKit's "#12 34.5 " prefix
BUILDKIT_PREFIX = re.compile(r"^#\d+ \d+\.\d+ ")
COMPILER_NAMES = ("gcc", "g++", "cc", "c++")


def setuptools_compiles(log: Path) -> list[str]:
    """The compile commands (`... -c SRC -o OBJ`) setuptools ran in a build, from its stage log."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        cmd = BUILDKIT_PREFIX.sub("", line).strip()
        first = cmd.split(" ", 1)[0]
        if first.rsplit("/", 1)[-1].endswith(COMPILER_NAMES) and " -c " in cmd and " -o " in cmd:
            argv = shlex.split(cmd)
            obj = os.path.dirname(argv[argv.index("-o") + 1]) or "."
            out.append(f"cd /src && mkdir -p {shlex.quote(obj)} && {cmd}")
    return out


# compile_commands.json -> one shell line per compile (its directory, the object's directory, the command)
CMAKE_COMMANDS_PY = """import json, os, shlex, sys
for c in json.load(open(sys.argv[1])):
    out = os.path.dirname(c["output"]) or "."
    print(f"cd {shlex.quote(c['directory'])} && mkdir -p {shlex.quote(out)} && {c['command']}")
"""
# What the pure cross-compile needs besides the commands: the tree as the build left it before its compiles
# (sentencepiece: its CMake build, run as setup.py runs it, exporting compile_commands.json) and the stage's
# headers. Recipe-specific preparation, run in an untimed accelerated stage:
PREPARE = {
    "msgspec": "true",
    "sentencepiece": "CMAKE_EXPORT_COMPILE_COMMANDS=ON sh ./build_bundled.sh {version} >/dev/null "
    "&& python3 /commands.py build/compile_commands.json > /cmake-compiles.txt",
}


def pure_cross(work: Path, recipe: str, jobs: int) -> dict | None:
    """The accelerated build's compiles replayed by Debian's riscv64 cross GCC natively on the build platform,
    with `xargs -P jobs`, under process accounting: nothing emulated, no pip, CMake or make."""
    from rvport.engine import buildx, render

    result = work / f"out-{recipe}-accelerated" / "result.json"
    if recipe not in PREPARE or not result.is_file():
        return None
    doc = json.loads(result.read_text())
    (st,) = doc["stages"]
    tc = next(
        (
            t
            for t in buildx.image_tags("rvport/toolchain")
            if t.startswith(f"rvport/toolchain:{recipe}-build-")
            and buildx.image_info(t)["id"] == st["images"].get("toolchain")
        ),
        None,
    )
    xtc = st["images"].get("xtc_tag")
    xbase = next(
        (b["tag"] for k, b in doc["base_images"].items() if k.startswith("debian-trixie-xtc@")), None
    )
    trees = sorted(p for p in (work / "cache" / f"{recipe}-accelerated" / "trees").glob("*") if p.is_dir())
    if not (tc and xtc and xbase and trees and st.get("log")):
        print(
            f"  pure cross-compile of {recipe}: missing inputs (toolchain {tc}, prefix {xtc}, base {xbase})"
        )
        return None
    setuptools = setuptools_compiles(Path(st["log"]))
    major = next(
        re.fullmatch(r"xtc:gcc-(\d+)-riscv64-linux-gnu", k).group(1)
        for k in st["toolchain_packages"]
        if re.fullmatch(r"xtc:gcc-(\d+)-riscv64-linux-gnu", k)
    )
    ctx = work / f"pure-{recipe}"
    ctx.mkdir()
    shutil.copytree(trees[-1], ctx / "src", symlinks=True)
    (ctx / "commands.py").write_text(CMAKE_COMMANDS_PY)
    (ctx / "prepare.Dockerfile").write_text(
        f"FROM {tc} AS prepare\n{render.env_lines(st['env'])}\n"  # the build's own environment
        f"COPY --from={xtc} /opt/xtc/ /opt/xtc/\nRUN sh -eu /opt/xtc/setup.sh\nENV "
        "PATH=/opt/xtc/bin:/usr/sbin:/usr/bin:/sbin:/bin\nCOPY src/ /src/\nCOPY commands.py /\nWORKDIR "
        f"/src\nRUN touch /cmake-compiles.txt && {PREPARE[recipe].format(version=st['version'])}\nFROM "
        "scratch\nCOPY --from=prepare /src/ /src/\nCOPY --from=prepare /usr/include/ /include/\nCOPY "
        "--from=prepare /cmake-compiles.txt /\n"
    )
    prepared = ctx / "prepared"
    buildx.build(
        buildx.BuildSpec(
            context=ctx,
            dockerfile=ctx / "prepare.Dockerfile",
            platform="linux/riscv64",
            output_dir=prepared,
            network="none",
            no_cache=True,
        ),
        log_path=work / f"pure-{recipe}-prepare.log",
    )
    cmake = [line for line in (prepared / "cmake-compiles.txt").read_text().splitlines() if line.strip()]
    commands = cmake + setuptools
    (prepared / "compiles.txt").write_text("".join(c + "\n" for c in commands))
    links = " && ".join(
        f"ln -s /usr/bin/riscv64-linux-gnu-{real}-{major} /opt/xtc/bin/{name}"
        for real, names in (
            ("gcc", ("gcc", "cc", "riscv64-linux-gnu-gcc")),
            ("g++", ("g++", "c++", "riscv64-linux-gnu-g++")),
        )
        for name in names
    )
    (prepared / "Dockerfile").write_text(
        f"FROM --platform={doc['host'].get('platform', 'linux/amd64')} {xbase}\n"
        "COPY include/ /usr/include/\nCOPY src/ /src/\nCOPY compiles.txt /\n"
        f"RUN mkdir -p /opt/xtc/bin && {links}\n"
        "ENV PATH=/opt/xtc/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        f"RUN date +%s.%N > /t && tr '\\n' '\\0' < /compiles.txt | xargs -0 -P {jobs} -n 1 sh -c "
        "&& date +%s.%N >> /t\nFROM scratch\nCOPY --from=0 /t /\n"
    )
    acct = work / f"pure-{recipe}.acct"
    with procacct.accounting(acct):
        buildx.build(
            buildx.BuildSpec(
                context=prepared,
                dockerfile=prepared / "Dockerfile",
                platform="linux/riscv64",
                output_dir=ctx / "out",
                network="none",
                no_cache=True,
            ),
            log_path=work / f"pure-{recipe}.log",
        )
    t0, t1 = (float(x) for x in (ctx / "out" / "t").read_text().split())
    work_done = procacct.compiler_work(procacct.parse(acct.read_bytes()), compiles_only=True)
    return {
        "commands": len(commands),
        "cmake": len(cmake),
        "setuptools": len(setuptools),
        "wall": t1 - t0,
        "compiles": work_done.__dict__,
    }


COMPILER_TARGET = (
    1.5  # the accelerated build's compiles against the same compiles, pure cross, on the build platform
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", nargs="*", default=list(TARGETS))
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument(
        "--modes",
        default="qemu,accelerated",
        help="which builds to run (comma-separated); 'accelerated' alone measures compiler work only",
    )
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    ap.add_argument(
        "--no-pure-cross", action="store_true", help="skip the pure cross-compile of the same sources"
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("run as root: the compiler work is measured with process accounting (acct(2))")
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= {"qemu", "accelerated"} or not modes:
        ap.error("--modes takes qemu and/or accelerated")
    from rvport.sources.cache import default_cache_dir

    warm = default_cache_dir(dict(os.environ))
    work = args.work or Path(tempfile.mkdtemp(prefix="rvport-bench-acc-"))
    work.mkdir(parents=True, exist_ok=True)
    recipes = bench_recipes(work)
    mirror = work / "mirror"
    mirror.mkdir(exist_ok=True)
    print(f"work directory: {work}", flush=True)
    rc, _ = rvport(
        "fetch", *args.recipes, "--to", str(mirror), "--recipes", str(recipes), log=work / "fetch.log"
    )
    if rc != 0:
        print(f"fetching sources failed; see {work / 'fetch.log'}")
        return 2
    jobs = os.cpu_count() or 1
    runs: dict[str, dict[str, dict]] = {}
    pure: dict[str, dict | None] = {}
    for r in args.recipes:
        runs[r] = {m: one(r, m, work, recipes, mirror, warm, args.profile) for m in modes}
        if "accelerated" in modes and not args.no_pure_cross:
            try:
                pure[r] = pure_cross(work, r, jobs)
            except Exception as e:  # noqa: BLE001 - reported, and the row says so
                print(f"  pure cross-compile of {r} failed: {e}")
                pure[r] = None
    worst = 0
    codes = {}
    if modes == ["qemu", "accelerated"]:
        print()
        print(
            f"{'recipe':14} {'qemu wall':>10} {'accel wall':>11} {'ratio':>6} {'target':>7} "
            f"{'qemu build':>11} {'accel build':>12} {'ratio':>6}  verdicts, smoke (target), machine code"
        )
        for r in args.recipes:
            q, a = runs[r]["qemu"], runs[r]["accelerated"]
            codes[r] = same_code(work, r)
            ratio = q["wall"] / a["wall"] if a["wall"] else 0.0
            bratio = (q["build"] / a["build"]) if q["build"] and a["build"] else 0.0
            same = "same" if q["verdicts"] == a["verdicts"] and q["ok"] and a["ok"] else "DIFFERENT/FAILED"
            met = "met" if ratio >= TARGETS.get(r, 0) else "MISSED"
            print(
                f"{r:14} {q['wall']:9.1f}s {a['wall']:10.1f}s {ratio:5.1f}x {TARGETS.get(r, 0):5.1f}x "
                f"{q['build'] or 0:10.1f}s {a['build'] or 0:11.1f}s {bratio:5.1f}x  {same} ({met}), "
                f"{codes[r]}"
            )
            worst = max(worst, 0 if same == "same" else 1)
    else:
        worst = 0 if all(runs[r][m]["ok"] for r in args.recipes for m in modes) else 1
    print()
    print(f"compiler work (sum of GCC driver runs, elapsed; -c compiles only; pure cross with -P {jobs}):")
    print(
        f"{'recipe':14} {'qemu':>16} {'accelerated':>22} {'pure cross':>22} {'accel/pure':>11} {'target':>7}"
    )
    for r in args.recipes:
        cells = []
        for m in ("qemu", "accelerated"):
            c = runs[r].get(m, {}).get("compiles")
            cells.append(f"{c['compiles']:4d} {c['elapsed']:8.1f}s" if c else "-")
        p = pure.get(r)
        pc = p and p["compiles"]
        cells.append(f"{pc['compiles']:4d} {pc['elapsed']:8.1f}s" if pc else "-")
        acc = runs[r].get("accelerated", {}).get("compiles")
        ratio = acc["elapsed"] / pc["elapsed"] if acc and pc and pc["elapsed"] else None
        verdict = "-" if ratio is None else ("met" if ratio <= COMPILER_TARGET else "MISSED")
        print(
            f"{r:14} {cells[0]:>16} {cells[1]:>22} {cells[2]:>22} "
            f"{(f'{ratio:.2f}x' if ratio else '-'):>11} {COMPILER_TARGET:5.1f}x  {verdict}"
        )
        if acc and pc:
            print(
                f"{'':14} CPU: accelerated {acc['cpu']:.1f}s, pure cross {pc['cpu']:.1f}s; pure cross wall "
                f"{p['wall']:.1f}s for {p['commands']} commands ({p['cmake']} from CMake, {p['setuptools']} "
                "from setuptools)"
            )
    (work / "bench.json").write_text(
        json.dumps({"runs": runs, "pure_cross": pure, "machine_code": codes}, indent=1, default=str)
    )
    print(f"details: {work / 'bench.json'}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
