#!/usr/bin/env python3
"""vLLM's default configuration (torch.compile) against enforce-eager, in one serving check.

    .venv/bin/python bench/default_config.py --wheelhouse WH --output OUT [--profile P] \
        [--allow-expired-release sid] [--skip-tests | --skip-serve [--skip-generate]] [--fresh-install] \
        [--record NAME]

Runs `rvport serve-check vllm --wheelhouse WH --output OUT` from this checkout (its log in OUT.log beside
OUT), which takes the steps generate and serve in vLLM's default configuration (compiled by inductor with the
wheelhouse's inductor-env.sh) and again with enforce-eager, in one container, and verifies the shared objects
inductor compiled for the profile (docs/closure.md). Then it writes
records/closure/default-config-PROFILE.json (or NAME.json, --record NAME): each step's status and seconds,
the engine's start-up, time to first token and tokens per second of both modes and their ratios, the
server's start-up of both, what inductor compiled (how many objects, their Tag_RISCV_arch, whether verify
passed), each structured-output backend's verdicts (the guided step), vLLM's own tests (the tests step:
counts per file) and the load beside the run. Figures under QEMU on a shared host, not a board's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import record_part, rvport, stop_on_signals, write_record  # noqa: E402

RUN = (
    "load_seconds",
    "ttft_seconds",
    "tokens_per_second",
    "decode_tokens_per_second",
    "serve_startup_seconds",
)


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def figures_of(result: dict, rc: int, seconds: float) -> dict:
    """The record's figures from a serving check's result.json (and the command's exit status and time)."""
    f = result.get("figures") or {}
    eager = f.get("eager") or {}
    compiled = result.get("inductor") or {}
    steps = {s["name"]: {"status": s["status"], "seconds": s.get("seconds")} for s in result.get("steps", [])}
    by = {s["name"]: s.get("result") or {} for s in result.get("steps", [])}
    return {
        "profile": result.get("profile"),
        "qemu_cpu": result.get("qemu_cpu"),
        "passed": result.get("passed"),
        "exit_status": rc,
        "wall_seconds": round(seconds, 1),
        "check_seconds": result.get("seconds"),
        "image": {k: (result.get("image") or {}).get(k) for k in ("tag", "made", "seconds")},
        "environment": (result.get("image") or {}).get("environment"),
        "steps": steps,
        "default": {k: f.get(k) for k in RUN},
        "eager": {k: eager.get(k) for k in RUN},
        "default_over_eager": {k: ratio(f.get(k), eager.get(k)) for k in RUN},
        "inductor_env": by.get("generate", {}).get("inductor_env"),
        "inductor": {
            k: compiled.get(k) for k in ("objects", "arch", "passed", "failed", "truncated", "settings")
        },
        "serve_text": {
            "default": by.get("serve", {}).get("text"),
            "eager": by.get("serve-eager", {}).get("text"),
        },
        "guided": guided_of(by.get("guided", {})),
        "tests": tests_of(
            next((x.get("tests") for x in result.get("steps", []) if x["name"] == "tests"), None)
        ),
        "load_average": result.get("load_average"),
    }


def tests_of(rec: dict | None) -> dict | None:
    """vLLM's own tests (the tests step): the counts, each pytest run's files, status and seconds, and per
    file its status, counts and seconds; the failed ids (the test ids themselves stay in result.json)."""
    if not rec:
        return None
    return {
        "status": rec.get("status"),
        "counts": rec.get("counts"),
        "runs": [{k: r.get(k) for k in ("paths", "status", "seconds")} for r in rec.get("runs", [])],
        "files": [
            {k: f.get(k) for k in ("path", "select", "status", "counts", "seconds")}
            for f in rec.get("files", [])
        ],
        "failed": [c.get("id") for c in rec.get("cases", []) if c.get("outcome") in ("failed", "error")][:50],
    }


def guided_of(step_result: dict) -> dict:
    """Each structured-output backend of the guided step: passed, the server's start-up seconds, and each
    request's verdict, tokens and seconds (the answers' texts stay in result.json)."""
    out = {}
    for name, b in (step_result.get("backends") or {}).items():
        reqs = b.get("requests") or {}
        out[name] = {
            "passed": b.get("passed"),
            "startup_seconds": b.get("startup_seconds"),
            "error": b.get("error"),
            "requests": {
                k: {x: r.get(x) for x in ("passed", "tokens", "seconds", "why")} for k, r in reqs.items()
            },
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheelhouse", required=True, type=Path)
    ap.add_argument("--output", required=True, type=Path)
    ap.add_argument("--profile")
    ap.add_argument("--allow-expired-release", action="append", default=[])
    ap.add_argument("--timeout", default="1800")
    ap.add_argument("--skip-tests", action="store_true", help="serve-check --skip-tests")
    ap.add_argument("--skip-serve", action="store_true", help="serve-check --skip-serve (serve and guided)")
    ap.add_argument("--skip-generate", action="store_true", help="serve-check --skip-generate")
    ap.add_argument("--fresh-install", action="store_true", help="serve-check --fresh-install")
    ap.add_argument(
        "--record",
        metavar="NAME",
        type=record_part,
        help="the record's name (default default-config-PROFILE)",
    )
    a = ap.parse_args(argv)
    stop_on_signals()
    args = ["serve-check", "vllm", "--wheelhouse", str(a.wheelhouse), "--output", str(a.output)]
    args += ["--timeout", a.timeout] + (["--profile", a.profile] if a.profile else [])
    args += ["--skip-tests"] if a.skip_tests else []
    args += ["--skip-serve"] if a.skip_serve else []
    args += ["--skip-generate"] if a.skip_generate else []
    args += ["--fresh-install"] if a.fresh_install else []
    for s in a.allow_expired_release:
        args += ["--allow-expired-release", s]
    log = a.output.with_name(a.output.name + ".log")
    rc, seconds = rvport(args, log=log)
    result_path = a.output / "result.json"
    if not result_path.is_file():
        print(f"no result.json (exit {rc}); see {log}", file=sys.stderr)
        return 1
    result = json.loads(result_path.read_text())
    figures = figures_of(result, rc, seconds)
    path = write_record(
        "closure",
        a.record or f"default-config-{result['profile']}",
        command=["python", "bench/default_config.py", *(argv if argv is not None else sys.argv[1:])],
        figures=figures,
        load=result.get("load_average"),
    )
    print(json.dumps({k: figures[k] for k in ("passed", "default", "eager", "default_over_eager")}, indent=2))
    print(f"wrote {path}")
    return 0 if rc == 0 else rc


if __name__ == "__main__":
    sys.exit(main())
