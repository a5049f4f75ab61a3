"""The results directory: one JSON line per finished cell, appended as each cell finishes.

A cell's line is written with one `write` and flushed to disk before the next cell starts, so an
interrupted campaign loses at most the cell that was running; a torn last line (a crash in the
middle of a write) is ignored on reading. A re-run skips the cells already present; a forced
re-run appends new lines and the newest line of a cell wins. A cell's files (reconstructions)
live in `artifacts/<cell>/`, each written atomically before the row that names it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.jsonl"
ARTIFACTS_DIR = "artifacts"
CAMPAIGN_FILE = "campaign.toml"


class ResultsStore:
    """The results of one campaign, in `directory/results.jsonl`."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / RESULTS_FILE

    def rows(self) -> list[dict[str, Any]]:
        """The newest row of every finished cell, in the order cells first finished."""
        if not self.path.exists():
            return []
        latest: dict[str, dict[str, Any]] = {}
        for line in self.path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            latest[row["cell"]] = row
        return list(latest.values())

    def done(self) -> set[str]:
        return {row["cell"] for row in self.rows()}

    def append(self, row: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row, allow_nan=True) + "\n"
        if self._torn():
            line = "\n" + line
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def _torn(self) -> bool:
        """Whether the file ends inside a line (a write was interrupted)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return False
        with open(self.path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"

    def write_artifact(self, cell: str, name: str, data: bytes) -> str:
        """Write `artifacts/<cell>/<name>` atomically (a temporary file, then a rename) and return
        its path relative to the results directory, as rows record it."""
        relative = Path(ARTIFACTS_DIR) / cell / name
        target = self.directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        _replace(target, data)
        return relative.as_posix()

    def write_campaign(self, text: str) -> None:
        """Keep the campaign beside its results, so the report can be re-rendered from here."""
        self.directory.mkdir(parents=True, exist_ok=True)
        _replace(self.directory / CAMPAIGN_FILE, text.encode())


def _replace(target: Path, data: bytes) -> None:
    """Write `target` atomically: a temporary file named by this process (so two processes writing
    into one directory never share one), then a rename."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
