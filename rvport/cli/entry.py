"""The process entry point (the `rvport` script and `python -m rvport`).

It installs the Ctrl-C and SIGTERM handlers before the command line's modules (Typer, Rich, the catalogue)
are imported, so that an interrupt during start-up ends the run as one at any other time does:
`interrupted`, exit 8, no traceback. When the command is over, an interrupt that arrives while its output is
flushed is said too (exit 8, with what is kept), and one later still is ignored: it never kills the process
silently with 130. Only the standard library is imported here.
"""

from __future__ import annotations

import sys

from rvport.cli.signals import finish, install_handlers

INTERRUPTED = 8  # rvport.errors.ExitCode.INTERRUPTED (not imported: only the standard library comes first)
LATE = "interrupted after the command had finished: everything it wrote is complete\n"


def _say(text: str) -> None:
    try:
        sys.stderr.write(text)
    except (OSError, ValueError):
        pass


def main() -> None:
    install_handlers()
    code: object = 0
    try:
        try:
            from rvport.cli.app import main as run

            run()
        except SystemExit as e:
            code = e.code
        except KeyboardInterrupt:  # during start-up, or after the app's own handlers had run
            _say("interrupted\n")
            code = INTERRUPTED
    except KeyboardInterrupt:  # a second one, while the first was handled
        code = INTERRUPTED
    try:
        late = finish()
    except KeyboardInterrupt:  # in the instant before finish() noted signals instead of raising them
        late = True
    if late and code != INTERRUPTED:
        _say(LATE)
        code = INTERRUPTED
    raise SystemExit(code)
