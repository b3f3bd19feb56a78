"""ci/vllm/tests.yaml, vLLM's own CPU tests as a recipe test step: it loads into the vllm recipe (the recipe
schema and its checks), and plans the selection each profile runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from rvport import resources
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.plan.planner import upstream_tests

DATA = Path(__file__).resolve().parents[3] / "ci" / "vllm" / "tests.yaml"


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    d = tmp_path_factory.mktemp("recipes")
    text = resources.builtin("recipes", "vllm.yaml").read_text()
    (d / "vllm.yaml").write_text(text + "tests:\n" + textwrap.indent(DATA.read_text(), "  "))
    return load_catalogue([d]).resolve("vllm")


def test_it_is_a_test_step_of_the_vllm_recipe(vllm):
    assert vllm.tests is not None
    assert {w.file.split("-")[0] for w in vllm.tests.wheels} >= {"pytest", "tblib"}
    assert yaml.safe_load(DATA.read_text())["copy"] == ["tests"]


@pytest.mark.parametrize(
    ("profile", "files"),
    [
        ("rv64gc", ["tests/kernels/attention/test_cpu_attn.py", "tests/kernels/core/test_cpu_activation.py"]),
        (
            "rvv256",
            [
                "tests/kernels/attention/test_cpu_attn.py",
                "tests/kernels/attention/test_cpu_attn.py",
                "tests/kernels/core/test_cpu_activation.py",
                "tests/kernels/test_onednn.py",
                "tests/quantization/test_cpu_wna16.py",
            ],
        ),
    ],
)
def test_each_profile_runs_its_selection(vllm, profile, files):
    planned = upstream_tests(vllm, get_profile(profile))
    assert [f["path"] for f in planned["files"]] == files
    if profile != "rv64gc":
        assert planned["files"][0]["select"].startswith("test_varlen_with_paged_kv_normal_rvv")
