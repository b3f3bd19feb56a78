"""Bake export without Docker: a tiny recipe (sources from a mirror, offline) and a base image given as known,
rendered into docker-bake.json and contexts made by the modes and stage functions the runner uses."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import shutil
import tarfile

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine import bake, compcache, render
from rvport.engine.compcache import CompilerCache
from rvport.engine.images import BaseImage
from rvport.engine.modes import accelerated, cross, emulated
from rvport.engine.stage import toolchain_tag
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.sources import fetch_options

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
BASE = BaseImage(
    spec="debian-trixie",
    tag="rvport/base:debian-trixie-riscv64-0123456789ab",
    image_id="sha256:" + "1" * 64,
    platform="linux/riscv64",
    key="k",
    source="debootstrap",
)
RECIPE = """\
schema: 1
name: {name}
kind: python-wheel
toolchain: {{debian: [{pkgs}]}}
build:
  - python3 -m pip wheel --no-deps --no-index --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel}}
versions:
  - version: "1.0"
{depends}    sources:
      - name: src
        url: https://example.invalid/{fname}
        sha256: {sha}
"""


def _tarball(name, files, dest):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, text in files.items():
            ti = tarfile.TarInfo(f"{name}/{rel}")
            ti.size, ti.mtime = len(text), 0
            tar.addfile(ti, io.BytesIO(text.encode()))
    (dest / f"{name}.tar.gz").write_bytes(buf.getvalue())
    return f"{name}.tar.gz", hashlib.sha256(buf.getvalue()).hexdigest()


@pytest.fixture
def setup(tmp_path):
    mirror, recipes = tmp_path / "mirror", tmp_path / "recipes"
    mirror.mkdir()
    recipes.mkdir()
    for name, pkgs, dep in (
        ("tinylib", "python3-setuptools", ""),
        ("tinyapp", "", "    depends: [tinylib]\n"),
    ):
        fname, sha = _tarball(f"{name}-1.0", {"setup.py": "print('hi')\n"}, mirror)
        (recipes / f"{name}.yaml").write_text(
            RECIPE.format(name=name, pkgs=pkgs, depends=dep, fname=fname, sha=sha)
        )
    fopts = fetch_options(cache_dir=tmp_path / "cache", mirror=mirror, offline=True)
    return load_catalogue(recipes), fopts, tmp_path / "out"


XBASE = BaseImage(
    spec="debian-trixie-xtc",
    tag="rvport/base:debian-trixie-xtc-amd64-0123456789ab",
    image_id="sha256:" + "2" * 64,
    platform="linux/amd64",
    key="k",
    source="debootstrap",
)
STATICLIB = """\
schema: 1
name: tinystatic
kind: cargo-staticlib
modes: [qemu, cross]
toolchain: {{debian: [cargo, rustc]}}
build:
  - cargo build --release --offline
outputs:
  - {{glob: "*.a", type: staticlib, isa: baseline}}
versions:
  - version: "1.0"
    sources:
      - name: src
        url: https://example.invalid/{fname}
        sha256: {sha}
"""


RUNTIME = RECIPE.replace(
    "outputs:",
    "runtime:\n  debian: [ca-certificates]\n  user: {{name: app, uid: 10001}}\n"
    "  files: [{{artifact: tinyrt-1.0-py3-none-any.whl, dest: /app/app.whl}}]\n"
    "  entrypoint: [/bin/true]\noutputs:",
)


def bases():
    return {"debian-trixie@linux/riscv64": BASE, "debian-trixie-xtc@linux/amd64": XBASE}


def _plan(cat, *refs, mode=Mode.QEMU, manylinux="off"):  # repair is proven by the integration tests
    return make_plan(
        cat, Request(refs=refs, profile=get_profile("rvv256"), mode=mode, manylinux=manylinux), X86
    )


def test_bake_targets_are_the_runners_stages(setup):
    cat, fopts, out = setup
    p = _plan(cat, "tinylib")
    opts = bake.BakeOptions(output=out, fetch=fopts)
    (out / "bake").mkdir(parents=True)
    doc = bake.bake_document(p, opts, bases=bases())
    json.dumps(doc)  # plain JSON
    assert doc["group"]["default"]["targets"] == ["tinylib"]
    assert doc["group"]["toolchains"]["targets"] == ["tinylib-toolchain"]
    st = p.stage("tinylib")
    # the toolchain target: the runner's Dockerfile, tagged as the runner tags it
    rendered_tc = render.toolchain_dockerfile(
        BASE.tag, get_profile("rv64gc").qemu_cpu, st.recipe.toolchain.debian
    )
    tc_tag, key = toolchain_tag("tinylib", "build", BASE.image_id, rendered_tc)
    tc = doc["target"]["tinylib-toolchain"]
    assert (
        tc["tags"] == [tc_tag] and tc["output"] == ["type=docker"] and tc["labels"] == {"org.rvport.key": key}
    )
    assert (out / "bake" / "tinylib-toolchain" / "Dockerfile").read_text() == rendered_tc.text
    # the build target: no network, local output, the runner's Dockerfile and context
    t = doc["target"]["tinylib"]
    assert t["network"] == "none" and t["platforms"] == ["linux/riscv64"]
    assert t["output"] == [f"type=local,dest={out / 'bake' / 'out' / 'tinylib'}"]
    engine = compcache.template_values(CompilerCache(), mode=st.mode, profile=st.profile, packages={})
    rendered = emulated.render_stage(
        st, tc_tag, get_profile("rvv256"), engine
    )  # bake: the engine's compiler cache
    script = render.build_script(st.commands)
    ctx = out / "bake" / "tinylib"
    assert t["context"] == str(ctx) and t["dockerfile"] == "Dockerfile"
    assert (ctx / "Dockerfile").read_text() == rendered.text and f"FROM {tc_tag}" in rendered.text
    assert (ctx / "rvport-build.sh").read_text() == script
    assert (ctx / ".dockerignore").read_text() == "Dockerfile\n"
    assert (ctx / "src" / "setup.py").is_file() and (ctx / "deps").is_dir()


def test_a_stage_without_packages_builds_from_the_base(setup, tmp_path):
    cat, fopts, out = setup
    (out / "artifacts" / "tinylib").mkdir(parents=True)
    (out / "artifacts" / "tinylib" / "tinylib-1.0-py3-none-any.whl").write_text("wheel")
    p = _plan(cat, "tinyapp")
    (out / "bake").mkdir(parents=True)
    doc = bake.bake_document(p, bake.BakeOptions(output=out, fetch=fopts), bases=bases())
    assert doc["group"]["stages"]["targets"] == ["tinylib", "tinyapp"]  # dependency order
    assert "tinyapp-toolchain" not in doc["target"]
    ctx = out / "bake" / "tinyapp"
    assert f"FROM {BASE.tag}" in (ctx / "Dockerfile").read_text()
    assert (ctx / "deps" / "tinylib" / "tinylib-1.0-py3-none-any.whl").read_text() == "wheel"


def test_a_dependency_without_artifacts_is_a_usage_error_with_a_hint(setup):
    cat, fopts, out = setup
    (out / "bake").mkdir(parents=True)
    with pytest.raises(UsageError) as e:
        bake.bake_document(_plan(cat, "tinyapp"), bake.BakeOptions(output=out, fetch=fopts), bases=bases())
    assert "tinylib" in e.value.message and "rvport build tinylib" in e.value.hint


def test_cross_stages_compile_in_the_build_platform_cross_toolchain(setup, tmp_path):
    cat, fopts, out = setup
    fname, sha = _tarball("tinystatic-1.0", {"Cargo.toml": '[package]\nname = "t"\n'}, tmp_path / "mirror")
    (tmp_path / "recipes" / "tinystatic.yaml").write_text(STATICLIB.format(fname=fname, sha=sha))
    p = _plan(load_catalogue(tmp_path / "recipes"), "tinystatic", mode=Mode.CROSS)
    (out / "bake").mkdir(parents=True)
    doc = bake.bake_document(p, bake.BakeOptions(output=out, fetch=fopts), bases=bases())
    st = p.stage("tinystatic")
    rendered_tc = cross.render_toolchain(st.recipe, XBASE.tag)
    tc_tag, _ = toolchain_tag("tinystatic", "cross", XBASE.image_id, rendered_tc)
    tc = doc["target"]["tinystatic-toolchain"]
    assert tc["platforms"] == ["linux/amd64"] and tc["tags"] == [tc_tag]
    assert (out / "bake" / "tinystatic-toolchain" / "Dockerfile").read_text() == rendered_tc.text
    t = doc["target"]["tinystatic"]
    assert t["platforms"] == ["linux/amd64"] and t["network"] == "none"
    text = (out / "bake" / "tinystatic" / "Dockerfile").read_text()
    engine = compcache.template_values(CompilerCache(), mode=st.mode, profile=st.profile, packages={})
    assert text == cross.render_stage(st, tc_tag, get_profile("rvv256"), engine).text
    assert f"FROM {tc_tag} AS build" in text and 'CARGO_BUILD_TARGET="riscv64gc-unknown-linux-gnu"' in text


def test_accelerated_stages_take_the_prefix_image_made_at_export(setup, monkeypatch):
    cat, fopts, out = setup
    made = []
    xtc = accelerated.XtcImage(
        tag="rvport/xtc:debian-trixie-xtc-amd64-0123456789ab",
        image_id="sha256:" + "3" * 64,
        platform="linux/amd64",
        gcc_major="14",
        packages={"gcc-14-riscv64-linux-gnu": "14.2.0-19cross1"},
    )

    def ensure_prefix(base, rust=False, **kw):  # the docker edge: the prefix image is built and loaded
        made.append((base.tag, rust))
        return xtc

    monkeypatch.setattr(accelerated, "ensure_prefix", ensure_prefix)
    p = _plan(cat, "tinylib")
    p = dataclasses.replace(p, stages=(dataclasses.replace(p.stages[0], mode=Mode.ACCELERATED),))
    (out / "bake").mkdir(parents=True)
    doc = bake.bake_document(p, bake.BakeOptions(output=out, fetch=fopts), bases=bases())
    assert made == [(XBASE.tag, False)]
    text = (out / "bake" / "tinylib" / "Dockerfile").read_text()
    assert f"COPY --from={xtc.tag} /opt/xtc/ /opt/xtc/" in text and "RUN sh -eu /opt/xtc/setup.sh" in text
    assert doc["target"]["tinylib"]["platforms"] == ["linux/riscv64"]
    assert doc["target"]["tinylib"]["network"] == "none"


def test_an_accelerated_base_with_another_gcc_is_refused_at_export(setup, monkeypatch):
    cat, fopts, out = setup
    base = dataclasses.replace(BASE, packages={"gcc-14": "14.2.0-20", "g++-14": "14.2.0-20"})
    xtc = accelerated.XtcImage(
        tag="t",
        image_id="i",
        platform="linux/amd64",
        gcc_major="14",
        packages={"gcc-14-riscv64-linux-gnu": "14.2.0-19cross1"},
    )
    monkeypatch.setattr(accelerated, "ensure_prefix", lambda *a, **k: xtc)
    p = _plan(cat, "tinylib")
    p = dataclasses.replace(p, stages=(dataclasses.replace(p.stages[0], mode=Mode.ACCELERATED),))
    (out / "bake").mkdir(parents=True)
    with pytest.raises(accelerated.ToolchainMismatch, match="stage gcc-14 14.2.0-20"):
        bake.bake_document(
            p,
            bake.BakeOptions(output=out, fetch=fopts),
            bases=dict(bases(), **{"debian-trixie@linux/riscv64": base}),
        )


XRBASE = BaseImage(
    spec="debian-trixie-xtc-rust",
    tag="rvport/base:debian-trixie-xtc-rust-amd64-0123456789ab",
    image_id="sha256:" + "4" * 64,
    platform="linux/amd64",
    key="k",
    source="debootstrap",
)
GCC = {
    "gcc-14": "14.2.0-19",
    "g++-14": "14.2.0-19",
    "libgcc-14-dev": "14.2.0-19",
    "libstdc++-14-dev": "14.2.0-19",
    "binutils-riscv64-linux-gnu": "2.44-3",
}
XGCC = {
    "gcc-14-riscv64-linux-gnu": "14.2.0-19cross1",
    "g++-14-riscv64-linux-gnu": "14.2.0-19cross1",
    "libgcc-14-dev-riscv64-cross": "14.2.0-19cross1",
    "libstdc++-14-dev-riscv64-cross": "14.2.0-19cross1",
    "binutils-riscv64-linux-gnu": "2.44-3",
}
RUST = {"rustc-web": "1.96.0+dfsg1-1~deb13u1", "libstd-rust-web-dev": "1.96.0+dfsg1-1~deb13u1"}


def _rust_stage(setup, tmp_path, monkeypatch):
    """An accelerated stage that installs rustc-web, and a Rust prefix image (the docker edge) made for it."""
    cat, fopts, out = setup
    fname, sha = _tarball("tinyrs-1.0", {"setup.py": "print('hi')\n"}, tmp_path / "mirror")
    (tmp_path / "recipes" / "tinyrs.yaml").write_text(
        RECIPE.format(name="tinyrs", pkgs="rustc-web, cargo-web", depends="", fname=fname, sha=sha).replace(
            "cargo-web]}", "cargo-web], rust: debian-rustc-web}"
        )
    )
    made = []
    xtc = accelerated.XtcImage(
        tag="rvport/xtc:debian-trixie-xtc-rust-amd64-0123456789ab",
        image_id="sha256:" + "5" * 64,
        platform="linux/amd64",
        gcc_major="14",
        packages={**XGCC, **RUST},
        rust=True,
    )

    def ensure_prefix(base, rust=False, **kw):
        made.append((base.tag, rust))
        return xtc

    monkeypatch.setattr(accelerated, "ensure_prefix", ensure_prefix)
    p = _plan(load_catalogue(tmp_path / "recipes"), "tinyrs")
    p = dataclasses.replace(p, stages=(dataclasses.replace(p.stages[0], mode=Mode.ACCELERATED),))
    (out / "bake").mkdir(parents=True)
    return p, bake.BakeOptions(output=out, fetch=fopts), made


def test_bake_checks_an_accelerated_rust_stage_against_the_rust_prefix(setup, tmp_path, monkeypatch):
    """The riscv64 base already has another rustc-web than the prefix's: refused at export, as `rvport build`
    refuses it (bake used to compare the C compilers only)."""
    p, opts, made = _rust_stage(setup, tmp_path, monkeypatch)
    base = dataclasses.replace(BASE, packages={**GCC, **RUST, "rustc-web": "1.95.0+dfsg1-1"})
    with pytest.raises(accelerated.ToolchainMismatch, match="stage rustc-web 1.95.0"):
        bake.bake_document(
            p,
            opts,
            bases=dict(
                bases(), **{"debian-trixie@linux/riscv64": base, "debian-trixie-xtc-rust@linux/amd64": XRBASE}
            ),
        )
    assert made == [(XRBASE.tag, True)]


def test_packages_the_toolchain_target_adds_are_left_to_the_stage(setup, tmp_path, monkeypatch):
    """rustc-web comes with the toolchain target, not built at export: its version is checked in the stage
    (setup.sh); what the base has is checked now."""
    p, opts, made = _rust_stage(setup, tmp_path, monkeypatch)
    base = dataclasses.replace(BASE, packages=dict(GCC))
    doc = bake.bake_document(
        p,
        opts,
        bases=dict(
            bases(), **{"debian-trixie@linux/riscv64": base, "debian-trixie-xtc-rust@linux/amd64": XRBASE}
        ),
    )
    text = (opts.output / "bake" / "tinyrs" / "Dockerfile").read_text()
    assert (
        'ENV RUSTC="/opt/xtc/rust/bin/rustc"' in text
        and "COPY --from=rvport/xtc:debian-trixie-xtc-rust" in text
    )
    assert doc["group"]["toolchains"]["targets"] == ["tinyrs-toolchain"]
    older = dataclasses.replace(BASE, packages={**GCC, "gcc-14": "14.2.0-18"})
    shutil.rmtree(opts.output / "bake")
    (opts.output / "bake").mkdir()
    with pytest.raises(accelerated.ToolchainMismatch, match="stage gcc-14 14.2.0-18"):
        bake.bake_document(
            p,
            opts,
            bases=dict(
                bases(),
                **{"debian-trixie@linux/riscv64": older, "debian-trixie-xtc-rust@linux/amd64": XRBASE},
            ),
        )


def test_base_image_override_leaves_the_cross_base_alone(setup, tmp_path, monkeypatch):
    """--base-image names the riscv64 base: a cross stage still compiles in the build-platform base."""
    from tests.unit.engine.test_stage import OVERRIDE, engine, xtc_base_tag

    cat, fopts, out = setup
    fname, sha = _tarball("tinystatic-1.0", {"Cargo.toml": '[package]\nname = "t"\n'}, tmp_path / "mirror")
    (tmp_path / "recipes" / "tinystatic.yaml").write_text(STATICLIB.format(fname=fname, sha=sha))
    p = _plan(load_catalogue(tmp_path / "recipes"), "tinystatic", mode=Mode.CROSS)
    engine(monkeypatch, {OVERRIDE: "sha256:" + "a" * 64, xtc_base_tag(): "sha256:" + "b" * 64})
    (out / "bake").mkdir(parents=True)
    doc = bake.bake_document(p, bake.BakeOptions(output=out, fetch=fopts, base_image=OVERRIDE))
    assert f"FROM {xtc_base_tag()}" in (out / "bake" / "tinystatic-toolchain" / "Dockerfile").read_text()
    assert doc["target"]["tinystatic-toolchain"]["platforms"] == ["linux/amd64"]


def _with_runtime(setup, tmp_path):
    """The plan of a tiny recipe with a runtime image (RUNTIME), its source in the setup's mirror."""
    _cat, fopts, _out = setup
    fname, sha = _tarball("tinyrt-1.0", {"setup.py": "print('hi')\n"}, fopts.mirror)
    recipes_dir = tmp_path / "rt"
    recipes_dir.mkdir()
    (recipes_dir / "tinyrt.yaml").write_text(
        RUNTIME.format(name="tinyrt", pkgs="", depends="", fname=fname, sha=sha)
    )
    return _plan(load_catalogue([recipes_dir]), "tinyrt")


def test_a_runtime_image_is_no_bake_target_and_the_export_says_rvport_build_makes_it(setup, tmp_path):
    _cat, fopts, out = setup
    p = _with_runtime(setup, tmp_path)
    (out / "bake").mkdir(parents=True)
    doc = bake.bake_document(p, bake.BakeOptions(output=out, fetch=fopts), bases=bases())
    assert sorted(doc["target"]) == ["tinyrt"] and not any(
        "runtime" in n for g in doc["group"].values() for n in g["targets"]
    )
    assert bake.runtime_notes(p) == [
        "tinyrt's runtime image rvport/tinyrt:local is not a bake target: "
        "`rvport build tinyrt==1.0` makes it from the verified artifacts (docs/ci.md)"
    ]
    assert bake.runtime_notes(_plan(setup[0], "tinylib")) == []


def test_a_python_matrix_is_a_target_per_stage_and_a_group_per_python(setup):
    cat, fopts, out = setup
    sid = dataclasses.replace(
        BASE,
        spec="debian-sid",
        tag="rvport/base:debian-sid-riscv64-0123456789ab",
        image_id="sha256:" + "3" * 64,
    )
    req = Request(
        refs=("tinylib",),
        profile=get_profile("rvv256"),
        mode=Mode.QEMU,
        manylinux="off",
        pythons=("3.13", "3.14"),
    )
    p = make_plan(cat, req, X86)
    doc = bake.bake_document(
        p, bake.BakeOptions(output=out, fetch=fopts), bases={**bases(), "debian-sid@linux/riscv64": sid}
    )
    assert doc["group"]["stages"]["targets"] == ["tinylib-cp313", "tinylib-cp314"]
    assert {"tinylib-cp313-toolchain", "tinylib-cp314-toolchain"} <= set(doc["target"])
    assert doc["group"]["cp313"] == {"targets": ["tinylib-cp313"]}
    assert doc["group"]["cp314"] == {"targets": ["tinylib-cp314"]}
    # each Python's toolchain image starts from its own base
    froms = {
        n: (out / "bake" / f"tinylib-{n}-toolchain" / "Dockerfile").read_text() for n in ("cp313", "cp314")
    }
    assert BASE.tag in froms["cp313"] and sid.tag not in froms["cp313"]
    assert sid.tag in froms["cp314"] and BASE.tag not in froms["cp314"]
