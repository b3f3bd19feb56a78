"""Judge one ELF file or ar archive held in memory: one MemberResult per ELF file (an archive's members are
named archive(member))."""

from __future__ import annotations

from typing import BinaryIO, cast

from rvport.catalogue.profiles import Profile
from rvport.verify.ar import ArchiveError, Window, is_ar, iter_ar_entries
from rvport.verify.elf import ELF_MAGIC, ElfFacts, ElfReadError, read_elf
from rvport.verify.kept_stream import BufferFile
from rvport.verify.limits import DEFAULT_LIMITS, REASON, Limits, OverLimit
from rvport.verify.model import MemberResult
from rvport.verify.policy import IsaLevel, Verdict, judge_elf


def judge_content(
    name: str | None,
    content: BufferFile,
    profile: Profile,
    isa: IsaLevel,
    limits: Limits = DEFAULT_LIMITS,
    *,
    vlen_exact: bool = False,
) -> list[MemberResult]:
    """judge_stream for a member's buffer: read where it lies."""
    stream = cast(BinaryIO, content)  # a seekable binary stream
    return judge_stream(name, stream, profile, isa, limits, vlen_exact=vlen_exact)


def judge_stream(
    name: str | None,
    stream: BinaryIO,
    profile: Profile,
    isa: IsaLevel,
    limits: Limits = DEFAULT_LIMITS,
    *,
    vlen_exact: bool = False,
) -> list[MemberResult]:
    """Judge an ELF file, or every member of an ar archive (named archive(member)), in a seekable stream:
    an archive's members are read one by one where they lie (ar.Window), never the archive whole.
    `vlen_exact`: its vector code assumes the VLEN it was built for (policy.rule_vlen)."""
    stream.seek(0)
    if not is_ar(stream.read(8)):
        return _judge_elf(name, stream, profile, isa, limits, vlen_exact)
    out: list[MemberResult] = []
    try:
        for entry in iter_ar_entries(stream, limits):
            full = f"{name}({entry.name})" if name else entry.name
            member = Window(stream, entry.offset, entry.size)
            if member.read(4) != ELF_MAGIC:
                out.append(
                    MemberResult(
                        name=full, verdict=Verdict.FAIL, reasons=("archive member is not an ELF object",)
                    )
                )
                continue
            out += _judge_elf(full, cast(BinaryIO, member), profile, isa, limits, vlen_exact)
    except ArchiveError as e:
        out.append(MemberResult(name=name, verdict=Verdict.FAIL, reasons=(f"bad ar archive: {e}",)))
    except OverLimit as e:
        out.append(MemberResult(name=name, verdict=Verdict.FAIL, reasons=(f"{REASON}: {e}",)))
    return out


def _judge_elf(
    name: str | None, stream: BinaryIO, profile: Profile, isa: IsaLevel, limits: Limits, vlen_exact: bool
) -> list[MemberResult]:
    try:
        facts = read_elf(stream, limits)
    except ElfReadError as e:
        return [MemberResult(name=name, verdict=Verdict.FAIL, reasons=(str(e),))]
    return [member_result(name, facts, profile, isa, vlen_exact=vlen_exact)]


def member_result(
    name: str | None, facts: ElfFacts, profile: Profile, isa: IsaLevel, *, vlen_exact: bool = False
) -> MemberResult:
    j = judge_elf(facts, profile, isa, vlen_exact=vlen_exact)
    notes = list(j.notes)
    if facts.needed:
        notes.append("needs " + ", ".join(facts.needed))
    return MemberResult(name=name, verdict=j.verdict, reasons=j.reasons, notes=tuple(notes), facts=facts)
