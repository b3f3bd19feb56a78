"""Where rvport writes (--output, --json, --junit, --summary, --to, --cache-to): checked before any work
starts, so that a path that is a file, cannot be written, or lies in /proc fails at once with
`cannot write PATH: why` (exit 2) instead of an internal error after the work is done. An output directory
that rvport replaces or writes into (plan, build, prepare, reproduce, wheelhouse, serve-check) follows
rvport.outdir's rule: only a directory rvport wrote itself; a lock's --output only a lock rvport wrote."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rvport import outdir
from rvport.errors import UsageError
from rvport.fileio import atomic_write_text
from rvport.outdir import Kind
from rvport.safetext import one_line

__all__ = [
    "Kind",
    "cannot_write",
    "check_dir",
    "check_file",
    "check_lock_file",
    "check_output",
    "is_stdout",
    "one_stdout",
    "write_text",
]

HINT = "choose a path in a directory you can write to"


def _cannot(path: Path, why: str) -> UsageError:
    return UsageError(f"cannot write {one_line(path)}: {why}", hint=HINT)


@contextlib.contextmanager
def cannot_write(path: Path) -> Iterator[None]:
    """Turn an OSError while writing path into `cannot write PATH: why` (exit 2)."""
    try:
        yield
    except OSError as e:
        raise _cannot(path, e.strerror or str(e)) from e


def _probe(directory: Path, target: Path) -> None:
    """Can a file be created in directory? An unnamed temporary file, gone when closed, tells."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise _cannot(target, e.strerror or str(e)) from e


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of path that exists (what rvport would create path's missing parents in)."""
    p = path.absolute().parent
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _mode(path: Path) -> int | None:
    """st_mode of path (symlinks followed), None when nothing is there."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise _cannot(path, "a part of it is a file, not a directory") from None
    except OSError as e:
        raise _cannot(path, e.strerror or str(e)) from e


def _check_missing(path: Path) -> None:
    ancestor = _existing_ancestor(path)
    if not ancestor.is_dir():
        raise _cannot(path, f"{one_line(ancestor)} is a file, not a directory")
    _probe(ancestor, path)


def check_dir(path: Path | None) -> None:
    """A directory rvport creates when needed and writes files into."""
    if path is None:
        return
    mode = _mode(path)
    if mode is None:
        return _check_missing(path)
    if not stat.S_ISDIR(mode):
        raise _cannot(path, f"it is {outdir.what_is(mode)}, not a directory")
    _probe(path, path)


STDOUT = "-"
STDOUT_PATH = Path(STDOUT)


def is_stdout(path: Path | None) -> bool:
    """`-` for a file means standard output, as for every Unix tool (a file named - is $PWD/-)."""
    return path is not None and str(path) == STDOUT


def one_stdout(**paths: Path | None) -> bool:
    """Whether some of the files a verb writes (by flag) is standard output; more than one is a usage error:
    their texts would be mixed in one stream."""
    named = [flag for flag, path in paths.items() if is_stdout(path)]
    if len(named) > 1:
        flags = " and ".join(f"--{f.replace('_', '-')} -" for f in named)
        raise UsageError(
            f"{flags} {'both' if len(named) == 2 else 'all'} ask for standard output",
            hint="write all but one to a file",
        )
    return bool(named)


def write_text(path: Path, text: str, *, append: bool = False) -> Path | None:
    """`text` into the file at `path`, whole (a temporary file, then a rename) or appended; `-` writes it to
    standard output instead. Returns the file written, None for standard output. An OSError is `cannot write
    PATH: why` (exit 2)."""
    if is_stdout(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    with cannot_write(path):
        if append:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
        else:
            atomic_write_text(path, text)
    return path


def check_file(path: Path | None, *, append: bool = False, make_parents: bool = True) -> None:
    """A file rvport writes whole (a temporary file beside it, then a rename), or appends to. make_parents:
    rvport creates its missing directories; else the directory must exist."""
    if path is None or is_stdout(path):
        return
    mode = _mode(path)
    if mode is None:
        parent = path.absolute().parent
        if not make_parents and not parent.is_dir():
            raise _cannot(path, f"no directory {one_line(path.parent)}")
        return _check_missing(path)
    if stat.S_ISDIR(mode):
        raise _cannot(path, "it is a directory")
    if not stat.S_ISREG(mode):
        raise _cannot(path, "not a regular file")
    if append:
        with cannot_write(path), open(path, "a", encoding="utf-8"):
            pass
    else:
        _probe(path.absolute().parent, path)


def check_output(path: Path | None, kind: Kind, *, flag: str = "--output") -> None:
    """An output directory of `kind` (rvport.outdir.check): missing, empty, or one rvport wrote."""
    if path is not None:
        outdir.check(path, kind, flag=flag)


def check_lock_file(path: Path) -> None:
    """`rvport lock --output FILE`: a file it may write (check_file) that, if it is there, is a lock rvport
    wrote (its kind, its schema, and a digest that is its content's); else exit 2, and the file is never
    shown."""
    check_file(path)
    if not os.path.lexists(path):
        return
    from rvport.catalogue.closure_lock import LockConflict, load_lock
    from rvport.errors import RvportError

    try:
        load_lock(path)
    except LockConflict:
        return  # rvport's lock, whose pins no longer hold together: made again, it is replaced
    except RvportError:
        raise UsageError(
            f"--output {one_line(path)}: it is not a closure lock rvport wrote (or it was changed since), so "
            "it is not replaced",
            hint="name a new file, or remove this one yourself if you mean to give it up",
        ) from None
