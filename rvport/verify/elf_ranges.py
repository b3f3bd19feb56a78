"""Which bytes of a big ELF member to keep while it is inflated, chosen from its header and program headers
(which come first): the ranges elf.py reads in the usual layout. Everything else is hashed and dropped, so a
torch-sized library is not held in memory whole; a read outside these ranges (an unusual layout) makes the
caller read the member again, whole (buffer.NotKept)."""

from __future__ import annotations

import struct
from enum import Enum

from rvport.verify.limits import DEFAULT_LIMITS, Limits

HEAD = 64 << 20  # always kept: header, program headers, .dynsym, .dynstr, .gnu.version_r, ...
NEAR = 1 << 20  # kept after the start of a writable segment (.go.buildinfo), after the last loaded byte
# (.comment, .riscv.attributes) and before the section headers (.shstrtab)
PT_LOAD = 1
PT_DYNAMIC = 2
PT_RISCV_ATTRIBUTES = 0x70000003
PF_W = 0x2


class Keep(Enum):
    NOTHING = "nothing"
    WHOLE = "whole"
    ELF_RANGES = "elf ranges"  # for an ELF file bigger than 2 * HEAD; else whole


def ranges_beyond_head(
    head: bytes | bytearray, size: int, limits: Limits = DEFAULT_LIMITS
) -> list[tuple[int, int]]:
    """Sorted, merged (start, end) ranges past HEAD to keep of an ELF file of `size` bytes whose first bytes
    are `head`. Tolerant: a header it cannot read yields fewer ranges, never an error (elf.py judges it).
    Bounded: a range is at most table_bytes long (no table elf.py reads is longer), at most `segments`
    program headers are looked at, and the ranges hold at most kept_bytes in all (a read beyond them makes
    the caller read the member whole, within kept_bytes too)."""
    want: list[tuple[int, int]] = []
    try:
        want = _wanted(head, limits.segments)
    except (struct.error, ValueError, IndexError):
        pass
    want = [(s, min(e, s + limits.table_bytes)) for s, e in want]
    out: list[tuple[int, int]] = []
    for start, end in sorted((max(s, HEAD), min(e, size)) for s, e in want):
        if start >= end:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    kept: list[tuple[int, int]] = []
    budget = limits.kept_bytes
    for start, end in out:
        if budget <= 0:
            break
        kept.append((start, min(end, start + budget)))
        budget -= kept[-1][1] - start
    return kept


def _wanted(head: bytes | bytearray, segments: int) -> list[tuple[int, int]]:
    if head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return []
    is64, order = head[4] == 2, "<" if head[5] == 1 else ">"
    if is64:
        phoff, shoff = struct.unpack_from(order + "QQ", head, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 0x36)
    else:
        phoff, shoff = struct.unpack_from(order + "II", head, 0x1C)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 0x2A)
    want = [(shoff - NEAR, shoff + max(shnum, 1) * shentsize)] if shoff else []
    want.append((phoff, phoff + phnum * phentsize))
    last_loaded = 0
    for i in range(min(phnum, segments)):
        at = phoff + i * phentsize
        if at + phentsize > len(head):
            break
        if is64:
            p_type, p_flags, p_offset, _va, _pa, p_filesz = struct.unpack_from(order + "IIQQQQ", head, at)
        else:
            p_type, p_offset, _va, _pa, p_filesz, _memsz, p_flags = struct.unpack_from(
                order + "IIIIIII", head, at
            )
        end = p_offset + p_filesz
        if p_type in (PT_DYNAMIC, PT_RISCV_ATTRIBUTES):
            want.append((p_offset, end))
        elif p_type == PT_LOAD:
            last_loaded = max(last_loaded, end)
            if p_flags & PF_W:
                want.append((p_offset, min(end, p_offset + NEAR)))
    if last_loaded:
        want.append((last_loaded, last_loaded + NEAR))
    return want
