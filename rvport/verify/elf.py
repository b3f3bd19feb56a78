"""Facts from one ELF stream: class, byte order, machine, float ABI, RVC, RISC-V arch attribute, GLIBC
versions needed, DT_NEEDED, Go build info. Headers and the few sections needed are read with struct, machine
and type named as pyelftools names them. No policy here: only what the file says."""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import BinaryIO, Literal

from elftools.elf.enums import ENUM_E_MACHINE, ENUM_E_TYPE

from rvport.verify.kept_stream import NotKept
from rvport.verify.limits import DEFAULT_LIMITS, REASON, Limits, OverLimit, check

ELF_MAGIC = b"\x7fELF"

# e_flags bits of the RISC-V psABI.
EF_RISCV_RVC = 0x1
EF_RISCV_FLOAT_ABI_MASK = 0x6
EF_RISCV_RVE = 0x8
EF_RISCV_TSO = 0x10
FLOAT_ABIS = {0x0: "soft", 0x2: "single", 0x4: "double", 0x6: "quad"}

# .riscv.attributes tags (psABI): even tags carry a ULEB128, odd ones a NUL-terminated string.
TAG_FILE = 1
TAG_RISCV_ARCH = 5

GO_BUILDINFO_MAGIC = b"\xff Go buildinf:"
NOT_ELF = "not an ELF file"

_GLIBC = re.compile(r"^GLIBC_([0-9]{1,9})\.([0-9]{1,9})(?:\.[0-9]{1,9})?\Z")
_SINGLE = re.compile(r"([a-z])(\d+(?:p\d+)?)?")
_MULTI = re.compile(r"^([a-z][a-z0-9]*?[a-z])([0-9]+(?:p[0-9]+)?)?\Z")


class ElfReadError(Exception):
    """The stream is not a readable ELF file (truncated, corrupt, or not ELF at all)."""


@dataclass(frozen=True, kw_only=True)
class GoBuildInfo:
    go_version: str
    main_module: str | None
    path: str | None
    goos: str | None
    goarch: str | None
    settings: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "go_version": self.go_version,
            "main_module": self.main_module,
            "path": self.path,
            "goos": self.goos,
            "goarch": self.goarch,
            "settings": dict(sorted(self.settings.items())),
        }


@dataclass(frozen=True, kw_only=True)
class ElfFacts:
    elf_class: int  # 32 or 64
    little_endian: bool
    machine: str  # pyelftools name, e.g. EM_RISCV, EM_X86_64
    elf_type: str  # ET_REL, ET_DYN, ET_EXEC, ...
    e_flags: int
    arch: str | None  # Tag_RISCV_arch string, None when there is no attribute
    extensions: Mapping[str, str]  # parsed arch string: {"v": "1p0", ...}
    glibc: tuple[tuple[int, int], ...]  # every GLIBC_x.y version needed, sorted
    needed: tuple[str, ...]  # DT_NEEDED
    go: GoBuildInfo | None
    notes: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()  # every symbol version needed (GLIBC_2.34, GLIBCXX_3.4.30, ...), sorted

    @property
    def is_riscv(self) -> bool:
        return self.machine == "EM_RISCV"

    @property
    def float_abi(self) -> str | None:
        return FLOAT_ABIS[self.e_flags & EF_RISCV_FLOAT_ABI_MASK] if self.is_riscv else None

    @property
    def rvc(self) -> bool | None:
        return bool(self.e_flags & EF_RISCV_RVC) if self.is_riscv else None

    @property
    def max_glibc(self) -> tuple[int, int] | None:
        return self.glibc[-1] if self.glibc else None

    def to_json(self) -> dict:
        mg = self.max_glibc
        return {
            "class": self.elf_class,
            "endian": "little" if self.little_endian else "big",
            "machine": self.machine,
            "type": self.elf_type,
            "e_flags": f"0x{self.e_flags:x}",
            "float_abi": self.float_abi,
            "rvc": self.rvc,
            "arch": self.arch,
            "extensions": dict(sorted(self.extensions.items())),
            "glibc": f"{mg[0]}.{mg[1]}" if mg else None,
            "needed": list(self.needed),
            "go": self.go.to_json() if self.go else None,
        }


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def parse_arch_string(arch: str) -> dict[str, str]:
    """Split a Tag_RISCV_arch string (rv64i2p1_m2p0_..._zvl256b1p0) into {extension: version}.

    Versions keep the attribute's spelling ("2p1"); an extension without one maps to "". Raises ValueError
    on a string that is not a RISC-V arch string."""
    s = arch.strip().lower()
    m = re.match(r"^rv(32|64|128)", s)
    if not m:
        raise ValueError(f"not a RISC-V arch string: {arch!r}")
    out: dict[str, str] = {}
    tokens = s[m.end() :].split("_")
    head = tokens[0]
    pos = 0
    while pos < len(head):
        sm = _SINGLE.match(head, pos)
        if not sm or sm.end() == pos:
            raise ValueError(f"cannot parse {head[pos:]!r} in arch string {arch!r}")
        if sm.group(1) in "zsx":  # a multi-letter extension glued to the single letters
            raise ValueError(f"cannot parse {head[pos:]!r} in arch string {arch!r}")
        out[sm.group(1)] = sm.group(2) or ""
        pos = sm.end()
    for tok in tokens[1:]:
        if not tok:
            continue
        mm = _MULTI.match(tok)
        if mm and tok[0] in "zsx":
            out[mm.group(1)] = mm.group(2) or ""
            continue
        # single letters after an underscore (rv64i2p1_m2p0_a2p1 form)
        pos = 0
        while pos < len(tok):
            sm = _SINGLE.match(tok, pos)
            if not sm or sm.end() == pos or sm.group(1) in "zsx":
                raise ValueError(f"cannot parse {tok!r} in arch string {arch!r}")
            out[sm.group(1)] = sm.group(2) or ""
            pos = sm.end()
    if "g" in out:  # never emitted by toolchains, but accept it like -march does
        ver = out.pop("g")
        for e in ("i", "m", "a", "f", "d", "zicsr", "zifencei"):
            out.setdefault(e, ver)
    return out


ULEB_MAX = 10  # bytes of a ULEB128 that holds 64 bits: a longer one is corrupt (and would grow without bound)


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise ValueError("truncated ULEB128")
        if pos - start >= ULEB_MAX:
            raise ValueError("ULEB128 longer than 10 bytes")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


def parse_riscv_attributes(data: bytes, *, little_endian: bool = True) -> dict[int, int | str]:
    """Decode the file-scope attributes of a .riscv.attributes section ("A" format, vendor "riscv")."""
    order: Literal["little", "big"] = "little" if little_endian else "big"
    if not data or data[0:1] != b"A":
        raise ValueError("attribute section does not start with format version 'A'")
    out: dict[int, int | str] = {}
    pos = 1
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("truncated attribute subsection")
        length = int.from_bytes(data[pos : pos + 4], order)
        end = pos + length
        if length < 5 or end > len(data):
            raise ValueError("bad attribute subsection length")
        nul = data.index(b"\0", pos + 4, end)
        vendor = data[pos + 4 : nul]
        p = nul + 1
        if vendor == b"riscv":
            while p < end:
                start_of_sub = p
                tag, p = _uleb(data, p)
                if p + 4 > end:
                    raise ValueError("truncated attribute sub-subsection")
                size = int.from_bytes(data[p : p + 4], order)  # counts the tag and this size field
                sub_end = start_of_sub + size
                if size < 5 or sub_end > end:
                    raise ValueError("bad attribute sub-subsection length")
                p += 4
                if tag != TAG_FILE:
                    p = sub_end
                    continue
                while p < sub_end:
                    atag, p = _uleb(data, p)
                    if atag % 2:  # odd: string
                        z = data.index(b"\0", p, sub_end)
                        out[atag] = data[p:z].decode("ascii", "replace")
                        p = z + 1
                    else:
                        out[atag], p = _uleb(data, p)
        pos = end
    return out


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    return _uleb(data, pos)


def parse_go_buildinfo(blob: bytes) -> GoBuildInfo | None:
    """Decode Go's embedded build info (Go >= 1.18 inline format) from the bytes of .go.buildinfo."""
    at = blob.find(GO_BUILDINFO_MAGIC)
    if at < 0 or at + 32 > len(blob):
        return None
    flags = blob[at + 15]
    if not flags & 0x2:
        # Go < 1.18 stored pointers to the strings; say what we found, not more.
        return GoBuildInfo(
            go_version="unknown (pre-1.18 build info)", main_module=None, path=None, goos=None, goarch=None
        )
    pos = at + 32
    n, pos = _read_uvarint(blob, pos)
    version = blob[pos : pos + n].decode("utf-8", "replace")
    pos += n
    n, pos = _read_uvarint(blob, pos)
    mod = blob[pos : pos + n]
    if len(mod) >= 33 and mod[-17:-16] == b"\n":
        mod = mod[16:-16]
    settings: dict[str, str] = {}
    main_module = path = None
    for line in mod.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if parts[0] == "path" and len(parts) > 1:
            path = parts[1]
        elif parts[0] == "mod" and len(parts) > 1:
            main_module = parts[1] + (f"@{parts[2]}" if len(parts) > 2 and parts[2] else "")
        elif parts[0] == "build" and len(parts) > 1 and "=" in parts[1]:
            k, _, v = parts[1].partition("=")
            settings[k] = v
    return GoBuildInfo(
        go_version=version,
        main_module=main_module,
        path=path,
        goos=settings.get("GOOS"),
        goarch=settings.get("GOARCH"),
        settings=settings,
    )


SHT_DYNAMIC = 6
SHT_STRTAB = 3
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_RISCV_ATTRIBUTES = 0x70000003
DT_NEEDED = 1
NAME_MAX = 4096  # bytes of a library, version or section name looked for (a longer one is cut)
ARCH_MAX = 4096  # characters of a Tag_RISCV_arch string (real ones are a few hundred)


@dataclass(frozen=True, kw_only=True)
class _Section:
    name: str  # only the names the readers look for (WANTED_NAMES); "" for any other
    type: int
    offset: int
    size: int
    link: int
    info: int


# pyelftools' names for e_machine and e_type values (a value listed twice takes its last name, as there).
WANTED_NAMES = (b".riscv.attributes", b".go.buildinfo", b".symtab", b".dynsym")
_WANTED = {n: n.decode() for n in WANTED_NAMES}
_MACHINES = {v: k for k, v in ENUM_E_MACHINE.items() if not k.startswith("_")}
_TYPES = {v: k for k, v in ENUM_E_TYPE.items() if not k.startswith("_")}
PT_LOAD = 1
PF_W = 0x2
PN_XNUM = 0xFFFF


@dataclass(frozen=True, kw_only=True)
class _Header:
    elf_class: int
    little: bool
    machine: str
    elf_type: str
    e_flags: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


def _header(stream: BinaryIO) -> _Header:
    """The ELF header, read with struct (building a pyelftools ELFFile costs a millisecond per file: seconds
    for
    an archive of thousands of objects). Names as pyelftools gives them, e.g. EM_RISCV, ET_DYN."""
    stream.seek(0)
    ident = stream.read(16)
    if len(ident) < 16:
        raise ElfReadError("truncated ELF identification")
    if ident[4] not in (1, 2):
        raise ElfReadError(f"Invalid EI_CLASS {ident[4:5]!r}")
    if ident[5] not in (1, 2):
        raise ElfReadError(f"Invalid EI_DATA {ident[5:6]!r}")
    fmt = ("<" if ident[5] == 1 else ">") + ("HHIQQQIHHHHHH" if ident[4] == 2 else "HHIIIIIHHHHHH")
    raw = stream.read(struct.calcsize(fmt))
    if len(raw) < struct.calcsize(fmt):
        raise ElfReadError("truncated ELF header")
    (
        e_type,
        e_machine,
        _v,
        _entry,
        phoff,
        shoff,
        e_flags,
        _eh,
        phentsize,
        phnum,
        shentsize,
        shnum,
        shstrndx,
    ) = struct.unpack(fmt, raw)
    return _Header(
        elf_class=64 if ident[4] == 2 else 32,
        little=ident[5] == 1,
        machine=_MACHINES.get(e_machine, str(e_machine)),
        elf_type=_TYPES.get(e_type, str(e_type)),
        e_flags=e_flags,
        phoff=phoff,
        phentsize=phentsize,
        phnum=phnum,
        shoff=shoff,
        shentsize=shentsize,
        shnum=shnum,
        shstrndx=shstrndx,
    )


class _Reads:
    """The reads of one ELF file's tables, within the caps (limits.py): each table at most table_bytes and
    inside the file, at most `tables` of them and elf_read_bytes in all; a string table read once."""

    def __init__(self, stream: BinaryIO, limits: Limits) -> None:
        self.stream = stream
        self.limits = limits
        self.size = stream.seek(0, io.SEEK_END)
        self._count = self._total = 0
        self._strtabs: dict[int, bytes] = {}

    def at(self, offset: int, size: int, what: str = "section") -> bytes:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ElfReadError(f"{what} at offset {offset} ({size} bytes) runs past the end of the file")
        lim = self.limits
        check(f"bytes of a {what}", size, "table_bytes", lim.table_bytes)
        self._count += 1
        check("tables read", self._count, "tables", lim.tables)
        self._total += size
        check("bytes of tables read", self._total, "elf_read_bytes", lim.elf_read_bytes)
        self.stream.seek(offset)
        data = self.stream.read(size)
        if len(data) != size:
            raise ElfReadError(f"{what} at offset {offset} runs past the end of the file")
        return data

    def small(self, sec: _Section, what: str) -> bytes:
        """A table walked entry by entry in Python: real ones are a few KiB (.riscv.attributes, .dynamic,
        .gnu.version_r)."""
        check(f"bytes of {what}", sec.size, "small_table_bytes", self.limits.small_table_bytes)
        return self.at(sec.offset, sec.size, what)

    def strtab(self, sections: list[_Section], sec: _Section) -> bytes:
        """The string table sec links to, read once however many sections link to it."""
        if not 0 < sec.link < len(sections):
            raise ElfReadError(f"section {sec.name or '?'} links to no string table (sh_link {sec.link})")
        if sec.link not in self._strtabs:
            s = sections[sec.link]
            self._strtabs[sec.link] = self.at(s.offset, s.size, "string table")
        return self._strtabs[sec.link]


def _first_writable_load(r: _Reads, hdr: _Header, limit: int) -> bytes | None:
    """The first `limit` bytes of the first writable PT_LOAD segment (program headers read with struct)."""
    if hdr.phnum == PN_XNUM:
        raise ElfReadError("program header count kept in section 0, but there are no section headers")
    check("program headers", hdr.phnum, "segments", r.limits.segments)
    fmt = ("<" if hdr.little else ">") + ("IIQQQQQQ" if hdr.elf_class == 64 else "IIIIIIII")
    width = struct.calcsize(fmt)
    if hdr.phnum and hdr.phentsize < width:
        raise ElfReadError(f"e_phentsize {hdr.phentsize} is smaller than a program header")
    table = r.at(hdr.phoff, hdr.phnum * hdr.phentsize, "program header table")
    for i in range(hdr.phnum):
        row = struct.unpack_from(fmt, table, i * hdr.phentsize)
        p_type, p_flags, p_offset, p_filesz = (
            (row[0], row[1], row[2], row[5]) if hdr.elf_class == 64 else (row[0], row[6], row[1], row[4])
        )
        if p_type == PT_LOAD and p_flags & PF_W:
            return r.at(p_offset, min(p_filesz, limit, max(r.size - p_offset, 0)), "writable segment")
    return None


def _cstr(table: bytes, offset: int, what: str) -> bytes:
    """The NUL-terminated string at offset of a string table (looked for over NAME_MAX bytes at most)."""
    end = table.find(b"\0", offset, offset + NAME_MAX)
    if offset >= len(table) or end < 0:
        raise ElfReadError(f"{what} outside the string table, or longer than {NAME_MAX} bytes")
    return table[offset:end]


def _section_table(r: _Reads, hdr: _Header) -> list[_Section]:
    """The section headers, read with struct in one go (pyelftools parses them one by one, slowly)."""
    shoff, shnum, shentsize, shstrndx = hdr.shoff, hdr.shnum, hdr.shentsize, hdr.shstrndx
    if shoff == 0:
        return []
    fmt = ("<" if hdr.little else ">") + ("IIQQQQIIQQ" if hdr.elf_class == 64 else "IIIIIIIIII")
    width = struct.calcsize(fmt)
    if shentsize < width:
        raise ElfReadError(f"e_shentsize {shentsize} is smaller than a section header")
    if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: the real values live in section 0
        first = struct.unpack(fmt, r.at(shoff, width, "section header"))
        shnum = shnum or first[5]
        shstrndx = first[6] if shstrndx == 0xFFFF else shstrndx
    check("section headers", shnum, "sections", r.limits.sections)
    raw = r.at(shoff, shnum * shentsize, "section header table")
    if shentsize == width:
        rows = list(struct.iter_unpack(fmt, raw))
    else:
        rows = [struct.unpack_from(fmt, raw, i * shentsize) for i in range(shnum)]
    names = b""
    if 0 < shstrndx < shnum:
        row = rows[shstrndx]
        names = r.at(row[4], row[5], "section name table") if row[1] != 8 else b""  # 8: SHT_NOBITS
    out = []
    longest = max(len(n) for n in WANTED_NAMES) + 1
    for row in rows:
        # only the names looked for are recognised, over a few bytes (a crafted table could make each long)
        end = names.find(b"\0", row[0], row[0] + longest)
        name = _WANTED.get(names[row[0] : end], "") if end >= 0 else ""
        out.append(
            _Section(
                name=name,
                type=row[1],
                offset=row[4],
                size=row[5] if row[1] != 8 else 0,
                link=row[6],
                info=row[7],
            )
        )
    return out


def _linked_strtab(r: _Reads, sections: list[_Section], sec: _Section) -> bytes:
    return r.strtab(sections, sec)


def _dt_needed(data: bytes, strtab: bytes, little: bool, elfclass: int, limits: Limits) -> list[str]:
    fmt = ("<" if little else ">") + ("qQ" if elfclass == 64 else "iI")
    out = []
    for i, (tag, val) in enumerate(
        struct.iter_unpack(fmt, data[: len(data) - len(data) % struct.calcsize(fmt)])
    ):
        if tag == 0:
            break
        check("entries of .dynamic", i + 1, "entries", limits.entries)
        if tag == DT_NEEDED:
            out.append(_cstr(strtab, val, "DT_NEEDED name").decode("utf-8", "replace"))
    return out


def _verneed_names(data: bytes, strtab: bytes, little: bool, count: int, limits: Limits) -> list[str]:
    """Version names in a .gnu.version_r section (Elf32/64_Verneed and _Vernaux are both 16 bytes).
    Parsed here, bounded by the section's size and the entries cap, so a corrupt chain (entries that
    overlap, or point back) cannot loop for ever."""
    fmt = "<" if little else ">"
    names: list[str] = []
    limit = len(data) // 16 + 1
    pos = 0
    walked = 0
    for _ in range(min(count, limit)):
        walked += 1
        check("entries of .gnu.version_r", walked, "entries", limits.entries)
        if pos + 16 > len(data):
            raise ElfReadError("truncated .gnu.version_r entry")
        _ver, cnt, _file, aux, nxt = struct.unpack_from(fmt + "HHIII", data, pos)
        apos = pos + aux
        for _ in range(min(cnt, limit)):
            if apos + 16 > len(data):
                raise ElfReadError("truncated .gnu.version_r auxiliary entry")
            walked += 1
            check("entries of .gnu.version_r", walked, "entries", limits.entries)
            _hash, _flags, _other, name, anext = struct.unpack_from(fmt + "IHHII", data, apos)
            names.append(_cstr(strtab, name, "version name").decode("ascii", "replace"))
            if not anext:
                break
            apos += anext
        if not nxt:
            break
        pos += nxt
    return names


def read_elf(stream: BinaryIO, limits: Limits = DEFAULT_LIMITS) -> ElfFacts:
    """Read the facts of one ELF file from a seekable binary stream. Raises ElfReadError on any file that
    cannot be read: the data is untrusted, so every parser failure becomes a reason, never a crash; so does
    a file that would take more than the caps (limits.py) to read: "over a verify cap: ..."."""
    try:
        return _read_elf(stream, limits)
    except NotKept:  # not the file's fault: the caller kept only parts of it, and reads it again
        raise
    except OverLimit as e:
        raise ElfReadError(f"{REASON}: {e}") from e
    except ElfReadError as e:
        if str(e) == NOT_ELF:
            raise
        raise ElfReadError(f"corrupt or truncated ELF file: {e}") from e
    except Exception as e:  # any parser failure on corrupt input
        raise ElfReadError(f"corrupt or truncated ELF file ({type(e).__name__}: {e})") from e


def read_elf_bytes(data: bytes, limits: Limits = DEFAULT_LIMITS) -> ElfFacts:
    return read_elf(io.BytesIO(data), limits)


def _read_elf(stream: BinaryIO, limits: Limits) -> ElfFacts:
    stream.seek(0)
    if not is_elf(stream.read(4)):
        raise ElfReadError(NOT_ELF)
    hdr = _header(stream)
    notes: list[str] = []
    little = hdr.little
    machine = hdr.machine
    arch: str | None = None
    exts: dict[str, str] = {}
    glibc: set[tuple[int, int]] = set()
    versions: set[str] = set()
    needed: list[str] = []
    go: GoBuildInfo | None = None
    r = _Reads(stream, limits)
    sections = _section_table(r, hdr)
    for sec in sections:
        stype, name = sec.type, sec.name
        if stype == SHT_RISCV_ATTRIBUTES or name == ".riscv.attributes":
            if machine != "EM_RISCV":
                continue
            attrs = parse_riscv_attributes(r.small(sec, ".riscv.attributes"), little_endian=little)
            a = attrs.get(TAG_RISCV_ARCH)
            if isinstance(a, str) and len(a) > ARCH_MAX:
                raise ElfReadError(f"Tag_RISCV_arch of {len(a)} characters (real ones have a few hundred)")
            if isinstance(a, str):
                arch = a
                try:
                    exts = parse_arch_string(a)
                except ValueError as e:
                    raise ElfReadError(f"unreadable Tag_RISCV_arch: {e}") from e
        elif stype == SHT_GNU_VERNEED:
            strtab = r.strtab(sections, sec)
            for vname in _verneed_names(r.small(sec, ".gnu.version_r"), strtab, little, sec.info, limits):
                versions.add(vname)
                m = _GLIBC.match(vname)
                if m:
                    glibc.add((int(m.group(1)), int(m.group(2))))
        elif stype == SHT_DYNAMIC:
            strtab = r.strtab(sections, sec)
            needed += _dt_needed(r.small(sec, ".dynamic"), strtab, little, hdr.elf_class, limits)
        elif name == ".go.buildinfo":
            go = parse_go_buildinfo(r.at(sec.offset, min(sec.size, 1 << 20, max(r.size - sec.offset, 0))))
    if go is None and not sections:
        # Stripped of section headers: look for Go build info in the first writable load segment.
        data = _first_writable_load(r, hdr, 1 << 16)
        go = parse_go_buildinfo(data) if data is not None else None
    return ElfFacts(
        elf_class=hdr.elf_class,
        little_endian=little,
        machine=machine,
        elf_type=hdr.elf_type,
        e_flags=hdr.e_flags,
        arch=arch,
        extensions=exts,
        glibc=tuple(sorted(glibc)),
        needed=tuple(needed),
        go=go,
        notes=tuple(notes),
        versions=tuple(sorted(versions)),
    )
