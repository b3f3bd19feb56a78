"""Real sdists through the user's pip configuration (index, certificates): fetched and verified against
pins."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvport.catalogue.model import Source, SourceKind
from rvport.catalogue.recipes import load_catalogue
from rvport.sources import Cache, FetchOptions, fetch_source, prepare_tree

pytestmark = pytest.mark.network

SDISTS = {
    "msgspec": ("0.23.0", "a0d57d3ca7734542eb6861e72d974ab051e6cf73ea6b01b263f77170593362be"),
    "sentencepiece": ("0.2.2", "3d2b5e824b5622038dc7b490897efe05ebbbb9e7350fc142f3ecc8789ef9bdf6"),
    "tiktoken": ("0.14.0", "231dec90efcdccf1b565a1416107736f1e09b1a08fe736ef9d6363e626d03874"),
}


@pytest.fixture(scope="module")
def options(tmp_path_factory) -> FetchOptions:
    return FetchOptions(cache=Cache(root=tmp_path_factory.mktemp("cache")))


@pytest.mark.parametrize("project", sorted(SDISTS))
def test_real_sdist_is_fetched_and_verified(project, options):
    version, digest = SDISTS[project]
    src = Source(name="sdist", kind=SourceKind.PYPI, project=project, version=version, sha256=digest)
    got = fetch_source(src, options)
    assert got.origin == "network" and got.sha256 == digest
    assert got.filename.endswith(f"-{version}.tar.gz") and got.url and got.url.startswith("https://")
    assert fetch_source(src, options).origin == "cache"


def test_sentencepiece_tree_applies_its_pinned_patch(options):
    recipe = load_catalogue().resolve("sentencepiece==0.2.2")
    pt = prepare_tree(recipe, options)
    assert (pt.path / "setup.py").is_file() or (pt.path / "pyproject.toml").is_file()
    cmake = next(pt.path.rglob("CMakeLists.txt"))
    assert cmake.is_file()
    assert any("rvport" in p.read_text(errors="replace") for p in pt.path.rglob("CMakeLists.txt"))


def test_tiktoken_tree_vendors_its_crates(options):
    recipe = load_catalogue().resolve("tiktoken==0.14.0")
    pt = prepare_tree(recipe, options)
    assert (pt.path / "Cargo.lock").is_file()
    assert (pt.path / ".rvport" / "cargo-home" / "config.toml").read_text().count('directory = "vendor"') == 1
    assert not (pt.path / ".cargo").exists()
    vendor = pt.path / ".rvport" / "vendor"
    vendored = [p.name for p in vendor.iterdir()]
    assert any(n.startswith("pyo3-") for n in vendored), vendored
    assert all((vendor / n / ".cargo-checksum.json").is_file() for n in vendored)
    # the tree needs no network: with rvport's cargo home (the stage's CARGO_HOME), cargo resolves every crate
    # from .rvport/vendor offline
    import os

    from rvport import proc

    proc.run(
        ["cargo", "metadata", "--offline", "--locked", "--format-version", "1"],
        cwd=pt.path,
        env={**os.environ, "CARGO_HOME": str(pt.path / ".rvport" / "cargo-home")},
        capture=True,
        timeout=300,
    )
    assert Path(pt.path).is_dir() and prepare_tree(recipe, options).reused
