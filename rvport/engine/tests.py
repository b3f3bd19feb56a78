"""A recipe's upstream tests (`tests:`), after its smoke test: the test container's build context and
script, its exported records read back with bounds into stages[].tests, and the failure (exit 7).

The tests run in a build of their own FROM the stage's smoke image (resources/dockerfiles/tests.Dockerfile),
with no network, on the profile's QEMU CPU: the stage's wheels, its dependencies' and the pinned test wheels
installed offline without dependencies, then pytest (`runs`: one run for all the planned files, each
scoped by its -k selection, within the sum of their timeouts) in a copy of the source tree's `copy:` paths,
with rvport's plugin (resources/scripts/pytest-record.py) writing one JSON line per test id as it ends. An
interrupt stops the build (BuildKit removes its container) and nothing of the run is recorded: the record is
made only from a finished run's exports.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

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


# a file name a -k expression can name as one word (pytest's identifiers, less ':', '/', '\\', '[' and ']')
_K_WORD = re.compile(r"[A-Za-z0-9_.+-]+")
_K_RESERVED = frozenset({"and", "or", "not", "true", "false", "none"})


def runs(planned: Mapping) -> list[dict]:
    """The pytest runs of the planned files, in order: one for all of them (pytest imports the project and
    its conftest.py once, which under QEMU takes about a minute), each file's tests scoped by its own
    selection (`-k "(NAME and (SELECT)) or NAME2 ..."`: -k matches the names of a test's module and
    directories too), within the sum of their timeouts. One run per file when the files' names cannot scope
    a -k expression: two of them share a name, one is part of another's name or of a directory's on their
    paths, or one is not a -k word. Each run: files (indexes into planned files), paths, select, timeout."""
    files = list(planned["files"])
    names = [PurePosixPath(f["path"]).name for f in files]
    dirs = {d.lower() for f in files for d in PurePosixPath(f["path"]).parent.parts}
    shared = len(files) > 1
    for j, name in enumerate(names):
        low, others = name.lower(), dirs | {n.lower() for k, n in enumerate(names) if k != j}
        if not _K_WORD.fullmatch(name) or low in _K_RESERVED or any(low in o for o in others):
            shared = False
    if not shared:
        return [
            {"files": [i], "paths": [f["path"]], "select": f.get("select"), "timeout": int(f["timeout"])}
            for i, f in enumerate(files)
        ]
    select = " or ".join(
        f"({name} and ({f['select']}))" if f.get("select") else name
        for name, f in zip(names, files, strict=True)
    )
    return [
        {
            "files": list(range(len(files))),
            "paths": [f["path"] for f in files],
            "select": select,
            "timeout": sum(int(f["timeout"]) for f in files),
        }
    ]


def script(planned: Mapping) -> str:
    """tests.sh: the wheels installed (smoke-install.sh, offline, no dependencies), then each pytest run
    (`runs`) under timeout(1), its exit status, records and times into /rvport-tests/<i>.status, <i>.jsonl
    and <i>.seconds."""
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
    for i, run in enumerate(runs(planned)):
        argv = ["timeout", "-k", "10", str(run["timeout"]), "python3", *pytest_args(run, "/rvport/tree")]
        lines += [
            f"echo {shlex.quote('--- ' + ' '.join(run['paths']))}",
            "start=$(date +%s.%N)",
            f"PYTEST_RECORD_TO=/rvport-tests/{i}.jsonl {shlex.join(argv)}; "
            f"echo $? > /rvport-tests/{i}.status",
            f'echo "$start $(date +%s.%N)" > /rvport-tests/{i}.seconds',
        ]
    return "\n".join(lines) + "\n"


def pytest_args(run: Mapping, rootdir: str) -> list[str]:
    """The arguments after the interpreter of one pytest run (`runs`): pytest with rvport's record plugin,
    no cache, quiet, failures and errors summed up, the tree's top as its rootdir, the files and the -k."""
    select = ["-k", run["select"]] if run.get("select") else []
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
        *run["paths"],
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


def _owner(case_id: str, paths: Sequence[str]) -> int:
    """Which of a run's files a test id is of (its path, then `::`); an id of none (a conftest.py's
    collection error) counts to the run's first file."""
    return next((j for j, p in enumerate(paths) if case_id == p or case_id.startswith(p + "::")), 0)


def _cases(out: Path, i: int, paths: Sequence[str], ref: str) -> list[dict]:
    """A run's test ids, each with the file it is of (`_owner`); an id recorded again (the plugin writes
    each as it ends) keeps its last line."""
    raw = _read(out / f"{i}.jsonl", RECORD_LIMIT, ref)
    if raw is None:
        return []
    cases: dict[str, dict] = {}
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
        case_id = doc["id"][:ID_LIMIT]
        case = {
            "id": case_id,
            "file": paths[_owner(case_id, paths)],
            "outcome": doc["outcome"],
            "duration_s": round(float(seconds), 3) if isinstance(seconds, int | float) else 0.0,
        }
        if doc["outcome"] in ("failed", "error") and isinstance(doc.get("message"), str):
            case["message"] = doc["message"][:MESSAGE_LIMIT]
        cases.pop(case_id, None)
        cases[case_id] = case
    return list(cases.values())


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


def _tests_seconds(cases: Sequence[Mapping]) -> float:
    return round(sum(float(c["duration_s"]) for c in cases), 2)


def _file_status(
    code: int | None,
    word: str,
    j: int,
    mine: Sequence[Mapping],
    cases: Sequence[Mapping],
    paths: Sequence[str],
) -> str:
    """What the run of its files means for the j-th of them (`mine`: its ids; `cases`: the run's). A file
    alone in its run: the run's word, or "recorded nothing" for a run that passed with no record. In a run
    of several that ended by itself (pytest's 0 or 1): the file's own outcome, and "no tests collected" when
    its selection matched nothing. In one that ended early (timed out, crashed, interrupted by a collection
    error): the run's word for the file that recorded last and the files after it, and for those with no
    record; the own outcome of each file before it."""
    bad = any(c["outcome"] in ("failed", "error") for c in mine)
    if len(paths) == 1:
        return "recorded nothing" if code == 0 and not mine else word
    if code in (0, 1):
        if not cases and code == 0:
            return "recorded nothing"
        return "no tests collected" if not mine else "failed" if bad else "passed"
    last = paths.index(cases[-1]["file"]) if cases else -1
    if code is None or code == 5 or not mine or j >= last:
        return word
    return "failed" if bad else "passed"


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
    files: dict[int, dict] = {}
    doc["runs"] = []
    for r, run in enumerate(runs(planned)):
        code = _status(out, str(r), ref)
        cases = _cases(out, r, run["paths"], ref)
        seconds = _seconds(out, r, ref)
        word = "not run" if code is None else _FILE_STATUS.get(code, f"exit {code}")
        doc["runs"].append(
            {"paths": run["paths"], "timeout": run["timeout"], "exit_status": code, "status": word,
             "seconds": seconds}
        )  # fmt: skip
        for j, i in enumerate(run["files"]):
            f = planned["files"][i]
            mine = [c for c in cases if c["file"] == f["path"]]
            files[i] = {
                "path": f["path"],
                "select": f.get("select"),
                "timeout": f["timeout"],
                "run": r,
                "exit_status": code,
                "status": _file_status(code, word, j, mine, cases, run["paths"]),
                "counts": _counts(mine),
                "seconds": seconds if len(run["paths"]) == 1 else _tests_seconds(mine),
            }
        doc["cases"] += cases
    doc["files"] = [files[i] for i in sorted(files)]
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
    runs_ = rec.get("runs") or []
    for f in rec.get("files", []):
        if f["status"] not in ("passed", "failed"):
            run = runs_[f["run"]] if isinstance(f.get("run"), int) and f["run"] < len(runs_) else None
            shared = run is not None and len(run["paths"]) > 1
            what = {
                "no tests collected": "collected no test: a selection that matches nothing is a failure, "
                "not a pass",
                "timed out": f"did not finish: the run of its {len(run['paths'])} files stopped at its "
                f"{run['timeout']} s"
                if shared
                else f"did not finish in its {f['timeout']} s",
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
    "runs",
    "script",
]
