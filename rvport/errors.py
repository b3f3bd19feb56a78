"""Typed errors: what failed, why, and what to do. Only the CLI turns them into exit codes.

Exit codes (documented in docs/exit-codes.md; one per kind):
    0  success
    1  verification failed (an artifact is not what the profile promised)
    2  usage error (bad option or argument)
    3  recipe or profile invalid (file, line, hint)
    4  source integrity: a digest mismatch, or a patch that does not apply
    5  source unavailable: network, mirror or offline cache miss
    6  host not ready (docker, buildx, binfmt, qemu, disk)
    7  build stage failed
    8  interrupted (Ctrl-C)
    9  internal error (a bug: run again with --debug and report it)
   10  a check failed: a step of `rvport serve-check` (install, pip check, import, generate, serve)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from rvport.safetext import one_line


class ExitCode(IntEnum):
    OK = 0
    VERIFY_FAILED = 1
    USAGE = 2
    RECIPE_INVALID = 3
    INTEGRITY = 4
    SOURCE_UNAVAILABLE = 5
    HOST_NOT_READY = 6
    BUILD_FAILED = 7
    INTERRUPTED = 8
    INTERNAL = 9
    CHECK_FAILED = 10


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One located problem: where, what, and what to do."""

    message: str
    file: str | None = None
    line: int | None = None
    hint: str | None = None

    def location(self) -> str:
        if self.file is None:
            return ""
        file = one_line(self.file)  # a file's name on one line: it cannot start a line of its own
        return f"{file}:{self.line}" if self.line else file

    def render(self) -> str:
        """The problem on one line (its hint on a second): a newline in a name it quotes is shown as \\n."""
        loc = self.location()
        text = f"{loc}: {one_line(self.message)}" if loc else one_line(self.message)
        if self.hint:
            text += f"\n    hint: {one_line(self.hint)}"
        return text


class RvportError(Exception):
    """Base of every error rvport reports without a traceback.

    message and hint are one line each: whatever names and paths they quote (a recipe's name, a member's
    name, an --output path) are shown with a newline as `\\n` (safetext.one_line), so that no value can print
    a line of its own (`p\\nerror: FORGED`). rvport's own lines that belong to an error (a failed stage's
    last log lines, a smoke test's output, the patch's complaints) go in `detail`, one line each, shown
    below the message as they are (each line escaped on its own); located problems go in `problems`."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        problems: list[Problem] | None = None,
        detail: Iterable[str] = (),
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.problems: list[Problem] = list(problems or [])
        # each item one line; an item that holds a newline anyway is shown as one line too
        self.detail: tuple[str, ...] = tuple(detail)

    def __str__(self) -> str:
        """The message and its detail lines, raw (for code and tests; what is shown is render())."""
        return "\n".join([self.message, *self.detail])

    def render(self) -> str:
        """The error as the lines the CLI prints and result.json keeps: the message, the detail lines, the
        problems and the hint, each line safe on its own (safetext.one_line)."""
        lines = [one_line(self.message)]
        lines += [one_line(d) for d in self.detail]
        lines += ["  " + p.render().replace("\n", "\n  ") for p in self.problems]
        if self.hint:
            lines.append(f"hint: {one_line(self.hint)}")
        return "\n".join(lines)


class UsageError(RvportError):
    exit_code = ExitCode.USAGE


class RecipeError(RvportError):
    exit_code = ExitCode.RECIPE_INVALID


class IntegrityError(RvportError):
    exit_code = ExitCode.INTEGRITY


class SourceUnavailable(RvportError):
    exit_code = ExitCode.SOURCE_UNAVAILABLE


class HostNotReady(RvportError):
    exit_code = ExitCode.HOST_NOT_READY


class BuildFailed(RvportError):
    exit_code = ExitCode.BUILD_FAILED


class SmokeFailed(BuildFailed):
    """A stage's smoke test exited non-zero: a build stage failure (exit 7) whose message carries what the
    test printed last; result.json records it in stages[].smoke."""


class VerifyFailed(RvportError):
    exit_code = ExitCode.VERIFY_FAILED


class CheckFailed(RvportError):
    """A check of what was made ran to its end and a step of it failed (`rvport serve-check`): its record
    is written (result.json) before this is raised."""

    exit_code = ExitCode.CHECK_FAILED


class MatrixFailed(RvportError):
    """A build of several profiles in which one or more failed: its exit code is the worst profile's
    (rvport.engine.matrix.worst, docs/exit-codes.md); OUTPUT/matrix.json is written before this is raised."""

    def __init__(self, message: str, *, exit_code: ExitCode, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.exit_code = exit_code
