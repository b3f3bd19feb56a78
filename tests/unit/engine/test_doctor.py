"""rvport doctor's pure checks (no docker)."""

from __future__ import annotations

from rvport.engine.doctor import accelerated_check
from rvport.host import HostFacts


def host(arch: str) -> HostFacts:
    return HostFacts(arch=arch, cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=arch != "riscv64")


def test_x86_64_and_aarch64_hosts_accelerate_and_say_whether_the_prefix_exists():
    c = accelerated_check(host("x86_64"), [])
    assert c.ok and not c.blocking and "C, C++ and Rust compilers run natively" in c.detail
    assert "the first accelerated build makes it" in c.detail
    c = accelerated_check(host("aarch64"), ["rvport/xtc:debian-trixie-xtc-arm64-0123456789ab"])
    assert c.ok and "rvport/xtc:debian-trixie-xtc-arm64-0123456789ab" in c.detail


def test_other_hosts_fall_back_to_plain_emulation_without_blocking():
    c = accelerated_check(host("ppc64le"), [])
    assert not c.ok and not c.blocking and "plain emulation" in c.detail and "x86_64 or aarch64" in c.remedy
    assert accelerated_check(host("riscv64"), []).ok


# ------------------------------------------------------------------ the programs the host runs for recipes
def _finds(**versions):
    from rvport.host import ToolFound

    def find(tool):
        v = versions.get(tool)
        return ToolFound(path=None) if v is None else ToolFound(path=f"/usr/bin/{tool}", version=v)

    return find


def test_host_tool_rows_name_the_recipe_the_version_found_and_the_version_needed():
    from rvport.catalogue.recipes import load_catalogue
    from rvport.engine.doctor import can_build, host_tool_checks, short_recipes

    cat = load_catalogue()
    recipes = [cat.resolve(n) for n in ("semantic-router", "glide-ffi", "msgspec")]
    go, cargo = host_tool_checks(recipes, blocking=False, find=_finds(go="1.19.8", cargo="1.90.0"))
    assert go.name == "host go" and not go.ok and not go.blocking
    assert "semantic-router==0.3.0 needs go >= 1.24.1" in go.detail and "go 1.19.8 (/usr/bin/go)" in go.detail
    assert "Go >= 1.24.1" in go.remedy and "golang-1.24-go" in go.remedy
    assert go.short_for == ("semantic-router==0.3.0",) and short_recipes([go, cargo]) == [
        "semantic-router==0.3.0"
    ]
    assert cargo.ok and "cargo 1.90.0 at /usr/bin/cargo, for glide-ffi==2.3.0" in cargo.detail
    assert can_build([go, cargo])  # not blocking: with no recipe named, a build of others can run
    (named,) = host_tool_checks(recipes[:1], blocking=True, find=_finds(go="1.19.8"))
    assert not can_build([named])
    (enough,) = host_tool_checks(recipes[:1], blocking=True, find=_finds(go="1.24.4"))
    assert enough.ok and "semantic-router==0.3.0 (>= 1.24.1)" in enough.detail
    (missing,) = host_tool_checks(recipes[1:2], blocking=True, find=_finds())
    assert (
        not missing.ok
        and "the host has no cargo" in missing.detail
        and "apt-get install cargo" in missing.remedy
    )
    assert (
        host_tool_checks(recipes[2:], blocking=True, find=_finds()) == []
    )  # msgspec runs nothing on the host


def test_an_unreachable_docker_host_is_what_the_remedy_names():
    from rvport.engine.doctor import engine_remedy

    gone = engine_remedy("unix:///run/missing.sock", exists=lambda _p: False)
    assert "DOCKER_HOST=unix:///run/missing.sock names /run/missing.sock, where there is no socket" in gone
    assert "unset DOCKER_HOST" in gone and "binfmt" not in gone
    there = engine_remedy("unix:///run/docker.sock", exists=lambda _p: True)
    assert there.startswith("nothing answers at DOCKER_HOST=unix:///run/docker.sock")
    assert engine_remedy("tcp://10.0.0.1:2375").startswith(
        "nothing answers at DOCKER_HOST=tcp://10.0.0.1:2375"
    )
    assert "apt-get install docker.io" in engine_remedy(None)


def test_with_the_engine_unreachable_the_builder_row_says_so_and_not_binfmt(monkeypatch, tmp_path):
    from rvport import proc
    from rvport.engine import buildx, doctor
    from rvport.errors import HostNotReady

    def unreachable():
        raise HostNotReady("the Docker engine is not reachable: No such file or directory")

    def no_inspect(_name):
        raise AssertionError("no builder is inspected without an engine")

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(buildx, "engine_info", unreachable)
    monkeypatch.setattr(buildx, "buildx_version", lambda: "github.com/docker/buildx 0.13.1")
    monkeypatch.setattr(buildx, "builder_info", no_inspect)
    monkeypatch.setattr(buildx, "image_tags", lambda _repo: [])
    monkeypatch.setattr(proc, "which", lambda name, env=None: f"/usr/bin/{name}")
    checks = {c.name: c for c in doctor.run_checks(host("riscv64"), workdir=tmp_path)}
    engine, builder = checks["docker engine"], checks["builder"]
    assert not engine.ok and not builder.ok
    assert builder.detail == "not inspected: the Docker engine cannot be reached at DOCKER_HOST=" + (
        "unix:///nonexistent/docker.sock"
    )
    for c in (engine, builder):
        assert "/nonexistent/docker.sock, where there is no socket" in c.remedy and "binfmt" not in c.remedy


def test_doctor_exits_6_for_a_named_recipe_the_host_falls_short_for_and_0_with_none_named(monkeypatch):
    from typer.testing import CliRunner

    from rvport.cli.app import app
    from rvport.engine import doctor
    from rvport.errors import HostNotReady

    monkeypatch.setattr(doctor, "run_checks", lambda _host, builder=None: [])
    monkeypatch.setattr(doctor, "find_tool", _finds(go="1.19.8", cargo="1.90.0", gpgv="2.2.40"))
    env = {"COLUMNS": "300"}
    named = CliRunner().invoke(app, ["doctor", "semantic-router"], env=env)
    assert isinstance(named.exception, HostNotReady) and named.exception.exit_code == 6, named.output
    assert "cannot prepare the sources of semantic-router==0.3.0" in named.exception.message
    assert "semantic-router==0.3.0 needs go >= 1.24.1" in named.stdout
    assert "cargo 1.90.0 at /usr/bin/cargo, for glide-ffi==2.3.0, router-ml-binding==0.3.0" in named.stdout
    every = CliRunner().invoke(app, ["doctor"], env=env)
    assert every.exit_code == 0, every.output
    assert "ready: a riscv64 build can run here, but not of semantic-router==0.3.0" in every.stdout
    fine = CliRunner().invoke(app, ["doctor", "msgspec"], env=env)
    assert fine.exit_code == 0 and "ready: a riscv64 build can run here" in fine.stdout
    assert "but not of" not in fine.stdout


def test_plan_warns_of_a_host_tool_a_planned_recipe_falls_short_of(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from rvport.cli.app import app
    from rvport.engine import doctor

    monkeypatch.setattr(doctor, "find_tool", _finds(go="1.19.8", cargo="1.90.0"))
    res = CliRunner().invoke(
        app, ["plan", "semantic-router", "-o", str(tmp_path / "out"), "--offline"], env={"COLUMNS": "400"}
    )
    assert res.exit_code == 0, res.output
    assert "warning: semantic-router==0.3.0 needs go >= 1.24.1 on the host" in res.stdout
    assert "fix: install Go >= 1.24.1" in res.stdout and "cargo" not in res.stdout.split("warning:", 1)[1]
    monkeypatch.setattr(doctor, "find_tool", _finds(go="1.24.4", cargo="1.90.0"))
    res = CliRunner().invoke(
        app, ["plan", "semantic-router", "-o", str(tmp_path / "out"), "--offline"], env={"COLUMNS": "400"}
    )
    assert res.exit_code == 0 and "warning:" not in res.stdout, res.output
