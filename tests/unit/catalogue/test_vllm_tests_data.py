"""vllm.yaml's `serve_tests:`, vLLM's own CPU tests as `rvport serve-check` runs them in the wheelhouse's
environment: it loads (the recipe schema and its checks), plans the selection each profile runs, and is no
`tests:` of the build (its conftest.py needs the wheelhouse)."""

from __future__ import annotations

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.plan.planner import serve_tests, upstream_tests


@pytest.fixture(scope="module")
def vllm():
    return load_catalogue().resolve("vllm")


def test_it_is_the_serving_checks_and_not_the_builds(vllm):
    assert vllm.serve_tests is not None and vllm.tests is None
    assert upstream_tests(vllm, get_profile("rvv256")) is None
    assert {w.file.split("-")[0] for w in vllm.serve_tests.wheels} >= {"pytest", "tblib"}
    assert vllm.serve_tests.copy == ("tests",)


@pytest.mark.parametrize(
    ("profile", "files"),
    [
        ("rv64gc", ["tests/kernels/attention/test_cpu_attn.py", "tests/kernels/core/test_cpu_activation.py"]),
        (
            "rvv256",
            [
                "tests/kernels/attention/test_cpu_attn.py",
                "tests/kernels/core/test_cpu_activation.py",
                "tests/kernels/test_onednn.py",
                "tests/quantization/test_cpu_wna16.py",
            ],
        ),
    ],
)
def test_each_profile_runs_its_selection(vllm, profile, files):
    planned = serve_tests(vllm, get_profile(profile))
    assert [f["path"] for f in planned["files"]] == files
    by = {f["path"]: f for f in planned["files"]}
    assert by["tests/kernels/core/test_cpu_activation.py"]["select"] is None  # the whole file
    attention = planned["files"][0]["select"]
    assert "test_varlen_with_paged_kv_sink) and None-128-96" in attention  # every profile: the isa tests
    assert ("test_varlen_with_paged_kv_normal_rvv" in attention) == (profile != "rv64gc")  # rvv: the kernel
    assert all(f["timeout"] <= 1800 for f in planned["files"])
    # the decode batch only: the mixed batch's prefills ran past the timeout through the emulated vector
    # unit, and took 860 s on rv64gc's scalar kernel, past what a pull request's job can give
    assert "seq_lens0" in attention and "seq_lens1" not in attention and "seq_lens2" not in attention


@pytest.mark.parametrize("profile", ["rvv128", "rvv256", "rvv256-bf16"])
def test_onednn_bf16_gemms_only_where_the_profile_promises_zvfbfwma(vllm, profile):
    """oneDNN offers a bf16 matmul on riscv64 only on a CPU where vfwmaccbf16 executes: a profile without
    Zvfbfwma would report its 16 bf16 GEMMs as failures of the build, which they are not."""
    p = get_profile(profile)
    planned = serve_tests(vllm, p)
    onednn = next(f for f in planned["files"] if f["path"] == "tests/kernels/test_onednn.py")["select"]
    assert "256-128 or 1001-15" in onednn
    assert ("not test_onednn_gemm" in onednn) == ("zvfbfwma" not in p.requires)
