"""The demo campaign's rows as a stored copy: what `privaudit run` on the embedded demo gives,
wall-clock fields aside, so a change that should not move a number (a refactor, a layer move)
is checked against the numbers it must keep.

    python -m tests.demo_rows --store RESULTS_DIR    # store the rows of a finished demo run
    python -m tests.demo_rows --check RESULTS_DIR    # compare them with the stored copy

`make test-browser` checks every demo it runs (CI runs the demo there once, so the check costs no
second run); `make test-slow` runs it as a test. Rows are matched by cell id, since with several
workers they arrive in the order they finish. The copy records the torch version, CPU
capability and audit device it was made with: floating-point results of the same code differ across those, so the
comparison runs only where they match. Regenerate
it when the demo or an algorithm changes on purpose, and say so in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from privaudit import devices
from privaudit.store import ResultsStore

STORED = Path(__file__).parent / "data" / "demo_rows.json"
WALL_CLOCK = frozenset({"wall_s", "reference_wall_s", "score_wall_s", "seconds_per_run", "runs_per_second"})
"""Fields that measure time, not results."""


def environment() -> dict[str, str]:
    """What the demo's floating-point numbers depend on besides the code."""
    return {"torch": torch.__version__, "cpu": torch.backends.cpu.get_cpu_capability(),
            "audit_device": devices.audit_device().type}


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


def differences(directory: str | Path) -> list[str] | None:
    """How the rows of the demo run in `directory` differ from the stored copy (empty: they do not),
    or None when the copy was made in another environment (`environment`)."""
    stored = json.loads(STORED.read_text())
    if stored["environment"] != environment():
        return None
    found = {row["cell"]: row for row in rows(directory)}
    kept = {row["cell"]: row for row in stored["rows"]}
    if found.keys() != kept.keys():
        return [f"cells differ: {sorted(found.keys() ^ kept.keys())[:5]}"]
    return [f"{mine['type']} cell {cell} ({mine.get('label')}) differs from the stored row"
            for cell, mine in found.items() if mine != kept[cell]]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("--store", "--check"):
        print("usage: python -m tests.demo_rows --store|--check RESULTS_DIR", file=sys.stderr)
        return 2
    if argv[0] == "--store":
        store(argv[1])
        return 0
    found = differences(argv[1])
    if found is None:
        print(f"demo rows not checked: the stored copy was made in another environment than {environment()}")
        return 0
    for line in found:
        print(f"demo rows: {line}", file=sys.stderr)
    print(f"demo rows: {'the same as' if not found else 'DIFFERENT from'} the stored copy ({STORED.name})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
