"""The verifier's tests of tests/unit/verify/test_real_elfs.py again, on the files compilers make: riscv64
from Debian's cross GCC 14 (in Docker), x86-64 from the host's gcc, Go from the host's Go. They are compiled
once per content key (the fixture sources, the toolchain image's id, the host compilers' versions) and cached
(tests/fixtures/elfs.py: cached_fixtures). And the files the unit tests write instead say what these say."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from rvport.verify.ar import iter_ar_members
from rvport.verify.elf import ELF_MAGIC, read_elf_bytes
from rvport.verify.symbols import read_symbols
from tests.fixtures.elfs import ElfFixtures, cached_fixtures, docker_ready, write_fixtures
from tests.unit.verify.test_real_elfs import *  # noqa: F403 - every verifier test, here on compiled files

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def elf_fixtures() -> ElfFixtures:
    why = docker_ready()
    if why:
        if os.environ.get("CI"):  # CI prepares the host (scripts/setup-host): a missing engine is a failure
            pytest.fail(why)
        pytest.skip(why)
    return cached_fixtures()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> ElfFixtures:
    return write_fixtures(tmp_path_factory.mktemp("written"))


def _facts(data: bytes, *, host_built: bool) -> dict:
    f = read_elf_bytes(data).to_json()
    if f["go"]:  # the version and the extra settings are the host Go's
        f["go"] = {k: f["go"][k] for k in ("main_module", "path", "goos", "goarch")}
    if host_built:  # what the host's gcc links against is the host's business: its machine and type are ours
        f = {k: f[k] for k in ("class", "endian", "machine", "type", "e_flags")}
    return f


def _symbols(data: bytes) -> dict[str, tuple]:
    t = read_symbols(io.BytesIO(data))
    return {s.name: (t.table, s.bind, s.type, s.visibility, s.defined) for s in t.symbols}


def test_written_files_say_what_compiled_files_say(elf_fixtures: ElfFixtures, written: ElfFixtures):
    """Every fact the verifier reads (machine, type, e_flags, the whole arch string, DT_NEEDED, GLIBC
    versions, Go build info), every symbol the writer writes (binding, type, visibility, defined) and every
    archive's member names are the same in the written file as in the compiled one."""
    names = sorted(p.name for p in written.dir.iterdir())
    if not elf_fixtures.go:
        names = [n for n in names if not n.startswith("hello-go-")]
    for name in names:
        ours, theirs = written.read(name), elf_fixtures.read(name)
        if name.endswith(".a"):
            assert [n for n, _ in iter_ar_members(ours)] == [n for n, _ in iter_ar_members(theirs)], name
            continue
        assert ours[:4] == theirs[:4] == ELF_MAGIC, name
        host_built = name in ("x86.o", "libx86.so", "hello-x86")
        assert _facts(ours, host_built=host_built) == _facts(theirs, host_built=host_built), name
        if not host_built and not name.startswith("hello-go-"):
            mine, real = _symbols(ours), _symbols(theirs)
            assert {n: real.get(n) for n in mine} == mine, name


def test_compiled_fixtures_are_reused_by_content(elf_fixtures: ElfFixtures, tmp_path: Path, monkeypatch):
    """The cache of compiled fixtures: the same key finds the same directory and builds nothing; a damaged
    file or a different key is never reused. (Builds after the first one are
    elfwriter's, to spare the machine.)"""
    import tests.fixtures.elfs as elfs

    assert cached_fixtures(elf_fixtures.dir.parent).dir == elf_fixtures.dir
    built: list[Path] = []

    def build(out: Path) -> ElfFixtures:
        built.append(out)
        return write_fixtures(out)

    monkeypatch.setattr(elfs, "build_fixtures", build)
    cache = tmp_path / "cache"
    first = cached_fixtures(cache)
    assert len(built) == 1 and first.dir.parent == cache and first.dir.name == elf_fixtures.dir.name
    assert cached_fixtures(cache).dir == first.dir and len(built) == 1  # reused: nothing built
    (first.dir / "rvv256.o").write_bytes(b"\x7fELF tampered")
    again = cached_fixtures(cache)  # a digest differs from the manifest's: built again, in place
    assert len(built) == 2 and again.dir == first.dir and again.read("rvv256.o")[:4] == b"\x7fELF"
    assert again.read("rvv256.o") != b"\x7fELF tampered"
    (first.dir / "MANIFEST.json").unlink()  # no manifest (an interrupted build): built again
    assert cached_fixtures(cache).dir == first.dir and len(built) == 3
    monkeypatch.setattr(elfs, "RV_BUILD", elfs.RV_BUILD + "\n# another build\n")
    other = cached_fixtures(cache)  # another key: another directory, the old one left alone
    assert len(built) == 4 and other.dir != first.dir and other.dir.parent == cache and first.dir.is_dir()
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporary directory left
