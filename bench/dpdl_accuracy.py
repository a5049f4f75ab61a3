"""DPDL's acceptance numbers: accuracy of the ND variant beside D-PSGD, and of the noisy variant at
several σ beside its privacy figures, on digits (Dirichlet 0.25) over a complete bipartite graph
of 10 agents.

    python bench/dpdl_accuracy.py [--json] [--rounds 500] [--seeds 0 1 2]

Setting: `mlp` (the paper's LeNet needs ≥ 16 px per side; digits are 8×8), min_size = 40 so the
smallest shard holds ~50 samples and B = 32 can be drawn without replacement by every agent. The
paper's other hyperparameters (C = 2, β = 0.7, α = 1.5) are kept; η is each algorithm's best of a
small sweep at 300 rounds, seed 0 (D-PSGD {0.05, 0.1, 0.2, 0.4}: 0.4; DPDL ND {0.01, 0.02, 0.05, 0.1}:
0.1), not the paper's MNIST 0.005, which is far too slow for digits' few hundred rounds.
For each run: final test accuracy of the average model (mean over seeds), the claimed ε (eq. 23),
the sound ε (None for DPDL, with the reason) and the ε of the cross-gradient messages alone.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import privaudit.defenses.dpdl  # noqa: F401  (registers "dpdl")
from privaudit.accounting import without_replacement_epsilon
from privaudit.campaign.cells import build_defense, expand
from privaudit.campaign.config import parse_campaign
from privaudit.sim import simulate

SHAPE = {"topology": "bipartite", "agents": 10, "model": "mlp", "batch_size": 32}
DPDL = {"kind": "dpdl", "lr": 0.1, "clip": 2.0, "beta": 0.7, "alpha": 1.5, "delta": 1e-5}
RUNS = {
    "D-PSGD": {"kind": "dpsgd", "lr": 0.4},
    "DPDL ND": {**DPDL, "noise": False},
    **{f"DPDL σ={sigma:g}": {**DPDL, "noise_multiplier": sigma} for sigma in (0.5, 1.0, 2.0)},
}


def measure(rounds: int, seeds: list[int]) -> list[dict]:
    tables = [{**SHAPE, **table, "label": label, "rounds": rounds, "eval_every": rounds}
              for label, table in RUNS.items()]
    campaign = parse_campaign({
        "campaign": {"name": "dpdl-accuracy", "seeds": seeds},
        "data": {"dataset": "digits", "partition": "dirichlet", "alpha": 0.25, "min_size": 40},
        "defense": tables,
    })
    accuracy: dict[str, list[float]] = {}
    claims = {}
    for cell in expand(campaign):
        defense = build_defense(cell)
        output = simulate(defense, rounds, eval_every=rounds)
        accuracy.setdefault(cell.label, []).append(output.history[-1]["avg_acc"])
        if cell.label not in claims:
            claim = defense.claim(rounds)
            partial = (without_replacement_epsilon(defense.cross_gradient_mechanism(rounds), 1e-5)
                       if cell.run.kind == "dpdl" and cell.params.noise else None)
            claims[cell.label] = {"eps_claimed": claim.eps_claimed, "eps_sound": claim.eps_sound,
                                  "sound_method": claim.sound_method.split(":")[0],
                                  "eps_cross_gradient_only": partial}
    return [{"run": label, "rounds": rounds, "seeds": seeds, "accuracy": statistics.fmean(values),
             "accuracy_per_seed": values, **claims[label]} for label, values in accuracy.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    torch.set_num_threads(1)  # small tensors: threads only contend
    rows = measure(args.rounds, args.seeds)
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return

    def show(value: float | None) -> str:
        return "—" if value is None else f"{value:.4g}"

    print(f"{'run':<14} {'accuracy':>9} {'ε claimed':>10} {'ε sound':>8} {'ε cross-grad only':>18}  sound method")
    for row in rows:
        print(f"{row['run']:<14} {row['accuracy']:>9.4f} {show(row['eps_claimed']):>10} {show(row['eps_sound']):>8} "
              f"{show(row['eps_cross_gradient_only']):>18}  {row['sound_method']}")


if __name__ == "__main__":
    main()
