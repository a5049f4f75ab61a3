"""The demo campaign's rows as a stored copy: what `privaudit run` on the embedded demo gives,
wall-clock fields aside, so a change that should not move a number (a refactor, a layer move)
is checked against the numbers it must keep.

    python -m tests.demo_rows --store RESULTS_DIR    # store the rows of a finished demo run
    python -m tests.demo_rows --check RESULTS_DIR    # compare them with the stored copy

`make test-browser` checks every demo it runs (CI runs the demo there once, so the check costs no
second run); `make test-slow` runs it as a test. Rows are matched by cell id, since with several
workers they arrive in the order they finish.

The copy records what its numbers depend on besides the code (`environment`): the version of every
library whose arithmetic reaches a row, Python's, the CPU capability and the device the work ran on
(`privaudit.devices`). The comparison runs only where they all match, and says which differ where
they do not. Where they match, text, integers and flags must be equal and floats equal within `RELATIVE` (and `ABSOLUTE`
near 0): the same libraries still dispatch to other code on another processor of the same kind
(numpy's FFT in dp_accounting's PLD gave an exact δ of 0.031858121619833535 on one machine and
0.03185812161983354 on another), which moves float64 results by a few units in their last place.
Regenerate the copy when the demo or an algorithm changes on purpose, and say so in the commit.
"""

from __future__ import annotations

import json
import math
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from privaudit import devices
from privaudit.store import ResultsStore

STORED = Path(__file__).parent / "data" / "demo_rows.json"
WALL_CLOCK = frozenset({"wall_s", "reference_wall_s", "score_wall_s", "seconds_per_run", "runs_per_second"})
"""Fields that measure time, not results."""
LIBRARIES = ("numpy", "scipy", "dp-accounting", "scikit-learn", "scikit-image", "networkx")
"""The distributions whose arithmetic reaches the demo's rows besides torch: numpy and scipy under
every accountant and statistic, dp-accounting's PLD and RDP accountants, scikit-learn's digits
and classifiers, scikit-image's SSIM, networkx's graphs."""
RELATIVE = 1e-9
"""How far (relative) two floats of the same environment may differ. The demo's float64 results
(accountants, bounds, statistics) are sums and FFTs over up to about 10⁷ terms, whose rounding
error can reach n·2⁻⁵³ ≈ 10⁻⁹ of the result when another instruction set orders the work
otherwise; an algorithm's change moves them far more. Values trained in float32 are the same to
the bit for the same torch and CPU capability (a float32 ulp, 6e-8, is well above this bound), so
any change to them is still caught."""
ABSOLUTE = 1e-12
"""How far two floats near 0 may differ: the rounding noise of a probability summed over a PLD's
grid (a δ of 5e-16 where the exact value is below it), far below any δ the demo claims (1e-5)."""


def environment() -> dict[str, str]:
    """What the demo's floating-point numbers depend on besides the code."""
    return {"torch": torch.__version__, **{name: metadata.version(name) for name in LIBRARIES},
            "python": platform.python_version(), "cpu": torch.backends.cpu.get_cpu_capability(),
            "work_device": devices.work_device().type}


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


def same(found: Any, kept: Any) -> bool:
    """Whether two rows (or parts of them) agree: floats within `RELATIVE` (or `ABSOLUTE`), NaN with
    NaN, everything else equal, at any depth."""
    if isinstance(found, float) and isinstance(kept, float):
        return (math.isnan(found) and math.isnan(kept)) or math.isclose(found, kept, rel_tol=RELATIVE,
                                                                          abs_tol=ABSOLUTE)
    if isinstance(found, dict) and isinstance(kept, dict):
        return found.keys() == kept.keys() and all(same(found[key], kept[key]) for key in found)
    if isinstance(found, list) and isinstance(kept, list):
        return len(found) == len(kept) and all(same(a, b) for a, b in zip(found, kept))
    return type(found) is type(kept) and found == kept


def mismatched(stored: dict[str, Any]) -> list[str]:
    """What of `environment` differs from the stored copy's, as "numpy 2.4.6 (stored with 2.4.5)"."""
    here = environment()
    kept = stored.get("environment") or {}
    return [f"{name} {here.get(name, 'absent')} (stored with {kept.get(name, 'absent')})"
            for name in sorted(here.keys() | kept.keys()) if here.get(name) != kept.get(name)]


def differences(directory: str | Path) -> list[str] | None:
    """How the rows of the demo run in `directory` differ from the stored copy (empty: they do not),
    or None when the copy was made in another environment (`mismatched`)."""
    stored = json.loads(STORED.read_text())
    if mismatched(stored):
        return None
    found = {row["cell"]: row for row in rows(directory)}
    kept = {row["cell"]: row for row in stored["rows"]}
    if found.keys() != kept.keys():
        return [f"cells differ: {sorted(found.keys() ^ kept.keys())[:5]}"]
    return [f"{mine['type']} cell {cell} ({mine.get('label')}) differs from the stored row"
            for cell, mine in found.items() if not same(mine, kept[cell])]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("--store", "--check"):
        print("usage: python -m tests.demo_rows --store|--check RESULTS_DIR", file=sys.stderr)
        return 2
    if argv[0] == "--store":
        store(argv[1])
        return 0
    found = differences(argv[1])
    if found is None:
        print("demo rows not checked: the stored copy was made in another environment: "
              + "; ".join(mismatched(json.loads(STORED.read_text()))))
        return 0
    for line in found:
        print(f"demo rows: {line}", file=sys.stderr)
    print(f"demo rows: {'the same as' if not found else 'DIFFERENT from'} the stored copy ({STORED.name}, floats "
          f"within {RELATIVE:g} relative)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
