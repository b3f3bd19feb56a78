"""The compiler cache's key, placeholders and report (rvport/engine/compcache.py), without Docker."""

from __future__ import annotations

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.engine import compcache
from rvport.engine.compcache import CacheUse, CompilerCache
from rvport.engine.modes import accelerated, cross, emulated
from rvport.vocab import Mode

# the Debian packages of a riscv64 stage and of the cross toolchain, as images list them
STAGE = {
    "gcc-14": "14.2.0-19",
    "g++-14": "14.2.0-19",
    "libstdc++-14-dev": "14.2.0-19",
    "binutils-riscv64-linux-gnu": "2.44-3",
    "python3": "3.13.5-1",
    "cmake": "3.31.6-2",
}
XTC = {"gcc-14-riscv64-linux-gnu": "14.2.0-19cross1", "ccache": "4.11.2-2"}

# ccache 4.7's stats log (CCACHE_STATSLOG) of four calls: a miss, a hit, a link, a preprocessing call
STATS_LOG = """\
# a.c
cache_miss
direct_cache_miss
local_storage_miss
local_storage_read_miss
local_storage_write
preprocessed_cache_miss
# a.c
direct_cache_hit
local_storage_hit
local_storage_read_hit
# a.o
called_for_link
# a.c
called_for_preprocessing
"""


def test_sizes_as_users_write_them_and_their_bounds():
    assert compcache.parse_size("2G") == 2 * compcache.GiB == compcache.DEFAULT_MAX_SIZE
    assert compcache.parse_size("512M") == 512 * compcache.MiB
    assert compcache.parse_size("1.5GiB") == int(1.5 * compcache.GiB)
    assert compcache.parse_size("1073741824") == compcache.GiB
    for bad in ("", "lots", "-1G", "2 X", "1K", "2P", "1e9"):
        with pytest.raises(ValueError):
            compcache.parse_size(bad)
    with pytest.raises(ValueError):
        CompilerCache(max_size=1)
    with pytest.raises(ValueError):  # a directory exactly with dir use
        CompilerCache(use=CacheUse.DIR)


def test_the_key_covers_the_profile_its_march_and_the_compiler_packages_and_versions():
    rvv128, rvv256 = get_profile("rvv128"), get_profile("rvv256")
    k128 = compcache.host_key(mode=Mode.ACCELERATED, profile=rvv128, packages={**STAGE, **XTC})
    k256 = compcache.host_key(mode=Mode.ACCELERATED, profile=rvv256, packages={**STAGE, **XTC})
    assert k128 != k256
    assert "profile=rvv256" in k256 and f"march={rvv256.march}" in k256 and "mabi=lp64d" in k256
    assert "gcc-14=14.2.0-19" in k256 and "gcc-14-riscv64-linux-gnu=14.2.0-19cross1" in k256
    assert not any(line.startswith(("python3=", "cmake=")) for line in k256)  # not the compiler
    # another build of the compiler package: another key
    other = compcache.host_key(
        mode=Mode.ACCELERATED, profile=rvv256, packages={**STAGE, **XTC, "gcc-14": "14.2.0-20"}
    )
    assert other != k256
    # the profiles share the toolchain's cache; a compiler of another version has its own
    assert compcache.toolchain_id(Mode.ACCELERATED, {**STAGE, **XTC}) == compcache.toolchain_id(
        Mode.ACCELERATED, {**STAGE, **XTC, "python3": "3.13.6-1"}
    )
    assert compcache.toolchain_id(Mode.ACCELERATED, STAGE) != compcache.toolchain_id(
        Mode.ACCELERATED, {**STAGE, "g++-14": "14.2.0-20"}
    )
    assert compcache.toolchain_id(Mode.QEMU, STAGE) != compcache.toolchain_id(Mode.ACCELERATED, STAGE)


def _env(values: dict[str, str]) -> dict[str, str]:
    out = {}
    for line in values["CCACHE_ENV"].splitlines():
        name, _, value = line.removeprefix("ENV ").partition("=")
        out[name] = value.strip('"')
    return out


def test_the_engine_cache_is_one_mount_per_toolchain_shared_by_the_profiles_under_their_own_keys():
    v128, v256 = (
        compcache.template_values(CompilerCache(), mode=Mode.QEMU, profile=get_profile(p), packages=STAGE)
        for p in ("rvv128", "rvv256")
    )
    tid = compcache.toolchain_id(Mode.QEMU, STAGE)
    assert v128["CCACHE_MOUNT"] == v256["CCACHE_MOUNT"]
    assert f"--mount=type=cache,id={tid},target=/rvport/ccache,sharing=shared" in v256["CCACHE_MOUNT"]
    e128, e256 = _env(v128), _env(v256)
    assert e128["RVPORT_CCACHE_KEY"] != e256["RVPORT_CCACHE_KEY"]  # never an rvv256 object for rvv128
    assert e256["RVPORT_CCACHE"] == "engine" and e256["CCACHE_MAXSIZE"] == "2048M"
    assert e256["RVPORT_CCACHE_PROGRAM"] == "/usr/bin/ccache"  # the riscv64 base's, emulated
    assert e256["CCACHE_CONFIGPATH"] == "/rvport/ccache.conf"  # an imported ccache.conf is never read
    assert v256["CCACHE_PATH"] == "/rvport/ccache-bin:"


def test_a_cache_directory_enters_as_build_context_and_off_puts_no_ccache_on_path(tmp_path):
    d = compcache.template_values(
        CompilerCache(use=CacheUse.DIR, directory=tmp_path, max_size=512 * compcache.MiB),
        mode=Mode.CROSS,
        profile=get_profile("rv64gc"),
        packages={},
    )
    assert d["CCACHE_MOUNT"].startswith("--mount=type=bind,source=ccache-in,target=/rvport/ccache-in")
    assert _env(d)["RVPORT_CCACHE"] == "dir" and _env(d)["CCACHE_MAXSIZE"] == "512M"
    off = compcache.template_values(
        compcache.OFF, mode=Mode.QEMU, profile=get_profile("rv64gc"), packages=STAGE
    )
    assert off["CCACHE_MOUNT"] == "" and off["CCACHE_PATH"] == ""
    assert _env(off) == {"CCACHE_DISABLE": "1", "RVPORT_CCACHE": "off"}


@pytest.mark.parametrize("use", [CacheUse.DIR, CacheUse.ENGINE])
def test_ccache_keeps_its_temporary_files_and_inode_cache_on_a_tmpfs_of_its_own(use, tmp_path):
    """ccache keeps its inode cache (the headers' hashes) only on a file system it knows to work, which the
    engine's storage driver may not be (fuse-overlayfs): its temporary_dir is a tmpfs mount in every use,
    outside the cache itself, so nothing of it is exported or shared."""
    values = compcache.template_values(
        CompilerCache(use=use, directory=tmp_path if use is CacheUse.DIR else None),
        mode=Mode.ACCELERATED,
        profile=get_profile("rvv256"),
        packages=STAGE,
    )
    env = _env(values)
    assert env["CCACHE_TEMPDIR"] == compcache.TEMP_IN_STAGE == "/rvport/ccache-tmp"
    assert not env["CCACHE_TEMPDIR"].startswith(env["CCACHE_DIR"] + "/")
    assert f"--mount=type=tmpfs,target={compcache.TEMP_IN_STAGE} " in values["CCACHE_MOUNT"]


def test_accelerated_stages_wrap_the_prefix_native_ccache_beside_the_cross_compilers():
    values = compcache.template_values(
        CompilerCache(), mode=Mode.ACCELERATED, profile=get_profile("rvv256"), packages={**STAGE, **XTC}
    )
    xtc = accelerated.XtcImage(
        tag="rvport/xtc:debian-trixie-xtc-amd64-0123456789ab",
        image_id="sha256:" + "0" * 64,
        platform="linux/amd64",
        gcc_major="14",
    )
    r = accelerated.render_stage(
        toolchain="rvport/toolchain:t", xtc=xtc, env={}, profile=get_profile("rvv256"), ccache=values
    )
    lines = r.text.splitlines()
    (path,) = [ln for ln in lines if ln.startswith("ENV PATH=")]
    assert path.startswith("ENV PATH=/rvport/ccache-bin:/opt/xtc/bin:")  # the links, then the compilers
    assert 'ENV RVPORT_CCACHE_PROGRAM="/opt/xtc/bin/ccache"' in lines
    assert "COPY rvport-ccache.sh /rvport/ccache.sh" in lines
    run = r.text[r.text.index("RUN --mount=type=bind,source=src,target=/src,rw ") :]
    assert run.index("--mount=type=cache,id=rvport-ccache-accelerated-") < run.index("ccache.sh start")
    assert run.index("ccache.sh start") < run.index("/rvport/build.sh") < run.index("ccache.sh end")
    assert "@@" not in r.text


def test_emulated_and_cross_stages_take_the_placeholders_too():
    from rvport.catalogue.recipes import load_catalogue
    from rvport.host import HostFacts
    from rvport.plan.planner import Request, make_plan

    cat = load_catalogue()
    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 << 30, binfmt_riscv64=True)
    for mode in (Mode.QEMU, Mode.CROSS):
        recipe = "msgspec" if mode is Mode.QEMU else "glide-ffi"
        req = Request(refs=(recipe,), all=False, profile=get_profile("rvv256"), mode=mode)
        st = make_plan(cat, req, host).stages[-1]
        values = compcache.template_values(CompilerCache(), mode=st.mode, profile=st.profile, packages={})
        module = emulated if mode is Mode.QEMU else cross
        text = module.render_stage(st, "rvport/toolchain:t", get_profile("rvv256"), values).text
        assert "ENV PATH=/rvport/ccache-bin:" in text and "sh -eu /rvport/ccache.sh start" in text
        assert f"id={compcache.toolchain_id(mode, {})}" in text and "@@" not in text


def test_stats_are_counted_per_call_from_the_stats_log():
    assert compcache.count_stats(STATS_LOG) == {
        "calls": 4,
        "hits": 1,
        "misses": 1,
        "uncacheable": 2,
        "errors": 0,
    }
    assert compcache.count_stats("") == {"calls": 0, "hits": 0, "misses": 0, "uncacheable": 0, "errors": 0}


def _report(files, *, key="a" * 64):
    r = files / compcache.REPORT_DIR
    (r / "dir" / "3").mkdir(parents=True)
    (r / "dir" / "3" / "stats").write_text("x")
    (r / "use").write_text("dir\n")
    (r / "identity").write_text("format=1\nprofile=rvv256\ncc1=abc\n")
    (r / "key").write_text(key + "\n")
    (r / "stats.log").write_text(STATS_LOG)
    (r / "size-before").write_text("16\n")
    (r / "size-after").write_text("48\n")
    return r


def test_the_report_is_taken_out_of_the_artifacts_with_the_exported_cache(tmp_path):
    files = tmp_path / "out" / "files"
    files.mkdir(parents=True)
    (files / "x.whl").write_text("wheel")
    _report(files)
    cache = CompilerCache(use=CacheUse.DIR, directory=tmp_path / "c")
    record, exported = compcache.take_report(files, cache)
    assert sorted(p.name for p in files.iterdir()) == ["x.whl"]  # nothing of the cache is an artifact
    assert exported == tmp_path / "out" / ".rvport-ccache-export" and (exported / "3" / "stats").is_file()
    assert record["key"] == "a" * 64 and record["identity"] == ["format=1", "profile=rvv256", "cc1=abc"]
    assert (record["hits"], record["misses"], record["uncacheable"], record["calls"]) == (1, 1, 2, 4)
    assert record["size_before"] == 16 * 1024 and record["size_after"] == 48 * 1024
    assert record["use"] == "dir" and record["tool"] == "ccache"
    assert compcache.rate(record) == "1/2 hits, 2 uncacheable"


def test_a_report_that_is_a_link_or_holds_a_bad_key_is_not_followed_or_trusted(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("b" * 64)
    (files / compcache.REPORT_DIR).symlink_to(secret)
    record, exported = compcache.take_report(files, CompilerCache())
    assert exported is None and "key" not in record and not (files / compcache.REPORT_DIR).exists()
    assert (secret / "key").exists()  # the link was removed, not what it named
    _report(files, key="not a key")
    record, exported = compcache.take_report(files, CompilerCache())  # engine use: nothing exported
    assert record["key"] is None and exported is None
    assert not (files / compcache.REPORT_DIR).exists()


def test_off_records_only_that_it_was_off(tmp_path):
    files = tmp_path / "files"
    (files / compcache.REPORT_DIR).mkdir(parents=True)
    (files / compcache.REPORT_DIR / "use").write_text("off\n")
    record, exported = compcache.take_report(files, compcache.OFF)
    assert record == {"tool": "ccache", "use": "off", "max_size": compcache.DEFAULT_MAX_SIZE}
    assert exported is None and compcache.rate(record) == "off"
