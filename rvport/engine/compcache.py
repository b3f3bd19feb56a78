"""The compiler cache of a build stage: ccache, keyed by the compiler, every flag and the profile.

Every compile of a build stage goes through ccache (docs/compiler-cache.md), in each mode with the ccache of
the compilers' own platform: the riscv64 base's (emulated) in qemu and native stages, the build platform's
beside the cross compilers in accelerated stages (the prefix image, /opt/xtc/bin/ccache) and in cross stages.
ccache hashes the compiler's command line (every flag, -march included), the preprocessed source or the
source and each header it includes, and, in place of its default compiler check (the program's size and
time), the string this module and the stage script (resources/scripts/ccache.sh) make: rvport's key format,
the mode, the profile and its -march and -mabi, the Debian versions of the stage's compiler packages
(`host_key`), and the sha256 of every compiler program the wrapped names lead to, cc1 and cc1plus included
(the stage script). So an object compiled for one profile, or by another compiler build, is never handed to
another: it misses.

Where the cache lives is `CacheUse`:

- ENGINE (the default of `rvport build`): a BuildKit cache mount per toolchain (`toolchain_id`: the mode and
  the compiler packages; the profiles share it, each under its own key), kept by a persistent engine;
- DIR (`--compiler-cache DIR`): a host directory (rvport/engine/compcachedir.py) imported into the stage's
  build context before the build and exported with its output after it, for a CI cache to keep;
- OFF (`--no-compiler-cache`, and `rvport reproduce`'s default): ccache is not on PATH; every compile runs.

The stage script leaves what it saw under $RVPORT_OUT/.rvport-ccache (REPORT_DIR): the use, the key's lines,
ccache's stats log of this build alone (one counter name a line per call), the cache's size before and after,
and in DIR use the cache itself. `take_report` takes it out of the artifacts and makes stages[].compiler_cache
of result.json.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from rvport import resources
from rvport.engine import render
from rvport.fileio import read_regular
from rvport.vocab import Mode

if TYPE_CHECKING:
    from rvport.catalogue.profiles import Profile

KiB, MiB, GiB = 1024, 1024 * 1024, 1024 * 1024 * 1024
KEY_FORMAT = 1  # bump when what the key covers changes: every object cached before then misses
TOOL = "ccache"
SCRIPT = "rvport-ccache.sh"  # the stage script's name in the build context (resources/scripts/ccache.sh)
REPORT_DIR = ".rvport-ccache"  # what the stage script leaves in $RVPORT_OUT, taken out by take_report
IMPORT_DIR = "ccache-in"  # the imported cache's directory in the build context (DIR use)
CACHE_IN_STAGE = "/rvport/ccache"  # CCACHE_DIR in the stage: the mount (ENGINE) or a directory (DIR, OFF)
# ccache's temporary_dir in the stage: a tmpfs of its own in every use. There ccache keeps its inode cache
# (the hashes of the headers a hit checks, per file), which it refuses to keep on a file system it does not
# know to work, FUSE among them: on an engine whose storage driver is fuse-overlayfs, a hit of a source
# including torch's headers then reads and hashes all of them again, every time (docs/compiler-cache.md).
# What is there is dropped with the step; it is never part of the key.
TEMP_IN_STAGE = "/rvport/ccache-tmp"
DEFAULT_MAX_SIZE = 2 * GiB  # per toolchain; --compiler-cache-size
MIN_MAX_SIZE = 16 * MiB
MAX_MAX_SIZE = 1024 * GiB
REPORT_MAX_BYTES = 16 * MiB  # a stats log of a build of 100,000 compiles is about 10 MiB

# The names the stage script wraps (links to ccache first on PATH), where they exist on PATH after them; it
# adds the versioned ones it finds there (gcc-14, riscv64-linux-gnu-g++-16, ...).
NAMES = ("cc", "c++", "gcc", "g++", "riscv64-linux-gnu-gcc", "riscv64-linux-gnu-g++")


class CacheUse(StrEnum):
    ENGINE = "engine"
    DIR = "dir"
    OFF = "off"


@dataclass(frozen=True, kw_only=True)
class CompilerCache:
    """How a run's stages cache their compiles."""

    use: CacheUse = CacheUse.ENGINE
    directory: Path | None = None  # DIR use: the host directory (checked: compcachedir.check_dir)
    max_size: int = DEFAULT_MAX_SIZE  # bytes, per toolchain

    def __post_init__(self) -> None:
        if (self.use is CacheUse.DIR) != (self.directory is not None):
            raise ValueError("a directory is named exactly when the compiler cache's use is dir")
        if not MIN_MAX_SIZE <= self.max_size <= MAX_MAX_SIZE:
            raise ValueError(f"compiler cache size {self.max_size} out of bounds")


OFF = CompilerCache(use=CacheUse.OFF)

# Where ccache is in a stage of each mode: the compilers' own platform's.
CCACHE_PROGRAM: Mapping[Mode, str] = {
    Mode.NATIVE: "/usr/bin/ccache",
    Mode.QEMU: "/usr/bin/ccache",
    Mode.ACCELERATED: "/opt/xtc/bin/ccache",  # native, beside the cross compilers (xtc-assemble.sh)
    Mode.CROSS: "/usr/bin/ccache",  # native: the build-platform base's
}

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", re.IGNORECASE)
_UNITS = {"": 1, "K": KiB, "M": MiB, "G": GiB, "T": 1024 * GiB}


def script() -> str:
    """The stage script (resources/scripts/ccache.sh): `start` before the build, `end` after it."""
    return resources.script("ccache.sh")


def parse_size(text: str) -> int:
    """A size as a user writes it (2G, 512M, 1.5GiB, 1073741824) -> bytes; ValueError when it is not one or
    is out of bounds (16 MiB to 1 TiB)."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r} (write e.g. 2G, 512M)")
    size = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if not MIN_MAX_SIZE <= size <= MAX_MAX_SIZE:
        raise ValueError(f"{text}: a compiler cache size must be between 16M and 1T")
    return size


# The Debian packages whose versions go into the key: the compilers, binutils, and the C and C++ libraries'
# headers (the riscv64 stage's own, and the cross ones of the build platform).
_COMPILER_PACKAGE = re.compile(
    r"(ccache|(gcc|g\+\+|cpp)(-\d+)?(-riscv64-linux-gnu)?|binutils(-riscv64-linux-gnu)?|"
    r"lib(gcc|stdc\+\+)-\d+-dev(-riscv64-cross)?|libc6-dev(-riscv64-cross)?|rustc(-web)?)(:[a-z0-9]+)?"
)


def compiler_packages(packages: Mapping[str, str]) -> dict[str, str]:
    """The packages of `packages` (name -> Debian version) that make the compiler what it is."""
    return {p: v for p, v in sorted(packages.items()) if _COMPILER_PACKAGE.fullmatch(p)}


def toolchain_id(mode: Mode, packages: Mapping[str, str]) -> str:
    """The name of a toolchain's cache (the engine's cache mount, the entry in a cache directory): its mode
    and its compiler packages' versions. The profiles of one toolchain share it; their keys differ."""
    doc = "\n".join([f"rvport-ccache-{KEY_FORMAT}", mode.value, *_lines(compiler_packages(packages))])
    return f"rvport-ccache-{mode.value}-{hashlib.sha256(doc.encode()).hexdigest()[:16]}"


def _lines(packages: Mapping[str, str]) -> list[str]:
    return [f"{p}={v}" for p, v in sorted(packages.items())]


def host_key(*, mode: Mode, profile: Profile, packages: Mapping[str, str]) -> tuple[str, ...]:
    """The part of the compiler check rvport knows before the stage runs: the key format, the mode, the
    profile (name, -march, -mabi) and the compiler packages. The stage script adds the compilers' content."""
    return (
        f"format={KEY_FORMAT}",
        f"mode={mode.value}",
        f"profile={profile.name}",
        f"march={profile.march}",
        f"mabi={profile.mabi}",
        *_lines(compiler_packages(packages)),
    )


def template_values(
    cache: CompilerCache, *, mode: Mode, profile: Profile, packages: Mapping[str, str]
) -> dict[str, str]:
    """The stage Dockerfiles' placeholders: CCACHE_ENV (ENV lines), CCACHE_MOUNT (the RUN's mount option,
    with its line continuation, or nothing)."""
    tid = toolchain_id(mode, packages)
    key = ";".join(host_key(mode=mode, profile=profile, packages=packages))
    env = {
        "RVPORT_CCACHE": cache.use.value,
        "RVPORT_CCACHE_KEY": key,
        "RVPORT_CCACHE_ID": tid,
        "RVPORT_CCACHE_PROGRAM": CCACHE_PROGRAM[mode],
        "RVPORT_CCACHE_NAMES": " ".join(NAMES),
        "CCACHE_DIR": CACHE_IN_STAGE,
        "CCACHE_TEMPDIR": TEMP_IN_STAGE,
        # written by the stage script: a ccache.conf in an imported cache is never read
        "CCACHE_CONFIGPATH": "/rvport/ccache.conf",
        "CCACHE_MAXSIZE": f"{cache.max_size // MiB}M",
        "CCACHE_STATSLOG": f"/out/{REPORT_DIR}/stats.log",
    }
    if cache.use is CacheUse.OFF:
        return dict(OFF_VALUES)
    lines = render.env_lines(env)
    if cache.use is CacheUse.ENGINE:
        mount = f"--mount=type=cache,id={tid},target={CACHE_IN_STAGE},sharing=shared \\\n    "
    else:
        mount = f"--mount=type=bind,source={IMPORT_DIR},target=/rvport/ccache-in \\\n    "
    mount += f"--mount=type=tmpfs,target={TEMP_IN_STAGE} \\\n    "
    return {"CCACHE_ENV": lines, "CCACHE_PATH": "/rvport/ccache-bin:", "CCACHE_MOUNT": mount}


# The placeholders of a stage with no compiler cache (a Dockerfile rendered outside a StageEnv)
OFF_VALUES: Mapping[str, str] = {
    "CCACHE_ENV": render.env_lines({"CCACHE_DISABLE": "1", "RVPORT_CCACHE": "off"}),
    "CCACHE_PATH": "",
    "CCACHE_MOUNT": "",
}


# ccache's counters (its --print-stats names) as the record counts them: a call is a hit, a miss, a call it
# could not cache (linking, preprocessing only, a configure test, an option it does not handle, ...), or an
# error of its own. Counters of the storage layers (local_storage_*, remote_storage_*, direct_cache_miss,
# preprocessed_cache_miss) repeat what these say and are not counted again.
HITS = ("direct_cache_hit", "preprocessed_cache_hit")
MISSES = ("cache_miss",)
UNCACHEABLE = (
    "autoconf_test",
    "bad_compiler_arguments",
    "called_for_link",
    "called_for_preprocessing",
    "compile_failed",
    "compiler_produced_empty_output",
    "compiler_produced_no_output",
    "compiler_produced_stdout",
    "could_not_use_modules",
    "could_not_use_precompiled_header",
    "multiple_source_files",
    "no_input_file",
    "output_to_stdout",
    "preprocessor_error",
    "recache",
    "unsupported_code_directive",
    "unsupported_compiler_option",
    "unsupported_environment_variable",
    "unsupported_source_language",
)
ERRORS = (
    "bad_output_file",
    "compiler_check_failed",
    "could_not_find_compiler",
    "error_hashing_extra_file",
    "internal_error",
    "missing_cache_file",
    "remote_storage_error",
    "remote_storage_timeout",
)


def count_stats(log: str) -> dict[str, int]:
    """ccache's stats log (CCACHE_STATSLOG: a `# source` line, then the counters that call raised, one a
    line) -> hits, misses, uncacheable, errors, calls (the calls logged)."""
    counts: dict[str, int] = {}
    calls = 0
    for line in log.splitlines():
        word = line.strip()
        if word.startswith("#"):
            calls += 1
        elif word:
            counts[word] = counts.get(word, 0) + 1
    return {
        "calls": calls,
        "hits": sum(counts.get(c, 0) for c in HITS),
        "misses": sum(counts.get(c, 0) for c in MISSES),
        "uncacheable": sum(counts.get(c, 0) for c in UNCACHEABLE),
        "errors": sum(counts.get(c, 0) for c in ERRORS),
    }


def _read(path: Path, limit: int) -> str | None:
    if not path.is_file() or path.is_symlink():
        return None
    data = read_regular(path, limit=limit, what="the compiler cache's report", follow=False)
    return data.decode("utf-8", errors="replace")


def _size(text: str | None) -> int | None:
    """A size the stage script wrote: ccache's cache_size_kibibyte, in KiB."""
    if text is None or not text.strip().isdigit():
        return None
    return int(text.strip()) * KiB


def take_report(files: Path, cache: CompilerCache) -> tuple[dict, Path | None]:
    """The stage script's report, taken out of the stage's artifacts: stages[].compiler_cache, and in DIR use
    the exported cache's directory (moved beside `files`, for compcachedir.export), else None."""
    report = files / REPORT_DIR
    record: dict = {"tool": TOOL, "use": cache.use.value, "max_size": cache.max_size}
    if report.is_symlink() or not report.is_dir():
        if report.is_symlink() or report.exists():
            report.unlink()
        if cache.use is not CacheUse.OFF:
            record["status"] = "no report (the stage's Dockerfile does not run the compiler cache)"
        return record, None
    if cache.use is CacheUse.OFF:
        shutil.rmtree(report)
        return record, None
    identity = _read(report / "identity", 64 * KiB)
    key = _read(report / "key", 256)
    stats = _read(report / "stats.log", REPORT_MAX_BYTES) or ""
    record.update(
        {
            "key": key.strip() if key and re.fullmatch(r"[0-9a-f]{64}", key.strip()) else None,
            "identity": identity.strip().splitlines()[:64] if identity else [],
            **count_stats(stats),
            "size_before": _size(_read(report / "size-before", 64)),
            "size_after": _size(_read(report / "size-after", 64)),
        }
    )
    exported = report / "dir"
    moved: Path | None = None
    if cache.use is CacheUse.DIR and exported.is_dir() and not exported.is_symlink():
        moved = files.parent / f"{REPORT_DIR}-export"
        shutil.rmtree(moved, ignore_errors=True)
        exported.rename(moved)
    shutil.rmtree(report)
    return record, moved


def rate(record: Mapping) -> str:
    """ "12/40 hits" as the CI summary shows a stage's compiler cache (hits of the cacheable calls)."""
    if record.get("use") == CacheUse.OFF.value:
        return "off"
    if "hits" not in record:
        return "-"
    return f"{record['hits']}/{record['hits'] + record['misses']} hits, {record['uncacheable']} uncacheable"
