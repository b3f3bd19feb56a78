"""Sources you can trust: download once, verify SHA256 while streaming, cache by digest, mirror, offline,
patch.

Public API (what the planner and the build runner call):

    fetch_options(cache_dir=, mirror=, offline=, ca=, to=, from_git=) -> FetchOptions
    locate(source, cache, mirror, offline=False) -> "cache" | "mirror" | "network" | "missing"
    fetch_source(source, options) -> Fetched              fetch_sources(sources, options) -> list[Fetched]
    prepare_tree(recipe, options) -> PreparedTree         the build context for docker buildx
    pin_recipe(recipe, options) -> list[Pinned]           record digests of unpinned sources in the YAML
    copy_builtin(versions, into) -> list[Path]            a built-in recipe and its files into a user's dir
    tree_digest(dir, exclude) -> "sha256:<hex>"           the canonical tree digest (docs/sources.md)
    archive_tree(path, name=, exclude=) -> "sha256:<hex>" the same, read from an archive as a stream
    ca_bundle(explicit=None) -> Path                      the CA bundle every request verifies with
    ca_bundle_env(path_in_stage) -> dict[str, str]        env vars that make build stages trust it
    default_cache_dir() -> Path

See docs/sources.md for the cache and mirror layouts.
"""

from rvport.sources.archive import archive_tree
from rvport.sources.cache import Cache, CorruptEntry, default_cache_dir, open_blob, sha256_file
from rvport.sources.fetch import (
    Fetched,
    Fetcher,
    FetchOptions,
    ca_bundle,
    ca_bundle_env,
    fetch_options,
    fetch_source,
    fetch_sources,
    fill_mirror,
    locate,
    mirror_candidates,
)
from rvport.sources.pin import Pinned, copy_builtin, insert_pin, pin_recipe
from rvport.sources.pypi import (
    IndexConfig,
    find_sdist,
    index_config,
    parse_pip_config_list,
    parse_simple_page,
)
from rvport.sources.tree import (
    PreparedTree,
    apply_patch,
    prepare_tree,
    tree_key,
    unpack,
    vendor_crates,
    verify_pinned,
)
from rvport.sources.treehash import tree_digest

__all__ = [
    "Cache",
    "CorruptEntry",
    "FetchOptions",
    "Fetched",
    "Fetcher",
    "IndexConfig",
    "Pinned",
    "PreparedTree",
    "apply_patch",
    "archive_tree",
    "ca_bundle",
    "ca_bundle_env",
    "default_cache_dir",
    "fetch_options",
    "fetch_source",
    "fetch_sources",
    "fill_mirror",
    "find_sdist",
    "index_config",
    "insert_pin",
    "locate",
    "mirror_candidates",
    "open_blob",
    "parse_pip_config_list",
    "parse_simple_page",
    "pin_recipe",
    "copy_builtin",
    "prepare_tree",
    "sha256_file",
    "tree_digest",
    "tree_key",
    "unpack",
    "vendor_crates",
    "verify_pinned",
]
