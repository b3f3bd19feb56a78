"""`rvport wheelhouse` (rvport.closure.wheelhouse) without the network: a tiny lock of a recipe wheel, a pure
index wheel, a riscv64 index wheel and Debian's torch; the index's wheels from a mirror directory (offline),
Debian's signed index from the throwaway archive of test_debarchive. Each refusal leaves nothing behind."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from rvport import manifest, outdir
from rvport.catalogue import closure_lock
from rvport.catalogue.closure_lock import DebianRef, Entry, Lock, Origin, Target
from rvport.catalogue.profiles import get_profile
from rvport.closure import wheelhouse as wh
from rvport.closure.resolve import write_lock
from rvport.errors import ExitCode, IntegrityError, SourceUnavailable, UsageError, VerifyFailed
from rvport.sources import fetch_options
from tests.fixtures import elfwriter
from tests.fixtures.cli import rvport_process
from tests.fixtures.elfs import record_hash
from tests.fixtures.schemas import validate
from tests.unit.sources.test_debarchive import TORCH, archive, keyring  # noqa: F401 - fixtures used below

SID = Target(python="3.14", python_full="3.14.9", glibc="2.43", base="debian-sid", suite="sid")
RV_SO = elfwriter.elf(
    type=elfwriter.ET_DYN,
    arch="rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0",
    needed=["libc.so.6"],
    verneed={"libc.so.6": ["GLIBC_2.27"]},
)
X86_SO = elfwriter.elf(machine=elfwriter.EM_X86_64, type=elfwriter.ET_DYN, e_flags=0, needed=["libc.so.6"])


def make_wheel(out: Path, dist: str, version: str, tag: str, files: dict[str, bytes], requires=()) -> Path:
    distinfo = f"{dist}-{version}.dist-info"
    files = dict(files)
    files[f"{distinfo}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
    ).encode()
    files[f"{distinfo}/WHEEL"] = f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    rows = io.StringIO()
    w = csv.writer(rows, lineterminator="\n")
    for name, data in files.items():
        w.writerow([name, record_hash(data), str(len(data))])
    w.writerow([f"{distinfo}/RECORD", "", ""])
    files[f"{distinfo}/RECORD"] = rows.getvalue().encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def house(tmp_path):
    """(the lock, its options minus Debian, the mirror, the artifacts): app 1.0 (a recipe) requires dep_a and
    dep_b (index wheels: pure, riscv64) and torch (Debian's)."""
    mirror, art = tmp_path / "mirror", tmp_path / "out" / "artifacts"
    a = make_wheel(mirror, "dep_a", "1.0", "py3-none-any", {"dep_a/__init__.py": b""})
    b = make_wheel(mirror, "dep_b", "2.0", "cp314-cp314-manylinux_2_31_riscv64", {"dep_b/_b.so": RV_SO})
    make_wheel(
        art,
        "app",
        "1.0+cpu",
        "cp314-cp314-linux_riscv64",
        {"app/_C.so": RV_SO},
        requires=["dep-a>=1", "dep_b", "torch==2.14.*", 'nothing; platform_machine == "x86_64"'],
    )
    lock = _lock(
        tmp_path,
        [
            Entry(
                name="app",
                version="1.0",
                origin=Origin.RECIPE,
                recipe="app",
                requires=("dep-a>=1", "dep-b", "torch==2.14.*"),
            ),
            Entry(name="dep-a", version="1.0", origin=Origin.PYPI, wheel=a.name, sha256=sha(a)),
            Entry(name="dep-b", version="2.0", origin=Origin.PYPI, wheel=b.name, sha256=sha(b)),
            Entry(
                name="torch",
                version="2.14.1",
                origin=Origin.DEBIAN,
                debian=DebianRef(package="python3-torch", version=TORCH.version, sha256=TORCH.sha256),
            ),
        ],
    )
    return lock, mirror, art


def _lock(tmp_path: Path, entries, edits=()) -> Lock:
    body = Lock(
        recipe="app",
        version="1.0",
        target=SID,
        entries=tuple(entries),
        digest="",
        debian_release={},
        edits=tuple(edits),
    )
    lock = Lock(
        recipe="app",
        version="1.0",
        target=SID,
        entries=tuple(entries),
        digest=closure_lock.digest_of(body.body()),
        debian_release={},
        edits=tuple(edits),
    )
    return write_lock(lock, tmp_path / "locks" / "app-1.0-cp314.yaml")


def _opts(tmp_path, mirror, art, archive_, **kw):
    url, ring, _root = archive_
    return wh.Options(
        output=kw.pop("output", tmp_path / "wheelhouse"),
        artifacts=(art,),
        profile=get_profile(kw.pop("profile", "rvv256")),
        fetch=fetch_options(cache_dir=tmp_path / "cache", mirror=mirror),  # every wheel is in the mirror
        allow_expired=("sid",),
        debian_mirror=url,
        keyring=ring,
        **kw,
    )


def _nothing_left(tmp_path: Path, out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")], (
        "a temporary dir is left"
    )


def test_a_wheelhouse_holds_every_wheel_with_hashes_and_the_apt_list(tmp_path, house, archive):
    lock, mirror, art = house
    opts = _opts(tmp_path, mirror, art, archive)
    doc = wh.make(lock, opts)
    out = opts.output
    validate(doc, manifest.schema("wheelhouse"))
    assert json.loads((out / wh.MANIFEST).read_text()) == doc
    wheels = sorted(p.name for p in out.glob("*.whl"))
    assert wheels == [
        "app-1.0+cpu-cp314-cp314-linux_riscv64.whl",
        "dep_a-1.0-py3-none-any.whl",
        "dep_b-2.0-cp314-cp314-manylinux_2_31_riscv64.whl",
    ]
    req = (out / wh.REQUIREMENTS).read_text()
    for w in out.glob("*.whl"):
        assert f"--hash=sha256:{sha(w)}" in req
    assert "app==1.0+cpu \\\n    --hash=sha256:" in req and "dep-b==2.0 \\" in req and "torch" not in req
    assert (out / wh.DEBIAN_LIST).read_text().splitlines()[1:] == ["python3-torch=2.14.1+dfsg-1"]
    assert doc["lock"]["digest"] == lock.digest and doc["profile"] == "rvv256"
    assert sorted(json.loads((out / outdir.MANIFEST).read_text())["entries"]) == sorted(
        p.name for p in out.iterdir() if p.name != outdir.MANIFEST
    )
    # a file rvport did not put there: the wheelhouse is not replaced (nor the file removed)
    (out / "mine.whl").write_bytes(b"x")
    with pytest.raises(UsageError, match="what rvport did not write there: mine.whl"):
        wh.make(lock, opts)
    assert (out / "mine.whl").read_bytes() == b"x"
    # made again: the previous one is replaced whole, and no temporary directory stays
    (out / "mine.whl").unlink()
    (out / "app-1.0+cpu-cp314-cp314-linux_riscv64.whl").unlink()  # one listed, gone: still rvport's
    wh.make(lock, opts)
    assert (out / "app-1.0+cpu-cp314-cp314-linux_riscv64.whl").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".wheelhouse.")] == []


def test_a_wheelhouse_made_is_read_back_and_one_changed_after_is_refused(tmp_path, house, archive):
    lock, mirror, art = house
    opts = _opts(tmp_path, mirror, art, archive)
    doc = wh.make(lock, opts)
    got = wh.read(opts.output)
    assert got.doc == doc and (got.recipe, got.profile, got.suite, got.base) == (
        "app",
        "rvv256",
        "sid",
        "debian-sid",
    )
    assert got.wheel_names() == {"app", "dep-a", "dep-b"}
    assert got.debian() == [("python3-torch", TORCH.version, TORCH.sha256)]
    (opts.output / wh.DEBIAN_LIST).write_text("python3-torch=9\n")
    with pytest.raises(IntegrityError, match="changed since it was made") as ei:
        wh.read(opts.output)
    assert "debian-packages.txt is not the one wheelhouse.json describes" in ei.value.render()


def test_a_missing_recipe_wheel_is_named_and_nothing_is_written(tmp_path, house, archive):
    lock, mirror, _ = house
    empty = tmp_path / "empty"
    empty.mkdir()
    opts = _opts(tmp_path, mirror, empty, archive)
    with pytest.raises(SourceUnavailable, match="needs 1 wheel") as ei:
        wh.make(lock, opts)
    assert ei.value.exit_code == ExitCode.SOURCE_UNAVAILABLE
    assert "app 1.0 (recipe app)" in ei.value.render() and "--artifacts" in ei.value.render()
    _nothing_left(tmp_path, opts.output)


def test_a_recipe_wheel_for_another_python_or_platform_does_not_count(tmp_path, house, archive):
    lock, mirror, _ = house
    other = tmp_path / "other"
    make_wheel(other, "app", "1.0", "cp313-cp313-linux_riscv64", {"app/_C.so": RV_SO})
    make_wheel(other, "app", "1.0", "cp314-cp314-linux_x86_64", {"app/_C.so": X86_SO})
    with pytest.raises(SourceUnavailable) as ei:
        wh.make(lock, _opts(tmp_path, mirror, other, archive))
    assert "only app-1.0-cp313-cp313-linux_riscv64.whl, app-1.0-cp314-cp314-linux_x86_64.whl there" in (
        ei.value.render()
    )


def test_an_index_wheel_whose_bytes_changed_is_refused(tmp_path, house, archive):
    lock, mirror, art = house
    b = mirror / lock.entry("dep-b").wheel
    make_wheel(mirror, "dep_b", "2.0", "cp314-cp314-manylinux_2_31_riscv64", {"dep_b/_b.so": RV_SO + b"\0"})
    assert sha(b) != lock.entry("dep-b").sha256
    opts = _opts(tmp_path, mirror, art, archive)
    with pytest.raises(IntegrityError, match="is not the source") as ei:
        wh.make(lock, opts)
    assert ei.value.exit_code == ExitCode.INTEGRITY
    _nothing_left(tmp_path, opts.output)


def test_an_x86_wheel_with_a_riscv64_tag_is_refused_by_verify(tmp_path, house, archive):
    lock, mirror, art = house
    doc = json.loads(json.dumps(lock.body()))
    bad = make_wheel(
        tmp_path / "bad", "dep_b", "2.0", "cp314-cp314-manylinux_2_31_riscv64", {"dep_b/_b.so": X86_SO}
    )
    (mirror / bad.name).write_bytes(bad.read_bytes())
    entries = [
        e
        if e.name != "dep-b"
        else Entry(name="dep-b", version="2.0", origin=Origin.PYPI, wheel=bad.name, sha256=sha(bad))
        for e in lock.entries
    ]
    del doc
    lock = _lock(tmp_path, entries)
    opts = _opts(tmp_path, mirror, art, archive)
    with pytest.raises(VerifyFailed, match="fail verification for profile rvv256") as ei:
        wh.make(lock, opts)
    assert ei.value.exit_code == ExitCode.VERIFY_FAILED and "dep_b-2.0" in ei.value.render()
    _nothing_left(tmp_path, opts.output)


def test_a_recipe_wheel_built_without_the_locks_edits_conflicts(tmp_path, house, archive):
    lock, mirror, art = house
    for w in art.glob("*.whl"):
        w.unlink()
    make_wheel(
        art,
        "app",
        "1.0",
        "cp314-cp314-linux_riscv64",
        {"app/_C.so": RV_SO},
        requires=["dep-a[image]>=1", "dep_b", "torch==2.14.*", "outlines_core==0.2.14", "dep-a<1"],
    )
    opts = _opts(tmp_path, mirror, art, archive)
    with pytest.raises(closure_lock.LockConflict) as ei:
        wh.make(lock, opts)
    text = ei.value.render()
    assert ei.value.exit_code == ExitCode.RECIPE_INVALID
    assert "requires outlines_core==0.2.14, which the lock does not hold" in text
    assert "requires dep-a[image]>=1; the lock's dep-a is without extra(s) image" in text
    assert "requires dep-a<1; the lock has dep-a 1.0 from pypi" in text
    _nothing_left(tmp_path, opts.output)


def test_a_debian_version_gone_from_the_archive_is_refused_before_anything_is_fetched(
    tmp_path, house, archive
):
    lock, mirror, art = house
    entries = [
        e
        if e.name != "torch"
        else Entry(
            name="torch",
            version="2.13.0",
            origin=Origin.DEBIAN,
            debian=DebianRef(package="python3-torch", version="2.13.0-1", sha256=TORCH.sha256),
        )
        for e in lock.entries
    ]
    entries[0] = Entry(
        name="app",
        version="1.0",
        origin=Origin.RECIPE,
        recipe="app",
        requires=("dep-a>=1", "dep-b", "torch==2.13.*"),
    )
    lock = _lock(tmp_path, entries)
    opts = _opts(tmp_path, mirror, art, archive)
    with pytest.raises(
        SourceUnavailable, match=r"python3-torch 2\.13\.0-1 \(the archive has 2\.14\.1\+dfsg-1\)"
    ) as ei:
        wh.make(lock, opts)
    assert ei.value.exit_code == ExitCode.SOURCE_UNAVAILABLE
    _nothing_left(tmp_path, opts.output)
    assert (
        not (tmp_path / "cache" / "sha256").exists()
        or len(list((tmp_path / "cache" / "sha256").iterdir())) == 1
    )


def test_an_interrupt_while_writing_leaves_no_half_wheelhouse_and_keeps_the_previous_one(
    tmp_path, house, archive, monkeypatch
):
    lock, mirror, art = house
    opts = _opts(tmp_path, mirror, art, archive)
    wh.make(lock, opts)
    before = {p.name: sha(p) for p in opts.output.iterdir()}
    calls = []
    real = wh._copy

    def copy_then_interrupt(src, dest):
        calls.append(dest.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(src, dest)

    monkeypatch.setattr(wh, "_copy", copy_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        wh.make(lock, opts)
    assert {p.name: sha(p) for p in opts.output.iterdir()} == before  # the previous wheelhouse, untouched
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".wheelhouse.")] == []
    new = _opts(tmp_path, mirror, art, archive, output=tmp_path / "fresh")
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        wh.make(lock, new)
    _nothing_left(tmp_path, new.output)


def test_the_output_must_be_new_empty_or_a_wheelhouse(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("x")
    with pytest.raises(UsageError, match="holds files and no rvport-output.json"):
        wh.check_output(tmp_path / "busy")
    # a file named wheelhouse.json is not enough (an empty one used to be)
    (tmp_path / "busy" / wh.MANIFEST).write_text("")
    with pytest.raises(UsageError, match="holds files and no rvport-output.json"):
        wh.check_output(tmp_path / "busy")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="it is a file, not a directory"):
        wh.check_output(tmp_path / "file")
    outdir.claim(tmp_path / "build", outdir.Kind.BUILD)
    (tmp_path / "build" / "plan.json").write_text("{}")
    with pytest.raises(UsageError, match="rvport's build output, not a wheelhouse output"):
        wh.check_output(tmp_path / "build")
    (tmp_path / "empty").mkdir()
    wh.check_output(tmp_path / "empty")


def test_the_command_needs_output_and_refuses_offline_debian_cleanly(tmp_path):
    cp = rvport_process(["wheelhouse", "vllm"])
    assert cp.returncode == ExitCode.USAGE and "--output" in cp.stderr
    out = tmp_path / "wh"
    cp = rvport_process(
        ["wheelhouse", "vllm", "--output", str(out), "--offline", "--cache-dir", str(tmp_path / "c")]
    )
    assert cp.returncode == ExitCode.SOURCE_UNAVAILABLE, cp.stderr
    assert "--offline is set" in cp.stderr and "Traceback" not in cp.stderr
    assert not out.exists()


def test_a_recipe_wheel_that_must_carry_the_profile_is_refused_when_built_for_less(tmp_path, house, archive):
    """app's recipe says `isa: profile`: its rv64gc wheel (no V) runs on rvv256 but does not carry it, the
    silent scalar fallback; the index's rv64gc wheels only need to run on it."""
    lock, mirror, art = house
    opts = _opts(tmp_path, mirror, art, archive, carries=frozenset({"app"}))
    with pytest.raises(VerifyFailed) as ei:
        wh.make(lock, opts)
    text = ei.value.render()
    assert "app-1.0+cpu-cp314-cp314-linux_riscv64.whl (carries)" in text and "dep_b" not in text
    _nothing_left(tmp_path, opts.output)
    wh.make(lock, _opts(tmp_path, mirror, art, archive, carries=frozenset({"app"}), profile="rv64gc"))


def test_the_command_asks_carries_of_the_recipes_that_declare_isa_profile():
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli.closure_verbs import carrying

    lock = closure_lock.load_lock(closure_lock.lock_path("vllm", "0.33.0", "3.14"))
    got = carrying(load_catalogue(), lock)
    assert "vllm" in got and "tiktoken" not in got  # tiktoken's wheel is `isa: baseline`


def test_the_apt_list_pins_the_debian_packages_an_index_wheel_is_installed_over_too():
    """apt installs python3-mpmath and python3-setuptools anyway (dependencies of Debian entries) though the
    venv takes mpmath and setuptools from the index: they are pinned at the lock's versions as well."""
    from rvport.catalogue.closure_lock import load_lock, locks_dir

    lock = load_lock(locks_dir() / "vllm-0.33.0-cp314.yaml")
    listed = {deb.package: (name, deb.version) for name, deb in wh.apt_packages(lock)}
    debian = [e for e in lock.entries if e.origin.value == "debian"]
    shadowing = {e.shadows.package: e for e in lock.entries if e.shadows}
    assert {"python3-mpmath", "python3-setuptools"} <= set(shadowing)
    assert len(listed) == len(debian) + len(shadowing)
    for package, e in shadowing.items():
        assert listed[package] == (e.name, e.shadows.version) and e.origin.value == "pypi"


def _patch_member(path: Path, name: str, *, method: int | None = None, flags: int = 0, corrupt: bool = False):
    """Rewrite one member's headers in place: its compression method, extra flag bits, or its data spoiled
    (the sizes kept): what a hostile wheel can hold and zipfile itself cannot write."""
    import struct

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name)
        start = z.start_dir
    lh = info.header_offset
    entries = [lh + 6]  # the local header's flags (the method follows)
    pos = start
    while data[pos : pos + 4] == b"PK\x01\x02":
        n, e, c = struct.unpack_from("<HHH", data, pos + 28)
        if data[pos + 46 : pos + 46 + n].decode() == name:
            entries.append(pos + 8)
        pos += 46 + n + e + c
    for off in entries:
        f, m = struct.unpack_from("<HH", data, off)
        struct.pack_into("<HH", data, off, f | flags, m if method is None else method)
    if corrupt:
        n, e = struct.unpack_from("<HH", data, lh + 26)
        body = lh + 30 + n + e
        data[body : body + info.compress_size] = b"\xff" * info.compress_size
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "spoil, says",
    [
        (lambda p: _patch_member(p, "app-1.0+cpu.dist-info/METADATA", method=99), "cannot read member"),
        (lambda p: _patch_member(p, "app-1.0+cpu.dist-info/METADATA", flags=0x1), "encrypted"),
        (lambda p: _patch_member(p, "app-1.0+cpu.dist-info/METADATA", corrupt=True), "cannot read member"),
        (lambda p: None, "leaves the wheel"),  # made below with a member ../../x
    ],
)
def test_a_recipe_wheel_verify_refuses_is_refused_by_the_wheelhouse_with_its_verdict(
    tmp_path, house, archive, spoil, says
):
    """Whatever verify refuses, the wheelhouse refuses, with verify's verdict (exit 1): a METADATA entry that
    cannot be read is never exit 9, nor let in."""
    from rvport.verify import IsaLevel, verify_paths

    lock, mirror, art = house
    wheel = next(art.glob("app-*.whl"))
    if says == "leaves the wheel":
        wheel.unlink()
        wheel = make_wheel(
            art,
            "app",
            "1.0+cpu",
            "cp314-cp314-linux_riscv64",
            {"app/_C.so": RV_SO, "../../x": b"x"},
            requires=["dep-a>=1", "dep_b", "torch==2.14.*"],
        )
    else:
        with zipfile.ZipFile(wheel) as z:
            members = {i.filename: z.read(i) for i in z.infolist()}
        with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for n, data in members.items():
                z.writestr(n, data)
        spoil(wheel)
    report = verify_paths([wheel], get_profile("rvv256"), IsaLevel.RUNS_ON)
    assert not report.artifacts[0].ok and says in "; ".join(report.artifacts[0].reasons)
    opts = _opts(tmp_path, mirror, art, archive)
    with pytest.raises(VerifyFailed) as ei:
        wh.make(lock, opts)
    assert ei.value.exit_code == ExitCode.VERIFY_FAILED and says in ei.value.render()
    _nothing_left(tmp_path, opts.output)


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "a/../../x", "C:x", "\\\\host\\x"])
def test_a_member_or_record_name_that_escapes_fails_verify(tmp_path, name):
    from rvport.verify import IsaLevel, verify_paths

    member = make_wheel(
        tmp_path / "m", "dep_a", "1.0", "py3-none-any", {"dep_a/__init__.py": b"", name: b"x"}
    )
    rec = make_wheel(tmp_path / "r", "dep_a", "1.0", "py3-none-any", {"dep_a/__init__.py": b""})
    with zipfile.ZipFile(rec) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    members["dep_a-1.0.dist-info/RECORD"] += f"{name},sha256=x,1\n".encode()
    with zipfile.ZipFile(rec, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    for path, what in ((member, "member"), (rec, "RECORD entry")):
        a = verify_paths([path], get_profile("rvv256"), IsaLevel.RUNS_ON).artifacts[0]
        assert not a.ok and f"{what} {name!r} leaves the wheel" in "; ".join(a.reasons), a.reasons
    good = make_wheel(
        tmp_path / "g", "dep_a", "1.0", "py3-none-any", {"dep_a/x..y.py": b"", "dep_a/..x": b""}
    )
    assert verify_paths([good], get_profile("rvv256"), IsaLevel.RUNS_ON).artifacts[0].ok


def test_a_marker_verify_cannot_evaluate_is_said_as_such_not_as_an_unreadable_zip(tmp_path):
    from rvport.verify import IsaLevel, verify_paths

    w = make_wheel(
        tmp_path, "dep_a", "1.0", "py3-none-any", {"dep_a/x.py": b""}, requires=['x; python_version ~= "3"']
    )
    a = verify_paths([w], get_profile("rvv256"), IsaLevel.RUNS_ON).artifacts[0]
    text = "; ".join(a.reasons)
    assert "not a readable zip" not in text and "its marker cannot be evaluated" in text, text


def test_two_different_wheels_of_one_name_in_the_artifacts_are_refused_naming_both(tmp_path, house, archive):
    """The first by path used to be taken, silently: which one the user meant is not rvport's guess."""
    lock, mirror, art = house
    wheel = next(art.glob("app-*.whl"))
    other = art.parent / "elsewhere" / wheel.name
    other.parent.mkdir()
    other.write_bytes(wheel.read_bytes())
    opts = wh.Options(**{**_opts(tmp_path, mirror, art, archive).__dict__, "artifacts": (art, other.parent)})
    assert wh.find_recipe_wheels(lock, opts.artifacts)  # the same bytes twice: one wheel
    make_wheel(other.parent, "app", "1.0+cpu", "cp314-cp314-linux_riscv64", {"app/_C.so": RV_SO, "x": b"1"})
    with pytest.raises(UsageError, match="wheel name") as ei:
        wh.make(lock, opts)
    text = ei.value.render()
    assert str(wheel) in text and str(other) in text and ei.value.exit_code == ExitCode.USAGE
    _nothing_left(tmp_path, opts.output)


def test_a_member_name_with_a_newline_prints_no_line_of_its_own(tmp_path, house, archive):
    lock, mirror, art = house
    next(art.glob("app-*.whl")).unlink()
    name = "app/x\nerror: FORGED.py"
    wheel = make_wheel(
        art,
        "app",
        "1.0+cpu",
        "cp314-cp314-linux_riscv64",
        {"app/_C.so": RV_SO, name: b"x"},
        requires=["dep-a>=1", "dep_b", "torch==2.14.*"],
    )
    _patch_member(wheel, name, flags=0x1)  # encrypted: a reason that names the member
    with pytest.raises(VerifyFailed) as ei:
        wh.make(lock, _opts(tmp_path, mirror, art, archive))
    text = ei.value.render()
    assert "x\\nerror: FORGED.py" in text and not [ln for ln in text.splitlines() if ln.startswith("error:")]
