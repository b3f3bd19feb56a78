"""The symbols one ELF file defines and references, read from its own symbol table with struct: .symtab for a
relocatable object (what an archive member offers the linker), .dynsym for a shared object or executable (what
it exports at run time). GNU nm is not asked: it can be fooled by objects that embed LLVM bitcode, and the ELF
table is what a linker reads."""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass
from typing import BinaryIO

from rvport.verify.elf import ELF_MAGIC, ElfReadError, _cstr, _header, _Reads, _section_table
from rvport.verify.kept_stream import NotKept
from rvport.verify.limits import DEFAULT_LIMITS, REASON, Limits, OverLimit, check

SHT_SYMTAB = 2
SHT_DYNSYM = 11
SHN_UNDEF = 0
# st_info and st_other values, named as readelf names them.
BINDS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}
TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS", 10: "IFUNC"}
VISIBILITIES = {0: "DEFAULT", 1: "INTERNAL", 2: "HIDDEN", 3: "PROTECTED"}


@dataclass(frozen=True, kw_only=True)
class Symbol:
    name: str
    bind: str  # LOCAL, GLOBAL, WEAK, UNIQUE (or the number)
    type: str  # FUNC, OBJECT, NOTYPE, IFUNC, ... (or the number)
    visibility: str  # DEFAULT, HIDDEN, PROTECTED, INTERNAL
    defined: bool  # st_shndx is not SHN_UNDEF

    @property
    def linkable(self) -> bool:
        """Defined, and visible to other objects: global, weak or unique binding."""
        return self.defined and self.bind in ("GLOBAL", "WEAK", "UNIQUE")

    @property
    def is_function(self) -> bool:
        return self.type in ("FUNC", "IFUNC")  # IFUNC: a function whose address a resolver picks at load time


@dataclass(frozen=True, kw_only=True)
class SymbolTable:
    table: str  # ".symtab", ".dynsym", or "" when the file has neither
    elf_type: str  # ET_REL, ET_DYN, ET_EXEC
    symbols: tuple[Symbol, ...]


def read_symbols(
    stream: BinaryIO, *, names: Collection[str] | None = None, limits: Limits = DEFAULT_LIMITS
) -> SymbolTable:
    """The symbol table that matters for linking against the file: .symtab of a relocatable object, .dynsym of
    anything else; with `names`, only the symbols of those names (nothing else is decoded or kept). Raises
    ElfReadError on a file that cannot be read (the data is untrusted), or over a cap (limits.py)."""
    try:
        return _read_symbols(stream, names, limits)
    except (ElfReadError, NotKept):
        raise
    except OverLimit as e:
        raise ElfReadError(f"{REASON}: {e}") from e
    except Exception as e:  # any parser failure on corrupt input
        raise ElfReadError(f"unreadable symbol table ({type(e).__name__}: {e})") from e


def _read_symbols(stream: BinaryIO, names: Collection[str] | None, limits: Limits) -> SymbolTable:
    stream.seek(0)
    if stream.read(4) != ELF_MAGIC:
        raise ElfReadError("not an ELF file")
    hdr = _header(stream)
    want = SHT_SYMTAB if hdr.elf_type == "ET_REL" else SHT_DYNSYM
    r = _Reads(stream, limits)
    sections = _section_table(r, hdr)
    sec = next((s for s in sections if s.type == want), None)
    if sec is None:
        return SymbolTable(table="", elf_type=hdr.elf_type, symbols=())
    order = "<" if hdr.little else ">"
    # Elf64_Sym: name, info, other, shndx, value, size; Elf32_Sym: name, value, size, info, other, shndx
    fmt = order + ("IBBHQQ" if hdr.elf_class == 64 else "IIIBBH")
    width = struct.calcsize(fmt)
    check("symbols", sec.size // width, "symbols", limits.symbols)
    strtab = r.strtab(sections, sec)
    data = r.at(sec.offset, sec.size, "symbol table")
    wanted = None if names is None else [n.encode("utf-8") + b"\0" for n in names]
    out: list[Symbol] = []
    for row in struct.iter_unpack(fmt, data[: len(data) - len(data) % width]):
        if hdr.elf_class == 64:
            name_off, info, other, shndx = row[0], row[1], row[2], row[3]
        else:
            name_off, info, other, shndx = row[0], row[3], row[4], row[5]
        if name_off == 0:
            continue  # the null symbol, and section symbols
        if name_off >= len(strtab):
            raise ElfReadError("symbol name outside the string table")
        if wanted is not None:  # compared where it lies: nothing copied for the symbols not asked about
            hit = next((w for w in wanted if strtab.startswith(w, name_off)), None)
            if hit is None:
                continue
            name = hit[:-1]
        else:
            name = _cstr(strtab, name_off, "symbol name")
        out.append(
            Symbol(
                name=name.decode("utf-8", "replace"),
                bind=BINDS.get(info >> 4, str(info >> 4)),
                type=TYPES.get(info & 0xF, str(info & 0xF)),
                visibility=VISIBILITIES[other & 0x3],
                defined=shndx != SHN_UNDEF,
            )
        )
    return SymbolTable(
        table=sec.name or (".symtab" if want == SHT_SYMTAB else ".dynsym"),
        elf_type=hdr.elf_type,
        symbols=tuple(out),
    )
