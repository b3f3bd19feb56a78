#!/usr/bin/env python3
"""rvport serve-check, inside the container: a wheelhouse installed offline, then vLLM generates and serves
(docs/closure.md, "The serving check"). rvport runs it in a riscv64 container made from its serving check
image (the base plus the wheelhouse's Debian packages), with no network, the wheelhouse read-only at
--wheelhouse and a directory for the results at --out:

    python3 serve-check.py run --wheelhouse DIR --out DIR --timeout SECONDS [--skip-serve]

`run` takes the steps in order, each a program of its own with its output in OUT/STEP.log, stopped with its
whole process group when it runs past --timeout seconds, or (import, generate, serve) when it printed its
result and has not exited EXIT_GRACE seconds later (a failed step, never a stuck check):

    install    a venv with --system-site-packages (it sees Debian's packages), then
               pip install --no-index --find-links DIR --require-hashes -r DIR/requirements.txt
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

After each step OUT/steps.json is written whole (a temporary file, then a rename), so what ran is known
even if the container dies. A step after a failed install, or a generate or serve (either mode) after a
failed import, is "not-run"; both serve steps are "skipped" with --skip-serve. The exit status is 0 when every
step that ran passed.

Only the Python standard library is used outside `generate` and `serve` (they run in the venv, with vLLM).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

VENV = "/tmp/rvport-venv"
PORT = 8000
EXIT_GRACE = 180.0  # seconds a step may take to exit once it printed its result
MAX_TOKENS = 8
STEPS = ("install", "pip-check", "import", "generate", "generate-eager", "serve", "serve-eager")
RUNS = ("generate", "generate-eager", "serve", "serve-eager")  # the steps that run vLLM
ENV_FILE = "inductor-env.sh"  # the wheelhouse's inductor settings (rvport/closure/inductor.py)
CACHE = "cache"  # OUT/cache: XDG_CACHE_HOME of the default-configuration steps (inductor's and vLLM's caches)
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


def next_step(done: dict[str, str], skip_serve: bool) -> tuple[str, str] | None:
    """The first step not taken yet and what it is to be, given how the steps before it ended: "run",
    "not-run" (a step it needs did not pass) or "skipped"; None when every step is taken."""
    for name in STEPS:
        if name in done:
            continue
        if name.startswith("serve") and skip_serve:
            return name, "skipped"
        if name != "install" and done.get("install") != "passed":
            return name, "not-run"
        if name in RUNS and done.get("import") != "passed":
            return name, "not-run"
        return name, "run"
    return None


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


def run_step(
    out: Path,
    name: str,
    argvs: list[list[str]],
    timeout: float,
    env: dict | None = None,
    exit_grace: float | None = None,
    poll: float = 5.0,
) -> dict:
    """The programs of a step, one after another (each in a process group of its own), their output in
    OUT/NAME.log; stopped at the first that fails. The step's record: status, exit_status, timed_out, seconds,
    log, `left_processes` when a program exited but left processes of its group running (stopped), and
    `hung_after_result` when it printed its result and did not exit within `exit_grace` seconds (stopped:
    the step fails, what it printed is kept)."""
    log = out / f"{name}.log"
    t0 = time.monotonic()
    rec: dict = {"name": name, "log": log.name, "timed_out": False, "exit_status": None}
    with open(log, "w", encoding="utf-8") as f:
        for argv in argvs:
            f.write("$ " + " ".join(argv) + "\n")
            f.flush()
            left = max(1.0, timeout - (time.monotonic() - t0))
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            how = wait(p, log, left, exit_grace, poll)
            if how == "exited":
                rc = p.returncode
                if stop_group(p):
                    rec["left_processes"] = True
                    f.write("\nrvport: the program exited and left processes running: stopped\n")
            else:
                stop_group(p)
                p.wait()
                rc = None
                if how == "timed out":
                    rec["timed_out"] = True
                    f.write(f"\nrvport: stopped after {timeout:g} s (the step's timeout)\n")
                else:
                    rec["hung_after_result"] = True
                    f.write(
                        f"\nrvport: stopped: it printed its result and did not exit in {exit_grace:g} s\n"
                    )
            rec["exit_status"] = rc
            if rc != 0:
                break
    rec["seconds"] = round(time.monotonic() - t0, 1)
    rec["status"] = "passed" if rec["exit_status"] == 0 else "failed"
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


def step_commands(wh: Path) -> dict[str, list[list[str]]]:
    """The programs of each step."""
    venv_py = f"{VENV}/bin/python"
    me = str(Path(__file__).resolve())
    env_file = wh / ENV_FILE if (wh / ENV_FILE).is_file() else None
    gen = [venv_py, me, "generate", "--model", "/tmp/rvport-tiny"]
    srv = [venv_py, me, "serve", "--model", "/tmp/rvport-tiny-serve", "--port", str(PORT)]
    return {
        "install": [
            [sys.executable, "-m", "venv", "--system-site-packages", VENV],
            [venv_py, "-m", *pip_install(wh)],
        ],
        "pip-check": [[venv_py, "-m", "pip", "check"]],
        "import": [[venv_py, "-c", IMPORT]],
        "generate": [sourced(env_file, gen)],
        "generate-eager": [[*gen, "--eager"]],
        "serve": [sourced(env_file, srv)],
        "serve-eager": [[*srv, "--eager"]],
    }


def step_env(name: str, out: Path) -> dict[str, str]:
    """What a step adds to the environment: vLLM's settings (RUN_ENV) for every step but install, and for the
    default-configuration steps a cache directory in OUT, so the shared objects inductor compiled can be
    verified on the host after the run."""
    if name == "install":
        return {}
    if name in ("generate", "serve"):
        return {**RUN_ENV, "XDG_CACHE_HOME": str(out / CACHE)}
    return dict(RUN_ENV)


def run(args: argparse.Namespace, commands: dict[str, list[list[str]]] | None = None) -> int:
    """Every step in order (the module's docstring); `commands`: the programs of each step (step_commands)."""
    out, wh = Path(args.out), Path(args.wheelhouse)
    ours = wheelhouse_names((wh / "requirements.txt").read_text(encoding="utf-8"))
    commands = commands or step_commands(wh)
    steps: list[dict] = []
    done: dict[str, str] = {}
    while (step := next_step(done, args.skip_serve)) is not None:
        name, what = step
        if what != "run":
            rec = {"name": name, "status": what}
        else:
            print(f"{name}: running", flush=True)
            grace = EXIT_GRACE if name == "import" or name in RUNS else None
            added = step_env(name, out)
            env = {**os.environ, **added} if added else None
            rec = run_step(out, name, commands[name], args.timeout, env, grace)
            text = tail_text(out / rec["log"])
            if name == "pip-check":
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


# --------------------------------------------------------------------------------- in the venv, with vLLM
def save_tiny(model: Path) -> None:
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps({**TINY, "model_type": "llama"}))


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
    server = subprocess.Popen(argv)  # in this step's process group: a timeout stops it too
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
        server.send_signal(signal.SIGINT)  # as Ctrl-C: vLLM's server shuts its engine down
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="every step, in order")
    r.add_argument("--wheelhouse", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--timeout", type=float, required=True, help="seconds per step")
    r.add_argument("--skip-serve", action="store_true")
    g = sub.add_parser("generate", help="(in the venv) the generate step")
    g.add_argument("--model", required=True)
    g.add_argument("--eager", action="store_true", help="enforce_eager=True (no torch.compile)")
    s = sub.add_parser("serve", help="(in the venv) the serve step")
    s.add_argument("--model", required=True)
    s.add_argument("--port", type=int, default=PORT)
    s.add_argument("--eager", action="store_true", help="--enforce-eager (no torch.compile)")
    args = ap.parse_args(argv)
    return {"run": run, "generate": generate, "serve": serve}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
