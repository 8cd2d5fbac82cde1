"""Untrusted text as data: what a probe, repository, plan or policy said, made printable.

Everything such a source produced reaches the terminal through this module: Rich markup is
never interpreted (text becomes a ``rich.text.Text``), terminal control sequences are shown
visibly (ESC as ``\\x1b``, CR as ``\\r``, every other C0/C1 control and DEL as ``\\xNN``),
invalid UTF-8, NUL, lone surrogates and the noncharacters U+FFFE/U+FFFF (not XML
characters) are shown as escapes. Nothing printed can change an exit code
(docs/ARCHITECTURE.md, "Trust rules": probe output is data).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from rich.text import Text

__all__ = [
    "Excerpt",
    "decode_output",
    "excerpt",
    "json_output",
    "safe_line",
    "safe_text",
    "untrusted",
]

#: Lines kept from the start and from the end of an output excerpt.
HEAD_LINES = 10
TAIL_LINES = 10
#: Characters kept of one line of output.
MAX_LINE_CHARS = 240

_NAMED = {"\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def _visible(char: str, keep_newline: bool) -> str:
    code = ord(char)
    if char == "\n":
        return char if keep_newline else "\\n"
    if char == "\t" and keep_newline:
        return char
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return _NAMED.get(char, f"\\x{code:02x}")
    # U+FFFE/U+FFFF are valid UTF-8 but not XML 1.0 characters: kept raw they make the
    # JUnit report `submit --junit` writes unparsable (docs/ARCHITECTURE.md, "Trust rules").
    if char in "\u2028\u2029\ufffe\uffff" or 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return char


def decode_output(data: bytes | str) -> str:
    """Decode bytes as UTF-8, showing every invalid byte as ``\\xNN``."""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", "backslashreplace")


def safe_text(value: object) -> str:
    """``value`` as text with every control character (newlines kept) shown visibly."""
    text = decode_output(value) if isinstance(value, bytes | str) else str(value)
    return "".join(_visible(c, keep_newline=True) for c in text)


def safe_line(value: object) -> str:
    """``value`` as one line: controls and newlines shown visibly."""
    text = decode_output(value) if isinstance(value, bytes | str) else str(value)
    return "".join(_visible(c, keep_newline=False) for c in text)


def untrusted(value: object, style: str = "") -> Text:
    """A Rich ``Text`` of ``value`` on one line; markup in it is never interpreted."""
    return Text(safe_line(value), style=style)


@dataclass(frozen=True)
class Excerpt:
    """The first and last lines of an output, and what was cut between them."""

    lines: tuple[str, ...]
    total_lines: int
    total_bytes: int
    note: str


def excerpt(
    data: bytes, head: int = HEAD_LINES, tail: int = TAIL_LINES, width: int = MAX_LINE_CHARS
) -> Excerpt:
    """Bound ``data`` to ``head`` + ``tail`` visible lines of at most ``width`` characters."""
    # Split on LF only: a CR inside a line is shown as \\r, never taken as a line break.
    raw_lines = data.split(b"\n")
    if raw_lines and not raw_lines[-1]:
        raw_lines.pop()
    total = len(raw_lines)
    keep = raw_lines if total <= head + tail else raw_lines[:head] + raw_lines[total - tail :]
    shown: list[str] = []
    long_lines = 0
    for raw in keep:
        line = safe_line(raw)
        if len(line) > width:
            long_lines += 1
            line = line[:width] + "…"
        shown.append(line)
    notes = []
    if total > head + tail:
        omitted = total - head - tail
        shown.insert(head, f"… {omitted} line(s) cut …")
        notes.append(f"{omitted} of {total} lines cut")
    if long_lines:
        notes.append(f"{long_lines} long line(s) cut at {width} characters")
    return Excerpt(tuple(shown), total, len(data), "; ".join(notes))


def json_output(data: bytes) -> tuple[str, str]:
    """``(value, encoding)`` for JSON: the text when valid UTF-8, else base64 marked so."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"
