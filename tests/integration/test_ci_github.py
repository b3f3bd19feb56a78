"""rvport as a GitHub Actions step, for real: folded `::group::` lines, the job summary appended to
$GITHUB_STEP_SUMMARY and JUnit XML, from a cached msgspec build and from a tiny failing stage; and the
buildx cache options refused on the docker driver."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from .conftest import offline_mirror, rvport, tarball
from .test_build_tiny import FAIL_RECIPE

pytestmark = pytest.mark.integration

GH = {"GITHUB_ACTIONS": "true", "GITLAB_CI": ""}


@pytest.mark.network
def test_github_step_summary_groups_and_junit_from_a_cached_build(engine, tmp_path):
    out = tmp_path / "out"
    args = (
        "build",
        "msgspec",
        "--profile",
        "rvv256",
        "--tag",
        "local",
        "--mode",
        "qemu",
        "--output",
        str(out),
    )
    cp = rvport(*args)  # cached when an earlier test built it; otherwise this builds it
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    summary = tmp_path / "step-summary.md"
    summary.write_text("previous step\n")
    cp = rvport(*args, "--junit", str(tmp_path / "junit.xml"), env=dict(GH, GITHUB_STEP_SUMMARY=str(summary)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    err = cp.stderr.splitlines()
    assert "::group::msgspec: msgspec==0.23.0 [qemu]" in err and "::endgroup::" in err
    assert err.index("::group::msgspec: msgspec==0.23.0 [qemu]") < err.index("::endgroup::")
    assert "\x1b[" not in cp.stderr  # no spinners, no colour codes in the CI log

    doc = json.loads((out / "result.json").read_text())
    (art,) = doc["artifacts"]
    md = summary.read_text()
    assert md.startswith("previous step\n## rvport build: ok")
    assert "Cache hits: 1 of 1 stage(s) reused verified artifacts (msgspec)" in md
    assert "| msgspec | 0.23.0 | qemu | cached | ok | passed |" in md
    assert f"| `{art['path']}` |" in md and f"`{art['sha256']}`" in md

    case = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase")
    assert case.get("name") == "msgspec==0.23.0" and case.find("failure") is None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["verify"] == "ok" and props["smoke"] == "passed" and props["cache"] == "hit"


def test_a_failing_stage_in_junit_and_summary(engine, tmp_path):
    mirror, recipes, out = tmp_path / "mirror", tmp_path / "recipes", tmp_path / "out"
    offline_mirror(mirror)
    recipes.mkdir()
    fname, sha = tarball("broken-1.0.0", {"README": "nothing to build\n"}, mirror)
    (recipes / "broken.yaml").write_text(
        FAIL_RECIPE.format(name="broken", cmd="exit 3", fname=fname, sha=sha)
    )
    summary = tmp_path / "summary.md"
    cp = rvport(
        "build",
        "broken",
        "--recipes",
        str(recipes),
        "--mirror",
        str(mirror),
        "--offline",
        "--output",
        str(out),
        "--mode",
        "qemu",
        "--junit",
        str(tmp_path / "junit.xml"),
        env=dict(GH, GITHUB_STEP_SUMMARY=str(summary)),
    )
    assert cp.returncode == 7, cp.stdout + cp.stderr
    assert "::group::broken: broken==1.0.0 [qemu]" in cp.stderr.splitlines()
    failure = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase/failure")
    assert failure is not None and "docker buildx build failed" in failure.get("message")
    assert "starting the build of broken" in failure.text
    md = summary.read_text()
    assert "## rvport build: failed" in md and "failing stage: **broken**" in md


def test_cache_export_on_the_docker_driver_is_a_usage_error(engine, tmp_path):
    cp = rvport(
        "build",
        "msgspec",
        "--cache-to",
        str(tmp_path / "c"),
        "--cache-from",
        str(tmp_path / "c"),
        "--output",
        str(tmp_path / "out"),
    )
    info = rvport("doctor").stdout
    if "docker-container" in info:
        pytest.skip("the default builder is not the docker driver here")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "docker driver" in cp.stderr and "docker buildx create" in cp.stderr
    assert not (tmp_path / "out" / "result.json").exists()
