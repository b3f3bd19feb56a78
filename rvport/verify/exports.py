"""Does an artifact export the functions it promises (a recipe output's `exports:`, or `--export NAME`)?

A name is exported when some ELF file of the artifact defines it with global, weak or unique binding as a
function (STT_FUNC, or STT_GNU_IFUNC): in some member of an ar archive (its .symtab), or in a shared object's
or executable's dynamic symbol table (.dynsym, with default or protected visibility). Anything else is a
reason, naming what was found instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rvport.verify.ar import ArchiveError, Window, iter_ar_entries
from rvport.verify.elf import ELF_MAGIC, ElfReadError
from rvport.verify.limits import DEFAULT_LIMITS, REASON, Limits, OverLimit
from rvport.verify.symbols import Symbol, SymbolTable, read_symbols
from rvport.vocab import ArtifactKind


@dataclass(frozen=True, kw_only=True)
class Found:
    """One ELF file's symbol table: the artifact itself (where None) or an archive member."""

    where: str | None
    table: SymbolTable


@dataclass(frozen=True, kw_only=True)
class ExportsJudgement:
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _exported(s: Symbol, table: SymbolTable) -> bool:
    if not (s.linkable and s.is_function):
        return False
    return table.table != ".dynsym" or s.visibility in ("DEFAULT", "PROTECTED")


def _why_not(name: str, hits: list[tuple[Found, Symbol]], found: Sequence[Found], archive: bool) -> str:
    """Why nothing exports `name`, from the symbols of that name that were found."""

    def at(f: Found) -> str:
        return f" in {f.where}" if f.where else ""

    for f, s in hits:
        if s.linkable and not s.is_function:
            return f"it is {s.bind} {s.type} (STT_{s.type}){at(f)}, not a function (STT_FUNC)"
    for f, s in hits:
        if s.linkable and s.is_function:  # only in .dynsym with hidden or internal visibility
            return f"it is a {s.visibility} function{at(f)}, not visible outside its object"
    for f, s in hits:
        if s.defined:
            return f"it is defined only as a {s.bind} symbol{at(f)} (static), not visible to a linker"
    if hits:
        return f"it is referenced{at(hits[0][0])} but defined {'in no member' if archive else 'elsewhere'}"
    if archive:
        return "no member defines or references it"
    tables = sorted({f.table.table for f in found if f.table.table})
    return f"it is not in its {' or '.join(tables)}" if tables else "the file has no symbol table"


def judge_exports(names: Sequence[str], found: Sequence[Found], *, archive: bool) -> ExportsJudgement:
    """Pure: the reasons each name is not exported by any of the symbol tables, and a note for those that
    are."""
    reasons: list[str] = []
    good: list[str] = []
    for name in names:
        hits = [(f, s) for f in found for s in f.table.symbols if s.name == name]
        if any(_exported(s, f.table) for f, s in hits):
            good.append(name)
        else:
            reasons.append(f"{name} is not exported: {_why_not(name, hits, found, archive)}")
    notes = [f"exports {', '.join(good)} (functions)"] if good else []
    return ExportsJudgement(reasons=tuple(reasons), notes=tuple(notes))


def check_exports(
    path: Path, kind: ArtifactKind, names: Sequence[str], limits: Limits = DEFAULT_LIMITS
) -> ExportsJudgement:
    """Read the symbol tables of an ELF file or of every ELF member of an ar archive (streamed, member by
    member), and judge `names`."""
    if not names:
        return ExportsJudgement()
    if kind not in (ArtifactKind.ELF, ArtifactKind.ARCHIVE):
        return ExportsJudgement(
            reasons=(
                f"exports ({', '.join(names)}) are checked in ELF files and ar archives, "
                f"not in a {kind} file",
            )
        )
    found: list[Found] = []
    unreadable: list[str] = []

    def read(where: str | None, stream: BinaryIO) -> None:
        try:
            found.append(Found(where=where, table=read_symbols(stream, names=names, limits=limits)))
        except ElfReadError as e:
            unreadable.append(f"{where or path.name}: {e}")

    try:
        with open(path, "rb") as f:
            if kind is ArtifactKind.ELF:
                read(None, f)
            else:
                try:
                    for entry in iter_ar_entries(f, limits):
                        member = Window(f, entry.offset, entry.size)
                        if member.read(4) == ELF_MAGIC:
                            read(entry.name, member)
                except (ArchiveError, OverLimit) as e:
                    why = f"{REASON}: {e}" if isinstance(e, OverLimit) else f"bad ar archive: {e}"
                    return ExportsJudgement(reasons=(f"exports not checked: {why}",))
    except OSError as e:
        return ExportsJudgement(reasons=(f"exports not checked: cannot read: {e.strerror or e}",))
    j = judge_exports(names, found, archive=kind is ArtifactKind.ARCHIVE)
    if unreadable and j.reasons:
        return ExportsJudgement(
            reasons=j.reasons + tuple(f"symbol table unreadable: {u}" for u in unreadable), notes=j.notes
        )
    return j
