"""`rvport pin`: record the digest of sources whose upstream publishes none, by a minimal edit of the YAML;
and check_pinned_files, which `rvport plan` calls to hold the files shipped beside recipes to their pins.

The edit inserts two lines at the end of the source's mapping, at its key indentation:

    sha256: <hex>                   (a git source: tree: sha256:<hex>, its tree digest; forge archives change)
    recorded: {by: rvport, date: 'YYYY-MM-DD'}

Only the user's own recipes are edited (trust on first use); the built-in catalogue is pinned by its authors.

Comments and layout are kept; the file is re-read afterwards and restored if the edit did not parse as meant.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rvport.catalogue.model import BUILTIN, Recipe, Source, SourceKind
from rvport.catalogue.recipe_file import PINNED_MAX_BYTES, load_recipe_file
from rvport.catalogue.yamlsrc import MAX_BYTES
from rvport.errors import IntegrityError, Problem, RecipeError, UsageError
from rvport.fileio import atomic_write_bytes, read_regular
from rvport.sources.archive import archive_tree
from rvport.sources.cache import CorruptEntry, atomic_write_text
from rvport.sources.fetch import Fetched, Fetcher, FetchOptions

_LEAD = re.compile(r"^(\s*(?:-\s+)*)(\S)")


@dataclass(frozen=True, kw_only=True)
class Pinned:
    source: str
    sha256: str  # the value written: an archive's sha256 hex, or a git source's "sha256:<hex>" tree
    file: Path
    line: int  # where the pin line was written (1-based)
    fetched: Fetched
    key: str = "sha256"  # "tree" for git sources

    def to_json(self) -> dict:
        return {"source": self.source, self.key: self.sha256, "file": str(self.file), "line": self.line}


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index of the last content line of the mapping that starts at line index `start`."""
    end = start
    for i in range(start + 1, len(lines)):
        text = lines[i]
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(text) - len(text.lstrip(" ")) < indent:
            break
        end = i
    return end


def insert_pin(text: str, source: Source, sha256: str, date: str, *, key: str = "sha256") -> tuple[str, int]:
    """Return the YAML text with the pin lines added under `source`, and the 1-based line of `<key>:`."""
    if not source.line:
        raise UsageError(f"source {source.name!r}: its line in the recipe file is unknown")
    lines = text.splitlines(keepends=True)
    start = source.line - 1
    m = _LEAD.match(lines[start]) if start < len(lines) else None
    if m is None or m.group(2) == "{":
        raise UsageError(
            f"source {source.name!r}: cannot edit its mapping at line {source.line}",
            hint="write the source as a block mapping (one key per line), then run `rvport pin` again",
        )
    indent = len(m.group(1))
    end = _block_end(lines, start, indent)
    block = lines[start : end + 1]
    if any(re.match(rf"^\s{{{indent}}}{key}\s*:", ln) for ln in block[1:]) or f"{key}:" in lines[start]:
        raise UsageError(
            f"source {source.name!r} already has a {key} line", hint="edit it by hand if it is wrong"
        )
    eol = "\r\n" if lines[end].endswith("\r\n") else "\n"
    if not lines[end].endswith(("\n", "\r")):
        lines[end] += eol
    new = [f"{' ' * indent}{key}: {sha256}{eol}"]
    if not any(re.match(rf"^\s{{{indent}}}recorded\s*:", ln) for ln in block[1:]):
        # quoted: unquoted, YAML reads a date, and the recipe schema wants a string
        new.append(f"{' ' * indent}recorded: {{by: rvport, date: '{date}'}}{eol}")
    lines[end + 1 : end + 1] = new
    return "".join(lines), end + 2


def _pin_key(source: Source) -> str:
    return "tree" if source.kind is SourceKind.GIT else "sha256"


def _tree_of(fetcher: Fetcher, f: Fetched) -> tuple[Fetched, str]:
    """The tree digest of a fetched git archive, read once (and checked against its cache name on the way)."""
    for _ in range(2):
        try:
            return f, _tree(fetcher, f)
        except CorruptEntry as e:
            f = fetcher.refetch(f, e)
    return f, _tree(fetcher, f)


def _tree(fetcher: Fetcher, f: Fetched) -> str:
    limits = fetcher.options.limits
    return archive_tree(f.path, name=f.filename, exclude=f.source.exclude, blob=True, limits=limits)


def pin_recipe(recipe: Recipe, options: FetchOptions, *, today: dt.date | None = None) -> list[Pinned]:
    """Fetch each unpinned source of `recipe` once and write its digest into the recipe file.

    A git source gets its tree digest (`tree: sha256:<hex>`), since forge archives of one commit do not keep
    their bytes; any other source the archive's sha256.
    """
    if recipe.origin == BUILTIN:
        raise UsageError(
            f"{recipe.ref} is a built-in recipe: its pins come with rvport, and `rvport pin` edits "
            "only your own recipes",
            hint=f"rvport pin {recipe.ref} --into DIR copies it (with the files beside it) into your "
            "recipe directory DIR and pins it there",
        )
    todo = [s for s in recipe.sources if not s.pinned]
    if not todo:
        return []
    date = (today or dt.date.today()).isoformat()
    values: dict[str, str] = {}
    with Fetcher(options=options) as fetcher:
        fetched = []
        for s in todo:
            f = fetcher.fetch(s, check=_pin_key(s) == "sha256")
            if _pin_key(s) == "tree":
                f, values[s.name] = _tree_of(fetcher, f)
            else:
                values[s.name] = f.sha256
            fetched.append(f)
    # A recipe that is a symbolic link is edited where it points (the link stays a link); the file is read as
    # the loader reads it (a regular file, bounded) and written whole (atomic_write_text).
    path = recipe.file.resolve()
    original = read_regular(path, limit=MAX_BYTES, what="recipe file", error=RecipeError).decode("utf-8")
    mode = stat.S_IMODE(path.stat().st_mode)  # the rewritten file keeps the permissions it had
    text = original
    lines_written: dict[str, int] = {}
    # bottom-up, so earlier line numbers stay valid
    for f in sorted(fetched, key=lambda f: f.source.line or 0, reverse=True):
        text, line = insert_pin(text, f.source, values[f.source.name], date, key=_pin_key(f.source))
        lines_written[f.source.name] = line
    # lines below an insertion moved down by the lines inserted above them
    shift = {
        f.source.name: 2 * sum(1 for g in fetched if (g.source.line or 0) < (f.source.line or 0))
        for f in fetched
    }
    atomic_write_text(path, text, mode=mode)
    recipes, problems = load_recipe_file(recipe.file, _recipes_root(recipe))
    again = next((r for r in recipes if r.version == recipe.version), None)
    got = {s.name: getattr(s, _pin_key(s)) for s in again.sources} if again else {}
    if problems or any(got.get(f.source.name) != values[f.source.name] for f in fetched):
        atomic_write_text(path, original, mode=mode)
        raise RecipeError(
            f"could not write the pins into {path} without breaking it; the file was restored",
            problems=problems,
            hint="add the pin lines by hand: "
            + ", ".join(f"{f.source.name}: {_pin_key(f.source)}: {values[f.source.name]}" for f in fetched),
        )
    return [
        Pinned(
            source=f.source.name,
            sha256=values[f.source.name],
            file=path,
            key=_pin_key(f.source),
            line=lines_written[f.source.name] + shift[f.source.name],
            fetched=f,
        )
        for f in fetched
    ]


def check_pinned_files(recipes: Iterable[Recipe]) -> None:
    """The patches, lock files, added files and runtime files shipped beside the recipes must have the sha256
    their recipes pin (a plan promises every pin; the build checks them again as it prepares each tree). Every
    mismatch is collected and
    raised together as an IntegrityError (exit 4), naming the file and both digests."""
    problems: list[Problem] = []
    seen: set[tuple[str, Path]] = set()
    for r in recipes:
        runtime_files = tuple(f.pinned for f in r.runtime.files if f.pinned) if r.runtime else ()
        for what, files in (
            ("patch", r.patches),
            ("lock file", r.lockfiles),
            ("file", r.files),
            ("runtime file", runtime_files),
        ):
            for pf in files:
                if (r.ref, pf.path) in seen:
                    continue
                seen.add((r.ref, pf.path))
                try:
                    actual = _sha256_regular(pf.path)
                except OSError as e:
                    problems.append(
                        Problem(
                            message=f"{r.ref}: {what} {pf.path} cannot be read: {e.strerror}",
                            file=str(r.file),
                            line=pf.line,
                        )
                    )
                    continue
                if actual != pf.sha256:
                    problems.append(
                        Problem(
                            message=f"{r.ref}: {what} {pf.path} does not match its pin: "
                            f"the recipe pins sha256 {pf.sha256}, the file has {actual}",
                            file=str(r.file),
                            line=pf.line,
                        )
                    )
    if problems:
        n = len(problems)
        what = f"{n} pinned files changed since they were" if n > 1 else "1 pinned file changed since it was"
        raise IntegrityError(
            f"{what} pinned",
            problems=problems,
            hint="restore the file; if the change is intended, put its new sha256 in the recipe",
        )


def _sha256_regular(path: Path) -> str:
    """The sha256 of a regular file. It is opened without blocking and checked on the open descriptor, so a
    FIFO or device put where a pinned file was (after the recipe loaded) is refused, never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        h = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def shipped_files(versions: Iterable[Recipe]) -> list[str]:
    """Every file a recipe file's versions name beside it (patches, lock files, added files, runtime files),
    as paths relative to the recipe directory, each once, in order."""
    rels: list[str] = []
    for r in versions:
        runtime = tuple(f.pinned for f in r.runtime.files if f.pinned) if r.runtime else ()
        rels += [pf.rel for pf in (*r.patches, *r.lockfiles, *r.files, *runtime)]
    return list(dict.fromkeys(rels))


def copy_builtin(versions: tuple[Recipe, ...], into: Path) -> list[Path]:
    """A built-in recipe file and every file its versions name beside it, copied into the user recipe
    directory `into` (made when missing), so that `rvport pin` can record pins there. Nothing there is
    replaced: a file already there is used when it holds the same bytes (an earlier copy), else it is a
    UsageError naming it, before anything is written. Returns the copies, the recipe file first."""
    recipe = versions[0]
    if recipe.origin != BUILTIN:
        raise ValueError(f"{recipe.ref} is not a built-in recipe")
    root = _recipes_root(recipe)
    rels = [recipe.file.name, *shipped_files(versions)]
    datas = [
        read_regular(
            root / rel,
            limit=MAX_BYTES if rel == recipe.file.name else PINNED_MAX_BYTES,
            what="built-in recipe file",
            error=RecipeError,
        )
        for rel in rels
    ]
    todo = []
    for rel, data in zip(rels, datas, strict=True):
        target = into / rel
        if not os.path.lexists(target):
            todo.append((target, data))
        elif not _holds(target, data):
            raise UsageError(
                f"{target} is there already: rvport copies the built-in recipe {recipe.name} into {into} "
                "only where nothing else is in the way",
                hint=f"pass --recipes {into} to pin the recipe that is there, or choose another --into DIR",
            )
    for target, data in todo:  # a copy made before (a pin that failed on the way) is used as it is
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data)
    return [into / rel for rel in rels]


def _holds(path: Path, data: bytes) -> bool:
    """Whether `path` is a regular file with exactly these bytes (an earlier copy)."""
    try:
        return read_regular(path, limit=len(data), follow=False) == data
    except (UsageError, OSError):
        return False


def _recipes_root(recipe: Recipe) -> Path:
    """The recipe directory: a recipe is NAME.yaml directly in it (recipes._load_dir); its pinned files'
    paths are resolved, so they cannot tell it when a link is on the way."""
    return recipe.file.parent
