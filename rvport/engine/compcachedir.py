"""A compiler cache directory on the host (`--compiler-cache DIR`): checked, imported, exported atomically.

A CI job keeps DIR with its CI cache (actions/cache, GitLab's cache:); rvport imports the stage's part of it
into the stage's build context before the build (BuildKit exports no cache mount, so the cache must enter as
context and leave as output) and exports what the build left after it. Its layout:

    DIR/rvport-compiler-cache.json   the marker (MARKER): schema, kind, tool; written when rvport makes DIR
    DIR/.lock                        held while an entry is read or replaced (several runs may share DIR)
    DIR/<toolchain id>/current       the name of the entry's live generation, replaced by a rename
    DIR/<toolchain id>/g<ns>-<pid>/  a generation: a ccache directory, never changed once current names it

An export writes a new generation beside the live one, then renames `current` over: an interrupted export or
a full disk leaves the previous generation current and whole (the half-written one is removed, now or by the
next export). When another build exported the entry after this one imported it (builds side by side, such as a
matrix's profiles with --matrix-jobs), the files of that generation the new one lacks are linked into it
first, so neither build's objects are lost (ccache names an object by its key: the same name is the same
object). Nothing in DIR is trusted: DIR itself must be a directory of this user, not a link and not
writable by others, and hold the marker (or be empty); an entry whose `current` is not a generation name, or
whose generation holds anything but regular files and directories of this user, or more than twice the size
limit, is ignored with a message (the build starts cold and replaces it). A generation from another compiler
is imported and simply misses: its objects are keyed by another compiler check (compcache).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rvport.errors import RvportError, UsageError
from rvport.fileio import atomic_write_text, held_lock, read_json, read_regular

MARKER = "rvport-compiler-cache.json"
MARKER_DOC = {"schema": 1, "kind": "rvport-compiler-cache", "tool": "ccache"}
LOCK = ".lock"
CURRENT = "current"
MAX_FILES = 2_000_000
_GENERATION = re.compile(r"g[0-9]{1,20}-[0-9]{1,10}")
_ENTRY = re.compile(r"rvport-ccache-[a-z]{1,16}-[0-9a-f]{16}")


def _refuse(path: Path, why: str, hint: str) -> UsageError:
    return UsageError(f"--compiler-cache {path}: {why}", hint=hint)


def check_dir(path: Path) -> Path:
    """DIR as `--compiler-cache` may name it, made when it does not exist (with its marker); UsageError
    (exit 2) for a link, a file, a directory of another user or writable by others, or a directory that is
    neither empty nor an rvport compiler cache. Returns its absolute path."""
    path = Path(os.path.abspath(path))
    hint = "name a directory of your own that is new, empty or made by rvport (docs/compiler-cache.md)"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            path.mkdir(parents=True, mode=0o755)
            atomic_write_text(path / MARKER, _marker_text())
        except OSError as e:
            raise _refuse(path, f"cannot be made ({e.strerror})", hint) from None
        return path
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e.strerror})", hint) from None
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, "is a symbolic link; rvport does not follow it", "name the directory itself")
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "is not a directory", hint)
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"belongs to another user (uid {st.st_uid})", hint)
    if st.st_mode & stat.S_IWOTH:
        raise _refuse(path, "is writable by every user", f"chmod o-w {path}, or {hint}")
    marker = path / MARKER
    if not marker.exists() and not marker.is_symlink():
        if any(path.iterdir()):
            raise _refuse(path, f"is not empty and has no {MARKER}: not an rvport compiler cache", hint)
        atomic_write_text(marker, _marker_text())
        return path
    if marker.is_symlink():
        raise _refuse(path, f"its {MARKER} is a symbolic link", hint)
    doc = read_json(marker, what=f"the compiler cache's {MARKER}", limit=4096, error=UsageError)
    if not isinstance(doc, dict) or any(doc.get(k) != v for k, v in MARKER_DOC.items()):
        raise _refuse(path, f"its {MARKER} is not one this rvport writes (schema 1, ccache)", hint)
    return path


def _marker_text() -> str:
    import json

    return json.dumps(MARKER_DOC, sort_keys=True) + "\n"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with held_lock(directory / LOCK):
        yield


class Unusable(Exception):
    """A directory that is not a ccache directory rvport will use (the reason is the message)."""


@dataclass(frozen=True, kw_only=True)
class Walked:
    files: int
    bytes: int


def walk(root: Path, *, max_bytes: int) -> Walked:
    """Count a cache directory's files and bytes; Unusable when it holds anything but regular files and
    directories of this user (a link, a device, a FIFO), more than MAX_FILES files or `max_bytes` bytes."""
    uid = os.geteuid()
    files = total = 0
    for top, dirs, names in os.walk(root, onerror=_raise):
        for name in (*dirs, *names):
            st = os.lstat(os.path.join(top, name))
            if st.st_uid != uid:
                raise Unusable(f"{name} belongs to another user (uid {st.st_uid})")
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise Unusable(f"{os.path.relpath(os.path.join(top, name), root)} is not a regular file")
            files += 1
            total += st.st_size
            if files > MAX_FILES or total > max_bytes:
                raise Unusable(f"it holds more than {max_bytes} bytes or {MAX_FILES} files")
    return Walked(files=files, bytes=total)


def _raise(e: OSError) -> None:
    raise Unusable(f"cannot be read: {e.strerror}")


def _entry(directory: Path, entry: str) -> Path:
    if not _ENTRY.fullmatch(entry):  # a bug: the ids are compcache.toolchain_id's
        raise ValueError(f"not a compiler cache entry name: {entry!r}")
    return directory / entry


def _current(entry_dir: Path) -> Path | None:
    """The entry's live generation, or None when it has none; Unusable when what is there is not one."""
    try:
        st = os.lstat(entry_dir)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise Unusable("it is not a directory of this user")
    pointer = entry_dir / CURRENT
    if not pointer.exists() and not pointer.is_symlink():
        return None
    try:
        name = read_regular(pointer, limit=64, what="current", error=RvportError, follow=False)
    except RvportError as e:
        raise Unusable(f"its {CURRENT} cannot be read ({e.message})") from None
    text = name.decode("ascii", errors="replace").strip()
    if not _GENERATION.fullmatch(text):
        raise Unusable(f"its {CURRENT} does not name a generation")
    gen = entry_dir / text
    if gen.is_symlink() or not gen.is_dir():
        raise Unusable(f"its {CURRENT} names {text}, which is not a directory")
    return gen


def import_into(dest: Path, directory: Path, entry: str, *, max_size: int) -> dict:
    """The entry's live generation linked (or copied) into `dest`, a new directory of the stage's build
    context (made empty when there is nothing to import). Returns the record's `import`: status imported,
    empty or ignored (with the reason), files, bytes."""
    dest.mkdir()
    with _locked(directory):
        try:
            gen = _current(_entry(directory, entry))
            if gen is None:
                return {"status": "empty", "files": 0, "bytes": 0}
            walked = walk(gen, max_bytes=2 * max_size)
            _link_tree(gen, dest)
        except (Unusable, OSError) as e:
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            reason = str(e) if isinstance(e, Unusable) else f"cannot be read: {e.strerror}"
            return {"status": "ignored", "reason": f"{entry}: {reason}", "files": 0, "bytes": 0}
    return {"status": "imported", "generation": gen.name, "files": walked.files, "bytes": walked.bytes}


def _link_tree(src: Path, dest: Path) -> None:
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dest, symlinks=True, copy_function=link, dirs_exist_ok=True)


def export(
    src: Path,
    directory: Path,
    entry: str,
    *,
    max_size: int,
    copy: Callable[[Path, Path], object] = shutil.copytree,
    imported: str | None = None,
) -> dict:
    """The cache a build left (`src`) made the entry's live generation, atomically: written beside the live
    one, then `current` renamed over. On any failure (a full disk, an unusable export) the previous
    generation stays current and nothing half-written is left. `imported`: the generation the build started
    from; a live one of another name (exported since, by a build beside this one) has the files the new one
    lacks linked in (`merged`: how many). Returns the record's `export`: status exported, refused or failed
    (with the reason), files, bytes."""
    try:
        walked = walk(src, max_bytes=2 * max_size)
    except Unusable as e:
        return {"status": "refused", "reason": f"the build's cache: {e}", "files": 0, "bytes": 0}
    entry_dir = _entry(directory, entry)
    gen_name = f"g{time.time_ns()}-{os.getpid()}"
    tmp, gen = entry_dir / f".tmp-{gen_name}", entry_dir / gen_name
    with _locked(directory):
        try:
            entry_dir.mkdir(exist_ok=True)
            if entry_dir.is_symlink() or not entry_dir.is_dir():
                raise Unusable(f"{entry} is not a directory")
            _sweep(entry_dir, keep=None, partial_only=True)  # what an interrupted export left
            try:
                os.rename(src, tmp)  # the same filesystem: nothing to copy
            except OSError:
                copy(src, tmp)
            merged = _merge_newer(entry_dir, tmp, imported, max_size=max_size, have=walked.bytes)
            os.rename(tmp, gen)
            atomic_write_text(entry_dir / CURRENT, gen_name + "\n")
        except (OSError, Unusable) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            with contextlib.suppress(Unusable, OSError):
                if _current(entry_dir) != gen:
                    shutil.rmtree(gen, ignore_errors=True)
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                why = f"no space left on {directory}"
            else:
                why = str(e) if isinstance(e, Unusable) else (e.strerror or str(e))
            why += "; the previous cache is kept"
            return {"status": "failed", "reason": why, "files": 0, "bytes": 0}
        _sweep(entry_dir, keep=gen_name, partial_only=False)
    out = {"status": "exported", "generation": gen_name, "files": walked.files, "bytes": walked.bytes}
    return {**out, "merged": merged} if merged else out


def _merge_newer(entry_dir: Path, into: Path, imported: str | None, *, max_size: int, have: int) -> int:
    """The files of the entry's live generation that `into` lacks, linked (or copied) into it, when that
    generation is not the one the build imported: another build exported it meanwhile. An unusable live
    generation is left out (the new one replaces it), and so is one that would take the two past the most an
    import takes (twice the size limit: `have` is the new one's bytes). How many files were added."""
    try:
        live = _current(entry_dir)
        if live is None or live.name == imported:
            return 0
        if have + walk(live, max_bytes=2 * max_size).bytes > 2 * max_size:
            return 0
    except (Unusable, OSError):
        return 0
    added = 0
    for top, _dirs, names in os.walk(live):
        rel = os.path.relpath(top, live)
        dest_dir = into / rel
        dest_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            dest = dest_dir / name
            if dest.exists() or dest.is_symlink():
                continue
            try:
                os.link(os.path.join(top, name), dest)
            except OSError:
                shutil.copy2(os.path.join(top, name), dest)
            added += 1
    return added


def _sweep(entry_dir: Path, *, keep: str | None, partial_only: bool) -> None:
    """Remove the entry's half-written generations (.tmp-*), and unless `partial_only` every generation but
    `keep`. Only real directories of rvport's names are removed; a link is only unlinked."""
    for child in entry_dir.iterdir():
        name = child.name
        ours = name.startswith(".tmp-") and _GENERATION.fullmatch(name[5:])
        if not ours and not partial_only and _GENERATION.fullmatch(name) and name != keep:
            ours = True
        if not ours:
            continue
        if child.is_symlink():
            child.unlink()
        else:
            shutil.rmtree(child, ignore_errors=True)
