"""Empirical DP audit: tightness against the number of samples, and wall time.

Sections (each point is `privaudit.attacks.audit.mechanism_audit.audit` end to end — neighbour search, sampling, test
choice on the held-out split, Clopper–Pearson on the fresh samples, exact curve, claim — at 95 %
confidence, over `--seeds` seeds; the median and the smallest bound are printed):

* laplace — Laplace(ε = 1) on x = 0 vs x′ = 1: ε_LB at δ = 0 against the exact ε = 1 that the
  same run computes by PLD (the reference); acceptance: ε_LB ≥ 0.95 within 10 s on 2 cores.
* ternary — seed 004's ternary quantizer at r = 10 under ℓ1: δ_LB at ε = 0 against the exact
  δ = 1/r (PLD, same run); acceptance: δ_LB ≥ 0.9/r.

* sampling — draws per second of every registered mechanism at dim 1 (best of 3 runs of 10⁶
  draws), against numpy's uniform generator timed in the same run (the reference).

Wall times depend on the machine's load (printed). Sampling is single-threaded numpy (torch for
the ternary sampler), so the number of cores matters little.

Run: python bench/audit.py [--json] [--sections laplace,ternary,sampling] [--seeds K] [--samples 1000,10000,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from privaudit.attacks.audit.mechanism_audit import audit
from privaudit.attacks.audit.mechanisms import MECHANISMS, build

LAPLACE_TARGET = 0.95
LAPLACE_SECONDS = 10.0
TERNARY_R = 10.0
TERNARY_TARGET = 0.9 / TERNARY_R
SAMPLES = (1_000, 10_000, 100_000, 1_000_000, 3_000_000)


def _curve(name: str, params: dict, quantity: str, delta: float, samples: list[int], seeds: int) -> list[dict]:
    """The bound on `quantity` ("eps" or "delta") against the samples per input, with the exact
    value of the same run as the reference."""
    rows = []
    for n in samples:
        values, seconds, exact = [], [], None
        for seed in range(seeds):
            start = time.perf_counter()
            report = audit(name, params, samples=n, delta=delta, seed=seed)
            seconds.append(time.perf_counter() - start)
            values.append(report.eps_bound.value if quantity == "eps" else report.delta_bound.value)
            exact = report.exact[quantity]
        median = statistics.median(values)
        rows.append({"samples": n, "median": median, "smallest": min(values), "exact": exact,
                     "ratio_to_exact": median / exact, "median_seconds": statistics.median(seconds)})
    return rows


def _first_reaching(rows: list[dict], target: float) -> dict | None:
    return next((row for row in rows if row["smallest"] >= target), None)


def bench_laplace(samples: list[int], seeds: int) -> dict:
    rows = _curve("laplace", {"eps": 1.0}, "eps", 0.0, samples, seeds)
    reached = _first_reaching(rows, LAPLACE_TARGET)
    return {"rows": rows, "target": LAPLACE_TARGET, "target_seconds": LAPLACE_SECONDS, "first_reaching": reached,
            "met": reached is not None and reached["median_seconds"] <= LAPLACE_SECONDS}


def bench_ternary(samples: list[int], seeds: int) -> dict:
    rows = _curve("ternary", {"r": TERNARY_R}, "delta", 1e-5, samples, seeds)
    reached = _first_reaching(rows, TERNARY_TARGET)
    return {"rows": rows, "target": TERNARY_TARGET, "first_reaching": reached, "met": reached is not None}


def _best_seconds(draw, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        draw()
        best = min(best, time.perf_counter() - start)
    return best


def bench_sampling(draws: int = 1_000_000) -> dict:
    """Draws per second of each mechanism's sampler at dim 1, and its time over numpy's uniform
    draws of the same count."""
    rng = np.random.default_rng(0)
    reference = _best_seconds(lambda: rng.random((draws, 1)))
    rows = {}
    for name in MECHANISMS:
        mechanism = build(name)
        x = mechanism.candidates(1.0, 1)[0].x_prime
        mechanism.sample(x, 10, rng)
        seconds = _best_seconds(lambda: mechanism.sample(x, draws, rng))
        rows[name] = {"draws_per_second": draws / seconds, "ratio_to_uniform": seconds / reference}
    return {"draws": draws, "uniform_draws_per_second": draws / reference, "mechanisms": rows}


def _print(figures: dict) -> None:
    print(f"load average {figures['load_before']} → {figures['load_after']}, {figures['seeds']} seed(s) per point")
    for section, label in (("laplace", "Laplace(ε = 1): ε_LB at δ = 0"), ("ternary", f"ternary r = {TERNARY_R:g}: "
                                                                                       "δ_LB at ε = 0")):
        if section not in figures:
            continue
        result = figures[section]
        print(label)
        for row in result["rows"]:
            print(f"  n = {row['samples']:>9,}: median {row['median']:.4f} (smallest {row['smallest']:.4f}), exact "
                  f"{row['exact']:.4f}, ratio {row['ratio_to_exact']:.3f}, {row['median_seconds']:.2f} s")
        reached = result["first_reaching"]
        where = (f"first at n = {reached['samples']:,} in {reached['median_seconds']:.2f} s" if reached
                 else "not reached")
        print(f"  target ≥ {result['target']:.4g} in every seed: {where} → {'met' if result['met'] else 'NOT met'}")
    if "sampling" in figures:
        sampling = figures["sampling"]
        print(f"sampling at dim 1 ({sampling['draws']:,} draws; numpy uniform: "
              f"{sampling['uniform_draws_per_second'] / 1e6:.1f} M/s)")
        for name, row in sampling["mechanisms"].items():
            print(f"  {name:<20} {row['draws_per_second'] / 1e6:7.1f} M draws/s, {row['ratio_to_uniform']:.1f}× "
                  "the uniform draws' time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sections", default="laplace,ternary,sampling")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--samples", default=",".join(map(str, SAMPLES)))
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    unknown = sections - {"laplace", "ternary", "sampling"}
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    samples = [int(float(n)) for n in args.samples.split(",")]
    figures: dict = {"seeds": args.seeds, "load_before": [round(v, 2) for v in os.getloadavg()]}
    if "laplace" in sections:
        figures["laplace"] = bench_laplace(samples, args.seeds)
    if "ternary" in sections:
        figures["ternary"] = bench_ternary(samples, args.seeds)
    if "sampling" in sections:
        figures["sampling"] = bench_sampling()
    figures["load_after"] = [round(v, 2) for v in os.getloadavg()]
    if args.json:
        print(json.dumps(figures))
    else:
        _print(figures)


if __name__ == "__main__":
    main()
