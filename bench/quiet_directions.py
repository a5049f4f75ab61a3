"""The canary's quiet directions on a 9,610-parameter MLP: the projection through the rows' Gram
matrix (`privaudit.attacks.audit.canaries._complement`) against the full SVD it replaced (issue 36:
184 s an audit), measured in the same run on the same rows.

    OMP_NUM_THREADS=2 python bench/quiet_directions.py [--agents 5] [--count 1] [--no-svd] [--json]

Set-up: digits, the default `mlp` model (64 → 128 → 10, 9,610 parameters), `agents` agents (5:
about 288 records for the victim, the issue's case), the victim's per-sample gradients at the
probe points (`victim_gradients`: 4,032 rows). Both methods draw the same random vectors; the
bench prints each one's seconds, their ratio, each one's worst orthogonality to the rows
(max |⟨row, u⟩| / ‖row‖) and the largest difference between the two results (the same directions
up to rounding when the rows are independent). `--no-svd` skips the reference (minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from privaudit.attacks.audit.canaries import _complement, victim_gradients
from privaudit.campaign.cells import build_setup, expand
from privaudit.campaign.config import parse_campaign


def _svd_complement(rows: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """The method before issue 36: the rows' full SVD, its numerical span projected out."""
    _, singular, vh = torch.linalg.svd(rows, full_matrices=False)
    span = vh[: int((singular > singular.max() * 1e-9).sum())]
    vectors = torch.randn((count, rows.shape[1]), generator=generator, dtype=torch.float64)
    vectors = vectors - (vectors @ span.T) @ span
    if count <= rows.shape[1] - len(span):
        vectors = torch.linalg.qr(vectors.T).Q.T
    return vectors / torch.linalg.vector_norm(vectors, dim=1, keepdim=True)


def _worst(rows: torch.Tensor, u: torch.Tensor) -> float:
    return float(((rows @ u.T).abs() / torch.linalg.vector_norm(rows, dim=1, keepdim=True)).max())


def _timed(method, rows: torch.Tensor, count: int) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    found = method(rows, count, torch.Generator().manual_seed(1))
    return time.perf_counter() - start, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--no-svd", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    campaign = parse_campaign({"campaign": {"name": "bench", "seeds": [0]}, "data": {"dataset": "digits"},
                               "defense": [{"kind": "dp_dpsgd", "topology": "complete", "agents": args.agents,
                                            "model": "mlp", "rounds": 4, "batch_size": 10}]})
    setup = build_setup(expand(campaign)[0])
    start = time.perf_counter()
    rows = victim_gradients(setup, 0, 0)
    figures = {"parameters": setup.model.dim, "rows": len(rows), "count": args.count,
               "threads": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
               "gradients_s": time.perf_counter() - start}
    figures["projection_s"], new = _timed(_complement, rows, args.count)
    figures["projection_worst"] = _worst(rows, new)
    if not args.no_svd:
        figures["svd_s"], old = _timed(_svd_complement, rows, args.count)
        figures["svd_worst"] = _worst(rows, old)
        figures["ratio"] = figures["svd_s"] / figures["projection_s"]
        figures["largest_difference"] = float((new - old).abs().max())
    if args.json:
        print(json.dumps(figures))
        return
    print(f"quiet directions: {figures['parameters']:,} parameters, {figures['rows']:,} gradient rows, "
          f"{args.count} direction(s), {figures['threads']} torch threads (OMP_NUM_THREADS={figures['OMP_NUM_THREADS']})")
    print(f"  the rows' gradients  : {figures['gradients_s']:8.1f} s")
    print(f"  projection (Gram)    : {figures['projection_s']:8.1f} s, worst |<row, u>|/|row| "
          f"{figures['projection_worst']:.1e}")
    if "svd_s" in figures:
        print(f"  full SVD (reference) : {figures['svd_s']:8.1f} s, worst |<row, u>|/|row| {figures['svd_worst']:.1e}")
        print(f"  SVD / projection = {figures['ratio']:.1f}x; largest difference between the two directions "
              f"{figures['largest_difference']:.1e}")


if __name__ == "__main__":
    main()
