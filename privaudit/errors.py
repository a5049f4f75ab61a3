"""User-facing errors: each carries one line that names what is wrong.

The CLI prints the message of any `PrivauditError` on one line and exits with code 2; anything
else is a bug and keeps its traceback.
"""

import functools
import json
import re
import unicodedata
from typing import Any

_BREAKS = re.compile(r"\s*[\r\n]+\s*")


class PrivauditError(Exception):
    """A failure caused by the user's input (config, files, parameters), not by privaudit. Its
    message is one line even when it quotes a value holding line breaks (a label, a file's
    text): the breaks are read as spaces."""

    def __str__(self) -> str:
        return _BREAKS.sub(" ", super().__str__())


class ConfigError(PrivauditError):
    """A campaign field is missing, mistyped or out of range; the message names its path."""


class DataError(PrivauditError):
    """A dataset cannot be loaded; the message names the dataset, the folder and what is expected."""


class UsageError(PrivauditError):
    """A command-line argument is missing or malformed (`--dim abc`); the message names it."""


UNSAFE = {"Cc": "control character", "Cf": "invisible format character", "Cs": "surrogate",
          "Co": "private-use character", "Cn": "unassigned character or noncharacter",
          "Zl": "line separator", "Zp": "paragraph separator"}
"""The Unicode categories a terminal or a page does not show as themselves, with what each is: a
control character moves the cursor or rewrites the screen (an escape sequence); a format character
is invisible and may reorder what follows (the bidi marks U+202A–U+202E, U+2066–U+2069, U+200E,
U+200F, U+061C) or hide inside a word (U+200B–U+200D, U+2060, U+FEFF), so two texts that print alike
differ; a surrogate, a private-use, an unassigned character or a noncharacter (U+FFFF) has no glyph
anyone agreed on; a line or paragraph separator breaks a line where one line was printed."""


def _unsafe(char: str, allowed: str) -> bool:
    return char not in allowed and unicodedata.category(char) in UNSAFE


def unsafe_character(text: str, allowed: str = "") -> str | None:
    """The first character of `text` (other than those in `allowed`) that a terminal or a page
    would not show as itself (`UNSAFE`), or None. Every such character is non-printable in
    Python's sense, so a printable text is answered without looking at each character."""
    if text.isprintable():
        return None
    return next((char for char in text if _unsafe(char, allowed)), None)


def escaped(char: str) -> str:
    """One character as Python writes it in a string literal: `\\x1b`, `\\u202e`, `\\U000e0001`."""
    return char.encode("unicode_escape").decode("ascii")


class _Shown(dict):
    """`str.translate`'s table for `printable`: each code point as shown (its escape when it is
    unsafe, else itself), worked out the first time it is met, so a text of 300,000 characters
    costs one lookup each in C. It forgets what it learnt past `_SHOWN_CACHE` code points, so a
    text holding every code point cannot grow it without bound."""

    def __init__(self, allowed: str, escape=escaped) -> None:
        super().__init__()
        self.allowed = allowed
        self.escape = escape

    def __missing__(self, code: int) -> str:
        if len(self) >= _SHOWN_CACHE:
            self.clear()
        char = chr(code)
        shown = self.escape(char) if _unsafe(char, self.allowed) else char
        self[code] = shown
        return shown


_SHOWN_CACHE = 1 << 16


@functools.cache
def _table(allowed: str) -> _Shown:
    return _Shown(allowed)


def _json_escaped(char: str) -> str:
    """One character as a JSON string escape (`\\u202e`; a surrogate pair beyond the BMP)."""
    data = char.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(data[i:i + 2], 'big'):04x}" for i in range(0, len(data), 2))


_JSON_SHOWN = _Shown("\n", _json_escaped)


def json_text(value: Any, **options: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **options)` with every character a terminal would
    not show as itself (`UNSAFE`) written as its JSON escape: the same data for a JSON reader,
    and a label holding U+202E or an escape sequence never reaches the terminal raw. JSON escapes
    the control characters below U+0020 itself, so a raw newline is only the indent's."""
    return json.dumps(value, ensure_ascii=False, **options).translate(_JSON_SHOWN)


def printable(text: str, allowed: str = "") -> str:
    """`text` with every character a terminal or a page would not show as itself (`UNSAFE`, all but
    those in `allowed`) written as its escape (`\\x1b`, `\\u202e`): an escape sequence or a bidi
    override in a label, a file name or a results row never reaches the terminal, the report or a
    figure, and what the reader sees is what the text holds. The one sanitiser for text the suite
    shows: errors, the run's table, progress lines, the page (`privaudit.reports.notation`), the figures."""
    if text.isprintable():
        return text
    return text.translate(_table(allowed))
