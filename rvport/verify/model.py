"""The values verification yields: one result per member, per artifact, and the report of a run."""

from __future__ import annotations

import json
from dataclasses import dataclass

from rvport.verify.elf import ElfFacts
from rvport.verify.policy import IsaLevel, Verdict
from rvport.vocab import ArtifactKind

# the report's version, under the key all rvport documents use ("schema"); schema 1 named it "schema_version"
REPORT_SCHEMA = 2


@dataclass(frozen=True, kw_only=True)
class MemberResult:
    """One ELF file: the artifact itself (name None), a wheel member, or an archive member."""

    name: str | None
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    facts: ElfFacts | None = None

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PASS

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "verdict": str(self.verdict),
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "elf": self.facts.to_json() if self.facts else None,
        }


@dataclass(frozen=True, kw_only=True)
class WheelInfo:
    name: str
    version: str
    tags: tuple[str, ...]
    max_glibc: str | None
    manylinux: str | None  # the most compatible manylinux tag its ELF files allow
    record_checked: int  # files whose RECORD hash and size were checked

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "tags": list(self.tags),
            "glibc": self.max_glibc,
            "manylinux": self.manylinux,
            "record_checked": self.record_checked,
        }


@dataclass(frozen=True, kw_only=True)
class ArtifactResult:
    path: str
    kind: ArtifactKind
    verdict: Verdict
    reasons: tuple[str, ...] = ()  # about the artifact as a whole (tags, RECORD, unreadable file)
    notes: tuple[str, ...] = ()
    members: tuple[MemberResult, ...] = ()
    size: int | None = None
    sha256: str | None = None
    wheel: WheelInfo | None = None

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def failed_members(self) -> tuple[MemberResult, ...]:
        return tuple(m for m in self.members if not m.ok)

    def all_reasons(self) -> list[str]:
        """Every reason, member reasons prefixed with the member's name."""
        out = list(self.reasons)
        for m in self.failed_members:
            out += [f"{m.name}: {r}" if m.name else r for r in m.reasons]
        return out

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "kind": str(self.kind),
            "verdict": str(self.verdict),
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "size": self.size,
            "sha256": self.sha256,
            "wheel": self.wheel.to_json() if self.wheel else None,
            "members": [m.to_json() for m in self.members],
        }


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    profile: str
    march: str
    mabi: str
    isa: IsaLevel
    artifacts: tuple[ArtifactResult, ...]
    vlen_exact: bool = False  # asked for every artifact (--vlen-exact); provenance may say it of some

    @property
    def ok(self) -> bool:
        return bool(self.artifacts) and all(a.ok for a in self.artifacts)

    @property
    def failed(self) -> tuple[ArtifactResult, ...]:
        return tuple(a for a in self.artifacts if not a.ok)

    def to_json(self) -> dict:
        members = sum(len(a.members) for a in self.artifacts)
        return {
            "schema": REPORT_SCHEMA,
            "kind": "rvport.verify",
            "profile": {"name": self.profile, "march": self.march, "mabi": self.mabi},
            "isa": str(self.isa),
            "ok": self.ok,
            "summary": {
                "artifacts": len(self.artifacts),
                "passed": len(self.artifacts) - len(self.failed),
                "failed": len(self.failed),
                "elf_files": members,
            },
            "artifacts": [a.to_json() for a in self.artifacts],
        } | ({"vlen_exact": True} if self.vlen_exact else {})

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"


def current_report(doc: dict) -> dict:
    """A report document as this rvport writes it. Schema 1 (kept in artifact cache records written before the
    version key was renamed) differs from schema 2 in that key's name alone, so it is renamed; any other
    document is returned as it is."""
    if doc.get("schema_version") == 1 and "schema" not in doc:
        return {**{k: v for k, v in doc.items() if k != "schema_version"}, "schema": REPORT_SCHEMA}
    return doc
