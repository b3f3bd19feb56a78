"""The CI entry points and their docs stay true: action.yml, the GitLab template, the examples in docs/ci.md,
and docs/commands.md against the Typer app (no Docker)."""

from __future__ import annotations

import re
from pathlib import Path

import typer
import yaml

from rvport.cli.app import app

ROOT = Path(__file__).resolve().parents[3]


def _action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text())


def _yaml_blocks(md: str) -> list[dict]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", md, re.S)]


def test_action_is_a_composite_that_sets_up_installs_and_builds_without_uploading():
    a = _action()
    assert a["runs"]["using"] == "composite"
    assert {"recipes", "profile", "output", "cache"} <= set(a["inputs"])
    assert a["inputs"]["recipes"]["required"] is True
    runs = "\n".join(s.get("run", "") for s in a["runs"]["steps"])
    assert "$GITHUB_ACTION_PATH/scripts/setup-host" in runs and (ROOT / "scripts/setup-host").is_file()
    assert 'pip install -q "$GITHUB_ACTION_PATH"' in runs
    assert "rvport --ci build" in runs and "--cache-dir" in runs and "--junit" in runs
    assert not any("uses" in s for s in a["runs"]["steps"])  # uploads and caches nothing itself
    for s in a["runs"]["steps"]:  # inputs reach shells through env only
        assert "${{" not in s.get("run", ""), s["name"]


def test_gitlab_template_defines_a_job_with_cache_and_junit_report():
    doc = yaml.safe_load((ROOT / "ci/gitlab/rvport.gitlab-ci.yml").read_text())
    job = doc[".rvport"]
    assert {"RVPORT_RECIPES", "RVPORT_PROFILE", "RVPORT_OUTPUT", "RVPORT_CACHE_DIR"} <= set(job["variables"])
    assert job["cache"]["paths"] == ["$RVPORT_CACHE_DIR"]
    assert job["artifacts"]["reports"]["junit"][0] == "$RVPORT_OUTPUT/junit.xml"
    script = "\n".join(job["before_script"] + job["script"])
    assert "scripts/setup-host" in script and "rvport --ci build" in script and "--junit" in script


def test_ci_doc_examples_use_the_real_action_inputs_and_template_job():
    md = (ROOT / "docs/ci.md").read_text()
    blocks = _yaml_blocks(md)
    workflow = next(b for b in blocks if "jobs" in b)
    steps = workflow["jobs"]["wheels"]["steps"]
    (rv,) = [s for s in steps if s.get("id") == "rvport"]
    assert set(rv["with"]) <= set(_action()["inputs"])
    cache = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache"))
    assert cache["with"]["path"] == rv["with"]["cache"]  # the cache between runs is the action's
    gitlab = next(b for b in blocks if "include" in b)
    assert gitlab["include"][0]["file"] == "ci/gitlab/rvport.gitlab-ci.yml"
    job = next(v for k, v in gitlab.items() if k != "include")
    template = yaml.safe_load((ROOT / "ci/gitlab/rvport.gitlab-ci.yml").read_text())[".rvport"]
    assert job["extends"] == ".rvport" and set(job["variables"]) <= set(template["variables"])
    assert job["cache"]["paths"] == [template["variables"]["RVPORT_CACHE_DIR"]]


def test_commands_doc_names_every_command_and_option():
    text = (ROOT / "docs/commands.md").read_text()

    def walk(cmd, path):
        heading = f"`{path}`"
        assert heading in text, f"{path} is not documented in docs/commands.md"
        section = text[text.index(heading) :]
        nxt = re.search(r"\n#{2,3} `", section[1:])
        section = section[: nxt.start() + 1] if nxt else section
        for p in cmd.params:
            for opt in p.opts if p.param_type_name == "option" else []:
                assert f"`{opt}`" in section, f"{path}: {opt} missing from docs/commands.md"
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "rvport")


def test_readme_links_the_docs_and_keeps_two_setup_commands():
    readme = (ROOT / "README.md").read_text()
    for doc in ("getting-started", "commands", "ci", "troubleshooting", "exit-codes"):
        assert f"docs/{doc}.md" in readme, doc
        assert (ROOT / "docs" / f"{doc}.md").is_file()
    quick = readme[readme.index("## Quick start") : readme.index("## What else")]
    assert quick.count("```sh") == 2 and quick.count("scripts/setup-host &&") == 2


def test_docs_ci_lists_every_input_of_the_action():
    """docs/ci.md's table of the action's inputs names each input action.yml declares, and no other."""

    root = Path(__file__).resolve().parents[3]
    declared = set(yaml.safe_load((root / "action.yml").read_text())["inputs"])
    text = (root / "docs" / "ci.md").read_text()
    table = text[text.index("| input | default | meaning |") :].split("\n\n", 1)[0]
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))
    assert listed == declared


def test_the_action_and_the_gitlab_template_keep_the_compiler_cache_in_their_ci_cache():
    a = _action()
    assert a["inputs"]["compiler-cache"]["default"] == "" and a["inputs"]["compiler-cache-size"]["default"]
    (build,) = [s for s in a["runs"]["steps"] if s.get("id") == "build"]
    assert '--compiler-cache "$RVPORT_CACHE_DIR/ccache"' in build["run"]  # inside the cached directory
    assert "--no-compiler-cache" in build["run"] and "--compiler-cache-size" in build["run"]
    job = yaml.safe_load((ROOT / "ci/gitlab/rvport.gitlab-ci.yml").read_text())[".rvport"]
    cache_dir = job["variables"]["RVPORT_CACHE_DIR"]
    # rvport reads RVPORT_COMPILER_CACHE as --compiler-cache: a directory inside the cached path
    assert job["variables"]["RVPORT_COMPILER_CACHE"].startswith(cache_dir + "/")
    from rvport.cli import settings

    envs = {s.env: s.dest for s in settings.SETTINGS if s.env}
    assert envs["RVPORT_COMPILER_CACHE"] == "compiler_cache"
    assert envs["RVPORT_COMPILER_CACHE_SIZE"] == "compiler_cache_size"


class _GitLabLoader(yaml.SafeLoader):
    """GitLab CI YAML: its `!reference [job, key]` tag read as the list it names."""


_GitLabLoader.add_constructor(
    "!reference", lambda loader, node: ["!reference", *loader.construct_sequence(node)]
)


def test_the_vllm_workflow_builds_the_pr_tree_for_a_matrix_with_the_action_and_keeps_its_caches():
    """ci/vllm/github-workflow.yml: on pull_request, the action with the matrix (rv64gc and rvv256, one
    --profile), --source-tree the checkout, the compiler cache inside the directory actions/cache keeps (a
    key per run, restored by its prefix), and the matrix, results and JUnit uploaded."""
    from rvport.cli import settings

    wf = yaml.safe_load((ROOT / "ci/vllm/github-workflow.yml").read_text())
    assert "pull_request" in wf[True]  # YAML 1.1 reads the key `on` as true
    (job,) = wf["jobs"].values()
    steps = job["steps"]
    checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout"))
    (rv,) = [s for s in steps if s.get("id") == "rvport"]
    inputs = _action()["inputs"]
    assert set(rv["with"]) <= set(inputs)
    profiles = settings.make_options("build", {"profiles": [rv["with"]["profile"]]}, environ={}).profiles
    assert profiles == ("rv64gc", "rvv256")
    assert rv["with"]["args"].split() == ["--source-tree", checkout["with"]["path"]]
    cache = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache"))
    assert cache["with"]["path"] == rv["with"]["cache"]
    assert rv["with"]["compiler-cache"].startswith(rv["with"]["cache"] + "/")
    assert "${{ github.run_id }}" in cache["with"]["key"] and cache["with"]["key"].startswith(
        cache["with"]["restore-keys"]
    )
    assert rv["with"]["images"] == "true"
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    paths = upload["with"]["path"].split()
    out = rv["with"]["output"]
    assert {f"{out}/matrix.json", f"{out}/*/result.json", rv["with"]["junit"]} <= set(paths)
    # vLLM's own tests on each profile's wheel, from the checkout, with their records and JUnit uploaded
    assert rv["with"]["closure-tree"] == checkout["with"]["path"]
    assert rv["with"]["closure-tests"] == "${{ vars.RVPORT_CLOSURE_TESTS || 'tests' }}"
    tests_out = rv["with"]["closure-output"]
    assert {f"{tests_out}/check-*.junit.xml", f"{tests_out}/check-*/result.json"} <= set(paths)
    # the action says where a matrix's record is: its `matrix` output, set when the profile is a comma list
    a = _action()
    (build,) = [s for s in a["runs"]["steps"] if s.get("id") == "build"]
    assert a["outputs"]["matrix"]["value"] == "${{ steps.build.outputs.matrix }}"
    assert 'case "$RVPORT_PROFILE" in\n  *,*) echo "matrix=$RVPORT_OUTPUT/matrix.json"' in build["run"]


def test_the_vllm_gitlab_job_extends_the_template_with_the_matrix_and_keeps_its_tree_clean():
    """ci/vllm/gitlab-ci.yml: a merge request job extending `.rvport` with the matrix, --source-tree the
    project directory, the compiler cache inside the cached path; the cache, rvport's clone and the output
    (all inside the project directory) excluded from the tree before the template's own before_script."""
    from rvport.cli import settings

    doc = yaml.load((ROOT / "ci/vllm/gitlab-ci.yml").read_text(), Loader=_GitLabLoader)
    assert doc["include"][0]["file"] == "ci/gitlab/rvport.gitlab-ci.yml"
    template = yaml.safe_load((ROOT / "ci/gitlab/rvport.gitlab-ci.yml").read_text())[".rvport"]
    job = doc["riscv64"]
    v = job["variables"]
    assert job["extends"] == ".rvport" and set(v) <= set(template["variables"])
    assert job["rules"][0]["if"] == '$CI_PIPELINE_SOURCE == "merge_request_event"'
    profiles = settings.make_options("build", {"profiles": [v["RVPORT_PROFILE"]]}, environ={}).profiles
    assert profiles == ("rv64gc", "rvv256")
    assert v["RVPORT_ARGS"].split() == ["--source-tree", "$CI_PROJECT_DIR"]
    assert job["cache"]["paths"] == [v["RVPORT_CACHE_DIR"]]
    assert v["RVPORT_COMPILER_CACHE"].startswith(v["RVPORT_CACHE_DIR"] + "/")
    exclude, reference = job["before_script"]
    assert reference == ["!reference", ".rvport", "before_script"]
    assert v["RVPORT_CLOSURE_TESTS"] == "tests" and v["RVPORT_CLOSURE_TREE"] == "$CI_PROJECT_DIR"
    for inside in (
        v["RVPORT_CACHE_DIR"],
        ".rvport-src",
        v["RVPORT_OUTPUT"],
        v["RVPORT_CLOSURE_OUTPUT"],
    ):  # the template's clone of rvport
        assert f"/{inside}/" in exclude and ".git/info/exclude" in exclude
    assert ".rvport-src" in "\n".join(template["before_script"])


def test_the_action_and_the_gitlab_template_run_closure_tests_with_the_jobs_own_build():
    """closure-tests (the action's input, the template's RVPORT_CLOSURE_TESTS): ci/closure-tests after the
    build, given the job's recipe, profiles and output, off by default; its JUnit reaches GitLab's report."""
    a = _action()
    assert a["inputs"]["closure-tests"]["default"] == "off"
    (step,) = [s for s in a["runs"]["steps"] if "closure-tests" in str(s.get("run", ""))]
    assert step["if"] == "inputs.closure-tests != 'off'"
    assert (
        '"$GITHUB_ACTION_PATH/ci/closure-tests" "$RVPORT_RECIPES_ARGS" "$RVPORT_PROFILE" "$RVPORT_OUTPUT"'
        in (step["run"])
    )
    template = yaml.safe_load((ROOT / "ci/gitlab/rvport.gitlab-ci.yml").read_text())[".rvport"]
    assert template["variables"]["RVPORT_CLOSURE_TESTS"] == "off"
    script = "\n".join(template["script"])
    assert '"$src/ci/closure-tests" "$RVPORT_RECIPES" "$RVPORT_PROFILE" "$RVPORT_OUTPUT"' in script
    assert "$RVPORT_CLOSURE_OUTPUT/check-*.junit.xml" in template["artifacts"]["reports"]["junit"]
    assert (ROOT / "ci" / "closure-tests").stat().st_mode & 0o111
