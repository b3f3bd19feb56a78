"""Making a base image's Debian root filesystem: debootstrap in one run, or split between the build platform
and emulation.

`debootstrap` (the classic method): one `debootstrap` run. For a foreign architecture (riscv64 on x86-64) its
second stage runs under QEMU: debootstrap's own shell and perl, and dpkg unpacking every package again
(decompression and file writes emulated) before the maintainer scripts configure them.

`split` (foreign architectures, on a host with dpkg): the same first stage, run natively (`debootstrap
--foreign`: resolve, download and check the packages, extract the required ones), then
  1. unpack every package with the build platform's own dpkg (`--root`): native decompression and writes,
     with --force-unsafe-io (the rootfs is thrown away if anything fails); only preinst scripts run, in the
     rootfs (chroot: emulated);
  2. configure with the rootfs's own dpkg under emulation (`chroot ROOTFS dpkg --configure -a`), as
     debootstrap's second stage does: the target's dpkg, maintainer scripts and triggers, so the result is
     what debootstrap makes. What debootstrap does around it is done here too: ld.so cache first, /proc
     mounted, policy-rc.d and a fake start-stop-daemon during configuration, the dselect method, the
     `available` file, the log in /var/log/bootstrap.log, the /debootstrap directory removed;
  3. py3compile, update-ca-certificates and the standard library's compilation (python3.N's postinsts run
     py_compile.py as a script), which maintainer scripts would run one after another under emulation, are
     recorded while dpkg configures (Deferred, DeferredModule), with the same result:
     - what can be done before dpkg ends is done while it goes on, on the core its emulated configure leaves
       free (EarlyWork): the bytecode of the calls recorded so far, and the certificates once ca-certificates'
       postinst has asked for them;
     - afterwards the rest runs once: the certificates and the bytecode left (in two runs, split by directory)
       side by side, each an emulated process chain of its own.
Same package set, same versions, same Release file, same files but logs (bench/bootstrap.py compares them).

The host's dpkg must not filter what it unpacks (path-exclude in /etc/dpkg/dpkg.cfg.d, as slim container
images have): then the classic method is used (`choose_method`). What it is doing goes up as events
(`events.Phase`: "unpacking" 12 of 213, libc6), read from debootstrap's and dpkg's lines here (PHASES,
Counter), beside the lines people read: `bootstrap: unpacking 12/213 libc6`, `bootstrap: configuring 45/213
zlib1g`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from rvport import proc, resources
from rvport.engine import debprefetch, events, parallel
from rvport.engine.events import OnPhase, Phase, Rule
from rvport.errors import HostNotReady, RvportError, UsageError

CLASSIC = "debootstrap"
SPLIT = "split"
SPLIT_FORMAT = 2  # bump when the split method changes what ends up in the rootfs: it is part of the base key

# dpkg options of the host that would change what the native unpack writes
_FILTERS = re.compile(r"^\s*(path-exclude|path-include)\b", re.M)
# the environment maintainer scripts see, as debootstrap gives it
SCRIPT_ENV = {
    "DEBIAN_FRONTEND": "noninteractive",
    "DEBCONF_NONINTERACTIVE_SEEN": "true",
    "LC_ALL": "C",
    "LANGUAGE": "C",
    "LANG": "C",
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
}

# the recorders' one parameter of their own (resources/scripts/deferred-recorder.sh, py-compile-recorder.py)
RECORD_PLACEHOLDER = "@@RECORD@@"

_UNPACKING = re.compile(r"^Unpacking (\S+) \(")
_SETTING_UP = re.compile(r"^Setting up (\S+) \(")
_NAME = r"(?P<what>[a-z0-9][^.\s]*(?:\.[^.\s]+)*?)"  # a package (libc6, python3.13-minimal, libc6:riscv64)
# What debootstrap (and the dpkg it runs) is doing, read from its lines (events.PhaseReader)
PHASES: tuple[Rule, ...] = (
    Rule(
        re.compile(
            r"^I: (?P<phase>(?:Installing|Unpacking|Configuring) (?:core|required|the base system)"
            r"(?: packages)?)\.\.\.$"
        )
    ),
    Rule(re.compile(r"^I: Retrieving (?P<what>\S+)"), "retrieving"),
    Rule(re.compile(r"^I: Validating (?P<what>\S+)"), "validating"),
    Rule(re.compile(r"^I: Extracting (?P<what>[^.\s]\S*?)\.*$"), "extracting"),
    Rule(re.compile(r"^I: Unpacking " + _NAME + r"\.\.\.$"), "unpacking"),
    Rule(re.compile(r"^I: Configuring " + _NAME + r"\.\.\.$"), "configuring"),
    Rule(re.compile(r"^Unpacking (?P<what>\S+) \("), "unpacking"),
    Rule(re.compile(r"^Setting up (?P<what>\S+) \("), "configuring"),
    Rule(re.compile(r"^Processing triggers for (?P<what>\S+) \("), "triggers"),
)


@dataclass(frozen=True, kw_only=True)
class Request:
    """One rootfs to make (pure data; debootstrap_argv derives the command from it)."""

    arch: str  # Debian architecture: riscv64, amd64, arm64
    suite: str
    variant: str
    components: tuple[str, ...]
    packages: tuple[str, ...]
    mirror: str | None


def host_dpkg_filters(
    cfg_dir: Path = Path("/etc/dpkg/dpkg.cfg.d"), cfg: Path = Path("/etc/dpkg/dpkg.cfg")
) -> list[str]:
    """The host's dpkg path-exclude/path-include lines (they would drop files from a native unpack)."""
    found = []
    for f in sorted(cfg_dir.glob("*")) + [cfg]:
        if f.is_file():
            found += [f"{f}: {m.group(0).strip()}" for m in _FILTERS.finditer(f.read_text(errors="replace"))]
    return found


def choose_method(
    *, foreign: bool, dpkg: str | None, filters: list[str], forced: str | None = None
) -> tuple[str, str]:
    """(method, why): split for a foreign architecture on a host whose dpkg unpacks everything.

    `forced` is RVPORT_BOOTSTRAP: `debootstrap` always works; `split` only where it applies."""
    if forced == CLASSIC:
        return CLASSIC, f"RVPORT_BOOTSTRAP={forced}"
    if forced not in (None, "", SPLIT):
        raise UsageError(
            f"RVPORT_BOOTSTRAP={forced!r} is not a bootstrap method",
            hint=f"set it to {CLASSIC} or {SPLIT}, or unset it to let rvport choose",
        )
    if not foreign:
        return CLASSIC, "native architecture: debootstrap runs without emulation"
    if dpkg is None:
        return CLASSIC, "the host has no dpkg to unpack natively"
    if filters:
        return CLASSIC, f"the host's dpkg filters what it unpacks ({filters[0]})"
    return SPLIT, (
        "RVPORT_BOOTSTRAP=split: " if forced else ""
    ) + "unpacked natively, configured under emulation"


def key_part(method: str) -> dict:
    """What the method adds to the base key: nothing for the classic method (keys of existing bases stay)."""
    return {} if method == CLASSIC else {"bootstrap": f"{method}-{SPLIT_FORMAT}"}


def debootstrap_argv(
    req: Request, rootfs: Path, *, foreign: bool = False, print_debs: bool = False
) -> list[str]:
    cmd = [
        "debootstrap",
        f"--arch={req.arch}",
        f"--variant={req.variant}",
        f"--components={','.join(req.components)}",
        f"--include={','.join(req.packages)}",
    ]
    if foreign:
        cmd.append("--foreign")
    if print_debs:
        cmd.append("--print-debs")
    cmd += [req.suite, str(rootfs)]
    if req.mirror:
        cmd.append(req.mirror)
    return cmd


def package_order(rootfs: Path) -> list[tuple[str, Path]]:
    """(package, .deb in the rootfs) in debootstrap's order: required, then base; from the first stage's
    lists."""
    d = rootfs / "debootstrap"
    required = (d / "required").read_text().split()
    base = (d / "base").read_text().split()
    paths = dict(line.split(None, 1) for line in (d / "debpaths").read_text().splitlines() if line.strip())
    order = required + [p for p in base if p not in required]
    missing = [p for p in order if p not in paths]
    if missing:
        raise HostNotReady(
            f"debootstrap's first stage named packages it did not download: {', '.join(missing[:5])}",
            hint="run again; if it persists, the mirror may be mid-update",
        )
    return [(p, rootfs / paths[p].strip().lstrip("/")) for p in order]


def native_unpack_argv(rootfs: Path, debs: list[Path]) -> list[str]:
    return [
        "dpkg",
        f"--root={rootfs}",
        "--force-architecture",
        "--force-depends",
        "--force-unsafe-io",
        "--force-overwrite",
        "--force-confold",
        "--unpack",
        *map(str, debs),
    ]


def configure_argv(rootfs: Path) -> list[str]:
    return ["chroot", str(rootfs), "dpkg", "--force-confold", "--force-configure-any", "--configure", "-a"]


class Counter:
    """Turns dpkg's `Unpacking X (` / `Setting up X (` lines into `bootstrap: <phase> N/M X` lines and the
    Phase events they stand for; dpkg's other lines pass as they are, read by PHASES."""

    def __init__(
        self,
        phase: str,
        pattern: re.Pattern[str],
        total: int,
        on_line: Callable[[str], None],
        on_phase: OnPhase = events.ignore,
    ):
        self.phase, self.pattern, self.total, self.on_line, self.n = phase, pattern, total, on_line, 0
        self.on_phase, self.others = on_phase, events.PhaseReader(PHASES, on_phase)

    def __call__(self, line: str) -> None:
        m = self.pattern.match(line)
        if m is None:
            self.on_line(line)
            self.others(line)
            return
        self.n += 1
        done = min(self.n, self.total)
        self.on_line(f"bootstrap: {self.phase} {done}/{self.total} {m.group(1)}")
        self.on_phase(Phase(phase=self.phase, done=done, total=self.total, what=m.group(1)))


def _stream(
    cmd: list[str],
    *,
    on_line: Callable[[str], None],
    log_path: Path | None,
    what: str,
    env: dict | None = None,
) -> None:
    rc = proc.stream(cmd, on_line=on_line, log_path=log_path, env=env)
    if rc != 0:
        raise HostNotReady(
            f"{what} failed ({proc.describe_status(rc)})",
            hint="under emulation the riscv64 binfmt handler must be registered with the F flag "
            "(rvport doctor)",
        )


def mounts_under(path: Path, mounts: Path = Path("/proc/self/mounts")) -> list[str]:
    """Mount points at or below `path`, deepest first."""
    root = str(path.resolve())
    out = []
    for line in mounts.read_text().splitlines():
        parts = line.split()
        if len(parts) > 1:
            point = parts[1].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                out.append(point)
    return sorted(out, key=len, reverse=True)


def unmount_all(path: Path) -> None:
    """Unmount whatever is mounted below `path` (before it is removed: never delete through a mount)."""
    for point in mounts_under(path):
        proc.run(["umount", "--lazy", point], check=False, capture=True)
    left = mounts_under(path)
    if left:
        raise HostNotReady(
            f"cannot unmount {left[0]}; not removing {path}", hint=f"umount it by hand, then rm -rf {path}"
        )


def remove_tree(path: Path) -> None:
    """rm -rf that first makes sure nothing is mounted inside."""
    if path.exists():
        unmount_all(path)
        shutil.rmtree(path, ignore_errors=True)


def make_rootfs(
    req: Request,
    rootfs: Path,
    *,
    method: str,
    log_path: Path | None,
    on_line: Callable[[str], None],
    on_phase: OnPhase = events.ignore,
    fetch_ahead: bool = True,
) -> None:
    """Bootstrap `rootfs` (which must not exist) by `method`; raises HostNotReady on failure (the caller
    removes the rootfs: remove_tree). fetch_ahead: debootstrap's packages fetched side by side (debprefetch);
    the split
    method always does, the classic one where asked (not for the classic method run as the reference)."""
    if proc.which("debootstrap") is None:
        raise HostNotReady(
            "debootstrap is needed to make the base image (no registry is used)",
            hint="apt-get install debootstrap (scripts/setup-host does it), or name a base "
            "image by digest with --base-image",
        )
    if method == CLASSIC:
        with _prefetch(req, rootfs, on_line, on_phase, fetch_ahead):
            _stream(
                debootstrap_argv(req, rootfs),
                on_line=events.reading(PHASES, on_line, on_phase),
                log_path=log_path,
                what=f"debootstrap for {req.arch}",
            )
        return
    on_line("bootstrap: first stage: resolving, retrieving and extracting natively")
    on_phase(Phase(phase="first stage"))
    with _prefetch(req, rootfs, on_line, on_phase, True):
        _stream(
            debootstrap_argv(req, rootfs, foreign=True),
            on_line=events.reading(PHASES, on_line, on_phase),
            log_path=log_path,
            what=f"debootstrap's first stage for {req.arch}",
        )
    second_stage(rootfs, log_path=log_path, on_line=on_line, on_phase=on_phase)


@contextlib.contextmanager
def _prefetch(
    req: Request, rootfs: Path, on_line: Callable[[str], None], on_phase: OnPhase, wanted: bool
) -> Iterator[None]:
    """debootstrap's packages fetched side by side while the block runs (debprefetch), where wanted and the
    mirror is known; then a line says how many."""
    if not (wanted and req.mirror):
        yield
        return
    scratch = rootfs.with_name(rootfs.name + ".print-debs")
    with debprefetch.Prefetch(
        debootstrap_argv(req, scratch, print_debs=True),
        rootfs,
        req.mirror,
        on_line=on_line,
        on_phase=on_phase,
    ) as ahead:
        yield
    on_line(
        f"bootstrap: {ahead.fetched} packages were fetched side by side"
        + (f" ({ahead.why_not})" if ahead.why_not else "")
    )


def second_stage(
    rootfs: Path, *, log_path: Path | None, on_line: Callable[[str], None], on_phase: OnPhase = events.ignore
) -> None:
    """Native unpack, emulated configure (see the module's docstring)."""
    order = package_order(rootfs)
    total = len(order)
    env = {**os.environ, **SCRIPT_ENV}
    own_log = open(rootfs / "debootstrap" / "debootstrap.log", "a", encoding="utf-8")

    def tee(forward: Callable[[str], None]) -> Callable[[str], None]:
        def each(line: str) -> None:
            own_log.write(line + "\n")
            forward(line)

        return each

    try:
        _mount_proc(rootfs, env)
        on_line("bootstrap: linker cache...")
        on_phase(Phase(phase="linker cache"))
        _stream(
            ["chroot", str(rootfs), "/sbin/ldconfig"],
            on_line=on_line,
            log_path=log_path,
            what="ldconfig in the new rootfs",
            env=env,
        )
        # debootstrap's order: the required packages, then `available` and the selections, then the base
        # packages (dpkg records the archive's priority and section for the first, the .deb's for the others)
        required = set((rootfs / "debootstrap" / "required").read_text().split())
        counter = tee(Counter("unpacking", _UNPACKING, total, on_line, on_phase))
        on_line(f"bootstrap: unpacking 0/{total} (natively)")
        on_phase(Phase(phase="unpacking", done=0, total=total))
        _stream(
            native_unpack_argv(rootfs, [deb for p, deb in order if p in required]),
            on_line=counter,
            log_path=log_path,
            what="unpacking the required packages with the host's dpkg",
            env=env,
        )
        _restore_arch_file(rootfs)
        _write_available(rootfs, [p for p, _ in order])
        _set_selections(rootfs, [p for p, _ in order], env)
        base = [deb for p, deb in order if p not in required]
        if base:
            _stream(
                native_unpack_argv(rootfs, base),
                on_line=counter,
                log_path=log_path,
                what="unpacking the base packages with the host's dpkg",
                env=env,
            )
        _restore_arch_file(rootfs)
        _dselect_method(rootfs)
        deferred = {program: Deferred(rootfs, program) for program in DEFERRED}
        deferred |= {module: DeferredModule(rootfs, module) for module in py_compile_modules(rootfs)}
        run = partial(_run_in_rootfs, rootfs, log_path=log_path, on_line=tee(on_line), env=env)
        early = EarlyWork(rootfs, deferred, run, run_bytecode=partial(run, nice=True))
        try:
            with _no_daemons(rootfs), contextlib.ExitStack() as stack:
                for d in deferred.values():
                    stack.enter_context(d)
                stack.enter_context(early)
                on_line(
                    f"bootstrap: configuring 0/{total} (emulated; bytecode and certificates made on the way)"
                )
                on_phase(Phase(phase="configuring", done=0, total=total))
                _stream(
                    configure_argv(rootfs),
                    on_line=tee(Counter("configuring", _SETTING_UP, total, on_line, on_phase)),
                    log_path=log_path,
                    what="configuring the packages (emulated dpkg)",
                    env=env,
                )
            _run_deferred(
                rootfs,
                {p: d.calls() for p, d in deferred.items()},
                early=early,
                run=run,
                on_line=tee(on_line),
                on_phase=on_phase,
            )
        finally:
            early.join()
    finally:
        own_log.close()
        unmount_all(rootfs)
    _finish(rootfs)


class Deferred:
    """While dpkg configures, a program the maintainer scripts call is a recorder: each call's arguments are
    written down instead of run, and the real program, back in place whatever happens, runs once afterwards
    for all of them. Used where repeating the call under emulation costs minutes and running it once later
    gives the same files (DEFERRED): py3compile (two emulated Python interpreters per python3-* package) and
    update-ca-certificates (ca-certificates' postinst, then its trigger: a few processes per certificate); and
    the standard library's py_compile module (DeferredModule)."""

    RECORDER = "deferred-recorder.sh"  # resources/scripts

    def __init__(self, rootfs: Path, program: str):
        self.rootfs = rootfs
        self.path = rootfs / program.lstrip("/")
        self.real = self.path.with_name(self.path.name + ".rvport-real")
        self.record_name = f"var/lib/rvport-{program.strip('/').replace('/', '_')}.calls"
        self.record = rootfs / self.record_name

    def recorder(self) -> str:
        """The recorder's text (resources/scripts: for a program a shell script; one line per call: "call",
        then each argument, each followed by a tab), with the record's path written in."""
        return resources.script(self.RECORDER).replace(RECORD_PLACEHOLDER, f"/{self.record_name}")

    def __enter__(self) -> Deferred:
        if self.path.is_file() and not self.path.is_symlink():
            os.replace(self.path, self.real)
            self.path.write_text(self.recorder())
            self.path.chmod(0o755)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.real.exists():
            os.replace(self.real, self.path)

    def recorded(self) -> list[list[str]]:
        """The calls recorded so far: the record's complete lines (a recorder may be half way through one)."""
        if not self.record.is_file():
            return []
        text = self.record.read_text()
        lines = text[: text.rfind("\n") + 1].split("\n")
        return [line.split("\t")[1:-1] for line in lines if line.startswith("call\t")]

    def calls(self) -> list[list[str]]:
        """Every call recorded (once dpkg has ended); the record goes."""
        calls = self.recorded()
        self.record.unlink(missing_ok=True)
        return calls


class DeferredModule(Deferred):
    """A Python module run as a script (`python3.13 -E -S /usr/lib/python3.13/py_compile.py FILE...`, as
    python3.13-minimal's and python3.13's postinsts compile the standard library), deferred the same way: run
    as a script by its path, with file names for arguments, the recorder writes down the whole command line
    (sys.orig_argv: interpreter, options, module, files); imported, or run otherwise (`-m py_compile -`, as
    py3compile does, reading names from its input), it is the real module."""

    RECORDER = "py-compile-recorder.py"

    def _pycs(self) -> set[Path]:
        return set((self.path.parent / "__pycache__").glob(f"{self.path.stem}.*.pyc"))

    def __enter__(self) -> Deferred:
        self.pycs_before = self._pycs()
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        for pyc in self._pycs() - self.pycs_before:  # the recorder's, compiled when it was imported
            pyc.unlink()
        super().__exit__(*exc)


def py_compile_modules(rootfs: Path) -> list[str]:
    """The py_compile module of each Python 3.10 or later in the rootfs (sys.orig_argv is 3.10's)."""
    found = []
    for p in rootfs.glob("usr/lib/python3.*/py_compile.py"):
        m = re.fullmatch(r"python3\.(\d+)", p.parent.name)
        if m and int(m.group(1)) >= 10 and p.is_file() and not p.is_symlink():
            found.append(f"/{p.relative_to(rootfs)}")
    return sorted(found)


PY3COMPILE = "/usr/bin/py3compile"
UPDATE_CA = "/usr/sbin/update-ca-certificates"
DEFERRED = (PY3COMPILE, UPDATE_CA)


def update_ca_batch(calls: list[list[str]]) -> list[list[str]]:
    """The update-ca-certificates runs that stand for the recorded calls: one, with --fresh when any call had
    it and with its hooks (ca-certificates' postinst skips them, `--hooksdir ""`, and leaves them to its
    trigger's plain call); calls with any other option are run as they were."""
    if not calls:
        return []
    known = [
        c
        for c in calls
        if all(a == "--fresh" for a in c if a not in ("--hooksdir", ""))
        and (c.count("--hooksdir") == 0 or c[c.index("--hooksdir") + 1 : c.index("--hooksdir") + 2] == [""])
    ]
    others = [c for c in calls if c not in known]
    batch = [["--fresh"] if any("--fresh" in c for c in known) else []] if known else []
    return batch + others


_PUBLIC_DIR = re.compile(r"^/usr/lib/python(\d(?:\.\d+)?)/(?:site|dist)-packages/")


def py3compile_batch(rootfs: Path, calls: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """(the .py files the recorded `py3compile -p PKG [DIR...]` calls would compile, the calls of any other
    form, to be run as they were). As py3compile selects them: the package's files (dpkg's list) ending in
    .py, under the given directories, or without any, in the public dist-packages of an installed Python."""
    versions = {"3"} | {
        p.name[len("python") :]
        for p in (rootfs / "usr/bin").glob("python3.*")
        if re.fullmatch(r"python3\.\d+", p.name)
    }
    files: list[str] = []
    others: list[list[str]] = []
    info = rootfs / "var/lib/dpkg/info"
    for argv in calls:
        if len(argv) < 2 or argv[0] != "-p" or not all(a.startswith("/") for a in argv[2:]):
            others.append(argv)
            continue
        lists = [info / f"{argv[1]}.list", *sorted(info.glob(f"{argv[1]}:*.list"))]
        found = next((ln for ln in lists if ln.is_file()), None)
        if found is None:
            others.append(argv)
            continue
        py = [ln for ln in found.read_text().splitlines() if ln.endswith(".py")]
        dirs = argv[2:]
        if dirs:
            chosen = [f for f in py if any(f.startswith(d) for d in dirs)]
        else:
            chosen = [f for f in py if (m := _PUBLIC_DIR.match(f)) and m.group(1) in versions]
        files += [f for f in chosen if (rootfs / f.lstrip("/")).is_file()]
    return list(dict.fromkeys(files)), others


def split_by_directory(files: list[str], parts: int) -> list[list[str]]:
    """`files` in up to `parts` lists of about the same length, every directory's files in one list (two
    py3compile runs never make the same __pycache__ directory), each list in the files' order."""
    by_dir: dict[str, list[str]] = {}
    for f in files:
        by_dir.setdefault(f.rpartition("/")[0], []).append(f)
    out: list[list[str]] = [[] for _ in range(max(1, parts))]
    for group in sorted(by_dir.values(), key=len, reverse=True):
        min(out, key=len).extend(group)
    order = {f: i for i, f in enumerate(files)}
    return [sorted(o, key=order.__getitem__) for o in out if o]


_PY_OPTIONS = {"-E", "-S", "-s", "-I", "-O", "-OO", "-B"}


def py_compile_batch(
    module: str, calls: list[list[str]]
) -> tuple[dict[tuple[str, ...], list[str]], list[list[str]]]:
    """({(interpreter, *options, module): files}, calls of any other form, to be run as they were): the
    recorded `INTERPRETER [-E -S -O ...] MODULE FILE...` calls of the py_compile module `module`, their files
    gathered (once each) by interpreter and options."""
    groups: dict[tuple[str, ...], list[str]] = {}
    others: list[list[str]] = []
    for argv in calls:
        i = argv.index(module, 1) if module in argv[1:] else 0
        files = argv[i + 1 :]
        if i and all(o in _PY_OPTIONS for o in argv[1:i]) and files and all(f.startswith("/") for f in files):
            groups.setdefault(tuple(argv[: i + 1]), []).extend(files)
        else:
            others.append(argv)
    return {head: list(dict.fromkeys(files)) for head, files in groups.items()}, others


def bytecode_runs(jobs: dict[tuple[str, ...], list[str]], parts: int) -> list[list[list[str]]]:
    """The runs that compile `jobs` ({command: files}, each command run as `*command, *files`), in up to
    `parts` independent lists of argvs: every directory's files in one list (split_by_directory), a command's
    files in
    the files' order, at most 2000 files an argv."""
    runs = []
    for part in split_by_directory([f for files in jobs.values() for f in files], parts):
        chosen = set(part)
        argvs = []
        for head, files in jobs.items():
            mine = [f for f in files if f in chosen]
            argvs += [[*head, *mine[j : j + 2000]] for j in range(0, len(mine), 2000)]
        runs.append(argvs)
    return runs


Job = tuple[tuple[str, ...], str]  # (command, file): the command compiles the file, run as `*command, file`


def bytecode_jobs(
    rootfs: Path, calls: dict[str, list[list[str]]]
) -> tuple[dict[tuple[str, ...], list[str]], list[list[str]]]:
    """({command: files}, argvs of any other form, to be run as they were): the recorded py3compile calls
    (py3compile_batch) and the standard library's py_compile calls (py_compile_batch, every key of `calls`
    that
    is not a DEFERRED program is a py_compile module)."""
    files, others = py3compile_batch(rootfs, calls.get(PY3COMPILE, []))
    jobs: dict[tuple[str, ...], list[str]] = {(PY3COMPILE,): files} if files else {}
    after = [[PY3COMPILE, *argv] for argv in others]
    for module in sorted(m for m in calls if m not in DEFERRED):
        groups, rest = py_compile_batch(module, calls[module])
        jobs |= groups
        after += rest
    return jobs, after


def certificate_runs(calls: list[list[str]]) -> list[list[str]]:
    """The update-ca-certificates runs that stand for the recorded calls (update_ca_batch)."""
    return [[UPDATE_CA, *argv] for argv in update_ca_batch(calls)]


def deferred_runs(
    rootfs: Path,
    calls: dict[str, list[list[str]]],
    parts: int = parallel.WORKERS,
    done: set[Job] | frozenset[Job] = frozenset(),
    certificates: bool = True,
) -> tuple[list[tuple[str, list[list[str]]]], list[list[str]]]:
    """The deferred programs' runs: (independent tasks, each (what, argvs run one after another in the
    rootfs), argvs to run after them all). update-ca-certificates once (certificate_runs), unless
    `certificates` is False (EarlyWork made them); the bytecode (bytecode_jobs) but the jobs `done` already
    (EarlyWork), its files split by directory into `parts` runs; calls of any other form afterwards, as they
    were (they may write where the batches do)."""
    tasks: list[tuple[str, list[list[str]]]] = []
    ca = certificate_runs(calls.get(UPDATE_CA, []))
    if ca and certificates:
        tasks.append(("certificates", ca))
    jobs, after = bytecode_jobs(rootfs, calls)
    left = {head: [f for f in files if (head, f) not in done] for head, files in jobs.items()}
    for i, argvs in enumerate(bytecode_runs({h: f for h, f in left.items() if f}, parts)):
        tasks.append((f"python bytecode {i + 1}", argvs))
    return tasks, after


# what update-ca-certificates reads: its configuration, the certificates, the hooks it runs
CA_INPUTS = (
    "etc/ca-certificates.conf",
    "usr/share/ca-certificates",
    "usr/local/share/ca-certificates",
    "etc/ca-certificates/update.d",
)
CA_HOOKS = "etc/ca-certificates/update.d"


def ca_inputs(rootfs: Path) -> tuple:
    """Every path update-ca-certificates reads (CA_INPUTS, recursively), with its type, size, mtime and
    link."""
    out: list[tuple] = []
    for rel in CA_INPUTS:
        top = rootfs / rel
        for p in [top, *(sorted(top.rglob("*")) if top.is_dir() and not top.is_symlink() else [])]:
            try:
                st = p.lstat()
            except FileNotFoundError:
                out.append((rel, None))
                continue
            out.append(
                (
                    str(p.relative_to(rootfs)),
                    st.st_mode,
                    st.st_size,
                    st.st_mtime_ns,
                    os.readlink(p) if p.is_symlink() else None,
                )
            )
    return tuple(out)


class EarlyWork:
    """While dpkg configures under emulation (one core), deferred work is done with the real programs (the
    recorders are in place meanwhile), every `poll` seconds from the records' complete lines. Every package is
    unpacked before dpkg configures, so what a call reads is there. Two threads:

    - bytecode (`run_bytecode`: at a lower priority, so that dpkg and the certificates, the chains the end
    waits
      for, go first): the jobs of the calls recorded so far that are not done yet, one batch at a time. A
      deferred module's own source is the recorder then, so it is left for afterwards, as is a batch that
      failed: `done` holds the jobs whose run succeeded, and only those are left out of the deferred runs.
      Leaving the block waits for its batch.
    - certificates, the longest single chain, started as soon as ca-certificates' postinst has recorded its
      call (the batch update_ca_batch makes of it), when no hook is installed (a hook's package may not be
      configured yet). Leaving the block does not wait for it: the bytecode left runs meanwhile, and `join()`
      waits. It counts as done (`certificates_done()`) only when the batch of every call recorded by the end
      is the same and nothing update-ca-certificates reads has changed since it started (ca_inputs); else the
      certificates are made again afterwards.
    """

    def __init__(
        self,
        rootfs: Path,
        deferred: dict[str, Deferred],
        run: Callable[[list[list[str]]], None],
        poll: float = 1.0,
        run_bytecode: Callable[[list[list[str]]], None] | None = None,
    ):
        self.rootfs, self.deferred, self.run, self.poll = rootfs, deferred, run, poll
        self.run_bytecode = run_bytecode or run
        self.done: set[Job] = set()
        self.failed: list[RvportError] = []
        self.certificates_started = False  # final once the block is left
        self._certificates: tuple[list[list[str]], tuple] | None = None  # (batch run, its inputs then)
        self._stop = threading.Event()
        self._gate = threading.Lock()  # the certificates start before the block is left, or never
        self._threads = [
            threading.Thread(target=self._bytecode_loop, name="early-bytecode", daemon=True),
            threading.Thread(target=self._certificates_loop, name="early-certificates", daemon=True),
        ]

    def __enter__(self) -> EarlyWork:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        with self._gate:
            self._stop.set()
        self._threads[0].join()
        if exc_type is not None:
            self.join()

    def join(self) -> None:
        """Wait for the certificates too (before anything else touches the rootfs, and before it is
        removed)."""
        self._stop.set()
        for t in self._threads:
            if t.ident is not None:  # started
                t.join()

    def certificates_done(self, calls: list[list[str]]) -> list[list[str]] | None:
        """The batch made early, if it stands for `calls` (all recorded by the end) and its inputs are the
        same
        (after join())."""
        if self._certificates is None:
            return None
        batch, inputs = self._certificates
        return batch if update_ca_batch(calls) == batch and ca_inputs(self.rootfs) == inputs else None

    def _real(self, head: tuple[str, ...]) -> tuple[str, ...]:
        """The command with its deferred program or module replaced by the real one."""
        return tuple(
            f"/{self.deferred[a].real.relative_to(self.rootfs)}" if a in self.deferred else a for a in head
        )

    def _certificates_loop(self) -> None:
        if UPDATE_CA not in self.deferred:
            return
        while not self._stop.wait(self.poll):
            calls = self.deferred[UPDATE_CA].recorded()
            if calls:
                self._make_certificates(calls)
                return

    def _make_certificates(self, calls: list[list[str]]) -> None:
        batch = update_ca_batch(calls)
        hooks = self.rootfs / CA_HOOKS
        if len(batch) != 1 or (hooks.is_dir() and any(hooks.iterdir())):
            return
        with self._gate:
            if self._stop.is_set():
                return
            self.certificates_started = True
        inputs = ca_inputs(self.rootfs)
        try:
            self.run([[*self._real((UPDATE_CA,)), *batch[0]]])
        except RvportError as e:  # made again afterwards, where it fails again if it must
            self.failed.append(e)
            return
        self._certificates = (batch, inputs)

    def _bytecode_loop(self) -> None:
        programs = [p for p in self.deferred if p != UPDATE_CA]
        while not self._stop.wait(self.poll):
            jobs, _ = bytecode_jobs(self.rootfs, {p: self.deferred[p].recorded() for p in programs})
            todo = {
                head: [f for f in files if (head, f) not in self.done and f not in self.deferred]
                for head, files in jobs.items()
            }
            todo = {head: files for head, files in todo.items() if files}
            if not todo:
                continue
            try:
                for argvs in bytecode_runs({self._real(head): files for head, files in todo.items()}, 1):
                    self.run_bytecode(argvs)
            except RvportError as e:  # left for afterwards, where it fails again if it must
                self.failed.append(e)
                continue
            self.done |= {(head, f) for head, files in todo.items() for f in files}


def _run_in_rootfs(
    rootfs: Path,
    argvs: list[list[str]],
    *,
    log_path: Path | None,
    on_line: Callable[[str], None],
    env: dict,
    nice: bool = False,
) -> None:
    """Each argv in turn, chrooted into the rootfs (emulated); nice: at a lower priority (`nice -n 10`)."""
    for argv in argvs:
        _stream(
            [*(["nice", "-n", "10"] if nice else []), "chroot", str(rootfs), *argv],
            on_line=on_line,
            log_path=log_path,
            what=f"{Path(argv[0]).name} in the new rootfs",
            env=env,
        )


def _run_deferred(
    rootfs: Path,
    calls: dict[str, list[list[str]]],
    *,
    early: EarlyWork,
    run: Callable[[list[list[str]]], None],
    on_line: Callable[[str], None],
    on_phase: OnPhase = events.ignore,
) -> None:
    """The deferred programs, once, but what EarlyWork did; their runs side by side (each an emulated process
    chain of its own, so two cores take them at once), while EarlyWork's certificates, if started, go on; the
    certificates again if those do not stand (EarlyWork.certificates_done); the first failure is raised once
    all have ended."""
    tasks, after = deferred_runs(rootfs, calls, done=early.done, certificates=not early.certificates_started)
    if tasks:
        on_line(f"bootstrap: deferred work side by side: {', '.join(w for w, _ in tasks)} (emulated)...")
        on_phase(Phase(phase="deferred work side by side", what=", ".join(w for w, _ in tasks)))
        results = parallel.run([(what, partial(run, argvs)) for what, argvs in tasks])
        failed = next((r for r in results.values() if isinstance(r, RvportError)), None)
        if failed is not None:
            raise failed
    early.join()
    if early.certificates_started and early.certificates_done(calls.get(UPDATE_CA, [])) is None:
        on_line("bootstrap: the certificates made while dpkg configured do not stand: made again")
        on_phase(Phase(phase="making the certificates again"))
        run(certificate_runs(calls.get(UPDATE_CA, [])))
    run(after)


def _mount_proc(rootfs: Path, env: dict) -> None:
    """/proc in the rootfs, as debootstrap's second stage mounts it: a real directory (the first stage may
    leave
    a symlink to the host's /proc, which must never be mounted over), mounted from inside the chroot."""
    target = rootfs / "proc"
    if target.is_symlink() or not target.is_dir():
        target.unlink(missing_ok=True)
        target.mkdir()
    proc.run(["chroot", str(rootfs), "mount", "-t", "proc", "proc", "/proc"], capture=True, env=env)
    if str(target.resolve()) not in mounts_under(rootfs):
        raise HostNotReady(
            f"/proc was not mounted at {target}", hint="run rvport as root (it chroots into the rootfs)"
        )


def _restore_arch_file(rootfs: Path) -> None:
    """The host's dpkg records its own architecture list; the rootfs's dpkg has no foreign architecture."""
    (rootfs / "var/lib/dpkg/arch").unlink(missing_ok=True)


def _write_available(rootfs: Path, packages: list[str]) -> None:
    """var/lib/dpkg/available as debootstrap writes it: every Packages stanza of every installed package (all
    of a package's versions when the archive lists several: dpkg takes the priority from the last one)."""
    wanted = set(packages)
    out: list[str] = []
    for f in sorted((rootfs / "var/lib/apt/lists").glob("*_Packages")):
        for stanza in f.read_text(errors="replace").split("\n\n"):
            m = re.match(r"Package: (\S+)", stanza)
            if m and m.group(1) in wanted:
                out.append(stanza.strip("\n") + "\n")
    (rootfs / "var/lib/dpkg/available").write_text("\n".join(out) + ("\n" if out else ""))


def _set_selections(rootfs: Path, packages: list[str], env: dict) -> None:
    """Every package selected for install, as debootstrap does after writing `available`: this dpkg run reads
    `available` and so records the archive's priority of a package whose .deb names another one."""
    proc.run(
        ["chroot", str(rootfs), "dpkg", "--set-selections"],
        input="".join(f"{p} install\n" for p in packages),
        env=env,
        capture=True,
    )


def _dselect_method(rootfs: Path) -> None:
    p = rootfs / "var/lib/dpkg/cmethopt"
    p.write_text("apt apt\n")
    p.chmod(0o644)


class _no_daemons:
    """policy-rc.d refusing, and a fake start-stop-daemon, while maintainer scripts run (as debootstrap)."""

    def __init__(self, rootfs: Path):
        self.policy = rootfs / "usr/sbin/policy-rc.d"
        self.ssd = rootfs / "sbin/start-stop-daemon"
        self.real = rootfs / "sbin/start-stop-daemon.REAL"

    def __enter__(self) -> None:
        self.policy.write_text(resources.script("policy-rc.d.sh"))
        self.policy.chmod(0o755)
        if self.ssd.exists():
            os.replace(self.ssd, self.real)
            self.ssd.write_text(resources.script("start-stop-daemon.sh"))
            self.ssd.chmod(0o755)

    def __exit__(self, *exc: object) -> None:
        if self.real.exists():
            os.replace(self.real, self.ssd)
        self.policy.unlink(missing_ok=True)


def _finish(rootfs: Path) -> None:
    """debootstrap's last steps: its log (first stage and the second stage's dpkg output) becomes
    /var/log/bootstrap.log, /debootstrap goes."""
    own = rootfs / "debootstrap" / "debootstrap.log"
    if own.is_file():
        os.replace(own, rootfs / "var/log/bootstrap.log")
    shutil.rmtree(rootfs / "debootstrap", ignore_errors=True)
