"""Judge one ELF file or ar archive held in memory: one MemberResult per ELF file (an archive's members are
named archive(member))."""

from __future__ import annotations

import io
from typing import BinaryIO, cast

from rvport.catalogue.profiles import Profile
from rvport.verify.ar import ArchiveError, is_ar, iter_ar_members
from rvport.verify.buffer import BufferFile
from rvport.verify.elf import ELF_MAGIC, ElfFacts, ElfReadError, read_elf
from rvport.verify.model import MemberResult
from rvport.verify.policy import IsaLevel, Verdict, judge_elf


def judge_blob(name: str | None, data: bytes, profile: Profile, isa: IsaLevel) -> list[MemberResult]:
    """Judge an ELF blob, or every member of an ar archive blob (named archive(member))."""
    if is_ar(data):
        out: list[MemberResult] = []
        try:
            for mname, mdata in iter_ar_members(data):
                full = f"{name}({mname})" if name else mname
                if mdata[:4] != ELF_MAGIC:
                    out.append(
                        MemberResult(
                            name=full, verdict=Verdict.FAIL, reasons=("archive member is not an ELF object",)
                        )
                    )
                    continue
                out += judge_blob(full, mdata, profile, isa)
        except ArchiveError as e:
            out.append(MemberResult(name=name, verdict=Verdict.FAIL, reasons=(f"bad ar archive: {e}",)))
        return out
    return _judge_elf(name, io.BytesIO(data), profile, isa)


def judge_content(
    name: str | None, content: BufferFile, profile: Profile, isa: IsaLevel
) -> list[MemberResult]:
    """judge_blob for a buffer: an ELF file is read where it lies, an archive is copied to bytes first."""
    content.seek(0)
    if is_ar(content.read(8)):
        return judge_blob(name, content.getvalue(), profile, isa)
    return _judge_elf(name, cast(BinaryIO, content), profile, isa)  # a seekable binary stream


def _judge_elf(name: str | None, stream: BinaryIO, profile: Profile, isa: IsaLevel) -> list[MemberResult]:
    try:
        facts = read_elf(stream)
    except ElfReadError as e:
        return [MemberResult(name=name, verdict=Verdict.FAIL, reasons=(str(e),))]
    return [member_result(name, facts, profile, isa)]


def member_result(name: str | None, facts: ElfFacts, profile: Profile, isa: IsaLevel) -> MemberResult:
    j = judge_elf(facts, profile, isa)
    notes = list(j.notes)
    if facts.needed:
        notes.append("needs " + ", ".join(facts.needed))
    return MemberResult(name=name, verdict=j.verdict, reasons=j.reasons, notes=tuple(notes), facts=facts)
