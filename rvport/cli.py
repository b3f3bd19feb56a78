"""Typer app: parse, call, render. No logic here; errors become exit codes (see rvport.errors)."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .console import configure, ui
from .errors import ExitCode, RvportError
from .sources_cli import register as register_sources
from .verify.cli import app as verify_app

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Pinned recipes in, proven riscv64 artifacts out.")
app.add_typer(verify_app, name="verify")
register_sources(app)  # fetch, pin (rvport/sources_cli.py)


def _version(value: bool) -> None:
    if value:
        print(f"rvport {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    debug: bool = typer.Option(False, "--debug", help="Show full commands and tracebacks."),
    ci: bool = typer.Option(False, "--ci", help="Behave as in CI: plain timestamped progress, folded groups."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    configure(force_ci=ci, debug=debug)


def main() -> None:
    """Console-script entry: run the app and turn errors into exit codes, never tracebacks."""
    try:
        app(standalone_mode=False)
    except RvportError as e:
        u = ui()
        u.err.print(f"[bold red]error:[/] {e.render()}", markup=True, highlight=False)
        if u.debug:
            u.err.print(traceback.format_exc())
        raise SystemExit(int(e.exit_code))
    except KeyboardInterrupt:
        ui().err.print("[yellow]interrupted[/]")
        raise SystemExit(int(ExitCode.INTERRUPTED))
    except typer.Exit as e:
        raise SystemExit(e.exit_code)
    except typer.Abort:
        raise SystemExit(int(ExitCode.INTERRUPTED))
    except Exception as e:  # click usage errors and bugs
        import click
        if isinstance(e, click.exceptions.UsageError):
            e.show()
            raise SystemExit(int(ExitCode.USAGE))
        if isinstance(e, click.exceptions.ClickException):
            e.show()
            raise SystemExit(int(ExitCode.USAGE))
        u = ui()
        u.err.print(f"[bold red]internal error:[/] {type(e).__name__}: {e}")
        if u.debug:
            u.err.print(traceback.format_exc())
        else:
            u.err.print("run again with --debug for the traceback, and report it")
        raise SystemExit(int(ExitCode.INTERNAL))
