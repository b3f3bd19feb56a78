"""Real buildx stages on tiny projects made by the tests: a Rust staticlib and a cgo Go program linked with
it (the shape of glide-ffi and the semantic router), a failing stage, and an interrupted one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

from rvport import manifest

from .conftest import ONE_TARBALL, TRUE_EXECUTABLE, offline_mirror, rvport, tarball

pytestmark = pytest.mark.integration

RUST = {
    "Cargo.toml": '[package]\nname = "tinyffi"\nversion = "1.0.0"\nedition = "2021"\n\n'
    '[lib]\ncrate-type = ["staticlib"]\n\n[profile.release]\nopt-level = 2\n',
    "Cargo.lock": 'version = 3\n\n[[package]]\nname = "tinyffi"\nversion = "1.0.0"\n',
    "src/lib.rs": '#[no_mangle]\npub extern "C" fn tiny_mul_add(a: i64, b: i64, c: i64) -> i64 { a * b + c '
    "}\n",
}
GO = {
    "go.mod": "module example.org/tinygo\n\ngo 1.22\n",
    "main.go": (
        "package main\n\n/*\n#cgo LDFLAGS: /deps/tinyrust/libtinyffi.a -ldl -lpthread -lm\n"
        "#include <stdint.h>\n"
        'int64_t tiny_mul_add(int64_t a, int64_t b, int64_t c);\n*/\nimport "C"\nimport "fmt"\n\n'
        'func main() { fmt.Println("ffi says", int64(C.tiny_mul_add(6, 7, 0))) }\n'
    ),
}

RUST_RECIPE = (
    """\
schema: 1
name: tinyrust
kind: cargo-staticlib
toolchain: {{debian: [cargo, rustc]}}
env:
  CARGO_NET_OFFLINE: "true"
build:
  - cargo build --release --offline --locked
  - cp target/release/libtinyffi.a "$RVPORT_OUT/"
outputs:
  - {{glob: "*.a", type: staticlib, isa: baseline}}
"""
    + ONE_TARBALL
)
GO_RECIPE = """\
schema: 1
name: tinygo
kind: go-binary
toolchain: {{debian: [golang-go]}}
env:
  CGO_ENABLED: "1"
  GOFLAGS: -mod=mod
  GOTOOLCHAIN: local
build:
  - go build -o "$RVPORT_OUT/tinygo" .
outputs:
  - {{glob: tinygo, type: executable, isa: baseline}}
smoke:
  script: |
    #!/bin/sh
    set -eu
    out=$(/artifacts/tinygo)
    echo "$out"
    [ "$out" = "ffi says 42" ]
versions:
  - version: "1.0.0"
    depends: [tinyrust]
    sources:
      - name: src
        url: https://example.invalid/{fname}
        sha256: {sha}
"""
FAIL_RECIPE = (
    """\
schema: 1
name: {name}
kind: python-wheel
build:
  - echo starting the build of {name}
  - {cmd}
outputs:
  - {{glob: "*.whl", type: wheel}}
"""
    + ONE_TARBALL
)

# A stage that compiles nothing (the riscv64 base's own /bin/true is its executable) and a smoke test that
# prints a marker and exits with {rc}
SMOKE_RECIPE = (
    TRUE_EXECUTABLE
    + """\
smoke:
  script: |
    #!/bin/sh
    /artifacts/{name} && echo "the smoke marker of {name}"
    exit {rc}
"""
    + ONE_TARBALL
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    mirror, recipes = root / "mirror", root / "recipes"
    offline_mirror(mirror)
    recipes.mkdir()
    f, s = tarball("tinyrust-1.0.0", RUST, mirror)
    (recipes / "tinyrust.yaml").write_text(RUST_RECIPE.format(fname=f, sha=s))
    f, s = tarball("tinygo-1.0.0", GO, mirror)
    (recipes / "tinygo.yaml").write_text(GO_RECIPE.format(fname=f, sha=s))
    f, s = tarball("broken-1.0.0", {"README": "nothing to build\n"}, mirror)
    (recipes / "broken.yaml").write_text(FAIL_RECIPE.format(name="broken", fname=f, sha=s, cmd="exit 3"))
    for name, rc in (("smokefail", 3), ("smokepass", 0)):
        f, s = tarball(f"{name}-1.0.0", {"README": "nothing to compile\n"}, mirror)
        (recipes / f"{name}.yaml").write_text(SMOKE_RECIPE.format(name=name, rc=rc, fname=f, sha=s))
    f, s = tarball("slow-1.0.0", {"README": "slow\n"}, mirror)
    # a nonce per run: BuildKit must never find this step in its cache
    (recipes / "slow.yaml").write_text(
        FAIL_RECIPE.format(name="slow", fname=f, sha=s, cmd=f"echo {uuid.uuid4().hex}; sleep 631")
    )
    return root


def common(tiny: Path, out: Path) -> list[str]:
    return [
        "--recipes",
        str(tiny / "recipes"),
        "--mirror",
        str(tiny / "mirror"),
        "--offline",
        "--output",
        str(out),
        "--profile",
        "rvv256",
        "--tag",
        "test",
        "--mode",
        "qemu",
    ]


def test_rust_staticlib_under_qemu(engine, tiny, tmp_path):
    """A Rust static library compiled under QEMU with the profile's CPU. Its Go user is built in cross mode
    (tests/integration/test_cross.py): Go >= 1.23 can hang at random when it compiles under qemu-user
    (golang/go#70329; seen here, a `go build` parked in futex_wait for 14 minutes), and the plan warns of
    it."""
    out = tmp_path / "out"
    cp = rvport("build", "tinyrust", *common(tiny, out))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    (rust,) = doc["stages"]
    assert rust["status"] in ("ok", "cached") and rust["verify"]["ok"]
    assert (out / "artifacts" / "tinyrust" / "libtinyffi.a").is_file()
    assert rust["env"]["QEMU_CPU"].startswith("rv64,v=true,vlen=256")
    # the exported files are what result.json says
    cp = rvport("verify", "artifacts", str(out / "artifacts"), "--profile", "rvv256", "--isa", "baseline")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = rvport("plan", "tinygo", *common(tiny, tmp_path / "plan"))
    assert cp.returncode == 0 and "golang/go#70329" in cp.stdout + cp.stderr, cp.stdout + cp.stderr


def test_a_failing_stage_writes_result_json_and_exits_7(engine, tiny, tmp_path):
    out = tmp_path / "out"
    cp = rvport("build", "broken", *common(tiny, out))
    assert cp.returncode == 7, cp.stdout + cp.stderr
    assert "error:" in cp.stderr and "Traceback" not in cp.stderr
    doc = json.loads((out / "result.json").read_text())
    assert doc["status"] == "failed" and doc["failing_stage"] == "broken"
    (st,) = doc["stages"]
    assert st["status"] == "failed" and st["log_tail"]
    assert any("starting the build of broken" in line for line in st["log_tail"])
    assert not (out / "artifacts" / "broken").exists()
    assert (out / "logs" / "broken.log").is_file()


def test_a_failing_smoke_test_shows_and_records_what_it_printed_and_exits_7(engine, tiny, tmp_path):
    from rvport.sources import default_cache_dir

    out = tmp_path / "out"
    cp = rvport("build", "smokefail", *common(tiny, out))
    assert cp.returncode == 7, cp.stdout + cp.stderr
    assert "smokefail==1.0.0: the smoke test failed (exit status 3)" in cp.stderr, cp.stderr
    assert "the smoke marker of smokefail" in cp.stderr and "Traceback" not in cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    assert doc["status"] == "failed" and doc["failing_stage"] == "smokefail"
    (st,) = doc["stages"]
    assert st["status"] == "failed" and st["verify"]["ok"]  # built and verified; the smoke test failed
    assert st["smoke"]["status"] == "failed" and st["smoke"]["exit_status"] == 3
    assert "the smoke marker of smokefail" in st["smoke"]["output"]
    assert "the smoke marker of smokefail" in st["log_tail"] and "exit status 3" in st["error"]
    # nothing kept: no artifacts exported, no artifact cache entry
    assert not (out / "artifacts" / "smokefail").exists()
    assert st["key"] and not (default_cache_dir() / "artifacts" / st["key"]).exists()
    # a passing one is recorded as before
    cp = rvport("build", "smokepass", *common(tiny, out))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (st,) = json.loads((out / "result.json").read_text())["stages"]
    assert st["smoke"] == {"status": "passed", "output": ["the smoke marker of smokepass"]}


def test_ctrl_c_stops_the_build_and_leaves_no_artifact(engine, tiny, tmp_path):
    out = tmp_path / "out"
    # started with SIGINT ignored, as a shell without job control starts background jobs: rvport must still
    # stop
    proc = subprocess.Popen(
        [sys.executable, "-m", "rvport", "--ci", "build", "slow", *common(tiny, out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 900
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if "starting the build of slow" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=300)
    assert proc.returncode == 8, "".join(seen) + rest
    doc = json.loads((out / "result.json").read_text())
    assert doc["status"] == "interrupted" and doc["failing_stage"] == "slow"
    assert not (out / "artifacts").exists() or not any((out / "artifacts").iterdir())
    # the buildx process is gone: nothing is still running the sleep
    time.sleep(2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 631" not in ps


def test_no_cache_compiles_afresh(engine, tiny, tmp_path):
    out = tmp_path / "out"
    assert rvport("build", "tinyrust", *common(tiny, out)).returncode == 0
    cp = rvport("build", "tinyrust", "--no-cache", *common(tiny, out))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (st,) = json.loads((out / "result.json").read_text())["stages"]
    # the build step runs again through a new RVPORT_FRESH, not buildx's --no-cache (which would empty the
    # compiler cache's mount): docs/compiler-cache.md
    assert st["status"] == "ok" and "RVPORT_FRESH=" in st["build_command"]
    assert "--no-cache" not in st["build_command"]
    assert "Compiling tinyffi" in cp.stdout + cp.stderr  # cargo really ran in this build
    # the Rust that ran is recorded: Debian's riscv64 rustc and cargo, under QEMU
    assert st["rust"]["rustc"].startswith("rustc ") and st["rust"]["cargo"].startswith("cargo ")
    assert st["rust"]["host"] == "riscv64gc-unknown-linux-gnu"
    assert st["toolchain_packages"]["rustc"].split("+")[0] in st["rust"]["rustc"]
    assert [a["path"] for a in json.loads((out / "result.json").read_text())["artifacts"]] == [
        "tinyrust/libtinyffi.a"
    ]
