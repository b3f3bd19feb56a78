"""Git sources from a local clone or a git bundle: `git archive` of the pinned commit, as the forge makes it.

Every git command goes through rvport.proc. Nothing is written into the user's clone: a bundle is cloned into
a temporary bare repository, and excluded paths are marked export-ignore through a temporary attributes file
(`core.attributesFile`), so objects a partial clone or a snapshot lacks are never read.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from rvport import proc
from rvport.catalogue.model import Source
from rvport.errors import SourceUnavailable, UsageError
from rvport.sources.treehash import check_excludes

# what git reads from the user's configuration must not change the archive's bytes into other files
_FIXED = ["-c", "core.autocrlf=false", "-c", "core.eol=lf"]


def _git(args: list[str], *, cwd: Path | None = None, check: bool = True, timeout: float = 1800):
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return proc.run(["git", *args], cwd=cwd, env=env, capture=True, check=check, timeout=timeout)


def is_bundle(path: Path) -> bool:
    """A git bundle file (v2 or v3), recognised by its first line."""
    try:
        with open(path, "rb") as f:
            return f.readline(64).rstrip() in (b"# v2 git bundle", b"# v3 git bundle")
    except OSError:
        return False


def check_clone(path: Path) -> Path:
    """A usable `--from-git` argument: a git repository (work tree or bare) or a bundle file."""
    path = path.expanduser()
    if path.is_file():
        if not is_bundle(path):
            raise UsageError(
                f"--from-git {path}: not a git bundle",
                hint="pass a git clone's directory or a file made by `git bundle create`",
            )
        return path
    if not path.is_dir():
        raise UsageError(
            f"--from-git {path}: no such directory", hint="pass the directory of a local git clone"
        )
    cp = _git(["-C", str(path), "rev-parse", "--git-dir"], check=False, timeout=60)
    if cp.returncode != 0:
        raise UsageError(
            f"--from-git {path}: not a git repository ({(cp.stderr or '').strip()})",
            hint="pass the directory of a local git clone (or a git bundle file)",
        )
    return path


def has_commit(repo: Path, commit: str) -> bool:
    cp = _git(["-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], check=False, timeout=60)
    return cp.returncode == 0


def _attr_pattern(path: str, suffix: str = "") -> str:
    """A gitattributes pattern matching exactly `path` (from the top), C-quoted when it must be."""
    p = "/" + re.sub(r"([*?\[\\])", r"\\\1", path) + suffix
    if any(c.isspace() or c == '"' for c in p):
        p = '"' + p.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return p


def archive(repo: Path, source: Source, out: Path, *, scratch: Path) -> None:
    """Write `git archive` of the source's commit to `out` (tar.gz, forge-style top directory
    <repo name>-<commit>/), leaving the source's excluded paths out."""
    prefix = source.archive_name.removesuffix(".tar.gz") + "/"
    with tempfile.TemporaryDirectory(dir=scratch, prefix="git.") as tmp:
        attrs = Path(tmp) / "attributes"
        attrs.write_text(
            "".join(
                f"{_attr_pattern(e)} export-ignore\n{_attr_pattern(e, '/**')} export-ignore\n"
                for e in check_excludes(source.exclude)
            )
        )
        try:
            _git(
                [
                    "-C",
                    str(repo),
                    *_FIXED,
                    "-c",
                    f"core.attributesFile={attrs}",
                    "archive",
                    "--format=tar.gz",
                    f"--prefix={prefix}",
                    "-o",
                    str(out.resolve()),
                    source.commit or "",
                ]
            )
        except proc.CommandFailed as e:
            raise SourceUnavailable(
                f"source {source.name!r}: `git archive {source.commit}` in {repo} failed ({e.reason}):",
                detail=["  " + ln for ln in (e.stderr or "").strip().splitlines()[-6:]],
                hint="the clone lacks objects of this commit (a shallow or partial clone?): fetch the commit "
                "fully, or exclude the paths it lacks in the recipe (exclude:)",
            ) from e


def archive_from_bundle(bundle: Path, source: Source, out: Path, *, scratch: Path) -> bool:
    """Like archive(), from a git bundle; False when the bundle does not hold the commit."""
    tmp = Path(tempfile.mkdtemp(dir=scratch, prefix="bundle."))
    try:
        try:
            _git(["clone", "-q", "--mirror", str(bundle), str(tmp / "repo.git")])
        except proc.CommandFailed as e:
            said = [ln.strip() for ln in (e.stderr or "").splitlines() if ln.strip()]
            why = [ln for ln in said if ln.lower().startswith(("error:", "fatal:"))][:2] or said[-1:]
            raise SourceUnavailable(
                f"git bundle {bundle}: cannot read it ({e.reason})",
                detail=["  " + ln for ln in why],
                hint="check the file (`git bundle verify FILE`), or remove it from the mirror",
            ) from e
        if not has_commit(tmp / "repo.git", source.commit or ""):
            return False
        archive(tmp / "repo.git", source, out, scratch=scratch)
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["archive", "archive_from_bundle", "check_clone", "has_commit", "is_bundle"]
