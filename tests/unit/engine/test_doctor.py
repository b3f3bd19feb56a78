"""rvport doctor's pure checks (no docker)."""

from __future__ import annotations

from rvport.engine.doctor import accelerated_check
from rvport.host import HostFacts


def host(arch: str) -> HostFacts:
    return HostFacts(arch=arch, cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=arch != "riscv64")


def test_x86_64_and_aarch64_hosts_accelerate_and_say_whether_the_prefix_exists():
    c = accelerated_check(host("x86_64"), [])
    assert c.ok and not c.blocking and "C, C++ and Rust compilers run natively" in c.detail
    assert "the first accelerated build makes it" in c.detail
    c = accelerated_check(host("aarch64"), ["rvport/xtc:debian-trixie-xtc-arm64-0123456789ab"])
    assert c.ok and "rvport/xtc:debian-trixie-xtc-arm64-0123456789ab" in c.detail


def test_other_hosts_fall_back_to_plain_emulation_without_blocking():
    c = accelerated_check(host("ppc64le"), [])
    assert not c.ok and not c.blocking and "plain emulation" in c.detail and "x86_64 or aarch64" in c.remedy
    assert accelerated_check(host("riscv64"), []).ok
