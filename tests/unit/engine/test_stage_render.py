"""The four heavy recipes as planned and rendered: every stage file carries exactly the profile's flags.

The Dockerfiles are rendered by each stage's mode (rvport.engine.modes.of(stage.mode).dockerfile) and by
rvport.engine.modes.cross.render_toolchain, what the runner and bake build with, so what is asserted here is
what a build runs (no docker needed)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from rvport import resources
from rvport.catalogue.kinds import KINDS
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine import modes
from rvport.engine.modes import accelerated, cross
from rvport.engine.stage import Toolchain
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.resources import builtin
from tests.fixtures.cli import rvport_process

ROOT = Path(__file__).resolve().parents[3]
PROFILES = ("rv64gc", "rvv128", "rvv256", "rvv256-bf16")
VLEN = {"rv64gc": "0", "rvv128": "128", "rvv256": "256", "rvv256-bf16": "256"}
X86 = HostFacts(arch="x86_64", cpus=8, mem_bytes=32 * 2**30, binfmt_riscv64=True)
RISCV = HostFacts(arch="riscv64", cpus=8, mem_bytes=32 * 2**30)
TC = "rvport/toolchain:under-test"


@pytest.fixture(scope="module")
def cat():
    return load_catalogue(builtin("recipes"))


def plan(cat, profile: str, mode: Mode = Mode.AUTO, host: HostFacts = X86):
    """Every recipe's default version (--all leaves out torch, whose source is not pinned: named here)."""
    refs = tuple(sorted(cat.recipes))
    return make_plan(cat, Request(refs=refs, profile=get_profile(profile), mode=mode), host)


def env_of(text: str) -> dict[str, str]:
    """The environment a rendered stage file sets (later ENV lines win, as in Docker)."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV ") and "=" in line:
            k, _, v = line[4:].partition("=")
            env[k] = json.loads(v) if v.startswith('"') else v
    return env


def installed(toolchain_dockerfile: str) -> list[str]:
    return toolchain_dockerfile.split("install -y --no-install-recommends ", 1)[1].split(";", 1)[0].split()


def rendered(stage):
    """The stage's Dockerfile from its mode. Only an accelerated stage needs more than the stage and profile
    (its prefix image, made at build time): it is rendered with a prefix image given by tag."""
    profile = get_profile(stage.env["RVPORT_PROFILE"])
    if stage.mode is Mode.ACCELERATED:
        xtc = accelerated.XtcImage(
            tag="rvport/xtc:under-test", image_id="sha256:" + "1" * 64, platform="linux/amd64", gcc_major="14"
        )
        r = accelerated.render_stage(toolchain=TC, xtc=xtc, env=stage.env, profile=profile)
    else:
        # all an emulated or cross stage's file needs (rendered here without a compiler cache)
        env = SimpleNamespace(stage=stage, profile=profile, ccache_values=lambda packages: None)
        r = modes.of(stage.mode).dockerfile(env, Toolchain(tag=TC))
    assert r.text.startswith("#") and f"FROM {TC} AS build" in r.text
    return r, env_of(r.text)


@pytest.mark.parametrize("profile", PROFILES)
def test_vllm_flags_per_profile(cat, profile):
    p = get_profile(profile)
    st = plan(cat, profile).stage("vllm")
    # vllm lists accelerated: a riscv64 stage under QEMU whose compilers run natively (sid's cross GCC 16)
    assert st.mode is Mode.ACCELERATED and st.emulated and st.platform == "linux/riscv64"
    r, env = rendered(st)
    assert r.template == "accelerated.Dockerfile"
    for e in (st.env, env):
        assert e["VLLM_TARGET_DEVICE"] == "cpu"
        assert e["CMAKE_ARGS"] == (
            f"-DVLLM_RVV_VLEN={VLEN[profile]} -DFETCHCONTENT_FULLY_DISCONNECTED=ON"
            " -DTorch_DIR=/usr/lib/riscv64-linux-gnu/cmake/Torch"
        )
        assert e["VLLM_RVV_VLEN"] == VLEN[profile]
        assert e["QEMU_CPU"] == p.qemu_cpu
        # vllm's base is sid (GCC 16): rvv256-bf16 gets zfbfmin back (profiles.yaml gcc_adds)
        assert (
            e["CFLAGS"]
            == e["CXXFLAGS"]
            == f"-O2 -march={st.profile.march} -mabi=lp64d -ffile-prefix-map=/src=."
        )
        if profile == "rvv256-bf16":
            assert e["VLLM_CPU_RVV_BF16"] == "1"
        else:
            assert "VLLM_CPU_RVV_BF16" not in e
    assert ("zvfbfmin=true" in env["QEMU_CPU"]) == (profile == "rvv256-bf16")
    assert ("zfbfmin=true" in env["QEMU_CPU"]) == (profile == "rvv256-bf16")
    assert st.profile.march == (
        p.march if profile != "rvv256-bf16" else "rv64gcv_zfbfmin_zvfh_zvfbfmin_zvl256b"
    )
    assert st.profile.requires == p.requires | ({"zfbfmin"} if profile == "rvv256-bf16" else set())
    assert (f"vlen={VLEN[profile]}" in env["QEMU_CPU"]) == (profile != "rv64gc")


@pytest.mark.parametrize("profile", PROFILES)
def test_every_emulated_stage_runs_the_profiles_cpu_and_cross_stages_none(cat, profile):
    p = get_profile(profile)
    pl = plan(cat, profile)
    assert {
        s.name: s.mode for s in pl.stages if s.name in ("glide-ffi", "semantic-router", "torch", "vllm")
    } == {
        "glide-ffi": Mode.CROSS,
        "semantic-router": Mode.CROSS,
        "torch": Mode.QEMU,
        "vllm": Mode.ACCELERATED,
    }
    for st in pl.stages:
        _, env = rendered(st)
        if st.emulated:
            assert st.env["QEMU_CPU"] == env["QEMU_CPU"] == p.qemu_cpu, st.name
        else:
            assert st.mode is Mode.CROSS and "QEMU_CPU" not in env and "QEMU_CPU" not in st.env, st.name


def test_torch_stage(cat):
    st = plan(cat, "rvv256").stage("torch")
    r, env = rendered(st)
    assert r.template == "build.Dockerfile"
    assert env["MAX_JOBS"] == env["CMAKE_BUILD_PARALLEL_LEVEL"] == str(st.jobs)
    assert env["PYTORCH_BUILD_VERSION"] == "2.14.0" and env["USE_CUDA"] == "0" and env["USE_GLOO"] == "1"
    assert env["CFLAGS"] == "-O2 -march=rv64gcv_zvfh_zvl256b -mabi=lp64d -ffile-prefix-map=/src=."


def test_glide_ffi_cross_stage(cat):
    st = plan(cat, "rvv256").stage("glide-ffi")
    assert st.mode is Mode.CROSS and st.platform == "linux/amd64" and not st.emulated
    r, env = rendered(st)
    assert r.template == "cross.Dockerfile"
    assert env["CARGO_BUILD_TARGET"] == "riscv64gc-unknown-linux-gnu"
    assert env["CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER"] == "riscv64-linux-gnu-gcc"
    assert env["CC_riscv64gc_unknown_linux_gnu"] == "riscv64-linux-gnu-gcc"
    assert env["CFLAGS_riscv64gc_unknown_linux_gnu"] == "-O2 -march=rv64gc -mabi=lp64d"
    assert env["RVPORT_MODE"] == "cross" and "QEMU_CPU" not in env
    assert any('--target "$RVPORT_RUST_TARGET"' in c for c in st.commands)
    tc = cross.render_toolchain(st.recipe, "rvport/base:xtc").text
    assert tc.startswith("#") and "FROM rvport/base:xtc" in tc and "QEMU_CPU" not in tc
    assert "dpkg --add-architecture riscv64;" in tc
    assert tc.index("dpkg --add-architecture") < tc.index("apt-get $ca -o Acquire::Languages=none update")
    # the recipe names Debian's rustc-web (its crates need rustc >= 1.88): rustc-web and cargo-web on the
    # build platform, the riscv64 rlibs of libstd-rust-web-dev beside them, golang-go for the round-trip
    # program
    assert installed(tc) == sorted(
        {
            "protobuf-compiler",
            "cmake",
            "pkg-config",
            "golang-go",
            "rustc-web",
            "cargo-web",
            "gcc-riscv64-linux-gnu",
            "g++-riscv64-linux-gnu",
        }
    )
    assert "cross-toolchain.sh unpack /rvport-unpacked-packages.txt libstd-rust-web-dev:riscv64 " in tc


def test_semantic_router_cross_stage(cat):
    st = plan(cat, "rvv256").stage("semantic-router")
    assert (
        st.mode is Mode.CROSS
        and st.platform == "linux/amd64"
        and st.depends == ("glide-ffi", "router-ml-binding")
    )
    r, env = rendered(st)
    assert r.template == "cross.Dockerfile"
    assert (env["GOOS"], env["GOARCH"], env["CGO_ENABLED"]) == ("linux", "riscv64", "1")
    assert env["CC"] == "riscv64-linux-gnu-gcc" and env["CXX"] == "riscv64-linux-gnu-g++"
    assert env["CGO_LDFLAGS"] == (
        "-L/deps/glide-ffi -L/tmp/rvport-ml-binding -L/tmp/rvport-candle-lib -lm -ldl -lpthread"
    )
    assert env["GOFLAGS"] == "-mod=vendor" and env["GOPROXY"] == "off" and env["GOTOOLCHAIN"] == "local"
    assert "QEMU_CPU" not in env
    tc = cross.render_toolchain(st.recipe, "B").text
    assert installed(tc) == ["g++-riscv64-linux-gnu", "gcc-riscv64-linux-gnu", "golang-go", "pkg-config"]


def test_cross_kinds_under_qemu_and_native(cat):
    q = plan(cat, "rvv128", Mode.QEMU)
    for name in ("glide-ffi", "router-ml-binding", "semantic-router"):
        st = q.stage(name)
        r, env = rendered(st)
        assert st.mode is Mode.QEMU and r.template == "build.Dockerfile"
        assert env["QEMU_CPU"] == get_profile("rvv128").qemu_cpu and "CARGO_BUILD_TARGET" not in env
    n = plan(cat, "rvv256", Mode.AUTO, RISCV)
    assert {s.mode for s in n.stages} == {Mode.NATIVE}
    assert all(rendered(s)[0].template == "build.Dockerfile" for s in n.stages)


def test_cross_data_is_complete():
    crossable = {k for k, f in KINDS.items() if "cross" in f.modes}
    assert crossable == {"cargo-staticlib", "go-binary"}
    assert {k for k, f in KINDS.items() if f.cross is not None} == crossable
    for kind in crossable:
        tc = KINDS[kind].cross
        assert tc.env and tc.compilers and "gcc-riscv64-linux-gnu" in tc.packages


def test_cli_plan_all_shows_the_flags(tmp_path):
    """`rvport plan --all` as a user runs it: plan.json carries the same flags; unreachable sources point at
    --mirror."""
    cp = rvport_process(
        [
            "--ci",
            "plan",
            "--all",
            "--profile",
            "rvv256-bf16",
            "--output",
            str(tmp_path),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--offline",
        ],
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    st = {s["recipe"]: s for s in doc["stages"]}
    v = st["vllm"]["env"]
    assert v["VLLM_TARGET_DEVICE"] == "cpu" and v["VLLM_CPU_RVV_BF16"] == "1"
    assert v["CMAKE_ARGS"].startswith("-DVLLM_RVV_VLEN=256 ")
    for s in doc["stages"]:
        if s["emulated"]:
            assert s["env"]["QEMU_CPU"] == get_profile("rvv256-bf16").qemu_cpu
    if doc["host"]["arch"] in ("x86_64", "aarch64"):
        assert (
            st["semantic-router"]["mode"] == "cross" and st["semantic-router"]["env"]["GOARCH"] == "riscv64"
        )
    # with --offline and an empty cache the GitHub sources are missing: located as such, with the way out
    assert st["vllm"]["sources"][0]["location"] == "missing"  # --all leaves torch out: its source is unpinned
    out = " ".join(cp.stdout.split())
    for name in ("vllm", "glide-ffi", "semantic-router"):
        assert any(w.startswith(f"{name}==") and "--mirror DIR" in w for w in doc["warnings"]), name
    assert "--mirror DIR" in out and "(missing)" in out


def test_plan_names_remote_sources_and_the_mirror_way_out(cat):
    """Online, the plan cannot know a host is unreachable (it does no I/O): it says where each GitHub source
    will come from and how to build without reaching it."""
    refs = tuple(sorted(cat.recipes))  # torch too, which --all leaves out
    pl = make_plan(cat, Request(refs=refs, profile=get_profile("rvv256")), X86, locate=lambda s: "network")
    # vllm's vector builds need oneDNN's git source too (rv64gc the sdist alone: test_source_profiles)
    for name in ("torch", "vllm", "glide-ffi", "semantic-router"):
        (w,) = [w for w in pl.warnings if w.startswith(f"{name}==") and "downloaded at build time" in w]
        assert "from github.com" in w and "--mirror DIR" in w and "rvport fetch --all --to DIR" in w
    for name in ("msgspec",):  # PyPI is reachable
        assert not any(w.startswith(f"{name}==") and "downloaded" in w for w in pl.warnings)


def rustc_web(recipe):
    """The recipe naming Debian's rustc-web as its Rust."""
    import dataclasses

    return dataclasses.replace(
        recipe, toolchain=dataclasses.replace(recipe.toolchain, rust="debian-rustc-web")
    )


def test_a_cargo_recipe_naming_rustc_web_cross_compiles_with_rustc_web(cat):
    st = plan(cat, "rvv256").stage("glide-ffi")
    recipe = rustc_web(st.recipe)
    tc = cross.render_toolchain(recipe, "rvport/base:xtc").text
    # rustc-web and cargo-web installed (they provide /usr/bin/rustc and /usr/bin/cargo); plain rustc, cargo
    # and libstd-rust-dev are not, and the riscv64 rlibs of libstd-rust-web-dev are unpacked, not installed
    assert installed(tc) == sorted(
        {
            "protobuf-compiler",
            "cmake",
            "pkg-config",
            "golang-go",
            "rustc-web",
            "cargo-web",
            "gcc-riscv64-linux-gnu",
            "g++-riscv64-linux-gnu",
        }
    )
    # the steps after apt's are resources/scripts/cross-toolchain.sh, in the image's build context
    script = "/run/rvport/cross-toolchain.sh"
    unpack = (
        f"sh -eu {script} unpack /rvport-unpacked-packages.txt libstd-rust-web-dev:riscv64 "
        "usr/lib/rustlib/riscv64gc-unknown-linux-gnu;"
    )
    match = (
        f"sh -eu {script} match /rvport-unpacked-packages.txt source rustc-web libstd-rust-web-dev:riscv64;"
    )
    assert unpack in tc and match in tc
    assert tc.index(unpack) < tc.index("rm -rf /var/lib/apt/lists") < tc.index(match)  # lists still there
    assert "cat /rvport-unpacked-packages.txt >> /rvport-toolchain-packages.txt" in tc
    assert tc.rstrip().endswith(
        f"sh -eu {script} compilers /rvport-cross-toolchain.txt rustc cargo riscv64-linux-gnu-gcc"
    )
    rendered = cross.render_toolchain(recipe, "rvport/base:xtc")
    assert rendered.files == (("cross-toolchain.sh", resources.script("cross-toolchain.sh")),)
    assert f"--mount=type=bind,source=cross-toolchain.sh,target={script}" in tc
    # the stage itself is the kind's: same cross environment, same commands
    assert cross.toolchain_of(recipe).env == cross.toolchain_of(st.recipe).env
    doc = cross.describe(
        recipe,
        "linux/amd64",
        {"rustc-web": "1.96.0+dfsg1-1~deb13u1+b1", "libstd-rust-web-dev:riscv64": "1.96.0+dfsg1-1~deb13u1"},
        {"rustc": "rustc 1.96.0", "cargo": "cargo 1.96.0"},
    )
    assert doc["packages"]["libstd-rust-web-dev:riscv64"] == "1.96.0+dfsg1-1~deb13u1"
    assert doc["unpacked"] == {"libstd-rust-web-dev:riscv64": "/usr/lib/rustlib/riscv64gc-unknown-linux-gnu"}
    assert doc["rust"] == "debian-rustc-web" and "libstd-rust-dev:riscv64" not in doc["packages"]
    # go-binary recipes and the default Rust keep their toolchains
    assert (
        cross.toolchain_of(rustc_web(plan(cat, "rvv256").stage("semantic-router").recipe)).packages
        == KINDS[plan(cat, "rvv256").stage("semantic-router").recipe.kind].cross.packages
    )


@pytest.mark.parametrize(
    "rustc, std, ok",
    [
        ("1.96.0+dfsg1-1~deb13u1+b1", "1.96.0+dfsg1-1~deb13u1", True),  # a binNMU of the same source
        ("1.96.0+dfsg1-1~deb13u1", "1.96.0+dfsg1-1~deb13u1", True),
        ("1.96.0+dfsg1-1~deb13u1", "1.96.0+dfsg1-1~deb13u2", False),  # another source upload
        ("1.96.0+dfsg1-1~deb13u1", "", False),  # nothing unpacked
    ],
)
def test_the_rustc_web_pair_must_come_from_one_source_version(cat, tmp_path, rustc, std, ok):
    """The image's check (cross-toolchain.sh match), run by sh with a stand-in dpkg-query that knows the
    installed rustc-web only."""
    recipe = rustc_web(plan(cat, "rvv256").stage("glide-ffi").recipe)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "dpkg-query").write_text(
        f'#!/bin/sh\neval last=\\${{$#}}\n[ "$last" = rustc-web ] || exit 1\nprintf %s "{rustc}"\n'
    )
    (bin_ / "dpkg-query").chmod(0o755)
    unpacked = tmp_path / "unpacked.txt"
    unpacked.write_text(f"libstd-rust-web-dev:riscv64={std}\n" if std else "")
    args = shlex.split(cross.match_args(recipe))
    assert args[0] == cross.UNPACKED_FILE
    cp = subprocess.run(
        ["sh", "-eu", str(resources.builtin("scripts", cross.SCRIPT)), "match", str(unpacked), *args[1:]],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"},
    )
    assert (cp.returncode == 0) is ok, cp.stderr
    if not ok:
        assert "must be built from one source version" in cp.stderr


def test_stages_that_compile_rust_record_the_rust_they_used_in_every_mode(cat, tmp_path):
    from rvport.engine.runner import take_rust_report
    from rvport.plan.planner import RUST_RECORD

    for mode in (Mode.AUTO, Mode.QEMU):
        p = plan(cat, "rvv256", mode)
        for st in p.stages:
            compiles = st.name in (
                "glide-ffi",
                "router-ml-binding",
                "candle-binding",
                "router-nlp-binding",
                "tiktoken",
                "oss-harmony",
                "outlines-core",
                "llguidance",
            )
            assert (RUST_RECORD in st.commands) is compiles, (st.name, st.mode)
            if compiles:  # after the recipe's build commands, before the wheel repair
                assert st.commands.index(RUST_RECORD) == len(st.recipe.build)
    assert plan(cat, "rvv256").stage("tiktoken").mode is Mode.ACCELERATED
    # what the command writes, and what the runner makes of it (taken out of the artifacts)
    files = tmp_path / "files"
    files.mkdir()
    (files / "libx.a").write_text("")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool, text in (
        (
            "rustc",
            'case "$1" in -vV) echo "host: x86_64-unknown-linux-gnu";; '
            '*) echo "rustc 1.96.0 (deadbeef 2026-01-01)";; esac',
        ),
        ("cargo", 'echo "cargo 1.96.0 (cafe 2026-01-01)"'),
    ):
        (bin_ / tool).write_text(f"#!/bin/sh\n{text}\n")
        (bin_ / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:/usr/bin:/bin", "RVPORT_OUT": str(files)}
    env.pop("RUSTC", None)
    subprocess.run(["sh", "-eu", "-c", RUST_RECORD], check=True, env=env, timeout=30)
    assert take_rust_report(files) == {
        "rustc": "rustc 1.96.0 (deadbeef 2026-01-01)",
        "cargo": "cargo 1.96.0 (cafe 2026-01-01)",
        "host": "x86_64-unknown-linux-gnu",
    }
    assert [p.name for p in files.iterdir()] == ["libx.a"] and take_rust_report(files) is None
