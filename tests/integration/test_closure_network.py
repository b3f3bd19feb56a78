"""The shipped vllm closure lock against the real registries (through pip's configuration and the host's apt
sources): a few of its index wheels are still there with the lock's sha256 and pass metadata and verify, and
its Debian entries are still in sid's signed riscv64 index at their versions and digests. When a registry
has dropped a file or version, these fail: the lock must be made again (`rvport lock vllm`)."""

from __future__ import annotations

import shutil

import pytest

from rvport import resources
from rvport.catalogue import closure_lock
from rvport.catalogue.closure_lock import Origin
from rvport.catalogue.model import Source, SourceKind
from rvport.catalogue.profiles import get_profile
from rvport.closure import wheelhouse as wh
from rvport.sources import fetch_options
from rvport.sources.fetch import Fetcher

pytestmark = pytest.mark.network

LOCK = resources.builtin("locks", "vllm-0.33.0-cp314.yaml")
# a pure wheel, an abi3 manylinux_2_31 riscv64 wheel (the tag pip would not take for manylinux_2_39), a cp314
# riscv64 wheel with two manylinux tags
SAMPLE = ("transformers", "tokenizers", "regex")


@pytest.fixture(scope="module")
def lock():
    return closure_lock.load_lock(LOCK)


def test_sample_index_wheels_are_there_with_the_locks_sha256_and_pass_verify(lock, tmp_path):
    fo = fetch_options(cache_dir=tmp_path / "cache")
    with Fetcher(options=fo) as f:
        for name in SAMPLE:
            e = lock.entry(name)
            got = f.fetch(
                Source(
                    name=e.name,
                    kind=SourceKind.PYPI,
                    sha256=e.sha256,
                    project=e.name,
                    version=e.version,
                    filename=e.wheel,
                )
            )
            assert got.sha256 == e.sha256
            shutil.copy(got.path, tmp_path / e.wheel)
            assert wh.check_metadata(lock, tmp_path / e.wheel, e) == []
    wh.verify_wheels([tmp_path / lock.entry(n).wheel for n in SAMPLE], get_profile("rvv256"))


def test_the_debian_entries_are_in_sids_signed_index(lock, tmp_path):
    opts = wh.Options(
        output=tmp_path / "wh",
        artifacts=(),
        profile=get_profile("rvv256"),
        fetch=fetch_options(cache_dir=tmp_path / "cache"),
        allow_expired=("sid",),  # sid's Release is expired on the hosts measured here
    )
    record = wh.check_debian(lock, opts)
    assert record is not None and record["suite"] == "sid"
    # every Debian entry, and the Debian packages index wheels are installed over (mpmath, setuptools)
    assert len(lock.by_origin(Origin.DEBIAN)) == 35
    assert {deb.package for _, deb in wh.apt_packages(lock)} >= {"python3-mpmath", "python3-setuptools"}
    assert len(wh.apt_packages(lock)) == 37
