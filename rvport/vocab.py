"""rvport's fixed choices, each a StrEnum: the one vocabulary the catalogue, the planner, the build and
verify share, and that the JSON schemas mirror (tests/unit/project/test_schema_enums.py writes their lists
from it).

What each member means is data elsewhere: a kind's facts are the kinds table (catalogue/kinds.py), a mode's
the mode registry (catalogue/modes.py). This module only names them, so that every layer may import it.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """A recipe's kind: how its stage builds and what it makes (catalogue/kinds.py)."""

    PYTHON_WHEEL = "python-wheel"
    CARGO_STATICLIB = "cargo-staticlib"
    GO_BINARY = "go-binary"
    TORCH_WHEEL = "torch-wheel"


class Mode(StrEnum):
    """How a stage runs (catalogue/modes.py: the mode registry)."""

    AUTO = "auto"  # not a mode of its own: the planner picks one per recipe (ModeFacts.auto)
    NATIVE = "native"
    QEMU = "qemu"
    CROSS = "cross"
    ACCELERATED = "accelerated"  # a riscv64 stage whose compilers run as native cross compilers


class OutputType(StrEnum):
    """What a recipe's output (`outputs: type:`) is."""

    WHEEL = "wheel"
    STATICLIB = "staticlib"
    SHARED = "shared"
    EXECUTABLE = "executable"
    IMAGE = "image"


class OutputIsa(StrEnum):
    """What a recipe's output must show of the profile's ISA (`outputs: isa:`)."""

    PROFILE = "profile"  # it carries the profile's promised extensions (verify's "carries")
    BASELINE = "baseline"  # it runs on the profile ("runs-on")


class OutputVlen(StrEnum):
    """How a recipe's output's vector code depends on VLEN (`outputs: vlen:`)."""

    # its vector code assumes the VLEN it is built for (vLLM's kernels: -mrvv-vector-bits=zvl), so it runs
    # only where VLEN is exactly the profile's (verify's rule_vlen)
    EXACT = "exact"
    AGNOSTIC = "agnostic"  # it runs at any VLEN at least the profile's


class BuildTree(StrEnum):
    """Where a build stage's /src, the sources and all the build writes beside them, lives (`build_tree:`)."""

    DISK = "disk"  # the build context bound in, written through the engine's storage driver
    # a copy in memory (a tmpfs, at most half the host's memory): for builds that write many files (objects,
    # archives, a wheel's staging tree) on an engine whose storage driver is slow to write
    MEMORY = "memory"


# the output types whose `exports:` verify can check (ELF symbol tables, any archive member)
EXPORTING_OUTPUTS = (OutputType.STATICLIB, OutputType.SHARED, OutputType.EXECUTABLE)


class ArtifactKind(StrEnum):
    """What verify finds a file to be (verify/artifacts.py), whatever the recipe said it is."""

    WHEEL = "wheel"
    ARCHIVE = "archive"
    ELF = "elf"
    DIRECTORY = "directory"
    OTHER = "other"
