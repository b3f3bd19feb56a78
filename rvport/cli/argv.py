"""The command line's words before Typer reads them: bare `rvport` asks for help, and a global flag given
after the verb (`rvport plan msgspec --debug`) counts as if given before it, as users expect of git and pip.

Pure: a list of words in, a list of words out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def arrange(args: Sequence[str], global_flags: Iterable[str]) -> list[str]:
    """`args` with every global switch that follows the verb moved before it. Only switches (flags without
    a value) move; a word after `--` is an argument, never a flag. No words at all: `--help`."""
    if not args:
        return ["--help"]
    flags = set(global_flags)
    verb = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
    if verb is None:
        return list(args)
    try:
        end = args.index("--", verb)
    except ValueError:
        end = len(args)
    moved = [a for a in args[verb:end] if a in flags]
    if not moved:
        return list(args)
    rest = [a for a in args[verb:end] if a not in flags]
    return [*args[:verb], *moved, *rest, *args[end:]]
