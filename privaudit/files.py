"""Reading files the suite did not write: a campaign a user names, the files of a results folder.

Such a file may be anything a path can name: a link to `/etc/passwd` planted in a results
folder, `/dev/zero`, a FIFO that never ends. Each is read only when it is a regular file, up to a
bound, and (inside a results folder) not through a link; anything else is a one-line
PrivauditError naming the file and what it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from privaudit.errors import PrivauditError

CAMPAIGN_BYTES = 4 * 2**20
"""The largest campaign file read (the shipped ones are under 20 kB)."""


def read_regular(path: str | Path, limit: int, what: str, *, follow: bool = True) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; `follow=False` refuses a
    symbolic link too. FileNotFoundError passes through (callers say what a missing file means)."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        handle = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:
        reason = "a symbolic link" if not follow and path.is_symlink() else error.strerror
        raise PrivauditError(f"{what} {path} cannot be read ({reason})") from None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise PrivauditError(f"{what} {path} is not a regular file")
        if info.st_size > limit:
            raise PrivauditError(f"{what} {path} is {info.st_size:,} bytes, more than the {limit:,} read")
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
    finally:
        os.close(handle)
    if len(data) > limit:
        raise PrivauditError(f"{what} {path} grew past the {limit:,} bytes read")
    return data
