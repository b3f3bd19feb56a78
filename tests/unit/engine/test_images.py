"""Base image specs and the pure parts of bootstrapping (no docker)."""

from __future__ import annotations

import pytest

from rvport import resources
from rvport.catalogue.bases import BaseSpec, default_bases_dir, load_base, load_bases
from rvport.catalogue.toolchains import load_toolchains
from rvport.engine import bootstrap, images
from rvport.engine.images import base_key, host_debian_mirror, keep_debootstrap_log, parse_dpkg_status
from rvport.errors import ExitCode, RecipeError
from tests.fixtures.schemas import validate

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
    rv = load_base("debian-trixie")
    xtc = load_base("debian-trixie-xtc")
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
        load_base("b", tmp_path)
    (p,) = ei.value.problems
    assert p.line == 6 and "image" in p.message
    with pytest.raises(RecipeError, match="not found"):
        load_base("nope", tmp_path)


@pytest.mark.parametrize(
    "field",
    ['suite: "trixie\\nmain"', "suite: ../../x", "components: [main, 'a b']", 'suite: "tri\\x1bxie"'],
)
def test_a_base_specs_suite_and_components_are_names_without_control_characters(tmp_path, field):
    (tmp_path / "b.yaml").write_text(
        "schema: 1\nname: b\nkind: debootstrap\npackages: [ok]\n"
        + ("" if field.startswith("suite") else "suite: trixie\n")
        + field
        + "\n"
    )
    with pytest.raises(RecipeError) as ei:
        load_base("b", tmp_path)
    assert ei.value.problems and all(p.line for p in ei.value.problems)


# The base image's tag is a digest of its inputs, the spec file's bytes among them (not its path): these are
# the keys of the shipped specs (no mirror) since before they moved from toolchains/ to bases/. Editing a spec
# makes a new image on purpose; then update its keys here (the build-platform bases: ccache added, for the
# compiler cache beside the cross compilers).
KEYS = {
    ("debian-trixie", "linux/riscv64", bootstrap.CLASSIC): "1dcdb0325c4ef346",
    ("debian-trixie", "linux/riscv64", bootstrap.SPLIT): "e721889a93984e6a",
    ("debian-trixie-xtc", "linux/amd64", bootstrap.CLASSIC): "fff3bac9162186f0",
    ("debian-trixie-xtc", "linux/amd64", bootstrap.SPLIT): "a0565522b3bb0ae0",
    ("debian-trixie-xtc-rust", "linux/amd64", bootstrap.CLASSIC): "7ce990e393cef9da",
    ("debian-trixie-xtc-rust", "linux/amd64", bootstrap.SPLIT): "57d9010340691dba",
}


@pytest.mark.parametrize(("name", "platform", "method"), sorted(KEYS))
def test_the_shipped_bases_keep_their_image_keys(name, platform, method):
    assert base_key(load_base(name), platform, None, method)[:16] == KEYS[name, platform, method]


def test_the_bases_are_a_catalogue_of_their_own():
    specs = load_bases()
    assert set(specs) == {
        "debian-trixie",
        "debian-trixie-xtc",
        "debian-trixie-xtc-rust",
        "debian-sid",
        "debian-sid-xtc",
        "debian-sid-xtc-rust",
    }
    assert all(
        isinstance(s, BaseSpec) and s.file.parent == resources.builtin("bases") for s in specs.values()
    )
    assert specs["debian-trixie"] == load_base("debian-trixie")
    with pytest.raises(AttributeError):
        specs["debian-trixie"].suite = "sid"  # frozen
    assert default_bases_dir() == resources.builtin("bases")
    assert not any(p.stem.startswith("debian-") for p in resources.builtin("toolchains").glob("*.yaml"))


def test_rvport_bases_names_another_directory(tmp_path, monkeypatch):
    text = (resources.builtin("bases") / "debian-trixie.yaml").read_text()
    (tmp_path / "debian-trixie.yaml").write_text(text.replace("  - ccache\n", ""))
    monkeypatch.setitem(resources.OVERRIDES, "bases", tmp_path)  # the command line's RVPORT_BASES
    assert default_bases_dir() == tmp_path
    mine = load_base("debian-trixie")
    assert mine.file == tmp_path / "debian-trixie.yaml" and "ccache" not in mine.packages
    monkeypatch.setitem(resources.OVERRIDES, "bases", tmp_path / "none")
    with pytest.raises(RecipeError, match="base directory .* not found") as ei:
        load_base("debian-trixie")
    assert "RVPORT_BASES" in (ei.value.hint or "")


def test_every_problem_of_every_base_is_located_and_exits_3(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "schema: 1\nname: a\nkind: debootstrap\nsuite: trixie\npackages: [BAD name]\n"
    )
    (tmp_path / "b.yaml").write_text("schema: 1\nname: c\nkind: debootstrap\nsuite: trixie\npackages: []\n")
    (tmp_path / "d.yaml").write_text("- a list\n")
    (tmp_path / "e.yaml").write_text("schema: 1\nname: e\n  bad: [\n")
    with pytest.raises(RecipeError) as ei:
        load_bases(tmp_path)
    e = ei.value
    assert e.exit_code == ExitCode.RECIPE_INVALID == 3 and "4 problems" in e.message
    where = {(p.file.rsplit("/", 1)[-1], p.line) for p in e.problems}
    assert {("a.yaml", 5), ("b.yaml", 2), ("d.yaml", 1)} <= where, where
    assert all(p.file and p.line for p in e.problems), e.render()
    named = next(p for p in e.problems if p.file.endswith("b.yaml"))
    assert "differs from its file name" in named.message and named.hint == "rename the file to c.yaml"


def test_a_base_spec_left_in_a_toolchains_directory_is_reported_not_skipped(tmp_path):
    (tmp_path / "debian-trixie.yaml").write_text(
        (resources.builtin("bases") / "debian-trixie.yaml").read_text()
    )
    with pytest.raises(RecipeError) as ei:
        load_toolchains(tmp_path)
    (p,) = ei.value.problems
    assert p.file.endswith("debian-trixie.yaml") and p.line == 6 and "RVPORT_BASES" in p.hint


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


@pytest.fixture
def fake_engine(monkeypatch):
    """ensure_base with debootstrap and the engine faked: the rootfs has one package, loading it names it."""
    from rvport.engine import buildx, images, rootfs_image

    engine: dict[str, dict] = {}
    monkeypatch.setattr(images, "bootstrap_method", lambda platform, forced=None: (bootstrap.SPLIT, "test"))
    monkeypatch.setattr(images, "host_debian_mirror", lambda: "http://mirror.example/debian")
    monkeypatch.setattr(bootstrap.proc, "which", lambda name, env=None: f"/usr/bin/{name}")
    monkeypatch.setattr(buildx, "image_info", lambda ref: engine.get(ref))
    # the suite's signed Release (trixie's has no Valid-Until; sid's, as here, expired on 6 November 2026)
    releases = {
        "trixie": "Suite: stable\nCodename: trixie\n",
        "sid": "Suite: unstable\nCodename: sid\nValid-Until: Fri, 06 Nov 2026 08:08:01 UTC\n",
    }
    monkeypatch.setattr(
        images.debarchive,
        "fetch_release",
        lambda mirror, suite, **_: images.debarchive.SignedRelease(
            release=images.debarchive.parse_release(releases[suite]), inrelease_sha256="0" * 64, url=mirror
        ),
    )
    engine["made"] = {}

    def make_rootfs(req, rootfs, **_):
        engine["made"][req.suite] = engine["made"].get(req.suite, 0) + 1
        (rootfs / "etc/apt/apt.conf.d").mkdir(parents=True)
        (rootfs / "var/lib/dpkg").mkdir(parents=True)
        (rootfs / "var/lib/dpkg/status").write_text(
            "Package: libc6\nStatus: install ok installed\nVersion: 2.41\n"
        )

    def load(rootfs, scratch, *, tag, labels, **_):
        conf = rootfs / "etc/apt/apt.conf.d/99rvport-allow-expired-release"
        engine[tag] = {
            "id": "sha256:" + "1" * 64,
            "labels": {**labels, "org.rvport.release": "r" * 64},
            "apt_conf": conf.read_text() if conf.is_file() else None,
        }
        return engine[tag]["id"]

    monkeypatch.setattr(bootstrap, "make_rootfs", make_rootfs)
    monkeypatch.setattr(rootfs_image, "load_rootfs", load)
    return engine


def test_the_bases_record_is_versioned_and_valid_and_old_or_bad_records_do_not_crash(
    fake_engine, tmp_path, monkeypatch
):
    import json

    from rvport import manifest
    from rvport.engine import images

    args = dict(platform="linux/riscv64", cache_dir=tmp_path / "cache", log_path=tmp_path / "base.log")
    made = images.ensure_base(load_base("debian-trixie"), **args)
    record = tmp_path / "cache" / "bases" / f"{made.key}.json"
    doc = json.loads(record.read_text())
    validate(doc, manifest.schema("base-record"))
    assert doc["schema"] == images.BASE_RECORD_SCHEMA == 1 and doc["packages"] == {"libc6": "2.41"}
    assert doc["bootstrap"] == bootstrap.SPLIT and doc["mirror"] == "http://mirror.example/debian"

    asked = []
    monkeypatch.setattr(
        images, "installed_packages", lambda tag, platform: asked.append(tag) or {"libc6": "9"}
    )
    old = {k: v for k, v in doc.items() if k not in ("schema", "kind")}  # as written before records had one
    record.write_text(json.dumps(old))
    assert images.ensure_base(load_base("debian-trixie"), **args).packages == {"libc6": "2.41"} and not asked
    for bad in ("{not json", json.dumps(dict(doc, schema=99)), "[]"):
        record.write_text(bad)
        found = images.ensure_base(load_base("debian-trixie"), **args)
        assert found.reused and found.packages == {"libc6": "9"} and found.release_sha256 == "r" * 64
        validate(json.loads(record.read_text()), manifest.schema("base-record"))  # written again
    assert len(asked) == 3


def test_a_recipe_naming_an_unknown_or_build_platform_base_is_located(tmp_path):
    from rvport.catalogue.recipes import load_catalogue

    text = (resources.builtin("recipes") / "msgspec.yaml").read_text()
    assert text.count("\n  base: debian-trixie\n") == 1
    for name, base, says in (
        ("tiny-none", "debian-nosuch", "toolchain base 'debian-nosuch': base 'debian-nosuch' not found"),
        ("tiny-xtc", "debian-trixie-xtc", "is for the build platform (arch: build)"),
    ):
        d = tmp_path / name
        d.mkdir()
        (d / "msgspec.yaml").write_text(text.replace("\n  base: debian-trixie\n", f"\n  base: {base}\n"))
        with pytest.raises(RecipeError) as ei:
            load_catalogue(d)
        (p,) = [p for p in ei.value.problems if "toolchain base" in p.message]
        lines = (d / "msgspec.yaml").read_text().splitlines()
        assert (
            says in p.message and p.file.endswith("msgspec.yaml") and lines[p.line - 1] == f"  base: {base}"
        )
    assert load_catalogue().resolve("msgspec").toolchain.base == "debian-trixie"


def test_an_expired_release_is_refused_before_anything_is_made_and_made_when_accepted(fake_engine, tmp_path):
    """sid's Release expired: refused (exit 4) before debootstrap; accepted, the base carries the apt.conf.d
    file, a label and a key of its own, and says so in its record and result.json's entry."""
    import json

    from rvport.engine import images
    from rvport.errors import ExitCode
    from rvport.sources.debarchive import ExpiredRelease

    args = dict(platform="linux/riscv64", cache_dir=tmp_path / "cache", log_path=tmp_path / "base.log")
    sid = load_base("debian-sid")
    with pytest.raises(ExpiredRelease) as e:
        images.ensure_base(sid, **args)
    assert e.value.exit_code == ExitCode.INTEGRITY and "--allow-expired-release sid" in e.value.render()
    assert fake_engine["made"] == {}  # nothing was made
    lines: list[str] = []
    made = images.ensure_base(sid, **args, allow_expired=("sid",), on_line=lines.append)
    assert fake_engine["made"] == {"sid": 1}
    image = fake_engine[made.tag]
    assert 'Acquire::Check-Valid-Until "false";' in image["apt_conf"]
    assert image["labels"]["org.rvport.allow-expired-release"] == "sid"
    assert made.to_json()["expired_release_accepted"] is True
    assert made.to_json()["release_valid_until"] == "Fri, 06 Nov 2026 08:08:01 UTC"
    assert any("accepted by --allow-expired-release" in ln for ln in lines)
    record = json.loads((tmp_path / "cache" / "bases" / f"{made.key}.json").read_text())
    assert record["expired_release_accepted"] is True
    # reused while accepted; the trixie base (no Valid-Until) is made without the file and with its old key
    again = images.ensure_base(sid, **args, allow_expired=("sid",))
    assert again.reused and again.key == made.key and fake_engine["made"] == {"sid": 1}
    trixie = images.ensure_base(load_base("debian-trixie"), **args, allow_expired=("sid",))
    assert fake_engine[trixie.tag]["apt_conf"] is None and not trixie.expired_release_accepted


def test_a_base_recorded_with_a_valid_until_is_refused_once_it_has_passed(fake_engine, tmp_path):
    import json

    from rvport.engine import images
    from rvport.sources.debarchive import ExpiredRelease

    args = dict(platform="linux/riscv64", cache_dir=tmp_path / "cache", log_path=tmp_path / "base.log")
    made = images.ensure_base(load_base("debian-trixie"), **args)
    record = tmp_path / "cache" / "bases" / f"{made.key}.json"
    doc = json.loads(record.read_text())
    record.write_text(json.dumps(dict(doc, release_valid_until="Fri, 06 Nov 2026 08:08:01 UTC")))
    with pytest.raises(ExpiredRelease):
        images.ensure_base(load_base("debian-trixie"), **args)


def test_a_base_found_without_its_record_is_checked_from_its_label(fake_engine, tmp_path):
    """Made while accepted, found from another cache directory: its Valid-Until comes from the image's label,
    so the expiry is still checked (and recorded)."""
    from rvport.engine import images

    sid = load_base("debian-sid")
    made = images.ensure_base(
        sid,
        platform="linux/riscv64",
        cache_dir=tmp_path / "c1",
        log_path=tmp_path / "l",
        allow_expired=("sid",),
    )
    assert (
        fake_engine[made.tag]["labels"]["org.rvport.release-valid-until"] == "Fri, 06 Nov 2026 08:08:01 UTC"
    )
    other = dict(platform="linux/riscv64", cache_dir=tmp_path / "c2", log_path=tmp_path / "l")
    found = images.ensure_base(sid, **other, allow_expired=("sid",))
    assert found.reused and found.release_valid_until == "Fri, 06 Nov 2026 08:08:01 UTC"
    assert found.expired_release_accepted


def test_a_base_is_made_by_one_process_at_a_time(tmp_path, monkeypatch):
    """Two runs sharing a cache directory (two CI jobs on one host, `rvport prepare` beside a build) each
    need the sid base: the second waits for the first's lock and then finds its image, instead of making
    another and taking the tag over from the images already made on the first. Here the lock is taken from a
    process of its own, as another rvport would."""
    import subprocess
    import sys
    import time as _time

    from rvport.catalogue.bases import load_base

    spec = load_base("debian-sid")
    lock = tmp_path / "bases" / "debian-sid-riscv64.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(1.5)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    entered = []
    make = images._one_process_at_a_time(lambda *a, **k: entered.append(_time.monotonic()) or "base")
    t0 = _time.monotonic()
    got = make(spec, platform="linux/riscv64", cache_dir=tmp_path, log_path=tmp_path / "log")
    holder.wait(timeout=10)
    assert got == "base" and entered[0] - t0 >= 1.0  # it waited for the other process's lock
    assert images.ensure_base.__wrapped__  # the base rvport makes is made so
