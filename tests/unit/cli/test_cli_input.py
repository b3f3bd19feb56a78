"""Bad input (issue #13): every case gets one clear line and the exit code of docs/exit-codes.md, never a
traceback. The CLI runs in a subprocess, from the installed package, as a user meets it."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.fixtures.cli import rvport_process


def run(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """python -m rvport ARGS, in a process of its own (tests/fixtures/cli.py)."""
    return rvport_process(args, timeout=timeout, env={**os.environ, **(env or {})})


def no_traceback(cp: subprocess.CompletedProcess) -> bool:
    return "Traceback" not in cp.stderr and "Traceback" not in cp.stdout


# ---- start-up -------------------------------------------------------------------------------------------

# Sends SIGINT to itself when the command line's first heavy module (typer) is about to be imported: a Ctrl-C
# during start-up, at a moment chosen by the import system rather than by a timer.
_INTERRUPT_DURING_IMPORTS = """
import os, signal, sys
class _Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, _Hook())
sys.argv = ["rvport", "recipes", "list"]
"""


@pytest.mark.parametrize(
    "start",
    [
        "from rvport.cli.entry import main\nmain()",  # the console script's function
        "import runpy\nrunpy.run_module('rvport', run_name='__main__')",  # python -m rvport
    ],
)
def test_ctrl_c_while_importing_prints_interrupted_and_exits_8(start):
    cp = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_DURING_IMPORTS + start], capture_output=True, text=True, timeout=60
    )
    assert cp.returncode == 8, cp.stderr
    assert cp.stderr.strip() == "interrupted" and no_traceback(cp)


def test_console_script_starts_at_the_entry_module():
    (script,) = [e for e in metadata.entry_points(group="console_scripts") if e.name == "rvport"]
    assert script.value == "rvport.cli.entry:main"


# ---- the command line itself -------------------------------------------------------------------------------


def rvport_script(*args: str) -> subprocess.CompletedProcess:
    """The installed console script itself (beside this interpreter in the environment)."""
    script = Path(sys.executable).with_name("rvport")
    assert script.is_file(), f"no rvport script beside {sys.executable}"
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [("bogus",), ("plan", "--jobs", "abc", "msgspec")])
def test_the_installed_script_exits_2_on_command_line_mistakes(args):
    cp = rvport_script(*args)
    assert cp.returncode == 2 and no_traceback(cp), cp.stderr
    assert cp.stderr.rstrip().splitlines()[-1].startswith("Error: ") and len(cp.stderr.splitlines()) <= 5


@pytest.mark.parametrize(
    "args, says",
    [
        (("bogus",), "No such command 'bogus'"),
        (("b[red]o[/]gus",), "No such command 'b[red]o[/]gus'"),
        (("plan", "--jobs", "abc", "msgspec"), "Invalid value for '--jobs'"),
        (("verify",), "Missing command"),
    ],
)
def test_command_line_mistakes_exit_2_with_a_short_message(args, says):
    cp = run(*args)
    assert cp.returncode == 2, cp.stderr
    assert says in cp.stderr and no_traceback(cp)
    assert len(cp.stderr.splitlines()) <= 5 and not cp.stdout


def test_plan_names_no_version_after_equals_is_a_usage_error(tmp_path):
    cp = run("plan", "msgspec==", "-o", str(tmp_path))
    assert cp.returncode == 2 and no_traceback(cp)
    assert "'msgspec==' names no version after '=='" in cp.stderr and "known: 0.23.0" in cp.stderr
    assert not (tmp_path / "plan.json").exists()


@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_jobs_below_one_is_refused(tmp_path, jobs):
    cp = run("plan", "msgspec", f"--jobs={jobs}", "-o", str(tmp_path))
    assert cp.returncode == 2 and f"--jobs {jobs}: give 1 or more" in cp.stderr and no_traceback(cp)
    assert not (tmp_path / "plan.json").exists()


@pytest.mark.parametrize("command", ["plan", "build", "prepare", "reproduce"])
def test_every_verb_that_plans_refuses_an_unknown_mode_alike_before_any_work(tmp_path, command):
    """One plan setup (rvport/cli/planning.py): reproduce refuses what plan refuses, and before it clears the
    output of an earlier run."""
    earlier = tmp_path / "out" / "first" / "artifacts"
    earlier.mkdir(parents=True)
    cp = run(command, "msgspec", "--mode", "bogus", "-o", str(tmp_path / "out"))
    assert cp.returncode == 2 and "unknown mode 'bogus'" in cp.stderr and no_traceback(cp)
    assert earlier.is_dir() and not (tmp_path / "out" / "plan.json").exists()


def test_jobs_above_what_memory_allows_is_lowered_with_a_warning(tmp_path):
    import json

    cp = run("plan", "msgspec", "--jobs", "100000", "-o", str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    (stage,) = json.loads((tmp_path / "plan.json").read_text())["stages"]
    assert stage["jobs"] < 100000
    assert f"warning: --jobs 100000: msgspec==0.23.0 runs {stage['jobs']} job(s) instead" in cp.stderr
    cp = run("plan", "msgspec", "--jobs", "1", "-o", str(tmp_path))
    assert cp.returncode == 0 and "warning" not in cp.stderr


@pytest.mark.parametrize("command", [("plan",), ("build",), ("verify", "artifacts")])
def test_help_reads_well_and_lists_the_catalogue_profiles(command):
    from rvport.catalogue.profiles import load_profiles

    cp = run(*command, "--help", env={"COLUMNS": "80"})
    assert cp.returncode == 0, cp.stderr
    text = cp.stdout
    for label in ("<bool>", "<str>", "<int>", "<path>", "<list", "<Path"):
        assert label not in text, f"{label} in {' '.join(command)} --help"
    flat = " ".join(text.split())
    # verify's default is the provenance's profile when it is given one, else rvv256 like plan and build
    assert "--profile PROFILE" in text and ("[default: rvv256]" in flat or "else rvv256]" in flat)
    for name in load_profiles():
        assert name in text
    # paragraphs are re-flowed, never broken mid-sentence: every line of a paragraph but its last is long
    for paragraph in text.split("\n\n"):
        lines = paragraph.splitlines()
        if lines and not lines[0].startswith(("Usage:", "Options:", "  -", "  --")) and len(lines) > 1:
            assert all(len(line) > 50 for line in lines[:-1]), paragraph


def test_every_profile_option_defaults_to_rvv256():
    import typer

    from rvport.cli.app import app

    def walk(cmd):
        for p in cmd.params:
            if "--profile" in getattr(p, "opts", ()):
                yield cmd.name, p.default
        for sub in getattr(cmd, "commands", {}).values():
            yield from walk(sub)

    found = dict(walk(typer.main.get_command(app)))
    assert set(found) == {"plan", "build", "artifacts", "reproduce", "prepare", "wheelhouse", "serve-check"}
    # verify artifacts: None means the provenance's profile with --provenance, else the table's default;
    # serve-check: None means the wheelhouse's own profile; build: None (it takes several) is the default one
    derived = {"artifacts", "serve-check", "build"}
    assert {v for k, v in found.items() if k not in derived} == {"rvv256"}
    assert found["artifacts"] is None and found["serve-check"] is None and found["build"] is None
    from rvport.catalogue.profiles import default_profile
    from rvport.cli.settings import default_profile_name, make_options

    assert make_options("build", {}, environ={}).profiles == ("rvv256",)

    assert default_profile_name() == default_profile().name == "rvv256"


# ---- names are printed literally -------------------------------------------------------------------------

MARKUP_NAMES = ["a[b]c", "x[/b]y", "[bold]z[/bold]"]


def recipe_text(name: str = "demo", description: str = "a demo", extra: str = "") -> str:
    return (
        f"schema: 1\nname: {name}\nkind: python-wheel\ndescription: {description!r}\nbuild: [make]\n"
        "versions:\n  - version: '1.0'\n    sources:\n      - name: main\n"
        "        url: https://example.org/demo-1.0.tar.gz\n"
        f"        sha256: {'a' * 64}\n{extra}"
    )


def tiny_wheel(path: Path, member: str) -> Path:
    """A riscv64-tagged wheel whose one extension member is a truncated ELF file."""
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, b"\x7fELF\x02\x01\x01" + b"\0" * 9)
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp312-cp312-linux_riscv64\n")
        zf.writestr("demo-1.0.dist-info/RECORD", "")
    return path


@pytest.mark.parametrize("name", MARKUP_NAMES)
def test_verify_prints_file_and_member_names_literally(tmp_path, name):
    odd = tmp_path / name.replace("/", "")  # a file name holds no '/': "x[b]y"; a wheel member may: "x[/b]y"
    odd.write_bytes(b"not an artifact\n")
    whl = tiny_wheel(tmp_path / "demo-1.0-cp312-cp312-linux_riscv64.whl", f"demo/{name}.so")
    cp = run("verify", "artifacts", str(odd), str(whl), env={"COLUMNS": "300"})
    assert cp.returncode == 1 and no_traceback(cp), cp.stderr
    # shown relative to the directory they share, which the title names
    assert f"files in {tmp_path}" in cp.stdout and odd.name in cp.stdout and f"demo/{name}.so" in cp.stdout


def test_output_path_with_brackets_is_printed_as_given(tmp_path):
    out = tmp_path / "o[/]" / "x[b]y"
    cp = run("plan", "msgspec", "-o", str(out), env={"COLUMNS": "300"})
    assert cp.returncode == 0 and no_traceback(cp), cp.stderr
    assert f"wrote {out / 'plan.json'}" in cp.stdout


@pytest.mark.parametrize("description", ["[/]", "uses [bold]x[/bold] and a[b]c"])
def test_recipe_descriptions_are_printed_literally(tmp_path, description):
    (tmp_path / "demo.yaml").write_text(recipe_text(description=description))
    for args in (("recipes", "list"), ("recipes", "show", "demo")):
        cp = run(*args, "--recipes", str(tmp_path), env={"COLUMNS": "300"})
        assert cp.returncode == 0 and no_traceback(cp), cp.stderr
        assert description in cp.stdout
    # with a directory of the user's, a column says where each recipe comes from; without, the title does
    listed = run("recipes", "list", "--recipes", str(tmp_path), env={"COLUMNS": "300"}).stdout
    assert "┃ from" in listed and str(tmp_path) in listed and "built-in" in listed
    plain = run("recipes", "list", env={"COLUMNS": "300"}).stdout
    assert "┃ from" not in plain and plain.startswith("recipes (built-in catalogue)")


def test_views_keep_markup_like_names_literal():
    from rich.console import Console

    from rvport.cli.progress_view import LiveReporter
    from rvport.cli.views import result_table

    doc = {
        "status": "failed",
        "profile": {"name": "rvv256"},
        "tag": "t[/]",
        "stages": [
            {
                "recipe": "a[b]c",
                "version": "1",
                "status": "failed",
                "timings": {"build": 1.0},
                "artifacts": [{"path": "x[/b]y.whl", "size": 1, "sha256": "0" * 64}],
            }
        ],
    }
    con = Console(record=True, width=200)
    con.print(result_table(doc))
    rep = LiveReporter(con, None)
    rep.add("a[b]c", "qemu")
    rep.stages["a[b]c"].step = "running [/] now"
    con.print(rep._render())
    text = con.export_text()
    for name in ("t[/]", "a[b]c==1", "x[/b]y.whl", "running [/] now"):
        assert name in text


def test_tables_follow_columns_and_keep_names_whole():
    from rvport.catalogue.recipes import load_catalogue

    cat = load_catalogue()
    narrow = run("recipes", "list", env={"COLUMNS": "80"})
    assert narrow.returncode == 0, narrow.stderr
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80
    cells = {c.strip() for line in narrow.stdout.splitlines() for c in line.split("│")}
    for name in cat.names:
        r = cat.default(name)
        assert name in cells and r.kind.value in cells  # whole, each on its own line of the cell
    wide = run("recipes", "list", env={"COLUMNS": "250"})
    assert max(len(line) for line in wide.stdout.splitlines()) > 140  # not held to 140 when COLUMNS says more
    for name in cat.names:
        assert cat.default(name).description in wide.stdout  # one line each


# ---- verify: what cannot or must not be read -------------------------------------------------------------


def test_fifo_device_and_directory_holding_a_fifo_fail_at_once(tmp_path):
    import json

    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "dir" / "inner")
    (tmp_path / "dir" / "notes.txt").write_text("not an artifact\n")
    report = tmp_path / "report.json"
    cp = run(
        "verify",
        "artifacts",
        str(tmp_path / "pipe"),
        str(tmp_path / "dir"),
        "/dev/zero",
        "--json",
        str(report),
        timeout=60,
        env={"COLUMNS": "200"},
    )
    assert cp.returncode == 1 and no_traceback(cp), cp.stderr
    reasons = {a["path"]: a["reasons"] for a in json.loads(report.read_text())["artifacts"]}
    assert reasons == {
        str(tmp_path / "pipe"): ["a FIFO, not a regular file: not read"],
        str(tmp_path / "dir" / "inner"): ["a FIFO, not a regular file: not read"],
        "/dev/zero": ["a character device, not a regular file: not read"],
    }


def _verify_without_privileges(paths: list[Path]) -> dict:
    """verify_paths(paths) as a user who cannot read what the modes forbid (root reads everything)."""
    import json

    from rvport.catalogue.profiles import get_profile
    from rvport.verify import verify_paths

    profile = get_profile("rvv256")
    return json.loads(_in_child_without_privileges(lambda: verify_paths(paths, profile).dumps()))


def test_unreadable_file_and_directory_fail_with_the_reason():
    import shutil
    import tempfile

    root = Path(
        tempfile.mkdtemp(prefix="rvport-unreadable-")
    )  # not under pytest's 0700 tmp: nobody must enter
    try:
        root.chmod(0o755)
        (root / "arts").mkdir()
        (root / "arts" / "secret.so").write_bytes(b"\x7fELF" + b"\0" * 60)
        (root / "arts" / "closed").mkdir()
        (root / "arts" / "closed" / "inside.so").write_bytes(b"\x7fELF" + b"\0" * 60)
        (root / "alone.so").write_bytes(b"\x7fELF" + b"\0" * 60)
        for p in (root / "arts" / "secret.so", root / "alone.so", root / "arts" / "closed"):
            p.chmod(0)
        doc = _verify_without_privileges([root / "arts", root / "alone.so"])
        assert doc["ok"] is False
        reasons = {a["path"]: a["reasons"] for a in doc["artifacts"]}
        assert reasons == {
            str(root / "arts" / "closed"): ["cannot read directory: Permission denied"],
            str(root / "arts" / "secret.so"): ["cannot read: Permission denied"],
            str(root / "alone.so"): ["cannot read: Permission denied"],
        }
    finally:
        for p in root.rglob("*"):
            p.chmod(0o700)
        shutil.rmtree(root)


def test_corrupt_wheel_fails_for_its_zip_alone(tmp_path):
    import json

    whl = tmp_path / "demo-1.0-cp312-cp312-linux_riscv64.whl"
    whl.write_bytes(b"PK\x03\x04 this is no zip file" * 8)
    cp = run("verify", "artifacts", str(whl), "--json", str(tmp_path / "r.json"))
    assert cp.returncode == 1 and no_traceback(cp), cp.stderr
    (art,) = json.loads((tmp_path / "r.json").read_text())["artifacts"]
    assert len(art["reasons"]) == 1 and art["reasons"][0].startswith("not a readable zip file")


# ---- recipe files ----------------------------------------------------------------------------------------


def test_recipe_that_is_not_utf8_is_named_exit_3(tmp_path):
    (tmp_path / "demo.yaml").write_bytes(recipe_text(description="caf\u00e9").encode("latin-1"))
    for args in (("recipes", "list"), ("plan", "demo", "-o", str(tmp_path / "out"))):
        cp = run(*args, "--recipes", str(tmp_path))
        assert cp.returncode == 3 and no_traceback(cp), cp.stderr
        assert f"{tmp_path / 'demo.yaml'}:4: not UTF-8 text: byte 0xe9" in cp.stderr
        assert "save the file as UTF-8" in cp.stderr


def test_unquoted_all_digit_sha256_gets_a_hint_to_quote_it(tmp_path):
    digits = "1234567890" * 6 + "1234"
    (tmp_path / "demo.yaml").write_text(recipe_text().replace(f"sha256: {'a' * 64}", f"sha256: {digits}"))
    cp = run("plan", "demo", "--recipes", str(tmp_path), "-o", str(tmp_path / "out"))
    assert cp.returncode == 3 and no_traceback(cp), cp.stderr
    assert (
        f"{tmp_path / 'demo.yaml'}:11: versions[0].sources[0].sha256: must be a string, got an integer"
        in cp.stderr
    )
    assert "hint: YAML reads an unquoted all-digit value as a number: quote it (sha256: '...')" in cp.stderr


def test_recipe_setting_qemu_cpu_is_refused_exit_3(tmp_path):
    (tmp_path / "demo.yaml").write_text(
        recipe_text().replace("build: [make]\n", "env: {QEMU_CPU: max}\nbuild: [make]\n")
    )
    cp = run("plan", "demo", "--recipes", str(tmp_path), "-o", str(tmp_path / "out"))
    assert cp.returncode == 3 and no_traceback(cp), cp.stderr
    assert (
        f"{tmp_path / 'demo.yaml'}:5: env sets QEMU_CPU: the QEMU CPU model of every emulated stage"
        in cp.stderr
    )
    assert "hint: remove QEMU_CPU; choose the target with --profile" in cp.stderr
    assert not (tmp_path / "out" / "plan.json").exists()


# ---- where rvport writes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_args, says",
    [
        (lambda t: ("plan", "msgspec", "-o", str(t / "afile")), "it is a file, not a directory"),
        (
            lambda t: ("plan", "msgspec", "-o", str(t / "afile" / "sub")),
            "a part of it is a file, not a directory",
        ),
        (lambda t: ("plan", "msgspec", "-o", "/proc/rvport-out"), "No such file or directory"),
        (lambda t: ("build", "msgspec", "-o", str(t / "afile")), "it is a file, not a directory"),
        (lambda t: ("build", "msgspec", "-o", str(t / "out"), "--junit", str(t)), "it is a directory"),
        (
            lambda t: ("build", "msgspec", "-o", str(t / "out"), "--summary", "/proc/rvport-summary.md"),
            "No such file or directory",
        ),
        (
            lambda t: ("verify", "artifacts", str(t / "afile"), "--json", "/proc/rvport.json"),
            "No such file or directory",
        ),
        (lambda t: ("verify", "artifacts", str(t / "afile"), "--junit", str(t)), "it is a directory"),
        (lambda t: ("verify", "artifacts", str(t / "afile"), "--json", "/dev/null"), "not a regular file"),
        (lambda t: ("fetch", "msgspec", "--to", str(t / "afile")), "it is a file, not a directory"),
        (lambda t: ("prepare", "msgspec", "-o", str(t / "afile")), "it is a file, not a directory"),
        (lambda t: ("prepare", "msgspec", "-o", str(t / "out"), "--tags", str(t)), "it is a directory"),
    ],
)
def test_output_paths_that_cannot_be_written_exit_2_before_any_work(tmp_path, make_args, says):
    (tmp_path / "afile").write_text("a file\n")
    args = make_args(tmp_path)
    # no docker, no network: a check that came after the work would fail differently (or hang)
    cp = run(
        *args,
        env={"DOCKER_HOST": "unix:///nonexistent.sock", "RVPORT_CACHE_DIR": str(tmp_path / "c")},
        timeout=60,
    )
    assert cp.returncode == 2 and no_traceback(cp), cp.stderr
    (line, hint) = cp.stderr.strip().splitlines()
    assert line.startswith("error: cannot write ") and line.endswith(says) and hint.startswith("hint: ")
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()


def test_an_unwritable_directory_is_refused():
    import shutil
    import tempfile

    from rvport.cli.outputs import check_dir, check_file

    root = Path(tempfile.mkdtemp(prefix="rvport-unwritable-"))
    try:
        root.chmod(0o555)  # nobody (or any user but root) cannot create anything here

        def probe() -> str:
            out = []
            for check, path in (
                (check_dir, root),
                (check_dir, root / "new" / "out"),
                (check_file, root / "r.json"),
            ):
                try:
                    check(path)
                    out.append("ok")
                except Exception as e:  # noqa: BLE001 - the message is what is compared
                    out.append(f"{type(e).__name__}: {e}")
            return "\n".join(out)

        lines = _in_child_without_privileges(probe).splitlines()
        assert lines == [
            f"UsageError: cannot write {p}: Permission denied"
            for p in (root, root / "new" / "out", root / "r.json")
        ]
    finally:
        shutil.rmtree(root)


def _in_child_without_privileges(fn) -> str:
    """fn() in a forked child that has dropped root (to nobody) when the tests run as root, since root may
    read and write whatever the modes say; its result as a string. A fork, not a new Python process: nobody
    might not reach the interpreter's own files."""
    uid = gid = None
    if os.geteuid() == 0:
        import pwd

        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            pytest.skip("running as root, and there is no user nobody to drop to")
        uid, gid = nobody.pw_uid, nobody.pw_gid
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            if uid is not None:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
            data = str(fn()).encode()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            data, code = f"child failed: {e!r}".encode(), 1
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert status == 0, data
    return data


# ---- file permissions ------------------------------------------------------------------------------------


def test_written_files_keep_the_users_umask(tmp_path):
    old = os.umask(0o027)  # the run's umask is the caller's (tests/fixtures/cli.py)
    try:
        cp = run("plan", "msgspec", "-o", str(tmp_path / "out"))
    finally:
        os.umask(old)
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "out" / "plan.json").stat().st_mode & 0o777 == 0o640
    cp = run("plan", "msgspec", "-o", str(tmp_path / "out2"))  # the tests' own umask
    old = os.umask(0)
    os.umask(old)
    assert (tmp_path / "out2" / "plan.json").stat().st_mode & 0o777 == 0o666 & ~old


def test_refs_and_verify_reports_follow_the_umask_and_pin_keeps_the_recipes_mode(tmp_path):
    import hashlib

    from rvport.catalogue.model import Source, SourceKind
    from rvport.catalogue.profiles import get_profile
    from rvport.catalogue.recipes import load_catalogue
    from rvport.sources import Cache, FetchOptions, pin_recipe
    from rvport.verify import verify_paths
    from rvport.verify.report import write_json
    from tests.fixtures.httpserver import Route, serve

    old = os.umask(0o002)
    try:
        cache = Cache(root=tmp_path / "cache")
        cache.write_ref(
            Source(name="s", kind=SourceKind.URL, url="https://example.org/s.tgz", sha256=None),
            "0" * 64,
            date="2026-01-02",
        )
        (ref,) = (tmp_path / "cache" / "refs").iterdir()
        assert ref.stat().st_mode & 0o777 == 0o664
        (tmp_path / "x.txt").write_text("x\n")
        write_json(verify_paths([tmp_path / "x.txt"], get_profile("rvv256")), tmp_path / "r.json")
        assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o664

        body = b"demo source\n"
        with serve({"/demo-1.0.tar.gz": Route(body=body)}) as srv:
            recipes = tmp_path / "recipes"
            recipes.mkdir()
            text = (
                recipe_text()
                .replace("https://example.org", srv.base)
                .replace(f"        sha256: {'a' * 64}\n", "")
            )
            (recipes / "demo.yaml").write_text(text)
            (recipes / "demo.yaml").chmod(0o600)
            pinned = pin_recipe(
                load_catalogue(recipes).resolve("demo"),
                FetchOptions(cache=Cache(root=tmp_path / "c2"), backoff=0.01),
            )
        assert [p.sha256 for p in pinned] == [hashlib.sha256(body).hexdigest()]
        assert (recipes / "demo.yaml").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_verify_reports_need_an_existing_directory(tmp_path):
    cp = run("verify", "artifacts", str(tmp_path), "--json", str(tmp_path / "no" / "such" / "r.json"))
    assert cp.returncode == 2 and no_traceback(cp), cp.stderr
    assert (
        f"cannot write {tmp_path / 'no' / 'such' / 'r.json'}: no directory {tmp_path / 'no' / 'such'}"
        in cp.stderr
    )
    assert not (tmp_path / "no").exists()


# ---- plan holds every pin --------------------------------------------------------------------------------


def test_plan_checks_the_patches_and_lock_files_against_their_pins(tmp_path):
    import hashlib

    patch, lock = b"--- a/x\n+++ b/x\n", b"# lock\n"
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "fix.patch").write_bytes(patch)
    (tmp_path / "demo" / "demo.lock").write_bytes(lock)
    pins = (
        f"    patches:\n      - file: demo/fix.patch\n        sha256: {hashlib.sha256(patch).hexdigest()}\n"
        f"    lockfiles:\n      - file: demo/demo.lock\n        sha256: {hashlib.sha256(lock).hexdigest()}\n"
        "        dest: demo.lock\n"
    )
    (tmp_path / "demo.yaml").write_text(recipe_text(extra=pins))
    out = tmp_path / "out"
    cp = run("plan", "demo", "--recipes", str(tmp_path), "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    (out / "plan.json").unlink()

    (tmp_path / "demo" / "fix.patch").write_bytes(patch + b"+evil\n")
    (tmp_path / "demo" / "demo.lock").write_bytes(lock + b"# changed\n")
    for command in ("plan", "build"):
        cp = run(
            command,
            "demo",
            "--recipes",
            str(tmp_path),
            "-o",
            str(out),
            env={"COLUMNS": "300", "DOCKER_HOST": "unix:///nonexistent.sock"},
        )
        assert cp.returncode == 4 and no_traceback(cp), cp.stderr
        assert "2 pinned files changed since they were pinned" in cp.stderr
        for name, old, new in (
            ("fix.patch", patch, patch + b"+evil\n"),
            ("demo.lock", lock, lock + b"# changed\n"),
        ):
            assert (
                f"{tmp_path / 'demo' / name} does not match its pin: the recipe pins sha256 "
                f"{hashlib.sha256(old).hexdigest()}, the file has {hashlib.sha256(new).hexdigest()}"
            ) in cp.stderr
        assert f"{tmp_path / 'demo.yaml'}:13:" in cp.stderr and f"{tmp_path / 'demo.yaml'}:16:" in cp.stderr
        assert not (out / "plan.json").exists()


def test_internal_error_handler_prints_the_message_literally(monkeypatch, capsys):
    from rvport.cli import app as app_module
    from rvport.cli import console

    def broken(**_kw):
        raise RuntimeError("boom [/] in a[b]c")

    monkeypatch.setattr(app_module, "app", broken)
    monkeypatch.setattr(app_module, "install_handlers", lambda: None)  # keep pytest's own signal handlers
    monkeypatch.setattr(console, "_ui", None)
    with pytest.raises(SystemExit) as exit_:
        app_module.main()
    assert exit_.value.code == 9
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: boom [/] in a[b]c" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["plan", "build", "prepare"])
def test_an_unpinned_base_image_is_refused_before_planning(tmp_path, command):
    """--base-image is checked first, as plan and prepare do: even with a broken recipe the answer is the same
    usage error, and no plan.json is written."""
    (tmp_path / "demo.yaml").write_text(recipe_text().replace("build: [make]\n", "build: [make]\nbogus: 1\n"))
    out = tmp_path / "out"
    cp = run(
        command,
        "demo",
        "--recipes",
        str(tmp_path),
        "-o",
        str(out),
        "--base-image",
        "debian:trixie",
        env={"DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    assert cp.returncode == 2 and no_traceback(cp), cp.stderr
    assert "--base-image 'debian:trixie' is not pinned by digest" in cp.stderr
    assert not (out / "plan.json").exists()
