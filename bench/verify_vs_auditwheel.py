#!/usr/bin/env python3
"""Verify the same riscv64 wheels with `rvport verify artifacts` and with `auditwheel show`, in one run,
and print how much faster rvport is (target: at least 3x, and a torch-sized wheel in seconds).

    python bench/verify_vs_auditwheel.py                 # fetch real riscv64 wheels with pip, synthesize a
    torch-sized one python bench/verify_vs_auditwheel.py --wheels DIR    # or bench the wheels in DIR python
    bench/verify_vs_auditwheel.py --no-torch      # skip the synthesized torch-sized wheel python
    bench/verify_vs_auditwheel.py --rich 7        # seven symbol-rich libraries in it, not one python
    bench/verify_vs_auditwheel.py --symbols 0     # none: its cost is then mostly bytes

Needs auditwheel (installed with pip at run time when missing) and pip's configured package index for the
real wheels. The symbol-rich library of the torch-sized wheel is assembled with the host's riscv64 binutils
(binutils-riscv64-linux-gnu) when installed, else with docker and the test fixtures' cross toolchain image
(tests/fixtures/toolchain.py); without either the big library is a padded real one. Both tools run as
subprocesses, each the way it is used: rvport once for all wheels, auditwheel once per wheel. Each is timed
over --repeat runs and the best time is kept.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_WHEELS = ["msgspec==0.23.0", "tokenizers", "safetensors"]
RV_PLATFORMS = ["manylinux_2_39_riscv64", "manylinux_2_31_riscv64", "manylinux_2_28_riscv64"]


def ensure_auditwheel() -> list[str]:
    exe = shutil.which("auditwheel")
    if exe:
        return [exe]
    print("installing auditwheel with pip ...", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "auditwheel"], check=True)
    return [sys.executable, "-m", "auditwheel"]


def fetch_real(dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    for req in REAL_WHEELS:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "-d",
            str(dest),
        ]
        for p in RV_PLATFORMS:
            cmd += ["--platform", p]
        subprocess.run(cmd + [req], check=True)
    return sorted(dest.glob("*.whl"))


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _symbols_source(n_symbols: int) -> str:
    lines = [
        ".text",
        ".globl torch_base",
        ".type torch_base,@function",
        "torch_base:",
        "  addi sp,sp,-16",
        "  sd ra,8(sp)",
        "  call strlen@plt",
        "  call malloc@plt",
        "  call memcpy@plt",
        "  ld ra,8(sp)",
        "  addi sp,sp,16",
        "  ret",
        ".size torch_base,.-torch_base",
    ]
    for i in range(n_symbols):
        lines += [
            f".globl at_native_op_{i}",
            f".type at_native_op_{i},@function",
            f".set at_native_op_{i},torch_base",
        ]
    return "\n".join(lines) + "\n"


# A stand-in libc.so.6 for linking with the host's riscv64 binutils: the three functions the library
# calls, at version GLIBC_2.27, so that the library needs libc.so.6 and GLIBC_2.27 as a real one does.
_LIBC_STUB = "".join(
    f".globl {f}\n.type {f},@function\n{f}:\n  ret\n" for f in ("strlen", "malloc", "memcpy")
)
_LIBC_MAP = "GLIBC_2.27 { global: strlen; malloc; memcpy; local: *; };\n"


def _host_binutils() -> tuple[str, str] | None:
    found = (shutil.which("riscv64-linux-gnu-as"), shutil.which("riscv64-linux-gnu-ld"))
    return (found[0], found[1]) if found[0] and found[1] else None


def build_symbol_library(n_symbols: int, work: Path) -> bytes | None:
    """A real riscv64 shared library exporting n_symbols functions, as libtorch_cpu.so exports some
    hundred thousand (tools that read symbol tables pay for them). Assembled with the host's riscv64
    binutils when installed (binutils-riscv64-linux-gnu), else with the cross toolchain in the docker image
    the test fixtures use; None when neither is there."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "syms.S").write_text(_symbols_source(n_symbols))
    tools = _host_binutils()
    if tools:
        as_, ld = tools
        (work / "libc.S").write_text(_LIBC_STUB)
        (work / "libc.map").write_text(_LIBC_MAP)
        flags = ["-march=rv64gc", "-mabi=lp64d"]
        for cmd in (
            [as_, *flags, "libc.S", "-o", "libc.o"],
            [
                ld,
                "-shared",
                "-soname",
                "libc.so.6",
                "--version-script",
                "libc.map",
                "libc.o",
                "-o",
                "libc.so.6",
            ],
            [as_, *flags, "syms.S", "-o", "syms.o"],
            [ld, "-shared", "--hash-style=gnu", "syms.o", "libc.so.6", "-o", "libsyms.so"],
        ):
            subprocess.run(cmd, cwd=work, check=True)
        return (work / "libsyms.so").read_bytes()
    sys.path.insert(0, str(ROOT))
    from tests.fixtures.elfs import docker_ready
    from tests.fixtures.toolchain import xtc_image

    why = docker_ready()
    if why:
        print(f"no symbol-rich library ({why}): the big library will be a padded real one")
        return None
    subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{work}:/w",
            "-w",
            "/w",
            xtc_image(),
            "riscv64-linux-gnu-gcc-14",
            "-shared",
            "-fPIC",
            "syms.S",
            "-o",
            "libsyms.so",
        ],
        check=True,
    )
    return (work / "libsyms.so").read_bytes()


def synthesize_torch(
    real: list[Path],
    dest: Path,
    *,
    n_so: int,
    n_py: int,
    big_mb: int,
    big_lib: bytes | None = None,
    rich: int = 1,
) -> Path:
    """A torch-sized wheel built from real riscv64 ELF files: one big library (big_lib, or the largest
    real .so, padded to big_mb MB with real code bytes), n_so more shared libraries (the real ones) and
    n_py Python files, with a correct RECORD and a manylinux_2_31_riscv64 tag. With big_lib, `rich` of
    the libraries are symbol-rich: the big one and rich - 1 copies of big_lib among the others."""
    elfs: list[bytes] = []
    for w in real:
        with zipfile.ZipFile(w) as zf:
            elfs += [zf.read(i) for i in zf.infolist() if zf.read(i)[:4] == b"\x7fELF"]
    if not elfs:
        raise SystemExit("no riscv64 ELF files found in the real wheels")
    elfs.sort(key=len)
    files: dict[str, bytes] = {}
    # Padding made of real riscv64 code compresses like libtorch_cpu.so does (about 3x), unlike random bytes.
    pad = (elfs[-1] * ((big_mb << 20) // len(elfs[-1]) + 1))[: big_mb << 20]
    big = big_lib or elfs[-1]
    files["torch/lib/libtorch_cpu.so"] = big + pad
    small = elfs[:-1] or elfs
    for i in range(n_so):
        every20 = i // 20 if i % 20 == 0 else None
        if big_lib and every20 is not None and every20 < rich - 1:
            files[f"torch/lib/libtorch_part{i:04d}.so"] = big_lib
        else:
            files[f"torch/lib/libtorch_part{i:04d}.so"] = elfs[-1] if i % 20 == 0 else small[i % len(small)]
    for i in range(n_py):
        files[f"torch/pkg{i // 100:03d}/mod{i:05d}.py"] = (f"# module {i}\n" + "x = 1\n" * (i % 200)).encode()
    dist = "torch-2.9.0.dist-info"
    files[f"{dist}/METADATA"] = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n"
    files[f"{dist}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: rvport-bench\nRoot-Is-Purelib: false\n"
        b"Tag: cp312-cp312-manylinux_2_31_riscv64\n"
    )
    rec = io.StringIO()
    w = csv.writer(rec, lineterminator="\n")
    for name, data in files.items():
        w.writerow([name, _hash(data), len(data)])
    w.writerow([f"{dist}/RECORD", "", ""])
    files[f"{dist}/RECORD"] = rec.getvalue().encode()
    path = dest / "torch-2.9.0-cp312-cp312-manylinux_2_31_riscv64.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def run_rvport(wheels: list[Path], profile: str, env: dict[str, str] | None = None) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rvport.cli.app import main; main()",
            "verify",
            "artifacts",
            *map(str, wheels),
            "--profile",
            profile,
            "--isa",
            "baseline",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if r.returncode != 0:
        raise SystemExit(f"rvport verify failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


def run_auditwheel(aw: list[str], wheels: list[Path]) -> None:
    for w in wheels:
        r = subprocess.run([*aw, "show", str(w)], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise SystemExit(f"auditwheel show {w.name} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=Path, help="bench the wheels in this directory instead of fetching")
    ap.add_argument("--no-torch", action="store_true", help="do not synthesize the torch-sized wheel")
    ap.add_argument("--so", type=int, default=120, help="shared libraries in the torch-sized wheel")
    ap.add_argument("--py", type=int, default=6000, help="Python files in the torch-sized wheel")
    ap.add_argument("--big-mb", type=int, default=350, help="size of its biggest library, MB")
    ap.add_argument(
        "--symbols",
        type=int,
        default=150_000,
        help="functions exported by the big library (0: pad a real library instead)",
    )
    ap.add_argument(
        "--rich",
        type=int,
        default=1,
        help="symbol-rich libraries in the torch-sized wheel: the big one and --rich - 1 copies among "
        "the others (at most --so / 20 + 1)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", default="rv64gc")
    args = ap.parse_args()

    aw = ensure_auditwheel()
    work = Path(tempfile.mkdtemp(prefix="rvport-bench-"))
    try:
        real = sorted(args.wheels.glob("*.whl")) if args.wheels else fetch_real(work / "real")
        wheels = list(real)
        torch = None
        if not args.no_torch:
            t = time.perf_counter()
            big_lib = build_symbol_library(args.symbols, work / "syms") if args.symbols else None
            torch = synthesize_torch(
                real, work, n_so=args.so, n_py=args.py, big_mb=args.big_mb, big_lib=big_lib, rich=args.rich
            )
            with zipfile.ZipFile(torch) as zf:
                n = len(zf.infolist())
            print(
                f"synthesized {torch.name}: {torch.stat().st_size / 1e6:.0f} MB, {n} members "
                f"({time.perf_counter() - t:.1f}s)"
            )
            wheels.append(torch)
        print(f"wheels: {', '.join(w.name for w in wheels)}")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        t_rv = best_of(args.repeat, lambda: run_rvport(wheels, args.profile))
        t_aw = best_of(args.repeat, lambda: run_auditwheel(aw, wheels))
        print(f"rvport verify artifacts : {t_rv:8.2f} s  (all {len(wheels)} wheels, one process)")
        print(f"auditwheel show         : {t_aw:8.2f} s  (one process per wheel)")
        ratio = t_aw / t_rv
        print(
            f"ratio auditwheel/rvport : {ratio:8.2f}x  (target >= 3x: {'met' if ratio >= 3 else 'NOT met'})"
        )
        if torch is not None:
            t_t = best_of(args.repeat, lambda: run_rvport([torch], args.profile))
            print(f"torch-sized wheel alone : {t_t:8.2f} s with rvport")
        return 0 if ratio >= 3 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
