"""rvport: pinned recipes in, proven riscv64 artifacts out."""

__version__ = "0.1.0"
