"""The one door for external programs (patch, tar, cargo, docker, ...).

`run()` logs the shell-quoted command at debug level, checks that the program exists, turns exit codes into
readable errors (127 -> "not found", negative -> the signal's name) and returns the completed process.
`stream()` hands a long command's output over line by line; `stop_streams()` stops every streamed program
still running, for the main thread to stop work on other threads (only it receives Ctrl-C).
`uninterruptible()` runs a block (making or removing what must not be left half-made) to its end although
Ctrl-C or SIGTERM arrive meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rvport.errors import BuildFailed, HostNotReady

log = logging.getLogger("rvport.proc")

# What to tell the user when a program is missing; anything else gets a generic hint.
_INSTALL_HINTS = {
    "patch": "install it: apt-get install patch",
    "git": "install it: apt-get install git",
    "tar": "install it: apt-get install tar",
    "cargo": "install a Rust toolchain (rustup, or apt-get install cargo) and put cargo on PATH",
    "docker": "install Docker Engine and the buildx plugin (docs/getting-started.md)",
    "pip": "install pip for this Python: python -m ensurepip",
}


class ProgramNotFound(HostNotReady):
    """The program to run is not installed (or not on PATH)."""

    def __init__(self, program: str, cmd: Sequence[str]):
        name = Path(program).name
        super().__init__(
            f"not found: {name} (needed to run: {shlex.join(cmd)})",
            hint=_INSTALL_HINTS.get(name, f"install {name}, or put it on PATH"),
        )
        self.program = program


class CommandFailed(BuildFailed):
    """A program ran and failed; carries its exit status and output for the caller to re-word."""

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        returncode: int | None,
        stdout: str = "",
        stderr: str = "",
        reason: str,
        hint: str | None = None,
    ):
        super().__init__(f"command failed ({reason}): {shlex.join(cmd)}", hint=hint)
        self.cmd = list(cmd)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.reason = reason


class TimedOut(CommandFailed):
    """A program ran longer than it was given and was stopped."""


def describe_status(returncode: int) -> str:
    """A readable line for an exit status: 'exit 2', 'killed by SIGKILL', 'not found (exit 127)'."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    if returncode == 127:
        return "not found (exit 127)"
    if returncode == 126:
        return "not executable (exit 126)"
    if returncode > 128 and returncode - 128 in {s.value for s in signal.Signals}:
        return f"exit {returncode} ({signal.Signals(returncode - 128).name})"
    return f"exit {returncode}"


def which(program: str, env: Mapping[str, str] | None = None) -> str | None:
    path = (env or os.environ).get("PATH", os.defpath)
    return shutil.which(program, path=path)


def run(
    cmd: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    capture: bool = False,
    timeout: float | None = None,
    input: str | None = None,
    new_session: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `cmd` (a list, never a shell string). Raises ProgramNotFound or, with check, CommandFailed.
    new_session: the program runs in a session of its own, so a Ctrl-C at the terminal (sent to the whole
    foreground process group) does not stop it half way; for what `uninterruptible()` guards."""
    cmd = [str(c) for c in cmd]
    if not cmd:
        raise ValueError("empty command")
    log.debug("$ %s%s", shlex.join(cmd), f"    (in {cwd})" if cwd else "")
    exe = cmd[0]
    if os.sep not in exe and which(exe, env) is None:
        raise ProgramNotFound(exe, cmd)
    try:
        cp = subprocess.run(
            cmd,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            text=True,
            capture_output=capture,
            timeout=timeout,
            input=input,
            check=False,
            start_new_session=new_session,
        )
    except FileNotFoundError as e:
        if cwd is not None and not Path(cwd).is_dir():
            raise CommandFailed(cmd, returncode=None, reason=f"working directory {cwd} does not exist") from e
        raise ProgramNotFound(exe, cmd) from e
    except PermissionError as e:
        raise CommandFailed(
            cmd,
            returncode=None,
            reason=f"cannot execute {exe}: {e.strerror}",
            hint=f"check the permissions of {exe}",
        ) from e
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise TimedOut(
            cmd,
            returncode=None,
            stdout=out,
            stderr=err,
            reason=f"timed out after {timeout:g}s",
            hint="raise the timeout, or look for a step waiting on the network or input",
        ) from e
    if cp.returncode != 0:
        log.debug("  -> %s", describe_status(cp.returncode))
        if check:
            hint = (
                "a program it runs is not installed: install it (the output names it)"
                if cp.returncode == 127
                else None
            )
            raise CommandFailed(
                cmd,
                returncode=cp.returncode,
                stdout=cp.stdout or "",
                stderr=cp.stderr or "",
                reason=describe_status(cp.returncode),
                hint=hint,
            )
    return cp


# The streamed programs running now (each in a session of its own, so a Ctrl-C at the terminal never reaches
# them): stop_streams() stops them all.
_streams: set[subprocess.Popen] = set()
_streams_lock = threading.Lock()
_stopping = threading.Event()


def stop_streams() -> None:
    """Stop every program `stream()` runs now, on any thread (SIGTERM to its process group, SIGKILL when it
    lingers): each of those `stream()` calls then returns the program's exit status (killed by SIGTERM), so
    the code around it fails and cleans up as after any failed program. Until `resume_streams()`, `stream()`
    starts no new program (CommandFailed): work on other threads ends at its next program."""
    _stopping.set()
    with _streams_lock:
        running = list(_streams)
    for p in running:
        _stop_group(p)


def resume_streams() -> None:
    """`stream()` starts programs again (after stop_streams(), once the threads that were stopped have
    ended)."""
    _stopping.clear()


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group of `proc` (a session of its own), SIGKILL when it lingers."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stream(
    cmd: Sequence[str],
    *,
    on_line,
    log_path: Path | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> int:
    """Run `cmd`, handing each output line (stdout and stderr merged) to `on_line` and to `log_path`.

    Returns the exit status. Ctrl-C (or any exception) terminates the whole process group before re-raising,
    so no child goes on writing after rvport stopped. timeout: seconds; then the process group is stopped the
    same way and TimedOut is raised (the lines until then were handed over).
    """
    cmd = [str(c) for c in cmd]
    log.debug("$ %s%s", shlex.join(cmd), f"    (in {cwd})" if cwd else "")
    if os.sep not in cmd[0] and which(cmd[0], env) is None:
        raise ProgramNotFound(cmd[0], cmd)
    if _stopping.is_set():
        raise CommandFailed(cmd, returncode=None, reason="not started: rvport is stopping")
    logf = open(log_path, "a", encoding="utf-8") if log_path else None
    try:
        if logf:
            logf.write(f"$ {shlex.join(cmd)}\n")
            logf.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=1,
            errors="replace",
            start_new_session=True,
        )
        with _streams_lock:
            _streams.add(proc)
            late = _stopping.is_set()  # stop_streams() ran between the check above and now
        if late:
            _stop_group(proc)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            _stop_group(proc)

        timer = threading.Timer(timeout, expire) if timeout is not None else None
        try:
            if timer is not None:
                timer.daemon = True
                timer.start()
            assert proc.stdout is not None
            for line in proc.stdout:
                if logf:
                    logf.write(line)
                on_line(line.rstrip("\n"))
            rc = proc.wait()
        except BaseException:
            _stop_group(proc)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            with _streams_lock:
                _streams.discard(proc)
        if expired.is_set():
            raise TimedOut(cmd, returncode=None, reason=f"timed out after {timeout:g}s")
        return rc
    finally:
        if logf:
            logf.close()


@contextlib.contextmanager
def uninterruptible() -> Iterator[None]:
    """Run the block to its end although Ctrl-C or SIGTERM arrive meanwhile; the interrupt is raised as
    KeyboardInterrupt when the block ends. For making and removing what must not be left half-made (a
    container, a network); the programs it runs need `new_session`, or a Ctrl-C at the terminal reaches them
    anyway. Only the main thread receives signals: elsewhere this is a plain block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def defer(signum: int, _frame: object) -> None:
        arrived.append(signum)

    # a signal ignored stays ignored; None: a handler not installed from Python, left alone
    old = {
        s: h
        for s in (signal.SIGINT, signal.SIGTERM)
        if (h := signal.getsignal(s)) is not None and h is not signal.SIG_IGN
    }
    for s in old:
        signal.signal(s, defer)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if arrived:
        raise KeyboardInterrupt(signal.Signals(arrived[0]).name)
