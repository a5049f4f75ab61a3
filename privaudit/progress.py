"""Progress of a long step (a training run's rounds, reference models, a canary audit's runs, a
record fit, an inversion's loss evaluations), on a terminal and in a log.

A step that runs for minutes between two lines of a campaign's log looks hung. On a terminal it
shows a bar (tqdm, which redraws one line with carriage returns); written to a file or a pipe, a
bar would fill the log with carriage-return leftovers, so it writes one plain line every
`interval()` seconds instead (5, or `PRIVAUDIT_PROGRESS_SECONDS`): what is done, the rate, and
the time left at that rate (an estimate). A step that may stop early (an optimiser's budget) says
"at most" of its total and of the time left; a step with no known total says what is done and
the rate only.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from tqdm import tqdm

from privaudit.errors import printable

INTERVAL = 5.0
"""Seconds between two plain progress lines in a log, unless `PRIVAUDIT_PROGRESS_SECONDS` says. A
step reports only when a piece of its work ends (a batch of worlds, a round), so the gap a log shows
is this plus one piece: at 5 s the demo's canary audit leaves no gap over 10 s (6.3 s measured on
2 cores, 2026-11-26)."""


def interval() -> float:
    """`PRIVAUDIT_PROGRESS_SECONDS` when it is a number >= 0, else `INTERVAL`."""
    try:
        value = float(os.environ.get("PRIVAUDIT_PROGRESS_SECONDS", ""))
    except ValueError:
        return INTERVAL
    return value if value >= 0 else INTERVAL


def _rate(per_second: float) -> str:
    """Whole numbers from 10 a second up; two significant digits below (a reference model may
    take a minute: 0.017/s, not 0/s)."""
    return f"{per_second:,.0f}" if per_second >= 10 else f"{per_second:.2g}"


class Progress:
    """Counts `total` units of work labelled `label`; `update(n)` after each piece. The label names
    a table of the campaign (or a results row's): it is shown `printable`, so no escape sequence or
    bidi override in it reaches the terminal or the log.

    `ceiling`: `total` is the most the step may do (it may stop sooner). `parts` = (k, name): the
    total is k equal parts (k reference models of as many rounds each), and the line also says how
    many parts are done. `total` None: no total is known; the line gives the count and the rate."""

    def __init__(self, label: str, total: int | None, unit: str = "runs", every: float | None = None,
                 stream: TextIO | None = None, ceiling: bool = False,
                 parts: tuple[int, str] | None = None) -> None:
        self.label, self.total, self.unit = printable(label), total, unit
        self.ceiling, self.parts = ceiling, parts
        self.interval = interval() if every is None else every
        self.stream = stream or sys.stderr
        self.done = 0
        self.start = self.last = time.perf_counter()
        self.bar = tqdm(total=total, desc=self.label, unit=unit.rstrip("s") or unit, leave=False, file=self.stream) \
            if self.stream.isatty() else None

    def update(self, count: int) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
            return
        now = time.perf_counter()
        if now - self.last >= self.interval and (self.total is None or self.done < self.total):
            self.last = now
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    def line(self, now: float) -> str:
        """`label: done/total units (rate/s, about N s left, an estimate)`, with "at most" before
        the total and the time left for a ceiling, and the parts done before the count."""
        rate = self.done / max(now - self.start, 1e-9)
        if self.total is None:
            return f"  {self.label}: {self.done:,} {self.unit} ({_rate(rate)}/s)"
        most = "at most " if self.ceiling else ""
        count = f"{self.done:,}/{most}{self.total:,} {self.unit}"
        if self.parts is not None:
            whole, name = self.parts
            count = f"{self.done * whole // self.total:,}/{most}{whole:,} {name}, {count}"
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        return f"  {self.label}: {count} ({_rate(rate)}/s, {most}about {left:,.0f} s left, an estimate)"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
