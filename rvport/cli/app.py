"""The Typer app: every verb registered the one way (`COMMANDS`: each a function of its options value, made
a command by rvport/cli/settings.py's `command`, in its verb module), the global options, and `main`, where
errors become exit codes (see rvport.errors). No verb's logic is here."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

import typer

from rvport.cli import (
    build_verbs,
    closure_verbs,
    doctor_verbs,
    plan_verbs,
    recipe_verbs,
    reproduce,
    settings,
    source_verbs,
    verify_verbs,
)
from rvport.cli.argv import arrange
from rvport.cli.console import configure, ui
from rvport.cli.options import GlobalArgs
from rvport.cli.signals import install_handlers
from rvport.errors import ExitCode, RvportError
from rvport.safetext import one_line

# Plain (click-style) help: paragraphs are re-flowed to the terminal, and no type labels such as <bool> are
# shown.
app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Pinned recipes in, proven riscv64 artifacts out.",
)

# every verb, in the order `rvport --help` lists them; a verb of two words goes into the group of its first
GROUPS = {
    "verify": {
        "help": "Prove artifacts' architecture, ABI and RISC-V extensions from their ELF files.",
        "short_help": "Prove artifacts' architecture, ABI and extensions from their ELF files.",
    },
    "recipes": {"help": "List and show recipes."},
}
COMMANDS: tuple[Callable[..., None], ...] = (
    source_verbs.fetch,
    source_verbs.pin,
    reproduce.reproduce,
    closure_verbs.lock,
    closure_verbs.wheelhouse,
    closure_verbs.serve_check,
    plan_verbs.plan,
    build_verbs.build,
    build_verbs.prepare,
    doctor_verbs.doctor,
    verify_verbs.artifacts,
    recipe_verbs.recipes_list,
    recipe_verbs.recipes_show,
)


def register(root: typer.Typer, commands: tuple[Callable[..., None], ...]) -> None:
    """Each command under its verb's name (`verb`, set by settings.command), in its group if it has one."""
    groups: dict[str, typer.Typer] = {}
    for cmd in commands:
        verb: str = cmd.verb  # type: ignore[attr-defined]
        group, _, name = verb.rpartition(" ")
        parent = root
        if group:
            if group not in groups:
                groups[group] = typer.Typer(rich_markup_mode=None, **GROUPS[group])
                root.add_typer(groups[group], name=group)
            parent = groups[group]
        parent.command(name, short_help=cmd.short_help)(cmd)  # type: ignore[attr-defined]


register(app, COMMANDS)


@app.callback()
@settings.command(settings.GLOBAL)
def main_options(o: GlobalArgs) -> None:
    from rvport import resources
    from rvport.verify import pool

    configure(force_ci=o.ci, debug=o.debug)
    # the environment's settings for the whole run (rvport/cli/settings.py), handed to the layers below
    resources.configure(
        bases=o.bases_dir, toolchains=o.toolchains_dir, dockerfiles=o.dockerfiles_dir, locks=o.locks_dir
    )
    pool.configure(o.verify_threads)


def main() -> None:
    """Run the app and turn errors into exit codes, never tracebacks (the `rvport` script reaches it through
    rvport.cli.entry, which handles an interrupt while this module is imported)."""
    install_handlers()
    try:
        rc = app(args=arrange(sys.argv[1:], settings.global_switches()), standalone_mode=False)
        # click 8.2+ (vendored by typer >= 0.16) turns Ctrl-C into Abort and, without standalone mode,
        # *returns* its exit code (130) instead of raising: that must still be exit 8, not 0
        if rc == 130:
            raise KeyboardInterrupt
        if isinstance(rc, int) and rc != 0:
            raise SystemExit(rc)
    except RvportError as e:
        u = ui()
        from rich.markup import (
            escape,  # messages quote build output, e.g. "executor failed running [/bin/sh -c ...]"
        )

        # render(): each line escaped on its own, every name and path in it on one line (errors.py)
        u.err.print(f"[bold red]error:[/] {escape(e.render())}", markup=True, highlight=False)
        if u.debug:
            u.err.print(traceback.format_exc(), markup=False, highlight=False)
        raise SystemExit(int(e.exit_code)) from None
    except KeyboardInterrupt:
        ui().err.print("[yellow]interrupted[/]")
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None
    except typer.Exit as e:
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        ui().err.print("[yellow]interrupted[/]")
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None
    except Exception as e:  # command-line usage errors (typer's exceptions) and bugs
        if isinstance(e, _usage_errors()):
            import io

            shown = io.StringIO()  # typer's message quotes the command line: printed escaped, as all else
            e.show(file=shown)  # type: ignore[attr-defined]
            ui().err.print(
                _given_on_one_line(shown.getvalue().rstrip("\n")),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            raise SystemExit(int(ExitCode.USAGE)) from None
        u = ui()
        u.err.print(f"internal error: {type(e).__name__}: {one_line(str(e))}", markup=False, highlight=False)
        if u.debug:
            u.err.print(traceback.format_exc(), markup=False, highlight=False)
        else:
            u.err.print("run again with --debug for the traceback, and report it", markup=False)
        raise SystemExit(int(ExitCode.INTERNAL)) from None


def _given_on_one_line(text: str) -> str:
    """text with every value given on the command line or in an RVPORT_* variable that holds a newline (a
    path such as `p\nerror: FORGED`) shown on one line, wherever a message quotes it: a value given cannot
    print a line of its own. The message's own lines are kept."""
    import os
    import sys

    given = [*sys.argv[1:], *(v for k, v in os.environ.items() if k.startswith("RVPORT_"))]
    for value in sorted({v for v in given if "\n" in v}, key=len, reverse=True):
        text = text.replace(value, one_line(value))
    return text


def _usage_errors() -> tuple[type[Exception], ...]:
    """The base class of typer's command-line errors (bad option, missing argument, bad value), found from
    typer's own public BadParameter: typer vendors its parser (>= 0.25) or re-exports click's (older)."""
    return tuple(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException") or (
        typer.BadParameter,
    )
