"""Sources needed by some profiles only (`profiles:`): vllm's oneDNN is fetched, unpacked and keyed for the
vector profiles alone; a bad `profiles:` is a recipe error with its line."""

from __future__ import annotations

import textwrap

import pytest

from rvport.catalogue.profiles import get_profile, load_profiles
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import RecipeError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, for_profile, make_plan

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
ONEDNN_COMMIT = "0e2a5bfeef1bfbffc3137464606540233086ce9b"
ONEDNN_TREE = "sha256:871a3b44227935f127e19a013d142c1afa23192ba12cd8744a17c9b525cf4195"


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def vllm_stage(cat, profile: str):
    req = Request(refs=("vllm",), all=False, profile=get_profile(profile), mode=Mode.ACCELERATED)
    return make_plan(cat, req, X86, locate=lambda s: "network").stage("vllm")


def test_onednn_is_pinned_by_commit_and_tree_for_the_vector_profiles(cat):
    r = cat.resolve("vllm")
    sdist, onednn = r.sources
    assert sdist.profiles == () and sdist.serves("rv64gc")
    assert (onednn.repo, onednn.commit, onednn.tag) == (
        "https://github.com/uxlfoundation/oneDNN",
        ONEDNN_COMMIT,
        "v3.13",
    )
    assert onednn.tree == ONEDNN_TREE and onednn.sha256 is None
    # where the recipe's CMake looks for it instead of cloning (FETCHCONTENT_FULLY_DISCONNECTED)
    assert f"/src/{onednn.dest}" == r.env["FETCHCONTENT_SOURCE_DIR_ONEDNN"]
    assert set(onednn.profiles) == {p.name for p in load_profiles().values() if p.vlen}


def test_the_rv64gc_stage_has_the_sdist_alone_and_the_vector_stages_both(cat):
    scalar = vllm_stage(cat, "rv64gc")
    assert [s.name for s in scalar.recipe.sources] == ["sdist"]
    assert list(scalar.source_locations) == ["sdist"]
    assert [s["name"] for s in scalar.to_json()["sources"]] == ["sdist"]  # plan.json's stage
    for name in ("rvv128", "rvv256", "rvv256-bf16"):
        st = vllm_stage(cat, name)
        assert [s.name for s in st.recipe.sources] == ["sdist", "onednn"], name
        (src,) = [s for s in st.recipe.sources if s.name == "onednn"]
        assert src.to_json()["profiles"] == ["rvv128", "rvv256", "rvv256-bf16"]


def test_a_source_for_other_profiles_leaves_the_stage_key_alone(cat):
    """rv64gc's key is the one a recipe without the vector-only source has: adding it rebuilds nothing."""
    import dataclasses

    r = cat.resolve("vllm")
    alone = dataclasses.replace(r, sources=r.sources[:1])
    assert for_profile(r, "rv64gc") == alone
    assert for_profile(r, "rvv256") is r


def test_plan_warns_of_the_github_download_for_vector_profiles_only(cat):
    def warnings(profile):
        req = Request(refs=("vllm",), all=False, profile=get_profile(profile), mode=Mode.ACCELERATED)
        return make_plan(cat, req, X86, locate=lambda s: "network").warnings

    assert not [w for w in warnings("rv64gc") if "downloaded at build time" in w]
    (w,) = [w for w in warnings("rvv256") if "downloaded at build time" in w]
    assert w.startswith("vllm==0.33.0: onednn ") and "from github.com" in w and "--mirror DIR" in w


def write(root, sources: str):
    root.mkdir(parents=True, exist_ok=True)
    (root / "tiny.yaml").write_text(
        textwrap.dedent("""\
        schema: 1
        name: tiny
        kind: python-wheel
        build: [make]
        versions:
          - version: "1.0"
            sources:
        """)
        + textwrap.indent(textwrap.dedent(sources), "      ")
    )
    return root


@pytest.mark.parametrize(
    "sources, line, message",
    [
        (
            """\
            - name: sdist
              url: https://example.invalid/tiny-1.0.tar.gz
            - name: extra
              url: https://example.invalid/extra-1.0.tar.gz
              profiles: [rvv256, rvv512]
            """,
            12,
            "profiles names 'rvv512', which is not a profile",
        ),
        (
            """\
            - name: sdist
              url: https://example.invalid/tiny-1.0.tar.gz
              profiles: [rvv256]
            """,
            10,
            "is the tree every build starts from",
        ),
    ],
)
def test_bad_profiles_are_recipe_errors_with_lines(tmp_path, sources, line, message):
    root = write(tmp_path / "recipes", sources)
    with pytest.raises(RecipeError) as e:
        load_catalogue(root)
    assert any(message in p.message and p.line == line for p in e.value.problems), e.value.render()


def test_a_good_profiles_list_loads(tmp_path):
    root = write(
        tmp_path / "recipes",
        """\
        - name: sdist
          url: https://example.invalid/tiny-1.0.tar.gz
        - name: extra
          url: https://example.invalid/extra-1.0.tar.gz
          dest: _deps/extra
          profiles: [rvv128]
        """,
    )
    r = load_catalogue(root).resolve("tiny")
    assert [s.name for s in for_profile(r, "rvv128").sources] == ["sdist", "extra"]
    assert [s.name for s in for_profile(r, "rv64gc").sources] == ["sdist"]
