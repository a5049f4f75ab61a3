"""User-facing errors: each carries one line that names what is wrong.

The CLI prints the message of any `PrivauditError` on one line and exits with code 2; anything
else is a bug and keeps its traceback.
"""

import re

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


def printable(text: str) -> str:
    """`text` with every control character shown escaped (`\\x1b`), as errors are printed: an
    escape sequence in a file name or value never reaches the terminal."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
