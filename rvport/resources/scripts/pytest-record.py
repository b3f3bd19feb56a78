"""rvport's pytest plugin for a recipe's upstream tests (`tests:`), loaded with `-p rvport_pytest_record`:
one JSON line per test id into $PYTEST_RECORD_TO, with its outcome (passed, failed, skipped, error), its
seconds and, for one that did not pass, the first lines of what pytest said. A collection error is an id of
its own (outcome error). Each line is written when its id has ended (its teardown reported), so a run stopped
by its timeout keeps the ids it finished; an id written again (at the session's end) supersedes its line.
The runner (rvport/engine/tests.py) reads the lines back with bounds."""

import json
import os

MESSAGE = 2000  # characters of a failure's text kept

_seen = {}
_order = []
_written = {}  # id -> its line as written


def _put(nodeid, outcome, seconds, message):
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    old = _seen.get(nodeid)
    if old is None:
        _order.append(nodeid)
    elif rank[old["outcome"]] >= rank[outcome]:
        old["duration_s"] = round(old["duration_s"] + seconds, 3)
        return
    _seen[nodeid] = {
        "id": nodeid,
        "outcome": outcome,
        "duration_s": round((old or {}).get("duration_s", 0) + seconds, 3),
        **({"message": message[:MESSAGE]} if message else {}),
    }


def _text(report):
    try:
        return str(report.longreprtext or "")
    except Exception:  # noqa: BLE001 - whatever the report holds, the outcome is what counts
        return ""


def pytest_runtest_logreport(report):
    when, outcome = report.when, report.outcome
    seconds = float(getattr(report, "duration", 0) or 0)
    if when == "call":
        if hasattr(report, "wasxfail"):
            outcome = "skipped" if outcome == "skipped" else "passed"
        _put(report.nodeid, outcome, seconds, "" if outcome == "passed" else _text(report))
    elif outcome == "failed":
        _put(report.nodeid, "error", seconds, _text(report))
    elif outcome == "skipped":
        _put(report.nodeid, "skipped", seconds, _text(report))
    else:  # a setup or teardown that passed: its seconds count
        _put(report.nodeid, "passed", seconds, "")


def _write(nodeids):
    path = os.environ.get("PYTEST_RECORD_TO")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for nodeid in nodeids:
            line = json.dumps(_seen[nodeid], sort_keys=True)
            f.write(line + "\n")
            _written[nodeid] = line


def pytest_sessionstart(session):
    path = os.environ.get("PYTEST_RECORD_TO")
    if path:
        open(path, "w", encoding="utf-8").close()


def pytest_collectreport(report):
    if report.outcome == "failed":
        nodeid = report.nodeid or "(collection)"
        _put(nodeid, "error", 0.0, _text(report))
        _write([nodeid])


def pytest_runtest_logfinish(nodeid, location):
    if nodeid in _seen:
        _write([nodeid])


def pytest_sessionfinish(session, exitstatus):
    _write([n for n in _order if _written.get(n) != json.dumps(_seen[n], sort_keys=True)])
