"""Base image specs and the pure parts of bootstrapping (no docker)."""

from __future__ import annotations

import pytest

from rvport.build.images import (
    base_key,
    host_debian_mirror,
    keep_debootstrap_log,
    load_base_spec,
    parse_dpkg_status,
)
from rvport.errors import RecipeError

STATUS = """\
Package: libc6
Status: install ok installed
Architecture: riscv64
Version: 2.41-12

Package: removed-thing
Status: deinstall ok config-files
Version: 1.0

Package: python3
Status: install ok installed
Version: 3.13.5-1
Description: multi
 line
"""


def test_dpkg_status_lists_installed_packages_only():
    assert parse_dpkg_status(STATUS) == {"libc6": "2.41-12", "python3": "3.13.5-1"}


def test_shipped_specs_load_and_are_pinned_by_content():
    rv = load_base_spec("debian-trixie")
    xtc = load_base_spec("debian-trixie-xtc")
    assert rv.suite == xtc.suite == "trixie" and rv.arch == "target" and xtc.arch == "build"
    assert {"build-essential", "python3-dev"} <= set(rv.packages)
    assert "gcc-14-riscv64-linux-gnu" in xtc.packages
    k = base_key(rv, "linux/riscv64", None)
    assert k == base_key(rv, "linux/riscv64", None)
    assert k != base_key(rv, "linux/riscv64", "http://mirror.example/debian")
    assert k != base_key(rv, "linux/amd64", None)


def test_bad_spec_is_located(tmp_path):
    (tmp_path / "b.yaml").write_text(
        "schema: 1\nname: b\nkind: debootstrap\nsuite: trixie\npackages: [ok]\nimage: debian:latest\n"
    )
    with pytest.raises(RecipeError) as ei:
        load_base_spec("b", tmp_path)
    (p,) = ei.value.problems
    assert p.line == 6 and "image" in p.message
    with pytest.raises(RecipeError, match="not found"):
        load_base_spec("nope", tmp_path)


def test_mirror_comes_from_the_hosts_own_sources(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\nTypes: "
        "deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert host_debian_mirror(d, tmp_path / "none") == "http://mirror.example/debian"
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "sources.list").write_text("# comment\ndeb http://one.example/debian bookworm main\n")
    assert host_debian_mirror(empty, tmp_path / "sources.list") == "http://one.example/debian"
    assert host_debian_mirror(empty, tmp_path / "none") is None


def test_a_failed_debootstraps_own_log_is_kept_in_rvports_log(tmp_path):
    rootfs = tmp_path / "rootfs"
    (rootfs / "debootstrap").mkdir(parents=True)
    (rootfs / "debootstrap" / "debootstrap.log").write_text(
        "".join(f"line {i}\n" for i in range(300))
        + "dpkg: dependency problems prevent configuration of rustc-web\n"
    )
    log = tmp_path / "base.log"
    log.write_text("$ debootstrap ...\nW: Failure while configuring base packages.\n")
    keep_debootstrap_log(rootfs, log)
    text = log.read_text()
    assert text.startswith("$ debootstrap ...\n")
    assert "--- the last 200 lines of debootstrap/debootstrap.log ---" in text
    assert "dependency problems prevent configuration of rustc-web" in text and "line 100\n" not in text
    keep_debootstrap_log(tmp_path / "no-rootfs", log)  # nothing to keep: nothing happens
    assert log.read_text() == text
