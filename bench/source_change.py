"""A recipe's pinned main source unpacked into a local tree, and a one-line change to one of its C or C++
files: what bench/compiler_cache.py's `change` run builds with `rvport build RECIPE --source-tree TREE`.

The tree is the main source (the one without `dest:`) as rvport unpacks it, with rvport's own checks
(rvport.sources.archive.unpack: the digests, the links, the limits), and nothing else: the other sources
(vllm's oneDNN), lock files, files and patches are what `rvport build` adds to a --source-tree itself, so the
changed tree gets exactly what the pinned one got. Imported by bench/compiler_cache.py (its directory is first
on sys.path).

The change is one line appended to the file, a declaration that compiles in C and C++, emits nothing and is
new in every run (its token): the preprocessed source changes, so ccache misses that file (a comment would
not do: ccache hashes the preprocessed source), and the build context is one BuildKit has never built, so
the build step runs without --no-cache. The file keeps its modification time, so SOURCE_DATE_EPOCH (the
newest time in the tree) is the pinned tree's.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rvport.errors import UsageError

# the files a compiler cache sees: C and C++ sources and headers
SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".cu")
TOKEN = re.compile(r"[0-9a-z]{1,32}")
MAX_FILE = 64 * 1024 * 1024  # a source file larger than this is not one to change by a line


@dataclass(frozen=True)
class Change:
    """The line appended to one file of a tree, and the file's sha256 before and after."""

    file: str  # relative to the tree, with /
    line: str
    sha256_before: str
    sha256_after: str

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "sha256_before": self.sha256_before,
            "sha256_after": self.sha256_after,
        }


def check_name(text: str) -> str:
    """--change FILE: a relative path inside the tree to a C or C++ file, with / (UsageError else)."""
    p = PurePosixPath(text)
    if not text or "\\" in text or p.is_absolute() or ".." in p.parts or str(p) in ("", "."):
        raise UsageError(
            f"--change {text!r}: not a path inside the recipe's tree",
            hint="name a file relative to the tree's top, e.g. --change csrc/cpu/activation.cpp",
        )
    if p.suffix.lower() not in SUFFIXES:
        raise UsageError(
            f"--change {text!r}: not a C or C++ file ({', '.join(SUFFIXES)}), which the compiler cache sees",
            hint="name a kernel source, e.g. --change csrc/cpu/activation.cpp",
        )
    return str(p)


def change_line(token: str) -> str:
    """A line that compiles in C and C++ at file scope, emits no code and no warning, and is new per token."""
    if not TOKEN.fullmatch(token):
        raise ValueError(f"a change's token is 1 to 32 lowercase letters and digits, not {token!r}")
    return f"extern int rvport_bench_change_{token};"


def apply_change(tree: Path, name: str, token: str) -> Change:
    """Append change_line(token) to tree/name, keeping its permissions and modification time. The file must
    be a regular file of the tree with no link on the way (UsageError else)."""
    import hashlib

    from rvport.fileio import atomic_write_bytes, read_regular

    name = check_name(name)
    path = tree / name
    if os.path.realpath(path) != os.path.join(os.path.realpath(tree), name):
        raise UsageError(f"--change {name}: a link, or through a link, in the tree {tree}", hint=_HINT)
    if not path.is_file():
        raise UsageError(f"--change {name}: not a file of the tree {tree}", hint=_HINT)
    st = path.stat()
    before = read_regular(path, limit=MAX_FILE, what="--change's file", hint=_HINT, follow=False)
    line = change_line(token)
    after = before + (b"" if not before or before.endswith(b"\n") else b"\n") + line.encode() + b"\n"
    atomic_write_bytes(path, after, mode=st.st_mode & 0o7777)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return Change(
        file=name,
        line=line,
        sha256_before=hashlib.sha256(before).hexdigest(),
        sha256_after=hashlib.sha256(after).hexdigest(),
    )


_HINT = "name a C or C++ file of the recipe's pinned source, relative to its top (see its sdist)"


def unpack_main_source(recipe_ref: str, dest: Path, *, cache_dir: Path, mirror: Path) -> Path:
    """The recipe's main source, from rvport's cache or the mirror (offline), unpacked into `dest` (replaced)
    by rvport with its checks. RvportError when it cannot be."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.sources import Fetcher, fetch_options
    from rvport.sources.archive import unpack

    recipe = load_catalogue(None).resolve(recipe_ref)
    main = next((s for s in recipe.sources if s.dest is None), None)
    if main is None:
        raise UsageError(
            f"{recipe.ref} has no main source (every source has a dest:), so no tree to change",
            hint="run the change for a recipe whose source is its tree, e.g. vllm",
        )
    opts = fetch_options(cache_dir=cache_dir, mirror=mirror, offline=True)
    shutil.rmtree(dest, ignore_errors=True)
    scratch = dest.parent / f".{dest.name}.scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        with Fetcher(options=opts) as fetcher:
            got = fetcher.fetch(main, check=False)
            unpack(
                got.path, dest, name=got.filename, scratch=scratch, blob=True, source=main, limits=opts.limits
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return dest
