"""Accelerated stages without Docker: the rendered Dockerfiles, the version-match check, the prefix key."""

from __future__ import annotations

import pytest

from rvport.catalogue.kinds import compiles_rust
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine.images import BaseImage, parse_packages
from rvport.engine.modes import accelerated as acc
from rvport.errors import BuildFailed, ExitCode, HostNotReady, RecipeError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan

STAGE = {
    "gcc-14": "14.2.0-19",
    "g++-14": "14.2.0-19",
    "libgcc-14-dev": "14.2.0-19",
    "libstdc++-14-dev": "14.2.0-19",
    "binutils-riscv64-linux-gnu": "2.44-3",
    "python3": "3.13.5-1",
}
CROSS = {
    "gcc-14-riscv64-linux-gnu": "14.2.0-19cross1",
    "g++-14-riscv64-linux-gnu": "14.2.0-19cross1",
    "libgcc-14-dev-riscv64-cross": "14.2.0-19cross1",
    "libstdc++-14-dev-riscv64-cross": "14.2.0-19cross1",
    "binutils-riscv64-linux-gnu": "2.44-3",
    "make": "4.4.1-2",
}


def xtc(tag="rvport/xtc:debian-trixie-xtc-amd64-0123456789ab") -> acc.XtcImage:
    return acc.XtcImage(
        tag=tag,
        image_id="sha256:" + "1" * 64,
        platform="linux/amd64",
        gcc_major="14",
        packages={k: v for k, v in CROSS.items() if k != "make"},
    )


def xtc_rust() -> acc.XtcImage:
    return acc.XtcImage(
        tag="rvport/xtc:debian-trixie-xtc-rust-amd64-0123456789ab",
        image_id="sha256:" + "4" * 64,
        platform="linux/amd64",
        gcc_major="14",
        packages={},
        rust=True,
    )


def base(image_id="sha256:" + "2" * 64) -> BaseImage:
    return BaseImage(
        spec="debian-trixie-xtc",
        tag="rvport/base:debian-trixie-xtc-amd64-abc",
        image_id=image_id,
        platform="linux/amd64",
        key="k",
        source="debootstrap",
        packages=CROSS,
    )


# ------------------------------------------------------------------------------------------- versions
def test_same_source_versions_match_and_are_returned():
    assert acc.check_versions(STAGE, CROSS, "14") == {
        "gcc-14": "14.2.0-19",
        "g++-14": "14.2.0-19",
        "libgcc-14-dev": "14.2.0-19",
        "libstdc++-14-dev": "14.2.0-19",
        "binutils-riscv64-linux-gnu": "2.44-3",
    }


@pytest.mark.parametrize(
    "version, expected",
    [
        ("14.2.0-19cross1", "14.2.0-19"),
        ("14.2.0-19", "14.2.0-19"),
        ("2.44-3+b1", "2.44-3"),
        ("14.2.0-19cross2+b1", "14.2.0-19"),
        ("1:2.41-11cross1", "1:2.41-11"),
    ],
)
def test_source_version_drops_cross_and_binnmu_suffixes(version, expected):
    assert acc.source_version(version) == expected


def test_a_different_gcc_revision_is_refused_with_both_versions_and_a_hint():
    stage = dict(STAGE, **{"gcc-14": "14.2.0-20", "g++-14": "14.2.0-20"})
    with pytest.raises(acc.ToolchainMismatch) as ei:
        acc.check_versions(stage, CROSS, "14")
    e = ei.value
    assert isinstance(e, BuildFailed)
    assert "stage gcc-14 14.2.0-20 != cross gcc-14-riscv64-linux-gnu 14.2.0-19cross1" in str(e)
    assert "g++-14 14.2.0-20" in str(e)
    assert "--mode qemu" in e.hint and "debian-trixie-xtc" in e.hint


def test_a_different_binutils_is_refused():
    with pytest.raises(acc.ToolchainMismatch, match="binutils-riscv64-linux-gnu 2.45-1"):
        acc.check_versions(dict(STAGE, **{"binutils-riscv64-linux-gnu": "2.45-1"}), CROSS, "14")


def test_a_stage_without_the_cross_major_version_is_refused():
    stage = {k.replace("14", "15"): v.replace("14.2.0", "15.1.0") for k, v in STAGE.items()}
    with pytest.raises(acc.ToolchainMismatch, match="the stage has no gcc-14"):
        acc.check_versions(stage, CROSS, "14")


def test_a_cross_toolchain_missing_a_package_is_refused():
    cross = {k: v for k, v in CROSS.items() if not k.startswith("g++")}
    with pytest.raises(
        acc.ToolchainMismatch, match="the cross toolchain has no g\\+\\+-14-riscv64-linux-gnu"
    ):
        acc.check_versions(STAGE, cross, "14")


RUST_STAGE = dict(
    STAGE, **{"rustc-web": "1.96.0+dfsg1-1~deb13u1", "libstd-rust-web-dev": "1.96.0+dfsg1-1~deb13u1"}
)
RUST_CROSS = dict(
    CROSS, **{"rustc-web": "1.96.0+dfsg1-1~deb13u1+b1", "libstd-rust-web-dev": "1.96.0+dfsg1-1~deb13u1+b1"}
)


def test_rust_stages_compare_rustc_and_its_standard_library_too():
    compared = acc.check_versions(RUST_STAGE, RUST_CROSS, "14", rust=True)
    assert compared["rustc-web"] == compared["libstd-rust-web-dev"] == "1.96.0+dfsg1-1~deb13u1"
    assert "rustc-web" not in acc.check_versions(RUST_STAGE, RUST_CROSS, "14")  # C-only stages do not
    older = dict(RUST_STAGE, **{"libstd-rust-web-dev": "1.95.0+dfsg1-1"})
    with pytest.raises(acc.ToolchainMismatch, match="stage libstd-rust-web-dev 1.95.0"):
        acc.check_versions(older, RUST_CROSS, "14", rust=True)
    with pytest.raises(acc.ToolchainMismatch, match="the cross toolchain has no rustc-web"):
        acc.check_versions(RUST_STAGE, CROSS, "14", rust=True)


def test_gcc_major_from_the_cross_packages():
    assert acc.gcc_major(CROSS) == "14"
    with pytest.raises(HostNotReady, match="no riscv64 cross GCC"):
        acc.gcc_major({"make": "4.4"})
    with pytest.raises(HostNotReady, match="2 riscv64 cross GCC versions"):
        acc.gcc_major(dict(CROSS, **{"gcc-15-riscv64-linux-gnu": "15.1.0-1cross1"}))


def test_parse_packages_drops_architecture_qualifiers_when_asked():
    text = "gcc-14=14.2.0-19\nlibc6:amd64=2.41-11\n\nbroken\nnot-installed=\n=1.0\n"
    assert parse_packages(text, qualified=False) == {"gcc-14": "14.2.0-19", "libc6": "2.41-11"}
    assert parse_packages(text) == {"gcc-14": "14.2.0-19", "libc6:amd64": "2.41-11"}
    assert parse_packages("go=go version go1.24.4 linux/amd64\n") == {"go": "go version go1.24.4 linux/amd64"}


@pytest.mark.parametrize("arch, platform", [("x86_64", "linux/amd64"), ("aarch64", "linux/arm64")])
def test_host_platform(arch, platform):
    assert acc.host_platform(arch) == platform


def test_riscv64_hosts_have_nothing_to_accelerate():
    with pytest.raises(HostNotReady, match="x86_64 or aarch64"):
        acc.host_platform("riscv64")


# ------------------------------------------------------------------------------------------- rendering
def test_stage_dockerfile_copies_the_prefix_image_and_puts_its_compilers_first():
    r = acc.render_stage(
        toolchain="rvport/toolchain:msgspec-build-abc",
        xtc=xtc(),
        env={"QEMU_CPU": "rv64,v=true", "CFLAGS": "-O2 -march=rv64gcv"},
        profile=get_profile("rvv256"),
    )
    lines = r.text.splitlines()
    assert r.template == "accelerated.Dockerfile" and "@@" not in r.text
    assert (
        lines[next(i for i, ln in enumerate(lines) if not ln.startswith("#"))]
        == "FROM rvport/toolchain:msgspec-build-abc AS build"
    )
    copy = "COPY --from=rvport/xtc:debian-trixie-xtc-amd64-0123456789ab /opt/xtc/ /opt/xtc/"
    setup = "RUN sh -eu /opt/xtc/setup.sh"
    assert copy in lines and setup in lines and lines.index(copy) < lines.index(setup)
    (path,) = [ln for ln in lines if ln.startswith("ENV PATH=")]
    assert path.startswith("ENV PATH=/opt/xtc/bin:") and "ccache" not in path
    assert lines.index(setup) < lines.index(path)  # setup.sh runs with the stage's own PATH
    assert 'ENV QEMU_CPU="rv64,v=true"' in lines and 'ENV CFLAGS="-O2 -march=rv64gcv"' in lines
    assert "sh -eux /rvport/build.sh" in r.text and "FROM scratch AS export" in r.text


def test_rust_stages_target_riscv64_with_the_prefix_rustc_and_link_build_scripts_natively():
    env = {"QEMU_CPU": "rv64", "CARGO_BUILD_JOBS": "2", "CC_riscv64gc_unknown_linux_gnu": "my-cc"}
    r = acc.render_stage(
        toolchain="rvport/toolchain:tiktoken-build-abc",
        xtc=xtc_rust(),
        env=env,
        profile=get_profile("rvv256"),
    )
    lines = r.text.splitlines()
    assert 'ENV RUSTC="/opt/xtc/rust/bin/rustc"' in lines
    assert 'ENV CARGO_BUILD_TARGET="riscv64gc-unknown-linux-gnu"' in lines
    assert 'ENV CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER="riscv64-linux-gnu-gcc"' in lines
    assert 'ENV CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER="/opt/xtc/native/bin/cc"' in lines
    assert 'ENV CC_riscv64gc_unknown_linux_gnu="my-cc"' in lines  # the recipe's env wins
    assert 'ENV CARGO_BUILD_JOBS="2"' in lines
    # the stage's /proc/cpuinfo is checked first; its own environment file (PYO3_CROSS_LIB_DIR) is read right
    # before the build
    (build,) = [ln for ln in lines if "sh -eux /rvport/build.sh" in ln]
    assert build.strip().startswith("sh -eu /rvport/cpuinfo.sh rvv256 ")
    assert " && . /opt/xtc/stage.env && mkdir -p " in build
    # C-only stages get none of it
    c_only = [
        ln
        for ln in acc.render_stage(
            toolchain="t", xtc=xtc(), env=env, profile=get_profile("rvv256")
        ).text.splitlines()
        if not ln.startswith("#")
    ]
    assert not [ln for ln in c_only if "RUSTC" in ln or "CARGO_BUILD_TARGET" in ln]


def test_arm64_build_platforms_link_their_own_target_natively():
    assert (
        acc.rust_env("linux/arm64")["CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER"]
        == "/opt/xtc/native/bin/cc"
    )
    with pytest.raises(HostNotReady):
        acc.rust_env("linux/riscv64")


def test_the_rust_prefix_is_its_own_image():
    c = acc.render_prefix("rvport/base:debian-trixie-xtc-rust-amd64-abc", "14", "linux/amd64", rust=True)
    assert "xtc-assemble.sh 14 rust" in c.text
    plain = acc.render_prefix("rvport/base:debian-trixie-xtc-rust-amd64-abc", "14", "linux/amd64")
    assert acc.prefix_key(base(), c) != acc.prefix_key(base(), plain)


@pytest.mark.parametrize(
    "name, rust",
    [
        ("msgspec", False),
        ("sentencepiece", False),
        ("tiktoken", True),
        ("oss-harmony", True),
        ("outlines-core", True),
        ("llguidance", True),
        ("glide-ffi", True),
        ("router-ml-binding", True),
    ],
)
def test_recipes_that_compile_rust_are_recognised(name, rust):
    assert compiles_rust(load_catalogue().resolve(name)) is rust


def test_a_cargo_kind_is_a_rust_stage_without_naming_rust():
    """One definition for the planner's Rust record and the accelerated prefix: a cargo-staticlib recipe whose
    toolchain names no Rust (its base brings it) still compiles Rust."""
    import dataclasses

    r = load_catalogue().resolve("glide-ffi")
    bare = dataclasses.replace(r, toolchain=dataclasses.replace(r.toolchain, rust=None, debian=("cmake",)))
    assert compiles_rust(bare)
    assert not hasattr(acc, "needs_rust") and not hasattr(acc, "RUST_PACKAGES")


def test_rust_scripts_check_the_standard_library_and_the_native_linker():
    a, s = acc.assemble_sh(), acc.setup_sh()
    assert 'cp -a /usr/lib/rustlib/"$H" $P/rust/lib/rustlib/' in a  # the build platform's own std
    assert '$N/"$M"/bin/ld' in a and "libc-dev-files" in a  # collect2 finds ld in the tooldir
    assert "--target $R -o xtc-probe.rlib" in s and "cannot use the stage's riscv64 standard library" in s
    assert "-C linker=$P/native/bin/cc" in s and "./xtc-host" in s
    assert "PYO3_CROSS_LIB_DIR" in s and 'sysconfig.get_path("stdlib")' in s


def test_prefix_dockerfile_assembles_on_the_build_platform_and_keeps_only_the_prefix():
    r = acc.render_prefix("rvport/base:debian-trixie-xtc-amd64-abc", "14", "linux/amd64")
    lines = [ln for ln in r.text.splitlines() if ln and not ln.startswith("#")]
    assert lines[0] == "FROM --platform=linux/amd64 rvport/base:debian-trixie-xtc-amd64-abc AS assemble"
    assert "xtc-assemble.sh 14  &&" in r.text
    assert lines[-2:] == ["FROM scratch", "COPY --from=assemble /opt/xtc/ /opt/xtc/"]


def test_scripts_cover_the_pitfalls():
    a, s = acc.assemble_sh(), acc.setup_sh()
    # driver names (incl. the triplet name Debian's python sysconfig calls) live beside the real drivers
    for name in ("gcc cc $T-gcc", "g++ c++ $T-g++"):
        assert name in a
    # no unprefixed as/ld on PATH: binutils are copied with their triplet prefix only
    assert "for t in as ld ld.bfd" in a and "cp -a /usr/bin/$T-$t $P/bin/" in a
    # but ar and ranlib are, beside the drivers: CMake finds its archiver by its plain name on PATH
    assert 'for n in ar ranlib; do ln -s $T-$n "$n"; done' in a
    # the gcc-cross version directory is a real directory of per-file links; the LTO plugin stays native
    assert 'cp -rsL /usr/lib/gcc/$T/"$V"/. "$G"/' in s and 'rm -rf "$G"/plugin "$G"/liblto_plugin.so' in s
    # g++'s target directory for the stage's c++config.h
    assert 'ln -s /usr/include/$T/c++/"$V" $I/c++/"$V"/$T' in s
    # the stage must have the cross compiler's GCC version
    assert 'test -d /usr/lib/gcc/$T/"$V" || fail' in s
    # /usr/local/include is searched where the stage's own GCC searches it (the tooldir include), and a build
    # that adds entries there afterwards is refused
    assert 'ln -s "$e" $I/' in s and "local_include > $P/local-include.list" in s
    assert "after-build" in s and "build this recipe with --mode qemu" in s


def test_the_build_step_is_checked_after_it_ran():
    r = acc.render_stage(toolchain="t", xtc=xtc(), env={}, profile=get_profile("rvv256"))
    (build,) = [ln for ln in r.text.splitlines() if "sh -eux /rvport/build.sh" in ln]
    assert build.rstrip().endswith(
        "sh -eux /rvport/build.sh && sh -eu /opt/xtc/setup.sh after-build && sh -eu /rvport/ccache.sh end"
    )


def test_prefix_key_follows_its_inputs():
    r = acc.render_prefix("t", "14", "linux/amd64")
    assert acc.prefix_key(base(), r) == acc.prefix_key(base(), r)
    assert acc.prefix_key(base(), r) != acc.prefix_key(base("sha256:" + "3" * 64), r)
    assert acc.prefix_key(base(), r) != acc.prefix_key(base(), acc.render_prefix("t", "15", "linux/amd64"))


def test_xtc_image_json_records_id_and_packages():
    doc = xtc().to_json()
    assert (
        doc["image_id"].startswith("sha256:")
        and doc["packages"]["gcc-14-riscv64-linux-gnu"] == "14.2.0-19cross1"
    )


# ------------------------------------------------------------------------------------------- planning
@pytest.mark.parametrize("name", ["msgspec"])
def test_proven_recipes_run_accelerated_under_auto_on_x86_64(name):
    cat = load_catalogue()
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
    st = make_plan(cat, Request(refs=(name,), profile=get_profile("rvv256")), host).stages[0]
    assert st.mode is Mode.ACCELERATED and st.platform == "linux/riscv64" and st.emulated
    assert st.env["QEMU_CPU"] == get_profile("rvv256").qemu_cpu


SID_STAGE = {k.replace("14", "16"): "16.2.0-4" for k in STAGE if "14" in k} | {
    "binutils-riscv64-linux-gnu": "2.47.50.20261021-1"
}
SID_CROSS = {k.replace("14", "16"): "16.2.0-3cross1" for k in CROSS if "14" in k} | {
    "binutils-riscv64-linux-gnu": "2.47.50.20261021-1"
}


def test_sids_gcc_16_revision_pair_is_accepted_and_says_so():
    compared = acc.check_versions(SID_STAGE, SID_CROSS, "16")
    assert compared["gcc-16"] == "16.2.0-4 (cross 16.2.0-3cross1: accepted revision pair)"
    assert compared["binutils-riscv64-linux-gnu"] == "2.47.50.20261021-1"


def test_a_revision_pair_not_listed_is_still_refused():
    stage = dict(SID_STAGE, **{"gcc-16": "16.2.0-5"})
    with pytest.raises(acc.ToolchainMismatch, match=r"stage gcc-16 16.2.0-5 != cross"):
        acc.check_versions(stage, SID_CROSS, "16")
    cross = dict(SID_CROSS, **{"gcc-16-riscv64-linux-gnu": "16.2.0-4cross1"})  # the pair reversed
    with pytest.raises(acc.ToolchainMismatch):
        acc.check_versions(dict(SID_STAGE, **{"gcc-16": "16.2.0-3"}), cross, "16")


def test_the_build_platform_base_is_of_the_stage_suite():
    assert acc.xtc_base("debian-sid", rust=False) == "debian-sid-xtc"
    assert acc.xtc_base("debian-trixie", rust=False) == "debian-trixie-xtc"
    assert acc.xtc_base("debian-trixie", rust=True) == "debian-trixie-xtc-rust"


def _bases_dir(tmp_path, monkeypatch, **edits):
    """RVPORT_BASES: a copy of the built-in bases, each named file's text edited by (old, new)."""
    from rvport import resources

    for spec in resources.builtin("bases").glob("*.yaml"):
        (tmp_path / spec.name).write_text(spec.read_text())
    for name, (old, new) in edits.items():
        path = tmp_path / f"{name}.yaml"
        text = path.read_text() if path.exists() else (tmp_path / "debian-trixie.yaml").read_text()
        assert old in text
        path.write_text(text.replace(old, new))
    monkeypatch.setitem(resources.OVERRIDES, "bases", tmp_path)
    return tmp_path


def test_a_stage_base_that_cannot_be_loaded_is_an_error_naming_its_file_not_trixies_prefix(
    tmp_path, monkeypatch
):
    with pytest.raises(
        RecipeError, match=r"accelerated: the stage's base 'no-such-base' cannot be loaded"
    ) as e:
        acc.xtc_base("no-such-base", rust=False)
    assert e.value.exit_code == ExitCode.RECIPE_INVALID and "no-such-base.yaml" in e.value.message
    assert "chosen by this spec's Debian suite" in (e.value.hint or "")
    root = _bases_dir(tmp_path, monkeypatch, **{"debian-sid": ("suite: sid\n", "suite: sid\nsuit: sid\n")})
    with pytest.raises(
        RecipeError, match="the stage's base 'debian-sid' cannot be loaded: invalid base spec"
    ) as e:
        acc.xtc_base("debian-sid", rust=False)
    (problem,) = e.value.problems
    assert problem.file == str(root / "debian-sid.yaml") and problem.line == 10, e.value.render()
    assert "RVPORT_BASES" in (e.value.hint or "")
    (root / "debian-sid.yaml").write_text((root / "debian-trixie.yaml").read_text().replace("trixie", "sid"))
    (root / "debian-sid-xtc.yaml").write_text("schema: 1\nname: [\n")
    with pytest.raises(RecipeError, match="the build-platform base 'debian-sid-xtc' cannot be loaded"):
        acc.xtc_base("debian-sid", rust=False)


def test_a_base_of_a_suite_with_no_build_platform_twin_gets_trixies_and_every_message_says_why(
    tmp_path, monkeypatch
):
    from dataclasses import replace
    from types import SimpleNamespace

    from rvport.engine.stage import Toolchain

    _bases_dir(
        tmp_path,
        monkeypatch,
        **{
            "debian-forky": (
                "name: debian-trixie\nkind: debootstrap\nsuite: trixie\n",
                "name: debian-forky\nkind: debootstrap\nsuite: forky\n",
            )
        },
    )
    assert acc.xtc_base("debian-forky", rust=False) == "debian-trixie-xtc"
    base, note = acc.xtc_choice("debian-forky", rust=True)
    assert base == "debian-trixie-xtc-rust"
    assert (
        "debian-forky is of Debian forky" in note
        and "the prefix is debian-trixie-xtc-rust's, of trixie" in note
    )
    assert acc.xtc_choice("debian-sid", rust=True) == ("debian-sid-xtc-rust", None)

    # the version check that then fails says why the prefix is not of the stage's suite
    cat = load_catalogue()
    x86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
    plan = make_plan(
        cat, Request(refs=("msgspec",), profile=get_profile("rvv256"), mode=Mode.ACCELERATED), x86
    )
    stage = plan.stage("msgspec")
    recipe = replace(stage.recipe, toolchain=replace(stage.recipe.toolchain, base="debian-forky"))
    stage = replace(stage, recipe=recipe)
    xtc = acc.XtcImage(
        tag="rvport/xtc:t",
        image_id="sha256:" + "1" * 64,
        platform="linux/amd64",
        gcc_major="14",
        packages=CROSS,
    )
    lines: list[str] = []
    env = SimpleNamespace(
        stage=stage,
        profile=get_profile("rvv256"),
        base=lambda spec, platform: SimpleNamespace(packages={"gcc-15": "15.2.0-1"}),
        line=lines.append,
        record=SimpleNamespace(images={}, toolchain_packages={}),
    )
    monkeypatch.setattr(acc.Accelerated, "_prefix", lambda self, env: xtc)
    with pytest.raises(
        acc.ToolchainMismatch,
        match=r"the stage has no gcc-14 .*\(the stage's base debian-forky is of Debian forky",
    ) as e:
        acc.Accelerated().dockerfile(env, Toolchain(tag="t", image_id="sha256:" + "2" * 64))
    assert "bases/debian-trixie-xtc.yaml" in (e.value.hint or "") and "toolchains/" not in e.value.hint
