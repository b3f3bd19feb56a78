#!/usr/bin/env python3
"""vLLM serves on riscv64: a wheelhouse installed offline in a clean sid riscv64 container under QEMU, then
a tiny Llama with dummy weights generates tokens, and `vllm serve` answers /v1/completions (issue 25, items
3-4).

    python bench/serve_check.py --wheelhouse WH --work WORK --base rvport/base:debian-sid-riscv64-HASH
    python bench/serve_check.py --wheelhouse WH --work WORK --image IMAGE --profile rv64gc --skip-serve

WH is what `rvport wheelhouse vllm --profile P` wrote (its wheels, requirements.txt, debian-packages.txt).
The Debian packages are installed by apt into an image first, since apt needs the archive: with --base, an
image FROM that sid riscv64 base with `apt-get install` of WH/debian-packages.txt (the network is used here
only; the image is tagged rvport-serve:apt-HASH of the base's id and the list, so it is made once); with
--image, an image that already holds them (checked: every package of the list at its version, or the run
stops).

Then one container, `--network none --platform linux/riscv64 --shm-size 1g` (vLLM's engine asks 160 MiB of
/dev/shm for its message queue; Docker gives 64 MiB), QEMU_CPU of the profile, the wheelhouse mounted
read-only, runs this file's `inside` part with the image's python3:

1. install: a venv with --system-site-packages (Debian's packages are seen), then
   `pip install --no-index --find-links WH --require-hashes -r WH/requirements.txt`; `pip check` is recorded;
   when that fails, its log says why and the wheels are installed again with --no-deps (a step of its own,
   so the steps after it can still be measured: the check does not pass);
2. import: `from vllm import LLM`, timed;
3. generate: a LlamaConfig saved to a directory (hidden 64, 2 layers, 4 heads of 32, vocabulary 32000),
   loaded with `LLM(model=DIR, load_format="dummy", skip_tokenizer_init=True, enforce_eager=True,
   max_model_len=128, dtype="float32")`;
   from 8 prompt token ids, one request with max_tokens=1 (its wall time is the time to first token) and one
   with max_tokens=8 (ignore_eos: dummy weights may pick the end token): 8 tokens must come back;
4. serve (unless --skip-serve): `vllm serve` of the same config on 127.0.0.1 with mistral_common's own
   SentencePiece tokenizer (data/tokenizer.model.v1 of the installed package, 32,000 tokens) in mistral
   tokenizer mode; a /v1/completions request with a text prompt must come back with text and 8 tokens.

Each step's log is WORK/serve-STEP.log; WORK/serve.json holds every step's result and wall time, the figures
(time to first token, tokens per second), the profile and QEMU_CPU, the image, and the host's load average
while it ran: QEMU's speed is not the hardware's, and the machine may be shared. Exit status 0 when every
step ran passed, 1 otherwise. Figures under QEMU are figures only, never targets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the tiny model (the issue's): no download, dummy weights. head_dim is set: 64 / 4 heads would be 16, which
# vLLM's CPU attention refuses (its head sizes start at 32: "Unsupported CPU attention configuration:
# head_dim=16", measured)
TINY = {
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
MAX_TOKENS = 8
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
    "import json, time; t = time.monotonic(); from vllm import LLM; "
    "print(json.dumps({'import_seconds': round(time.monotonic() - t, 1)}))"
)
VENV = "/opt/vllm"
PORT = 8000


# ------------------------------------------------------------------------------ inside the container
def _step(out: Path, name: str, argv: list[str], timeout: float, env: dict | None = None) -> dict:
    t0 = time.monotonic()
    log = out / f"serve-{name}.log"
    with open(log, "w") as f:
        try:
            p = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, env=env)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = None
    took = round(time.monotonic() - t0, 1)
    return {"ok": rc == 0, "rc": rc, "timed_out": rc is None, "seconds": took, "log": log.name}


def _last_json(log: Path) -> dict:
    """The last line of a step's log that is a JSON object (what the child printed as its result)."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return {}


def inside(args: argparse.Namespace) -> int:
    out, wh = Path(args.out), Path(args.wheelhouse)
    env = {**os.environ, **RUN_ENV}
    py = f"{VENV}/bin/python"
    doc: dict = {"steps": {}}
    steps = doc["steps"]
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", VENV], check=True)
    pip = [f"{VENV}/bin/pip", "install", "--no-index", "--find-links", str(wh), "--require-hashes", "-r",
           str(wh / "requirements.txt")]  # fmt: skip
    steps["install"] = _step(out, "install", pip, args.timeout)
    if not steps["install"]["ok"]:
        # the documented command failed (its log says why): the wheels again without pip's resolver, recorded
        # as its own step, so that what comes after can still be measured; the check does not pass
        steps["install-no-deps"] = _step(out, "install-no-deps", [*pip, "--no-deps"], args.timeout)
    check = subprocess.run([f"{VENV}/bin/pip", "check"], capture_output=True, text=True)
    steps["install"]["pip_check"] = (check.stdout + check.stderr).strip().splitlines()
    if steps["install"]["ok"] or steps.get("install-no-deps", {}).get("ok"):
        steps["import"] = _step(out, "import", [py, "-c", IMPORT], args.timeout, env)
        steps["import"].update(_last_json(out / "serve-import.log"))
    if steps.get("import", {}).get("ok"):
        me = str(Path(__file__).resolve())
        steps["generate"] = _step(
            out, "generate", [py, me, "generate", "--model", "/tmp/tiny"], args.timeout, env
        )
        got = _last_json(out / "serve-generate.log")
        steps["generate"].update(got)
        steps["generate"]["ok"] = steps["generate"]["ok"] and got.get("tokens") == MAX_TOKENS
        if not args.skip_serve:
            steps["serve"] = _step(
                out, "serve", [py, me, "serve", "--model", "/tmp/tiny-serve"], args.timeout, env
            )
            got = _last_json(out / "serve-serve.log")
            steps["serve"].update(got)
            steps["serve"]["ok"] = (
                steps["serve"]["ok"] and bool(got.get("text")) and got.get("tokens") == MAX_TOKENS
            )
    (out / "inside.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0 if all(s["ok"] for s in steps.values()) else 1


def _save_tiny(model: Path) -> None:
    from transformers import LlamaConfig

    LlamaConfig(**TINY).save_pretrained(model)


def generate(args: argparse.Namespace) -> int:
    model = Path(args.model)
    _save_tiny(model)
    from vllm import LLM, SamplingParams

    t0 = time.monotonic()
    llm = LLM(
        model=str(model),
        load_format="dummy",
        skip_tokenizer_init=True,
        enforce_eager=True,
        max_model_len=128,
        dtype="float32",
    )
    load = time.monotonic() - t0
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
    print(
        json.dumps(
            {
                "load_seconds": round(load, 1),
                "ttft_seconds": round(ttft, 2),
                "generate_seconds": round(whole, 2),
                "tokens": len(ids),
                "token_ids": ids,
                "tokens_per_second": round(len(ids) / whole, 3) if whole else None,
                # the 7 tokens after the first, over the time the 8-token request took beyond a 1-token one
                "decode_tokens_per_second": round((len(ids) - 1) / (whole - ttft), 3)
                if whole > ttft
                else None,
                "model": TINY,
                "dtype": "float32",
            }
        ),
        flush=True,
    )
    return 0


def serve(args: argparse.Namespace) -> int:
    import importlib.util
    import shutil
    import urllib.request

    model = Path(args.model)
    _save_tiny(model)
    spec = importlib.util.find_spec("mistral_common")
    tok = Path(spec.origin).parent / "data" / "tokenizer.model.v1"
    shutil.copyfile(tok, model / "tokenizer.model.v1")
    argv = [
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(model),
        "--host", "127.0.0.1", "--port", str(PORT), "--served-model-name", "tiny",
        "--tokenizer-mode", "mistral", "--load-format", "dummy", "--enforce-eager",
        "--max-model-len", "128", "--dtype", "float32",
    ]  # fmt: skip
    t0 = time.monotonic()
    server = subprocess.Popen(argv)
    result: dict = {"tokenizer": "mistral_common/data/tokenizer.model.v1"}
    try:
        base = f"http://127.0.0.1:{PORT}"
        while True:
            if server.poll() is not None:
                print(
                    json.dumps({**result, "error": f"vllm serve exited with {server.returncode}"}), flush=True
                )
                return 1
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=10) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(5)
        result["startup_seconds"] = round(time.monotonic() - t0, 1)
        body = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": MAX_TOKENS,
                "temperature": 0, "ignore_eos": True}  # fmt: skip
        req = urllib.request.Request(
            f"{base}/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        t1 = time.monotonic()
        with urllib.request.urlopen(req, timeout=3600) as r:
            answer = json.loads(r.read())
        took = time.monotonic() - t1
        text = answer["choices"][0]["text"]
        usage = answer.get("usage") or {}
        result.update(
            text=text,
            tokens=usage.get("completion_tokens"),
            prompt_tokens=usage.get("prompt_tokens"),
            request_seconds=round(took, 2),
            tokens_per_second=round(usage.get("completion_tokens", 0) / took, 3) if took else None,
        )
        print(json.dumps(result), flush=True)
        return 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


# ------------------------------------------------------------------------------------------ on the host
def _docker(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *argv], **kw)


def _image_id(image: str) -> str | None:
    p = _docker(["image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def debian_list(wh: Path) -> list[str]:
    """PACKAGE=VERSION lines of the wheelhouse's debian-packages.txt (comments and blanks skipped)."""
    lines = (wh / "debian-packages.txt").read_text().splitlines()
    return [x.strip() for x in lines if x.strip() and not x.startswith("#")]


def apt_image(base: str, wh: Path, work: Path) -> str:
    """An image FROM `base` with the wheelhouse's Debian packages installed by apt, tagged by what makes
    it."""
    base_id = _image_id(base)
    if base_id is None:
        raise SystemExit(
            f"error: no image {base} in the engine (the sid riscv64 base: rvport prepare makes it)"
        )
    pkgs = debian_list(wh)
    tag = "rvport-serve:apt-" + hashlib.sha256((base_id + "\n" + "\n".join(pkgs)).encode()).hexdigest()[:12]
    if _image_id(tag):
        return tag
    ctx = work / "apt-context"
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "debian-packages.txt").write_text("\n".join(pkgs) + "\n")
    (ctx / "Dockerfile").write_text(
        f"FROM {base_id}\n"
        "COPY debian-packages.txt /debian-packages.txt\n"
        "RUN export DEBIAN_FRONTEND=noninteractive && apt-get update"
        " && apt-get install -y --no-install-recommends $(cat /debian-packages.txt)"
        " && rm -rf /var/lib/apt/lists/*\n"
    )
    with open(work / "serve-apt.log", "w") as log:
        rc = _docker(
            ["build", "--platform", "linux/riscv64", "-t", tag, str(ctx)],
            stdout=log,
            stderr=subprocess.STDOUT,
        ).returncode
    if rc:
        raise SystemExit(f"error: apt image from {base} failed (exit {rc}); see {work / 'serve-apt.log'}")
    return tag


def check_debian(image: str, wh: Path) -> list[str]:
    """Each package of the list that the image does not hold at its version (offline: dpkg-query)."""
    pkgs = debian_list(wh)
    names = [p.split("=", 1)[0] for p in pkgs]
    p = _docker(
        ["run", "--rm", "--network", "none", "--platform", "linux/riscv64", image,
         "dpkg-query", "-W", "-f", "${Package}=${Version}\\n", *names],
        capture_output=True, text=True,
    )  # fmt: skip
    have = set(p.stdout.split())
    return [x for x in pkgs if x not in have]


def qemu_cpu(profile: str) -> str:
    sys.path.insert(0, str(ROOT))
    from rvport.catalogue.profiles import get_profile

    return get_profile(profile).qemu_cpu


def host(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT / "bench"))
    from common import LoadAverage, stop_on_signals

    stop_on_signals()
    wh, work = Path(args.wheelhouse).resolve(), Path(args.work).resolve()
    for f in ("requirements.txt", "debian-packages.txt"):
        if not (wh / f).is_file():
            raise SystemExit(f"error: {wh} is not a wheelhouse (no {f}): make one with rvport wheelhouse")
    work.mkdir(parents=True, exist_ok=True)
    cpu = qemu_cpu(args.profile)
    image = args.image
    t0 = time.monotonic()
    if image is None:
        if args.base is None:
            raise SystemExit("error: give --image (with the Debian packages) or --base (a sid riscv64 image)")
        image = apt_image(args.base, wh, work)
    apt_seconds = round(time.monotonic() - t0, 1)
    missing = check_debian(image, wh)
    if missing:
        raise SystemExit(
            f"error: {image} lacks {len(missing)} Debian package(s) of the list: {' '.join(missing)}"
        )
    me = Path(__file__).resolve()
    name = f"rvport-serve-{os.getpid()}"
    argv = [
        "run", "--rm", "--name", name, "--network", "none", "--platform", "linux/riscv64", "--shm-size", "1g",
        "-e", f"QEMU_CPU={cpu}", "-v", f"{wh}:/wh:ro", "-v", f"{work}:/out", "-v", f"{me}:/serve_check.py:ro",
        image, "python3", "/serve_check.py", "inside", "--wheelhouse", "/wh", "--out", "/out",
        "--timeout", str(args.timeout),
    ]  # fmt: skip
    if args.skip_serve:
        argv.append("--skip-serve")
    (work / "inside.json").unlink(missing_ok=True)
    t1 = time.monotonic()
    with LoadAverage() as load:
        try:
            rc = _docker(argv).returncode
        except KeyboardInterrupt:
            _docker(["rm", "-f", name], capture_output=True)
            raise
    inner = (
        json.loads((work / "inside.json").read_text()) if (work / "inside.json").is_file() else {"steps": {}}
    )
    manifest = wh / "wheelhouse.json"
    doc = {
        "schema": 1,
        "profile": args.profile,
        "qemu_cpu": cpu,
        "image": image,
        "image_id": _image_id(image),
        "apt_image_seconds": apt_seconds,
        "network": "none",
        "wheelhouse": str(wh),
        "wheelhouse_lock_digest": json.loads(manifest.read_text()).get("lock", {}).get("digest")
        if manifest.is_file()
        else None,
        "container_seconds": round(time.monotonic() - t1, 1),
        "container_exit": rc,
        "load_average": load.summary(),
        "env": RUN_ENV,
        "steps": inner["steps"],
        "passed": rc == 0 and bool(inner["steps"]) and all(s["ok"] for s in inner["steps"].values()),
    }
    (work / "serve.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 0 if doc["passed"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    ins = sub.add_parser("inside", help="(in the container) install, import, generate, serve")
    ins.add_argument("--wheelhouse", required=True)
    ins.add_argument("--out", required=True)
    ins.add_argument("--timeout", type=float, default=3600)
    ins.add_argument("--skip-serve", action="store_true")
    for n in ("generate", "serve"):
        s = sub.add_parser(n, help=f"(in the container's venv) the {n} step")
        s.add_argument("--model", required=True)
    ap.add_argument("--wheelhouse", help="what rvport wheelhouse wrote")
    ap.add_argument("--work", help="logs and serve.json go here")
    ap.add_argument("--image", help="an image holding the wheelhouse's Debian packages")
    ap.add_argument("--base", help="a sid riscv64 image to install the Debian packages on (uses the network)")
    ap.add_argument("--profile", default="rv64gc", help="its QEMU CPU runs the container (default rv64gc)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per step (default 3600)")
    ap.add_argument("--skip-serve", action="store_true", help="no `vllm serve` step")
    args = ap.parse_args(argv)
    if args.cmd == "inside":
        return inside(args)
    if args.cmd == "generate":
        return generate(args)
    if args.cmd == "serve":
        return serve(args)
    if not args.wheelhouse or not args.work:
        ap.error("--wheelhouse and --work are required")
    return host(args)


if __name__ == "__main__":
    sys.exit(main())
