"""Tools rvport runs inside stages (rvport/resources/tools.yaml): pinned sources, their Debian needs, and the
stage script that runs them. Frozen values; the shipped file is read by the one document loader against
schemas/tools.schema.json, so a fault in it is a located error, never a traceback."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

from rvport import resources
from rvport.catalogue.document import shipped_table
from rvport.catalogue.model import Source, SourceKind


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    source: Source  # the file to fetch and check (a wheel, for auditwheel)
    debian: tuple[str, ...]  # packages it needs in the stage
    script: str  # its stage script, in rvport/resources/scripts
    script_sha256: str

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "source": self.source.to_json(),
            "debian": list(self.debian),
            "script": self.script,
            "script_sha256": self.script_sha256,
        }


@cache
def tools() -> dict[str, Tool]:
    doc = shipped_table("tools", "the in-stage tools (tools.yaml)")
    out = {}
    for name, d in doc["tools"].items():
        p = d["pypi"]
        src = Source(
            name=name,
            kind=SourceKind.PYPI,
            project=p["project"],
            version=str(p["version"]),
            filename=p["filename"],
            sha256=d["sha256"],
        )
        script = resources.text("scripts", d["script"])
        out[name] = Tool(
            name=name,
            source=src,
            debian=tuple(d.get("debian", ())),
            script=d["script"],
            script_sha256=hashlib.sha256(script.encode()).hexdigest(),
        )
    return out


def tool(name: str) -> Tool:
    return tools()[name]
