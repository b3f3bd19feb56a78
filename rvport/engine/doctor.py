"""`rvport doctor`: what this host can do for a riscv64 build, and the exact remedy for what is missing."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rvport import proc
from rvport.engine import buildx
from rvport.errors import RvportError
from rvport.host import HostFacts, ToolFound, binfmt_handler, tool_version
from rvport.safetext import one_line
from rvport.target import BUILD_HOSTS
from rvport.target import PLATFORM as RISCV64

if TYPE_CHECKING:
    from rvport.catalogue.model import Recipe

MIN_FREE_GIB = 20
MIN_QEMU_MAJOR = 8  # RVV 1.0 with zvfh; QEMU 10 also has zvfbfmin


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str
    remedy: str | None = None
    blocking: bool = True  # a failed blocking check means no build can run
    short_for: tuple[str, ...] = ()  # a failed host-tool row: the recipes (NAME==VERSION) it falls short for

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "remedy": self.remedy,
            "blocking": self.blocking,
        }


# A tiny static riscv64 program: `exit(42)` via the exit syscall (li a0,42; li a7,93; ecall). Running it
# through binfmt_misc proves that the registered handler starts riscv64 code at all.
_RISCV_EXIT42 = bytes.fromhex(
    "7f454c460201010000000000000000000200f30001000000"  # ELF64 LE, EXEC, RISC-V
    "7800010000000000"
    "4000000000000000"
    "0000000000000000"  # entry 0x10078, phoff 64, shoff 0
    "05000000"
    "4000"
    "3800"
    "0100"
    "4000"
    "0000"
    "0000"  # flags RVC|double, sizes, 1 phdr
    "01000000"
    "05000000"
    "0000000000000000"
    "0000010000000000"
    "0000010000000000"  # PT_LOAD R+X at 0x10000
    "8400000000000000"
    "8400000000000000"
    "0010000000000000"
    "1305a002"
    "9308d005"
    "73000000"  # li a0,42; li a7,93; ecall
)


def probe_riscv64_exec() -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="rvport-doctor-") as d:
        p = Path(d) / "exit42"
        p.write_bytes(_RISCV_EXIT42)
        p.chmod(0o755)
        try:
            cp = proc.run([str(p)], check=False, capture=True, timeout=30)
        except RvportError as e:
            return False, e.message
        except OSError as e:
            return False, str(e)
        return cp.returncode == 42, f"a tiny riscv64 program exited with {cp.returncode} (expected 42)"


def qemu_version(interpreter: str) -> tuple[int, str] | None:
    """Version of the QEMU behind the binfmt handler (the -P wrapper names the real binary)."""
    candidates = [interpreter]
    if "qemu-binfmt" in interpreter:
        candidates += ["/usr/bin/qemu-riscv64-static", "/usr/bin/qemu-riscv64"]
    for c in candidates:
        if not Path(c).exists():
            continue
        try:
            cp = proc.run([c, "--version"], check=False, capture=True, timeout=20)
        except RvportError:
            continue
        first = (cp.stdout or "").splitlines()[:1]
        if first and "version" in first[0]:
            ver = first[0].split("version", 1)[1].strip().split()[0]
            try:
                return int(ver.split(".")[0]), first[0]
            except ValueError:
                continue
    return None


def accelerated_check(host: HostFacts, prefix_images: list[str]) -> Check:
    """Whether riscv64 stages can compile with native cross compilers here (never blocking: plain emulation
    always remains)."""
    if host.is_riscv64:
        return Check(
            name="accelerated stages",
            ok=True,
            blocking=False,
            detail="not needed: stages run natively on riscv64",
        )
    if host.arch not in BUILD_HOSTS:
        return Check(
            name="accelerated stages",
            ok=False,
            blocking=False,
            detail=f"not available on {host.arch}: riscv64 stages compile under plain emulation",
            remedy="an x86_64 or aarch64 host runs the compilers natively (--mode accelerated)",
        )
    made = (
        f"cross toolchain prefix images in the engine: {', '.join(sorted(prefix_images))}"
        if prefix_images
        else "no cross toolchain prefix image yet: the first accelerated build makes it (debootstrap of the "
        "build-platform base, then a few seconds)"
    )
    return Check(
        name="accelerated stages",
        ok=True,
        blocking=False,
        detail=f"{host.arch}: C, C++ and Rust compilers run natively in riscv64 stages; {made}",
    )


DEFAULT_SOCKET = "/var/run/docker.sock"


def docker_host() -> str | None:
    return os.environ.get("DOCKER_HOST") or None


def engine_remedy(docker_host: str | None, *, exists: Callable[[str], bool] = os.path.exists) -> str:
    """What to do when the engine does not answer: where DOCKER_HOST points, the engine there (or the
    variable) is what to fix, not the installation."""
    if docker_host is None:
        return (
            f"install docker.io (apt-get install docker.io) and start dockerd (its socket: "
            f"{DEFAULT_SOCKET}); or run scripts/setup-host"
        )
    shown = one_line(docker_host)
    if docker_host.startswith("unix://"):
        path = docker_host.removeprefix("unix://")
        if not exists(path):
            return (
                f"DOCKER_HOST={shown} names {one_line(path)}, where there is no socket: start the engine "
                f"that listens there, point DOCKER_HOST at the engine's socket, or unset DOCKER_HOST to use "
                f"{DEFAULT_SOCKET}"
            )
    return (
        f"nothing answers at DOCKER_HOST={shown}: start the engine there, point DOCKER_HOST at a running "
        f"engine, or unset DOCKER_HOST to use {DEFAULT_SOCKET}"
    )


def run_checks(host: HostFacts, *, builder: str | None = None, workdir: Path = Path.home()) -> list[Check]:
    checks: list[Check] = []
    try:
        eng = buildx.engine_info()
        checks.append(
            Check(
                name="docker engine",
                ok=True,
                detail=f"Docker {eng['server_version']} ({eng['storage_driver']}) on {eng['architecture']}",
            )
        )
        engine_ok = True
    except RvportError as e:
        engine_ok = False
        checks.append(
            Check(name="docker engine", ok=False, detail=e.message, remedy=engine_remedy(docker_host()))
        )
    bx = buildx.buildx_version() if proc.which("docker") else None
    checks.append(
        Check(
            name="buildx",
            ok=bool(bx),
            detail=bx or "docker buildx is not available",
            remedy=None if bx else "apt-get install docker-buildx (trixie), or scripts/setup-host",
        )
    )
    if bx and not engine_ok:  # no builder can be inspected, and binfmt is not what is missing
        at = docker_host()
        checks.append(
            Check(
                name="builder",
                ok=False,
                detail="not inspected: the Docker engine cannot be reached"
                + (f" at DOCKER_HOST={one_line(at)}" if at else ""),
                remedy=engine_remedy(at),
            )
        )
    elif bx:
        info = buildx.builder_info(builder)
        if info is None:
            checks.append(
                Check(
                    name="builder",
                    ok=False,
                    detail=f"builder {builder!r} not found",
                    remedy="docker buildx ls; create one with docker buildx create --name NAME",
                )
            )
        else:
            plats = info.get("platforms", [])
            ok = host.is_riscv64 or RISCV64 in plats
            checks.append(
                Check(
                    name="builder",
                    ok=ok,
                    detail=f"{info.get('name')} (driver {info.get('driver')}): {', '.join(plats)}",
                    remedy=None
                    if ok
                    else "register the riscv64 binfmt handler (below) or use a "
                    "builder with a native riscv64 node (--builder NAME)",
                )
            )
    checks.append(
        Check(
            name="host architecture",
            ok=True,
            detail=f"{host.arch}, {host.cpus} CPUs, {host.mem_bytes / 2**30:.1f} GiB",
            blocking=False,
        )
    )
    if host.is_riscv64:
        checks.append(Check(name="emulation", ok=True, detail="native riscv64 host: no emulation needed"))
    else:
        h = binfmt_handler()
        if not h or h.get("state") != "enabled":
            checks.append(
                Check(
                    name="binfmt riscv64",
                    ok=False,
                    detail="no enabled qemu-riscv64 binfmt_misc handler",
                    remedy="apt-get install -t bookworm-backports qemu-user-static binfmt-support "
                    "(or scripts/setup-host); mount binfmt_misc first if /proc/sys/fs/binfmt_misc is empty",
                )
            )
        else:
            flags = h.get("flags", "")
            checks.append(
                Check(
                    name="binfmt riscv64",
                    ok="F" in flags,
                    detail=f"{h.get('interpreter')} flags {flags}",
                    remedy=None
                    if "F" in flags
                    else "re-register with the F flag: update-binfmts --disable qemu-riscv64 && "
                    "update-binfmts --enable qemu-riscv64 (scripts/setup-host does it)",
                )
            )
            ran, detail = probe_riscv64_exec()
            checks.append(
                Check(
                    name="riscv64 program runs",
                    ok=ran,
                    detail=detail,
                    remedy=None
                    if ran
                    else "re-register the handler: update-binfmts --disable "
                    "qemu-riscv64 && update-binfmts --enable qemu-riscv64",
                )
            )
            ver = qemu_version(h.get("interpreter", ""))
            if ver is None:
                checks.append(
                    Check(
                        name="qemu version",
                        ok=False,
                        detail="cannot tell the QEMU version",
                        remedy="install qemu-user-static from bookworm-backports (QEMU 10)",
                    )
                )
            else:
                ok = ver[0] >= MIN_QEMU_MAJOR
                checks.append(
                    Check(
                        name="qemu version",
                        ok=ok,
                        detail=ver[1],
                        remedy=None
                        if ok
                        else f"QEMU {ver[0]} lacks RVV 1.0 with zvfh: install "
                        "qemu-user-static from bookworm-backports, then re-register the handler "
                        "(a handler registered before an upgrade keeps the old QEMU open)",
                    )
                )
    try:
        prefixes = buildx.image_tags("rvport/xtc") if proc.which("docker") else []
    except RvportError:
        prefixes = []
    checks.append(accelerated_check(host, prefixes))
    if proc.which("debootstrap"):
        checks.append(
            Check(name="debootstrap", ok=True, detail=proc.which("debootstrap") or "", blocking=False)
        )
    else:
        checks.append(
            Check(
                name="debootstrap",
                ok=False,
                blocking=False,
                detail="not installed: the riscv64 base image cannot be bootstrapped",
                remedy="apt-get install debootstrap, or name a base image by digest (--base-image)",
            )
        )
    free = shutil.disk_usage(workdir if workdir.exists() else Path("/")).free / 2**30
    checks.append(
        Check(
            name="disk space",
            ok=free >= MIN_FREE_GIB,
            detail=f"{free:.0f} GiB free at {workdir}",
            remedy=None
            if free >= MIN_FREE_GIB
            else f"free at least {MIN_FREE_GIB} GiB (docker system prune; rvport cache in ~/.cache/rvport)",
        )
    )
    return checks


def host_tool_checks(
    recipes: Sequence[Recipe], *, blocking: bool, find: Callable[[str], ToolFound] | None = None
) -> list[Check]:
    """One row per program the host runs for these recipes (rvport.catalogue.hosttools: vendoring, Debian
    pins), with the least version each recipe needs: the recipes it falls short for, with what it is and the
    install hint, or that it is enough. blocking: named recipes that cannot be prepared here mean no build
    can run."""
    from rvport.catalogue import hosttools

    find = find or find_tool
    by_tool: dict[str, list[hosttools.Need]] = {}
    for r in recipes:
        for n in hosttools.needs(r):
            by_tool.setdefault(n.tool, []).append(n)
    checks = []
    for tool in hosttools.TOOLS:
        ns = by_tool.get(tool)
        if not ns:
            continue
        found = find(tool)
        short = [(n.recipe, m) for n in ns if (m := hosttools.short_of(n, found)) is not None]
        if short:
            checks.append(
                Check(
                    name=f"host {tool}",
                    ok=False,
                    blocking=blocking,
                    detail="; ".join(m for _r, m in short),
                    remedy=hosttools.install_hint(tool, hosttools.greatest(ns)),
                    short_for=tuple(r for r, _m in short),
                )
            )
            continue
        enough = ", ".join(f"{n.recipe} (>= {n.minimum})" if n.minimum else n.recipe for n in ns)
        checks.append(
            Check(
                name=f"host {tool}",
                ok=True,
                blocking=blocking,
                detail=f"{tool} {found.version or '(version not told)'} at {found.path}, for {enough}",
            )
        )
    return checks


def find_tool(tool: str) -> ToolFound:
    from rvport.catalogue.hosttools import TOOLS

    t = TOOLS[tool]
    return tool_version(t.name, t.version_args, t.version, also=t.also)


def short_recipes(checks: list[Check]) -> list[str]:
    """The recipes the failed host-tool rows fall short for (NAME==VERSION), in order, each once."""
    return list(dict.fromkeys(r for c in checks if not c.ok for r in c.short_for))


def can_build(checks: list[Check]) -> bool:
    return all(c.ok for c in checks if c.blocking)
