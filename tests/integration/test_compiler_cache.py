"""The compiler cache in real stages: a tiny C project built twice with one --compiler-cache DIR hits the
second time with the same bytes, and built again under another profile it hits nothing (the profile is part
of the key); a build without the cache makes the same bytes too."""

from __future__ import annotations

import json

import pytest

from .conftest import ONE_TARBALL, offline_mirror, rvport, tarball

pytestmark = pytest.mark.integration

SOURCES = {
    "main.c": "#include <stdio.h>\nint triple(int);\nint quad(int);\n"
    'int main(void) { printf("%d %d\\n", triple(2), quad(2)); return 0; }\n',
    "triple.c": "int triple(int x) { return 3 * x; }\n",
    "quad.c": '#include "quad.h"\nint quad(int x) { return QUAD(x); }\n',
    "quad.h": "#define QUAD(x) (4 * (x))\n",
}
RECIPE = (
    """\
schema: 1
name: tinyc
kind: go-binary
modes: [qemu]
build:
  - for f in main triple quad; do cc $RVPORT_CFLAGS -O2 -c $f.c -o $f.o; done
  - cc $RVPORT_CFLAGS main.o triple.o quad.o -o "$RVPORT_OUT/tinyc"
outputs:
  - {{glob: tinyc, type: executable, isa: baseline}}
smoke:
  script: |
    #!/bin/sh
    set -eu
    [ "$(/artifacts/tinyc)" = "6 8" ]
"""
    + ONE_TARBALL
)


def _build(tmp_path, name, profile, *cache_args):
    out = tmp_path / name
    cp = rvport(
        "build",
        "tinyc",
        "--recipes",
        str(tmp_path / "recipes"),
        "--mirror",
        str(tmp_path / "mirror"),
        "--offline",
        "--output",
        str(out),
        "--cache-dir",
        str(tmp_path / f"cache-{name}"),  # no artifact cache: every build compiles
        "--no-cache",
        "--profile",
        profile,
        "--tag",
        "test",
        "--mode",
        "qemu",
        *cache_args,
    )
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    (st,) = json.loads((out / "result.json").read_text())["stages"]
    return st


def test_a_tiny_c_project_hits_the_second_time_and_not_under_another_profile(engine, tmp_path):
    offline_mirror(tmp_path / "mirror")
    (tmp_path / "recipes").mkdir()
    f, sha = tarball("tinyc-1.0.0", SOURCES, tmp_path / "mirror")
    (tmp_path / "recipes" / "tinyc.yaml").write_text(RECIPE.format(fname=f, sha=sha))
    ccache = ["--compiler-cache", str(tmp_path / "ccache")]
    cold = _build(tmp_path, "cold", "rvv256", *ccache)["compiler_cache"]
    assert cold["use"] == "dir" and cold["misses"] == 3 and cold["hits"] == 0
    assert cold["uncacheable"] >= 1 and cold["export"]["status"] == "exported"  # the link is uncacheable
    warm_stage = _build(tmp_path, "warm", "rvv256", *ccache)
    warm = warm_stage["compiler_cache"]
    assert warm["import"]["status"] == "imported" and (warm["hits"], warm["misses"]) == (3, 0)
    assert warm["key"] == cold["key"] and warm["size_after"] >= cold["size_after"] > 0
    other = _build(tmp_path, "other", "rvv128", *ccache)["compiler_cache"]  # the same cache, flags differ
    assert (other["hits"], other["misses"]) == (0, 3) and other["key"] != cold["key"]
    none = _build(tmp_path, "none", "rvv256", "--no-compiler-cache")
    assert none["compiler_cache"]["use"] == "off" and "hits" not in none["compiler_cache"]
    sha = {s["artifacts"][0]["sha256"] for s in (warm_stage, none)}
    assert len(sha) == 1, "a warm compiler cache changed the bytes of the output"


def test_the_engines_cache_is_kept_between_two_builds_that_compile_afresh(engine, tmp_path):
    """No --compiler-cache: the engine's cache mount. Both builds have --no-cache (each build step runs
    again); the second hits what the first stored. Sources of their own (a symbol no other run compiles) so
    that what earlier runs left in the engine's cache cannot hit the first time."""
    import secrets

    offline_mirror(tmp_path / "mirror")
    (tmp_path / "recipes").mkdir()
    nonce = secrets.token_hex(8)
    own = {
        k: v + (f'const char *tinyc_{k[:-2]}_{nonce} = "{nonce}";\n' if k.endswith(".c") else "")
        for k, v in SOURCES.items()
    }
    f, sha = tarball("tinyc-1.0.0", own, tmp_path / "mirror")
    (tmp_path / "recipes" / "tinyc.yaml").write_text(RECIPE.format(fname=f, sha=sha))
    first = _build(tmp_path, "first", "rvv256")["compiler_cache"]
    assert first["use"] == "engine" and (first["hits"], first["misses"]) == (0, 3), first
    second = _build(tmp_path, "second", "rvv256")["compiler_cache"]
    assert second["use"] == "engine" and (second["hits"], second["misses"]) == (3, 0), second
    assert second["size_before"] > 0, second
