#!/usr/bin/env python3
"""The riscv64 base made the old way (debootstrap in one run, its second stage under QEMU) and the new way
(rvport/engine/bootstrap.py's split: native first stage and unpack, emulated configure), side by side in one
run.

    python bench/bootstrap.py                    # debian-trixie for linux/riscv64, both methods
    python bench/bootstrap.py --keep             # keep the two bench images (rvport/bench-base:*)

Each method makes the base from nothing with rvport's own ensure_base: a fresh cache directory and a copy of
the spec with a bench-only comment line, so the image key and tag are new (rvport/bench-base:...) and no
existing base is reused or touched; packages are downloaded again by each. The method is forced through
ensure_base(bootstrap_forced=...), as RVPORT_BOOTSTRAP does for the CLI.
Printed: each method's wall time (with the load average meanwhile), split into bootstrap (rootfs) and the
rest (the layer written and loaded into the engine), read from its log; the ratio; and the check that both
bases hold the same packages at the same versions and the same Release file. Then the two images' file trees
are compared (path, type, mode, owner, size, link target and sha256 of every file, from `docker export`), with
the differences listed. Exit 1 when the package sets differ.

Run it alone: bootstrapping is CPU-heavy, and the ratio means most when both see the same machine.
Benchmarks are ratios in one run, never timed assertions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import common  # noqa: E402  (bench/ is first on sys.path)

from rvport.catalogue.bases import default_bases_dir, load_base  # noqa: E402
from rvport.engine import bootstrap, images  # noqa: E402
from rvport.engine.events import Phase  # noqa: E402

# files that record when or how the rootfs was made, not what it holds
VOLATILE = (
    "var/log/",
    "var/cache/debconf/",
    "var/lib/dpkg/status-old",
    "var/lib/dpkg/diversions-old",
    "var/lib/dpkg/available-old",
    "etc/shadow",
    "etc/gshadow",
    "etc/shadow-",
    "etc/gshadow-",
    "var/cache/ldconfig/aux-cache",
)


def make(method: str, spec_name: str, platform: str, work: Path) -> dict:
    """One base from nothing by `method`; returns times, the image and what it holds."""
    specs = work / "bases"
    specs.mkdir(parents=True)
    text = (default_bases_dir() / f"{spec_name}.yaml").read_text()
    (specs / f"{spec_name}.yaml").write_text(f"# bench/bootstrap.py {method} {time.time_ns()}\n{text}")
    spec = load_base(spec_name, specs)
    log = work / "base.log"
    marks: dict[str, float] = {}
    t0 = time.monotonic()

    def on_phase(event: Phase) -> None:  # the engine's typed progress events, not its lines
        now = time.monotonic() - t0
        if event.phase == "writing the image's layer":  # the rootfs is made
            marks.setdefault("rootfs", now)
        if event.phase == "configuring" and event.done == 0:
            marks.setdefault("unpacked", now)
        if event.phase == "linker cache":  # the split's first stage is done
            marks.setdefault("first", now)
        if event.phase == "deferred work side by side":  # dpkg has configured everything
            marks.setdefault("configured", now)

    base = images.ensure_base(
        spec,
        platform=platform,
        cache_dir=work / "cache",
        log_path=log,
        on_phase=on_phase,
        bootstrap_forced=method,
    )
    total = time.monotonic() - t0
    tag = f"rvport/bench-base:{method}-{base.key[:12]}"
    subprocess.run(["docker", "tag", base.tag, tag], check=True)
    subprocess.run(["docker", "rmi", base.tag], check=True, capture_output=True)
    return {
        "method": method,
        "total": total,
        "rootfs": marks.get("rootfs", total),
        "unpacked": marks.get("unpacked"),
        "marks": marks,
        "tag": tag,
        "packages": base.packages,
        "release": base.release_sha256,
    }


def split_phases(marks: dict[str, float], total: float) -> list[tuple[str, float]]:
    """The split's phases (seconds) from its marks: those whose start and end were both seen."""
    order = [
        ("first stage", "first"),
        ("native unpack", "unpacked"),
        ("emulated configure", "configured"),
        ("deferred work after it", "rootfs"),
        ("image (layer + load)", None),
    ]
    out, start = [], 0.0
    for name, end_mark in order:
        end = total if end_mark is None else marks.get(end_mark)
        if end is None:
            continue
        out.append((name, end - start))
        start = end
    return out


def tree(tag: str, platform: str) -> dict[str, tuple]:
    """path -> (type, mode, uid, gid, size, link, sha256) of the image's files, from docker export."""
    cid = subprocess.run(
        ["docker", "create", "--platform", platform, tag], check=True, capture_output=True, text=True
    ).stdout.strip()
    out: dict[str, tuple] = {}
    try:
        with subprocess.Popen(["docker", "export", cid], stdout=subprocess.PIPE) as p:
            with tarfile.open(fileobj=p.stdout, mode="r|") as tar:
                for m in tar:
                    digest = None
                    if m.isfile():
                        f = tar.extractfile(m)
                        digest = hashlib.sha256(f.read()).hexdigest() if f else None
                    out[m.name.rstrip("/")] = (
                        m.type,
                        m.mode,
                        m.uid,
                        m.gid,
                        m.size if m.isfile() else 0,
                        m.linkname,
                        digest,
                    )
    finally:
        subprocess.run(["docker", "rm", cid], check=False, capture_output=True)
    return out


def compare_trees(a: dict[str, tuple], b: dict[str, tuple]) -> list[str]:
    diffs = []
    for path in sorted(set(a) | set(b)):
        if path.startswith(VOLATILE):
            continue
        if path not in a:
            diffs.append(f"only new: {path}")
        elif path not in b:
            diffs.append(f"only old: {path}")
        elif a[path] != b[path]:
            fields = ("type", "mode", "uid", "gid", "size", "link", "sha256")
            what = ", ".join(
                f"{f} {x!r} -> {y!r}" for f, x, y in zip(fields, a[path], b[path], strict=True) if x != y
            )
            diffs.append(f"differs: {path}: {what}")
    return diffs


def main() -> int:
    common.stop_on_signals()  # Ctrl-C or a kill stops the bootstrap and removes the scratch directory
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="debian-trixie")
    ap.add_argument("--platform", default="linux/riscv64")
    ap.add_argument("--keep", action="store_true", help="keep the bench images")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rvport-bench-bootstrap-", dir=args.work))
    runs = []
    try:
        for method in (bootstrap.CLASSIC, bootstrap.SPLIT):
            print(f"== {method}: making {args.spec} for {args.platform} from nothing ...", flush=True)
            with common.LoadAverage() as load:
                r = make(method, args.spec, args.platform, work / method)
            r["load"] = load.summary()
            runs.append(r)
            print(
                f"   {r['total']:.0f}s (rootfs {r['rootfs']:.0f}s); {len(r['packages'])} packages; "
                f"{r['tag']}; load average {load.describe()}",
                flush=True,
            )
        old, new = runs
        print()
        print(f"{'':24}{'old (debootstrap)':>20}{'new (split)':>14}{'ratio':>8}")
        for label, key in (("base, total", "total"), ("rootfs (bootstrap)", "rootfs")):
            print(f"{label:24}{old[key]:>19.0f}s{new[key]:>13.0f}s{old[key] / new[key]:>7.2f}x")
        rest_old, rest_new = old["total"] - old["rootfs"], new["total"] - new["rootfs"]
        print(f"{'image (layer + load)':24}{rest_old:>19.0f}s{rest_new:>13.0f}s")
        print(
            "new, step by step: "
            + ", ".join(f"{name} {sec:.0f}s" for name, sec in split_phases(new["marks"], new["total"]))
        )
        same_packages = old["packages"] == new["packages"]
        print(
            f"same packages and versions: {same_packages} ({len(old['packages'])} / {len(new['packages'])})"
        )
        if not same_packages:
            for p in sorted(set(old["packages"]) | set(new["packages"])):
                if old["packages"].get(p) != new["packages"].get(p):
                    print(f"   {p}: old {old['packages'].get(p)} new {new['packages'].get(p)}")
        print(f"same Release file: {old['release'] == new['release']}")
        diffs = compare_trees(tree(old["tag"], args.platform), tree(new["tag"], args.platform))
        print(f"file trees: {len(diffs)} difference(s) outside {', '.join(VOLATILE[:3])}, ...")
        for d in diffs[:40]:
            print(f"   {d}")
        (work / "bench.json").write_text(
            json.dumps(
                {
                    "runs": [{k: v for k, v in r.items() if k != "packages"} for r in runs],
                    "tree_differences": diffs,
                },
                indent=1,
            )
        )
        return 0 if same_packages else 1
    finally:
        if not args.keep:
            for r in runs:
                subprocess.run(["docker", "rmi", r["tag"]], check=False, capture_output=True)
        bootstrap.remove_tree(work)


if __name__ == "__main__":
    raise SystemExit(main())
