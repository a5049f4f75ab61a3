"""The results directory: one JSON line per finished cell, appended as each cell finishes.

A cell's line is written with one `write` and flushed to disk before the next cell starts, so an
interrupted campaign loses at most the cell that was running. A re-run skips the cells already
present; a forced re-run appends new lines and the newest line of a cell wins. A cell's files
(reconstructions) live in `artifacts/<cell>/`, each written atomically before the row that names
it.

Lines are strict JSON, which has no token for inf or nan: a non-finite float is written as the
string "inf", "-inf" or "nan" and its place is listed in the row's `nonfinite` key, so reading
turns exactly those strings back into floats (a label that happens to read "nan" stays a label).

`read` is the one reader: it keeps the rows it can use and says which lines it skipped and why
(a torn last line from a crash, a line that is not JSON, not UTF-8, not a row, or a row its
schema refuses: `privaudit.rows`, which `append` checks too), so no row leaves a report without
a word. One run writes a directory at a time: `lock` holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from privaudit import rows
from privaudit.errors import PrivauditError
from privaudit.files import (CAMPAIGN_BYTES, linked_paths, read_inside, read_regular, write_inside,
                             written_in_place)

RESULTS_FILE = "results.jsonl"
RESULTS_BYTES = 2**30
"""The largest results file read (a campaign of thousands of cells writes a few MB)."""
ARTIFACTS_DIR = "artifacts"
CAMPAIGN_FILE = "campaign.toml"
LOCK_FILE = ".lock"
REPORT_FILE = "report.html"
VERDICTS_FILE = "verdicts.json"
JUNIT_FILE = "verdicts.junit.xml"
WRITTEN_FILES = (RESULTS_FILE, CAMPAIGN_FILE, LOCK_FILE, REPORT_FILE, VERDICTS_FILE, JUNIT_FILE)
"""The files a run writes at the top of its results folder (besides `campaign.N.toml`), each a
regular file when present."""
NON_FINITE = "nonfinite"


@dataclass(frozen=True)
class Skipped:
    """A line of results.jsonl that `read` could not use (numbered from 1), and why."""

    line: int
    reason: str


@dataclass(frozen=True)
class Reading:
    """The newest row of every finished cell of the results file `path`, in the order cells first
    finished, and the lines that were skipped."""

    path: Path
    rows: list[dict[str, Any]]
    skipped: list[Skipped]

    _SHOWN = 5

    def summary(self) -> str | None:
        """One line saying what was skipped (None when nothing was)."""
        if not self.skipped:
            return None
        shown = "; ".join(f"line {s.line}: {s.reason}" for s in self.skipped[: self._SHOWN])
        more = f"; and {len(self.skipped) - self._SHOWN} more" if len(self.skipped) > self._SHOWN else ""
        count = len(self.skipped)
        return f"{self.path}: skipped {count} unreadable line{'s' * (count > 1)} ({shown}{more})"


def _heal_tail(handle: int) -> bool:
    """Make the rows file end where a new line may start: a last line without its newline that is
    not JSON is a row torn by a write that failed (a full disk, a kill): its cell has no row and
    runs again, so the torn bytes are cut off; a last line that is JSON (a row whose newline alone
    was lost) is kept. True when the file now ends with a newline (or is empty), False when the
    line kept still needs one."""
    size = os.fstat(handle).st_size
    if not size or os.pread(handle, 1, size - 1) == b"\n":
        return True
    start, chunk = size, 1 << 16
    while start > 0:
        begin = max(0, start - chunk)
        found = os.pread(handle, start - begin, begin).rfind(b"\n")
        if found >= 0:
            start = begin + found + 1
            break
        start = begin
    tail = os.pread(handle, size - start, start) if size - start <= RESULTS_BYTES else None
    try:
        json.loads(tail if tail is not None else b"")
        return False
    except ValueError:
        os.ftruncate(handle, start)
        return True


class ResultsStore:
    """The results of one campaign, in `directory/results.jsonl`."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / RESULTS_FILE

    def read(self) -> Reading:
        """Every usable row (the newest line of each cell wins) and every skipped line."""
        try:
            data = read_regular(self.path, RESULTS_BYTES, "results file", follow=False)
        except FileNotFoundError:
            return Reading(self.path, [], [])
        latest: dict[str, dict[str, Any]] = {}
        skipped = []
        for number, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            row, problem = _parse(line)
            if problem:
                skipped.append(Skipped(number, problem))
            else:
                latest[row["cell"]] = row
        return Reading(self.path, list(latest.values()), skipped)

    def rows(self) -> list[dict[str, Any]]:
        """The newest row of every finished cell, in the order cells first finished."""
        return self.read().rows

    def append(self, row: dict[str, Any]) -> None:
        """Append `row`, checked against the row schema and stamped with its version (`rows.checked`).
        The line is written with one `write` (O_APPEND) and flushed; a write that fails (a full disk,
        a file-size limit) is a one-line PrivauditError, and the torn line it may leave is skipped by
        `read` and cut off by the next append (`_heal_tail`), so a resumed folder heals."""
        line = encode(rows.checked(row)) + "\n"
        self._make_directory()
        try:
            handle = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as error:
            raise PrivauditError(f"cannot append to {self.path} ({error.strerror}): it must be a regular file, not "
                                 "a link") from None
        try:
            written_in_place(handle, self.path, "the rows")
            if not _heal_tail(handle):
                line = "\n" + line
            data = line.encode("utf-8")
            while data:
                data = data[os.write(handle, data):]
            os.fsync(handle)
        except OSError as error:
            raise PrivauditError(f"cannot append to {self.path} ({error.strerror or error}); the rows written "
                                 "before are kept and a re-run resumes") from None
        finally:
            os.close(handle)

    def _make_directory(self) -> None:
        """Make the results folder (and its parents) when missing; PrivauditError when it cannot
        be (a name too long, a file in the way, no permission)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise PrivauditError(f"cannot make results folder {self.directory} ({error.strerror or error})") from None

    def check_layout(self) -> None:
        """PrivauditError (one line) when the folder is not laid out as a run leaves it: a symbolic
        link anywhere below it (the suite never makes one, and a run writing through one — an
        `artifacts` link, a link at a cell's folder or at a file the run replaces — would write
        outside the folder), `artifacts` or a cell's folder in it that is not a folder, or a file
        the run writes (`WRITTEN_FILES`) that is not a regular file. Checked before any work, so a
        bad folder costs no computation and loses none; every write refuses them on its own too
        (`privaudit.files`)."""
        links = linked_paths(self.directory)
        if links:
            more = f" (and {len(links) - 1} more)" if len(links) > 1 else ""
            raise PrivauditError(f"results folder {self.directory} holds a symbolic link, {links[0]}{more}: a results "
                                 "folder holds none (a run would write through it); remove it")
        artifacts = self.directory / ARTIFACTS_DIR
        wrong = [(name, "a regular file") for name in WRITTEN_FILES if not _is(self.directory / name, stat.S_ISREG)]
        wrong += [(ARTIFACTS_DIR, "a folder")] if not _is(artifacts, stat.S_ISDIR) else []
        wrong += [(RESULTS_FILE, "a file of one name (it has other hard links)")] if _shared(self.path) else []
        if not wrong and artifacts.is_dir():
            wrong = [(f"{ARTIFACTS_DIR}/{entry.name}", "a folder") for entry in os.scandir(artifacts)
                     if not entry.is_dir(follow_symlinks=False)][:1]
        if wrong:
            name, should = wrong[0]
            raise PrivauditError(f"results folder {self.directory}: {name} is not {should}, as a run writes it; "
                                 "remove it or write the results elsewhere")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory for this process while the block runs: a second holder (another
        run on the same directory, at the same time) gets a one-line PrivauditError naming the
        first one's process, instead of computing every cell again beside it. The lock is an
        `flock` on the directory itself, which the system releases when the process ends, however
        it ends, and which deleting a file cannot undo; `.lock` only names the holder, and is
        never written through a link or into anything but a regular file. Worker processes never
        take it: only the driver appends rows."""
        handle = self._directory_handle()
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._holder()
                by = f" (process {holder})" if holder.isdigit() else ""
                raise PrivauditError(f"results folder {self.directory} is in use by another privaudit run{by}: "
                                     "wait for it to end, or write the results elsewhere") from None
            self._name_holder()
            yield
        finally:
            os.close(handle)

    def _directory_handle(self) -> int:
        self._make_directory()
        try:
            return os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as error:
            raise PrivauditError(f"cannot write in results folder {self.directory}: {error.strerror}") from None

    def _name_holder(self) -> None:
        """Write this process's id into `.lock`: O_NOFOLLOW refuses a symbolic link, O_NONBLOCK a
        FIFO with no reader, and anything else that is not a regular file of one name (a hard link
        to a file elsewhere) is refused before it is truncated."""
        path = self.directory / LOCK_FILE
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as error:
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                mode = stat.S_IFREG
            if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
                what = "a symbolic link" if stat.S_ISLNK(mode) else error.strerror
                raise PrivauditError(f"{path} is not a regular file ({what}): remove it and run again") from None
            raise PrivauditError(f"cannot write the lock {path} ({error.strerror})") from None
        try:
            written_in_place(handle, path, "the lock")
            os.ftruncate(handle, 0)
            os.write(handle, f"{os.getpid()}\n".encode())
        finally:
            os.close(handle)

    def _holder(self) -> str:
        """The process id `.lock` names, when it is a small regular file; else ""."""
        path = self.directory / LOCK_FILE
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                return ""
            with open(path, "rb") as handle:
                return handle.read(32).decode("ascii", "replace").strip()
        except OSError:
            return ""

    def write_artifact(self, cell: str, name: str, data: bytes) -> str:
        """Write `artifacts/<cell>/<name>` atomically, never through a link (`files.write_inside`),
        and return its path relative to the results directory, as rows record it."""
        relative = PurePosixPath(ARTIFACTS_DIR, cell, name)
        write_inside(self.directory, relative, data, "artifact")
        return relative.as_posix()

    def write_campaign(self, text: str) -> str | None:
        """Keep the campaign beside its results, so the report can be re-rendered from here. A
        different campaign already kept (an edited one run into the same folder, whose rows stay)
        is not replaced silently: it is kept as `campaign.N.toml`, whose name is returned. Two texts
        of one campaign (the file, and the same campaign written from Python; other comments) are
        the same campaign: nothing is kept twice, and a version already kept is not kept again."""
        self._make_directory()
        earlier = self._kept(CAMPAIGN_FILE)
        if earlier is not None and same_campaign(earlier, text.encode("utf-8")):
            return None
        kept = None
        if earlier is not None:
            number = 1
            while (older := self._kept(f"campaign.{number}.toml")) is not None and not same_campaign(older, earlier):
                number += 1
            if older is None:
                kept = f"campaign.{number}.toml"
                write_inside(self.directory, kept, earlier, "kept campaign")
        write_inside(self.directory, CAMPAIGN_FILE, text.encode("utf-8"), "kept campaign")
        return kept

    def _kept(self, name: str) -> bytes | None:
        """A kept campaign file's bytes, or None when there is none."""
        try:
            return read_inside(self.directory, name, CAMPAIGN_BYTES, "kept campaign")
        except FileNotFoundError:
            return None


def _is(path: Path, test) -> bool:
    """Whether `path` is absent or, not followed if a link, passes `test` (`stat.S_ISREG`, …)."""
    try:
        return test(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True


def _shared(path: Path) -> bool:
    """Whether `path` is a file with other hard links (its data shared with a file elsewhere)."""
    try:
        return os.lstat(path).st_nlink > 1
    except FileNotFoundError:
        return False


def same_campaign(first: bytes, second: bytes) -> bool:
    """Whether two kept campaign texts say the same: equal bytes, or TOML that parses to equal
    documents (comments and layout aside)."""
    if first == second:
        return True
    try:
        return tomllib.loads(first.decode("utf-8")) == tomllib.loads(second.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError):
        return False


STORED_FILES = {RESULTS_FILE: "the folder's rows", CAMPAIGN_FILE: "the folder's campaign", LOCK_FILE: "the folder's lock",
                VERDICTS_FILE: "the privacy gate's verdicts", JUNIT_FILE: "the privacy gate's verdicts"}
"""The files of a results folder that a report written over them would destroy (with any
`campaign.N.toml` and anything under `artifacts/`)."""


def output_file(results_dir: str | Path, output: str | Path) -> Path:
    """`output` checked as the file a command writes from a results folder (`privaudit report -o`):
    PrivauditError when it is a folder, or a stored file of a results folder — this one's or any
    other's (its rows, its campaign, its lock, its gate verdicts, an artifact) — which writing it
    would replace. Whether what is there is a regular file is the writer's check."""
    target = Path(output)
    if target.is_dir():
        raise PrivauditError(f"{output} is a folder: -o names the file to write")
    resolved = target.parent.resolve() / target.name
    folders = [Path(results_dir).resolve(), *(folder for folder in resolved.parents
                                              if (folder / RESULTS_FILE).exists())]
    for folder in folders:
        what = _stored(folder, resolved)
        if what is not None:
            raise PrivauditError(f"{output} is {what}: writing the report there would replace it; name another file")
    return target


def _stored(folder: Path, target: Path) -> str | None:
    """What `target` is to the results folder `folder` (`STORED_FILES`, a kept campaign, an
    artifact), or None."""
    if folder / ARTIFACTS_DIR in target.parents:
        return "one of a results folder's artifacts"
    if target.parent != folder:
        return None
    if target.name in STORED_FILES:
        return STORED_FILES[target.name]
    if target.name.startswith("campaign.") and target.name.endswith(".toml"):
        return "a campaign kept in a results folder"
    return None


def encode(row: dict[str, Any]) -> str:
    """A row as one line of strict JSON: non-finite floats as strings, their places listed under
    `nonfinite`."""
    places: list[list[Any]] = []
    strict = _strict(row, [], places)
    if places:
        strict[NON_FINITE] = places
    return json.dumps(strict, allow_nan=False)


def json_safe(value: Any) -> Any:
    """`value` with each non-finite float as the string "inf", "-inf" or "nan": strict JSON for
    output that is not a row (`privaudit claims --json`); a row also records where they were
    (`encode`)."""
    return _strict(value, [], [])


def _strict(value: Any, place: list[Any], places: list[list[Any]]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        places.append(place)
        return str(value)
    if isinstance(value, dict):
        return {key: _strict(item, place + [key if isinstance(key, str) else json.dumps(key)], places)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item, place + [index], places) for index, item in enumerate(value)]
    return value


def _parse(line: bytes) -> tuple[dict[str, Any], str | None]:
    """A line's row, or the reason it is not one."""
    try:
        row = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return {}, "not UTF-8"
    except json.JSONDecodeError:
        return {}, "not JSON (a torn write?)"
    if not isinstance(row, dict):
        return {}, f"not a row (a JSON {type(row).__name__})"
    if not isinstance(row.get("cell"), str) or not row["cell"]:
        return {}, "not a row (no cell id)"
    try:
        _restore(row)
    except (KeyError, IndexError, TypeError, ValueError):
        return {}, f"row of cell {row['cell']}: its '{NON_FINITE}' list names no non-finite number"
    problem = rows.problem(row)
    if problem:
        return {}, problem
    return row, None


def _restore(row: dict[str, Any]) -> None:
    """Turn the strings listed under `nonfinite` back into the floats they stand for."""
    for place in row.pop(NON_FINITE, []):
        *path, last = place
        holder = row
        for key in path:
            holder = holder[key]
        if holder[last] not in ("inf", "-inf", "nan"):
            raise ValueError(place)
        holder[last] = float(holder[last])
