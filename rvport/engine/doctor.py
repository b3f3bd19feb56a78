"""`rvport doctor`: what this host can do for a riscv64 build, and the exact remedy for what is missing."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rvport import proc
from rvport.engine import buildx
from rvport.errors import RvportError
from rvport.host import HostFacts, binfmt_handler
from rvport.target import BUILD_HOSTS
from rvport.target import PLATFORM as RISCV64

MIN_FREE_GIB = 20
MIN_QEMU_MAJOR = 8  # RVV 1.0 with zvfh; QEMU 10 also has zvfbfmin


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str
    remedy: str | None = None
    blocking: bool = True  # a failed blocking check means no build can run

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
    except RvportError as e:
        checks.append(
            Check(
                name="docker engine",
                ok=False,
                detail=e.message,
                remedy="install docker.io (apt-get install docker.io) and start dockerd; "
                "or run scripts/setup-host",
            )
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
    if bx:
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


def can_build(checks: list[Check]) -> bool:
    return all(c.ok for c in checks if c.blocking)
