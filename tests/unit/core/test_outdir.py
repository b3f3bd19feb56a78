"""The one rule for output directories (rvport.outdir): rvport replaces, or writes into, only a directory it
wrote itself, recognised by a well-formed manifest naming rvport and the kind, matching the directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rvport import outdir
from rvport.errors import ExitCode, UsageError
from rvport.outdir import MANIFEST, Kind
from tests.fixtures.cli import rvport_process


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_a_missing_or_empty_directory_may_be_written_and_claim_marks_it(tmp_path):
    outdir.check(tmp_path / "new" / "deeper", Kind.BUILD)
    (tmp_path / "empty").mkdir()
    outdir.check(tmp_path / "empty", Kind.WHEELHOUSE)
    out = outdir.claim(tmp_path / "new", Kind.BUILD)
    doc = json.loads((out / MANIFEST).read_text())
    assert doc["kind"] == "rvport-output" and doc["output"] == "build" and "artifacts" in doc["entries"]
    (out / "plan.json").write_text("{}")
    (out / "logs").mkdir()
    (out / ".plan.json.abc123_x.tmp").write_text("")  # an atomic write's temporary file, left by a kill
    outdir.check(out, Kind.BUILD)
    outdir.claim(out, Kind.BUILD)  # again: still rvport's


@pytest.mark.parametrize(
    "spoil, says",
    [
        (lambda d: None, "holds files and no rvport-output.json"),
        (lambda d: (d / MANIFEST).write_text(""), "is not one rvport writes"),
        (lambda d: (d / MANIFEST).write_text("{not json"), "is not one rvport writes"),
        (lambda d: (d / MANIFEST).write_text("[]"), "is not one rvport writes"),
        (lambda d: (d / MANIFEST).write_bytes(b"\xff\xfe"), "is not one rvport writes"),
        (lambda d: (d / MANIFEST).write_text("9" * 5000), "is not one rvport writes"),
        (lambda d: (d / MANIFEST).write_text(" " * (outdir.MANIFEST_MAX_BYTES + 1)), "is not one rvport"),
        (lambda d: _doc(d, kind="other-tool"), "is not one rvport writes"),
        (lambda d: _doc(d, schema=2), "is not one rvport writes"),
        (lambda d: _doc(d, extra=1), "is not one rvport writes"),
        (lambda d: _doc(d, output="serve-check"), "rvport's serve-check output, not a build output"),
        (lambda d: _doc(d, output="x"), "rvport's another output, not a build output"),
        (lambda d: _doc(d, entries="mine.txt"), "is not one rvport writes"),
        (lambda d: _doc(d, entries=["../mine.txt"]), "is not one rvport writes"),
        (lambda d: _doc(d), "what rvport did not write there: mine.txt"),  # well-formed, other content
        (lambda d: os.symlink("/etc/passwd", d / MANIFEST), "is not a regular file"),
        (lambda d: os.mkfifo(d / MANIFEST), "is not a regular file"),
        (lambda d: (d / MANIFEST).mkdir(), "is not a regular file"),
    ],
)
def test_a_directory_rvport_did_not_write_is_refused_and_left_alone(tmp_path, spoil, says):
    d = tmp_path / "d"
    d.mkdir()
    (d / "mine.txt").write_text("keep me")
    spoil(d)
    before = _tree(d)
    for call in (
        lambda: outdir.check(d, Kind.BUILD),
        lambda: outdir.claim(d, Kind.BUILD),
        lambda: outdir.remove(d, Kind.BUILD),
    ):
        with pytest.raises(UsageError, match=says) as ei:
            call()
        assert ei.value.exit_code == ExitCode.USAGE and "remove it yourself" in (ei.value.hint or "")
    assert _tree(d) == before and (d / "mine.txt").read_text() == "keep me"


def _doc(d, **fields):
    doc = {"schema": 1, "kind": "rvport-output", "output": "build", "entries": ["plan.json", "logs"]}
    doc.update(fields)
    (d / MANIFEST).write_text(json.dumps(doc))


def test_a_link_a_file_or_a_device_is_no_output_directory(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(UsageError, match="symbolic link"):
        outdir.check(tmp_path / "link", Kind.BUILD)
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="cannot write .*: it is a file, not a directory"):
        outdir.check(tmp_path / "f", Kind.BUILD)
    with pytest.raises(UsageError, match="cannot write /dev/null: it is a character device, not a directory"):
        outdir.check(Path("/dev/null"), Kind.BUILD)
    with pytest.raises(UsageError, match="a part of it is a file, not a directory"):
        outdir.check(tmp_path / "f" / "sub", Kind.BUILD)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_a_parent_nothing_can_be_made_in_is_a_usage_error():
    for call in (
        lambda: outdir.check(Path("/proc/rvport-out"), Kind.BUILD),
        lambda: outdir.claim(Path("/proc/rvport-out/x"), Kind.BUILD),
        lambda: outdir.beside(Path("/proc/rvport-wh"), Kind.WHEELHOUSE),
    ):
        with pytest.raises(UsageError, match="cannot write /proc/rvport-"):
            call()


def test_replace_swaps_in_a_whole_directory_only_over_its_own_kind(tmp_path):
    out = tmp_path / "wh"
    for n in (1, 2):
        made = outdir.beside(out, Kind.WHEELHOUSE)
        (made / f"w{n}.whl").write_text(str(n))
        outdir.write_manifest(made, Kind.WHEELHOUSE, [f"w{n}.whl"])
        outdir.replace(made, out, Kind.WHEELHOUSE)
        assert sorted(p.name for p in out.iterdir()) == [MANIFEST, f"w{n}.whl"]
    assert [p.name for p in tmp_path.iterdir()] == ["wh"]  # nothing beside it stays
    made = outdir.beside(tmp_path / "other", Kind.WHEELHOUSE)
    outdir.write_manifest(made, Kind.WHEELHOUSE, [])
    outdir.claim(tmp_path / "b", Kind.BUILD)
    with pytest.raises(UsageError, match="rvport's build output, not a wheelhouse output"):
        outdir.replace(made, tmp_path / "b", Kind.WHEELHOUSE)
    assert (tmp_path / "b" / MANIFEST).is_file() and made.is_dir()


def test_remove_takes_only_its_own_kind(tmp_path):
    b = outdir.claim(tmp_path / "b", Kind.BUILD)
    (b / "logs").mkdir()
    outdir.remove(b, Kind.BUILD)
    assert not b.exists()
    outdir.remove(b, Kind.BUILD)  # nothing there: nothing to do


def test_a_manifest_lists_only_names_of_one_component():
    with pytest.raises(ValueError):
        outdir.manifest_text(Kind.WHEELHOUSE, ["../x.whl"])


def _rvport(*args, cwd):
    return rvport_process(
        list(args),
        timeout=120,
        cwd=cwd,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock", "RVPORT_CACHE_DIR": str(cwd / "c")},
    )


@pytest.mark.parametrize(
    "args",
    [
        ("wheelhouse", "vllm", "--output", "D"),
        ("reproduce", "msgspec", "--output", "D"),
        ("serve-check", "vllm", "--wheelhouse", "D", "--output", "D"),
    ],
)
def test_the_commands_refuse_a_directory_holding_a_bare_wheelhouse_json_before_any_work(tmp_path, args):
    """The probe's case: a directory with an empty wheelhouse.json and the user's files was wiped, exit 0."""
    d = tmp_path / "D"
    d.mkdir()
    (d / "wheelhouse.json").write_text("")
    (d / "first").mkdir()
    (d / "first" / "thesis.tex").write_text("years of work")
    cp = _rvport(*args, cwd=tmp_path)
    assert cp.returncode == ExitCode.USAGE, cp.stderr
    assert "rvport did not write it" in cp.stderr and "Traceback" not in cp.stderr
    assert _tree(d) == ["first", "first/thesis.tex", "wheelhouse.json"]
    assert not (tmp_path / "c").exists()


def test_lock_replaces_only_a_lock_rvport_wrote(tmp_path):
    (tmp_path / "notes.yaml").write_text("my: notes\n")
    cp = _rvport("lock", "vllm", "--output", "notes.yaml", "--offline", cwd=tmp_path)
    assert cp.returncode == ExitCode.USAGE, cp.stderr
    assert "not a closure lock rvport wrote" in cp.stderr and "my: notes" not in cp.stderr
    assert (tmp_path / "notes.yaml").read_text() == "my: notes\n"


@pytest.mark.parametrize(
    "verb, dest",
    [("plan", "output"), ("build", "output"), ("wheelhouse", "wheelhouse_dir"), ("fetch", "to")],
)
def test_an_output_inside_the_download_cache_is_refused(tmp_path, verb, dest):
    from rvport.cli.settings import make_options

    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(UsageError, match="lies inside the download cache"):
        make_options(verb, {dest: cache / "out", "cache_dir": cache}, environ={})
    with pytest.raises(UsageError, match="lies inside the download cache"):  # the default cache too
        make_options(
            verb, {dest: tmp_path / "xdg" / "rvport" / "o"}, environ={"XDG_CACHE_HOME": str(tmp_path / "xdg")}
        )
    make_options(verb, {dest: tmp_path / "out", "cache_dir": cache}, environ={})


def test_a_file_a_verb_writes_into_its_output_is_listed_and_stays_listed(tmp_path):
    """`--junit out/junit.xml` (the GitLab template's): the next build in out/ is not refused for it."""
    out = tmp_path / "out"
    outdir.claim(out, Kind.BUILD, also=(out / "junit.xml", tmp_path / "elsewhere.xml", None))
    (out / "junit.xml").write_text("<testsuites/>")
    outdir.claim(out, Kind.BUILD)  # a run without --junit: junit.xml is still rvport's
    assert "junit.xml" in json.loads((out / MANIFEST).read_text())["entries"]
    assert "elsewhere.xml" not in json.loads((out / MANIFEST).read_text())["entries"]
