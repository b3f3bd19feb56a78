"""The heavy recipes (torch, vllm, glide-ffi, semantic-router) and the pinned toolchains, as data."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import textwrap
from pathlib import Path

import pytest
import yaml

from rvport import proc
from rvport.catalogue.recipes import load_catalogue
from rvport.catalogue.toolchains import load_toolchains
from rvport.errors import RecipeError
from rvport.resources import builtin
from tests.fixtures.hosttools import needs
from tests.fixtures.schemas import validate

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "vllm", "glide-ffi", "semantic-router")


@pytest.fixture(scope="module")
def cat():
    return load_catalogue(builtin("recipes"))


@pytest.fixture(scope="module")
def toolchains():
    return load_toolchains(builtin("toolchains"))


def test_heavy_recipes_load(cat):
    for name in HEAVY:
        assert name in cat.names
    assert cat.resolve("torch").version == "2.14.0"
    assert cat.resolve("vllm").version == "0.33.0"
    assert cat.resolve("glide-ffi").version == "2.3.0"
    assert cat.resolve("semantic-router").version == "0.3.0"


def test_torch_flags(cat):
    r = cat.resolve("torch")
    assert r.kind == "torch-wheel"
    env = r.env
    for flag in (
        "USE_CUDA",
        "USE_ROCM",
        "USE_XPU",
        "USE_MPS",
        "USE_MKLDNN",
        "USE_FBGEMM",
        "USE_NNPACK",
        "USE_QNNPACK",
        "USE_XNNPACK",
        "USE_KINETO",
        "BUILD_TEST",
    ):
        assert env[flag] == "0", flag
    assert env["USE_OPENMP"] == "1" and env["BLAS"] == "OpenBLAS" and env["USE_LAPACK"] == "1"
    assert env["USE_DISTRIBUTED"] == "1" and env["USE_GLOO"] == "1"  # vLLM's CPU worker needs gloo
    assert env["PYTORCH_BUILD_VERSION"] == "${RVPORT_VERSION}"
    assert env["MAX_JOBS"] == "${RVPORT_JOBS}"
    assert "${RVPORT_CFLAGS}" in env["CFLAGS"] and "${RVPORT_CFLAGS}" in env["CXXFLAGS"]
    assert "libopenblas-dev" in r.toolchain.debian
    (src,) = r.sources
    assert src.url == "https://github.com/pytorch/pytorch/releases/download/v2.14.0/pytorch-v2.14.0.tar.gz"
    assert src.sha256 is None and not r.hermetic  # to be recorded on first verified fetch
    assert any('"$RVPORT_OUT"' in c and "--no-index" in c for c in r.build)
    assert [o.type for o in r.outputs] == ["wheel"]
    assert "backward()" in r.smoke and "@" in r.smoke


def test_vllm_flags(cat):
    r = cat.resolve("vllm")
    env = r.env
    assert env["VLLM_TARGET_DEVICE"] == "cpu"
    assert "-DVLLM_RVV_VLEN=${VLLM_RVV_VLEN}" in shlex.split(env["CMAKE_ARGS"])
    assert "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in shlex.split(env["CMAKE_ARGS"])
    assert "VLLM_CPU_RVV_BF16" not in env  # exported by the stage for rvv256-bf16 only
    assert env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "${RVPORT_VERSION}"
    # torch is Debian sid's, pinned by version and .deb sha256 (no torch stage)
    assert r.depends == () and r.toolchain.base == "debian-sid"
    assert {(p.name, p.version) for p in r.toolchain.pins} == {
        ("python3-torch", "2.14.1+dfsg-1"),
        ("libtorch2.14", "2.14.1+dfsg-1"),
        ("libtorch-dev", "2.14.1+dfsg-1"),
    }
    # the sdist, and oneDNN for the vector profiles only (tests/unit/sources/test_source_profiles.py)
    sdist, onednn = r.sources
    assert onednn.name == "onednn" and "rv64gc" not in onednn.profiles
    assert (sdist.project, sdist.version) == ("vllm", "0.33.0")
    assert sdist.sha256 == "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"
    assert env["FETCHCONTENT_SOURCE_DIR_ONEDNN"] == "/src/_deps/onednn"
    assert "accelerated" in r.modes
    # the libgomp trap (GCC's own libgomp.so as OPEN_MP) and the Requires-Dist edit (torch 2.14.*)
    assert any("-DOPEN_MP=$gomp" in c and "/usr/lib/gcc/riscv64-linux-gnu/" in c for c in r.build)
    assert any("requirements/cpu.txt" in c and "torch==2.14.*" in c for c in r.build)
    assert not [c for c in r.build if "pip install" in c]
    assert [(o.type, o.isa) for o in r.outputs] == [("wheel", "profile")]
    # the trap is documented where the recipe is read
    text = r.file.read_text()
    assert "/proc/cpuinfo" in text and "zvfhmin" in text and "zvfbfmin" in text and "QEMU_CPU" in text


def test_vllm_knobs_exist_in_every_profile():
    profiles = yaml.safe_load((builtin("profiles.yaml")).read_text())["profiles"]
    for name, p in profiles.items():
        assert p["knobs"]["VLLM_RVV_VLEN"] in {"0", "128", "256"}, name


def test_glide_ffi(cat):
    r = cat.resolve("glide-ffi")
    assert r.kind == "cargo-staticlib"
    assert set(r.modes) == {"native", "qemu", "cross", "accelerated"}
    # hermetic: every git source pinned by commit and tree digest, the lock pinned by sha256, crates vendored
    assert r.hermetic and r.vendor == "cargo"
    by_name = {s.name: s for s in r.sources}
    assert set(by_name) == {"glide", "glide-go", "uuid", "protobuf-go"}
    assert all(s.commit and s.tree and s.tree.startswith("sha256:") and not s.sha256 for s in r.sources)
    glide, client = by_name["glide"], by_name["glide-go"]
    assert glide.repo == client.repo == "https://github.com/valkey-io/valkey-glide"
    assert (
        glide.commit == "180f3883f8c98bbf6647e3da4660edcbc091c5bc"
        and glide.tag == "v2.3.0"
        and glide.dest is None
    )
    # the Go client's tag commits prebuilt archives (none for riscv64) that its content pin leaves out
    assert client.tag == "go/v2.3.0" and client.exclude == ("go/rustbin/",) and client.dest == "_smoke/glide"
    (lock,) = r.lockfiles
    assert lock.dest == "ffi/Cargo.lock" and len(lock.sha256) == 64
    assert "[[package]]" in lock.path.read_text()
    assert {f.dest for f in r.files} == {"_smoke/roundtrip/go.mod", "_smoke/roundtrip/main.go"}
    gomod = next(f for f in r.files if f.dest.endswith("go.mod")).path.read_text()
    for mod, where in (
        ("github.com/valkey-io/valkey-glide/go/v2", "../glide/go"),
        ("github.com/google/uuid", "../uuid"),
        ("google.golang.org/protobuf", "../protobuf"),
    ):
        assert f"{mod} => {where}" in gomod  # every module from a pinned source, none downloaded
    # Debian's rustc-web (1.96): the crates need rustc >= 1.88, trixie's rustc is 1.85
    assert r.toolchain.rust == "debian-rustc-web" and {"rustc-web", "cargo-web", "golang-go"} <= set(
        r.toolchain.debian
    )
    assert "protobuf-compiler" in r.toolchain.debian
    cargo = [c for c in r.build if "cargo build" in c]
    assert cargo and "--release" in cargo[0] and "--locked" in cargo[0] and "--offline" in cargo[0]
    assert "--target" in cargo[0] and "$RVPORT_RUST_TARGET" in cargo[0] and cargo[0].startswith("cd /src/ffi")
    assert "CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER" in r.env and r.env["GOPROXY"] == "off"
    assert any("libglide_ffi.a" in c and "$RVPORT_OUT" in c for c in r.build)
    assert [(o.glob, o.type, o.isa) for o in r.outputs] == [
        ("libglide_ffi.a", "staticlib", "baseline"),
        ("glide-roundtrip", "executable", "baseline"),
    ]
    assert {"create_client", "close_client", "command", "batch"} <= set(r.outputs[0].exports)
    # the smoke test is a round trip against a real server, not a symbol listing
    assert r.smoke.startswith("#!/bin/sh") and "valkey-server" in r.smoke and "glide-roundtrip" in r.smoke
    assert "nm " not in r.smoke and r.smoke_debian == ("valkey-server",)


def test_semantic_router(cat):
    r = cat.resolve("semantic-router")
    assert r.kind == "go-binary"
    assert set(r.modes) == {"native", "qemu", "cross"}
    (src,) = r.sources
    assert src.repo == "https://github.com/vllm-project/semantic-router"
    assert src.commit == "9afc5a421886f44085f9070a8fbd878b80724f64" and src.tag == "v0.3.0"
    assert r.depends == ("glide-ffi", "router-ml-binding")
    assert r.vendor == "go"
    # only the router's own module is vendored: the one whose go.sum it pins
    assert r.lock.path == "src/semantic-router/go.sum" and r.lock.dir == "src/semantic-router"
    # go.mod says go 1.24.1: Debian trixie's Go in every mode, no downloaded toolchain
    assert r.toolchain.go is None and "golang-go" in r.toolchain.debian
    env = r.env
    assert env["CGO_ENABLED"] == "1" and env["GOARCH"] == "riscv64"
    ld = shlex.split(env["CGO_LDFLAGS"])
    assert "-L/deps/glide-ffi" in ld and {"-lm", "-ldl", "-lpthread"} <= set(ld)
    assert "-L/tmp/rvport-ml-binding" in ld and "-L/deps/router-ml-binding" not in ld  # a copy (see below)
    assert env["GOFLAGS"] == "-mod=vendor"
    assert [(o.glob, o.type, o.isa) for o in r.outputs] == [
        ("router", "executable", "baseline"),
        ("extproc-client", "executable", "baseline"),
    ]
    assert r.smoke.startswith("#!/bin/sh\n") and "/artifacts/extproc-client" in r.smoke
    # our ExtProc client: a command inside the router's module, built after the router in the same stage
    assert {f.dest for f in r.files} == {
        "src/semantic-router/cmd/rvport-extproc-client/main.go",
        "_rvport/candle-lib-stub.c",
    }
    (router_build, client_build) = [c for c in r.build if "go build" in c]
    assert router_build.endswith('-o "$RVPORT_OUT/router" ./cmd')
    assert client_build.endswith('-o "$RVPORT_OUT/extproc-client" ./cmd/rvport-extproc-client')
    assert [(p.rel, p.strip) for p in r.patches] == [("semantic-router/0.3.0-riscv64-candle-stub.patch", 1)]
    # the stub edit runs on the vendored copies, before the build leaves them
    build = list(r.build)
    edit = build.index("cd src/semantic-router/vendor/github.com/vllm-project/semantic-router")
    assert (
        edit
        < build.index("cd /src/src/semantic-router")
        < next(i for i, c in enumerate(build) if "go build" in c)
    )
    # hermetic: the source pinned by commit and tree digest, every module checked by the pinned go.sum
    assert r.hermetic and src.tree and r.lock.sha256 and "module proxy" in (r.note or "")


ROUTER_REQUIRES = ("github.com/envoyproxy/go-control-plane/envoy", "google.golang.org/grpc")  # in its go.mod


def extproc_client(r):
    """The client's source, pinned with files: into the router's module."""
    (client,) = [f for f in r.files if f.dest.endswith("/cmd/rvport-extproc-client/main.go")]
    return client


def test_the_extproc_client_imports_only_modules_the_router_requires(cat):
    """`go mod vendor` in the router's module vendors the client's imports only when the router's go.mod
    already requires their modules: anything else would stop the vendoring (or need a new go.sum)."""
    text = extproc_client(cat.resolve("semantic-router")).path.read_text()
    assert text.count("import (") == 1 and "\npackage main\n" in text
    imports = re.findall(r'"([^"]+)"', text.split("import (", 1)[1].split(")", 1)[0])
    modules = [p for p in imports if "." in p.split("/")[0]]  # the rest is Go's standard library
    assert modules
    for path in modules:
        assert any(path == m or path.startswith(m + "/") for m in ROUTER_REQUIRES), path


@needs("gofmt")
def test_the_extproc_client_is_gofmt_clean(cat):
    source = extproc_client(cat.resolve("semantic-router")).path
    cp = proc.run(["gofmt", "-l", str(source)], capture=True, check=False, timeout=60)
    assert cp.returncode == 0 and cp.stdout.strip() == "", cp.stdout + (cp.stderr or "")


# the C functions of candle's native library that v0.3.0's pkg/classification calls (unified_classifier*.go)
CANDLE_C_FUNCTIONS = {
    "init_unified_classifier_c",
    "init_lora_unified_classifier",
    "classify_unified_batch",
    "free_unified_batch_result",
    "classify_batch_with_lora",
    "free_lora_batch_result",
}
CANDLE_LIB_DIR = "/tmp/rvport-candle-lib"


def candle_stub(r):
    (stub,) = [f for f in r.files if f.dest.endswith("candle-lib-stub.c")]
    return stub


def test_the_candle_library_stand_in_is_made_where_the_router_link_looks(cat):
    """The router links -lcandle_semantic_router: the stage makes that archive from our C file before the
    router's
    `go build`, in the directory CGO_LDFLAGS names."""
    r = cat.resolve("semantic-router")
    stub = candle_stub(r)
    assert f"-L{CANDLE_LIB_DIR}" in shlex.split(r.env["CGO_LDFLAGS"])
    build = list(r.build)
    compile_c = next(
        i for i, c in enumerate(build) if f"/src/{stub.dest}" in c and c.startswith("$CC $CGO_CFLAGS -c")
    )
    archive = next(
        i
        for i, c in enumerate(build)
        if c.startswith("riscv64-linux-gnu-ar rcs ") and f"{CANDLE_LIB_DIR}/libcandle_semantic_router.a" in c
    )
    router = next(i for i, c in enumerate(build) if '"$RVPORT_OUT/router"' in c)
    assert compile_c < archive < router


@needs("cc", "nm")
def test_the_candle_library_stand_in_defines_what_the_router_calls_and_fails_to_initialise(cat, tmp_path):
    stub = candle_stub(cat.resolve("semantic-router"))
    obj = tmp_path / "stub.o"
    proc.run(
        ["cc", "-O2", "-Wall", "-Werror", "-Wno-unused-parameter", "-c", str(stub.path), "-o", str(obj)],
        capture=True,
        timeout=120,
    )
    nm = proc.run(["nm", "--defined-only", str(obj)], capture=True, timeout=60).stdout
    assert {ln.split()[-1] for ln in nm.splitlines() if " T " in ln} == CANDLE_C_FUNCTIONS
    # both initialisers report failure to a caller that declares them as the router does
    (tmp_path / "main.c").write_text(
        textwrap.dedent("""\
        #include <stdbool.h>
        #include <stddef.h>
        bool init_unified_classifier_c(const char *, const char *, const char *, const char *,
                                       const char **, int, const char **, int, const char **, int, bool);
        bool init_lora_unified_classifier(const char *, const char *, const char *, const char *, bool);
        int main(void) {
            bool a = init_unified_classifier_c("m", "i", "p", "s", NULL, 0, NULL, 0, NULL, 0, true);
            bool b = init_lora_unified_classifier("i", "p", "s", "bert", true);
            return a || b;
        }
        """)
    )
    exe = tmp_path / "main"
    proc.run(["cc", str(tmp_path / "main.c"), str(obj), "-o", str(exe)], capture=True, timeout=120)
    assert proc.run([str(exe)], capture=True, check=False, timeout=60).returncode == 0


ML_COPY_DIR = "/tmp/rvport-ml-binding"


def test_the_router_links_a_copy_of_ml_binding_whose_rust_eh_personality_is_local(cat):
    """GLIDE's and ml-binding's archives both define rust_eh_personality: the stage links a copy of
    ml-binding's
    with that symbol local, made before the router's `go build`, in the directory CGO_LDFLAGS names."""
    r = cat.resolve("semantic-router")
    assert f"-L{ML_COPY_DIR}" in shlex.split(r.env["CGO_LDFLAGS"])
    build = list(r.build)
    (copy,) = [c for c in build if "objcopy" in c]
    assert shlex.split(copy) == [
        "riscv64-linux-gnu-objcopy",
        "--localize-symbol=rust_eh_personality",
        "/deps/router-ml-binding/libml_semantic_router.a",
        f"{ML_COPY_DIR}/libml_semantic_router.a",
    ]
    assert build.index(f"mkdir -p {ML_COPY_DIR}") < build.index(copy)
    assert build.index(copy) < next(i for i, c in enumerate(build) if '"$RVPORT_OUT/router"' in c)


@needs("cc", "ar", "objcopy")
def test_a_local_rust_eh_personality_lets_two_archives_that_define_it_link(tmp_path):
    """The router's link in miniature, with the host's tools: two archives that each define and use
    rust_eh_personality do not link together; after the recipe's objcopy on one of them they do, and each
    calls its own."""
    sources = {
        "a": "int rust_eh_personality(void) { return 1; }\nint from_a(void) { return "
        "rust_eh_personality(); }\n",
        "b": "int rust_eh_personality(void) { return 2; }\nint from_b(void) { return "
        "rust_eh_personality(); }\n",
        "main": "int from_a(void);\nint from_b(void);\n"
        "int main(void) { return !(from_a() == 1 && from_b() == 2); }\n",
    }
    for name, text in sources.items():
        (tmp_path / f"{name}.c").write_text(text)
        proc.run(["cc", "-O0", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=tmp_path, capture=True, timeout=120)
    for name in ("a", "b", "copy"):
        (tmp_path / name).mkdir()
    for name in ("a", "b"):
        proc.run(["ar", "rcs", f"{name}/lib{name}.a", f"{name}.o"], cwd=tmp_path, capture=True, timeout=60)

    def link(b_dir: str):
        return proc.run(
            ["cc", "main.o", "-La", "-la", f"-L{b_dir}", "-lb", "-o", "main"],
            cwd=tmp_path,
            capture=True,
            check=False,
            timeout=120,
        )

    cp = link("b")
    assert cp.returncode != 0 and "multiple definition of `rust_eh_personality'" in cp.stderr
    proc.run(
        ["objcopy", "--localize-symbol=rust_eh_personality", "b/libb.a", "copy/libb.a"],
        cwd=tmp_path,
        capture=True,
        timeout=60,
    )
    assert link("copy").returncode == 0
    assert proc.run([str(tmp_path / "main")], capture=True, check=False, timeout=60).returncode == 0


def test_semantic_router_ml(cat):
    """ml-binding's crate, from the router's own pinned source, vendored beside the tree's own lock file."""
    r, router = cat.resolve("router-ml-binding"), cat.resolve("semantic-router")
    assert r.kind == "cargo-staticlib" and r.hermetic and r.version == router.version
    # the same pin: commit, tree digest, exclusions
    assert [s.to_json() for s in r.sources] == [s.to_json() for s in router.sources]
    assert r.vendor == "cargo" and r.lock.path == "ml-binding/Cargo.lock" and not r.lockfiles
    assert set(r.modes) == {"native", "qemu", "cross"} and r.toolchain.rust is None
    assert {"rustc", "cargo"} <= set(r.toolchain.debian)
    (cargo,) = [c for c in r.build if "cargo " in c]
    assert cargo.startswith("cd ml-binding && cargo rustc --release --locked --offline")
    assert "--crate-type staticlib" in cargo and '--target "$RVPORT_RUST_TARGET"' in cargo
    (out,) = r.outputs
    assert (out.glob, out.type, out.isa) == ("libml_semantic_router.a", "staticlib", "baseline")
    assert {"ml_knn_new", "ml_kmeans_new", "ml_svm_new"} <= set(out.exports)
    # the router links it from /deps/<this recipe>
    assert any(c == f"test -f /deps/{r.name}/libml_semantic_router.a" for c in router.build)


def test_vendor_enum_has_go():
    schema = json.loads((builtin("schemas", "recipe.schema.json")).read_text())
    assert schema["$defs"]["version"]["properties"]["vendor"]["enum"] == ["cargo", "go"]


def test_toolchain_names_used_by_recipes_exist(cat, toolchains):
    for name in HEAVY:
        tc = cat.resolve(name).toolchain
        for pinned in (tc.go, tc.rust):
            if pinned and pinned not in ("debian", "debian-rustc-web"):  # Debian's own packages
                assert pinned in toolchains, (name, pinned)


@pytest.mark.parametrize("name", HEAVY)
def test_pinned_files_match_their_digests(cat, name):
    for r in cat.recipes[name]:
        for f in (*r.patches, *r.lockfiles, *r.files):
            assert f.path.is_file(), f.rel
            assert hashlib.sha256(f.path.read_bytes()).hexdigest() == f.sha256, f.rel


def test_every_pinned_file_in_the_catalogue_matches(cat):
    for versions in cat.recipes.values():
        for r in versions:
            for f in (*r.patches, *r.lockfiles, *r.files):
                assert hashlib.sha256(f.path.read_bytes()).hexdigest() == f.sha256, f.rel


def test_toolchains_load(toolchains):
    assert {n: t.version for n, t in toolchains.items()} == {"go-1.25.14": "1.25.14", "rust-1.90.0": "1.90.0"}
    assert toolchains["go-1.25.14"].file == builtin("toolchains") / "go-1.25.14.yaml"


def test_toolchain_files_pin_their_archives():
    """What the files pin (nothing installs the archives yet; the pins are data, checked here)."""

    def doc(name):
        return yaml.safe_load((builtin("toolchains") / f"{name}.yaml").read_text())

    go, rust = doc("go-1.25.14"), doc("rust-1.90.0")
    assert go["install"] == "/usr/local/go" and go["path"] == ["/usr/local/go/bin"]
    assert go["archives"]["linux/riscv64"] == {
        "url": "https://go.dev/dl/go1.25.14.linux-riscv64.tar.gz",
        "sha256": "c47a1bd1ca1fef087920c9a5d648af77a90071f5af305b6e4c426a3dea982983",
    }
    assert (
        go["archives"]["linux/amd64"]["sha256"]
        == "a21ae5633a269bcd7e90cf767e48225633795e99d831742cbf3397064fee7712"
    )
    assert (
        rust["archives"]["linux/riscv64"]["sha256"]
        == "bc2760ab21d5531fafb867f244f045fa3da7bfd16694ea74f77af3695c298867"
    )
    assert (
        rust["archives"]["linux/amd64"]["sha256"]
        == "bff8974f2d3ee6c0e6ac926b533f65bbdd3697d2c2b925bdae5f45b9eed10a67"
    )
    assert rust["targets"]["riscv64gc-unknown-linux-gnu"] == {
        "url": "https://static.rust-lang.org/dist/rust-std-1.90.0-riscv64gc-unknown-linux-gnu.tar.xz",
        "sha256": "675dc5556d9d879101d2401b693fcf79edac8f00a49249e2e0f19cecd172ce51",
    }
    assert "install.sh" in rust["setup"][0]


def test_toolchain_files_match_schema_with_jsonschema():
    pytest.importorskip("jsonschema")
    schema = json.loads((builtin("schemas", "toolchain.schema.json")).read_text())
    for path in sorted((builtin("toolchains")).glob("*.yaml")):  # every one an archive: bases live in bases/
        validate(yaml.safe_load(path.read_text()), schema)


def test_toolchain_errors_are_located(tmp_path):
    (tmp_path / "go-9.yaml").write_text(
        "schema: 1\nname: go-9\nkind: archive\nversion: '9'\ninstall: /usr/local/go\npath: "
        "[/usr/local/go/bin]\narchives:\n  linux/riscv64: {url: https://example.org/go.tgz, sha256: "
        "nothex}\n  sparc/solaris: {url: https://example.org/go2.tgz, sha256: " + "a" * 64 + "}\n"
    )
    (tmp_path / "other.yaml").write_text(
        "schema: 1\nname: wrong\nkind: archive\nversion: '1'\ninstall: /opt/x\npath: [/opt/x/bin]\n"
        "archives:\n  linux/amd64: {url: https://example.org/x.tgz, sha256: " + "b" * 64 + "}\n"
    )
    (tmp_path / "base.yaml").write_text("schema: 1\nname: base\nkind: debootstrap\nsuite: trixie\n")
    with pytest.raises(RecipeError) as e:
        load_toolchains(tmp_path)
    rendered = e.value.render()
    assert "go-9.yaml:8" in rendered and "sha256" in rendered
    assert "other.yaml:2" in rendered and "differs from its file name" in rendered
    # a base spec is reported, not skipped: bases/ holds them
    assert "base.yaml:3: a base image spec (kind: debootstrap) is not a toolchain" in rendered


def test_toolchain_platform_keys_checked(tmp_path):
    (tmp_path / "go-9.yaml").write_text(
        "schema: 1\nname: go-9\nkind: archive\nversion: '9'\ninstall: /usr/local/go\npath: "
        "[/usr/local/go/bin]\narchives:\n  sparc/solaris: {url: https://example.org/go2.tgz, sha256: "
        + "a" * 64
        + "}\n"
    )
    with pytest.raises(RecipeError) as e:
        load_toolchains(tmp_path)
    assert "go-9.yaml:8" in e.value.render() and "not a build platform" in e.value.render()
