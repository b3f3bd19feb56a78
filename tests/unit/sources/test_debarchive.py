"""A Debian archive's signed index (rvport/sources/debarchive.py): the Release parsed from gpgv's verified
text, its expiry refused unless accepted, the Packages index parsed, pins checked against it (the archive
that moved on is named with what it holds now), and the plan saying an accepted expiry. Small index files made
here; the signature with a throwaway key made by gpg when it is installed."""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rvport.errors import ExitCode, IntegrityError, SourceUnavailable
from rvport.sources import debarchive
from rvport.sources.debarchive import DebPin
from tests.fixtures.hosttools import need
from tests.fixtures.schemas import validate

RELEASE = """\
Origin: Debian
Suite: unstable
Codename: sid
Date: Fri, 30 Oct 2026 08:08:01 UTC
Valid-Until: Fri, 06 Nov 2026 08:08:01 UTC
Architectures: amd64 riscv64
SHA256:
 {sha} {size} main/binary-riscv64/Packages.xz
 0000000000000000000000000000000000000000000000000000000000000000 10 main/Contents-riscv64
"""

PACKAGES = """\
Package: python3-torch
Version: 2.14.1+dfsg-1
Architecture: riscv64
Filename: pool/main/p/pytorch/python3-torch_2.14.1+dfsg-1_riscv64.deb
Size: 12512760
SHA256: 205e0989319a1f86e544fdfb2c7fcbad78ba96d3bd03cd9334cfd28e2b4487a0
Description: Tensors and Dynamic neural networks in Python
 (continued)

Package: libtorch2.14
Version: 2.14.1+dfsg-1
Architecture: riscv64
Filename: pool/main/p/pytorch/libtorch2.14_2.14.1+dfsg-1_riscv64.deb
Size: 55271920
SHA256: 3f6613a1271e07a010253ce30c1186a6c4b8b4165fd2588d810e9fe93b0ab9f2
"""

TORCH = DebPin(
    name="python3-torch",
    version="2.14.1+dfsg-1",
    sha256="205e0989319a1f86e544fdfb2c7fcbad78ba96d3bd03cd9334cfd28e2b4487a0",
)
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def _release(**kw) -> debarchive.Release:
    return debarchive.parse_release(RELEASE.format(sha="ab" * 32, size=123), **kw)


def test_release_fields_and_its_sha256_list():
    r = _release()
    assert (r.suite, r.codename) == ("unstable", "sid")
    assert r.valid_until == dt.datetime(2026, 11, 6, 8, 8, 1, tzinfo=dt.UTC)
    assert r.sha256["main/binary-riscv64/Packages.xz"] == ("ab" * 32, 123)
    assert len(r.sha256) == 2
    assert not r.expired(dt.datetime(2026, 11, 1, tzinfo=dt.UTC)) and r.expired(NOW)


def test_a_release_without_valid_until_never_expires():
    r = debarchive.parse_release("Suite: stable\nCodename: trixie\nDate: Sat, 21 Nov 2026 09:15:44 UTC\n")
    assert r.valid_until is None and not r.expired(NOW)
    assert debarchive.check_expiry(r, suite="trixie", now=NOW, accepted=()) is False


def test_not_a_release_and_a_bad_date_are_integrity_errors():
    with pytest.raises(IntegrityError):
        debarchive.parse_release("Hello: world\n")
    with pytest.raises(IntegrityError, match="not a date"):
        debarchive.parse_release("Suite: sid\nValid-Until: someday\n")


def test_an_expired_release_is_refused_by_default_naming_suite_date_and_the_way_to_accept():
    with pytest.raises(debarchive.ExpiredRelease) as e:
        debarchive.check_expiry(_release(), suite="sid", now=NOW, accepted=())
    assert e.value.exit_code == ExitCode.INTEGRITY
    text = e.value.render()
    assert "Debian sid" in text and "Valid-Until Fri, 06 Nov 2026 08:08:01 UTC" in text
    assert "--allow-expired-release sid" in text and "RVPORT_ALLOW_EXPIRED_RELEASE=sid" in text
    with pytest.raises(debarchive.ExpiredRelease):  # another suite's acceptance does not count
        debarchive.check_expiry(_release(), suite="sid", now=NOW, accepted=("trixie",))


def test_an_accepted_expired_release_is_reported_as_accepted():
    assert debarchive.check_expiry(_release(), suite="sid", now=NOW, accepted=("sid",)) is True
    assert debarchive.check_expiry(_release(), suite="sid", now=NOW, accepted=("unstable",)) is True
    before = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    assert debarchive.check_expiry(_release(), suite="sid", now=before, accepted=("sid",)) is False


def test_accepted_suites_from_option_and_environment():
    env = {"RVPORT_ALLOW_EXPIRED_RELEASE": "sid, bookworm"}
    assert debarchive.accepted_suites(["trixie", "sid"], env) == ("bookworm", "sid", "trixie")
    assert debarchive.accepted_suites([], {}) == ()


def test_packages_index_lists_every_version():
    idx = debarchive.parse_packages(PACKAGES + "\nPackage: python3-torch\nVersion: 2.15.0-1\nSHA256: cd\n")
    assert [p.version for p in idx["python3-torch"]] == ["2.14.1+dfsg-1", "2.15.0-1"]
    t = idx["python3-torch"][0]
    assert t.size == 12512760 and t.filename.endswith("python3-torch_2.14.1+dfsg-1_riscv64.deb")
    assert t.sha256 == TORCH.sha256


def test_packages_index_of_named_packages_alone_is_the_whole_index_filtered():
    text = (
        PACKAGES
        + "\nPackage: python3-torch\nVersion: 2.15.0-1\nSHA256: cd\n"
        + "\nPackage: zlib1g\nVersion: 1:1.3-1\nSHA256: ef\n"
        # a stanza that does not open with its Package line is parsed to be told
        + "\nVersion: 9-1\nPackage: libtorch-dev\nSHA256: 01\n"
    )
    whole = debarchive.parse_packages(text)
    names = frozenset({"python3-torch", "libtorch-dev", "not-there"})
    assert debarchive.parse_packages(text, names) == {n: v for n, v in whole.items() if n in names}
    assert [p.version for p in debarchive.parse_packages(text, names)["libtorch-dev"]] == ["9-1"]
    assert debarchive.parse_packages(text, frozenset()) == {}


def test_pins_found_as_the_index_has_them():
    idx = debarchive.parse_packages(PACKAGES)
    (found,) = debarchive.check_pins([TORCH], idx, where="Debian sid (riscv64)")
    assert found.to_json()["size"] == 12512760


def test_an_archive_that_moved_on_is_named_with_what_it_has_now():
    moved = PACKAGES.replace("2.14.1+dfsg-1", "2.15.0+dfsg-2")
    with pytest.raises(SourceUnavailable) as e:
        debarchive.check_pins([TORCH], debarchive.parse_packages(moved), where="Debian sid (riscv64)")
    text = e.value.render()
    assert "python3-torch 2.14.1+dfsg-1 (the archive has 2.15.0+dfsg-2)" in text
    assert e.value.exit_code == ExitCode.SOURCE_UNAVAILABLE and "nothing was built" in text
    gone = DebPin(name="libtorch-dev", version="2.14.1+dfsg-1", sha256="00" * 32)
    with pytest.raises(
        SourceUnavailable, match="libtorch-dev 2.14.1.dfsg-1 .the archive has no version of it"
    ):
        debarchive.check_pins([gone], debarchive.parse_packages(PACKAGES), where="Debian sid")


def test_the_same_version_with_another_digest_is_an_integrity_error():
    bad = DebPin(name=TORCH.name, version=TORCH.version, sha256="11" * 32)
    with pytest.raises(IntegrityError, match="digest differs") as e:
        debarchive.check_pins([bad], debarchive.parse_packages(PACKAGES), where="Debian sid")
    assert e.value.exit_code == ExitCode.INTEGRITY


# ------------------------------------------------------------------------------- the signature, with gpg
@pytest.fixture(scope="module")
def keyring(tmp_path_factory) -> Iterator[tuple[Path, Path]]:
    """(GNUPGHOME with a throwaway signing key, its public keyring file)."""
    need("gpg", "gpgv")
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
    subprocess.run(
        [*gpg, "--quick-gen-key", "rvport test <t@example.invalid>", "ed25519", "sign", "1d"],
        check=True,
        capture_output=True,
    )
    ring = home / "ring.gpg"
    subprocess.run([*gpg, "--output", str(ring), "--export"], check=True, capture_output=True)
    yield home, ring
    # gpg started an agent for this home: stop it, so that no daemon outlives the test run
    subprocess.run(
        ["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False, capture_output=True
    )


def _clearsign(home: Path, text: str, dest: Path) -> Path:
    src = dest.with_suffix(".txt")
    src.write_text(text)
    subprocess.run(
        [
            "gpg",
            "--homedir",
            str(home),
            "--batch",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--output",
            str(dest),
            "--clearsign",
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    return dest


def test_only_the_verified_text_is_read(keyring, tmp_path):
    home, ring = keyring
    signed = _clearsign(home, RELEASE.format(sha="cd" * 32, size=9), tmp_path / "InRelease")
    text = debarchive.verify_signed(signed, ring)
    assert debarchive.parse_release(text).sha256["main/binary-riscv64/Packages.xz"] == ("cd" * 32, 9)
    assert "BEGIN PGP" not in text


def test_a_changed_inrelease_does_not_verify(keyring, tmp_path):
    home, ring = keyring
    signed = _clearsign(home, RELEASE.format(sha="cd" * 32, size=9), tmp_path / "InRelease")
    signed.write_text(signed.read_text().replace("Fri, 06 Nov 2026", "Fri, 06 Nov 2036"))
    with pytest.raises(IntegrityError, match="does not verify"):
        debarchive.verify_signed(signed, ring)


def test_a_missing_keyring_is_a_host_problem(tmp_path):
    (tmp_path / "InRelease").write_text("x")
    with pytest.raises(Exception) as e:
        debarchive.verify_signed(tmp_path / "InRelease", tmp_path / "none.gpg")
    assert e.value.exit_code == ExitCode.HOST_NOT_READY


# ------------------------------------------------------------------------------- the plan and the base key
def test_the_plan_shows_an_accepted_expiry_and_is_unchanged_without_one():

    from rvport import manifest
    from rvport.catalogue.profiles import get_profile
    from rvport.catalogue.recipes import load_catalogue
    from rvport.host import HostFacts
    from rvport.plan.planner import Request, make_plan

    cat, host = load_catalogue(), HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
    req = Request(refs=("msgspec",), profile=get_profile("rv64gc"))
    plain = make_plan(cat, req, host).to_json()
    assert "allow_expired_release" not in plain
    accepted = make_plan(cat, Request(**{**req.__dict__, "allow_expired_release": ("sid",)}), host)
    doc = accepted.to_json()
    validate(doc, manifest.schema("plan"))
    assert doc["allow_expired_release"] == ["sid"]
    assert any("--allow-expired-release sid" in w for w in accepted.warnings)  # said, never silent


def test_an_accepted_base_is_another_image_and_other_keys_stay():
    from rvport.catalogue.bases import load_base
    from rvport.engine.images import base_key

    sid = load_base("debian-sid")
    plain = base_key(sid, "linux/riscv64", "http://mirror.invalid/debian")
    assert base_key(sid, "linux/riscv64", "http://mirror.invalid/debian", expired_accepted=False) == plain
    assert base_key(sid, "linux/riscv64", "http://mirror.invalid/debian", expired_accepted=True) != plain


def test_the_sid_bases_mirror_trixies():
    from rvport.catalogue.bases import load_base

    sid, trixie = load_base("debian-sid"), load_base("debian-trixie")
    assert sid.suite == "sid" and sid.arch == "target" and set(sid.packages) == set(trixie.packages)
    xtc = load_base("debian-sid-xtc")
    assert xtc.arch == "build" and {"gcc-16-riscv64-linux-gnu", "g++-16-riscv64-linux-gnu"} <= set(
        xtc.packages
    )


# ------------------------------------------------------------------- a recipe's pins against a served archive
@pytest.fixture
def archive(keyring, tmp_path):
    """A tiny Debian archive served over HTTP on localhost: dists/sid/InRelease (signed with the throwaway
    key, an expired Valid-Until) and main/binary-riscv64/Packages.xz."""
    import functools
    import hashlib
    import http.server
    import lzma
    import threading

    home, ring = keyring
    root = tmp_path / "www"
    d = root / "dists/sid/main/binary-riscv64"
    d.mkdir(parents=True)
    xz = lzma.compress(PACKAGES.encode())
    (d / "Packages.xz").write_bytes(xz)
    text = RELEASE.format(sha=hashlib.sha256(xz).hexdigest(), size=len(xz))
    _clearsign(home, text, root / "dists/sid/InRelease")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", ring, root
    server.shutdown()


def _vllm_like(pins):
    from dataclasses import replace

    from rvport.catalogue.model import DebianPin
    from rvport.catalogue.recipes import load_catalogue

    r = load_catalogue().resolve("vllm")
    return replace(r, toolchain=replace(r.toolchain, pins=tuple(DebianPin(**p.to_json()) for p in pins)))


def test_a_recipes_pins_are_checked_against_the_signed_index_and_recorded(archive, tmp_path):
    from rvport.engine import debpins
    from rvport.sources import fetch_options

    mirror, ring, _ = archive
    fo = fetch_options(cache_dir=tmp_path / "cache")
    recipe = _vllm_like([TORCH])
    with pytest.raises(debarchive.ExpiredRelease):  # sid's Release has expired: refused by default
        debpins.check_recipe_pins(recipe, fo, mirror=mirror, keyring=ring)
    doc = debpins.check_recipe_pins(recipe, fo, mirror=mirror, keyring=ring, allow_expired=("sid",))
    assert doc["expired_release_accepted"] is True and doc["suite"] == "sid"
    assert doc["packages"][0] | {} == dict(
        name="python3-torch",
        version="2.14.1+dfsg-1",
        architecture="riscv64",
        filename="pool/main/p/pytorch/python3-torch_2.14.1+dfsg-1_riscv64.deb",
        size=12512760,
        sha256=TORCH.sha256,
    )
    cached = list((tmp_path / "cache" / "sha256").iterdir())  # the index, kept by its digest
    assert len(cached) == 1
    moved = DebPin(name="python3-torch", version="2.13.0-1", sha256=TORCH.sha256)
    with pytest.raises(SourceUnavailable, match=r"the archive has 2\.14\.1\+dfsg-1"):
        debpins.check_recipe_pins(
            _vllm_like([moved]), fo, mirror=mirror, keyring=ring, allow_expired=("sid",)
        )


def test_an_index_that_is_not_the_signed_releases_is_refused(archive, tmp_path):
    from rvport.engine import debpins
    from rvport.sources import fetch_options

    mirror, ring, root = archive
    (root / "dists/sid/main/binary-riscv64/Packages.xz").write_bytes(b"not the signed one")
    fo = fetch_options(cache_dir=tmp_path / "cache")
    with pytest.raises(IntegrityError, match="is not the signed Release's"):
        debpins.check_recipe_pins(
            _vllm_like([TORCH]), fo, mirror=mirror, keyring=ring, allow_expired=("sid",)
        )
    assert not list((tmp_path / "cache").rglob("*.part"))  # nothing half-written left


def test_pins_reach_apt_as_exact_versions_and_plans_without_pins_are_unchanged():
    from rvport.catalogue.recipes import load_catalogue

    cat = load_catalogue()
    vllm = cat.resolve("vllm").toolchain
    assert vllm.base == "debian-sid" and "python3-torch=2.14.1+dfsg-1" in vllm.apt_packages
    assert {p.name for p in vllm.pins} == {"python3-torch", "libtorch-dev", "libtorch2.14"}
    assert "pins" in vllm.to_json() and "pins" not in cat.resolve("msgspec").toolchain.to_json()
