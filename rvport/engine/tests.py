"""A recipe's upstream tests (`tests:`), after its smoke test: the test container's build context and
script, its exported records read back with bounds into stages[].tests, and the failure (exit 7).

The tests run in a build of their own FROM the stage's smoke image (resources/dockerfiles/tests.Dockerfile),
with no network, on the profile's QEMU CPU: the stage's wheels, its dependencies' and the pinned test wheels
installed offline without dependencies, then one pytest run per planned file (its -k selection, its timeout)
in a copy of the source tree's `copy:` paths, with rvport's plugin (resources/scripts/pytest-record.py)
writing one JSON line per test id. An interrupt stops the build (BuildKit removes its container) and nothing
of the run is recorded: the record is made only from a finished run's exports.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from rvport import resources
from rvport.catalogue.profiles import Profile
from rvport.engine import render
from rvport.errors import BuildFailed, RecipeError, SmokeFailed
from rvport.fileio import read_ends, read_regular

OUTCOMES = ("passed", "failed", "skipped", "error")
RECORD_LIMIT = 64 << 20  # bytes of one file's records
STATUS_LIMIT = 64
LOG_TAIL = 1 << 20
MAX_CASES = 100_000  # test ids read from one file's records
ID_LIMIT = 4096  # characters of one test id
MESSAGE_LIMIT = 2000
OUTPUT_LINES = 20
SHOWN_FAILURES = 20
PLUGIN = "rvport_pytest_record"
INSTALL_FAILED = "install"  # the status file of a failed install of the wheels: what failed, by its number
INSTALL_REASONS = {
    1: "installing the wheels failed",
    2: "installing the test wheels failed",
    3: "copying the source tree's test paths failed",
}
# pytest's exit statuses, and timeout(1)'s
_FILE_STATUS = {
    0: "passed",
    1: "failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
    124: "timed out",
    137: "timed out",
}


class UpstreamTestsFailed(SmokeFailed):
    """A recipe's upstream tests failed (exit 7, as a failed smoke test): the failing test ids, a file that
    collected nothing, timed out or could not run; result.json has every id in stages[].tests."""


def check_files(ref: str, planned: Mapping, tree: Path, where: str) -> None:
    """Every planned test file and copied path is in the prepared tree (a regular file; a path, a file or a
    directory), before any image is made; the missing ones are named together (exit 3)."""
    missing = [f["path"] for f in planned["files"] if not _regular(tree / f["path"])]
    missing += [c for c in planned["copy"] if not os.path.lexists(tree / c) or (tree / c).is_symlink()]
    if missing:
        raise RecipeError(
            f"{ref}: the recipe's tests: name what the source tree ({where}) does not hold: "
            + ", ".join(dict.fromkeys(missing)),
            hint="a test file was moved or removed in this tree: change the recipe's tests: files, or build "
            "a tree that has them",
        )


def _regular(p: Path) -> bool:
    return p.is_file() and not p.is_symlink()


def script(planned: Mapping) -> str:
    """tests.sh: the wheels installed (smoke-install.sh, offline, no dependencies), then each file's pytest
    run under timeout(1), its exit status and records into /rvport-tests/<i>.status and <i>.jsonl."""
    lines = [
        "set -u",
        "cd /tmp",
        # the stage's wheels as the smoke test installs them; then the test wheels, beside (never over) what
        # the image's Debian packages hold (python3-packaging, say, which pip cannot uninstall)
        "if ! sh /rvport/smoke-install.sh /artifacts /rvport/deps; then",
        f"  echo 'installing the wheels failed'; echo 1 > /rvport-tests/{INSTALL_FAILED}.status; exit 0",
        "fi",
        "set -- /rvport/test-wheels/*.whl",
        'if [ -e "$1" ] && ! python3 -m pip install --no-index --no-deps --break-system-packages '
        '--ignore-installed --no-compile --root-user-action=ignore "$@"; then',
        f"  echo 'installing the test wheels failed'; echo 2 > /rvport-tests/{INSTALL_FAILED}.status; exit 0",
        "fi",
        "cd /rvport/tree",
        "export PYTHONPATH=/rvport/plugin",
    ]
    for i, f in enumerate(planned["files"]):
        argv = ["timeout", "-k", "10", str(int(f["timeout"])), "python3", *pytest_args(f, "/rvport/tree")]
        lines += [
            f"echo {shlex.quote('--- ' + f['path'])}",
            "start=$(date +%s.%N)",
            f"PYTEST_RECORD_TO=/rvport-tests/{i}.jsonl {shlex.join(argv)}; "
            f"echo $? > /rvport-tests/{i}.status",
            f'echo "$start $(date +%s.%N)" > /rvport-tests/{i}.seconds',
        ]
    return "\n".join(lines) + "\n"


def pytest_args(f: Mapping, rootdir: str) -> list[str]:
    """The arguments after the interpreter of one planned file's run: pytest with rvport's record plugin, no
    cache, quiet, failures and errors summed up, the tree's top as its rootdir, the file and its -k."""
    select = ["-k", f["select"]] if f.get("select") else []
    return [
        "-m",
        "pytest",
        "-p",
        PLUGIN,
        "-p",
        "no:cacheprovider",
        "-q",
        "-rfE",
        f"--rootdir={rootdir}",
        f["path"],
        *select,
    ]


def context(
    ctx: Path,
    *,
    tree: Path,
    planned: Mapping,
    artifacts: Path,
    deps: Mapping[str, Path],
    wheels: Mapping[str, Path],
    dockerfile: str,
) -> None:
    """The test build's context: artifacts/, deps/<stage>/ (their wheels), test-wheels/, tree/ (the copied
    paths of the prepared tree, links kept as links: they were checked when the tree was made), the plugin,
    the install script, tests.sh and the Dockerfile."""
    from rvport.engine.stage import link_tree

    link_tree(artifacts, ctx / "artifacts")
    (ctx / "deps").mkdir()
    for dep, path in sorted(deps.items()):
        for whl in sorted(p for p in Path(path).rglob("*.whl") if p.is_file()):
            (ctx / "deps" / dep).mkdir(exist_ok=True)
            shutil.copy2(whl, ctx / "deps" / dep / whl.name)
    (ctx / "test-wheels").mkdir()
    for name, path in sorted(wheels.items()):  # a cache entry is named by its digest: by its file name here
        shutil.copyfile(path, ctx / "test-wheels" / name)
    (ctx / "tree").mkdir()
    for rel in planned["copy"]:
        src, dest = tree / rel, ctx / "tree" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dest, symlinks=True)
        else:
            shutil.copy2(src, dest, follow_symlinks=False)
    (ctx / f"{PLUGIN}.py").write_text(resources.script("pytest-record.py"))
    (ctx / "rvport-smoke-install.sh").write_text(resources.script("smoke-install.sh"))
    (ctx / "rvport-tests.sh").write_text(script(planned))
    (ctx / "Dockerfile").write_text(dockerfile)


def dockerfile(*, image: str, qemu_cpu: str, profile: Profile) -> render.Rendered:
    """The test build's Dockerfile (tests.Dockerfile): FROM the smoke image, on the profile's QEMU CPU. No
    recipe field reaches it: the files and selections are in tests.sh, every word quoted."""
    if not render.QEMU_CPU.fullmatch(qemu_cpu):
        raise ValueError(f"QEMU CPU {qemu_cpu!r} cannot be written into the test stage")
    return render.render(
        "tests",
        {
            "IMAGE": image,
            "QEMU_CPU": qemu_cpu,
            "PROFILE": shlex.quote(profile.name),
            "VLEN": str(int(profile.vlen)),
        },
    )


def _read(path: Path, limit: int, ref: str) -> bytes | None:
    if not path.is_symlink() and not path.exists():
        return None
    return read_regular(
        path,
        limit=limit,
        what=f"{ref}'s test export",
        error=BuildFailed,
        hint="tests.Dockerfile writes it as a regular file; the stage's full log is in OUTPUT/logs/",
        follow=False,
    )


def _status(out: Path, name: str, ref: str) -> int | None:
    raw = _read(out / f"{name}.status", STATUS_LIMIT, ref)
    if raw is None:
        return None
    try:
        return int(raw.decode("ascii", errors="replace").strip())
    except ValueError:
        return -1


def _cases(out: Path, i: int, path: str, ref: str) -> list[dict]:
    raw = _read(out / f"{i}.jsonl", RECORD_LIMIT, ref)
    if raw is None:
        return []
    cases: list[dict] = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if len(cases) >= MAX_CASES:
            break
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if (
            not isinstance(doc, dict)
            or doc.get("outcome") not in OUTCOMES
            or not isinstance(doc.get("id"), str)
        ):
            continue
        seconds = doc.get("duration_s")
        case = {
            "id": doc["id"][:ID_LIMIT],
            "file": path,
            "outcome": doc["outcome"],
            "duration_s": round(float(seconds), 3) if isinstance(seconds, int | float) else 0.0,
        }
        if doc["outcome"] in ("failed", "error") and isinstance(doc.get("message"), str):
            case["message"] = doc["message"][:MESSAGE_LIMIT]
        cases.append(case)
    return cases


def _seconds(out: Path, i: int, ref: str) -> float | None:
    """How long a file's run took (tests.sh writes its start and end times), None when unknown."""
    raw = _read(out / f"{i}.seconds", STATUS_LIMIT, ref)
    try:
        start, end = (float(x) for x in (raw or b"").decode("ascii", errors="replace").split())
    except ValueError:
        return None
    return round(end - start, 2) if end >= start else None


def _counts(cases: Sequence[Mapping]) -> dict[str, int]:
    return {o: sum(1 for c in cases if c["outcome"] == o) for o in OUTCOMES}


def record(
    ref: str, out: Path, planned: Mapping, wheels: Sequence[str], log_path: Path | None = None
) -> dict:
    """The test run's exports -> stages[].tests: per file its exit status, what it means, its counts; every
    test id with its outcome; the counts; the log's last lines (of `log_path`, default OUT/log); and
    `status`: passed when the wheels were installed and every file ran to its end with no failed test or
    error and at least one test, else failed."""
    log_path = out / "log" if log_path is None else log_path
    log = (
        read_ends(log_path, head=0, tail=LOG_TAIL, what=f"{ref}'s test log", error=BuildFailed, follow=False)
        if log_path.exists() or log_path.is_symlink()
        else None
    )
    text = b"" if log is None else log.head + log.tail  # a small log is whole in head
    output = text.decode("utf-8", errors="replace").rstrip().splitlines()
    if log is not None and log.truncated:
        output = output[1:]  # its first line began in the bytes left out
    doc: dict = {"wheels": list(wheels), "files": [], "cases": []}
    install = _status(out, INSTALL_FAILED, ref)
    if install is not None:
        reason = INSTALL_REASONS.get(install, INSTALL_REASONS[1])
        doc.update(status="failed", reason=reason, counts=_counts([]))
        doc["output"] = output[-OUTPUT_LINES:]
        return doc
    for i, f in enumerate(planned["files"]):
        code = _status(out, str(i), ref)
        cases = _cases(out, i, f["path"], ref)
        counts = _counts(cases)
        if code is None:
            word = "not run"
        else:
            word = _FILE_STATUS.get(code, f"exit {code}")
        if code == 0 and not cases:
            word = "recorded nothing"
        doc["files"].append(
            {
                "path": f["path"],
                "select": f.get("select"),
                "timeout": f["timeout"],
                "exit_status": code,
                "status": word,
                "counts": counts,
                "seconds": _seconds(out, i, ref),
            }
        )
        doc["cases"] += cases
    doc["counts"] = _counts(doc["cases"])
    ok = all(f["status"] == "passed" for f in doc["files"]) and not (
        doc["counts"]["failed"] or doc["counts"]["error"]
    )
    doc["status"] = "passed" if ok else "failed"
    doc["output"] = output[-OUTPUT_LINES:]
    return doc


def failure(ref: str, rec: Mapping, log: Path) -> UpstreamTestsFailed:
    """The error of failed upstream tests (failure_lines)."""
    lines = failure_lines(rec)
    counts = rec.get("counts") or {}
    err = UpstreamTestsFailed(
        f"{ref}: its upstream tests failed ({counts.get('passed', 0)} passed, "
        f"{counts.get('failed', 0)} failed, {counts.get('error', 0)} errors, "
        f"{counts.get('skipped', 0)} skipped):",
        detail=["  " + line for line in lines],
        hint="the artifacts were built, verified and smoke-tested but not kept; stages[].tests in "
        f"result.json has every test id, the JUnit file a case each; the full log is {log}",
    )
    err.log_tail = list(rec.get("output") or [])
    return err


def failure_lines(rec: Mapping) -> list[str]:
    """What failed upstream tests say: why the run could not start (its reason), each file that did not end
    in a pass with what it ended in, and the failing ids (the first SHOWN_FAILURES)."""
    lines: list[str] = []
    if rec.get("reason"):
        lines.append(str(rec["reason"]))
    for f in rec.get("files", []):
        if f["status"] not in ("passed", "failed"):
            what = {
                "no tests collected": "collected no test (pytest exit status 5): a selection that matches "
                "nothing is a failure, not a pass",
                "timed out": f"did not finish in its {f['timeout']} s",
            }.get(f["status"], f["status"])
            lines.append(f"{f['path']}" + (f" -k {f['select']!r}" if f.get("select") else "") + f": {what}")
    bad = [c for c in rec.get("cases", []) if c["outcome"] in ("failed", "error")]
    lines += [f"{c['outcome'].upper()} {c['id']}" for c in bad[:SHOWN_FAILURES]]
    if len(bad) > SHOWN_FAILURES:
        lines.append(f"... and {len(bad) - SHOWN_FAILURES} more")
    return lines


__all__ = [
    "UpstreamTestsFailed",
    "check_files",
    "context",
    "dockerfile",
    "failure",
    "failure_lines",
    "pytest_args",
    "record",
    "script",
]
