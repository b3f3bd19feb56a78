"""The most compatible manylinux tag a wheel's ELF files allow, by the rules auditwheel applies (data:
rvport/resources/manylinux.yaml): the libraries they need from the system, and the newest symbol version they
need in each namespace (GLIBC, GLIBCXX, CXXABI, GCC, ...). Pure: facts in, a tag or the reason there is none
out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from packaging.utils import canonicalize_name

from rvport.catalogue.document import shipped_table
from rvport.verify.elf import ElfFacts

_VERSION = re.compile(r"^([A-Z][A-Z0-9]*)_([0-9]{1,9}(?:\.[0-9]{1,9})*)\Z")


@dataclass(frozen=True, kw_only=True)
class Policies:
    arch: str
    system_libraries: frozenset[str]
    loaders: frozenset[str]
    # a library another wheel ships -> that wheel's distribution (canonical name): a wheel that requires it
    # may need the library without shipping it
    provided_by: Mapping[str, str]
    policies: tuple[tuple[str, dict[str, tuple[int, ...]]], ...]  # most compatible first


@dataclass(frozen=True, kw_only=True)
class TagAnswer:
    tag: str | None  # manylinux_2_X_<arch>, or None: no manylinux policy allows the wheel
    why: str  # what decides it (the newest version needed, or what no policy allows)


def _num(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


@cache
def policies(arch: str = "riscv64") -> Policies | None:
    doc = shipped_table("manylinux", "the manylinux policies (manylinux.yaml)").get(arch)
    if not doc:
        return None
    return Policies(
        arch=arch,
        system_libraries=frozenset(doc["system_libraries"]),
        loaders=frozenset(doc.get("loaders", [])),
        provided_by={lib: canonicalize_name(d) for lib, d in (doc.get("provided_by_wheels") or {}).items()},
        policies=tuple(
            (name, {ns: _num(str(v)) for ns, v in limits.items()}) for name, limits in doc["policies"].items()
        ),
    )


def needed_versions(facts: Iterable[ElfFacts]) -> dict[str, tuple[tuple[int, ...], str]]:
    """Namespace -> (newest version needed, its name), over all the ELF files."""
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for f in facts:
        for name in f.versions:
            m = _VERSION.match(name)
            if not m:
                continue  # CXXABI_TM_1 and the like: not limited
            ns, v = m.group(1), _num(m.group(2))
            if ns not in out or v > out[ns][0]:
                out[ns] = (v, name)
    return out


def provided(requires: Iterable[str], arch: str = "riscv64") -> frozenset[str]:
    """The libraries that the wheels of these distributions (a wheel's Requires-Dist) ship
    (manylinux.yaml provided_by_wheels)."""
    pol = policies(arch)
    names = {canonicalize_name(r) for r in requires}
    return frozenset(lib for lib, dist in (pol.provided_by if pol else {}).items() if dist in names)


def best_tag(
    elfs: Iterable[tuple[str, ElfFacts]], arch: str = "riscv64", requires: Iterable[str] = ()
) -> TagAnswer:
    """The most compatible manylinux_2_X tag for ELF files (name, facts) shipped together in one wheel, whose
    Requires-Dist names `requires` (a library one of those ships is not the system's: provided())."""
    pol = policies(arch)
    if pol is None:
        return TagAnswer(tag=None, why=f"no manylinux policies are known for {arch}")
    elfs = list(elfs)
    shipped = {name.rsplit("/", 1)[-1] for name, _ in elfs} | provided(requires, arch)
    external = sorted(
        {
            lib
            for _, f in elfs
            for lib in f.needed
            if lib not in shipped and lib not in pol.system_libraries and lib not in pol.loaders
        }
    )
    if external:
        return TagAnswer(
            tag=None,
            why=f"needs {', '.join(external)} from the system, which no manylinux policy "
            "allows: graft it into the wheel (auditwheel repair)",
        )
    need = needed_versions(f for _, f in elfs)
    own = {name.rsplit("/", 1)[-1] for name, _ in elfs}
    others = sorted({lib for _, f in elfs for lib in f.needed if lib not in own and lib in shipped})
    for name, limits in pol.policies:
        if all(ns not in limits or v <= limits[ns] for ns, (v, _) in need.items()):
            decisive = [vname for ns, (v, vname) in sorted(need.items()) if ns in limits]
            return TagAnswer(
                tag=f"{name}_{arch}",
                why="newest versions needed: "
                + (", ".join(decisive) or "none")
                + (f"; {', '.join(others)} from a wheel it requires" if others else ""),
            )
    too_new = [
        vname
        for ns, (v, vname) in sorted(need.items())
        if ns in pol.policies[-1][1] and v > pol.policies[-1][1][ns]
    ]
    return TagAnswer(tag=None, why=f"needs {', '.join(too_new)}, newer than any manylinux policy allows")
