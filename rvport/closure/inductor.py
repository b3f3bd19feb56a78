"""The settings of torch.compile's C++ backend (inductor) that a wheelhouse ships: DIR/inductor-env.sh, a
POSIX shell file to source before running vLLM in its default configuration (docs/closure.md, "vLLM's
default configuration").

Without enforce_eager, vLLM compiles its model with torch.compile; inductor's CPU backend writes C++ and runs
g++ on it in the running process. The file makes that compile fit the wheelhouse's profile and not the CPU it
happens to run on:

    TORCHINDUCTOR_CPP_MARCH   the profile's -march and -mabi (inductor passes `-march=VALUE`, and splits its
                              command line as a shell does, so `rv64gc -mabi=lp64d` gives both flags)
    TORCHINDUCTOR_CACHE_DIR   torch's compile cache in a directory of the profile's
    VLLM_CACHE_ROOT           vLLM's too (vLLM points inductor's cache below its own root), so a cache left
                              by another profile's settings is never found

and it checks a file of each of the lock's system packages (the compiler, torch's and Python's headers,
OpenMP): one missing stops it with a message naming the Debian package and version to install, instead of a
compile error deep in a traceback. Every value comes from the lock and the profile and is checked against a
strict pattern before it is written into shell text.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rvport.catalogue.closure_lock import Lock
from rvport.catalogue.profiles import Profile
from rvport.errors import IntegrityError

ENV_FILE = "inductor-env.sh"
HOME_CACHE = "${XDG_CACHE_HOME:-$HOME/.cache}"
CACHE = "rvport"  # below ${XDG_CACHE_HOME:-$HOME/.cache}: CACHE/inductor/PROFILE and CACHE/vllm/PROFILE

_PROFILE = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
_MARCH = re.compile(r"^rv64[a-z0-9_]{1,200}$")
_MABI = re.compile(r"^lp64[fd]?$")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,99}$")
_VERSION = re.compile(r"^[A-Za-z0-9.+~:-]{1,100}$")
_FILE = re.compile(r"^(/[A-Za-z0-9._+-]+){1,30}$")


@dataclass(frozen=True, kw_only=True)
class Check:
    package: str
    version: str
    file: str  # a file the package installs: missing means the package is not installed

    def to_json(self) -> dict:
        return {"package": self.package, "version": self.version, "file": self.file}


@dataclass(frozen=True, kw_only=True)
class Settings:
    recipe: str
    version: str
    profile: str
    march: str
    mabi: str
    checks: tuple[Check, ...]

    @property
    def march_value(self) -> str:
        """TORCHINDUCTOR_CPP_MARCH: inductor writes `-march=` before it; the -mabi rides along."""
        return f"{self.march} -mabi={self.mabi}"

    def to_json(self) -> dict:
        return {
            "file": ENV_FILE,
            "profile": self.profile,
            "march": self.march,
            "mabi": self.mabi,
            "env": {
                "TORCHINDUCTOR_CPP_MARCH": self.march_value,
                "TORCHINDUCTOR_CACHE_DIR": f"{HOME_CACHE}/{CACHE}/inductor/{self.profile}",
                "VLLM_CACHE_ROOT": f"{HOME_CACHE}/{CACHE}/vllm/{self.profile}",
            },
            "checks": [c.to_json() for c in self.checks],
        }


def _checked(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise IntegrityError(
            f"{what} {value!r} is not one a shell file may hold",
            hint="the lock or the wheelhouse was changed: make them again (rvport lock, rvport wheelhouse)",
        )
    return value


def settings(lock: Lock, profile: Profile, gcc: int | None) -> Settings | None:
    """The wheelhouse's inductor settings for `profile` as the base's GCC (`gcc`, its major) serves it; None
    when the lock has no system packages (nothing to compile with)."""
    if not lock.system:
        return None
    p = profile.for_gcc(gcc)
    return make(
        recipe=lock.recipe,
        version=lock.version,
        profile=p.name,
        march=p.march,
        mabi=p.mabi,
        checks=[(s.package, s.version, s.file) for s in lock.system],
    )


def make(
    *, recipe: str, version: str, profile: str, march: str, mabi: str, checks: Sequence[tuple[str, str, str]]
) -> Settings:
    """Settings from plain values, each checked (IntegrityError when one could break out of the shell)."""
    return Settings(
        recipe=_checked(recipe, _PROFILE, "recipe"),
        version=_checked(version, _VERSION, "version"),
        profile=_checked(profile, _PROFILE, "profile"),
        march=_checked(march, _MARCH, "-march"),
        mabi=_checked(mabi, _MABI, "-mabi"),
        checks=tuple(
            Check(
                package=_checked(pkg, _PACKAGE, "Debian package"),
                version=_checked(ver, _VERSION, f"the version of {pkg}"),
                file=_checked(f, _FILE, f"the file of {pkg}"),
            )
            for pkg, ver, f in checks
        ),
    )


def from_json(doc: Mapping, recipe: str, version: str) -> Settings:
    """Settings as a wheelhouse.json records them (checked again: the file is read back from disk)."""
    try:
        return make(
            recipe=recipe,
            version=version,
            profile=doc["profile"],
            march=doc["march"],
            mabi=doc["mabi"],
            checks=[(c["package"], c["version"], c["file"]) for c in doc["checks"]],
        )
    except (KeyError, TypeError) as e:
        raise IntegrityError(f"the wheelhouse's inductor settings are incomplete: {e}") from e


def env_text(s: Settings) -> str:
    """DIR/inductor-env.sh (see the module's docstring)."""
    q = shlex.quote
    base = '"${XDG_CACHE_HOME:-$HOME/.cache}"'
    need = " ".join(f"{c.package}={c.version}" for c in s.checks)
    lines = [
        f"# rvport wheelhouse of {s.recipe} {s.version}, profile {s.profile}: the settings of",
        "# torch.compile's C++ backend (inductor), which vLLM's default configuration compiles with.",
        "# Source it in the shell that runs vLLM:  . DIR/inductor-env.sh",
        f"# inductor then compiles for the profile (-march={s.march} -mabi={s.mabi}), never for the CPU it",
        "# runs on, and keeps its caches (and vLLM's) in directories of the profile's. It stops, naming the",
        "# Debian package, when what the compiler needs is not installed.",
        f"export TORCHINDUCTOR_CPP_MARCH={q(s.march_value)}",
        f"export TORCHINDUCTOR_CACHE_DIR={base}/{CACHE}/inductor/{q(s.profile)}",
        f"export VLLM_CACHE_ROOT={base}/{CACHE}/vllm/{q(s.profile)}",
        "rvport_missing=",
    ]
    for c in s.checks:
        lines.append(f'[ -e {q(c.file)} ] || rvport_missing="$rvport_missing {c.package}={c.version}"')
    lines += [
        'if [ -n "$rvport_missing" ]; then',
        "    echo \"inductor-env.sh: vLLM's default configuration compiles its model with g++ "
        "(torch.compile), and this system lacks what that needs. Install it: apt-get install$rvport_missing "
        '(listed in debian-packages.txt), or run vLLM with --enforce-eager" >&2',
        "    unset rvport_missing",
        "    return 1 2>/dev/null || exit 1",
        "fi",
        "unset rvport_missing",
        f"# every package it checks: {need}",
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ after a run: its objects
MAX_OBJECTS = 2000  # shared objects of one cache verified (a tiny model's run compiles a few dozen)


def cache_objects(cache: Path, limit: int = MAX_OBJECTS) -> tuple[list[Path], bool]:
    """The shared objects (*.so) under a compile cache, symlinks not followed, sorted; whether there were more
    than `limit` (only the first `limit` are returned)."""
    found: list[Path] = []
    if not cache.is_dir() or cache.is_symlink():
        return [], False
    for root, dirs, files in os.walk(cache, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            p = Path(root) / name
            if name.endswith(".so") and p.is_file() and not p.is_symlink():
                found.append(p)
                if len(found) > limit:
                    return found[:limit], True
    return found, False


def verify_cache(cache: Path, profile: Profile) -> dict:
    """`rvport verify` (runs-on) of every shared object inductor left in `cache` for `profile`: what each
    needs is within the profile (compiled with its -march, not the running CPU's). The record: how many, the
    Tag_RISCV_arch strings they carry, and each that failed with why; passed only when there was at least one
    and none failed."""
    from rvport.verify import IsaLevel, verify_paths

    objects, more = cache_objects(cache)
    doc: dict = {"objects": len(objects), "truncated": more, "arch": [], "failed": [], "passed": False}
    if not objects:
        return doc
    report = verify_paths(objects, profile, IsaLevel.RUNS_ON)
    arch: set[str] = set()
    for a in report.artifacts:
        arch |= {m.facts.arch for m in a.members if m.facts is not None and m.facts.arch}
        if not a.ok:
            doc["failed"].append({"path": os.path.relpath(a.path, cache), "reasons": a.all_reasons()[:4]})
    doc["arch"] = sorted(arch)
    doc["passed"] = not doc["failed"] and not more
    return doc
