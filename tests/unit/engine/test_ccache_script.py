"""The compiler cache's stage script (resources/scripts/ccache.sh) run for real on the host, with the host's
ccache and gcc, as a build stage runs it around its build: one cache shared by two profiles never hands the
objects of one to the other, a compiler of another version misses, the same stage again hits, and an
imported ccache.conf sets nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from rvport.catalogue.profiles import get_profile
from rvport.engine import compcache
from rvport.vocab import Mode
from tests.fixtures.hosttools import needs

SOURCES = {
    "a.c": "int triple(int x) { return 3 * x; }\n",
    "b.c": '#include "b.h"\nint quad(int x) { return QUAD(x); }\n',
    "b.h": "#define QUAD(x) (4 * (x))\n",
}
GCC = {"gcc-12": "12.2.0-14", "cpp-12": "12.2.0-14"}


def _stage(tmp_path: Path, cache: Path, profile: str, packages: dict[str, str], use: str = "dir"):
    """Run start, the compiles of a build and end as a stage does; returns its report and out dir."""
    values = compcache.template_values(
        compcache.CompilerCache(use=compcache.CacheUse.DIR, directory=cache)
        if use == "dir"
        else compcache.CompilerCache(),
        mode=Mode.QEMU,
        profile=get_profile(profile),
        packages=packages,
    )
    env = {}
    for line in values["CCACHE_ENV"].splitlines():
        name, _, value = line.removeprefix("ENV ").partition("=")
        env[name] = value.strip('"')
    work = tmp_path / f"stage-{len(list(tmp_path.glob('stage-*')))}"
    src, out = work / "src", work / "out"
    src.mkdir(parents=True)
    for name, text in SOURCES.items():
        (src / name).write_text(text)
    links = work / "bin"
    env.update(
        RVPORT_OUT=str(out),
        RVPORT_CCACHE_LINKS=str(links),
        RVPORT_CCACHE_IMPORT=str(cache),  # what the build context brings in (here: the last export)
        RVPORT_CCACHE_PROGRAM=subprocess.check_output(["sh", "-c", "command -v ccache"], text=True).strip(),
        CCACHE_DIR=str(work / "ccache"),
        CCACHE_CONFIGPATH=str(work / "ccache.conf"),
        CCACHE_STATSLOG=str(out / compcache.REPORT_DIR / "stats.log"),
        PATH=f"{links}:{os.environ['PATH']}",
        HOME=str(work),
    )
    script = compcache.script()
    run = {"env": env, "cwd": src, "check": True, "capture_output": True, "text": True}
    subprocess.run(["sh", "-euc", script, "ccache.sh", "start"], **run)
    march = get_profile(profile).march.split("_")[0].replace("v", "")  # the host gcc has no RISC-V -march
    for c in ("a.c", "b.c"):  # the same flags in every profile: only the key can tell them apart
        subprocess.run(["gcc", "-O2", f"-DPROFILE_MARCH_{march}", "-c", c], **run)
    subprocess.run(["sh", "-euc", script, "ccache.sh", "end"], **run)
    record, exported = compcache.take_report(
        out, compcache.CompilerCache(use=compcache.CacheUse.DIR, directory=cache)
    )
    if exported is not None:  # what the runner's export does, in short: the next stage imports it
        if cache.exists():
            subprocess.run(["rm", "-rf", str(cache)], check=True)
        exported.rename(cache)
    return record, src


@needs("ccache", "gcc")
def test_profiles_sharing_a_cache_never_get_each_others_objects_nor_another_compilers(tmp_path):
    cache = tmp_path / "cache"
    cold, _ = _stage(tmp_path, cache, "rvv256", GCC)
    assert (cold["hits"], cold["misses"]) == (0, 2) and cold["key"] and cold["size_after"] > 0
    assert "profile=rvv256" in cold["identity"] and any("/cc1=" in line for line in cold["identity"])
    # a cache from elsewhere may carry a ccache.conf that would make every compiler check pass: never read
    (cache / "ccache.conf").write_text("compiler_check = none\nsloppiness = time_macros\n")
    other, _ = _stage(tmp_path, cache, "rvv128", GCC)  # the same compiler, sources and flags
    assert (other["hits"], other["misses"]) == (0, 2) and other["key"] != cold["key"]
    newer, _ = _stage(tmp_path, cache, "rvv256", {**GCC, "gcc-12": "12.2.0-15"})  # another compiler build
    assert (newer["hits"], newer["misses"]) == (0, 2) and "gcc-12=12.2.0-15" in newer["identity"]
    warm, _ = _stage(tmp_path, cache, "rvv256", GCC)  # every profile's objects live side by side
    assert (warm["hits"], warm["misses"]) == (2, 0) and warm["key"] == cold["key"]
