"""How much work verify may do on one artifact: the caps (data, one frozen value), and the error a reader
raises when an artifact would pass one.

Artifacts handed to verify are untrusted and rvport may run as root: every count, size and table a file
declares is checked against these caps before it is read, so a crafted file ends in a failed verdict that
names the cap, never in a hang, an out-of-memory or an internal error. The defaults are far above what real
artifacts need (a torch or vLLM wheel of hundreds of MB, libraries with tens of thousands of sections);
docs/verify.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Caps on the work verify does per artifact. Over one, the artifact fails with the reason
    "over a verify cap: ..." naming the cap."""

    file_bytes: int = 8 * GiB  # an artifact file (wheel, archive, ELF file): larger ones are not read
    wheel_members: int = 200_000  # files in one wheel (a torch wheel has about 15,000)
    member_bytes: int = 4 * GiB  # one wheel member, inflated (the zip directory's size; never inflated past)
    wheel_bytes: int = 16 * GiB  # all of one wheel's members, inflated
    metadata_bytes: int = 64 * MiB  # a wheel's RECORD or WHEEL file, inflated
    kept_bytes: int = 512 * MiB  # of one member held in memory (an ar archive in a wheel, a big ELF's tables)
    ar_members: int = 1_000_000  # members of one ar archive
    sections: int = (
        1 << 18
    )  # section headers of one ELF file (-ffunction-sections objects: tens of thousands)
    segments: int = 1 << 16  # program headers of one ELF file (PN_XNUM is the most its header can say)
    tables: int = 256  # sections one ELF file's facts are read from (attributes, dynamic, versions, strings)
    small_table_bytes: int = 1 * MiB  # one table walked entry by entry: .riscv.attributes, .dynamic, versions
    entries: int = 4096  # entries walked in one .dynamic or .gnu.version_r table (real ones: under 200)
    table_bytes: int = 64 * MiB  # one section or table read (.dynstr of a big C++ library is tens of MB)
    elf_read_bytes: int = 256 * MiB  # all the tables read of one ELF file
    symbols: int = 4_000_000  # entries of one symbol table read for --export

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEFAULT_LIMITS = Limits()


class OverLimit(Exception):
    """Reading an artifact would pass a cap: `what` it has (a count or a size), the cap's name and value."""

    def __init__(self, what: str, value: int, cap: str, limit: int) -> None:
        super().__init__(f"{what}: {value}, over the cap of {limit} ({cap})")
        self.cap = cap


REASON = "over a verify cap"


def check(what: str, value: int, cap: str, limit: int) -> None:
    """Raise OverLimit when value passes limit."""
    if value > limit:
        raise OverLimit(what, value, cap, limit)
