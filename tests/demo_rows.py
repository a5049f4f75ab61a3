"""The demo campaign's rows as a stored copy: what `privaudit run` on the embedded demo gives,
wall-clock fields aside, so a change that should not move a number (a refactor, a layer move)
is checked against the numbers it must keep.

    python -m tests.demo_rows RESULTS_DIR    # store the rows of a finished demo run

The copy records the torch version and CPU capability it was made with: floating-point results
of the same code differ across those, so the comparison runs only where they match. Regenerate
it when the demo or an algorithm changes on purpose, and say so in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from privaudit.results import ResultsStore

STORED = Path(__file__).parent / "data" / "demo_rows.json"
WALL_CLOCK = frozenset({"wall_s", "reference_wall_s", "score_wall_s", "seconds_per_run"})
"""Fields that measure time, not results."""


def environment() -> dict[str, str]:
    """What the demo's floating-point numbers depend on besides the code."""
    return {"torch": torch.__version__, "cpu": torch.backends.cpu.get_cpu_capability()}


def comparable(value: Any) -> Any:
    """`value` without its wall-clock fields, at any depth."""
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items() if key not in WALL_CLOCK}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


def rows(directory: str | Path) -> list[dict[str, Any]]:
    """The comparable rows of a results directory, in the order their cells finished."""
    return comparable(ResultsStore(directory).rows())


def store(directory: str | Path) -> None:
    """Write the stored copy from a finished demo run in `directory`."""
    STORED.write_text(json.dumps({"environment": environment(), "rows": rows(directory)}, indent=1) + "\n")


if __name__ == "__main__":
    store(sys.argv[1])
