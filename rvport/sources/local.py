"""A local source tree under test (`--source-tree DIR`): a git checkout at any commit, dirty or not, or an
unpacked sdist. It is read, never written: named by its tree digest (rvport/sources/treehash.py) and, for a
checkout, its commit and whether it is dirty, then copied into the prepared tree under unpacking's checks.

Which files make the tree:
  * a git checkout (DIR is the top of a work tree): the files git lists as tracked or untracked and not
    ignored (`git ls-files --cached --others --exclude-standard`), those present; `.git` and ignored files
    (build outputs, a virtualenv) are no part of it. A clean checkout's digest is the tree digest of its
    commit (what a `git:` source pinned at that commit has);
  * any other directory: every file and link under it.
Links are entries (never followed) and must stay inside the tree, as in archives (`members.Layout`); the
unpack limits (`members.Limits`) bound the files and bytes; a device, FIFO or socket, or a submodule, is
refused.

Git runs through rvport.proc, read-only, with nothing in the checkout's configuration that could run a
program (no fsmonitor; only ls-files, ls-tree, rev-parse and cat-file, which run no filters): dirtiness is
found by comparing each file's git blob id, computed here, with the commit's tree, not by `git status` (which
may refresh the index and run a repository's clean filters).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name

from rvport import proc
from rvport.catalogue.model import GitState, LocalTree, Recipe, Source, SourceKind
from rvport.errors import IntegrityError, UsageError
from rvport.fileio import read_regular
from rvport.sources.member_checks import Budget, Layout, Limits, member_mode
from rvport.sources.treehash import Entry, digest

CHUNK = 1 << 16
GIT_TIMEOUT = 600
META_LIMIT = 4 << 20  # PKG-INFO, pyproject.toml, Cargo.toml: read up to this many bytes
REFUSED = "a source tree holds only files, directories and links that stay inside it"


@dataclass(frozen=True, kw_only=True)
class Member:
    """One entry of a local tree: its path ('/'-separated, relative), kind, and for a link its target."""

    path: str
    kind: str  # "f" or "l"
    target: str = ""


# ------------------------------------------------------------------------------------------ git, read-only


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    return env


def _git(top: Path, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    fixed = [
        "-c",
        f"safe.directory={top}",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.untrackedCache=false",
        "-c",
        "core.quotePath=false",
    ]
    try:
        return proc.run(
            ["git", *fixed, "-C", str(top), *args],
            env=_git_env(),
            capture=True,
            check=check,
            timeout=GIT_TIMEOUT,
        )
    except proc.CommandFailed as e:
        said = (e.stderr or "").strip().splitlines()[-4:]
        raise UsageError(
            f"--source-tree {top}: `git {' '.join(args)}` failed ({e.reason})" + (":" if said else ""),
            detail=["  " + ln for ln in said],
            hint="pass the top directory of a git checkout, or a directory that is no checkout (an unpacked "
            "sdist)",
        ) from e


def is_checkout(top: Path) -> bool:
    """A git work tree's top directory: it holds `.git` (a directory, or a worktree's file)."""
    return os.path.lexists(top / ".git")


def _split_z(text: str) -> list[str]:
    return [p for p in text.split("\0") if p]


def _git_members(top: Path) -> tuple[list[str], dict[str, tuple[str, str]], str | None, str]:
    """(the paths git lists, the commit's tree {path: (mode, object id)}, the commit, the object format)."""
    shown = _git(top, ["rev-parse", "--show-toplevel"]).stdout.strip()
    if Path(os.path.realpath(shown)) != Path(os.path.realpath(top)):
        raise UsageError(
            f"--source-tree {top}: not the top of its git checkout (that is {shown})",
            hint=f"pass {shown}, or a copy of the directory outside the checkout",
        )
    fmt = _git(top, ["rev-parse", "--show-object-format"], check=False).stdout.strip() or "sha1"
    listed = _split_z(_git(top, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout)
    head = _git(top, ["rev-parse", "--verify", "-q", "HEAD^{commit}"], check=False)
    commit = head.stdout.strip() if head.returncode == 0 and head.stdout.strip() else None
    tree: dict[str, tuple[str, str]] = {}
    if commit:
        for row in _split_z(_git(top, ["ls-tree", "-r", "-z", "--full-tree", commit]).stdout):
            meta, _, path = row.partition("\t")
            mode, kind, oid = meta.split(" ")
            if kind == "commit":
                raise UsageError(
                    f"--source-tree {top}: {path} is a git submodule, which a source tree cannot hold",
                    hint="build from a directory with the submodule's files copied in (not a checkout)",
                )
            tree[path] = (mode, oid)
    return list(dict.fromkeys(listed)), tree, commit, fmt


def _commit_time(top: Path, commit: str) -> int | None:
    """The committer time of `commit` (the epoch of every copy of a checkout)."""
    raw = _git(top, ["cat-file", "commit", commit]).stdout
    for line in raw.splitlines():
        if not line:
            break
        if line.startswith("committer "):
            with contextlib.suppress(ValueError, IndexError):
                return int(line.rsplit(" ", 2)[-2])
    return None


# ------------------------------------------------------------------------------------------ the members


def _refuse(top: Path, rel: str, why: str) -> IntegrityError:
    return IntegrityError(f"--source-tree {top}: {rel!r} {why}; nothing was copied", hint=REFUSED)


def _walk(top: Path) -> Iterator[str]:
    """Every file and link under `top` (directories are walked, links never followed), sorted per level."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        d = Path(dirpath)
        keep = []
        for name in dirnames:
            if (d / name).is_symlink():
                yield (d / name).relative_to(top).as_posix()
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            yield (d / name).relative_to(top).as_posix()


def members(top: Path, paths: list[str], limits: Limits) -> list[Member]:
    """The listed paths as checked members: files and links only, paths inside the tree, links that stay
    inside it (resolved as unpacking resolves them), within the unpack limits. A listed path that is gone
    (a file deleted in a checkout) is left out."""
    layout = Layout(f"--source-tree {top}", noun="entry", hint=REFUSED)
    budget = Budget(limits, f"--source-tree {top}", holder="the tree")
    out: list[Member] = []
    for raw in paths:
        rel = layout.path(raw)
        if not rel:
            continue
        try:
            st = os.lstat(top / rel)
        except FileNotFoundError:
            continue
        budget.member()
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(top / rel)
            layout.add(raw, rel, "l", target)
            out.append(Member(path=rel, kind="l", target=target))
        elif stat.S_ISREG(st.st_mode):
            budget.take(st.st_size)
            layout.add(raw, rel, "f")
            out.append(Member(path=rel, kind="f"))
        elif stat.S_ISDIR(st.st_mode):
            raise _refuse(
                top, rel, "is a directory git lists as one entry (a submodule or nested repository)"
            )
        else:
            raise _refuse(top, rel, "is not a regular file, directory or link")
    layout.check_links("")
    return out


class _Hasher:
    """The sha256 of a file's bytes and its git blob id (sha1 or sha256, as the repository's), in one read."""

    def __init__(self, size: int, fmt: str | None):
        self.sha = hashlib.sha256()
        self.blob = hashlib.new(fmt) if fmt else None
        if self.blob is not None:
            self.blob.update(b"blob %d\0" % size)

    def update(self, chunk: bytes) -> None:
        self.sha.update(chunk)
        if self.blob is not None:
            self.blob.update(chunk)


def _open_file(top: Path, rel: str) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(top / rel, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse(top, rel, "became a link while it was read") from e
        raise _refuse(top, rel, f"cannot be read ({e.strerror})") from e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _refuse(top, rel, "is no longer a regular file")
    return fd, st


def _read_member(
    top: Path, m: Member, fmt: str | None, out: Path | None, epoch: int | None
) -> tuple[Entry, str]:
    """The member's tree-digest entry and git blob id, copied to `out` (a new file or link) when given."""
    if m.kind == "l":
        blob = hashlib.new(fmt) if fmt else None
        raw = os.fsencode(m.target)
        if blob is not None:
            blob.update(b"blob %d\0" % len(raw) + raw)
        if out is not None:
            os.symlink(m.target, out)
            if epoch is not None:
                os.utime(out, (epoch, epoch), follow_symlinks=False)
        value = hashlib.sha256(raw).hexdigest()
        return Entry(path=m.path, kind="l", value=value), blob.hexdigest() if blob else ""
    fd, st = _open_file(top, m.path)
    executable = bool(st.st_mode & stat.S_IXUSR)
    h = _Hasher(st.st_size, fmt)
    try:
        with contextlib.ExitStack() as stack:
            dest = None
            if out is not None:
                dest = stack.enter_context(open(out, "xb"))  # noqa: SIM115 - closed by the stack
            n = 0
            while chunk := os.read(fd, CHUNK):
                n += len(chunk)
                h.update(chunk)
                if dest is not None:
                    dest.write(chunk)
            if n != st.st_size:
                raise _refuse(top, m.path, "changed size while it was read")
    finally:
        os.close(fd)
    if out is not None:
        os.chmod(out, member_mode(st.st_mode, "f"))
        t = epoch if epoch is not None else int(st.st_mtime)
        os.utime(out, (t, t))
    blob = h.blob.hexdigest() if h.blob is not None else ""
    return Entry(path=m.path, kind="f", executable=executable, value=h.sha.hexdigest()), blob


def _git_mode(e: Entry) -> str:
    return "120000" if e.kind == "l" else ("100755" if e.executable else "100644")


# ------------------------------------------------------------------------------------------ the public API


def inspect(path: Path, *, limits: Limits | None = None) -> LocalTree:
    """Read the tree at `path` (nothing is written): its members checked, its tree digest, size, epoch and,
    for a git checkout, its commit and whether it is dirty."""
    top = Path(os.path.abspath(path.expanduser()))
    if not top.is_dir() or top.is_symlink():
        raise UsageError(
            f"--source-tree {path}: not a directory" + (" (a link)" if top.is_symlink() else ""),
            hint="pass the directory of a git checkout or of an unpacked sdist",
        )
    limits = limits or Limits()
    git: GitState | None = None
    if is_checkout(top):
        listed, head, commit, fmt = _git_members(top)
        ms = members(top, listed, limits)
        entries, blobs = [], {}
        for m in ms:
            e, blob = _read_member(top, m, fmt, None, None)
            entries.append(e)
            blobs[m.path] = (_git_mode(e), blob)
        git = GitState(commit=commit, dirty=blobs != head)
        epoch = _commit_time(top, commit) if commit else None
    else:
        ms = members(top, list(_walk(top)), limits)
        entries = [_read_member(top, m, None, None, None)[0] for m in ms]
        epoch = None
    size = sum(os.lstat(top / m.path).st_size for m in ms if m.kind == "f")
    if epoch is None:
        epoch = max((int(os.lstat(top / m.path).st_mtime) for m in ms), default=0)
    return LocalTree(path=str(top), digest=digest(entries), files=len(ms), bytes=size, epoch=epoch, git=git)


def copy_into(tree: LocalTree, dest: Path, *, limits: Limits | None = None) -> None:
    """Copy the tree into `dest` (made here; its parent exists): the same members as `inspect` read, checked
    again, each file's bytes hashed as they are copied. The copy must have the digest the plan names: a tree
    that changed since it was read is refused (IntegrityError), and the caller removes what was copied. A
    checkout's files all get its commit's time; an unpacked sdist's keep their own."""
    top = Path(tree.path)
    limits = limits or Limits()
    checkout = tree.git is not None
    listed = _git_members(top)[0] if checkout else list(_walk(top))
    ms = members(top, listed, limits)
    dest.mkdir()
    entries = []
    for m in ms:
        out = dest / m.path
        out.parent.mkdir(parents=True, exist_ok=True)
        entries.append(_read_member(top, m, None, out, tree.epoch if checkout else None)[0])
    actual = digest(entries)
    if actual != tree.digest:
        raise IntegrityError(
            f"--source-tree {top} changed while rvport used it",
            detail=[f"  planned tree {tree.digest}", f"  copied  tree {actual}"],
            hint="let the tree be while it is built, then run again (the plan names the tree it read)",
        )
    for root, dirs, _files in os.walk(dest):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)


# ------------------------------------------------------------------------------------------ whose project


def project_name(top: Path) -> tuple[str, str] | None:
    """The project a tree says it is, and the file that says so: PKG-INFO's Name (an sdist), else
    pyproject.toml's [project] name, else Cargo.toml's [package] name; None when it says none."""
    for name, read in (("PKG-INFO", _pkg_info), ("pyproject.toml", _pyproject), ("Cargo.toml", _cargo)):
        path = top / name
        if not path.is_file() or path.is_symlink():
            continue
        text = read_regular(
            path, limit=META_LIMIT, what=f"--source-tree's {name}", error=UsageError, follow=False
        ).decode("utf-8", errors="replace")
        found = read(text, path)
        if found:
            return found, name
    return None


def _pkg_info(text: str, path: Path) -> str | None:
    return (HeaderParser().parsestr(text).get("Name") or "").strip() or None


def _toml(text: str, path: Path) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--source-tree: {path} is not valid TOML: {e}", hint="fix the file") from e


def _pyproject(text: str, path: Path) -> str | None:
    name = (_toml(text, path).get("project") or {}).get("name")
    return name.strip() if isinstance(name, str) and name.strip() else None


def _cargo(text: str, path: Path) -> str | None:
    name = (_toml(text, path).get("package") or {}).get("name")
    return name.strip() if isinstance(name, str) and name.strip() else None


def expected_project(recipe: Recipe, source: Source) -> str:
    """The project a tree replacing `source` must be: the index project of a pypi source, else the recipe's
    name."""
    return source.project if source.kind is SourceKind.PYPI and source.project else recipe.name


def check_project(recipe: Recipe, source: Source, top: Path) -> str | None:
    """A tree that says it is another project than the recipe's is refused (UsageError); one that says
    nothing gets a note (returned), since rvport cannot tell."""
    want = expected_project(recipe, source)
    found = project_name(top)
    if found is None:
        return (
            f"{recipe.ref}: --source-tree {top} does not say which project it is (no PKG-INFO, "
            f"pyproject.toml or Cargo.toml name): built as {want}'s source {source.name!r} unchecked"
        )
    name, where = found
    if canonicalize_name(name) != canonicalize_name(want):
        raise UsageError(
            f"--source-tree {top} is project {name!r} (its {where}), not {want!r}, the project of "
            f"{recipe.ref}'s source {source.name!r}",
            hint=f"pass a tree of {want}, or build the recipe of {name}",
        )
    return None


__all__ = [
    "Member",
    "check_project",
    "copy_into",
    "expected_project",
    "inspect",
    "is_checkout",
    "project_name",
]
