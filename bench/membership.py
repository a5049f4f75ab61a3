"""Membership inference at full scale: what one `[[membership]]` cell costs on a 10-agent campaign
with 8 reference models, split into its parts, against the training run it attacks.

    python bench/membership.py [--json] [--rounds 1000] [--references 8] [--defense dp_dpsgd]

Full scale here is digits split in halves (898 training records over 10 agents on a ring, the
other 899 held out for the attacker: 300 non-members, 200 RMIA population records, the rest to
train references), the `mlp` model, B = 32, 1000 rounds; the tests run the same pipeline at 10
records per agent and 150 rounds. The reference measured in the same run is the target's own training: an offline
attack with K reference models cannot cost less than K such runs, so `ratio` (membership time /
training time) should sit just above K, and anything far above it is overhead worth finding.
"""

from __future__ import annotations

import argparse
import json
import time

from privaudit.campaign.cells import build_defense, expand, expand_membership
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.jobs import run_cell
from privaudit.campaign.membership_findings import membership_rows, plan_membership
from privaudit.store import ResultsStore

DEFENSES = {
    "dpsgd": {"kind": "dpsgd", "lr": 0.1},
    "dp_dpsgd": {"kind": "dp_dpsgd", "lr": 0.1, "clip": 1.0, "noise_multiplier": 1.0},
}


def measure(defense: str, rounds: int, references: int, out: str) -> dict:
    campaign = parse_campaign({
        "campaign": {"name": "bench-membership", "seeds": [0]},
        "data": {"dataset": "digits", "test_fraction": 0.5},
        "defense": [{**DEFENSES[defense], "label": defense, "topology": "ring", "agents": 10, "model": "mlp",
                     "batch_size": 32, "rounds": rounds, "eval_every": rounds}],
        "membership": [{"threat": "curious_neighbour", "rounds": [rounds - 1], "references": references,
                        "non_members": 300, "rmia_samples": 200}],
    })
    cell = expand(campaign)[0]
    group = expand_membership(campaign, [cell])
    defense_run = build_defense(cell)
    tap, data = plan_membership(group, defense_run)
    started = time.perf_counter()
    _, output = run_cell(cell, defense=defense_run, taps=[tap])
    training_s = time.perf_counter() - started
    started = time.perf_counter()
    (row,) = membership_rows(group, defense_run, output.transcripts[0], output.final_states, data, ResultsStore(out))
    membership_s = time.perf_counter() - started
    return {
        "defense": defense, "agents": 10, "records": int(defense_run.setup.local.sizes.sum()), "rounds": rounds,
        "references": references, "candidates": row["data"]["members"] + row["data"]["non_members"],
        "training_s": training_s, "reference_training_s": row["reference_wall_s"],
        "scoring_s": row["score_wall_s"], "membership_s": membership_s, "ratio": membership_s / training_s,
        "auc": {name: metrics["auc"] for name, metrics in row["metrics"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--defense", choices=sorted(DEFENSES), default="dp_dpsgd")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--references", type=int, default=8)
    parser.add_argument("--out", default="results/bench-membership")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.defense, args.rounds, args.references, args.out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['defense']}: {result['agents']} agents, {result['records']} records, {result['rounds']} rounds, "
          f"{result['references']} reference models, {result['candidates']} candidates")
    print(f"  target training      {result['training_s']:8.1f} s   (reference for the ratio)")
    print(f"  reference training   {result['reference_training_s']:8.1f} s")
    print(f"  scoring + bootstrap  {result['scoring_s']:8.1f} s")
    print(f"  membership cell      {result['membership_s']:8.1f} s   ratio {result['ratio']:.2f}× training "
          f"(ideal ≈ {result['references']})")
    print("  AUC " + ", ".join(f"{name} {auc:.3f}" for name, auc in result["auc"].items()))


if __name__ == "__main__":
    main()
