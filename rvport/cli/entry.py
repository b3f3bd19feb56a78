"""The process entry point (the `rvport` script and `python -m rvport`).

It installs the Ctrl-C and SIGTERM handlers before the command line's modules (Typer, Rich, the catalogue)
are imported, so that an interrupt during start-up ends the run as one at any other time does:
`interrupted`, exit 8, no traceback. Only the standard library is imported here.
"""

from __future__ import annotations

import sys

from rvport.cli.signals import install_handlers

INTERRUPTED = 8  # rvport.errors.ExitCode.INTERRUPTED (not imported: only the standard library comes first)


def main() -> None:
    install_handlers()
    try:
        from rvport.cli.app import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(INTERRUPTED) from None
    run()
