"""CI renderings of a result document (OUTPUT/result.json): a Markdown job summary and JUnit XML.

Pure functions of the document (no Docker, no environment), plus two small writers. The summary goes to
$GITHUB_STEP_SUMMARY on GitHub Actions (appended: other steps write there too); the JUnit file holds one test
case per stage with its verify and smoke results, and for a failed stage the error and the log tail.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from rvport.cli.outputs import write_text
from rvport.safetext import clean_xml, md_code, md_text, one_line, printable

_BACKTICKS = re.compile("`+")
# every key the runner writes into a stage's timings (StageEnv.timer, runner.py's "images"), in the order a
# stage runs them; a key not here (a later rvport's) still gets a column, after these (timing_keys)
TIMING_ORDER = (
    "fetch",
    "images",
    "base",
    "toolchain",
    "accelerated",
    "build",
    "verify",
    "smoke_image",
    "smoke",
    "smoke_other_vlen",
    "tests",
    "runtime",
    "check",
)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _cell(text: object) -> str:
    """A name or value in a Markdown table cell: one line, nothing Markdown or HTML would act on."""
    return md_text(str(text))


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in the lines, so that none of them can end it."""
    runs = [len(r) for line in lines for r in _BACKTICKS.findall(line)]
    return "`" * max([3] + [n + 1 for n in runs])


def stage_time(stage: dict) -> float:
    return round(sum(float(v) for v in (stage.get("timings") or {}).values()), 2)


_WHERE_RUN = frozenset({"tests", "smoke_other_vlen"})  # timing columns shown only where a stage has them


def timing_keys(stages: list[dict]) -> list[str]:
    """The timing table's columns: TIMING_ORDER, then any other key a stage has, as first seen (never
    dropped)."""
    # the upstream tests' column only where a stage ran them (a recipe's `tests:`), the smoke test's at the
    # other VLEN only where a build matrix ran it
    keys = [
        k for k in TIMING_ORDER if k not in _WHERE_RUN or any(k in (s.get("timings") or {}) for s in stages)
    ]
    for s in stages:
        keys += [k for k in (s.get("timings") or {}) if k not in keys]
    return keys


def verify_word(stage: dict) -> str:
    v = stage.get("verify")
    if v is None:
        return "failed" if (stage.get("error") or "").find("failed verification") >= 0 else "-"
    return "ok" if v.get("ok") else "failed"


def smoke_word(stage: dict) -> str:
    s = stage.get("smoke")
    if not s:
        return "-"
    words = [s.get("status", "-"), *map(check_words, s.get("checks") or [])]
    wv = s.get("without_vector")
    return "; ".join(words + ([without_vector_words(wv)] if wv else []))


def check_words(check: dict) -> str:
    """A check the smoke test reported (stages[].smoke.checks) in a few words: `NAME: passed`."""
    return one_line(f"{check.get('name', '?')}: {'passed' if check.get('passed') else 'failed'}")


def tests_word(stage: dict) -> str:
    """A stage's upstream tests in a few words: `passed (12 passed, 3 skipped)`, `failed (2 failed)`, `-`."""
    t = stage.get("tests")
    if not t:
        return "-"
    c = t.get("counts") or {}
    parts = [
        f"{c[k]} {k if k != 'error' else 'errors'}"
        for k in ("passed", "failed", "error", "skipped")
        if c.get(k)
    ]
    return f"{t.get('status', '?')} ({', '.join(parts) or 'no test'})"


def without_vector_words(wv: dict) -> str:
    """The smoke test's run without V in a few words: `without V: sigill as expected`, `without V: pass,
    expected sigill`, `without V: skipped`."""
    if wv.get("status") in ("passed", "failed"):
        observed, expected = wv.get("observed"), wv.get("expected")
        tail = "as expected" if observed == expected else f"expected {expected}"
        return f"without V: {observed} {tail}" if observed == expected else f"without V: {observed}, {tail}"
    return f"without V: {wv.get('status', '?')}"


def _stage_id(s: dict) -> str:
    """A result.json stage's id: the recipe's name, or with --python the recipe and Python (msgspec-cp314)."""
    return s.get("id") or s["recipe"]


def summary_markdown(doc: dict) -> str:
    """A GitHub job summary: status, stages with verdicts and cache hits, timings, artifacts with sha256."""
    stages = doc.get("stages", [])
    status = doc.get("status", "?")
    icon = {"ok": "✅", "failed": "❌", "interrupted": "⏹️"}.get(status, "")
    profile = (doc.get("profile") or {}).get("name", "?")
    lines = [
        f"## rvport build: {_cell(status)} {icon}".rstrip(),
        "",
        f"profile `{md_code(str(profile))}`, tag `{md_code(str(doc.get('tag')))}`, {len(stages)} stage(s), "
        f"{_cell(doc.get('duration_s', 0))} s",
    ]
    if doc.get("pythons"):
        lines[-1] += ", Python " + ", ".join(_cell(v) for v in doc["pythons"])
    if doc.get("failing_stage"):
        lines[-1] += f"; failing stage: **{_cell(doc['failing_stage'])}**"
    cached = [_cell(_stage_id(s)) for s in stages if s.get("status") == "cached"]
    lines += [
        "",
        f"Cache hits: {len(cached)} of {len(stages)} stage(s) reused verified artifacts"
        + (f" ({', '.join(cached)})" if cached else ""),
        "",
    ]
    tested = any(s.get("tests") for s in stages)  # the tests column only where a stage ran upstream tests
    lines += [
        "| stage | version | mode | status | verify | smoke | " + ("tests | " if tested else "") + "time |",
        "|---|---|---|---|---|---|" + ("---|" if tested else "") + "---:|",
    ]
    for s in stages:
        lines.append(
            f"| {_cell(_stage_id(s))} | {_cell(s.get('version', ''))} | {_cell(s.get('mode', ''))} | "
            f"{_cell(s.get('status', ''))} | {verify_word(s)} | {_cell(smoke_word(s))} | "
            + (f"{_cell(tests_word(s))} | " if tested else "")
            + f"{stage_time(s):.1f} s |"
        )
    keys = timing_keys(stages)
    lines += [
        "",
        "### Stage timings (s)",
        "",
        "| stage | " + " | ".join(_cell(k) for k in keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for s in stages:
        t = s.get("timings") or {}
        lines.append(
            f"| {_cell(_stage_id(s))} | " + " | ".join(f"{t[k]:.1f}" if k in t else "-" for k in keys) + " |"
        )
    lines += compiler_cache_rows(stages)
    lines += ["", "### Artifacts", ""]
    arts = doc.get("artifacts") or []
    if arts:
        lines += ["| artifact | size | sha256 |", "|---|---:|---|"]
        for a in arts:
            path, sha = md_code(str(a["path"])), md_code(str(a.get("sha256", "")))
            lines.append(f"| `{path}` | {_size(a.get('size'))} | `{sha}` |")
    else:
        lines.append("none")
    for s in stages:
        if s.get("status") in ("failed", "interrupted") and (s.get("error") or s.get("log_tail")):
            body = [printable(line, lines=False) for line in (s.get("error") or "").splitlines()]
            if s.get("log_tail"):
                body += [
                    "",
                    "--- log tail ---",
                    *(printable(str(x), lines=False) for x in s["log_tail"][-30:]),
                ]
            fence = _fence(body)
            summary = f"{_cell(_stage_id(s))}: {_cell(s['status'])}"
            lines += [
                "",
                f"<details><summary>{summary}</summary>",
                "",
                f"{fence}text",
                *body,
                fence,
                "",
                "</details>",
            ]
    return "\n".join(lines) + "\n"


def compiler_cache_rows(stages: list[dict]) -> list[str]:
    """The summary's compiler cache table (stages[].compiler_cache): per stage where the cache lived, this
    build's hits, misses and uncacheable calls, the cache's size before and after, and what was exported to
    a --compiler-cache DIR; nothing when no stage recorded one."""
    rows = [s for s in stages if s.get("compiler_cache")]
    if not rows:
        return []
    out = [
        "",
        "### Compiler cache (ccache)",
        "",
        "| stage | cache | hits | misses | uncacheable | size before | size after | exported |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for s in rows:
        c = s["compiler_cache"]
        export = (c.get("export") or {}).get("status", "-")
        if "hits" not in c:
            counts = f"{_cell(c.get('status') or '-')} | - | -"
        else:
            counts = f"{c['hits']} | {c['misses']} | {c['uncacheable']}"
        out.append(
            f"| {_cell(_stage_id(s))} | {_cell(c.get('use', '?'))} | {counts} | "
            f"{_size(c.get('size_before'))} | {_size(c.get('size_after'))} | {_cell(export)} |"
        )
    return out


def compiler_cache_properties(s: dict) -> tuple[tuple[str, object], ...]:
    """A stage's JUnit properties of its compiler cache: ccache (its use), and where the build ran its
    compiles through it, ccache_hits, ccache_misses, ccache_uncacheable, ccache_size_before and _after."""
    c = s.get("compiler_cache")
    if not c:
        return ()
    props: list[tuple[str, object]] = [("ccache", c.get("use", ""))]
    for k in ("hits", "misses", "uncacheable", "size_before", "size_after"):
        if c.get(k) is not None:
            props.append((f"ccache_{k}", c[k]))
    return tuple(props)


def junit_xml(doc: dict) -> str:
    """JUnit XML: one <testcase> per stage; failed -> <failure>, interrupted -> <error>, not run ->
    <skipped>."""
    return _xml(junit_suites(doc))


def _xml(suites: ET.Element) -> str:
    clean_xml(suites)  # any name, message or log line: well-formed XML, no terminal controls
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def junit_suites(doc: dict) -> ET.Element:
    """junit_xml's <testsuites>, before it is cleaned and written."""
    stages = doc.get("stages", [])
    profile = (doc.get("profile") or {}).get("name", "unknown")
    failures = sum(1 for s in stages if s.get("status") == "failed")
    errors = sum(1 for s in stages if s.get("status") == "interrupted")
    skipped = sum(1 for s in stages if s.get("status") == "not run")
    suites = ET.Element(
        "testsuites",
        name="rvport",
        tests=str(len(stages)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{doc.get('duration_s', 0)}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"rvport build ({profile})",
        tests=str(len(stages)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{doc.get('duration_s', 0)}",
        timestamp=str(doc.get("started", "")),
    )
    for s in stages:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"rvport.{profile}",
            name=f"{_stage_id(s)}=={s.get('version', '')}",
            time=f"{stage_time(s)}",
        )
        props = ET.SubElement(case, "properties")
        for k, v in (
            ("status", s.get("status", "")),
            ("mode", s.get("mode", "")),
            ("verify", verify_word(s)),
            ("smoke", smoke_word(s)),
            ("cache", "hit" if s.get("status") == "cached" else "miss"),
            *compiler_cache_properties(s),
            *(
                (("python", s["python"].get("version", "")), ("abi", s["python"].get("abi", "")))
                if s.get("python")
                else ()
            ),
        ):
            ET.SubElement(props, "property", name=k, value=str(v))
        # rvport's lines, each on one line: a name or path in it cannot start a line of its own
        out = [f"status: {s.get('status')}", f"verify: {verify_word(s)}", f"smoke: {smoke_word(s)}"]
        for a in s.get("artifacts") or []:
            out.append(one_line(f"artifact: {a['path']} {a.get('size')} bytes sha256 {a.get('sha256')}"))
        for r in (s.get("verify") or {}).get("reports", []):
            for a in r.get("artifacts", []):
                reasons = "; ".join(map(str, a.get("reasons") or []))
                out.append(
                    one_line(
                        f"verify {Path(str(a.get('path'))).name}: {a.get('verdict', '?')}"
                        + (f" ({reasons})" if reasons else "")
                    )
                )
        out += [f"smoke> {line}" for line in (s.get("smoke") or {}).get("output", [])]
        for c in (s.get("smoke") or {}).get("checks") or []:
            figures = ", ".join(f"{k} {v}" for k, v in (c.get("figures") or {}).items())
            out.append(f"smoke check {check_words(c)}" + (one_line(f" ({figures})") if figures else ""))
        wv = (s.get("smoke") or {}).get("without_vector")
        if wv:
            out.append(f"smoke {without_vector_words(wv)} (QEMU_CPU {wv.get('cpu')})")
            out += [f"smoke without V> {line}" for line in wv.get("output", [])]
        if s.get("runtime"):
            rt = s["runtime"]
            out.append(
                f"runtime image: {rt['tag']} {rt['image_id']}" + ("" if rt.get("made") else " (unchanged)")
            )
            chk = rt.get("check")
            if chk:
                out.append(f"runtime check: {chk['status']}" + (" (reused)" if chk.get("reused") else ""))
                for r in chk.get("rounds", []):
                    exit_ = "timed out" if r.get("timed_out") else f"exit {r.get('exit_status')}"
                    out.append(f"runtime check round {r.get('round')}: {exit_}, {r.get('seconds')} s")
                    out += [f"check> {line}" for line in r.get("output", [])]
                out += [f"service> {line}" for line in chk.get("service_logs", [])]
        body = "\n".join([(s.get("error") or "").strip(), "", "--- log tail ---", *(s.get("log_tail") or [])])
        err = (s.get("error") or "").strip()
        first = err.splitlines()[0] if err else str(s.get("status", ""))
        if s.get("status") == "failed":
            ET.SubElement(case, "failure", message=first, type="BuildFailed").text = body
        elif s.get("status") == "interrupted":
            ET.SubElement(case, "error", message=first or "interrupted", type="Interrupted").text = body
        elif s.get("status") == "not run":
            ET.SubElement(case, "skipped", message="not run: an earlier stage failed or was interrupted")
        ET.SubElement(case, "system-out").text = "\n".join(out)
    for s in stages:
        if s.get("tests"):
            _tests_suite(suites, s, profile)
    return suites


def _tests_suite(suites: ET.Element, s: dict, profile: str) -> None:
    """A stage's upstream tests as a <testsuite> of their own: one <testcase> per test id (failed ->
    <failure>, error -> <error>, skipped -> <skipped>), and one per file that did not run to its end (no
    test collected, timed out, ...) as a failure; the top element's totals count them too."""
    t = s["tests"]
    stage = _stage_id(s)
    cases = list(t.get("cases") or [])
    broken = [f for f in t.get("files") or [] if f.get("status") not in ("passed", "failed")]
    if t.get("reason"):
        broken.append({"path": "(install)", "status": t["reason"], "select": None})
    failures = sum(1 for c in cases if c.get("outcome") == "failed") + len(broken)
    errors = sum(1 for c in cases if c.get("outcome") == "error")
    skipped = sum(1 for c in cases if c.get("outcome") == "skipped")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"upstream tests of {stage} ({profile})",
        tests=str(len(cases) + len(broken)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{round(sum(float(c.get('duration_s') or 0) for c in cases), 3)}",
    )
    for c in cases:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{stage}.{c.get('file', '')}",
            name=str(c.get("id", "")),
            time=f"{c.get('duration_s', 0)}",
        )
        message = str(c.get("message") or "")
        first = message.strip().splitlines()[-1] if message.strip() else str(c.get("outcome"))
        if c.get("outcome") == "failed":
            ET.SubElement(case, "failure", message=first, type="TestFailed").text = message
        elif c.get("outcome") == "error":
            ET.SubElement(case, "error", message=first, type="TestError").text = message
        elif c.get("outcome") == "skipped":
            ET.SubElement(case, "skipped", message=first)
    for f in broken:
        case = ET.SubElement(suite, "testcase", classname=f"{stage}.{f['path']}", name=f"{f['path']} (run)")
        ET.SubElement(case, "failure", message=str(f["status"]), type="TestRunFailed").text = "\n".join(
            t.get("output") or []
        )
    for k, n in (
        ("tests", len(cases) + len(broken)),
        ("failures", failures),
        ("errors", errors),
        ("skipped", skipped),
    ):
        suites.set(k, str(int(suites.get(k, "0")) + n))


def serve_check_junit_xml(doc: dict) -> str:
    """JUnit XML of a serving check (its result.json): one <testcase> per step, in order (failed ->
    <failure> with the step's last log lines, skipped or not run -> <skipped>), then the tests step's upstream
    tests as a suite of their own, one case per test id, as a build's are."""
    steps = doc.get("steps", [])
    profile = str(doc.get("profile") or "unknown")
    recipe = str(doc.get("recipe") or "recipe")
    failures = sum(1 for s in steps if s.get("status") == "failed")
    skipped = sum(1 for s in steps if s.get("status") in ("skipped", "not-run"))
    totals = {"tests": str(len(steps)), "failures": str(failures), "errors": "0", "skipped": str(skipped)}
    seconds = f"{doc.get('seconds') or 0}"
    suites = ET.Element("testsuites", name="rvport", **totals, time=seconds)
    suite = ET.SubElement(
        suites, "testsuite", name=f"rvport serve-check {recipe} ({profile})", **totals, time=seconds
    )
    for s in steps:
        name, status = str(s.get("name", "")), s.get("status")
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"rvport.serve-check.{profile}",
            name=name,
            time=f"{s.get('seconds') or 0}",
        )
        lines = [str(x) for x in s.get("excerpt") or []]
        if status == "failed":
            why = "timed out" if s.get("timed_out") else (lines[-1] if lines else "failed")
            ET.SubElement(case, "failure", message=why, type="StepFailed").text = "\n".join(lines)
        elif status in ("skipped", "not-run"):
            reason = s.get("reason") or ("a step it needs did not pass" if status == "not-run" else "skipped")
            ET.SubElement(case, "skipped", message=str(reason))
        if lines:
            ET.SubElement(case, "system-out").text = "\n".join(lines)
    for s in steps:
        if s.get("name") == "tests" and s.get("tests"):
            _tests_suite(suites, {"recipe": recipe, "tests": s["tests"]}, profile)
    return _xml(suites)


def write_serve_check_junit(path: Path, doc: dict) -> Path | None:
    """serve_check_junit_xml written whole to `path` (`-`: standard output; then None is returned)."""
    return write_text(path, serve_check_junit_xml(doc))


def write_junit(path: Path, doc: dict) -> Path | None:
    """The JUnit XML written whole to `path` (`-`: standard output; then None is returned)."""
    return write_text(path, junit_xml(doc))


def append_summary(path: Path, doc: dict) -> Path | None:
    """Append (never overwrite): $GITHUB_STEP_SUMMARY is shared by every step of the job. `-`: standard
    output (then None is returned)."""
    return write_text(path, summary_markdown(doc), append=True)


def step_summary(ci_name: str | None) -> Path | None:
    """Where a build appends its summary when --summary names no file: $GITHUB_STEP_SUMMARY on GitHub
    Actions."""
    value = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(value) if ci_name == "github" and value else None


# ------------------------------------------------------------------------------------------ a build matrix
# OUTPUT/matrix.json (rvport/engine/matrix.py): its table's headers, the summary's and the terminal's
MATRIX_HEADERS = ("profile", "status", "build", "smoke", "SIGILL check", "other VLEN", "tests", "exit")
_MATRIX_ICONS = {"ok": "✅", "failed": "❌", "interrupted": "⏹️"}


def matrix_words(row: dict) -> list[str]:
    """A matrix row's five cells: build, smoke, the SIGILL check (with what ended the run without V when its
    stages agree: `passed (sigill)`, `failed (pass)`), other VLEN (`passed (VLEN 128: exit 1)`) and tests,
    with their counts (`passed (12 passed, 3 skipped)`) when a stage ran them."""
    words = [str(row.get(c, "?")) for c in ("build", "smoke", "sigill")]
    observed = {(s.get("without_vector") or {}).get("observed") for s in row.get("stages") or []} - {None}
    if len(observed) == 1:
        words[2] += f" ({observed.pop()})"
    other = {(r["vlen"], r["observed"]) for s in row.get("stages") or [] if (r := s.get("other_vlen_run"))}
    words.append(str(row.get("other_vlen", "?")))
    if len(other) == 1:
        vlen, seen = other.pop()
        words[3] += f" (VLEN {vlen}: {seen})"
    counts: dict[str, int] = {}
    for s in row.get("stages") or []:
        for k, n in (s.get("tests_counts") or {}).items():
            if isinstance(n, int):
                counts[k] = counts.get(k, 0) + n
    parts = [
        f"{counts[k]} {k if k != 'error' else 'errors'}"
        for k in ("passed", "failed", "error", "skipped")
        if counts.get(k)
    ]
    tests = str(row.get("tests", "?"))
    return [*words, f"{tests} ({', '.join(parts)})" if parts else tests]


def matrix_markdown(doc: dict, results: dict[str, dict | None]) -> str:
    """A build matrix's job summary: its status and the table (a row per profile), then each profile's own
    summary (summary_markdown of its result.json), in the matrix's order."""
    status = doc.get("status", "?")
    lines = [
        f"## rvport build matrix: {_cell(status)} {_MATRIX_ICONS.get(status, '')}".rstrip(),
        "",
        f"tag `{md_code(str(doc.get('tag')))}`, {len(doc.get('rows') or [])} profile(s), "
        f"{_cell(doc.get('duration_s', 0))} s, exit {_cell(doc.get('exit_code'))}",
        "",
        "| " + " | ".join(MATRIX_HEADERS) + " |",
        "|---|---|---|---|---|---|---|---:|",
    ]
    for r in doc.get("rows") or []:
        cells = [r.get("profile"), r.get("status"), *matrix_words(r)]
        exit_ = "-" if r.get("exit_code") is None else r["exit_code"]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + f" | {_cell(exit_)} |")
    for r in doc.get("rows") or []:
        if r.get("error"):
            lines += ["", f"**{_cell(r['profile'])}**: {_cell(r['error'])}"]
    out = "\n".join(lines) + "\n"
    for r in doc.get("rows") or []:
        result = results.get(str(r.get("profile")))
        if result is not None:
            out += "\n" + summary_markdown(result)
    return out


def matrix_junit_xml(doc: dict, results: dict[str, dict | None]) -> str:
    """A build matrix's JUnit XML: a suite `rvport build matrix` with a case per profile (its five cells as
    properties; a failed profile a <failure> with its error, an interrupted one an <error>, one not reached
    <skipped>), then every profile's own suites (junit_suites of its result.json), the totals of all."""
    rows = doc.get("rows") or []
    suites = ET.Element("testsuites", name="rvport", time=f"{doc.get('duration_s', 0)}")
    suite = ET.SubElement(
        suites, "testsuite", name="rvport build matrix", timestamp=str(doc.get("started", ""))
    )
    counts = {"tests": len(rows), "failures": 0, "errors": 0, "skipped": 0}
    for r in rows:
        case = ET.SubElement(
            suite,
            "testcase",
            classname="rvport.matrix",
            name=str(r.get("profile")),
            time=f"{r.get('duration_s') or 0}",
        )
        props = ET.SubElement(case, "properties")
        for k, v in zip(("build", "smoke", "sigill", "other_vlen", "tests"), matrix_words(r), strict=True):
            ET.SubElement(props, "property", name=k, value=v)
        ET.SubElement(props, "property", name="exit_code", value=str(r.get("exit_code")))
        message = str(r.get("error") or r.get("status"))
        if r.get("status") == "interrupted":
            ET.SubElement(case, "error", message=message, type="Interrupted")
            counts["errors"] += 1
        elif r.get("status") == "not run":
            ET.SubElement(case, "skipped", message="not run: the matrix was interrupted before it")
            counts["skipped"] += 1
        elif r.get("status") != "ok":
            ET.SubElement(case, "failure", message=message, type="ProfileFailed")
            counts["failures"] += 1
    for k, n in counts.items():
        suite.set(k, str(n))
    for r in rows:
        result = results.get(str(r.get("profile")))
        if result is None:
            continue
        theirs = junit_suites(result)
        for k in counts:
            counts[k] += int(theirs.get(k, "0"))
        suites.extend(list(theirs))
    for k, n in counts.items():
        suites.set(k, str(n))
    return _xml(suites)


def write_matrix_junit(path: Path, doc: dict, results: dict[str, dict | None]) -> Path | None:
    """The matrix's JUnit XML written whole to `path` (`-`: standard output; then None is returned)."""
    return write_text(path, matrix_junit_xml(doc, results))


def append_matrix_summary(path: Path, doc: dict, results: dict[str, dict | None]) -> Path | None:
    """The matrix's summary appended to `path` (`-`: standard output; then None is returned)."""
    return write_text(path, matrix_markdown(doc, results), append=True)
