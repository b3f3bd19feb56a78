#!/usr/bin/env python3
"""rvport serve-check, inside the container: a wheelhouse installed offline, then vLLM generates and serves
(docs/closure.md, "The serving check"). rvport runs it in a riscv64 container made from its serving check
image (the base plus the wheelhouse's Debian packages), with no network, the wheelhouse read-only at
--wheelhouse and a directory for the results at --out:

    python3 serve-check.py run --wheelhouse DIR --out DIR --timeout SECONDS [--skip-generate] [--skip-serve]
        [--tests FILE] [--prepared-venv]

`run` takes the steps in order, each a program of its own with its output in OUT/STEP.log, stopped with its
whole process group when it runs past --timeout seconds, or (import, generate, serve) when it printed its
result and has not exited EXIT_GRACE seconds later (a failed step, never a stuck check):

    install    a venv with --system-site-packages (it sees Debian's packages), then
               pip install --no-index --find-links DIR --require-hashes -r DIR/requirements.txt
               (--prepared-venv: the image made the venv with every wheel but the recipe's installed,
               closure/serveenv.py; the same pip command then installs what is left)
    pip-check  `pip check`; every line is recorded, and only the lines that name a distribution the
               wheelhouse installs are judged (Debian's own packages disagree with each other in sid)
    import     `from vllm import LLM`, timed
    generate   this script's `generate` in the venv: a tiny Llama with dummy weights, 8 tokens, in vLLM's
               default configuration (torch.compile: inductor compiles C++ with g++), after sourcing the
               wheelhouse's inductor-env.sh (its profile's -march and -mabi, caches of the profile's) when it
               ships one; the caches go to OUT/cache, where rvport verifies the shared objects after
    generate-eager  the same with enforce_eager=True (no compile)
    serve      this script's `serve` in the venv: `vllm serve` on loopback, one /v1/completions request, in
               the default configuration as generate
    serve-eager     the same with --enforce-eager
    guided     this script's `guided` in the venv, once per structured-output backend (xgrammar, guidance,
               outlines), each a program of its own with a timeout of its own: `vllm serve` with that
               backend, --enforce-eager and a byte-level tokenizer of ours, then a JSON schema, a regex and a
               choice list in /v1/completions requests, each answer judged here (parsed and validated, fully
               matched, one of the choices)
    tests      the recipe's own tests (FILE: each pytest run's arguments, the test wheels; rvport's
               closure/servetests.py): the source tree's copied paths (read-only at /rvport/tree) copied to
               /tmp/rvport-tree, the test wheels installed into the venv offline with --no-deps, then each
               pytest run (one for all the files, or one per file) in the venv within its own timeout, after
               sourcing inductor-env.sh as generate does, its cache in OUT/cache; rvport's plugin writes one
               JSON line per test id.
               What each run did goes to OUT/tests/ as engine/tests.py reads it back: I.status (pytest's
               exit status, 124 when it timed out), I.seconds, I.jsonl, and install.status (2: the test
               wheels, 3: the copy) when the run could not start

After each step OUT/steps.json is written whole (a temporary file, then a rename), so what ran is known
even if the container dies. A step after a failed install, or a generate or serve (either mode) after a
failed import, is "not-run"; both generate steps are "skipped" with --skip-generate, the serve steps
and guided with --skip-serve, tests without --tests. The exit status is 0 when every step that ran passed.

Only the Python standard library is used outside `generate`, `serve` and `guided` (they run in the venv, with
vLLM; guided's judge imports jsonschema there).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

VENV = "/tmp/rvport-venv"
PORT = 8000
EXIT_GRACE = 180.0  # seconds a step may take to exit once it printed its result
MAX_TOKENS = 8
STEPS = (
    "install", "pip-check", "import", "generate", "generate-eager", "serve", "serve-eager", "guided", "tests",
)  # fmt: skip
RUNS = ("generate", "generate-eager", "serve", "serve-eager")  # the steps that run vLLM and print one result
NEEDS_IMPORT = (*RUNS, "guided", "tests")  # not run after a failed import
SERVES = ("serve", "serve-eager", "guided")  # the steps --skip-serve leaves out
GENERATES = ("generate", "generate-eager")  # the steps --skip-generate leaves out
ENV_FILE = "inductor-env.sh"  # the wheelhouse's inductor settings (rvport/closure/inductor.py)
CACHE = "cache"  # OUT/cache: XDG_CACHE_HOME of the default-configuration steps (inductor's and vLLM's caches)
TESTS_TREE_RO = "/rvport/tree"  # the tree's copied paths, read-only
TESTS_TREE = "/tmp/rvport-tree"  # their copy, where pytest runs (it writes beside the tests)
TESTS_PLUGIN = "/rvport/plugin"  # rvport's pytest plugin (PYTHONPATH)
TESTS_EXPORT = "tests"  # OUT/tests: each file's status, seconds and records
TIMED_OUT = 124  # a file's status when its run was stopped at its timeout (as timeout(1) says)
# what the generate and serve steps report of the settings they ran with
INDUCTOR_VARS = ("TORCHINDUCTOR_CPP_MARCH", "TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT", "XDG_CACHE_HOME")

# the tiny model: no download, dummy weights. head_dim is given: 64 / 4 heads would be 16, which vLLM's CPU
# attention refuses (its head sizes start at 32)
TINY = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "head_dim": 32,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 128,
}
PROMPT_IDS = [1, 415, 2936, 9060, 285, 1142, 28705, 28740]
PROMPT_TEXT = "The capital of France is"

# what vLLM is run with: no network, the CPU backend, the KV cache small (GiB), threads left to the OS
RUN_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}

# the guided step: one `vllm serve` per structured-output backend, eager, with a byte-level tokenizer of ours
# (the 256 bytes and an end-of-sequence token: guidance refuses mistral_common's SentencePiece tokenizer, and
# one tokenizer serves the three), and a longer context than the serve step's so that the JSON always closes
BACKENDS = ("xgrammar", "guidance", "outlines")
KINDS = ("json", "regex", "choice")  # the requests, in order
EOS = "</s>"
GUIDED_CONTEXT = 512  # the guided model's max_position_embeddings and --max-model-len
GUIDED_MAX_TOKENS = 256  # the longest answer the schema allows is 134 bytes (one token a byte)
STOP_GRACE = 90.0  # seconds of a backend's timeout kept to stop its server (SIGINT, then 60 s, then SIGKILL)
HEALTH_POLL = 5.0  # seconds between two /health requests
SERVER_LINES = 40  # a guided server's last lines kept to say why it refused to start
LINE_LIMIT = 64 * 1024  # bytes of a server's line copied at a time
BODY_LIMIT = 64 * 1024  # bytes of an HTTP answer read
TEXT_CHARS = 2000  # an answer's text kept in the record
ERROR_CHARS = 1000  # an error message kept in the record
# every string bounded by a pattern of ASCII letters (xgrammar 0.2.8 turns maxLength into a character class
# that admits raw control characters, which JSON forbids), the array by maxItems, every object closed
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z]{1,8}$"},
        "kind": {"enum": ["cat", "dog", "fish"]},
        "home": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "pattern": "^[a-z]{1,6}$"},
                "indoor": {"type": "boolean"},
            },
            "required": ["city", "indoor"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"enum": ["small", "old", "calm"]}, "minItems": 1, "maxItems": 3},
    },
    "required": ["name", "kind", "home", "tags"],
    "additionalProperties": False,
}
REGEX = "[a-z]{2,6}-[0-9]{2}"
CHOICES = ["red", "green", "blue"]
GUIDED_PROMPTS = {"json": "A pet as JSON:", "regex": "A code:", "choice": "A colour:"}

IMPORT = (
    "import json, time\n"
    "t = time.monotonic()\n"
    "from vllm import LLM\n"
    "took = time.monotonic() - t\n"
    "import importlib.metadata as md\n"
    "names = ('vllm', 'torch', 'transformers', 'numpy', 'sympy', 'mpmath')\n"
    "print(json.dumps({'import_seconds': round(took, 1), 'versions': {n: md.version(n) for n in names}}))\n"
)


# ------------------------------------------------------------------------------------------ pure parts
def wheelhouse_names(requirements: str) -> set[str]:
    """The distributions a requirements.txt of `rvport wheelhouse` installs (NAME==VERSION lines), as
    canonical names."""
    out = set()
    for line in requirements.splitlines():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==", line)
        if m:
            out.add(canonical(m.group(1)))
    return out


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_NAME = r"([A-Za-z0-9][A-Za-z0-9._-]*)"
# pip check's lines: "A 1.0 has requirement B<2, but you have B 2.1.", "A 1.0 requires B, which is not
# installed.", "A 1.0 is not supported on this platform"
_HAS = re.compile(rf"^{_NAME} \S+ has requirement {_NAME}")
_REQUIRES = re.compile(rf"^{_NAME} \S+ requires {_NAME}")
_PLATFORM = re.compile(rf"^{_NAME} \S+ is not supported on this platform")
_CLEAN = "No broken requirements found."
_PIP_NOTES = ("WARNING: ", "DEPRECATION: ", "[notice] ")


def judge(lines: list[str], ours: set[str]) -> tuple[list[str], list[str]]:
    """(judged, not judged) of pip check's lines: a line is judged when either distribution it names is one
    the wheelhouse installs (`ours`, canonical names), or when it is not a line this knows (then nothing can
    be said for it). Lines about two distributions outside the wheelhouse are Debian's own; pip's notes about
    itself are not judged either."""
    judged, other = [], []
    for line in (x.strip() for x in lines):
        if not line or line == _CLEAN:
            continue
        if line.startswith(_PIP_NOTES):  # pip's own notes (on stderr): about pip, not the distributions
            other.append(line)
            continue
        m = _HAS.match(line) or _REQUIRES.match(line)
        names = [m.group(1), m.group(2)] if m else []
        if not m and (p := _PLATFORM.match(line)):
            names = [p.group(1)]
        if not names or any(canonical(n) in ours for n in names):
            judged.append(line)
        else:
            other.append(line)
    return judged, other


def last_json(text: str) -> dict:
    """The last line of a step's output that is a JSON object: what the step printed as its result."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    return {}


def generate_passed(result: dict) -> bool:
    return result.get("tokens") == MAX_TOKENS


def serve_passed(result: dict) -> bool:
    return bool(result.get("text")) and result.get("tokens") == MAX_TOKENS


def pip_install(wh: Path) -> list[str]:
    """pip's arguments that install a wheelhouse, as docs/closure.md tells a user: offline, every wheel
    checked against its hash. pip's resolver also walks Debian's installed packages; the lock meets what their
    own metadata asks (the policy's debian_requires). `pip check` judges the result."""
    req = str(wh / "requirements.txt")
    return ["pip", "install", "--no-index", "--find-links", str(wh), "--require-hashes",
            "-r", req]  # fmt: skip


def next_step(
    done: dict[str, str], skip_serve: bool, tests: bool = False, skip_generate: bool = False
) -> tuple[str, str] | None:
    """The first step not taken yet and what it is to be, given how the steps before it ended: "run",
    "not-run" (a step it needs did not pass) or "skipped" (both generate steps with `skip_generate`, serve
    and guided with `skip_serve`, tests without `tests`); None when every step is taken."""
    for name in STEPS:
        if name in done:
            continue
        left_out = (name in GENERATES and skip_generate) or (name in SERVES and skip_serve)
        if left_out or (name == "tests" and not tests):
            return name, "skipped"
        if name != "install" and done.get("install") != "passed":
            return name, "not-run"
        if name in NEEDS_IMPORT and done.get("import") != "passed":
            return name, "not-run"
        return name, "run"
    return None


def guided_body(kind: str) -> dict:
    """The /v1/completions request of one guided kind: the constraint in `structured_outputs` (vLLM's field
    since 0.12: json, regex or choice), greedy, room for the longest answer, stopped by the grammar's end."""
    spec = {"json": SCHEMA, "regex": REGEX, "choice": CHOICES}[kind]
    return {
        "model": "tiny",
        "prompt": GUIDED_PROMPTS[kind],
        "max_tokens": GUIDED_MAX_TOKENS,
        "temperature": 0,
        "structured_outputs": {kind: spec},
    }


def structured_config(backend: str) -> dict:
    """vLLM's --structured-outputs-config of a guided server: the backend, chosen server-wide (vLLM 0.33.0
    refuses a request-level one), and for xgrammar and guidance no free whitespace in JSON (the only two
    that take disable_any_whitespace: with it a model of dummy weights cannot pad an answer without end)."""
    doc: dict = {"backend": backend}
    if backend in ("xgrammar", "guidance"):
        doc["disable_any_whitespace"] = True
    return doc


def guided_server(python: str, model: Path, tokenizer: Path, backend: str, port: int) -> list[str]:
    """`vllm serve` of the guided model with one structured-output backend: eager (no torch.compile: three
    servers under QEMU), our tokenizer in Hugging Face mode, a context of GUIDED_CONTEXT."""
    return [
        python, "-m", "vllm.entrypoints.cli.main", "serve", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "tiny",
        "--tokenizer", str(tokenizer), "--tokenizer-mode", "hf", "--load-format", "dummy",
        "--max-model-len", str(GUIDED_CONTEXT), "--dtype", "float32", "--enforce-eager",
        "--structured-outputs-config", json.dumps(structured_config(backend), sort_keys=True),
    ]  # fmt: skip


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def error_message(body: str) -> str:
    """vLLM's message in an error answer ({"error": {"message": ...}}), else the body itself; bounded."""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
    return bounded(" ".join(str(msg if msg is not None else body).split()), ERROR_CHARS)


def off_constraint(kind: str, text: str) -> str | None:
    """Why an answer's text is outside its constraint (None when it is within): the JSON must parse (RFC 8259,
    as Python reads it strictly) and validate against SCHEMA (jsonschema), the regex fully match, the choice
    be one of the choices."""
    if kind == "regex":
        return None if re.fullmatch(REGEX, text) else "does not fully match the regex"
    if kind == "choice":
        return None if text in CHOICES else "not one of the choices"
    try:
        doc = json.loads(text)
    except ValueError as e:
        return bounded(f"not JSON: {e}", ERROR_CHARS)
    import jsonschema  # in the venv (the wheelhouse's), and rvport's own for its tests

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc))
    if error is None:
        return None
    where = "/".join(str(x) for x in error.absolute_path) or "(the document)"
    return bounded(f"does not validate at {where}: {error.message}", ERROR_CHARS)


def judge_answer(kind: str, status: int | None, body: str) -> dict:
    """The verdict on one guided answer: its HTTP status (None: no answer, `body` says why) and body.
    passed, text, tokens (completion tokens), finish_reason, and `why` when it did not pass (`error`:
    vLLM's own message of an HTTP error)."""
    if status is None:
        return {"passed": False, "why": bounded(f"no answer: {body}", ERROR_CHARS)}
    if status != 200:
        msg = error_message(body)
        return {"passed": False, "http_status": status, "error": msg, "why": f"HTTP {status}: {msg}"}
    try:
        answer = json.loads(body)
    except ValueError:
        return {"passed": False, "http_status": status, "why": "the answer is not JSON"}
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    text, usage = first.get("text"), answer.get("usage") if isinstance(answer, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    finish = first.get("finish_reason")
    out: dict = {
        "passed": False,
        "text": bounded(text, TEXT_CHARS) if isinstance(text, str) else None,
        "tokens": tokens if isinstance(tokens, int) else None,
        "finish_reason": finish if isinstance(finish, str) else None,
    }
    why = off_constraint(kind, text) if isinstance(text, str) else "the answer has no text"
    if why is not None and out["finish_reason"] not in (None, "stop"):
        why += f" (finish_reason {out['finish_reason']})"
    out["passed"] = why is None
    if why is not None:
        out["why"] = why
    return out


def guided_passed(result: dict) -> bool:
    """A backend passes when its server answered every request within its constraint."""
    reqs = result.get("requests")
    if result.get("error") or not isinstance(reqs, dict):
        return False
    return all(isinstance(reqs.get(k), dict) and reqs[k].get("passed") is True for k in KINDS)


def guided_results(log: Path, limit: int = 256 * 1024) -> dict[str, dict]:
    """What each backend's program printed as its result (a JSON line with "guided": BACKEND) anywhere in the
    step's log, read line by line (a line cut at `limit` bytes); the last one of each backend."""
    found: dict[str, dict] = {}
    with open(log, "rb") as f:
        while line := f.readline(limit):
            text = line.decode("utf-8", errors="replace").strip()
            if not (text.startswith("{") and text.endswith("}") and '"guided"' in text):
                continue
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("guided") in BACKENDS:
                found[doc["guided"]] = doc
    return found


def guided_outcome(found: dict[str, dict], programs: list[dict]) -> tuple[dict, list[str]]:
    """The guided step's result (each backend's, in order; a backend whose program printed nothing is given
    why, from how its program ended) and its failures, each a line naming the backend and the request."""
    backends: dict[str, dict] = {}
    failures: list[str] = []
    for i, name in enumerate(BACKENDS):
        got = found.get(name)
        ended = programs[i] if i < len(programs) else {}
        if got is None:
            if ended.get("timed_out"):
                why = "stopped at its timeout before it printed a result"
            elif not ended:
                why = "not run"
            else:
                why = f"exited with status {ended.get('exit_status')} before it printed a result"
            got = {"guided": name, "error": why, "requests": {}}
        got = {**got, "passed": guided_passed(got)}
        backends[name] = got
        if got.get("error"):
            failures.append(f"{name}: {got['error']}")
        reqs = got.get("requests") if isinstance(got.get("requests"), dict) else {}
        for kind in KINDS:
            req = reqs.get(kind)
            if isinstance(req, dict) and req.get("passed") is True:
                continue
            if isinstance(req, dict) or not got.get("error"):
                why = req.get("why") if isinstance(req, dict) else "no answer"
                failures.append(f"{name} {kind}: {why}")
    return {"backends": backends}, failures


def tests_programs(plan: dict, venv_py: str, env_file: Path | None) -> tuple[list[list[str]], list[dict]]:
    """The tests step's programs: (what prepares the runs: the copy of the tree, the test wheels' install
    into the venv offline and without dependencies; each pytest run, of one file or of several: its argv,
    after sourcing the wheelhouse's inductor settings, and its timeout)."""
    prepare = [["cp", "-R", TESTS_TREE_RO, TESTS_TREE]]
    if plan.get("wheels"):
        pip = [venv_py, "-m", "pip", "install", "--no-index", "--no-deps", "--no-compile"]
        prepare.append([*pip, *plan["wheels"]])
    runs = [
        {
            "argv": sourced(env_file, [venv_py, *r["args"]]),
            "timeout": float(r["timeout"]),
            "path": " ".join(r["paths"]),
        }
        for r in plan["runs"]
    ]
    return prepare, runs


# ------------------------------------------------------------------------------------------------ steps
def tail_text(path: Path, limit: int = 1 << 20) -> str:
    """The last `limit` bytes of a log, as text."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode("utf-8", errors="replace")


def group_alive(pgid: int, proc_dir: Path = Path("/proc")) -> bool:
    """Whether a process of the group `pgid` still runs (a zombie does not count: it has ended)."""
    for stat in proc_dir.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def reap() -> None:
    """As the container's first process, collect the orphans it inherits (they would stay zombies)."""
    if os.getpid() != 1:
        return
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def stop_group(p: subprocess.Popen) -> bool:
    """SIGTERM to the process group `p` leads, SIGKILL 10 s later to what is left of it; whether any of it
    was running."""
    if p.poll() is not None and not group_alive(p.pid):
        reap()
        return False
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        p.poll()
        reap()
        if not group_alive(p.pid):
            return True
        time.sleep(0.1)
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()
    reap()
    return True


def wait(p: subprocess.Popen, log: Path, timeout: float, exit_grace: float | None, poll: float = 5.0) -> str:
    """Wait for `p`: "exited", "timed out" (past `timeout` seconds) or, with `exit_grace`, "hung" (it printed
    its result, a JSON line, and had not exited `exit_grace` seconds later: what vLLM's engine core did to the
    generate step, keeping the interpreter alive)."""
    deadline = time.monotonic() + timeout
    printed: float | None = None
    while True:
        try:
            p.wait(timeout=max(0.0, min(poll, deadline - time.monotonic())))
            return "exited"
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now >= deadline:
            return "timed out"
        if exit_grace is not None:
            if printed is None and last_json(tail_text(log, 64 * 1024)):
                printed = now
            if printed is not None and now - printed > exit_grace:
                return "hung"


def run_program(
    f,  # noqa: ANN001 - the step's log, open for writing
    log: Path,
    argv: list[str],
    timeout: float,
    rec: dict,
    *,
    env: dict | None = None,
    exit_grace: float | None = None,
    poll: float = 5.0,
    cwd: str | None = None,
    what: str = "the step's timeout",
) -> str:
    """One program of a step in a process group of its own, its output appended to the step's log `f`:
    "exited", "timed out" or "hung" (wait); rec's exit_status is set (None unless it exited), and
    timed_out, hung_after_result or left_processes when they happened (what was left is stopped)."""
    f.write("$ " + " ".join(argv) + "\n")
    f.flush()
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=cwd)
    how = wait(p, log, timeout, exit_grace, poll)
    if how == "exited":
        rec["exit_status"] = p.returncode
        if stop_group(p):
            rec["left_processes"] = True
            f.write("\nrvport: the program exited and left processes running: stopped\n")
        return how
    stop_group(p)
    p.wait()
    rec["exit_status"] = None
    if how == "timed out":
        rec["timed_out"] = True
        f.write(f"\nrvport: stopped after {timeout:g} s ({what})\n")
    else:
        rec["hung_after_result"] = True
        f.write(f"\nrvport: stopped: it printed its result and did not exit in {exit_grace:g} s\n")
    return how


def run_step(
    out: Path,
    name: str,
    argvs: list[list[str]],
    timeout: float,
    env: dict | None = None,
    exit_grace: float | None = None,
    poll: float = 5.0,
    each: bool = False,
) -> dict:
    """The programs of a step, one after another (each in a process group of its own, stopped with the group
    before the next starts: run_program), their output in OUT/NAME.log; stopped at the first that fails. The
    step's record: status, exit_status, timed_out, seconds, log, `left_processes` when a program exited but
    left processes of its group running (stopped), and `hung_after_result` when it printed its result and did
    not exit within `exit_grace` seconds (stopped: the step fails, what it printed is kept). With `each`,
    every program runs whatever the one before did, each within `timeout` seconds of its own, and `programs`
    says how each ended (exit_status, timed_out, seconds); exit_status is then the first that is not 0."""
    log = out / f"{name}.log"
    t0 = time.monotonic()
    rec: dict = {"name": name, "log": log.name, "timed_out": False, "exit_status": None}
    programs: list[dict] = []
    with open(log, "w", encoding="utf-8") as f:
        for argv in argvs:
            t1 = time.monotonic()
            left = timeout if each else max(1.0, timeout - (t1 - t0))
            how = run_program(f, log, argv, left, rec, env=env, exit_grace=exit_grace, poll=poll)
            f.flush()
            rc = rec["exit_status"]
            seconds = round(time.monotonic() - t1, 1)
            programs.append({"exit_status": rc, "timed_out": how == "timed out", "seconds": seconds})
            if rc != 0 and not each:
                break
    if each:
        rec["programs"] = programs
        rec["exit_status"] = next((x["exit_status"] for x in programs if x["exit_status"] != 0), 0)
    rec["seconds"] = round(time.monotonic() - t0, 1)
    rec["status"] = "passed" if rec["exit_status"] == 0 else "failed"
    return rec


def run_tests(
    out: Path,
    prepare: list[list[str]],
    runs: list[dict],
    timeout: float,
    env: dict | None = None,
    poll: float = 5.0,
) -> dict:
    """The tests step (tests_programs): the copy and the install within `timeout` together, then every
    pytest run within its own timeout, one after another whatever the one before did; each run's exit
    status (TIMED_OUT when it was stopped), start and end times written to OUT/tests/ for rvport to read
    (engine/tests.py's layout). The step passes when every run's pytest exited 0; rvport judges the
    records."""
    log, export = out / "tests.log", out / TESTS_EXPORT
    export.mkdir(exist_ok=True)
    for old in export.iterdir():
        old.unlink()
    t0 = time.monotonic()
    rec: dict = {
        "name": "tests",
        "log": log.name,
        "timed_out": False,
        "exit_status": None,
        "export": TESTS_EXPORT,
    }
    with open(log, "w", encoding="utf-8") as f:
        for i, argv in enumerate(prepare):
            left = max(1.0, timeout - (time.monotonic() - t0))
            run_program(f, log, argv, left, rec, env=env, poll=poll)
            if rec["exit_status"] != 0:
                (export / "install.status").write_text("3\n" if i == 0 else "2\n")
                rec["seconds"] = round(time.monotonic() - t0, 1)
                rec["status"] = "failed"
                return rec
        worst = 0
        for i, run in enumerate(runs):
            f.write(f"--- {run['path']}\n")
            one: dict = {}
            file_env = dict(env or os.environ)
            file_env["PYTEST_RECORD_TO"] = str(export / f"{i}.jsonl")
            file_env["PYTHONPATH"] = TESTS_PLUGIN
            start = time.time()
            how = run_program(
                f, log, run["argv"], run["timeout"], one, env=file_env, poll=poll, cwd=TESTS_TREE,
                what="the run's timeout",
            )  # fmt: skip
            code = one["exit_status"] if how == "exited" else TIMED_OUT
            (export / f"{i}.status").write_text(f"{code}\n")
            (export / f"{i}.seconds").write_text(f"{start} {time.time()}\n")
            rec["timed_out"] = rec["timed_out"] or how == "timed out"
            rec["left_processes"] = rec.get("left_processes", False) or one.get("left_processes", False)
            worst = worst or code
    if not rec.get("left_processes"):
        rec.pop("left_processes", None)
    rec["exit_status"] = worst
    rec["seconds"] = round(time.monotonic() - t0, 1)
    rec["status"] = "passed" if worst == 0 else "failed"
    return rec


def write_steps(out: Path, steps: list[dict]) -> None:
    tmp = out / ".steps.json.part"
    doc = {"steps": steps, "env": RUN_ENV}
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out / "steps.json")


def sourced(env_file: Path | None, argv: list[str]) -> list[str]:
    """argv run after the wheelhouse's inductor-env.sh is sourced, as a user does (`. FILE`), when it ships
    one: a missing compiler or header then stops the step with the file's message naming the package."""
    if env_file is None:
        return argv
    return ["sh", "-c", '. "$1" && shift && exec "$@"', "sh", str(env_file), *argv]


def step_commands(wh: Path, timeout: float = 1800.0, prepared: bool = False) -> dict[str, list[list[str]]]:
    """The programs of each step; guided's, one a backend, are told their timeout (`timeout` seconds each).
    `prepared`: the venv is there (the environment image's), so install is pip's command alone."""
    venv_py = f"{VENV}/bin/python"
    me = str(Path(__file__).resolve())
    env_file = wh / ENV_FILE if (wh / ENV_FILE).is_file() else None
    gen = [venv_py, me, "generate", "--model", "/tmp/rvport-tiny"]
    srv = [venv_py, me, "serve", "--model", "/tmp/rvport-tiny-serve", "--port", str(PORT)]
    gd = [venv_py, me, "guided", "--model", "/tmp/rvport-tiny-guided", "--tokenizer", "/tmp/rvport-tokenizer",
          "--port", str(PORT), "--within", f"{timeout:g}"]  # fmt: skip
    return {
        "install": [
            *([] if prepared else [[sys.executable, "-m", "venv", "--system-site-packages", VENV]]),
            [venv_py, "-m", *pip_install(wh)],
        ],
        "pip-check": [[venv_py, "-m", "pip", "check"]],
        "import": [[venv_py, "-c", IMPORT]],
        "generate": [sourced(env_file, gen)],
        "generate-eager": [[*gen, "--eager"]],
        "serve": [sourced(env_file, srv)],
        "serve-eager": [[*srv, "--eager"]],
        "guided": [[*gd, "--backend", b] for b in BACKENDS],
    }


def prepared_venv(asked: bool) -> bool:
    """Whether install starts from the image's venv: asked (--prepared-venv) and there (its pyvenv.cfg)."""
    return asked and Path(VENV, "pyvenv.cfg").is_file()


def step_env(name: str, out: Path) -> dict[str, str]:
    """What a step adds to the environment: vLLM's settings (RUN_ENV) for every step but install, and for the
    default-configuration steps and the tests a cache directory in OUT, so the shared objects inductor
    compiled can be verified on the host after the run."""
    if name == "install":
        return {}
    if name in ("generate", "serve", "tests"):
        return {**RUN_ENV, "XDG_CACHE_HOME": str(out / CACHE)}
    return dict(RUN_ENV)


def run(args: argparse.Namespace, commands: dict[str, list[list[str]]] | None = None) -> int:
    """Every step in order (the module's docstring); `commands`: the programs of each step (step_commands)."""
    out, wh = Path(args.out), Path(args.wheelhouse)
    ours = wheelhouse_names((wh / "requirements.txt").read_text(encoding="utf-8"))
    commands = commands or step_commands(
        wh, args.timeout, prepared_venv(getattr(args, "prepared_venv", False))
    )
    plan = read_plan(Path(args.tests)) if getattr(args, "tests", None) else None
    steps: list[dict] = []
    done: dict[str, str] = {}
    while (step := next_step(done, args.skip_serve, plan is not None, args.skip_generate)) is not None:
        name, what = step
        if what != "run":
            rec = {"name": name, "status": what}
        else:
            print(f"{name}: running", flush=True)
            grace = EXIT_GRACE if name == "import" or name in RUNS else None
            added = step_env(name, out)
            env = {**os.environ, **added} if added else None
            # guided: each backend's program within a timeout of its own, each run whatever the others did
            each = name == "guided"
            if name == "tests":
                assert plan is not None
                env_file = wh / ENV_FILE if (wh / ENV_FILE).is_file() else None
                prepare, runs = tests_programs(plan, f"{VENV}/bin/python", env_file)
                rec = run_tests(out, prepare, runs, args.timeout, env)
            else:
                rec = run_step(out, name, commands[name], args.timeout, env, grace, each=each)
            text = tail_text(out / rec["log"])
            if name == "guided":
                result, failures = guided_outcome(guided_results(out / rec["log"]), rec["programs"])
                rec.update(result=result, failures=failures)
                if failures:
                    rec["status"] = "failed"
            elif name == "pip-check":
                lines = [x for x in text.splitlines() if x and not x.startswith(("$ ", "rvport: "))]
                judged, other = judge(lines, ours)
                rec.update(lines=lines, judged=judged, not_judged=other)
                # pip check exits 1 for any line; the step fails for a judged one only (or when pip itself
                # failed: any other exit status)
                broken = judged or rec["timed_out"] or rec["exit_status"] not in (0, 1)
                rec["status"] = "failed" if broken else "passed"
            elif name == "import" or name in RUNS:
                result = last_json(text)
                rec["result"] = result
                check = generate_passed if name.startswith("generate") else serve_passed
                check = (lambda _r: True) if name == "import" else check
                if rec["status"] == "passed" and not check(result):
                    rec["status"] = "failed"
        steps.append(rec)
        done[name] = rec["status"]
        took = f" ({rec['seconds']:g} s)" if "seconds" in rec else ""
        print(f"{name}: {rec['status']}{took}", flush=True)
        write_steps(out, steps)
    return 0 if all(s["status"] in ("passed", "skipped") for s in steps) else 1


def read_plan(path: Path, limit: int = 1 << 20) -> dict:
    """The tests step's plan rvport wrote (closure/servetests.py): runs (paths, timeout, args), wheels."""
    with open(path, "rb") as f:
        doc = json.loads(f.read(limit))
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise ValueError(f"{path}: not a tests plan")
    return doc


# --------------------------------------------------------------------------------- in the venv, with vLLM
def save_tiny(model: Path, **changes: object) -> None:
    """The tiny model's config.json (TINY, with `changes`) in `model`: its only file."""
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps({**TINY, "model_type": "llama", **changes}))


def byte_symbols() -> list[str]:
    """The character byte-level BPE writes for each byte, by byte value (GPT-2's table, which the `tokenizers`
    ByteLevel pre-tokenizer and decoder use): a printable Latin-1 byte stands for itself, every other byte
    for chr(256 + n), n counting those bytes in order."""
    keep = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    out, n = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + n))
            n += 1
    return out


def tokenizer_vocab() -> dict[str, int]:
    """The guided tokenizer's vocabulary: each byte its own token (id = the byte), then EOS (id 256)."""
    return {**{c: b for b, c in enumerate(byte_symbols())}, EOS: 256}


def save_tokenizer(path: Path) -> None:
    """A byte-level BPE with no merges (tokenizer_vocab) as a Hugging Face fast tokenizer in `path`: the
    tokenizers library builds it, transformers writes it (tokenizer.json, tokenizer_config.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(vocab=tokenizer_vocab(), merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, model_max_length=GUIDED_CONTEXT)
    fast.save_pretrained(str(path))


def generate(args: argparse.Namespace) -> int:
    """8 tokens from the tiny model: one 1-token request (its wall time is the time to first token), then an
    8-token one; then the engine is shut down (its core runs in a process of its own, which would keep this
    interpreter alive)."""
    import gc

    model = Path(args.model)
    save_tiny(model)
    from vllm import LLM, SamplingParams

    t0 = time.monotonic()
    # the default configuration leaves enforce_eager out, as `LLM(model)` does: vLLM compiles the model
    eager = {"enforce_eager": True} if args.eager else {}
    llm = LLM(
        model=str(model),
        load_format="dummy",
        skip_tokenizer_init=True,
        max_model_len=128,
        dtype="float32",
        **eager,
    )
    load = time.monotonic() - t0
    try:
        prompt = {"prompt_token_ids": PROMPT_IDS}
        first = SamplingParams(max_tokens=1, ignore_eos=True, detokenize=False, temperature=0)
        full = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, detokenize=False, temperature=0)
        t1 = time.monotonic()
        llm.generate([prompt], first, use_tqdm=False)
        ttft = time.monotonic() - t1
        t2 = time.monotonic()
        outs = llm.generate([prompt], full, use_tqdm=False)
        whole = time.monotonic() - t2
        ids = list(outs[0].outputs[0].token_ids)
        doc = {**generate_figures(load, ttft, whole, ids), **run_mode(args.eager)}
        print(json.dumps(doc), flush=True)
    finally:
        engine = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if engine is not None:
            engine.shutdown()  # the engine core client: stops the engine core process
        del llm
        gc.collect()
    return 0


def run_mode(eager: bool) -> dict:
    """How vLLM ran: eager or its default configuration, and the inductor settings in the environment."""
    return {
        "mode": "eager" if eager else "default",
        "inductor_env": {k: os.environ[k] for k in INDUCTOR_VARS if k in os.environ},
    }


def generate_figures(load: float, ttft: float, whole: float, ids: list[int]) -> dict:
    return {
        "load_seconds": round(load, 1),
        "ttft_seconds": round(ttft, 3),
        "generate_seconds": round(whole, 3),
        "tokens": len(ids),
        "token_ids": ids,
        "tokens_per_second": round(len(ids) / whole, 3) if whole > 0 else None,
        # the tokens after the first, over the time the full request took beyond a 1-token one
        "decode_tokens_per_second": round((len(ids) - 1) / (whole - ttft), 3) if whole > ttft else None,
        "model": TINY,
        "dtype": "float32",
    }


def serve(args: argparse.Namespace) -> int:
    """`vllm serve` of the tiny model on 127.0.0.1 with mistral_common's packaged SentencePiece tokenizer (in
    mistral tokenizer mode), one /v1/completions request with a text prompt; the server is stopped after."""
    import importlib.util
    import shutil
    import urllib.request

    model = Path(args.model)
    save_tiny(model)
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or spec.origin is None:
        print(json.dumps({"error": "mistral_common is not installed"}), flush=True)
        return 1
    shutil.copyfile(Path(spec.origin).parent / "data" / "tokenizer.model.v1", model / "tokenizer.model.v1")
    argv = [
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(model),
        "--host", "127.0.0.1", "--port", str(args.port), "--served-model-name", "tiny",
        "--tokenizer-mode", "mistral", "--load-format", "dummy",
        "--max-model-len", "128", "--dtype", "float32",
    ]  # fmt: skip
    if args.eager:
        argv.append("--enforce-eager")
    base = f"http://127.0.0.1:{args.port}"
    result: dict = {"tokenizer": "mistral_common/data/tokenizer.model.v1", **run_mode(args.eager)}
    t0 = time.monotonic()
    server = start_server(argv)  # in this step's process group: a timeout stops it too
    try:
        while not _healthy(base):
            if server.poll() is not None:
                result["error"] = f"vllm serve exited with {server.returncode}"
                print(json.dumps(result), flush=True)
                return 1
            time.sleep(5)
        result["startup_seconds"] = round(time.monotonic() - t0, 1)
        body = {"model": "tiny", "prompt": PROMPT_TEXT, "max_tokens": MAX_TOKENS, "temperature": 0,
                "ignore_eos": True}  # fmt: skip
        headers = {"Content-Type": "application/json"}
        url = f"{base}/v1/completions"
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
        t1 = time.monotonic()
        with urllib.request.urlopen(req, timeout=3600) as r:
            answer = json.loads(r.read(1 << 20))
        took = time.monotonic() - t1
        result.update(serve_figures(answer, took))
        print(json.dumps(result), flush=True)
        return 0
    finally:
        stop_server(server)


def start_server(argv: list[str], **popen) -> subprocess.Popen:
    """`vllm serve`, to be stopped by stop_server. A program started in the background of a shell inherits
    SIGINT ignored, and an ignored signal stays ignored across exec, so the server would only go at the
    SIGKILL a minute later: Python's own handler set here makes the child start with the default."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return subprocess.Popen(argv, **popen)


def stop_server(server: subprocess.Popen) -> None:
    """SIGINT, as Ctrl-C (vLLM's server shuts its engine down), then SIGKILL after 60 s."""
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _healthy(base: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/health", timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


def serve_figures(answer: dict, took: float) -> dict:
    """What a /v1/completions answer and its wall time say: the text, the token counts, tokens per second."""
    choices = answer.get("choices") or [{}]
    usage = answer.get("usage") or {}
    tokens = usage.get("completion_tokens")
    return {
        "text": choices[0].get("text"),
        "tokens": tokens,
        "prompt_tokens": usage.get("prompt_tokens"),
        "request_seconds": round(took, 3),
        "tokens_per_second": round(tokens / took, 3) if isinstance(tokens, int) and took > 0 else None,
    }


def guided(args: argparse.Namespace) -> int:
    """One backend of the guided step: `vllm serve` with it (guided_server), then each guided request, its
    answer judged (judge_answer); the result printed as one JSON line with "guided": BACKEND; the server
    stopped after. Everything happens within `--within` seconds less STOP_GRACE (kept to stop the server; at
    least half of them): a server that is not healthy by then is this backend's failure."""
    model, tokenizer = Path(args.model), Path(args.tokenizer)
    # the tiny model with a longer context, and our tokenizer's end of sequence
    save_tiny(model, max_position_embeddings=GUIDED_CONTEXT, eos_token_id=256)
    result: dict = {"guided": args.backend, "mode": "eager", "requests": {}}
    try:
        save_tokenizer(tokenizer)
    except Exception as e:  # noqa: BLE001 (any failure is this backend's, said in one line)
        result["error"] = bounded(f"the tokenizer could not be made: {type(e).__name__}: {e}", ERROR_CHARS)
        print(json.dumps(result), flush=True)
        return 1
    result["tokenizer"] = f"byte-level BPE of the 256 bytes and {EOS} ({len(tokenizer_vocab())} tokens)"
    budget = max(args.within / 2, args.within - STOP_GRACE)
    deadline = time.monotonic() + budget
    base = f"http://127.0.0.1:{args.port}"
    argv = guided_server(sys.executable, model, tokenizer, args.backend, args.port)
    result["server"] = argv[3:]
    t0 = time.monotonic()
    # in this program's process group (its timeout stops the server too); its output copied to the step's log,
    # its last lines kept to say why it refused to start
    server = start_server(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said = _copy_lines(server)
    try:
        while not _healthy(base):
            if server.poll() is not None:
                said.join(timeout=10)
                why = refusal(list(said.last))
                result["error"] = f"vllm serve exited with status {server.returncode} before it was healthy"
                result["error"] += f": {why}" if why else ""
                break
            if time.monotonic() > deadline:
                result["error"] = f"vllm serve was not healthy within {budget:g} s"
                break
            time.sleep(HEALTH_POLL)
        else:
            result["startup_seconds"] = round(time.monotonic() - t0, 1)
            for kind in KINDS:
                left = deadline - time.monotonic()
                if left < 1:
                    why = "no time left in the backend's timeout"
                    result["requests"][kind] = {"passed": False, "why": why}
                    continue
                t1 = time.monotonic()
                status, body = _post(f"{base}/v1/completions", guided_body(kind), left)
                try:
                    verdict = judge_answer(kind, status, body)
                except Exception as e:  # noqa: BLE001 (a judge that cannot judge fails the request, said)
                    why = bounded(f"the judge failed: {type(e).__name__}: {e}", ERROR_CHARS)
                    verdict = {"passed": False, "why": why}
                verdict["seconds"] = round(time.monotonic() - t1, 3)
                result["requests"][kind] = verdict
        result["passed"] = guided_passed(result)
        print(json.dumps(result), flush=True)
        return 0 if result["passed"] else 1
    finally:
        stop_server(server)


def _copy_lines(server: subprocess.Popen) -> threading.Thread:
    """A thread that copies the server's output to this program's (the step's log) line by line, each cut at
    LINE_LIMIT bytes, and keeps its last SERVER_LINES lines (as text) in the thread's `last`."""
    last: deque[str] = deque(maxlen=SERVER_LINES)

    def copy() -> None:
        assert server.stdout is not None
        while line := server.stdout.readline(LINE_LIMIT):
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            last.append(line.decode("utf-8", errors="replace").rstrip("\n"))

    thread = threading.Thread(target=copy, daemon=True)
    thread.last = last  # type: ignore[attr-defined]
    thread.start()
    return thread


_RAISED = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b: \S")


def refusal(lines: list[str]) -> str:
    """Why a server that exited refused to start, from its last lines: the last that names a raised error
    (`ValueError: ...`), else its last line that is not empty; bounded, on one line."""
    kept = [x.strip() for x in lines if x.strip()]
    raised = [x for x in kept if _RAISED.search(x)]
    why = (raised or kept or [""])[-1]
    return bounded(" ".join(why.split()), ERROR_CHARS)


def _post(url: str, body: dict, timeout: float) -> tuple[int | None, str]:
    """POST a JSON body: (HTTP status, the answer's first BODY_LIMIT bytes as text); (None, why) when no
    answer came (refused, reset, past `timeout` seconds)."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(BODY_LIMIT).decode("utf-8", errors="replace")
    except urllib.error.HTTPError as e:  # an answer: 400 for a constraint the backend refuses
        try:
            text = e.read(BODY_LIMIT).decode("utf-8", errors="replace")
        except OSError:
            text = ""
        return e.code, text or str(e.reason)
    except (OSError, ValueError) as e:
        return None, f"{type(e).__name__}: {e}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="every step, in order")
    r.add_argument("--wheelhouse", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--timeout", type=float, required=True, help="seconds per step")
    r.add_argument("--skip-generate", action="store_true")
    r.add_argument("--skip-serve", action="store_true")
    r.add_argument("--tests", help="the tests step's plan (JSON); without it the step is skipped")
    r.add_argument("--prepared-venv", action="store_true", help="the image holds the venv (its environment)")
    g = sub.add_parser("generate", help="(in the venv) the generate step")
    g.add_argument("--model", required=True)
    g.add_argument("--eager", action="store_true", help="enforce_eager=True (no torch.compile)")
    s = sub.add_parser("serve", help="(in the venv) the serve step")
    s.add_argument("--model", required=True)
    s.add_argument("--port", type=int, default=PORT)
    s.add_argument("--eager", action="store_true", help="--enforce-eager (no torch.compile)")
    d = sub.add_parser("guided", help="(in the venv) one backend of the guided step")
    d.add_argument("--backend", required=True, choices=BACKENDS)
    d.add_argument("--model", required=True)
    d.add_argument("--tokenizer", required=True, help="where the tokenizer of ours is written")
    d.add_argument("--port", type=int, default=PORT)
    d.add_argument("--within", type=float, required=True, help="seconds the backend has, its server stopped")
    args = ap.parse_args(argv)
    return {"run": run, "generate": generate, "serve": serve, "guided": guided}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
