"""Every loader of a file rvport reads on a user's behalf, walked through a link to a secret file: the command
line refuses it, and the secret appears in no output stream and no file the command writes (JSON report,
JUnit file, logs, result.json). Each secret is a file made here with a unique string, in the shape that loader
would quote were it read (an /etc/shadow of YAML keys, a JSON statement, a lock).

Then every number that comes from input, absurd, under a memory cap: a clear refusal with its exit code
(docs/exit-codes.md), fast, never exit 9 or an out-of-memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from rvport import resources
from rvport.catalogue.closure_lock import lock_path
from rvport.errors import ExitCode, RecipeError
from tests.fixtures.cli import rvport_process

TOKEN = f"SECRET-{uuid.uuid4().hex}"

# what each kind of loader would show of a file it read: a YAML key it does not know, a value it quotes
SHADOW = "".join(f"{TOKEN}-{n}:$y$j9T$salt$hash:20228:0:99999:7:::\n" for n in ("root", "daemon", "bin"))
JSON_SECRET = json.dumps({"_type": TOKEN, "subject": [{"name": TOKEN, "digest": {"sha256": TOKEN}}]})


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
    full = {"COLUMNS": "300", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd or "/tmp")}
    full.update(env or {})
    return rvport_process(args, env=full, cwd=cwd, main="app", timeout=120)


def _no_secret_anywhere(cp, tmp_path: Path, secrets: tuple[Path, ...]) -> None:
    """The secret is in neither stream nor in any file under tmp_path but the secrets' own (elsewhere/)."""
    assert TOKEN not in cp.stdout and TOKEN not in cp.stderr, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stderr, cp.stderr
    for p in tmp_path.rglob("*"):
        if p.is_relative_to(tmp_path / "elsewhere") or p.is_symlink() or not p.is_file():
            continue
        assert TOKEN.encode() not in p.read_bytes(), f"{p} holds the secret"


@pytest.fixture
def secrets(tmp_path: Path) -> tuple[Path, Path]:
    d = tmp_path / "elsewhere"
    d.mkdir()
    (d / "shadow").write_text(SHADOW)
    (d / "statement.json").write_text(JSON_SECRET)
    return d / "shadow", d / "statement.json"


def _copy_dir(name: str, to: Path) -> Path:
    shutil.copytree(resources.builtin(name), to)
    return to


def test_a_recipe_that_links_out_is_refused_unread(tmp_path, secrets):
    shadow, _ = secrets
    d = tmp_path / "recipes"
    d.mkdir()
    (d / "leak.yaml").symlink_to(shadow)
    cp = _run(["recipes", "list", "--recipes", str(d)])
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stderr
    assert "leak.yaml is a symbolic link leading out of the directory that holds it" in cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)
    # the recipe directory itself a link leading out of the directory that holds it: refused too, named
    (shadow.parent / "leak.yaml").write_text(SHADOW)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "linked").symlink_to(shadow.parent)
    cp = _run(["recipes", "list", "--recipes", str(tmp_path / "sub" / "linked")])
    assert cp.returncode == ExitCode.RECIPE_INVALID and "recipe directory" in cp.stderr, cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


def test_a_patch_that_links_out_is_refused_unread(tmp_path, secrets):
    from tests.unit.catalogue.test_recipe_hostile import BASE, write

    shadow, _ = secrets
    doc = json.loads(json.dumps(BASE))
    doc["versions"][0]["patches"] = [{"file": "patches/fix.patch", "sha256": "0" * 64}]
    root = tmp_path / "recipes"
    write(root, doc)
    (root / "patches").mkdir()
    (root / "patches" / "fix.patch").symlink_to(shadow)
    cp = _run(["plan", "--recipes", str(root), doc["name"]])
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


@pytest.mark.parametrize("target", ["shadow", "/dev/zero", "fifo", "directory"])
def test_a_lock_that_links_out_or_is_no_regular_file_is_an_error_never_skipped(tmp_path, secrets, target):
    shadow, _ = secrets
    locks = _copy_dir("locks", tmp_path / "locks")
    path = lock_path("vllm", "0.33.0", "3.14", locks)
    assert path.is_file()
    path.unlink()
    if target == "shadow":
        path.symlink_to(shadow)
    elif target == "/dev/zero":
        path.symlink_to(target)
    elif target == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    cp = _run(["plan", "vllm"], env={"RVPORT_LOCKS": str(locks)})
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stdout + cp.stderr
    assert path.name in cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


def test_a_missing_locks_directory_is_an_error_as_a_missing_bases_directory_is(tmp_path):
    for var in ("RVPORT_LOCKS", "RVPORT_BASES"):
        cp = _run(["plan", "vllm"], env={var: str(tmp_path / "missing")})
        assert cp.returncode == ExitCode.RECIPE_INVALID, (var, cp.stdout + cp.stderr)
        assert "directory" in cp.stderr and "missing not found" in cp.stderr, cp.stderr
        (tmp_path / "file").write_text("")
        cp = _run(["plan", "vllm"], env={var: str(tmp_path / "file")})
        assert cp.returncode == ExitCode.RECIPE_INVALID and "not a directory" in cp.stderr, cp.stderr


def test_a_policy_that_links_out_is_refused_unread(tmp_path, secrets):
    shadow, _ = secrets
    locks = _copy_dir("locks", tmp_path / "locks")
    (locks / "vllm.policy.yaml").unlink()
    (locks / "vllm.policy.yaml").symlink_to(shadow)
    cp = _run(
        ["lock", "vllm", "--output", str(tmp_path / "out.yaml"), "--offline"],
        env={"RVPORT_LOCKS": str(locks)},
    )
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stdout + cp.stderr
    assert "symbolic link leading out" in cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


def test_a_base_spec_that_links_out_is_refused_unread(tmp_path, secrets):
    shadow, _ = secrets
    bases = _copy_dir("bases", tmp_path / "bases")
    (bases / "debian-trixie.yaml").unlink()
    (bases / "debian-trixie.yaml").symlink_to(shadow)
    cp = _run(["plan", "msgspec"], env={"RVPORT_BASES": str(bases)})
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stdout + cp.stderr
    assert "debian-trixie.yaml is a symbolic link leading out" in cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


def test_a_toolchain_spec_that_links_out_is_refused_unread(tmp_path, secrets):
    from rvport.catalogue.toolchains import load_toolchains

    shadow, _ = secrets
    tcs = _copy_dir("toolchains", tmp_path / "toolchains")
    (tcs / "leak.yaml").symlink_to(shadow)
    with pytest.raises(RecipeError) as e:
        load_toolchains(tcs)
    shown = str(e.value) + "".join(f"{p.message} {p.hint}" for p in e.value.problems)
    assert "leak.yaml is a symbolic link leading out" in shown and TOKEN not in shown


def test_provenance_that_links_out_is_refused_unread_and_no_report_holds_it(tmp_path, secrets):
    _, statement = secrets
    from tests.unit.verify.test_provenance import _riscv_elf

    (tmp_path / "x.so").write_bytes(_riscv_elf())
    out = tmp_path / "reports"
    out.mkdir()
    (out / "provenance.json").symlink_to(statement)
    args = ["verify", "artifacts", "--provenance", str(out / "provenance.json"), str(tmp_path / "x.so")]
    cp = _run([*args, "--json", str(out / "r.json"), "--junit", str(out / "r.xml")])
    assert cp.returncode == ExitCode.USAGE, cp.stdout + cp.stderr
    assert "provenance.json is a symbolic link leading out" in cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


def test_a_wheelhouse_manifest_or_result_that_links_out_is_refused_unread(tmp_path, secrets):
    _, statement = secrets
    wh = tmp_path / "wheelhouse"
    wh.mkdir()
    (wh / "wheelhouse.json").symlink_to(statement)
    cp = _run(["serve-check", "vllm", "--wheelhouse", str(wh), "--output", str(tmp_path / "out")])
    assert cp.returncode == ExitCode.USAGE, cp.stdout + cp.stderr
    assert "wheelhouse.json is a symbolic link leading out" in cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)
    out = tmp_path / "out2"
    out.mkdir()
    (out / "result.json").symlink_to(statement)
    cp = _run(["serve-check", "vllm", "--wheelhouse", str(wh), "--output", str(out)])
    assert cp.returncode == ExitCode.USAGE, cp.stdout + cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


def test_a_mirror_file_that_links_out_is_refused_unread(tmp_path, secrets):
    shadow, _ = secrets
    from rvport.catalogue.recipes import load_catalogue

    src = load_catalogue().resolve("msgspec").sources[0]
    mirror = tmp_path / "mirror"
    (mirror / "sha256").mkdir(parents=True)
    (mirror / "sha256" / src.sha256).symlink_to(shadow)
    env = {"RVPORT_CACHE_DIR": str(tmp_path / "cache")}
    cp = _run(["fetch", "msgspec", "--mirror", str(mirror), "--offline"], env=env)
    assert cp.returncode == ExitCode.INTEGRITY, cp.stdout + cp.stderr
    _no_secret_anywhere(cp, tmp_path, secrets)


# ------------------------------------------------------------------------------------ absurd numbers
MEMORY_CAP = 1 << 30  # 1 GiB of address space for the child: a list built from the number cannot fit


def _capped(args: list[str], env: dict[str, str] | None = None):
    """The command line in a child process of its own under RLIMIT_AS (a fork of tests/fixtures/cli.py's
    zygote, the cap set in the fork before rvport's main runs)."""
    full = {"COLUMNS": "300", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"}
    full.update(env or {})
    return rvport_process(args, env=full, main="app", timeout=120, address_space=MEMORY_CAP)


def test_the_memory_cap_is_in_place_in_the_run():
    """_capped's runs are held to the cap: a run the cap leaves no room for fails where the same run without
    it passes (Python's MemoryError, or an abort where an extension's allocation fails first)."""
    assert rvport_process(["plan", "vllm"], main="app").returncode == 0
    cp = rvport_process(["plan", "vllm"], main="app", address_space=16 << 20)
    assert cp.returncode != 0, cp.stdout
    assert "MemoryError" in cp.stderr or "memory allocation" in cp.stderr, cp.stderr


def _relock(path: Path, edit) -> None:
    """Edit a lock and give it the digest of its new content (as a hostile lock would)."""
    import yaml

    from rvport.catalogue.closure_lock import digest_of

    doc = yaml.safe_load(path.read_text())
    edit(doc)
    doc["digest"] = digest_of(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize(
    "field,value",
    [
        ("glibc", "2.5000000"),
        ("python", "3.5000000"),
        ("python_full", "3.14." + "9" * 5000),
    ],
)
def test_an_absurd_lock_target_is_refused_under_a_memory_cap(tmp_path, field, value):
    locks = _copy_dir("locks", tmp_path / "locks")
    _relock(lock_path("vllm", "0.33.0", "3.14", locks), lambda d: d["target"].__setitem__(field, value))
    cp = _capped(["plan", "vllm"], env={"RVPORT_LOCKS": str(locks)})
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stdout + cp.stderr[-2000:]
    assert f"target.{field}" in cp.stderr and "Traceback" not in cp.stderr


def test_absurd_numbers_in_a_lock_s_entries_are_refused_under_a_memory_cap(tmp_path):
    locks = _copy_dir("locks", tmp_path / "locks")
    path = lock_path("vllm", "0.33.0", "3.14", locks)

    def edit(doc):
        doc["packages"][1]["version"] = "1." + "0" * 5000
        doc["packages"][2]["requires"] = ["numpy>=1." + "0" * 100]

    _relock(path, edit)
    cp = _capped(["plan", "vllm"], env={"RVPORT_LOCKS": str(locks)})
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stdout + cp.stderr[-2000:]
    assert "over the cap of 128" in cp.stderr and "more than 20 digits" in cp.stderr
    assert "Traceback" not in cp.stderr and len(cp.stderr) < 20_000  # the value is never shown whole
    # a YAML integer in hex, which Python's int limit does not catch, and a decimal one over it
    for number in ("0x" + "f" * 5000, "9" * 5000):
        text = path.read_text().replace("schema: 1", f"schema: {number}", 1)
        path.write_text(text)
        cp = _capped(["plan", "vllm"], env={"RVPORT_LOCKS": str(locks)})
        assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stdout + cp.stderr[-2000:]
        assert "an integer of more than 128 digits" in cp.stderr and "Traceback" not in cp.stderr
        path.write_text(text.replace(f"schema: {number}", "schema: 1", 1))


def test_an_absurd_recipe_version_is_refused_under_a_memory_cap(tmp_path):
    from tests.unit.catalogue.test_recipe_hostile import BASE, write

    doc = json.loads(json.dumps(BASE))
    doc["versions"][0]["version"] = "1." + "0" * 5000
    root = tmp_path / "recipes"
    write(root, doc)
    cp = _capped(["recipes", "list", "--recipes", str(root)])
    assert cp.returncode == ExitCode.RECIPE_INVALID, cp.stdout + cp.stderr[-2000:]
    assert "over the cap of 128" in cp.stderr and len(cp.stderr) < 20_000


@pytest.mark.parametrize("value", ["9" * 5000, "0", "-3", "two", "\u0663"])
def test_rvport_verify_threads_must_be_a_count(tmp_path, value):
    cp = _capped(["verify", "artifacts", str(tmp_path)], env={"RVPORT_VERIFY_THREADS": value})
    assert cp.returncode == ExitCode.USAGE, cp.stdout + cp.stderr[-2000:]
    assert "RVPORT_VERIFY_THREADS" in cp.stderr and "not a whole number from 1 to 1024" in cp.stderr
    assert len(cp.stderr) < 2000


def _statement(tmp_path: Path, subject_digest: str, extra: str = "") -> Path:
    from rvport.verify import provenance

    p = tmp_path / "p.json"
    p.write_text(
        f'{{"_type": "{provenance.STATEMENT_TYPE}", "subject": [{{"name": "x.so", "digest": '
        f'{{"sha256": {json.dumps(subject_digest)}}}}}], "predicate": {{"n": {extra or 1}}}}}'
    )
    return p


def test_json_integers_over_the_cap_are_refused_located_under_a_memory_cap(tmp_path):
    from tests.unit.verify.test_provenance import _riscv_elf

    (tmp_path / "x.so").write_bytes(_riscv_elf())
    digest = hashlib.sha256((tmp_path / "x.so").read_bytes()).hexdigest()
    p = _statement(tmp_path, digest, extra="9" * 5000)
    cp = _capped(["verify", "artifacts", "--provenance", str(p), str(tmp_path / "x.so")])
    assert cp.returncode == ExitCode.USAGE, cp.stdout + cp.stderr[-2000:]
    assert "p.json:1: provenance holds an integer of more than 20 digits" in cp.stderr
    # serve-check's wheelhouse.json and result.json
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "wheelhouse.json").write_text('{"schema": ' + "1" * 5000 + "}")
    cp = _capped(["serve-check", "vllm", "--wheelhouse", str(wh), "--output", str(tmp_path / "out")])
    assert cp.returncode == ExitCode.USAGE, cp.stdout + cp.stderr[-2000:]
    assert "wheelhouse.json:1:" in cp.stderr and "more than 20 digits" in cp.stderr


def test_a_digest_with_a_trailing_newline_is_no_digest(tmp_path):
    from rvport.errors import UsageError
    from rvport.verify import provenance
    from tests.unit.verify.test_provenance import _riscv_elf

    (tmp_path / "x.so").write_bytes(_riscv_elf())
    digest = hashlib.sha256((tmp_path / "x.so").read_bytes()).hexdigest()
    provenance.load(_statement(tmp_path, digest))  # the digest itself: read
    with pytest.raises(UsageError, match="no sha256 digest"):
        provenance.load(_statement(tmp_path, digest + "\n"))
    from rvport.sources.cache import HEX64
    from rvport.verify.record import RECORD

    assert HEX64.match(digest) and not HEX64.match(digest + "\n")
    assert RECORD.match("a-1.dist-info/RECORD") and not RECORD.match("a-1.dist-info/RECORD\n")


def test_the_version_helpers_refuse_absurd_numbers_with_packaging_s_own_exceptions():
    from packaging.requirements import InvalidRequirement
    from packaging.specifiers import InvalidSpecifier
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename
    from packaging.version import InvalidVersion

    from rvport import bounds

    long, run = "1." + "0" * 5000, "1." + "9" * 21
    for bad in (long, run):
        with pytest.raises(InvalidVersion):
            bounds.version(bad)
        with pytest.raises(InvalidRequirement):
            bounds.requirement(f"numpy>={bad}")
        with pytest.raises(InvalidSpecifier):
            bounds.specifiers(f">={bad}")
    with pytest.raises(InvalidWheelFilename):
        bounds.wheel_filename(f"x-1.0-{'1' * 30}-cp314-cp314-linux_riscv64.whl")  # a build tag
    with pytest.raises(InvalidWheelFilename):
        bounds.wheel_filename(f"x-1.0-cp3{'1' * 30}-none-any.whl")
    with pytest.raises(InvalidSdistFilename):
        bounds.sdist_filename(f"x-{run}.tar.gz")
    assert str(bounds.version("2026.12.3.20261203123456")) == "2026.12.3.20261203123456"  # 14 digits: read
    assert bounds.requirement("numpy>=1.26,<3; python_version>='3.11'").name == "numpy"
    assert bounds.shown("x" * 500).endswith("... (500 characters)")
    with pytest.raises(bounds.NumberTooLong, match="line 3, column 7"):
        bounds.json_loads('{"a": "' + "7" * 40 + '",\n"b":\n  [1, ' + "8" * 21 + "]}")
