"""Progress of a long step (a canary audit's thousands of runs), on a terminal and in a log.

A step that runs for minutes between two lines of a campaign's log looks hung. On a terminal it
shows a bar (tqdm, which redraws one line with carriage returns); written to a file or a pipe, a
bar would fill the log with carriage-return leftovers, so it writes one plain line every
`interval()` seconds instead (10, or `PRIVAUDIT_PROGRESS_SECONDS`): what is done, the rate, and
the time left at that rate (an estimate).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from tqdm import tqdm

INTERVAL = 10.0
"""Seconds between two plain progress lines in a log, unless `PRIVAUDIT_PROGRESS_SECONDS` says."""


def interval() -> float:
    """`PRIVAUDIT_PROGRESS_SECONDS` when it is a number >= 0, else `INTERVAL`."""
    try:
        value = float(os.environ.get("PRIVAUDIT_PROGRESS_SECONDS", ""))
    except ValueError:
        return INTERVAL
    return value if value >= 0 else INTERVAL


class Progress:
    """Counts `total` units of work labelled `label`; `update(n)` after each piece."""

    def __init__(self, label: str, total: int, unit: str = "runs", every: float | None = None,
                 stream: TextIO | None = None) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.interval = interval() if every is None else every
        self.stream = stream or sys.stderr
        self.done = 0
        self.start = self.last = time.perf_counter()
        self.bar = tqdm(total=total, desc=label, unit=unit.rstrip("s") or unit, leave=False, file=self.stream) \
            if self.stream.isatty() else None

    def update(self, count: int) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
            return
        now = time.perf_counter()
        if now - self.last >= self.interval and self.done < self.total:
            self.last = now
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    def line(self, now: float) -> str:
        """`label: done/total units (rate/s, about N s left)`."""
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (f"  {self.label}: {self.done:,}/{self.total:,} {self.unit} ({rate:,.0f}/s, about {left:,.0f} s left, "
                "an estimate)")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
