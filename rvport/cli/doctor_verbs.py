"""`rvport doctor`: what this host can do for a riscv64 build (rvport/engine/doctor.py), and what to fix."""

from __future__ import annotations

from rvport.cli import settings, views
from rvport.cli.console import ui
from rvport.cli.options import DoctorArgs
from rvport.errors import HostNotReady
from rvport.host import gather


@settings.command(settings.DOCTOR, short_help="What this host can do for a riscv64 build, and what to fix.")
def doctor(o: DoctorArgs) -> None:
    """What this host can do for a riscv64 build, and what to fix. Exit 0 when a build can run, 6 if not."""
    from rvport.engine.doctor import can_build, run_checks

    checks = run_checks(gather(), builder=o.builder)
    ui().console.print(views.checks_table(checks), crop=False)
    if not can_build(checks):
        raise HostNotReady(
            "this host cannot run a riscv64 build yet",
            hint="apply the fixes above, or run scripts/setup-host as root",
        )
    ui().console.print("[green]ready:[/] a riscv64 build can run here")
