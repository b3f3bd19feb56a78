"""`rvport serve-check`: a recipe's wheelhouse installed offline in a clean riscv64 container, then the
recipe's program generates and serves (vLLM: a tiny Llama with dummy weights; docs/closure.md, "The serving
check"). The record is OUTPUT/result.json (resources/schemas/serve-check.schema.json), written whole.

    check_inputs    before anything runs: the recipe has a serving check, the wheelhouse is one
                    (closure/wheelhouse.read: its manifest, its files, every wheel's sha256), made for this
                    recipe and this --profile, OUTPUT is new or a serving check's; the tests step made ready
                    (closure/servetests.py: the recipe's serve_tests: for the profile, its source tree, every
                    listed file in it, the test wheels fetched and checked), unless --skip-tests; the engine
                    and riscv64 emulation are there
    run             the image (closure/serveimage.py: the base plus the wheelhouse's Debian packages at their
                    locked versions, made once), and on it the environment image (closure/serveenv.py: the
                    venv with every wheel but the recipe's installed, made once per set of those wheels;
                    not with --fresh-install), then one container of it, with no network, the profile's
                    QEMU CPU, /dev/shm of SHM_SIZE, the wheelhouse read-only, as the calling user, running
                    resources/scripts/serve-check.py (the steps, each with a hard timeout, guided's once per
                    structured-output backend, each logged to OUTPUT/logs/STEP.log), the host's load average
                    sampled meanwhile; then `rvport verify` of the shared objects inductor compiled in the
                    default-configuration steps and the tests (OUTPUT/logs/cache), for the profile; the
                    tests' records read back (closure/servetests.py); then result.json
    failure         the error (exit 10) naming the steps that failed, for a record that did not pass

The container is removed whatever happens (a failure, a timeout, Ctrl-C). A step the container did not reach
is recorded as not run.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rvport import __version__, host, manifest, outdir, proc, resources
from rvport.catalogue.profiles import Profile, get_profile
from rvport.closure import inductor, serveenv, serveimage, servetests
from rvport.closure import wheelhouse as wheelhouses
from rvport.engine import buildx, containers, images
from rvport.errors import CheckFailed, HostNotReady, RvportError, UsageError
from rvport.fileio import read_json
from rvport.safetext import printable
from rvport.sources import debarchive
from rvport.sources.fetch import FetchOptions
from rvport.target import PLATFORM as RISCV64

RESULT = "result.json"
KIND = "rvport-serve-check"
SCHEMA = 1
LOGS = "logs"
SCRIPT = "serve-check.py"
STEPS = (
    "install", "pip-check", "import", "generate", "generate-eager", "serve", "serve-eager", "guided", "tests",
)  # fmt: skip
SERVES = frozenset({"serve", "serve-eager", "guided"})  # the steps --skip-serve leaves out
GENERATES = frozenset({"generate", "generate-eager"})  # the steps --skip-generate leaves out
GUIDED_BACKENDS = ("xgrammar", "guidance", "outlines")  # guided's, each within a step's timeout of its own
GUIDED_KINDS = ("json", "regex", "choice")  # the requests each backend's server answers
TEXT_CHARS = 2000  # a guided answer's text kept in result.json
ERROR_CHARS = 1000  # a guided error message (vLLM's) kept in result.json
CACHE = "cache"  # OUTPUT/logs/cache: the default-configuration steps' XDG_CACHE_HOME (inductor's objects)
SERVING = frozenset({"vllm"})  # the recipes the inside script knows how to run
SHM_SIZE = "1g"  # vLLM's engine asks 160 MiB of /dev/shm for its message queue; Docker gives 64 MiB
EXCERPT_LINES = 20  # the last lines of a step's log kept in result.json
LINE_CHARS = 400  # a longer line is cut
STEPS_LIMIT = 4 * 1024 * 1024  # steps.json, as the container wrote it
CONTAINER_SLACK = 600  # seconds the whole container may take beyond its steps' timeouts


@dataclass(frozen=True, kw_only=True)
class Options:
    recipe: str
    version: str | None  # None: the wheelhouse's
    wheelhouse: Path
    output: Path
    profile: str | None  # None: the wheelhouse's
    fetch: FetchOptions
    allow_expired: tuple[str, ...] = ()
    skip_serve: bool = False
    skip_generate: bool = False
    skip_tests: bool = False
    source_tree: Path | None = None  # the tests step's tree instead of the recipe's pinned sources
    recipes_dir: tuple[Path, ...] = ()  # the user's recipe directories (the recipe's serve_tests:)
    timeout: float = 1800.0  # seconds per step
    debian_mirror: str | None = None  # None: the host's
    fresh_install: bool = False  # every wheel installed in the check's container, no environment image


# --------------------------------------------------------------------------------------------- preflight
def check_output(out: Path) -> None:
    """OUTPUT may be missing, empty, or a serving check's output rvport wrote (rvport.outdir's rule), so a
    build's output directory is never mixed with a check's."""
    outdir.check(out, outdir.Kind.SERVE_CHECK)


@dataclass(frozen=True, kw_only=True)
class Checked:
    wheelhouse: wheelhouses.Wheelhouse
    profile: Profile
    tests: servetests.Ready | None = None  # None: no tests step (--skip-tests, or none for the profile)


def check_inputs(opts: Options) -> Checked:
    """Everything that can be checked before the engine is used (see the module's docstring)."""
    if opts.recipe not in SERVING:
        raise UsageError(
            f"{opts.recipe} has no serving check",
            hint=f"rvport serve-check knows {', '.join(sorted(SERVING))}",
        )
    check_output(opts.output)
    wh = wheelhouses.read(opts.wheelhouse)
    if wh.recipe != opts.recipe:
        raise UsageError(
            f"the wheelhouse {opts.wheelhouse} is {wh.recipe}'s, not {opts.recipe}'s",
            hint=f"make {opts.recipe}'s with `rvport wheelhouse {opts.recipe} ...`",
        )
    if opts.version is not None and opts.version != wh.version:
        raise UsageError(
            f"the wheelhouse {opts.wheelhouse} is {wh.recipe} {wh.version}'s, not {opts.version}'s",
            hint=f"name {wh.recipe} without a version, or make the wheelhouse of {opts.version}",
        )
    if opts.profile is not None and wh.profile != opts.profile:
        raise UsageError(
            f"the wheelhouse {opts.wheelhouse} was made for profile {wh.profile}, not {opts.profile}: "
            "its wheels were verified for that profile, and the check runs them on --profile's CPU",
            hint=f"pass --profile {wh.profile}, or make the wheelhouse again with --profile {opts.profile}",
        )
    profile = get_profile(wh.profile)
    return Checked(wheelhouse=wh, profile=profile, tests=tests_ready(opts, wh, profile))


def tests_ready(opts: Options, wh: wheelhouses.Wheelhouse, profile: Profile) -> servetests.Ready | None:
    """The tests step made ready (closure/servetests.prepare) for the wheelhouse's recipe and version, from
    the catalogue with the user's recipe directories; None with --skip-tests."""
    if opts.skip_tests:
        if opts.source_tree is not None:
            raise UsageError(
                "--source-tree gives the tests step its tests, and --skip-tests leaves the step out",
                hint="drop one of them",
            )
        return None
    from rvport.catalogue.recipes import load_catalogue

    recipe = load_catalogue(list(opts.recipes_dir)).resolve(f"{wh.recipe}=={wh.version}")
    have = servetests.environment_names(wh.doc["wheels"], wh.doc["debian"])
    return servetests.prepare(recipe, profile, opts.fetch, have=have, source_tree=opts.source_tree)


def check_engine() -> None:
    """The docker CLI and engine, and a way to run riscv64 code (this host, or a binfmt handler)."""
    if proc.which("docker") is None:
        raise HostNotReady(
            "not found: docker (a serving check runs a container)",
            hint="install Docker Engine (docs/getting-started.md); `rvport doctor` shows what is missing",
        )
    buildx.engine_info()  # HostNotReady when the engine does not answer
    facts = host.gather()
    if not facts.is_riscv64 and not facts.binfmt_riscv64:
        raise HostNotReady(
            "this host cannot run riscv64 containers: no enabled qemu-riscv64 binfmt_misc handler",
            hint="`rvport doctor` names the fix; scripts/setup-host applies it on Debian",
        )


# -------------------------------------------------------------------------------------------------- run
def container_args(
    opts: Options, logs: Path, tests: servetests.Ready | None = None, scratch: Path | None = None
) -> list[str]:
    """What `docker create` is given besides name, label, platform, network and environment; with the
    tests step, its files read-only (servetests.mounts; the plan written in `scratch`)."""
    script = resources.builtin("scripts", SCRIPT)
    extra = servetests.mounts(tests, scratch) if tests is not None and scratch is not None else []
    return [
        *extra,
        "--shm-size",
        SHM_SIZE,
        "--user",
        f"{os.getuid()}:{os.getgid()}",
        "-v",
        f"{opts.wheelhouse.absolute()}:/wheelhouse:ro",
        "-v",
        f"{logs.absolute()}:/out",
        "-v",
        f"{script}:/rvport/{SCRIPT}:ro",
    ]


def container_command(opts: Options, tests: bool = False, prepared: bool = False) -> list[str]:
    cmd = ["python3", f"/rvport/{SCRIPT}", "run", "--wheelhouse", "/wheelhouse", "--out", "/out"]
    cmd += ["--timeout", f"{opts.timeout:g}"]
    cmd += ["--prepared-venv"] if prepared else []
    cmd += ["--tests", servetests.PLAN] if tests else []
    cmd += ["--skip-generate"] if opts.skip_generate else []
    return cmd + (["--skip-serve"] if opts.skip_serve else [])


def run(opts: Options, *, log: Callable[[str], None] = lambda _m: None) -> dict:
    """The check (the module's docstring); its record, also written to OUTPUT/result.json."""
    checked = check_inputs(opts)
    wh, profile, tests = checked.wheelhouse, checked.profile, checked.tests
    check_engine()
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    outdir.claim(opts.output, outdir.Kind.SERVE_CHECK)
    logs = opts.output / LOGS
    logs.mkdir(parents=True, exist_ok=True)
    olds = [opts.output / RESULT, logs / "steps.json", logs / "environment.log"]
    for old in [*olds, *(logs / f"{s}.log" for s in STEPS)]:
        old.unlink(missing_ok=True)  # a record of an earlier check is not left beside this one's logs
    drop_cache(logs / servetests.EXPORT)  # nor its tests' exports
    drop_cache(logs / CACHE)  # nor its compile cache: this check compiles afresh, and verifies what it made
    pins = [debarchive.DebPin(name=p, version=v, sha256=s) for p, v, s in wh.debian()]
    bases = images.Bases(
        cache_dir=opts.fetch.cache.root,
        log_dir=logs,
        allow_expired=opts.allow_expired,
        ca_bundle=opts.fetch.ca_bundle,
    )
    log(f"image: {wh.base} with {len(pins)} Debian packages at their locked versions")
    image = serveimage.ensure(
        opts.recipe,
        pins,
        base_spec=wh.base,
        suite=wh.suite,
        bases=bases,
        fetch=opts.fetch,
        log_path=logs / "image.log",
        allow_expired=opts.allow_expired,
        on_line=lambda line: log("image: " + printable(line, lines=False)),
        debian_mirror=opts.debian_mirror,
    )
    log(f"image: {image.tag} ({'made' if image.made else 'found'} in {image.seconds:.0f} s)")
    env = environment(opts, wh, image, logs, log)
    image_id = env.image_id if env.ready and env.image_id else image.image_id
    container = run_container(opts, profile, image_id, logs, log, tests, prepared=env.ready)
    inside = read_steps(logs / "steps.json")
    compiled = inductor_record(wh, profile, logs / CACHE, inside)
    doc = record(
        opts,
        wh,
        profile,
        image={**image.to_json(), "environment": env.to_json()},
        container=container,
        inside=inside,
        started=started,
        seconds=time.monotonic() - t0,
        compiled=compiled,
        tests=tests,
    )
    manifest.write(opts.output / RESULT, doc)
    return doc


def environment(
    opts: Options,
    wh: wheelhouses.Wheelhouse,
    image: serveimage.ServeImage,
    logs: Path,
    log: Callable[[str], None],
) -> serveenv.ServeEnv:
    """The environment image on the check's image (closure/serveenv.py), or off with --fresh-install."""
    if opts.fresh_install:
        log("environment: --fresh-install: every wheel is installed in the check's container")
        return serveenv.ServeEnv(status="off", reason="--fresh-install")
    env = serveenv.ensure(
        wh,
        image.tag,
        image.image_id,
        tmp_root=opts.fetch.cache.tmpdir(),
        log_path=logs / "environment.log",
        on_line=lambda line: log("environment: " + printable(line, lines=False)),
    )
    if env.ready:
        log(
            f"environment: {env.tag} ({env.status} in {env.seconds:.0f} s): {env.wheels} wheels installed, "
            f"the install step installs {', '.join(env.left) or 'nothing more'}"
        )
    else:
        log(f"environment: {env.status}: {env.reason}; every wheel is installed in the check's container")
    return env


def drop_cache(path: Path) -> None:
    """Remove an earlier check's compile cache (a directory this command's container wrote)."""
    import shutil

    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def inductor_record(wh: wheelhouses.Wheelhouse, profile: Profile, cache: Path, inside: dict) -> dict | None:
    """What the default configuration compiled, verified for the profile (inductor.verify_cache), with the
    settings the wheelhouse ships; None when it ships none (a lock without system packages)."""
    settings = wh.inductor()
    if settings is None:
        return None
    ran = {s.get("name"): s.get("status") for s in inside.get("steps", []) if isinstance(s, dict)}
    doc = {
        "settings": settings.to_json(),
        "cache": f"{LOGS}/{CACHE}",
        **inductor.verify_cache(cache, profile),
    }
    # judged when a default-configuration step ran: it must have left objects, each fitting the profile; and
    # when the tests step left some (its torch.compile cases), as a tests-only check (--skip-generate
    # --skip-serve) has no other
    tests_compiled = ran.get("tests") in ("passed", "failed") and doc["objects"] > 0
    doc["judged"] = tests_compiled or any(ran.get(n) in ("passed", "failed") for n in ("generate", "serve"))
    return doc


def run_container(
    opts: Options,
    profile: Profile,
    image_id: str,
    logs: Path,
    log: Callable[[str], None],
    tests: servetests.Ready | None = None,
    prepared: bool = False,
) -> dict:
    """The steps in one container (removed after, whatever happens); what the container did. The tests
    step's plan and plugin are written in a scratch directory first, mounted read-only. `prepared`: the
    image is an environment image, its venv made."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rvport-serve-tests-") as scratch:
        if tests is not None:
            servetests.write_plan(tests, Path(scratch))
        return _run_container(opts, profile, image_id, logs, log, tests, Path(scratch), prepared)


def _run_container(
    opts: Options,
    profile: Profile,
    image_id: str,
    logs: Path,
    log: Callable[[str], None],
    tests: servetests.Ready | None,
    scratch: Path,
    prepared: bool = False,
) -> dict:
    name = f"rvport-serve-check-{opts.recipe}-{uuid.uuid4().hex[:8]}"
    env = {"QEMU_CPU": profile.qemu_cpu, "HOME": "/tmp"}
    # every step's timeout, and each test file's own
    total = opts.timeout * step_timeouts() + (tests.seconds() if tests else 0) + CONTAINER_SLACK
    out: dict = {
        "name": name,
        "network": "none",
        "shm_size": SHM_SIZE,
        "env": env,
        "timeout_per_step": opts.timeout,
        "log": f"{LOGS}/container.log",
        "timed_out": False,
    }
    (logs / "container.log").unlink(missing_ok=True)
    t0 = time.monotonic()
    try:
        with proc.uninterruptible():
            containers.create(
                image_id,
                container_command(opts, tests is not None, prepared),
                name,
                network="none",
                platform=RISCV64,
                label=name,
                env=env,
                workdir="/tmp",
                args=container_args(opts, logs, tests, scratch),
            )
        log(f"container {name}: the steps, each within {opts.timeout:g} s")
        with host.LoadAverage() as load:
            try:
                out["exit_status"] = containers.start_attached(
                    name,
                    on_line=lambda line: log(printable(line, lines=False)),
                    log_path=logs / "container.log",
                    timeout=total,
                )
            except proc.TimedOut:
                out["exit_status"] = None
                out["timed_out"] = True
        out["load_average"] = load.summary()
    finally:
        with proc.uninterruptible():
            containers.remove(name)
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


def step_timeouts() -> int:
    """How many step timeouts the steps may take in all: one each, guided one a backend."""
    return len(STEPS) - 1 + len(GUIDED_BACKENDS)


def read_steps(path: Path) -> dict:
    """What the container wrote of its steps (steps.json), {} when it wrote nothing or nothing readable."""
    if not path.is_file():
        return {}
    try:
        doc = read_json(path, what="the container's steps.json", limit=STEPS_LIMIT)
    except RvportError:
        return {}
    return doc if isinstance(doc, dict) and isinstance(doc.get("steps"), list) else {}


# ------------------------------------------------------------------------------------------- the record
def excerpt(path: Path, lines: int = EXCERPT_LINES, limit: int = 64 * 1024) -> list[str]:
    """The last `lines` lines of a log (read from its last `limit` bytes), each cut to LINE_CHARS."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            text = f.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return []
    kept = [printable(ln, lines=False) for ln in text.splitlines() if ln.strip()][-lines:]
    return [ln if len(ln) <= LINE_CHARS else ln[:LINE_CHARS] + " [...]" for ln in kept]


STEP_FIELDS = (
    "status",
    "seconds",
    "exit_status",
    "timed_out",
    "left_processes",
    "hung_after_result",
    "result",
    "lines",
    "judged",
    "not_judged",
)


def steps_record(
    inside: dict,
    logs: Path,
    skip_serve: bool,
    tests: servetests.Ready | None = None,
    skip_tests: bool = False,
    skip_generate: bool = False,
) -> list[dict]:
    """Every step in order, as the container recorded it, with its log's path and last lines; a step it did
    not record is "not-run" (or "skipped": both generate steps with --skip-generate, the serve steps and
    guided with --skip-serve, tests with --skip-tests or none planned). Guided's result is read back with
    bounds (guided_step); the tests step's records too (servetests.read), and they judge it; it says what it
    ran from, or why it was skipped."""
    by_name = {s.get("name"): s for s in inside.get("steps", []) if isinstance(s, dict)}
    out = []
    for name in STEPS:
        got = by_name.get(name)
        if got is None:
            left_out = (name in GENERATES and skip_generate) or (name in SERVES and skip_serve)
            skipped = left_out or (name == "tests" and tests is None)
            out.append({"name": name, "status": "skipped" if skipped else "not-run"})
            if name == "tests":
                out[-1].update(_tests_source(tests, skip_tests))
            continue
        step = {"name": name, **{k: got[k] for k in STEP_FIELDS if k in got}}
        if step.get("status") not in ("passed", "failed", "skipped", "not-run"):
            step["status"] = "failed"
        if name == "guided" and step["status"] in ("passed", "failed"):
            step.update(guided_step(got))
            backends = step["result"]["backends"].values()
            if step["status"] == "passed" and (step["failures"] or not all(b["passed"] for b in backends)):
                step["status"] = "failed"  # a backend that did not pass fails the step, whatever it said
        if name == "tests" and tests is not None and step["status"] in ("passed", "failed"):
            step["tests"] = servetests.read(tests, logs)
            if step["tests"]["status"] != "passed":
                step["status"] = "failed"
        if name == "tests":
            step.update(_tests_source(tests, skip_tests))
        if isinstance(got.get("log"), str):
            step["log"] = f"{LOGS}/{Path(got['log']).name}"
            step["excerpt"] = excerpt(logs / Path(got["log"]).name)
        out.append(step)
    return out


def _tests_source(tests: servetests.Ready | None, skip_tests: bool) -> dict:
    """What the tests step ran from, or why it did not run."""
    if tests is not None:
        return {"source": tests.to_json()}
    return {"reason": "--skip-tests" if skip_tests else "the recipe has no serve_tests: for this profile"}


def _text(value: object, limit: int = LINE_CHARS) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= limit else value[:limit] + " [...]"


def _number(value: object) -> float | int | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e9
    return value if ok else None


def _guided_request(got: dict) -> dict:
    out: dict = {"passed": got.get("passed") is True}
    for key, limit in (
        ("text", TEXT_CHARS),
        ("finish_reason", 40),
        ("why", ERROR_CHARS),
        ("error", ERROR_CHARS),
    ):
        if (v := _text(got.get(key), limit)) is not None:
            out[key] = v
    for key in ("tokens", "http_status"):
        if isinstance(n := _number(got.get(key)), int):
            out[key] = n
    if (n := _number(got.get("seconds"))) is not None:
        out["seconds"] = n
    if not out["passed"] and "why" not in out:
        out["why"] = "no verdict"
    return out


def _guided_backend(got: dict) -> dict:
    reqs = got.get("requests") if isinstance(got.get("requests"), dict) else {}
    kept = {k: _guided_request(reqs[k]) for k in GUIDED_KINDS if isinstance(reqs.get(k), dict)}
    out: dict = {"requests": kept}
    if not got:
        out["error"] = "the container reported nothing of this backend"
    for key in ("error", "tokenizer", "mode"):
        if (v := _text(got.get(key), ERROR_CHARS)) is not None:
            out[key] = v
    if (n := _number(got.get("startup_seconds"))) is not None:
        out["startup_seconds"] = n
    server = got.get("server")
    if isinstance(server, list) and all(isinstance(x, str) for x in server):
        out["server"] = [_text(x) for x in server[:64]]
    every = all(out["requests"].get(k, {}).get("passed") for k in GUIDED_KINDS)
    out["passed"] = got.get("passed") is True and "error" not in out and every
    return out


def guided_step(got: dict) -> dict:
    """The guided step's `result` (each backend, in GUIDED_BACKENDS' order), `failures` (lines naming the
    backend and request) and `programs` (how each backend's program ended), as the container wrote them,
    read back with bounds: known fields of known types only, every text cut, a backend it did not report
    failed."""
    raw = got.get("result") if isinstance(got.get("result"), dict) else {}
    src = raw.get("backends") if isinstance(raw.get("backends"), dict) else {}
    backends = {b: _guided_backend(src[b] if isinstance(src.get(b), dict) else {}) for b in GUIDED_BACKENDS}
    said = got.get("failures") if isinstance(got.get("failures"), list) else []
    failures = [printable(x, lines=False)[:ERROR_CHARS] for x in said[:32] if isinstance(x, str)]
    for b, rec in backends.items():
        if not rec["passed"] and not any(f.startswith(b) for f in failures):
            failures.append(
                printable(f"{b}: {rec.get('error') or 'did not pass'}", lines=False)[:ERROR_CHARS]
            )
    programs = []
    for x in (got.get("programs") if isinstance(got.get("programs"), list) else [])[: len(GUIDED_BACKENDS)]:
        if isinstance(x, dict):
            rc = x.get("exit_status")
            programs.append({
                "exit_status": rc if isinstance(rc, int) and not isinstance(rc, bool) else None,
                "timed_out": x.get("timed_out") is True,
                "seconds": _number(x.get("seconds")),
            })  # fmt: skip
    return {"result": {"backends": backends}, "failures": failures, "programs": programs}


def _guided_figures(steps: list[dict]) -> dict:
    """Each backend's server start-up and request seconds (None when it did not answer)."""
    step = next((s for s in steps if s["name"] == "guided"), {})
    backends = (step.get("result") or {}).get("backends") or {}
    out = {}
    for b in GUIDED_BACKENDS:
        got = backends.get(b) or {}
        reqs = got.get("requests") or {}
        out[b] = {
            "startup_seconds": got.get("startup_seconds"),
            **{f"{k}_seconds": (reqs.get(k) or {}).get("seconds") for k in GUIDED_KINDS},
        }
    return out


def _run_figures(gen: dict, srv: dict) -> dict:
    return {
        "load_seconds": gen.get("load_seconds"),
        "ttft_seconds": gen.get("ttft_seconds"),
        "tokens_per_second": gen.get("tokens_per_second"),
        "decode_tokens_per_second": gen.get("decode_tokens_per_second"),
        "serve_startup_seconds": srv.get("startup_seconds"),
        "serve_request_seconds": srv.get("request_seconds"),
        "serve_tokens_per_second": srv.get("tokens_per_second"),
    }


def figures(steps: list[dict]) -> dict:
    """Time to first token and tokens per second (generate), the server's figures (serve), and the times of
    install and import: figures, never targets (under QEMU they are not a board's). The top-level run figures
    are the default configuration's (compiled); `eager`'s are those of the enforce-eager steps; `guided`'s,
    each structured-output backend's server start-up and request seconds (eager too)."""
    by = {s["name"]: s.get("result") or {} for s in steps}
    install = next((s.get("seconds") for s in steps if s["name"] == "install"), None)
    return {
        "install_seconds": install,
        "import_seconds": by.get("import", {}).get("import_seconds"),
        **_run_figures(by.get("generate", {}), by.get("serve", {})),
        "eager": _run_figures(by.get("generate-eager", {}), by.get("serve-eager", {})),
        "guided": _guided_figures(steps),
    }


def record(
    opts: Options,
    wh: wheelhouses.Wheelhouse,
    profile: Profile,
    *,
    image: dict,
    container: dict,
    inside: dict,
    started: dt.datetime,
    seconds: float,
    compiled: dict | None = None,
    tests: servetests.Ready | None = None,
) -> dict:
    """result.json of a serving check (resources/schemas/serve-check.schema.json)."""
    steps = steps_record(
        inside, opts.output / LOGS, opts.skip_serve, tests, opts.skip_tests, skip_generate=opts.skip_generate
    )
    passed = container.get("exit_status") == 0 and all(s["status"] in ("passed", "skipped") for s in steps)
    if compiled is not None and compiled["judged"] and not compiled["passed"]:
        passed = False  # the default configuration's objects are missing or do not fit the profile
    return {
        "schema": SCHEMA,
        "kind": KIND,
        "rvport_version": __version__,
        "recipe": wh.recipe,
        "version": wh.version,
        "profile": profile.name,
        "qemu_cpu": profile.qemu_cpu,
        "passed": passed,
        "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(seconds, 1),
        "wheelhouse": {
            "directory": str(opts.wheelhouse.absolute()),
            "profile": wh.profile,
            "lock_digest": wh.lock_digest,
            "wheels": len(wh.doc["wheels"]),
            "debian_packages": len(wh.doc["debian"]),
        },
        "image": image,
        "container": {k: v for k, v in container.items() if k != "load_average"},
        "load_average": container.get("load_average"),
        "env": inside.get("env") if isinstance(inside.get("env"), dict) else None,
        "steps": steps,
        "inductor": compiled,
        "figures": figures(steps),
    }


def failure(doc: dict, output: Path) -> CheckFailed:
    """The error of a check that did not pass (exit 10): each failed step, why, and its last lines."""
    bad = [s for s in doc["steps"] if s["status"] == "failed"]
    lines = []
    for s in bad:
        why = "timed out" if s.get("timed_out") else f"exit status {s.get('exit_status')}"
        if s.get("hung_after_result"):
            why = "it printed its result and did not exit: stopped"
        if s["name"] == "pip-check" and s.get("judged"):
            why = f"{len(s['judged'])} line(s) about the wheelhouse's distributions"
        if s["name"] == "guided" and s.get("failures"):
            bad_backends = [b for b, r in s["result"]["backends"].items() if not r["passed"]]
            why = f"{', '.join(bad_backends) or 'a backend'} outside the constraint or refused"
            lines.append(f"guided: failed ({why}):")
            lines += ["    " + printable(ln, lines=False) for ln in s["failures"][:12]]
            continue
        if s["name"] == "tests" and s.get("tests"):
            told = servetests.failure_lines(s["tests"])
            lines.append(f"tests: failed ({told[0]}):")
            lines += ["    " + printable(ln, lines=False) for ln in told[1:]]
            continue
        lines.append(f"{s['name']}: failed ({why}); its last lines:")
        shown = s.get("judged") or s.get("excerpt") or ["(it printed nothing)"]
        lines += ["    " + printable(ln, lines=False) for ln in shown[-8:]]
    compiled = doc.get("inductor")
    if compiled and compiled["judged"] and not compiled["passed"]:
        if not compiled["objects"]:
            lines.append(f"inductor: the default configuration left no shared object in {compiled['cache']}")
        for f in compiled["failed"][:8]:
            lines.append(f"inductor: {f['path']} does not fit {doc['profile']}: {'; '.join(f['reasons'])}")
        if compiled["truncated"]:
            lines.append(f"inductor: more than {inductor.MAX_OBJECTS} shared objects: not all verified")
    c = doc["container"]
    if not bad and not (compiled and compiled["judged"] and not compiled["passed"]):
        why = "timed out" if c.get("timed_out") else f"exit status {c.get('exit_status')}"
        lines.append(f"the container ended before its steps did ({why}); see {output / c['log']}")
    not_run = [s["name"] for s in doc["steps"] if s["status"] == "not-run"]
    if not_run:
        lines.append(f"not run: {', '.join(not_run)}")
    head = f"the serving check of {doc['recipe']} {doc['version']} ({doc['profile']}) failed"
    return CheckFailed(
        head,
        detail=lines,
        hint=f"{output / RESULT} has every step; the full logs are in {output / LOGS}",
    )
