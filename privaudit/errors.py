"""User-facing errors: each carries one line that names what is wrong.

The CLI prints the message of any `PrivauditError` on one line and exits with code 2; anything
else is a bug and keeps its traceback.
"""


class PrivauditError(Exception):
    """A failure caused by the user's input (config, files, parameters), not by privaudit."""


class ConfigError(PrivauditError):
    """A campaign field is missing, mistyped or out of range; the message names its path."""


class DataError(PrivauditError):
    """A dataset cannot be loaded; the message names the dataset, the folder and what is expected."""
