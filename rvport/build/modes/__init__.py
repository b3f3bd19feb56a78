"""Build modes: how a stage is rendered natively/under QEMU, cross-compiled, or accelerated."""
