"""The target and the build platforms, named once: riscv64's platform, triplet and Rust target, and how each
build platform is called by Docker, Debian and Rust.

Plain values, no I/O; every layer may import them.
"""

from __future__ import annotations

from collections.abc import Mapping

# The target: what every artifact runs on.
PLATFORM = "linux/riscv64"  # docker / buildx platform of riscv64 stages
TRIPLET = "riscv64-linux-gnu"  # GNU triplet: cross tool names, Debian cross packages
RUST_TARGET = "riscv64gc-unknown-linux-gnu"  # Rust's target triple for riscv64 Linux
DEBIAN_TARGET_ARCH = "riscv64"  # dpkg architecture of the target (`dpkg --add-architecture`)
GOARCH = "riscv64"

# Host machine (normalised `uname -m`) -> docker platform.
DOCKER_PLATFORM: Mapping[str, str] = {"x86_64": "linux/amd64", "aarch64": "linux/arm64", "riscv64": PLATFORM}

# Docker platform -> Debian architecture (debootstrap --arch).
DEBIAN_ARCH: Mapping[str, str] = {
    PLATFORM: DEBIAN_TARGET_ARCH,
    "linux/amd64": "amd64",
    "linux/arm64": "arm64",
}

# Build platforms whose own Rust target is needed next to riscv64's (build scripts, proc-macros).
HOST_RUST_TARGET: Mapping[str, str] = {
    "linux/amd64": "x86_64-unknown-linux-gnu",
    "linux/arm64": "aarch64-unknown-linux-gnu",
}

# Hosts that can run riscv64 cross compilers natively (cross and accelerated stages): Debian ships riscv64
# cross toolchains for these.
BUILD_HOSTS = frozenset({"x86_64", "aarch64"})

# What rvport adds to a source tree, in a directory of its own (relative to the tree's top directory;
# /src/<path> in a stage): the planner points CARGO_HOME there, the tree step writes it, recipes may not name
# it as a dest.
RVPORT_DIR = ".rvport"
CARGO_HOME = f"{RVPORT_DIR}/cargo-home"  # a cargo home: config.toml with the source replacement, nothing else
