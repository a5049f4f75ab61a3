"""The verdicts without a browser: the table `privaudit run` ends with, and the JSON of
`privaudit report --format json`. Both are `privaudit.reports.verdicts.verdict_summary` of the stored rows,
the verdicts the report opens with, so the terminal and the page never disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privaudit.errors import PrivauditError, printable
from privaudit.store import ResultsStore
from privaudit.reports.audits import number
from privaudit.reports.html import runs_of
from privaudit.reports.inversion import row_type
from privaudit.reports.verdicts import verdict_summary

_COLUMNS = ("defense run / audit", "claimed ε", "sound ε", "empirical ε_LB (estimate)", "verdict")
_WIDTH = 44


def summary(results_dir: str | Path) -> dict[str, Any]:
    """The results directory, one record per verdict (`verdict_summary`) and the line saying which
    lines of its results could not be read (None when all were: `unreadable`, which fails a
    gate); PrivauditError when it holds no results."""
    reading = ResultsStore(results_dir).read()
    if not reading.rows:
        raise PrivauditError(f"no results in {results_dir} (expected {reading.path})")
    runs = runs_of([row for row in reading.rows if row_type(row) == "training"])
    return {"results": str(results_dir), "verdicts": verdict_summary(reading.rows, runs),
            "unreadable": reading.summary()}


def _empirical(record: dict[str, Any]) -> str:
    """ε_LB with the estimate beside it, else the bound in words (a δ bound), else "—"."""
    if record["eps_lb"] is None:
        return record["bound"] or "—"
    estimate = "" if record["eps_estimate"] is None else f" ({number(record['eps_estimate'])})"
    return number(record["eps_lb"]) + estimate


def _cut(text: str) -> str:
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"


def _status(record: dict[str, Any]) -> str:
    """The status, with the analytic findings beside it (records written before findings have none)."""
    findings = record.get("findings") or []
    return record["status"] + (f" ({', '.join(findings)})" if findings else "")


def _cells(record: dict[str, Any]) -> list[str]:
    """A verdict's line as the terminal shows it: each cell `printable` (the subject and the findings
    come from the rows, which a hand can write, so an escape sequence or a bidi override in them
    must not reach the terminal), the subject cut to `_WIDTH`."""
    subject, *rest = (printable(str(text)) for text in (record["subject"], record["eps_claimed"], record["eps_sound"],
                                                         _empirical(record), _status(record)))
    return [_cut(subject), *rest]


def summary_table(found: dict[str, Any]) -> str:
    """One line per verdict: subject, claimed ε, sound ε, empirical ε_LB (estimate), status and
    analytic findings."""
    lines = [list(_COLUMNS)] + [_cells(record) for record in found["verdicts"]]
    widths = [max(len(line[k]) for line in lines) for k in range(len(_COLUMNS))]
    table = ["  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in lines]
    table.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(table)
