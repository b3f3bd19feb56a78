"""The test ELF writer (tests/fixtures/elfwriter.py) writes files that other readers accept and read the same
way: pyelftools (a dependency of rvport, but not the reader rvport's verifier uses) and, when the host has it,
binutils' readelf. So the verifier's unit tests run on well-formed files, not on files only rvport reads."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.sections import SymbolTableSection

from rvport.verify.ar import iter_ar_members
from tests.fixtures.elfs import V256_ARCH, ElfFixtures
from tests.fixtures.hosttools import needs

ELF_NAMES = [
    "rv64gc.o",
    "rvv256.o",
    "soft.o",
    "x86.o",
    "exports.o",
    "exports2-bitcode.o",
    "librvv256.so",
    "libnewglibc.so",
    "libexports.so",
    "libx86.so",
    "hello",
    "hello-x86",
    "hello-go-riscv64",
    "hello-go-amd64",
]


@pytest.mark.parametrize("name", ELF_NAMES)
def test_pyelftools_reads_every_section_and_symbol(elf_fixtures: ElfFixtures, name):
    with open(elf_fixtures.path(name), "rb") as f:
        elf = ELFFile(f)
        assert elf["e_ident"]["EI_CLASS"] == "ELFCLASS64"
        sections = list(elf.iter_sections())
        assert sections[elf["e_shstrndx"]].name == ".shstrtab"
        for sec in sections:
            assert (
                sec["sh_offset"] + (0 if sec["sh_type"] == "SHT_NOBITS" else sec["sh_size"])
                <= (elf["e_shoff"])
            ), f"{sec.name} overlaps the section headers"
            if isinstance(sec, SymbolTableSection):
                syms = list(sec.iter_symbols())
                assert syms[0].name == "" and all(
                    s.name for s in syms[1:] if s["st_info"]["type"] != "STT_SECTION"
                )
                if sec.name == ".symtab":  # locals first, sh_info the first global
                    binds = [s["st_info"]["bind"] for s in syms]
                    assert "STB_LOCAL" not in binds[sec["sh_info"] :] and all(
                        b == "STB_LOCAL" for b in binds[: sec["sh_info"]]
                    )
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD":
                assert seg["p_offset"] % seg["p_align"] == seg["p_vaddr"] % seg["p_align"]


def test_pyelftools_reads_dynamic_versions_and_attributes(elf_fixtures: ElfFixtures):
    with open(elf_fixtures.path("libnewglibc.so"), "rb") as f:
        elf = ELFFile(f)
        dyn = next(s for s in elf.iter_sections() if isinstance(s, DynamicSection))
        assert [t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED"] == ["libc.so.6"]
        vn = next(s for s in elf.iter_sections() if isinstance(s, GNUVerNeedSection))
        (verneed, auxes), *_ = list(vn.iter_versions())
        assert verneed.name == "libc.so.6" and [a.name for a in auxes] == ["GLIBC_2.27", "GLIBC_2.36"]
        assert {s.name for s in elf.get_section_by_name(".dynsym").iter_symbols()} >= {"pick", "arc4random"}
    with open(elf_fixtures.path("rvv256.o"), "rb") as f:
        attrs = ELFFile(f).get_section_by_name(".riscv.attributes")
        found = {
            a.tag: a.value
            for sub in attrs.iter_subsections()
            for ss in sub.iter_subsubsections()
            for a in ss.iter_attributes()
        }
        assert found["TAG_ARCH"] == V256_ARCH and found["TAG_STACK_ALIGN"] == 16


def test_archives_list_their_members_and_symbol_index(elf_fixtures: ElfFixtures):
    data = elf_fixtures.read("libmixed.a")
    assert [n for n, _ in iter_ar_members(data)] == ["rv64gc.o", "x86.o", "another_long_member_name_rvv256.o"]
    assert dict(iter_ar_members(data))["x86.o"] == elf_fixtures.read("x86.o")
    if shutil.which("ar"):  # binutils' ar reads the archive (names, sizes) whatever the members' machine
        r = subprocess.run(["ar", "tv", str(elf_fixtures.path("libmixed.a"))], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert [line.split()[-1] for line in r.stdout.splitlines()] == [n for n, _ in iter_ar_members(data)]


@needs("readelf")
def test_readelf_reads_them_without_a_warning(elf_fixtures: ElfFixtures):
    paths = [str(elf_fixtures.path(n)) for n in ELF_NAMES]
    r = subprocess.run(["readelf", "-W", "-a", "-A", *paths], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert f'Tag_RISCV_arch: "{V256_ARCH}"' in r.stdout
    assert "Flags:                             0x1, RVC, soft-float ABI" in r.stdout
    assert "Shared library: [libc.so.6]" in r.stdout and "Name: GLIBC_2.36" in r.stdout
