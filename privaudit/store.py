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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit import rows
from privaudit.errors import PrivauditError
from privaudit.files import CAMPAIGN_BYTES, read_regular

RESULTS_FILE = "results.jsonl"
RESULTS_BYTES = 2**30
"""The largest results file read (a campaign of thousands of cells writes a few MB)."""
ARTIFACTS_DIR = "artifacts"
CAMPAIGN_FILE = "campaign.toml"
LOCK_FILE = ".lock"
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
        """Append `row`, checked against the row schema and stamped with its version (`rows.checked`)."""
        line = encode(rows.checked(row)) + "\n"
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._torn():
            line = "\n" + line
        try:
            handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as error:
            raise PrivauditError(f"cannot append to {self.path} ({error.strerror}): it must be a regular file, not "
                                 "a link") from None
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                raise PrivauditError(f"cannot append to {self.path}: not a regular file")
            data = line.encode("utf-8")
            while data:
                data = data[os.write(handle, data):]
            os.fsync(handle)
        finally:
            os.close(handle)

    def _torn(self) -> bool:
        """Whether the file ends inside a line (a write was interrupted)."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return False
        with open(self.path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"

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
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            return os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as error:
            raise PrivauditError(f"cannot write in results folder {self.directory}: {error.strerror}") from None

    def _name_holder(self) -> None:
        """Write this process's id into `.lock`: O_NOFOLLOW refuses a symbolic link, O_NONBLOCK a
        FIFO with no reader, and anything else that is not a regular file is refused before
        it is truncated."""
        path = self.directory / LOCK_FILE
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as error:
            raise PrivauditError(f"{path} is not a regular file ({error.strerror}): remove it and run again") from None
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                raise PrivauditError(f"{path} is not a regular file: remove it and run again")
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
        """Write `artifacts/<cell>/<name>` atomically (a temporary file, then a rename) and return
        its path relative to the results directory, as rows record it."""
        relative = Path(ARTIFACTS_DIR) / cell / name
        target = self.directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, data)
        return relative.as_posix()

    def write_campaign(self, text: str) -> str | None:
        """Keep the campaign beside its results, so the report can be re-rendered from here. A
        different campaign already kept (an edited one run into the same folder, whose rows stay)
        is not replaced silently: it is kept as `campaign.N.toml`, whose name is returned."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / CAMPAIGN_FILE
        kept = None
        try:
            earlier = read_regular(target, CAMPAIGN_BYTES, "kept campaign", follow=False)
        except FileNotFoundError:
            earlier = None
        if earlier is not None and earlier != text.encode():
            number = 1
            while (self.directory / f"campaign.{number}.toml").exists():
                number += 1
            kept = f"campaign.{number}.toml"
            write_atomic(self.directory / kept, earlier)
        write_atomic(target, text.encode())
        return kept


def write_atomic(target: Path, data: bytes) -> None:
    """Write `target` atomically: a temporary file named by this process (so two processes writing
    into one directory never share one), then a rename. A reader sees the old file or the new
    one, never half of one."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def output_file(results_dir: str | Path, output: str | Path) -> Path:
    """`output` checked as the file a command writes from a results folder (`privaudit report -o`):
    PrivauditError when it is a folder, or one of the folder's own stored files (its rows, its
    campaign, its lock, an artifact), which writing it would replace."""
    target = Path(output)
    if target.is_dir():
        raise PrivauditError(f"{output} is a folder: -o names the file to write")
    base, resolved = Path(results_dir).resolve(), target.resolve()
    stored = {base / RESULTS_FILE: "the folder's rows", base / CAMPAIGN_FILE: "the folder's campaign",
              base / LOCK_FILE: "the folder's lock"}
    what = stored.get(resolved) or ("one of the folder's artifacts" if base / ARTIFACTS_DIR in resolved.parents
                                    else None)
    if what is not None:
        raise PrivauditError(f"{output} is {what}: writing the report there would replace it; name another file")
    return target


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
