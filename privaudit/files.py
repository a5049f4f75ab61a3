"""Every file the suite reads back or writes under a folder it was given, through one reader and
one writer that never follow a link planted inside that folder.

A results folder may hold anything a hostile user planted there: a link to `/etc/passwd` named
`results.jsonl`, an `artifacts` link to another folder, links at the names of temporary files,
`/dev/zero`, a FIFO that never ends, a sparse 4 GiB file. The folder the user names is theirs (its
path may pass through links they made); below it, every component is opened relative to its parent
with `O_NOFOLLOW`, so a link, a file where a folder should be, or a folder where a file should be is
a one-line PrivauditError naming the path and what it is:

* `read_regular` reads a file (a user's campaign, a file of a results folder) only when it is a
  regular file, up to a bound; `read_inside` does so for a path relative to a folder;
* `written_in_place` refuses to append to or truncate a file that is not regular or that a hard
  link shares with a file elsewhere (the rows, the lock: the two files written in place);
* `write_inside` writes a file atomically (a temporary file created with `O_EXCL | O_NOFOLLOW`
  under an unpredictable name, then a rename in the same folder), replacing only a regular file:
  never a link (which the rename would not follow, but which someone meant to point somewhere), a
  FIFO, a device or a folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from privaudit.errors import PrivauditError, printable

CAMPAIGN_BYTES = 4 * 2**20
"""The largest campaign file read (the shipped ones are under 20 kB)."""

_TEMPORARY_TRIES = 16
"""Temporary names tried before a write gives up: each is new and random, so only names planted
by someone guessing them fail, and 16 guesses in a row cannot all be right."""

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


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
    return _read_handle(handle, path, limit, what)


def read_inside(folder: str | Path, relative: str | PurePosixPath, limit: int, what: str) -> bytes:
    """The bytes of `folder/relative`, a regular file of at most `limit` bytes reached without
    following any link below `folder`; FileNotFoundError when it is absent, PrivauditError (one
    line) when a component is a link or not what it should be."""
    parts = _parts(relative, what)
    path = Path(folder, *parts)
    with _folder_chain(Path(folder), parts[:-1], create=False, what=what) as parent:
        try:
            handle = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=parent)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise PrivauditError(f"{what} {path} cannot be read ({_what_is(parent, parts[-1], error)})") from None
        return _read_handle(handle, path, limit, what, single_link=True)


def placed(folder: str | Path, target: str | Path) -> tuple[Path, str]:
    """The folder and relative path `write_inside` should write `target` as: below `folder` when
    `target` lies there as written (its `..` resolved by name, no link followed), so a link
    planted in a folder of a results folder is refused rather than followed out of it; else its
    own folder and name (a path the user gave outside, followed as given)."""
    base, absolute = Path(os.path.abspath(folder)), Path(os.path.abspath(target))
    if base in absolute.parents:
        return base, absolute.relative_to(base).as_posix()
    return Path(target).parent, Path(target).name


def write_inside(folder: str | Path, relative: str | PurePosixPath, data: bytes, what: str) -> Path:
    """Write `folder/relative` atomically and return its path: the folders below `folder` are made
    when missing and must be real folders, the file is written under a new random temporary name
    (created exclusively, never through a link) and renamed onto its name, which must be absent or
    a regular file. A reader sees the old file or the new one, never half of one; an OSError (a
    full disk, a name too long, a read-only folder) is a one-line PrivauditError naming the path."""
    parts = _parts(relative, what)
    path = Path(folder, *parts)
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = ("a file is in the way" if isinstance(error, (FileExistsError, NotADirectoryError))
                  else _reason(error))
        raise PrivauditError(f"cannot write {what} {path}: cannot make its folder {folder} ({reason})") from None
    with _folder_chain(Path(folder), parts[:-1], create=True, what=what) as parent:
        _replaceable(parent, parts[-1], path, what)
        temporary = _temporary(parent, parts[-1], path, what)
        try:
            handle, name = temporary
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(handle, view):]
                os.fsync(handle)
            finally:
                os.close(handle)
            os.replace(name, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary[1], dir_fd=parent)
            raise PrivauditError(f"cannot write {what} {path} ({_reason(error)})") from None
    return path


def written_in_place(handle: int, path: Path, what: str) -> None:
    """Nothing when the open file `handle` may be written in place (appended to, truncated): a
    regular file with no other name. A hard link planted in a results folder (`results.jsonl`
    sharing its data with a file outside it) is not a symbolic link, and `O_NOFOLLOW` lets it
    through; writing it in place would write the file outside. A rename never does, so only files
    written in place need this check."""
    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode):
        raise PrivauditError(f"cannot write {what} {path}: it is {_kind(info.st_mode)}, not a regular file; remove it")
    if info.st_nlink > 1:
        raise PrivauditError(f"cannot write {what} {path}: it has {info.st_nlink - 1} other hard link(s), so a file "
                             "elsewhere shares its data (a results folder's files have one name); remove it")


def linked_paths(folder: str | Path, limit: int = 1_000_000) -> list[Path]:
    """The symbolic links below `folder` (the folder itself aside), found without following any:
    a results folder the suite wrote holds none, so one found there was planted. At most `limit`
    entries are visited (a PrivauditError beyond, naming the folder)."""
    found: list[Path] = []
    visited = 0
    pending = [Path(folder)]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except FileNotFoundError:
            continue
        except OSError as error:
            raise PrivauditError(f"cannot read folder {current} ({_reason(error)})") from None
        for entry in entries:
            visited += 1
            if visited > limit:
                raise PrivauditError(f"{folder} holds more than {limit:,} files and folders: not a results folder")
            if entry.is_symlink():
                found.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
    return sorted(found)


def _parts(relative: str | PurePosixPath, what: str) -> tuple[str, ...]:
    """The components of a relative path that stays below its folder (no '..', not absolute)."""
    if "\0" in str(relative):
        raise PrivauditError(f"{what} {printable(str(relative))}: a path holding a NUL character")
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(part in ("..", ".") for part in parts):
        raise PrivauditError(f"{what} {relative!s}: not a path inside its folder")
    return parts


@contextlib.contextmanager
def _folder_chain(folder: Path, parts: tuple[str, ...], *, create: bool, what: str) -> Iterator[int]:
    """A descriptor of `folder/parts…`, each part opened relative to the one above it without
    following a link (made first when `create`); PrivauditError naming the first part that is a
    link or not a folder."""
    try:
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if create:
            raise PrivauditError(f"cannot write {what}: folder {folder} vanished") from None
        raise
    except OSError as error:
        raise PrivauditError(f"{what}: {folder} cannot be opened as a folder ({_reason(error)})") from None
    try:
        for depth, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=handle)
                except FileExistsError:
                    pass
                except OSError as error:
                    raise PrivauditError(f"cannot make folder {Path(folder, *parts[:depth + 1])} "
                                         f"({_reason(error)})") from None
            try:
                inner = os.open(part, _FOLDER, dir_fd=handle)
            except FileNotFoundError:
                raise
            except OSError as error:
                where = Path(folder, *parts[:depth + 1])
                raise PrivauditError(f"{what}: {where} is {_what_is(handle, part, error)}, not a folder: remove it "
                                     "(a results folder holds no links)") from None
            os.close(handle)
            handle = inner
        yield handle
    finally:
        os.close(handle)


def _replaceable(parent: int, name: str, path: Path, what: str) -> None:
    """Nothing, when `name` in `parent` is absent or a regular file; else a PrivauditError saying
    what is there (a link, a FIFO, a device, a folder), which a write must not replace."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise PrivauditError(f"cannot write {what} {path} ({_reason(error)})") from None
    if not stat.S_ISREG(mode):
        raise PrivauditError(f"cannot write {what} {path}: it exists and is {_kind(mode)}, not a regular file; "
                             "remove it or name another file")


def _temporary(parent: int, name: str, path: Path, what: str) -> tuple[int, str]:
    """A new temporary file beside `name`, created exclusively (never through a link or onto
    anything already there) under a random name; its descriptor and name."""
    for _ in range(_TEMPORARY_TRIES):
        candidate = f".{name[:180]}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
        try:
            handle = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=parent)
        except FileExistsError:
            continue
        except OSError as error:
            raise PrivauditError(f"cannot write {what} {path} ({_reason(error)})") from None
        return handle, candidate
    raise PrivauditError(f"cannot write {what} {path}: {_TEMPORARY_TRIES} random temporary names beside it were all "
                         "taken (something is planting files there)")


def _read_handle(handle: int, path: Path, limit: int, what: str, single_link: bool = False) -> bytes:
    """Read an open file: a regular file of at most `limit` bytes, else a PrivauditError. With
    `single_link`, a file with other hard links is refused too: inside an output folder a
    second name is one someone planted, and may be a file of theirs outside it."""
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise PrivauditError(f"{what} {path} is {_kind(info.st_mode)}, not a regular file")
        if single_link and info.st_nlink > 1:
            raise PrivauditError(f"{what} {path} has {info.st_nlink} hard links: a file in an output folder has one")
        if info.st_size > limit:
            raise PrivauditError(f"{what} {path} is {info.st_size:,} bytes, more than the {limit:,} read")
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise PrivauditError(f"{what} {path} cannot be read ({_reason(error)})") from None
    finally:
        os.close(handle)
    if len(data) > limit:
        raise PrivauditError(f"{what} {path} grew past the {limit:,} bytes read")
    return data


def _what_is(parent: int, name: str, error: OSError) -> str:
    """What `name` in `parent` is, for an error that opening it gave (a link, a file, …)."""
    try:
        return _kind(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return _reason(error)


def _kind(mode: int) -> str:
    for test, words in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return words
    return "not a regular file"


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
