#!/usr/bin/env python3
"""vLLM's riscv64 CI against trees with a known regression: does the job fail, and on which check?

    python bench/vllm_mutations.py --profile rvv256 --compiler-cache DIR --record NAME
    python bench/vllm_mutations.py --only exp-constant,zvl128b        # some of them

Each tree is vllm's pinned sdist unpacked by rvport (bench/source_change.py), then edited by one of the
mutations below: an exact text replaced in one file, each a kind of regression vLLM's RISC-V history had.
The clean tree (no edit) runs first, unless --no-clean, and must pass. Each tree is then built as a pull
request's job builds it, one `rvport --ci build vllm --source-tree TREE --compiler-cache DIR` after the
other (verify, smoke, the run without V), with the same compiler cache, so a tree recompiles only what its
edit changed. The record
holds, per tree: the edit (file, text before and after, the file's sha256 before and after), the exit
code, the wall time, the stage's status and error, the smoke test's and the SIGILL check's status, the
verify verdicts that failed, and whether the outcome is the one expected (the clean tree passes; every
mutation fails the job).

A mutation whose text is not in the file stops the bench before anything is built (exit 2): the sdist it
was written for is vllm 0.33.0's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402
import source_change  # noqa: E402


@dataclass(frozen=True, kw_only=True)
class Mutation:
    name: str
    kind: str  # what vLLM's history had
    file: str  # relative to the tree
    old: str
    new: str
    count: int  # how many times `old` is in the file: every one is replaced


MUTATIONS = (
    Mutation(
        name="exp-constant",
        kind="a numerical bug in a vector kernel (the RVV exp() that corrupted softmax, vllm#40428)",
        file="csrc/cpu/cpu_types_riscv_impl.hpp",
        old="0.693147180559945f",  # ln 2, the polynomial's linear term, in FP32Vec8::exp and FP32Vec16::exp
        new="0.593147180559945f",
        count=2,
    ),
    Mutation(
        name="zvl128b",
        kind="kernels built for the wrong VLEN (a hard-coded zvl128b, vllm#39478)",
        file="cmake/cpu_extension.cmake",
        old="zvl${VLLM_RVV_VLEN}b",
        new="zvl128b",
        count=2,
    ),
    Mutation(
        name="scalar-fallback",
        kind="vLLM's extension compiled for rv64gc in a vector build "
        "(cpu_extension.cmake's scalar -march while oneDNN stays on)",
        file="cmake/cpu_extension.cmake",
        old="set(MARCH_FLAGS -march=rv64gcv_zvfh_zvl${VLLM_RVV_VLEN}b -mrvv-vector-bits=zvl -mabi=lp64d)",
        new="set(MARCH_FLAGS -march=rv64gc)",
        count=1,
    ),
    Mutation(
        name="rvv-attention-off",
        kind="an RVV path that silently falls back: the RVV attention kernel says it is absent at VLEN 256, "
        "so vLLM picks its generic vec backend (the runtime's silent choice of vllm#43179)",
        file="csrc/cpu/cpu_attn.cpp",
        old="(__riscv_v_min_vlen == 128 || __riscv_v_min_vlen == 256)",  # cpu_attn_has_isa("rvv")
        new="(__riscv_v_min_vlen == 128)",
        count=1,
    ),
)


def apply(tree: Path, m: Mutation) -> dict:
    """`m` applied to `tree`; ValueError when its text is not there exactly `m.count` times."""
    path = tree / m.file
    text = path.read_text()
    found = text.count(m.old)
    if found != m.count:
        raise ValueError(
            f"{m.name}: {m.old!r} is in {m.file} {found} times, not {m.count}; the mutations are written for "
            "vllm 0.33.0's sdist: run the bench on it, or change the mutation to fit your tree"
        )
    before = hashlib.sha256(text.encode()).hexdigest()
    st = path.stat()
    path.write_text(text.replace(m.old, m.new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # SOURCE_DATE_EPOCH stays the pinned tree's
    after = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "file": m.file,
        "kind": m.kind,
        "old": m.old,
        "new": m.new,
        "sha256_before": before,
        "sha256_after": after,
    }


def outcome(out: Path) -> dict:
    """What the job's result.json says: the stage's status and error, smoke and SIGILL, failed verdicts."""
    path = out / "result.json"
    if not path.is_file():
        return {"status": "no result.json"}
    doc = json.loads(path.read_text())
    stages = doc.get("stages") or []
    if not stages:
        return {"status": doc.get("status")}
    st = stages[0]
    smoke = st.get("smoke") or {}
    failed_verdicts = []
    for report in (st.get("verify") or {}).get("reports", []):
        for a in report.get("artifacts", []):
            if a.get("verdict") != "pass":
                reasons = list(a.get("reasons", []))
                for m in a.get("members", []):
                    reasons += [f"{m.get('name')}: {r}" for r in m.get("reasons", [])]
                failed_verdicts.append(
                    {"path": a.get("path"), "verdict": a.get("verdict"), "reasons": reasons[:8]}
                )
    return {
        "status": st.get("status"),
        "error": st.get("error"),
        "timings": st.get("timings"),
        "smoke": smoke.get("status"),
        "smoke_tail": (smoke.get("output") or [])[-6:],
        "sigill": (smoke.get("without_vector") or {}).get("status") if isinstance(smoke, dict) else None,
        "verify_failed": failed_verdicts[:10],
        "compiler_cache": {
            k: (st.get("compiler_cache") or {}).get(k) for k in ("hits", "misses", "uncacheable")
        },
    }


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--mode", default="accelerated")
    ap.add_argument(
        "--compiler-cache", type=Path, required=True, help="the compiler cache DIR every build uses"
    )
    ap.add_argument("--only", help="a comma list of the mutations to run (default: all)")
    ap.add_argument("--no-clean", dest="clean", action="store_false", help="leave out the clean tree's job")
    ap.add_argument(
        "--work", type=Path, help="keep trees, logs and outputs here (default: a temporary directory)"
    )
    ap.add_argument("--record", metavar="NAME", help="write the record records/vllm-ci/NAME.json")
    args = ap.parse_args(list(argv))
    names = [m.name for m in MUTATIONS]
    chosen = names if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in chosen if n not in names]
    if unknown:
        ap.error(f"unknown mutation {', '.join(unknown)}: name some of {','.join(names)}")
    args.mutations = [m for m in MUTATIONS if m.name in chosen]
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    common.stop_on_signals()
    from rvport.errors import RvportError
    from rvport.sources.cache import default_cache_dir

    cache = default_cache_dir(dict(os.environ))
    made = common.work_and_mirror(args.work, prefix="rvport-bench-mutations-", recipes=["vllm"])
    if made is None:
        return 2
    work, mirror = made
    clean = work / "tree-clean"
    shutil.rmtree(clean, ignore_errors=True)
    try:
        source_change.unpack_main_source("vllm", clean, cache_dir=cache, mirror=mirror)
    except RvportError as e:
        print(f"bench/vllm_mutations.py: {e.render()}", file=sys.stderr)
        return int(e.exit_code)
    trees: list[tuple[str, Path, dict | None]] = [("clean", clean, None)] if args.clean else []
    for m in args.mutations:  # every edit checked before anything is built
        tree = work / f"tree-{m.name}"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(clean, tree, symlinks=True)
        try:
            trees.append((m.name, tree, apply(tree, m)))
        except ValueError as e:
            print(f"bench/vllm_mutations.py: {e}", file=sys.stderr)
            return 2
    results: dict[str, dict] = {}
    loads: list[dict] = []
    for name, tree, edit in trees:
        out = work / f"out-{name}"
        shutil.rmtree(out, ignore_errors=True)
        args_ = ["--ci", "build", "vllm", "--source-tree", str(tree), "--profile", args.profile]
        args_ += ["--mode", args.mode, "--mirror", str(mirror), "--compiler-cache", str(args.compiler_cache)]
        args_ += ["--output", str(out), "--junit", str(out / "junit.xml")]
        with common.LoadAverage() as load:
            rc, wall = common.rvport(args_, log=work / f"{name}.log")
        res = {"command": ["rvport", *args_], "rc": rc, "wall_s": round(wall, 1), "load": load.summary()}
        res.update(outcome(out))
        res["edit"] = edit
        res["as_expected"] = (rc == 0) if edit is None else (rc != 0)
        results[name] = res
        loads.append(res["load"])
        print(
            f"  {name:16} rc={rc} wall={wall:7.1f}s status={res.get('status')} smoke={res.get('smoke')} "
            f"sigill={res.get('sigill')} verify_failed={len(res.get('verify_failed') or [])} "
            f"expected={'yes' if res['as_expected'] else 'NO'}",
            flush=True,
        )
        if args.record:
            figures = {"profile": args.profile, "mode": args.mode, "trees": results}
            path = common.write_record(
                "vllm-ci",
                args.record,
                command=["python", "bench/vllm_mutations.py", *argv],
                figures=figures,
                load=common.merge_loads(loads),
            )
            print(f"  wrote {path}", flush=True)
    return 0 if all(r["as_expected"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
