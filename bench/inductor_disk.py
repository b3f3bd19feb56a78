#!/usr/bin/env python3
"""What vLLM's default configuration costs a board in disk: the system packages and what they pull in.

    python bench/inductor_disk.py --wheelhouse WH --image SERVE_IMAGE [--check OUT] [--record NAME]

The wheelhouse's `system:` packages (g++, torch's headers, Python.h, GCC's OpenMP), read from its
wheelhouse.json and checked as `rvport serve-check` reads it, are what the default configuration needs beyond
eager. This bench reads the installed packages of SERVE_IMAGE, the serving check's riscv64 image, where every
Debian package of debian-packages.txt is installed, with `dpkg-query` (offline, under QEMU). The packages the
system set brings are the dependency closure of the system packages (Depends and Pre-Depends, the first
installed alternative, Provides followed), less the closure of what every Debian system has (its Essential
and required packages) and of the wheelhouse's other Debian packages (which eager needs too). Their
Installed-Size (dpkg's KiB) is the figure: what `apt-get install` of the system packages adds on a board that
has the rest. (The image's own base holds build-essential, so it is not what a board is assumed to have.)
With --check OUT (a serving check's output), the size of the inductor and vLLM caches its generate step left
in OUT/logs/cache is recorded too.

The record (--record NAME: records/closure/NAME.json) holds the image, every package counted with its size,
and the totals.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from rvport.closure import wheelhouse  # noqa: E402
from rvport.errors import RvportError  # noqa: E402

FIELDS = (
    "${Package}\\t${Installed-Size}\\t${Pre-Depends}\\t${Depends}\\t${Provides}\\t${db:Status-Abbrev}"
    "\\t${Essential}\\t${Priority}\\n"
)
_NAME = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]*)")


def installed(image: str) -> dict[str, dict]:
    """The installed packages of a riscv64 image: name -> size (KiB), dependency groups, what it provides."""
    cp = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--pull",
            "never",
            "--network",
            "none",
            "--platform",
            "linux/riscv64",
            image,
            "dpkg-query",
            "-W",
            f"-f={FIELDS}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if cp.returncode != 0:
        raise SystemExit(
            f"dpkg-query in {image} failed ({cp.returncode}): {cp.stderr.strip()[-400:]}\n"
            "hint: --image is the riscv64 image `rvport serve-check` names (`image: rvport/toolchain:...`)"
        )
    return parse(cp.stdout)


def names(field: str) -> list[str]:
    """Package names of a comma-separated field, each without version and architecture qualifiers."""
    out = []
    for part in filter(None, (p.strip() for p in field.split(","))):
        m = _NAME.match(part.split(":")[0])
        if m:
            out.append(m.group(1))
    return out


def parse(text: str) -> dict[str, dict]:
    pkgs: dict[str, dict] = {}
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) != 8 or not cols[5].startswith("ii"):
            continue
        name, size, pre, dep, provides, _, essential, priority = cols
        groups = [
            [n for alt in group.split("|") for n in names(alt)[:1]]
            for group in filter(None, (g.strip() for g in f"{pre},{dep}".split(",")))
        ]
        pkgs[name.split(":")[0]] = {
            "size_kib": int(size) if size.isdigit() else 0,
            "groups": [g for g in groups if g],
            "provides": names(provides),
            "base": essential == "yes" or priority == "required",
        }
    return pkgs


def closure(roots: list[str], pkgs: dict[str, dict]) -> set[str]:
    """Every installed package the roots need: per dependency group the first alternative installed (by name,
    else a package that provides it)."""
    provider: dict[str, str] = {}
    for name, p in sorted(pkgs.items()):
        for v in p["provides"]:
            provider.setdefault(v, name)
    seen: set[str] = set()
    todo = [r for r in roots if r in pkgs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in pkgs[name]["groups"]:
            hits = [a if a in pkgs else provider[a] for a in group if a in pkgs or a in provider]
            if hits and hits[0] not in seen:
                todo.append(hits[0])
    return seen


def du_kib(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) // 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheelhouse", type=Path, required=True)
    ap.add_argument(
        "--image", required=True, help="the serving check's image (every Debian package installed)"
    )
    ap.add_argument("--check", type=Path, help="a serving check's output: record its caches' size")
    ap.add_argument("--record", metavar="NAME", type=common.record_part)
    args = ap.parse_args()
    try:
        wh = wheelhouse.read(args.wheelhouse)
    except RvportError as e:  # not a wheelhouse, or one changed since it was made: rvport's own message
        print(e.render(), file=sys.stderr)
        return int(e.exit_code)
    system = sorted(d["package"] for d in wh.doc.get("system") or [])
    if not system:
        raise SystemExit(f"{args.wheelhouse}: it ships no system packages (its lock has no `system:`)")
    listed = [d["package"] for d in wh.doc["debian"]]
    serve = installed(args.image)
    missing = [p for p in system if p not in serve]
    if missing:
        raise SystemExit(
            f"{args.image} lacks the system packages {missing}: it is not this wheelhouse's serving image\n"
            "hint: run `rvport serve-check` with this wheelhouse and pass the image it names"
        )
    everywhere = [p for p, v in serve.items() if v["base"]]
    others = closure(listed + everywhere, serve)
    added = sorted(closure(system, serve) - others)
    total = sum(serve[p]["size_kib"] for p in added)
    figures: dict = {
        "image": args.image,
        "profile": wh.profile,
        "system": system,
        "added": {p: serve[p]["size_kib"] for p in added},
        "added_count": len(added),
        "added_kib": total,
        "added_mib": round(total / 1024, 1),
    }
    if args.check:
        caches = args.check / "logs" / "cache"
        figures["caches_kib"] = {d.name: du_kib(d) for d in sorted(caches.glob("*")) if d.is_dir()}
    for p in added:
        print(f"  {serve[p]['size_kib']:>9} KiB  {p}")
    print(f"{len(added)} packages, {total} KiB ({figures['added_mib']} MiB) for {', '.join(system)}")
    if "caches_kib" in figures:
        print(f"caches after the check: {figures['caches_kib']}")
    if args.record:
        path = common.write_record(
            "closure",
            args.record,
            command=["python", "bench/inductor_disk.py", *sys.argv[1:]],
            figures=figures,
        )
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
