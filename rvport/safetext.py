"""Untrusted text made safe to show: on a terminal, in XML and in Markdown.

Names and messages that rvport prints come from outside (wheel member names, file names, recipe fields, build
output). A terminal obeys the control characters in them: an escape sequence could clear the screen or print
"all artifacts PASS" over a table. So every control character (C0 but newline and tab, DEL, C1), the
bidirectional overrides and isolates, and the lone surrogates that stand for undecodable bytes of a file name
(surrogateescape) are shown escaped instead, as a Python literal would show them: `\\x1b`, `\\u202e`.
Only the standard library: rvport.cli (the console) and rvport.verify (its report) both use it.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, bidi embeddings/overrides/isolates/marks, line and
# paragraph separators, and lone surrogates (undecodable bytes kept by surrogateescape).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1
    "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"  # bidi controls, line separators
    "\ud800-\udfff]"  # lone surrogates
)
_UNSAFE_LINE = re.compile("[\t\n]")
# Characters XML 1.0 cannot hold at all, even as character references.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # a byte surrogateescape could not decode: show the byte
        return f"\\x{n - 0xDC00:02x}"
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    return f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}"


def printable(text: str, *, lines: bool = True) -> str:
    """text with every character a terminal would obey shown escaped. lines=False: newlines and tabs too
    (for a name on one line, which must not start a line of its own)."""
    out = _UNSAFE.sub(_escape, text)
    return out if lines else _UNSAFE_LINE.sub(_escape, out)


def one_line(value: object) -> str:
    """A name or path (a file name, an --output path, a member's name) made safe to show on one line: what
    printable escapes, and newlines too (a tab, which cannot start a line, is kept), so that a name cannot
    print a line of its own (`p\nerror: FORGED`)."""
    return printable(str(value)).replace("\n", "\\n")


def xml_text(text: str) -> str:
    """text that XML 1.0 can hold (ElementTree escapes &, < and > itself): characters XML cannot carry at
    all are shown escaped, lone surrogates as the bytes they stand for; the terminal's controls too, so that
    a CI page showing the report is not fooled either."""
    return printable(_XML_ILLEGAL.sub(_escape, text))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")


def md_text(text: str) -> str:
    """text for a Markdown table cell or line (a GitHub job summary): on one line, controls escaped, and
    every character Markdown or HTML would act on backslash-escaped, so a name cannot add a column, a link,
    an image or an HTML tag."""
    return _MD_SPECIAL.sub(r"\\\1", printable(text, lines=False))


def md_code(text: str) -> str:
    """text inside a Markdown code span: on one line, controls escaped; a backtick cannot end the span (it
    becomes an apostrophe-like U+02CB) and a pipe cannot end the table cell."""
    return printable(text, lines=False).replace("`", "\u02cb").replace("|", "\\|")


def clean_xml(root: object) -> None:
    """Make every text, tail and attribute of an ElementTree element (and its children) xml_text, in place:
    the tree then serialises to well-formed XML whatever names and messages went in."""
    for el in root.iter():  # type: ignore[attr-defined]
        for attr in ("text", "tail"):
            value = getattr(el, attr)
            if value is not None:
                setattr(el, attr, xml_text(str(value)))
        for k, v in list(el.attrib.items()):
            el.attrib[k] = xml_text(str(v))
