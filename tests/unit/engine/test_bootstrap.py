"""The base rootfs's bootstrap methods: which one is chosen, what it adds to the base key, the commands, the
package order and progress lines, the mount guard before removal, and failures (no docker, no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvport.catalogue.bases import load_base
from rvport.engine import bootstrap
from rvport.engine.events import Phase, PhaseReader
from rvport.engine.images import base_key
from rvport.errors import HostNotReady

REQ = bootstrap.Request(
    arch="riscv64",
    suite="trixie",
    variant="minbase",
    components=("main",),
    packages=("python3", "cmake"),
    mirror="http://mirror.example/debian",
)


def test_split_is_chosen_for_a_foreign_architecture_on_a_host_whose_dpkg_unpacks_everything():
    assert bootstrap.choose_method(foreign=True, dpkg="/usr/bin/dpkg", filters=[])[0] == bootstrap.SPLIT
    assert bootstrap.choose_method(foreign=False, dpkg="/usr/bin/dpkg", filters=[])[0] == bootstrap.CLASSIC
    assert bootstrap.choose_method(foreign=True, dpkg=None, filters=[])[0] == bootstrap.CLASSIC
    method, why = bootstrap.choose_method(
        foreign=True, dpkg="/usr/bin/dpkg", filters=["/etc/dpkg/dpkg.cfg.d/excludes: path-exclude"]
    )
    assert method == bootstrap.CLASSIC and "path-exclude" in why


def test_host_dpkg_filters_are_found(tmp_path):
    d = tmp_path / "dpkg.cfg.d"
    d.mkdir()
    (d / "docker-apt-speedup").write_text("# speed\nforce-unsafe-io\n")
    assert bootstrap.host_dpkg_filters(d, tmp_path / "dpkg.cfg") == []
    (d / "excludes").write_text(
        "path-exclude /usr/share/doc/*\n# path-include not this\npath-include /usr/share/doc/*/copyright\n"
    )
    found = bootstrap.host_dpkg_filters(d, tmp_path / "dpkg.cfg")
    assert [f.split(": ", 1)[1] for f in found] == ["path-exclude", "path-include"]


def test_the_method_changes_the_base_key_and_the_classic_key_stays_what_it_was():
    rv = load_base("debian-trixie")
    classic = base_key(rv, "linux/riscv64", None)
    assert classic == base_key(rv, "linux/riscv64", None, bootstrap.CLASSIC)
    split = base_key(rv, "linux/riscv64", None, bootstrap.SPLIT)
    assert split != classic
    assert bootstrap.key_part(bootstrap.SPLIT) == {"bootstrap": f"split-{bootstrap.SPLIT_FORMAT}"}


def test_commands():
    root = Path("/c/rootfs")
    assert bootstrap.debootstrap_argv(REQ, root) == [
        "debootstrap",
        "--arch=riscv64",
        "--variant=minbase",
        "--components=main",
        "--include=python3,cmake",
        "trixie",
        "/c/rootfs",
        "http://mirror.example/debian",
    ]
    first = bootstrap.debootstrap_argv(REQ, root, foreign=True)
    assert "--foreign" in first and first.index("--foreign") < first.index("trixie")
    unpack = bootstrap.native_unpack_argv(root, [root / "var/cache/apt/archives/a.deb"])
    assert (
        unpack[:2] == ["dpkg", "--root=/c/rootfs"] and "--unpack" in unpack and "--force-unsafe-io" in unpack
    )
    assert bootstrap.configure_argv(root)[:3] == ["chroot", "/c/rootfs", "dpkg"]


def _first_stage(tmp_path: Path, base: str = "cmake python3 libc6") -> Path:
    rootfs = tmp_path / "rootfs"
    d = rootfs / "debootstrap"
    d.mkdir(parents=True)
    (d / "required").write_text("libc6 dpkg\n")
    (d / "base").write_text(base + "\n")
    (d / "debpaths").write_text(
        "".join(
            f"{p} /var/cache/apt/archives/{p}_1_riscv64.deb\n" for p in ("libc6", "dpkg", "cmake", "python3")
        )
    )
    return rootfs


def test_package_order_is_required_then_base_without_repeats(tmp_path):
    rootfs = _first_stage(tmp_path)
    order = bootstrap.package_order(rootfs)
    assert [p for p, _ in order] == ["libc6", "dpkg", "cmake", "python3"]
    assert order[0][1] == rootfs / "var/cache/apt/archives/libc6_1_riscv64.deb"


def test_a_package_the_first_stage_did_not_download_is_an_error(tmp_path):
    with pytest.raises(HostNotReady, match="did not download: zlib1g"):
        bootstrap.package_order(_first_stage(tmp_path, base="cmake zlib1g"))


def test_dpkg_lines_become_counted_progress_lines_and_phase_events():
    seen: list[str] = []
    phases: list[Phase] = []
    count = bootstrap.Counter("configuring", bootstrap._SETTING_UP, 3, seen.append, phases.append)
    for line in (
        "Setting up libc6:riscv64 (2.41-12) ...",
        "update-alternatives: using /bin/more",
        "Setting up zlib1g:riscv64 (1:1.3) ...",
        "Processing triggers for libc-bin (2.41-12) ...",
        "Setting up zlib1g:riscv64 (1:1.3) ...",
        "Setting up one-too-many (1) ...",  # never more than the total
    ):
        count(line)
    assert seen[:4] == [
        "bootstrap: configuring 1/3 libc6:riscv64",
        "update-alternatives: using /bin/more",
        "bootstrap: configuring 2/3 zlib1g:riscv64",
        "Processing triggers for libc-bin (2.41-12) ...",  # dpkg's other lines pass as they are
    ]
    assert phases == [
        Phase(phase="configuring", done=1, total=3, what="libc6:riscv64"),
        Phase(phase="configuring", done=2, total=3, what="zlib1g:riscv64"),
        Phase(phase="triggers", done=1, what="libc-bin"),  # read by the debootstrap/dpkg rules
        Phase(phase="configuring", done=3, total=3, what="zlib1g:riscv64"),
        Phase(phase="configuring", done=3, total=3, what="one-too-many"),
    ]


@pytest.mark.parametrize(
    "lines,expected",
    [
        (
            ["I: Retrieving libc6 2.41-12", "I: Retrieving zlib1g 1:1.3"],
            Phase(phase="retrieving", done=2, what="zlib1g"),
        ),
        (
            [
                "I: Unpacking required packages...",
                "I: Unpacking apt...",
                "I: Unpacking python3.13-minimal...",
            ],
            Phase(phase="unpacking", done=2, what="python3.13-minimal"),
        ),
        (["I: Configuring the base system..."], Phase(phase="configuring the base system")),
        (
            ["I: Unpacking libc6:riscv64...", "I: Configuring libc6:riscv64..."],
            Phase(phase="configuring", done=1, what="libc6:riscv64"),
        ),
        (["I: Validating zlib1g 1:1.3"], Phase(phase="validating", done=1, what="zlib1g")),
        (["I: Extracting libc6..."], Phase(phase="extracting", done=1, what="libc6")),
        (
            ["Setting up libc6:riscv64 (2.41-12) ...", "Setting up zlib1g:riscv64 (1:1.3) ..."],
            Phase(phase="configuring", done=2, what="zlib1g:riscv64"),
        ),
        (["I: Base system installed successfully.", "gcc -O2 -c foo.c"], None),
    ],
)
def test_debootstraps_lines_are_read_into_phase_events_where_it_runs(lines, expected):
    seen: list[Phase] = []
    reader = PhaseReader(bootstrap.PHASES, seen.append)
    for line in lines:
        reader(line)
    assert (seen[-1] if seen else None) == expected


def test_a_line_that_names_no_phase_makes_no_event():
    seen: list[Phase] = []
    reader = PhaseReader(bootstrap.PHASES, seen.append)
    assert reader("I: Configuring libc6:riscv64...") == Phase(
        phase="configuring", done=1, what="libc6:riscv64"
    )
    assert reader("dpkg: warning: something") is None
    assert len(seen) == 1


def test_mounts_under_a_tree_are_found_deepest_first(tmp_path):
    work = tmp_path / "work"
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"proc /proc proc rw 0 0\nproc {work}/rootfs/proc proc rw 0 0\n"
        f"sysfs {work}/rootfs/proc/sys/fs/binfmt_misc binfmt_misc rw 0 0\n"
        f"tmpfs {work}-other tmpfs rw 0 0\n"
    )
    assert bootstrap.mounts_under(work, mounts) == [
        f"{work}/rootfs/proc/sys/fs/binfmt_misc",
        f"{work}/rootfs/proc",
    ]


def test_a_tree_with_a_mount_that_will_not_go_is_not_removed(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "rootfs/proc").mkdir(parents=True)
    monkeypatch.setattr(bootstrap, "mounts_under", lambda p, mounts=None: [str(work / "rootfs/proc")])
    monkeypatch.setattr(bootstrap.proc, "run", lambda *a, **k: None)  # umount "fails" silently
    with pytest.raises(HostNotReady, match="cannot unmount"):
        bootstrap.remove_tree(work)
    assert work.is_dir()


def test_without_debootstrap_the_hint_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HostNotReady) as e:
        bootstrap.make_rootfs(REQ, tmp_path / "rootfs", method=bootstrap.SPLIT, log_path=None, on_line=print)
    assert "debootstrap" in e.value.message and "apt-get install debootstrap" in e.value.hint


def test_a_failing_first_stage_is_a_typed_error(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "debootstrap").write_text(
        "#!/bin/sh\necho 'I: Retrieving libc6 2.41-12'\n"
        "echo 'E: Couldn'\"'\"'t download packages: python3'\nexit 1\n"
    )
    (fake / "debootstrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    seen: list[str] = []
    phases: list[Phase] = []
    with pytest.raises(HostNotReady, match=r"debootstrap's first stage for riscv64 failed \(exit 1\)"):
        bootstrap.make_rootfs(
            REQ,
            tmp_path / "rootfs",
            method=bootstrap.SPLIT,
            log_path=tmp_path / "log",
            on_line=seen.append,
            on_phase=phases.append,
        )
    assert "E: Couldn't download packages: python3" in seen
    assert "I: Retrieving libc6 2.41-12" in seen  # the tool's lines reach people as they are
    # and what they say it is doing goes up as events, read here, next to the run
    assert phases == [Phase(phase="first stage"), Phase(phase="retrieving", done=1, what="libc6")]
    assert "E: Couldn't download packages: python3" in (tmp_path / "log").read_text()


def test_rvport_bootstrap_forces_a_method_and_a_wrong_value_is_a_usage_error():
    assert bootstrap.choose_method(foreign=True, dpkg="/usr/bin/dpkg", filters=[], forced="debootstrap") == (
        bootstrap.CLASSIC,
        "RVPORT_BOOTSTRAP=debootstrap",
    )
    assert (
        bootstrap.choose_method(foreign=True, dpkg="/usr/bin/dpkg", filters=[], forced="split")[0]
        == bootstrap.SPLIT
    )
    # split where it cannot apply still falls back, with the reason
    assert (
        bootstrap.choose_method(foreign=False, dpkg="/usr/bin/dpkg", filters=[], forced="split")[0]
        == bootstrap.CLASSIC
    )
    from rvport.errors import UsageError

    with pytest.raises(UsageError, match="RVPORT_BOOTSTRAP='mmdebstrap'"):
        bootstrap.choose_method(foreign=True, dpkg="/usr/bin/dpkg", filters=[], forced="mmdebstrap")


def _rootfs_with_python(tmp_path: Path) -> Path:
    r = tmp_path / "rootfs"
    info = r / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (r / "usr/bin").mkdir(parents=True)
    (r / "usr/bin/python3.13").write_text("")
    files = {
        "python3-pip:riscv64": [],
        "python3-pip": [
            "/usr/lib/python3/dist-packages/pip/__init__.py",
            "/usr/lib/python3/dist-packages/pip/py.typed",
            "/usr/share/doc/python3-pip/example.py",
            "/usr/lib/python3.12/dist-packages/old.py",
        ],
        "python3-minimal": ["/usr/share/python3/debpython/files.py", "/usr/lib/python3/dist-packages/x.py"],
    }
    for pkg, paths in files.items():
        if not paths:
            continue
        (info / f"{pkg}.list").write_text("/.\n" + "".join(p + "\n" for p in paths))
        for p in paths:
            (r / p.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (r / p.lstrip("/")).write_text("")
    return r


def test_recorded_py3compile_calls_become_one_batch_of_the_files_py3compile_would_pick(tmp_path):
    r = _rootfs_with_python(tmp_path)
    files, others = bootstrap.py3compile_batch(
        r,
        [
            ["-p", "python3-pip"],
            ["-p", "python3-minimal", "/usr/share/python3/"],
            ["-p", "python3-pip"],
            ["-V", "3.13", "/opt/x"],
            ["-p", "gone"],
        ],
    )
    # public modules of an installed Python only; a private directory's files when one is named; no repeats
    assert files == [
        "/usr/lib/python3/dist-packages/pip/__init__.py",
        "/usr/share/python3/debpython/files.py",
    ]
    assert others == [["-V", "3.13", "/opt/x"], ["-p", "gone"]]  # anything else runs as it was called


def test_a_deferred_program_is_a_recorder_only_while_dpkg_configures(tmp_path):
    import subprocess

    r = tmp_path / "rootfs"
    (r / "usr/sbin").mkdir(parents=True)
    (r / "var/lib").mkdir(parents=True)
    real = r / "usr/sbin/update-ca-certificates"
    real.write_text("#!/bin/sh\nreal\n")
    deferred = bootstrap.Deferred(r, bootstrap.UPDATE_CA)
    with pytest.raises(RuntimeError):
        with deferred:
            stub = real.read_text()
            assert stub.startswith("#!/bin/sh") and deferred.record_name in stub
            # the stub as a maintainer script would call it (its record path moved under tmp_path)
            runnable = tmp_path / "stub.sh"
            runnable.write_text(stub.replace(f"/{deferred.record_name}", str(deferred.record)))
            subprocess.run(["sh", str(runnable), "--hooksdir", "", "--fresh"], check=True)
            subprocess.run(["sh", str(runnable)], check=True)
            raise RuntimeError("dpkg failed")
    assert real.read_text() == "#!/bin/sh\nreal\n"  # back in place, even on failure
    assert not real.with_name("update-ca-certificates.rvport-real").exists()
    assert deferred.calls() == [["--hooksdir", "", "--fresh"], []]  # the empty argument survives
    assert not deferred.record.exists()  # the record is not left behind


def test_update_ca_certificates_runs_once_for_the_postinst_and_its_trigger():
    assert bootstrap.update_ca_batch([]) == []
    assert bootstrap.update_ca_batch([["--hooksdir", "", "--fresh"], []]) == [["--fresh"]]
    assert bootstrap.update_ca_batch([["--hooksdir", ""], []]) == [[]]
    assert bootstrap.update_ca_batch([[], ["--certsconf", "/x"]]) == [[], ["--certsconf", "/x"]]


@pytest.mark.parametrize("method", [bootstrap.CLASSIC, bootstrap.SPLIT])
def test_ctrl_c_while_bootstrapping_leaves_no_rootfs_no_record_and_no_image(tmp_path, monkeypatch, method):
    from rvport.engine import buildx, images, rootfs_image

    built = []
    monkeypatch.setattr(images, "bootstrap_method", lambda platform, forced=None: (method, "test"))
    monkeypatch.setattr(buildx, "image_info", lambda ref: None)
    monkeypatch.setattr(rootfs_image, "load_rootfs", lambda *a, **k: built.append(a))
    monkeypatch.setattr(bootstrap.proc, "which", lambda name, env=None: f"/usr/bin/{name}")

    def interrupted(cmd, *, on_line, log_path=None, cwd=None, env=None):  # Ctrl-C halfway through debootstrap
        if "--print-debs" in cmd:  # the packages fetched side by side: not this test's subject
            return 1
        rootfs = Path(cmd[-2] if cmd[-1].startswith("http") else cmd[-1])
        (rootfs / "var/lib/dpkg").mkdir(parents=True)
        (rootfs / "var/lib/dpkg/status").write_text("half\n")
        on_line("I: Retrieving libc6 2.41-12")
        raise KeyboardInterrupt

    monkeypatch.setattr(bootstrap.proc, "stream", interrupted)
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        images.ensure_base(
            load_base("debian-trixie"),
            platform="linux/riscv64",
            cache_dir=cache,
            log_path=tmp_path / "base.log",
        )
    assert list((cache / "tmp").iterdir()) == []  # the temp rootfs is gone
    assert not list((cache / "bases").glob("*.json"))  # no record of a base (its lock file only)
    assert built == []  # no image was built


def test_proc_is_mounted_from_inside_the_rootfs_never_through_a_symlink_to_the_hosts(tmp_path, monkeypatch):
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    host_proc = tmp_path / "host-proc"
    host_proc.mkdir()
    (rootfs / "proc").symlink_to(host_proc)  # what debootstrap's first stage leaves in a container
    ran = []
    monkeypatch.setattr(bootstrap.proc, "run", lambda cmd, **k: ran.append(cmd))
    monkeypatch.setattr(bootstrap, "mounts_under", lambda p, mounts=None: [str(rootfs.resolve() / "proc")])
    bootstrap._mount_proc(rootfs, {})
    assert (rootfs / "proc").is_dir() and not (rootfs / "proc").is_symlink() and host_proc.is_dir()
    assert ran == [["chroot", str(rootfs), "mount", "-t", "proc", "proc", "/proc"]]
    monkeypatch.setattr(bootstrap, "mounts_under", lambda p, mounts=None: [])
    with pytest.raises(HostNotReady, match="was not mounted"):
        bootstrap._mount_proc(rootfs, {})


def test_a_base_made_records_how_long_it_took_and_a_base_found_again_does_not(tmp_path, monkeypatch):
    from rvport.engine import buildx, images, rootfs_image

    engine: dict[str, dict] = {}
    monkeypatch.setattr(images, "bootstrap_method", lambda platform, forced=None: (bootstrap.SPLIT, "test"))
    monkeypatch.setattr(images, "host_debian_mirror", lambda: None)
    monkeypatch.setattr(bootstrap.proc, "which", lambda name, env=None: f"/usr/bin/{name}")
    monkeypatch.setattr(buildx, "image_info", lambda ref: engine.get(ref))

    def make_rootfs(req, rootfs, *, method, log_path, on_line, on_phase, fetch_ahead):
        (rootfs / "var/lib/dpkg").mkdir(parents=True)
        (rootfs / "var/lib/dpkg/status").write_text(
            "Package: libc6\nStatus: install ok installed\nVersion: 2.41\n"
        )

    def load(rootfs, scratch, *, tag, **_):
        engine[tag] = {"id": "sha256:" + "1" * 64, "labels": {}}
        return engine[tag]["id"]

    monkeypatch.setattr(bootstrap, "make_rootfs", make_rootfs)
    monkeypatch.setattr(rootfs_image, "load_rootfs", load)
    spec = load_base("debian-trixie")
    args = dict(platform="linux/riscv64", cache_dir=tmp_path / "cache", log_path=tmp_path / "base.log")
    made = images.ensure_base(spec, **args)
    assert not made.reused and made.duration_s is not None and made.duration_s >= 0
    assert made.to_json()["duration_s"] == round(made.duration_s, 2) and made.packages == {"libc6": "2.41"}
    found = images.ensure_base(spec, **args)
    assert found.reused and found.duration_s is None and found.to_json()["duration_s"] is None


def test_bytecode_is_split_so_that_no_directory_is_in_two_runs():
    files = [
        f"/usr/lib/python3/dist-packages/{d}/{n}.py"
        for d, k in (("pip", 5), ("six", 1), ("wheel", 3), ("yaml", 2))
        for n in range(k)
    ]
    parts = bootstrap.split_by_directory(files, 2)
    assert sorted(f for p in parts for f in p) == sorted(files)  # every file once
    dirs = [{f.rpartition("/")[0] for f in p} for p in parts]
    assert not dirs[0] & dirs[1]  # a directory in one run only
    assert sorted(len(p) for p in parts) == [5, 6]  # about the same length
    assert all(p == [f for f in files if f in p] for p in parts)  # in the files' order
    assert (
        bootstrap.split_by_directory(files[:1], 2) == [files[:1]]
        and bootstrap.split_by_directory([], 2) == []
    )


def test_the_deferred_work_is_certificates_and_two_bytecode_runs_side_by_side_then_other_calls(tmp_path):
    r = _rootfs_with_python(tmp_path)
    calls = {
        bootstrap.UPDATE_CA: [["--hooksdir", "", "--fresh"], []],
        bootstrap.PY3COMPILE: [
            ["-p", "python3-pip"],
            ["-p", "python3-minimal", "/usr/share/python3/"],
            ["-V", "3.13", "/opt/x"],
        ],
    }
    tasks, after = bootstrap.deferred_runs(r, calls)
    assert tasks == [
        ("certificates", [[bootstrap.UPDATE_CA, "--fresh"]]),
        ("python bytecode 1", [[bootstrap.PY3COMPILE, "/usr/lib/python3/dist-packages/pip/__init__.py"]]),
        ("python bytecode 2", [[bootstrap.PY3COMPILE, "/usr/share/python3/debpython/files.py"]]),
    ]
    assert after == [[bootstrap.PY3COMPILE, "-V", "3.13", "/opt/x"]]  # after the batch: may touch its dirs
    assert bootstrap.deferred_runs(r, {}) == ([], [])


def test_the_standard_librarys_compile_calls_are_batched_by_interpreter_and_options_and_others_kept():
    mod = "/usr/lib/python3.13/py_compile.py"
    calls = [
        [
            "/usr/bin/python3.13",
            "-E",
            "-S",
            mod,
            "/usr/lib/python3.13/os.py",
            "/usr/lib/python3.13/re/__init__.py",
        ],
        ["/usr/bin/python3.13", "-E", "-S", mod, "/usr/lib/python3.13/os.py", "/usr/lib/python3.13/ast.py"],
        ["/usr/bin/python3.13", "-E", "-S", "-O", mod, "/usr/lib/python3.13/os.py"],
        ["/usr/bin/python3.13", "-m", "py_compile", "/x.py"],  # another form
        ["/usr/bin/python3.13", "-X", "dev", mod, "/y.py"],  # an option not known
        ["/usr/bin/python3.13", "-E", mod, "relative.py"],
    ]  # a relative file
    groups, others = bootstrap.py_compile_batch(mod, calls)
    assert groups == {
        ("/usr/bin/python3.13", "-E", "-S", mod): [
            "/usr/lib/python3.13/os.py",
            "/usr/lib/python3.13/re/__init__.py",
            "/usr/lib/python3.13/ast.py",
        ],
        ("/usr/bin/python3.13", "-E", "-S", "-O", mod): ["/usr/lib/python3.13/os.py"],
    }
    assert others == calls[3:]


def test_deferred_runs_split_both_kinds_of_bytecode_by_directory_and_leave_out_what_was_done(tmp_path):
    r = _rootfs_with_python(tmp_path)
    mod = "/usr/lib/python3.13/py_compile.py"
    std = ("/usr/bin/python3.13", "-E", "-S", mod)
    calls = {
        bootstrap.PY3COMPILE: [["-p", "python3-pip"]],
        mod: [
            [
                *std,
                "/usr/lib/python3.13/os.py",
                "/usr/lib/python3.13/ast.py",
                "/usr/lib/python3.13/re/_parser.py",
            ]
        ],
    }
    tasks, after = bootstrap.deferred_runs(r, calls)
    assert after == []
    runs = [argvs for _, argvs in tasks]
    assert sorted(map(len, runs)) == [1, 2] and [w for w, _ in tasks] == [
        "python bytecode 1",
        "python bytecode 2",
    ]
    everything = sorted(tuple(a) for argvs in runs for a in argvs)
    assert everything == sorted(
        [
            (bootstrap.PY3COMPILE, "/usr/lib/python3/dist-packages/pip/__init__.py"),
            (*std, "/usr/lib/python3.13/os.py", "/usr/lib/python3.13/ast.py"),
            (*std, "/usr/lib/python3.13/re/_parser.py"),
        ]
    )
    done = {
        (std, "/usr/lib/python3.13/os.py"),
        ((bootstrap.PY3COMPILE,), "/usr/lib/python3/dist-packages/pip/__init__.py"),
    }
    tasks, _ = bootstrap.deferred_runs(r, calls, done=done)
    left = sorted(tuple(a) for _, argvs in tasks for a in argvs)
    assert left == sorted([(*std, "/usr/lib/python3.13/ast.py"), (*std, "/usr/lib/python3.13/re/_parser.py")])


def _stdlib(tmp_path: Path) -> tuple[Path, str]:
    r = tmp_path / "rootfs"
    (r / "var/lib").mkdir(parents=True)
    lib = r / "usr/lib/python3.13"
    lib.mkdir(parents=True)
    (lib / "py_compile.py").write_text("def compile(f):\n    return 'real ' + f\n")
    (r / "usr/lib/python3.9").mkdir()
    (r / "usr/lib/python3.9/py_compile.py").write_text("")  # before sys.orig_argv: not deferred
    return r, "/usr/lib/python3.13/py_compile.py"


def test_the_py_compile_modules_of_python_3_10_and_later_are_deferred_each_with_a_record_of_its_own(tmp_path):
    r, mod = _stdlib(tmp_path)
    assert bootstrap.py_compile_modules(r) == [mod]
    names = {
        bootstrap.DeferredModule(r, mod).record_name,
        bootstrap.Deferred(r, bootstrap.PY3COMPILE).record_name,
        bootstrap.DeferredModule(r, "/usr/lib/python3.14/py_compile.py").record_name,
    }
    assert len(names) == 3


def test_the_py_compile_recorder_writes_down_a_script_call_and_is_the_real_module_when_imported(
    tmp_path, monkeypatch
):
    import importlib.util
    import sys

    r, mod = _stdlib(tmp_path)
    deferred = bootstrap.DeferredModule(r, mod)
    path = r / mod.lstrip("/")
    with deferred:
        text = path.read_text()
        written = []

        class Record:  # the record file, as the recorder opens it in the rootfs
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                pass

            def write(self, data):
                written.append(data)

        def rootfs_open(name, mode="r"):
            if mode == "a":
                assert name == f"/{deferred.record_name}"
                return Record()
            return open(r / name.lstrip("/"), mode)

        def run_as(argv):
            monkeypatch.setattr(sys, "orig_argv", argv)
            scope = {"__name__": "__main__", "__file__": mod, "open": rootfs_open}
            exec(compile(text, mod, "exec"), scope)
            return scope

        scope = run_as(["/usr/bin/python3.13", "-E", "-S", mod, "/a.py", ""])
        assert (
            written == [f"call\t/usr/bin/python3.13\t-E\t-S\t{mod}\t/a.py\t\t\n"] and "compile" not in scope
        )
        for other in (
            ["/usr/bin/python3.13", "-m", "py_compile", "-"],  # as py3compile runs it: names on stdin
            ["/usr/bin/python3.13", mod, "-"],
            ["/usr/bin/python3.13", mod],
        ):
            scope = run_as(other)
            assert len(written) == 1 and scope["compile"]("y") == "real y", other  # the real module ran
        spec = importlib.util.spec_from_file_location("py_compile_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # imported: the real module, compiled to a .pyc
        assert module.compile("x") == "real x"
        pycache = path.parent / "__pycache__"
        (pycache).mkdir(exist_ok=True)
        (pycache / "py_compile.cpython-313.pyc").write_bytes(b"the recorder's")
    assert path.read_text() == "def compile(f):\n    return 'real ' + f\n"
    assert list(pycache.glob("py_compile.*.pyc")) == []  # no bytecode of the recorder is left


def test_bytecode_is_compiled_on_the_way_with_the_real_programs_and_only_what_succeeded_counts_as_done(
    tmp_path,
):
    import time

    r = _rootfs_with_python(tmp_path)
    (r / "usr/bin/py3compile").write_text("#!/usr/bin/python3\n")
    lib = r / "usr/lib/python3.13"
    lib.mkdir(parents=True)
    (lib / "py_compile.py").write_text("")
    mod = "/usr/lib/python3.13/py_compile.py"
    deferred = {
        bootstrap.PY3COMPILE: bootstrap.Deferred(r, bootstrap.PY3COMPILE),
        mod: bootstrap.DeferredModule(r, mod),
    }
    ran, fail = [], []

    def run(argvs):
        ran.append(argvs)
        if fail:
            raise HostNotReady("py3compile in the new rootfs failed")

    def wait_for(n):
        deadline = time.monotonic() + 10
        while len(ran) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)

    with (
        deferred[bootstrap.PY3COMPILE],
        deferred[mod],
        bootstrap.EarlyWork(r, deferred, run, poll=0.01) as early,
    ):
        pycalls = deferred[bootstrap.PY3COMPILE].record
        pycalls.write_text("call\t-p\tpython3-pip\t\ncall\t-p\tpython3-mini")  # the second half-written
        wait_for(1)
        assert ran == [
            [["/usr/bin/py3compile.rvport-real", "/usr/lib/python3/dist-packages/pip/__init__.py"]]
        ]
        fail.append(True)
        std = ["/usr/bin/python3.13", "-E", "-S", mod]
        deferred[mod].record.write_text(
            "call\t" + "\t".join([*std, mod, "/usr/lib/python3.13/os.py"]) + "\t\n"
        )
        wait_for(2)
        assert ran[1] == [
            ["/usr/bin/python3.13", "-E", "-S", mod + ".rvport-real", "/usr/lib/python3.13/os.py"]
        ]
    assert early.done == {((bootstrap.PY3COMPILE,), "/usr/lib/python3/dist-packages/pip/__init__.py")}
    assert len(early.failed) >= 1  # the failed batch is left for afterwards
    assert all(
        mod not in argv[4:] for argvs in ran for argv in argvs
    )  # the module's own source (the recorder) too


def _rootfs_with_certificates(tmp_path: Path) -> Path:
    r = tmp_path / "rootfs"
    (r / "usr/sbin").mkdir(parents=True)
    (r / "var/lib").mkdir(parents=True)
    (r / "usr/sbin/update-ca-certificates").write_text("#!/bin/sh\n")
    (r / "usr/share/ca-certificates/mozilla").mkdir(parents=True)
    (r / "usr/share/ca-certificates/mozilla/A.crt").write_text("A")
    (r / "etc/ca-certificates/update.d").mkdir(parents=True)
    (r / "etc/ca-certificates.conf").write_text("mozilla/A.crt\n")
    return r


def _early(r: Path, deferred: dict, record_lines: str, ran: list) -> bootstrap.EarlyWork:
    with deferred[bootstrap.UPDATE_CA], bootstrap.EarlyWork(r, deferred, ran.append, poll=0.01) as early:
        deferred[bootstrap.UPDATE_CA].record.write_text(record_lines)
        early._threads[1].join(10)  # the certificates' thread: it ends once it has seen the call
    early.join()
    return early


def test_the_certificates_are_made_on_the_way_once_and_count_as_done_only_while_their_inputs_stay(tmp_path):
    r = _rootfs_with_certificates(tmp_path)
    deferred = {bootstrap.UPDATE_CA: bootstrap.Deferred(r, bootstrap.UPDATE_CA)}
    ran: list = []
    early = _early(r, deferred, "call\t--hooksdir\t\t--fresh\t\n", ran)
    assert ran == [[["/usr/sbin/update-ca-certificates.rvport-real", "--fresh"]]]  # once, the real program
    assert early.certificates_started
    final = [["--hooksdir", "", "--fresh"], []]  # with the trigger's call
    assert early.certificates_done(final) == [["--fresh"]]
    tasks, _ = bootstrap.deferred_runs(r, {bootstrap.UPDATE_CA: final}, certificates=False)
    assert tasks == []
    assert early.certificates_done([*final, ["--certsconf", "/x"]]) is None  # a call the batch does not cover
    (r / "usr/share/ca-certificates/mozilla/B.crt").write_text("B")  # a certificate added since
    assert early.certificates_done(final) is None


def test_the_certificates_wait_for_the_end_when_a_hook_is_installed(tmp_path):
    r = _rootfs_with_certificates(tmp_path)
    (r / "etc/ca-certificates/update.d/jks-keystore").write_text("#!/bin/sh\n")
    deferred = {bootstrap.UPDATE_CA: bootstrap.Deferred(r, bootstrap.UPDATE_CA)}
    ran: list = []
    early = _early(r, deferred, "call\t--hooksdir\t\t--fresh\t\n", ran)
    assert ran == [] and not early.certificates_started
    tasks, _ = bootstrap.deferred_runs(r, {bootstrap.UPDATE_CA: [["--hooksdir", "", "--fresh"]]})
    assert tasks == [("certificates", [[bootstrap.UPDATE_CA, "--fresh"]])]


def test_certificates_made_early_that_do_not_stand_are_made_again_after_the_bytecode(tmp_path, monkeypatch):
    r = _rootfs_with_certificates(tmp_path)
    deferred = {bootstrap.UPDATE_CA: bootstrap.Deferred(r, bootstrap.UPDATE_CA)}
    ran: list = []
    early = _early(r, deferred, "call\t--hooksdir\t\t--fresh\t\n", ran)
    (r / "etc/ca-certificates.conf").write_text(
        "mozilla/A.crt\n!mozilla/B.crt\n"
    )  # changed after they started
    lines: list = []
    bootstrap._run_deferred(
        r,
        {bootstrap.UPDATE_CA: [["--hooksdir", "", "--fresh"], []]},
        early=early,
        run=ran.append,
        on_line=lines.append,
        on_phase=lines.append,
    )
    assert ran[1:] == [[[bootstrap.UPDATE_CA, "--fresh"]], []]  # made again, then the (empty) rest
    assert lines == [
        "bootstrap: the certificates made while dpkg configured do not stand: made again",
        Phase(phase="making the certificates again"),
    ]


def test_the_inputs_of_update_ca_certificates_are_every_path_it_reads(tmp_path):
    r = _rootfs_with_certificates(tmp_path)
    before = bootstrap.ca_inputs(r)
    assert (
        "usr/share/ca-certificates/mozilla/A.crt" in {e[0] for e in before}
        and ("usr/local/share/ca-certificates", None) in before
    )
    (r / "usr/local/share/ca-certificates").mkdir(parents=True)
    assert bootstrap.ca_inputs(r) != before


@pytest.mark.parametrize(
    "platform, method, ahead",
    [
        ("linux/riscv64", bootstrap.SPLIT, True),
        ("linux/amd64", bootstrap.CLASSIC, True),  # the host's own platform: debootstrap runs natively
        (
            "linux/riscv64",
            bootstrap.CLASSIC,
            False,
        ),  # the reference way (RVPORT_BOOTSTRAP=debootstrap) as it was
    ],
)
def test_packages_are_fetched_ahead_but_for_a_foreign_base_made_the_classic_way(
    tmp_path, monkeypatch, platform, method, ahead
):
    from rvport.engine import buildx, images, rootfs_image
    from rvport.sources import debarchive

    monkeypatch.setattr(images, "bootstrap_method", lambda p, forced=None: (method, "test"))
    monkeypatch.setattr(images, "_foreign", lambda p: p != "linux/amd64")
    monkeypatch.setattr(images, "host_debian_mirror", lambda: "http://mirror.example/debian")
    monkeypatch.setattr(bootstrap.proc, "which", lambda name, env=None: f"/usr/bin/{name}")
    monkeypatch.setattr(buildx, "image_info", lambda ref: None)
    # the suite's signed Release, as the mirror would serve it (valid: trixie's has no Valid-Until)
    release = debarchive.parse_release("Suite: stable\nCodename: trixie\n", where="InRelease")
    signed = debarchive.SignedRelease(release=release, inrelease_sha256="0" * 64, url="http://mirror.example")
    monkeypatch.setattr(debarchive, "fetch_release", lambda *a, **k: signed)
    seen = []

    def make_rootfs(req, rootfs, *, method, log_path, on_line, on_phase, fetch_ahead):
        seen.append(fetch_ahead)
        (rootfs / "var/lib/dpkg").mkdir(parents=True)
        (rootfs / "var/lib/dpkg/status").write_text("")

    monkeypatch.setattr(bootstrap, "make_rootfs", make_rootfs)
    monkeypatch.setattr(rootfs_image, "load_rootfs", lambda *a, **k: "sha256:" + "1" * 64)
    images.ensure_base(
        load_base("debian-trixie"),
        platform=platform,
        cache_dir=tmp_path / "cache",
        log_path=tmp_path / "base.log",
    )
    assert seen == [ahead]


def test_work_in_the_rootfs_runs_chrooted_and_the_early_bytecode_at_a_lower_priority(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(bootstrap.proc, "stream", lambda cmd, **k: ran.append(cmd) or 0)
    r = tmp_path / "rootfs"
    bootstrap._run_in_rootfs(r, [["/usr/bin/py3compile", "/a.py"]], log_path=None, on_line=print, env={})
    bootstrap._run_in_rootfs(
        r, [["/usr/bin/py3compile", "/b.py"]], log_path=None, on_line=print, env={}, nice=True
    )
    assert ran == [
        ["chroot", str(r), "/usr/bin/py3compile", "/a.py"],
        ["nice", "-n", "10", "chroot", str(r), "/usr/bin/py3compile", "/b.py"],
    ]
