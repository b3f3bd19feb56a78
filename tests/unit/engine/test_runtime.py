"""The runtime image as data in the recipe (`runtime:`): semantic-router's (non-root, read-only root, its
configuration and start script pinned), what the plan makes of it (tag from --tag, its own key, how it must
be run), its Dockerfile and build context, and bad input as located recipe errors."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from rvport import manifest
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine import runtime
from rvport.errors import BuildFailed, ExitCode, IntegrityError, RecipeError, UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.sources.pin import check_pinned_files
from tests.fixtures.schemas import validate

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)


def plan(cat, *refs: str, tag: str = "local"):
    req = Request(refs=refs, profile=get_profile("rvv256"), mode=Mode.AUTO, tag=tag)
    return make_plan(cat, req, X86)


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def test_semantic_router_runtime_is_non_root_read_only_and_pinned(cat):
    r = cat.resolve("semantic-router")
    rt = r.runtime
    assert rt.user == "router" and rt.uid == 10001 and rt.read_only and rt.tmpfs == ("/tmp",)
    assert rt.entrypoint == ("/app/start.sh",) and rt.ports == (50051, 8080, 9190)
    by_dest = {f.dest: f for f in rt.files}
    assert by_dest["/app/router"].artifact == "router" and by_dest["/app/router"].mode == "0755"
    assert by_dest["/app/start.sh"].mode == "0755" and by_dest["/app/config/config.yaml"].mode == "0644"
    for f in rt.files:
        if f.pinned:
            assert hashlib.sha256(f.pinned.path.read_bytes()).hexdigest() == f.pinned.sha256, f.pinned.rel
    # the start script is valid sh, runs from the tmpfs and starts the router with the image's configuration
    script = by_dest["/app/start.sh"].pinned.path
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "cd /tmp" in text and "exec /app/router -config" in text and "/app/config/config.yaml" in text
    # the configuration: one keyword route ("code" -> code-model), every other request to general-model
    cfg = yaml.safe_load(by_dest["/app/config/config.yaml"].pinned.path.read_text())
    assert cfg["version"] == "v0.3" and cfg["providers"]["defaults"]["default_model"] == "general-model"
    (kw,) = cfg["routing"]["signals"]["keywords"]
    assert kw["keywords"] == ["code"] and not kw["case_sensitive"]
    (route,) = cfg["routing"]["decisions"]
    assert route["rules"]["conditions"] == [{"type": "keyword", "name": kw["name"]}]
    assert [m["model"] for m in route["modelRefs"]] == ["code-model"]
    assert {m["name"] for m in cfg["routing"]["modelCards"]} == {
        m["name"] for m in cfg["providers"]["models"]
    }


def test_the_configuration_turns_off_what_needs_a_model_a_store_or_a_collector(cat):
    """v0.3.0's defaults would download an embedding model at start (the router exits without it) and use
    Redis, Postgres and an OTLP collector: the image's configuration turns each off, so the keyword route
    and the default need nothing else (proven by running the router, docs/heavy-recipes.md)."""
    (cfg_file,) = [
        f for f in cat.resolve("semantic-router").runtime.files if f.dest == "/app/config/config.yaml"
    ]
    g = yaml.safe_load(cfg_file.pinned.path.read_text())["global"]
    assert g["model_catalog"]["embeddings"]["semantic"]["mmbert_model_path"] == ""
    assert g["model_catalog"]["kbs"] == []
    modules = g["model_catalog"]["modules"]
    assert modules["prompt_guard"]["enabled"] is False and modules["feedback_detector"]["enabled"] is False
    assert g["stores"]["semantic_cache"]["enabled"] is False
    services = g["services"]
    assert services["response_api"]["enabled"] is False and services["router_replay"]["enabled"] is False
    assert services["observability"]["tracing"]["enabled"] is False


def router_check(cat) -> dict:
    """The recipe's runtime.check, as written (rvport's runner runs it, docs/recipes.md)."""
    return yaml.safe_load(Path(cat.resolve("semantic-router").file).read_text())["runtime"]["check"]


def test_the_runtime_check_asks_for_both_routes_buffered_and_streamed_in_both_rounds(cat):
    check = router_check(cat)
    assert check["restart"] is True  # the same script again after `docker restart`
    script = check["script"]
    assert (
        script.startswith("#!/bin/sh\n")
        and subprocess.run(["sh", "-n"], input=script.encode()).returncode == 0
    )
    # it waits for readiness within the round's time, then checks health
    assert 'api="http://$SERVICE_HOST:8080"' in script
    assert '"$api/ready"' in script and '-health "$api/health"' in script
    (wait,) = [int(n) for n in re.findall(r"-ge (\d+)", script)]
    assert wait < check["timeout"]
    for prompt, model in (
        ("write code for binary search", "code-model"),
        ("Explain photosynthesis", "general-model"),
    ):
        assert f'-n 5 $stream -prompt "{prompt}" -want {model}' in script
    assert 'for stream in "" -stream; do' in script and '-addr "$SERVICE_HOST:50051"' in script


def test_the_runtime_check_uses_the_client_built_in_the_stage_with_flags_it_has(cat):
    r = cat.resolve("semantic-router")
    script = router_check(cat)["script"]
    assert any(o.glob == "extproc-client" for o in r.outputs) and "client=/artifacts/extproc-client" in script
    (client,) = [f for f in r.files if f.dest.endswith("/cmd/rvport-extproc-client/main.go")]
    declared = set(re.findall(r'flag\.\w+\("([a-z]+)"', client.path.read_text()))
    used = {
        f for line in script.splitlines() if '"$client"' in line for f in re.findall(r" -([a-z]+)\b", line)
    }
    assert used and used <= declared, used - declared
    # the ports it reaches are the image's
    assert {50051, 8080} <= set(r.runtime.ports)


def test_the_plan_tags_it_by_tag_and_says_how_to_run_it(cat):
    p = plan(cat, "semantic-router", tag="v0.3.0-rv1")
    doc = p.to_json()
    validate(doc, manifest.schema("plan"))
    st = {s["recipe"]: s for s in doc["stages"]}
    rt = st["semantic-router"]["runtime"]
    assert rt["tag"] == "rvport/semantic-router:v0.3.0-rv1" and rt["base"] == "debian-trixie"
    args = rt["run_args"]
    assert "--read-only" in args and args[args.index("--user") + 1] == "10001:10001"
    assert args[args.index("--tmpfs") + 1].startswith("/tmp:") and "noexec" in args[args.index("--tmpfs") + 1]
    assert args[args.index("--cap-drop") + 1] == "ALL" and "no-new-privileges" in args
    assert st["glide-ffi"]["runtime"] is None and st["router-ml-binding"]["runtime"] is None
    # its key covers the artifacts' stage key, so the same build tagged otherwise is the same image
    assert plan(cat, "semantic-router", tag="other").stage("semantic-router").runtime.key == rt["key"]


def copy_router_recipe(cat, root: Path) -> Path:
    """The built-in semantic-router recipe and its pinned files, as a user's recipe directory to change."""
    src = Path(cat.resolve("semantic-router").file)
    root.mkdir(parents=True)
    shutil.copytree(src.parent / "semantic-router", root / "semantic-router")
    (root / "semantic-router.yaml").write_text(src.read_text())
    return root


def test_a_new_configuration_is_a_new_image_not_a_new_build(cat, tmp_path):
    root = copy_router_recipe(cat, tmp_path / "recipes")
    cfg = root / "semantic-router" / "0.3.0-config.yaml"
    old = hashlib.sha256(cfg.read_bytes()).hexdigest()
    cfg.write_text(cfg.read_text().replace('keywords: ["code"]', 'keywords: ["code", "program"]'))
    text = (root / "semantic-router.yaml").read_text()
    (root / "semantic-router.yaml").write_text(
        text.replace(old, hashlib.sha256(cfg.read_bytes()).hexdigest())
    )
    mine = load_catalogue(root)
    a, b = (
        plan(cat, "semantic-router").stage("semantic-router"),
        plan(mine, "semantic-router").stage("semantic-router"),
    )
    assert a.key == b.key and a.runtime.key != b.runtime.key


def test_a_tag_that_cannot_tag_an_image_is_a_usage_error(cat):
    with pytest.raises(UsageError) as e:
        plan(cat, "semantic-router", tag="a b")
    assert e.value.exit_code == ExitCode.USAGE and "--tag 'a b'" in e.value.message
    plan(cat, "msgspec", tag="a b")  # no runtime image: the tag names the result only


def test_a_runtime_file_that_differs_from_its_pin_is_exit_4(cat, tmp_path):
    root = copy_router_recipe(cat, tmp_path / "recipes")
    (root / "semantic-router" / "start.sh").write_text("#!/bin/sh\nexec sh\n")
    r = load_catalogue(root).resolve("semantic-router")
    with pytest.raises(IntegrityError) as e:
        check_pinned_files([r])
    assert e.value.exit_code == ExitCode.INTEGRITY and "runtime file" in e.value.render()


def test_dockerfile_of_the_runtime_image(cat):
    rt = plan(cat, "semantic-router", tag="t1").stage("semantic-router").runtime
    names = [f.name for f in runtime.context_files(rt)]
    assert names == ["files/00-router", "files/01-config.yaml", "files/02-start.sh"]
    ctx = {f.dest: f for f in runtime.context_files(rt)}
    assert ctx["/app/router"].artifact == "router" and ctx["/app/router"].source is None
    assert ctx["/app/start.sh"].source.name == "start.sh"
    text = runtime.dockerfile(rt, "rvport/toolchain:sr-runtime-x", "semantic-router==0.3.0").text
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert lines[0] == "FROM rvport/toolchain:sr-runtime-x"
    assert (
        "groupadd --system --gid 10001 router" in text and "useradd --system --uid 10001 --gid 10001" in text
    )
    assert "COPY --chmod=0755 files/00-router /app/router" in lines
    assert "COPY --chmod=0644 files/01-config.yaml /app/config/config.yaml" in lines
    assert "COPY --chmod=0755 files/02-start.sh /app/start.sh" in lines
    assert "WORKDIR /app" in lines and "EXPOSE 50051 8080 9190" in lines
    assert lines.index("USER 10001:10001") > max(
        i for i, ln in enumerate(lines) if ln.startswith(("RUN", "COPY"))
    )
    assert lines[-1] == 'ENTRYPOINT ["/app/start.sh"]'
    assert f'org.rvport.runtime.key="{rt.key}"' in text and "@@" not in text


RECIPE = """\
schema: 1
name: app
kind: go-binary
build: [go build -o "$RVPORT_OUT/app" .]
outputs: [{{glob: app, type: executable, isa: baseline}}]
runtime:
{runtime}
versions:
  - version: "1.0"
    sources:
      - name: src
        url: https://example.org/app-1.0.tar.gz
        sha256: {digest}
"""
GOOD = """\
  user: {name: app, uid: 10001}
  files: [{artifact: app, dest: /app/app}]
  entrypoint: [/app/app]"""


def load(tmp_path: Path, runtime_text: str):
    root = tmp_path / "recipes"
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.yaml").write_text(RECIPE.format(runtime=runtime_text, digest="a" * 64))
    return load_catalogue(root)


def located_problems(load_recipe, message: str) -> list:
    """The problems naming `message` of the RecipeError that `load_recipe()` raises: a located recipe error
    (exit 3), each of those problems at a line of app.yaml."""
    with pytest.raises(RecipeError) as e:
        load_recipe()
    assert e.value.exit_code == ExitCode.RECIPE_INVALID
    hits = [p for p in e.value.problems if message in p.message]
    assert hits and all(p.file.endswith("app.yaml") and p.line for p in hits), [
        p.message for p in e.value.problems
    ]
    return hits


def test_a_good_runtime_loads_with_its_defaults(tmp_path):
    rt = load(tmp_path, GOOD).resolve("app").runtime
    assert rt.read_only and rt.workdir == "/" and rt.files[0].mode == "0755" and rt.debian == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("name: app, uid: 10001", "name: root, uid: 10001"), "must not run as root"),
        (("name: app, uid: 10001", "name: app, uid: 0"), "uid"),
        (("dest: /app/app}", "dest: app}"), "is not an absolute path in the image"),
        (
            ("{artifact: app,", "{artifact: other,"),
            "runtime artifact 'other' is none of the recipe's outputs",
        ),
        (("entrypoint: [/app/app]", "entrypoint: [app]"), "runtime entrypoint 'app' is not an absolute path"),
        (
            (
                "files: [{artifact: app, dest: /app/app}]",
                "files: [{artifact: app, dest: /app/app}, {artifact: app, dest: /app/app}]",
            ),
            "is given twice",
        ),
        (
            (
                "files: [{artifact: app, dest: /app/app}]",
                "files: [{file: app/cfg.yaml, sha256: " + "b" * 64 + ", dest: /app/cfg.yaml}]",
            ),
            "pinned file 'app/cfg.yaml' does not exist",
        ),
        (
            (
                "files: [{artifact: app, dest: /app/app}]",
                "files: [{file: app/cfg.yaml, dest: /app/cfg.yaml}]",
            ),
            "files",
        ),
    ],
)
def test_bad_runtime_is_a_located_recipe_error(tmp_path, change, message):
    located_problems(lambda: load(tmp_path, GOOD.replace(*change)), message)


def test_tmpfs_and_workdir_must_be_absolute(tmp_path):
    with pytest.raises(RecipeError) as e:
        load(tmp_path, GOOD + "\n  tmpfs:\n    - /run\n    - tmp\n  workdir: app")
    assert {p.message for p in e.value.problems} >= {
        "runtime path 'tmp' is not an absolute path in the image",
        "runtime path 'app' is not an absolute path in the image",
    }
    # each at its own line, not the runtime: block's
    lines = (tmp_path / "recipes" / "app.yaml").read_text().splitlines()
    at = {p.message.split("'")[1]: p.line for p in e.value.problems if p.message.startswith("runtime path")}
    assert at == {"tmp": lines.index("    - tmp") + 1, "app": lines.index("  workdir: app") + 1}, at


def test_the_build_context_takes_artifacts_by_name_and_checks_pins_again(cat, tmp_path):
    rt = plan(cat, "semantic-router").stage("semantic-router").runtime
    arts = tmp_path / "files"
    (arts / "bin").mkdir(parents=True)
    (arts / "bin" / "router").write_bytes(b"\x7fELF router")
    ctx = tmp_path / "ctx"
    runtime.stage_files(rt, arts, ctx, "semantic-router.yaml")
    assert (ctx / "files/00-router").read_bytes() == b"\x7fELF router"
    assert (ctx / "files/02-start.sh").read_bytes() == runtime.context_files(rt)[2].source.read_bytes()
    # two files of that name: which one is meant cannot be told
    (arts / "router").write_bytes(b"other")
    with pytest.raises(BuildFailed) as e:
        runtime.stage_files(rt, arts, tmp_path / "ctx2")
    assert e.value.exit_code == ExitCode.BUILD_FAILED and "2 files named 'router'" in e.value.message


def test_a_runtime_file_changed_after_planning_is_exit_4_before_any_image(cat, tmp_path):
    root = copy_router_recipe(cat, tmp_path / "recipes")
    rt = plan(load_catalogue(root), "semantic-router").stage("semantic-router").runtime
    (root / "semantic-router" / "start.sh").write_text("#!/bin/sh\nexec sh\n")
    arts = tmp_path / "files"
    arts.mkdir()
    (arts / "router").write_bytes(b"x")
    with pytest.raises(IntegrityError) as e:
        runtime.stage_files(rt, arts, tmp_path / "ctx", str(root / "semantic-router.yaml"))
    (p,) = e.value.problems
    assert (
        "runtime file" in p.message
        and "start.sh" in p.message
        and p.file.endswith("semantic-router.yaml")
        and p.line
    )


def test_result_schema_takes_a_stage_runtime():
    schema = manifest.schema("result")
    items = schema["properties"]["stages"]["items"]["properties"]["runtime"]
    good = {"tag": "rvport/app:v1", "image_id": "sha256:" + "a" * 64, "key": "b" * 64, "made": True}
    validate(good, items)
    validate(None, items)
    with pytest.raises(jsonschema.ValidationError):
        validate(dict(good, image_id="abc"), items)
