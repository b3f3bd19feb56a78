"""A wheel's RECORD: parsed, and each file's entry checked against the digest and size of its bytes."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re

RECORD = re.compile(r"^[^/]+\.dist-info/RECORD\Z")
RECORD_SIGNATURES = re.compile(r"^[^/]+\.dist-info/RECORD\.(jws|p7s)\Z")
STRONG_HASHES = {"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"}

Record = dict[str, tuple[str, str]]  # path -> (hash field, size field)


def parse_record(text: str) -> Record:
    out: Record = {}
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        path = row[0]
        out[path] = (row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
    return out


def record_digest(digest: bytes) -> str:
    """A digest spelled as RECORD spells it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def entry_algorithm(fname: str, record: Record) -> str | None:
    """The hash algorithm to compute for fname's bytes; None when its entry cannot be checked (no entry, no
    hash, a weak or unknown algorithm: check_entry says why)."""
    entry = record.get(fname)
    if entry is None:
        return None
    algo, _, digest = entry[0].partition("=")
    if not digest or algo not in STRONG_HASHES or algo not in hashlib.algorithms_available:
        return None
    return algo


def check_entry(fname: str, digest: str | None, size: int, record: Record, reasons: list[str]) -> int:
    """Check fname's RECORD entry against the digest (computed with entry_algorithm's algorithm, spelled by
    record_digest) and the size of its bytes; append what is wrong to reasons. 1 when the entry was
    checked."""
    entry = record.get(fname)
    if entry is None:
        reasons.append(f"{fname}: not listed in RECORD")
        return 0
    hash_field, size_field = entry
    algo, _, expected = hash_field.partition("=")
    if not expected:
        reasons.append(f"{fname}: RECORD has no hash for it")
        return 0
    if algo not in STRONG_HASHES or algo not in hashlib.algorithms_available:
        reasons.append(f"{fname}: RECORD hash algorithm {algo!r} is not accepted (sha256 or stronger)")
        return 0
    if digest != expected:
        reasons.append(f"{fname}: RECORD {algo} mismatch (file changed after the wheel was built)")
    if size_field and re.fullmatch(r"[0-9]{1,20}", size_field) and int(size_field) != size:
        reasons.append(f"{fname}: RECORD size {size_field} but the file has {size} bytes")
    return 1
