"""File names as they come (issue 10, item 5): a git tree may hold names that are not UTF-8.

Such a name cannot be stored as text (SQLite and PostgreSQL refuse lone surrogates) nor shown, so
the sources turn every name into text with a lossless, injective escape, applied only where
needed: a byte that is not part of valid UTF-8 becomes `\\xNN`, and a backslash becomes `\\\\`.
A valid name without a backslash (every real model repo file) is unchanged; `unescape_name`
gives the exact bytes back. The escaped form is what the store holds and what every door shows.
"""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\(\\|x[89a-f][0-9a-f])")


def escape_name(raw: bytes) -> str:
    """The text form of a file name given as bytes (see the module docstring)."""
    if b"\\" not in raw:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
    text = raw.decode("utf-8", errors="surrogateescape")
    out: list[str] = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif "\udc80" <= ch <= "\udcff":
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(ch)
    return "".join(out)


def escape_text_name(name: str) -> str:
    """A name a JSON API gave as text, made storable: lone surrogates (a `\\udcff` escape in the
    JSON) are escaped as their UTF-8 bytes would be; any other name is unchanged."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return escape_name(name.encode("utf-8", errors="surrogatepass"))
    return name


def unescape_name(name: str) -> bytes:
    """The exact bytes of a name `escape_name` made (the inverse for every byte string)."""

    def one(m: re.Match[str]) -> str:
        token = m.group(1)
        return "\\" if token == "\\" else chr(0xDC00 + int(token[1:], 16))

    if "\\" not in name:
        return name.encode("utf-8")
    return _ESCAPE.sub(one, name).encode("utf-8", errors="surrogateescape")


__all__ = ["escape_name", "escape_text_name", "unescape_name"]
