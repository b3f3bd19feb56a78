"""The runtime check (`runtime: check:`, rvport/engine/check.py) without Docker: the recipe's keys and their
located errors, what the plan says of it (its own key; the image's key does not move), and the check's steps
against a fake engine: both rounds with the right environment, a failure recorded with the service's logs, a
timeout, Ctrl-C, a failure while making: every time nothing is left. Kept results are reused only under the
same key. The real engine: tests/integration/test_runtime_check.py."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rvport import manifest, proc
from rvport.catalogue.model import CHECK_TIMEOUT_S
from rvport.catalogue.profiles import get_profile
from rvport.engine import check, containers
from rvport.engine.runtime import MadeImage
from rvport.engine.stage import Toolchain
from rvport.errors import BuildFailed, ExitCode
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from tests.fixtures.schemas import validate
from tests.unit.engine.test_runtime import load as load_runtime
from tests.unit.engine.test_runtime import located_problems

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
# the runtime the check runs against, in test_runtime_image's recipe
RUNTIME = """\
  user: {name: app, uid: 10001}
  tmpfs: [/tmp]
  files: [{artifact: app, dest: /app/app}]
  entrypoint: [/app/app]"""
CHECK = """\
  check:
    script: |
      nc -z "$SERVICE_HOST" 8080
    env: {EXPECT: hello}"""


def load(tmp_path: Path, check_text: str = CHECK):
    return load_runtime(tmp_path, RUNTIME + ("\n" + check_text if check_text else ""))


def stage(tmp_path: Path, check_text: str = CHECK, profile: str = "rvv256"):
    req = Request(refs=("app",), profile=get_profile(profile), mode=Mode.AUTO, tag="t1")
    return make_plan(load(tmp_path, check_text), req, X86).stage("app")


# ------------------------------------------------------------------------------------------ recipe and plan
def test_a_check_loads_with_its_defaults(tmp_path):
    c = load(tmp_path).resolve("app").runtime.check
    assert c.script == 'nc -z "$SERVICE_HOST" 8080\n' and c.restart and c.rounds == 2
    assert c.timeout == CHECK_TIMEOUT_S == 300 and dict(c.env) == {"EXPECT": "hello"}
    assert load(tmp_path, "").resolve("app").runtime.check is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("    env: {EXPECT: hello}", "    env: {SERVICE_HOST: elsewhere}"),
            "runtime check env sets SERVICE_HOST",
        ),
        (("    env: {EXPECT: hello}", "    env: {RVPORT_CHECK_ROUND: '3'}"), "sets RVPORT_CHECK_ROUND"),
        (("    env: {EXPECT: hello}", "    env: {QEMU_CPU: max}"), "sets QEMU_CPU"),
        (("    env: {EXPECT: hello}", "    timeout: 0"), "runtime.check.timeout: must be >= 1"),
        (("    env: {EXPECT: hello}", "    timeout: 100000"), "runtime.check.timeout: must be <= 86400"),
        (
            ("    env: {EXPECT: hello}", "    timeout: soon"),
            "runtime.check.timeout: must be an integer, got a string",
        ),
        (("    env: {EXPECT: hello}", "    restart: twice"), "runtime.check.restart: must be a boolean"),
        (("    env: {EXPECT: hello}", "    rounds: 3"), "runtime.check.rounds: unknown key 'rounds'"),
        (
            ('    script: |\n      nc -z "$SERVICE_HOST" 8080\n', "    script: ''\n"),
            "must be at least 1 character",
        ),
        (
            ('    script: |\n      nc -z "$SERVICE_HOST" 8080\n', "    script: '  '\n"),
            "runtime check script is empty",
        ),
        (
            ('    script: |\n      nc -z "$SERVICE_HOST" 8080\n', ""),
            "runtime.check: missing required key 'script'",
        ),
    ],
)
def test_a_bad_check_is_a_located_recipe_error(tmp_path, change, message):
    hits = located_problems(lambda: load(tmp_path, CHECK.replace(*change)), message)
    lines = (tmp_path / "recipes" / "app.yaml").read_text().splitlines()
    assert all(p.line > lines.index("  check:") for p in hits)  # at the check's own lines


def test_the_plan_lists_the_check_with_a_key_of_its_own(tmp_path):
    st = stage(tmp_path)
    doc = st.to_json()["runtime"]["check"]
    assert doc == {
        "script": 'nc -z "$SERVICE_HOST" 8080\n',
        "restart": True,
        "timeout": 300,
        "env": {"EXPECT": "hello"},
        "rounds": 2,
        "key": st.runtime.check_key,
    }
    # a new check is a new check key, never a new image: the runtime key covers what the image is made of
    other = stage(tmp_path / "b", CHECK.replace("8080", "9090"))
    bare = stage(tmp_path / "c", "")
    assert other.runtime.check_key != st.runtime.check_key
    assert other.runtime.key == st.runtime.key == bare.runtime.key
    assert bare.runtime.check_key is None and bare.to_json()["runtime"]["check"] is None
    # the plan's schema takes both
    for s in (st, bare):
        plan = make_plan(
            load(tmp_path / "d", CHECK if s is st else ""),
            Request(refs=("app",), profile=get_profile("rvv256"), tag="t1"),
            X86,
        )
        validate(plan.to_json(), manifest.schema("plan"))


def test_no_restart_is_one_round(tmp_path):
    st = stage(tmp_path, CHECK + "\n    restart: false")
    assert st.runtime.spec.check.rounds == 1 and st.to_json()["runtime"]["check"]["rounds"] == 1


# ------------------------------------------------------------------------------------------ a fake engine
class Engine:
    """The functions of rvport.engine.containers, recording what was made and what is still there."""

    def __init__(self, statuses=(0, 0)):
        self.statuses = list(statuses)
        self.calls: list[tuple] = []
        self.live: set[str] = set()
        self.scripts: dict[str, str] = {}

    def create_network(self, name, *, label):
        self.calls.append(("network", name))
        self.live.add(name)

    def remove_network(self, name):
        self.calls.append(("rm network", name))
        self.live.discard(name)

    def run_detached(self, image, name, **kw):
        self.calls.append(("service", image, name, kw))
        self.live.add(name)

    def create(self, image, cmd, name, **kw):
        self.calls.append(("client", image, tuple(cmd), name, kw))
        self.live.add(name)

    def copy_into(self, name, src, dest):
        self.calls.append(("cp", name, dest))
        if dest == "/rvport":
            self.scripts[name] = (Path(src) / "check").read_text()

    def start_attached(self, name, *, on_line, log_path, timeout):
        self.calls.append(("start", name, timeout))
        what = self.statuses.pop(0)
        on_line(f"{name} says hello")
        if what == "timeout":
            raise proc.TimedOut(["docker", "start"], returncode=None, reason=f"timed out after {timeout}s")
        if what == "interrupt":
            raise KeyboardInterrupt
        return what

    def restart(self, name):
        self.calls.append(("restart", name))

    def state(self, name):
        return "exited with status 1"

    def logs(self, name, tail):
        return ["service: listening", "service: bye"]

    def remove(self, name):
        self.calls.append(("rm", name))
        self.live.discard(name)


@pytest.fixture
def engine(monkeypatch):
    def make(statuses=(0, 0)):
        e = Engine(statuses)
        for fn in (
            "create_network",
            "remove_network",
            "run_detached",
            "create",
            "copy_into",
            "start_attached",
            "restart",
            "state",
            "logs",
            "remove",
        ):
            monkeypatch.setattr(containers, fn, getattr(e, fn))
        return e

    return make


def env_of(st, tmp_path: Path):
    steps: list[str] = []
    return SimpleNamespace(
        stage=st,
        tmp_root=tmp_path / "tmp",
        log_path=tmp_path / "app.log",
        step=steps.append,
        line=lambda _: None,
        steps=steps,
        riscv64_env={"QEMU_CPU": "rv64,the-profile"},
    )


MADE = MadeImage(tag="rvport/app:t1", image_id="sha256:" + "1" * 64, key="k" * 64, made=True)
CLIENT = Toolchain(tag="rvport/toolchain:app-smoke-x", image_id="sha256:" + "2" * 64)


def check_schema() -> dict:
    s = manifest.schema("result")
    return s["properties"]["stages"]["items"]["properties"]["runtime"]["properties"]["check"]


def test_both_rounds_pass_with_the_service_and_client_set_up_as_said(engine, tmp_path):
    e = engine()
    st = stage(tmp_path)
    env = env_of(st, tmp_path)
    rec = check.run(env, MADE, CLIENT, tmp_path / "files", "f" * 64)
    assert rec["status"] == "passed" and [r["exit_status"] for r in rec["rounds"]] == [0, 0]
    assert "service_logs" not in rec
    validate(rec, check_schema())
    kinds = [c[0] for c in e.calls]
    assert kinds == [
        "network",
        "service",
        "client",
        "cp",
        "cp",
        "start",
        "restart",
        "client",
        "cp",
        "cp",
        "start",
        "rm",
        "rm",
        "rm",
        "rm network",
    ]
    net = e.calls[0][1]
    assert net.startswith("rvport-check-app-")
    _, image, service, kw = e.calls[1]
    assert image == MADE.image_id and service == f"{net}-service" and kw["network"] == net
    assert kw["alias"] == "service" and kw["platform"] == "linux/riscv64"
    assert kw["args"] == st.runtime.run_args and "--read-only" in kw["args"]
    assert kw["env"] == {"QEMU_CPU": "rv64,the-profile"}
    clients = [c for c in e.calls if c[0] == "client"]
    for n, (_, image, cmd, name, kw) in enumerate(clients, 1):
        assert image == CLIENT.tag and cmd == ("sh", "/rvport/check") and name == f"{net}-client-{n}"
        assert kw["env"] == {
            "EXPECT": "hello",
            "QEMU_CPU": "rv64,the-profile",
            "SERVICE_HOST": "service",
            "RVPORT_CHECK_ROUND": str(n),
        }
        assert kw["network"] == net
        assert e.scripts[name] == st.runtime.spec.check.script
    assert ("cp", f"{net}-client-1", "/artifacts") in e.calls
    assert [c[2] for c in e.calls if c[0] == "start"] == [300, 300]
    assert e.live == set() and not list((tmp_path / "tmp").iterdir())
    assert "runtime check round 2 of 2" in env.steps and "runtime check: restarting the service" in env.steps


def test_a_failing_round_is_recorded_with_the_services_logs_and_nothing_is_left(engine, tmp_path):
    e = engine((3,))
    env = env_of(stage(tmp_path), tmp_path)
    rec = check.run(env, MADE, CLIENT, tmp_path / "files", "f" * 64)
    assert rec["status"] == "failed" and len(rec["rounds"]) == 1 and rec["rounds"][0]["exit_status"] == 3
    assert rec["service"] == "exited with status 1" and rec["service_logs"] == [
        "service: listening",
        "service: bye",
    ]
    assert "restart" not in [c[0] for c in e.calls] and e.live == set()
    validate(rec, check_schema())
    err = check.failure("app==1.0", rec, tmp_path / "app.log")
    assert err.exit_code == ExitCode.BUILD_FAILED
    text = err.render()
    assert "the runtime check failed in round 1 (exit status 3)" in text and "client-1 says hello" in text
    assert "the service (exited with status 1)" in text and "service: bye" in text
    assert err.log_tail[-1] == "service: bye"


def test_a_round_that_times_out_fails_the_check(engine, tmp_path):
    e = engine((0, "timeout"))
    rec = check.run(env_of(stage(tmp_path), tmp_path), MADE, CLIENT, tmp_path / "files", "f" * 64)
    assert rec["status"] == "failed" and rec["rounds"][1] == dict(
        rec["rounds"][1], exit_status=None, timed_out=True
    )
    validate(rec, check_schema())
    rec["rounds"][1]["seconds"] = 300.02
    assert "round 2 (timed out after 300 s)" in check.failure("app==1.0", rec, tmp_path / "x.log").message
    assert e.live == set()


def test_ctrl_c_in_a_round_removes_everything_and_goes_on(engine, tmp_path):
    e = engine(("interrupt",))
    with pytest.raises(KeyboardInterrupt):
        check.run(env_of(stage(tmp_path), tmp_path), MADE, CLIENT, tmp_path / "files", "f" * 64)
    assert e.live == set() and [c[0] for c in e.calls][-3:] == ["rm", "rm", "rm network"]
    assert not list((tmp_path / "tmp").iterdir())


def test_ctrl_c_while_the_service_is_made_waits_for_it_then_removes_it(engine, tmp_path, sigint):
    e = engine()
    made = e.run_detached

    def slow_run_detached(image, name, **kw):
        os.kill(os.getpid(), signal.SIGINT)  # arrives while docker run is making the container
        time.sleep(0.05)
        made(image, name, **kw)  # ... which still completes

    containers.run_detached = slow_run_detached  # monkeypatched by the fixture: restored after the test
    with pytest.raises(KeyboardInterrupt):
        check.run(env_of(stage(tmp_path), tmp_path), MADE, CLIENT, tmp_path / "files", "f" * 64)
    assert [c[0] for c in e.calls] == ["network", "service", "rm", "rm network"] and e.live == set()


def test_a_failure_while_making_still_removes_what_was_made(engine, tmp_path, monkeypatch):
    e = engine()

    def broken(*a, **kw):
        raise BuildFailed("docker run failed")

    monkeypatch.setattr(containers, "run_detached", broken)
    with pytest.raises(BuildFailed):
        check.run(env_of(stage(tmp_path), tmp_path), MADE, CLIENT, tmp_path / "files", "f" * 64)
    assert e.live == set() and ("rm network", e.calls[0][1]) in e.calls


def test_without_restart_one_round_and_no_restart(engine, tmp_path):
    e = engine((0,))
    rec = check.run(
        env_of(stage(tmp_path, CHECK + "\n    restart: false"), tmp_path),
        MADE,
        CLIENT,
        tmp_path / "files",
        "f" * 64,
    )
    assert rec["status"] == "passed" and len(rec["rounds"]) == 1 and "restart" not in [c[0] for c in e.calls]


def test_a_script_with_its_own_interpreter_line_runs_as_it_says(engine, tmp_path):
    e = engine()
    text = CHECK.replace('      nc -z "$SERVICE_HOST" 8080', "      #!/usr/bin/python3\n      print('hi')")
    check.run(env_of(stage(tmp_path, text), tmp_path), MADE, CLIENT, tmp_path / "files", "f" * 64)
    assert {c[2] for c in e.calls if c[0] == "client"} == {("/rvport/check",)}


# ------------------------------------------------------------------------------------------ kept results
def test_a_passing_check_is_kept_and_reused_only_under_the_same_key(engine, tmp_path):
    st = stage(tmp_path)
    kept = tmp_path / "checks"
    e = engine((0, 0))
    first = check.ensure(env_of(st, tmp_path), MADE, CLIENT, tmp_path / "files", kept, fresh=False)
    assert first["status"] == "passed" and not first["reused"] and len(list(kept.iterdir())) == 1
    # nothing changed and the stage was not built: reused, the engine untouched
    e = engine(())
    env = env_of(st, tmp_path)
    again = check.ensure(env, MADE, CLIENT, tmp_path / "files", kept, fresh=False)
    assert again == dict(first, reused=True) and e.calls == []
    assert env.steps == ["runtime check: passed before with these images (reused)"]
    # the stage built now, a new image, a new client image, a new check: it runs
    for made, client, st2, fresh in (
        (MADE, CLIENT, st, True),
        (MadeImage(tag=MADE.tag, image_id="sha256:" + "3" * 64, key=MADE.key, made=False), CLIENT, st, False),
        (MADE, Toolchain(tag=CLIENT.tag, image_id="sha256:" + "4" * 64), st, False),
        (MADE, CLIENT, stage(tmp_path / "b", CHECK.replace("8080", "81")), False),
    ):
        e = engine((0, 0))
        rec = check.ensure(env_of(st2, tmp_path), made, client, tmp_path / "files", kept, fresh=fresh)
        assert not rec["reused"] and [c[0] for c in e.calls].count("start") == 2


def test_a_failing_check_is_never_kept(engine, tmp_path):
    st = stage(tmp_path)
    kept = tmp_path / "checks"
    engine((5,))
    assert (
        check.ensure(env_of(st, tmp_path), MADE, CLIENT, tmp_path / "files", kept, fresh=False)["status"]
        == "failed"
    )
    assert not kept.exists() or not list(kept.iterdir())


def test_a_damaged_kept_result_is_run_again(engine, tmp_path):
    st = stage(tmp_path)
    kept = tmp_path / "checks"
    kept.mkdir()
    key = check.result_key(st.runtime.check_key, MADE.image_id, CLIENT.image_id)
    (kept / f"{key}.json").write_text("{not json")
    e = engine((0, 0))
    rec = check.ensure(env_of(st, tmp_path), MADE, CLIENT, tmp_path / "files", kept, fresh=False)
    assert rec["status"] == "passed" and not rec["reused"] and e.calls
    assert json.loads((kept / f"{key}.json").read_text())["key"] == key


# ------------------------------------------------------------------------------------------ proc
def test_stream_stops_a_program_that_runs_too_long(tmp_path):
    lines: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(proc.TimedOut) as e:
        proc.stream(
            [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"],
            on_line=lines.append,
            timeout=1,
        )
    assert time.monotonic() - t0 < 30 and lines == ["started"] and "timed out after 1s" in e.value.message


def test_uninterruptible_defers_ctrl_c_to_the_end_of_the_block(sigint):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with proc.uninterruptible():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            done.append("the block went on")
    assert done == ["the block went on"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back
    with proc.uninterruptible():  # nothing arrived: nothing raised
        pass


# ------------------------------------------------------------------------------------------ what is shown
def test_the_plan_table_and_junit_show_the_check(tmp_path):
    import io

    from rich.console import Console

    from rvport.cli import ci, views

    plan = make_plan(load(tmp_path), Request(refs=("app",), profile=get_profile("rvv256"), tag="t1"), X86)
    out = io.StringIO()
    Console(file=out, width=200).print(views.plan_table(plan))
    assert "runtime image rvport/app:t1" in out.getvalue()
    assert "runtime check: 2 rounds (a restart between), 300 s each" in out.getvalue()
    rec = {
        "status": "failed",
        "key": "f" * 64,
        "reused": False,
        "service": "running",
        "service_logs": ["up"],
        "rounds": [
            {"round": 1, "exit_status": 0, "seconds": 1.5, "output": ["fine"]},
            {"round": 2, "exit_status": None, "timed_out": True, "seconds": 300.0, "output": ["slow"]},
        ],
    }
    stage_doc = {
        "recipe": "app",
        "version": "1.0",
        "status": "failed",
        "timings": {"check": 301.5},
        "runtime": {
            "tag": "rvport/app:t1",
            "image_id": "sha256:" + "1" * 64,
            "key": "k" * 64,
            "made": False,
            "check": rec,
        },
    }
    xml = ci.junit_xml({"status": "failed", "profile": {"name": "rvv256"}, "stages": [stage_doc]})
    for line in (
        "runtime check: failed",
        "runtime check round 1: exit 0, 1.5 s",
        "check&gt; fine",
        "runtime check round 2: timed out, 300.0 s",
        "service&gt; up",
    ):
        assert line in xml, xml
    summary = ci.summary_markdown({"status": "failed", "stages": [stage_doc]})
    assert "| runtime | check |" in summary and "| 301.5 |" in summary


@pytest.mark.parametrize("script", ["''", "'   '", "|\n    \n"])
def test_an_empty_smoke_script_is_a_located_recipe_error(tmp_path, script):
    """A smoke test that runs nothing proves nothing: refused where it stands, as an empty check script is."""
    root = tmp_path / "recipes"
    root.mkdir()
    text = RECIPE_WITH_SMOKE.format(script=script, digest="a" * 64)
    (root / "app.yaml").write_text(text)
    from rvport.catalogue.recipes import load_catalogue

    hits = located_problems(lambda: load_catalogue(root), "smoke.script is empty")
    assert hits[0].line == text.splitlines().index("smoke:") + 2


RECIPE_WITH_SMOKE = """\
schema: 1
name: app
kind: go-binary
build: [go build -o "$RVPORT_OUT/app" .]
outputs: [{{glob: app, type: executable, isa: baseline}}]
smoke:
  script: {script}
versions:
  - version: "1.0"
    sources:
      - name: src
        url: https://example.org/app-1.0.tar.gz
        sha256: {digest}
"""
