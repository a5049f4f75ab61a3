"""Campaign executors: cells per minute of a 40-cell campaign run one after another in this
process, on local worker processes, and (with --ray) as Ray tasks on a local instance.

    python bench/campaign.py [--workers 2] [--rounds 300] [--ray] [--json]

The campaign is one D-PSGD table (digits, 8 agents on a ring, the `mlp` model) with a grid of 4
learning rates at 10 seeds: 40 independent training cells. The reference measured in the same run
is the in-process executor; `ratio` is each executor's cells per minute over the reference's, so
with 2 workers on 2 free cores it should approach 2, less the workers' start-up (`first_row_s`:
seconds until the first row arrives, mostly importing torch in the workers) spread over the run;
`steady_ratio` compares the rates after the first row, start-up aside. Every executor computes on
one torch thread per worker (the reference too, after one warm-up cell), so the ratios measure
process parallelism alone. The rows of every executor are checked equal to the reference's,
wall-clock fields aside.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

from privaudit.campaign.config import Campaign, parse_campaign
from privaudit.campaign.executors import Executor, InProcess, ProcessPool
from privaudit.campaign.run import run_campaign
from privaudit.store import ResultsStore

LEARNING_RATES = [0.05, 0.1, 0.2, 0.4]
SEEDS = list(range(10))


def campaign(rounds: int, seeds: list[int] = SEEDS, learning_rates: list[float] = LEARNING_RATES) -> Campaign:
    return parse_campaign({
        "campaign": {"name": "bench-campaign", "seeds": seeds},
        "data": {"dataset": "digits"},
        "defense": [{"kind": "dpsgd", "label": "D-PSGD", "topology": "ring", "agents": 8, "model": "mlp",
                     "batch_size": 16, "rounds": rounds, "eval_every": rounds, "grid": {"lr": learning_rates}}],
    })


def _numbers(row: dict) -> dict:
    return {key: value for key, value in row.items() if not key.endswith("wall_s")}


def measure(name: str, executor: Executor, planned: Campaign) -> tuple[dict, dict[str, dict]]:
    """Run the whole campaign on `executor` into a fresh directory; its timings and its rows."""
    arrivals: list[float] = []
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        run_campaign(planned, "", out, progress=False, say=lambda line: arrivals.append(time.perf_counter()),
                     executor=executor)
        wall = time.perf_counter() - started
        rows = {row["cell"]: _numbers(row) for row in ResultsStore(out).rows()}
    first = arrivals[0] - started
    return {"executor": name, "cells": len(rows), "wall_s": wall, "first_row_s": first,
            "cells_per_min": 60 * len(rows) / wall, "steady_cells_per_min": 60 * (len(rows) - 1) / (wall - first)}, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=300, help="rounds per cell (default 300: about 1 s a cell)")
    parser.add_argument("--ray", action="store_true", help="also run on a local Ray instance with --workers CPUs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    planned = campaign(args.rounds)
    measure("warm-up", InProcess(), campaign(args.rounds, seeds=[0], learning_rates=[0.1]))
    executors: list[tuple[str, Executor]] = [("local, 1 worker (in process)", InProcess()),
                                             (f"local, {args.workers} workers", ProcessPool(args.workers))]
    if args.ray:
        from privaudit.campaign.executors import RayExecutor

        executors.append((f"ray, {args.workers} workers", RayExecutor(args.workers)))
    results, reference_rows = [], None
    for name, executor in executors:
        result, rows = measure(name, executor, planned)
        reference_rows = reference_rows or rows
        result["same_rows"] = rows == reference_rows
        for key in ("cells_per_min", "steady_cells_per_min"):
            result[key.replace("cells_per_min", "ratio")] = result[key] / results[0][key] if results else 1.0
        results.append(result)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{len(SEEDS) * len(LEARNING_RATES)} cells: D-PSGD, digits, 8 agents, mlp, {args.rounds} rounds each; "
          "one torch thread per worker")
    print(f"{'executor':<32}{'wall s':>8}{'first row s':>13}{'cells/min':>11}{'ratio':>7}"
          f"{'after first row: cells/min':>28}{'ratio':>7}  same rows")
    for result in results:
        print(f"{result['executor']:<32}{result['wall_s']:>8.1f}{result['first_row_s']:>13.1f}"
              f"{result['cells_per_min']:>11.1f}{result['ratio']:>7.2f}{result['steady_cells_per_min']:>28.1f}"
              f"{result['steady_ratio']:>7.2f}  {'yes' if result['same_rows'] else 'NO'}")


if __name__ == "__main__":
    main()
