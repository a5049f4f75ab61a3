"""Canary audits of DP-D-PSGD at several noise multipliers and of undefended D-PSGD: ε_LB against
the sound ε (issue 6's acceptance table), with the time each audit took; then the one-run audit
(Steinke et al. 2023) of the same configurations.

    OMP_NUM_THREADS=1 python bench/canary.py [--runs 200] [--rounds 30] [--sigmas 0.5 1 2 4]
                                             [--canaries 200] [--guesses 20] [--json]

Set-up: digits cut to 200 training records, 4 agents on a complete graph (50 records each), the
`logreg` model, B = 10 (DP-D-PSGD: Poisson rate q = 0.2), η = 0.5, C = 1, δ = 1e-5; the victim is
agent 0, the attacker a global listener, the canary a random ±2 pattern labelled 0. `ratio` is
ε_LB/ε_sound (≤ 1 for a sound claim). The time reference, measured in the same run, is one plain
training run of the same configuration (no tap, no canary, no scoring): `cost` is an audit run's
time over it, the overhead of listening, extracting and scoring. The one-run audit puts each of
`--canaries` canaries (random labels) in the victim's data with probability ½ and guesses the
`--guesses` highest and lowest scored; `right` is its count of correct guesses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from attacks.canary import ratio
from defenses import DEFENSES
from privaudit.campaign.audit_findings import canary_audit, game_for_table, one_run_audit
from privaudit.sim import simulate

DATA = {"dataset": "digits", "max_train": 200}


def table(kind: str, rounds: int, sigma: float | None) -> dict:
    base = {"kind": kind, "topology": "complete", "agents": 4, "model": "logreg", "rounds": rounds,
            "eval_every": rounds, "batch_size": 10, "lr": 0.5}
    return base if sigma is None else base | {"clip": 1.0, "noise_multiplier": sigma, "delta": 1e-5}


def plain_run_seconds(defense_table: dict, repeats: int = 20) -> float:
    """Mean time of one training run of the configuration with nothing listening."""
    game = game_for_table(defense_table, DATA)
    start = time.perf_counter()
    for seed in range(repeats):
        setup = dataclasses.replace(game.setup, generator=torch.Generator().manual_seed(seed))
        simulate(DEFENSES[game.kind](game.params, setup), game.rounds, eval_every=game.rounds)
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="training runs per world")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sigmas", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--canaries", type=int, default=200, help="canaries of the one-run audit")
    parser.add_argument("--guesses", type=int, default=20, help="guesses per side of the one-run audit")
    parser.add_argument("--json", action="store_true", help="print the records as JSON lines too")
    args = parser.parse_args()

    settings = [("dpsgd", None)] + [("dp_dpsgd", sigma) for sigma in args.sigmas]
    print(f"{'defense':<9} {'sigma':>5} {'eps_lb':>7} {'eps_sound':>9} {'eps_claimed':>11} {'ratio':>6} "
          f"{'wall_s':>7} {'s/run':>6} {'cost':>5}")
    for kind, sigma in settings:
        defense_table = table(kind, args.rounds, sigma)
        plain = plain_run_seconds(defense_table)
        record = canary_audit(defense_table, DATA, runs=args.runs)
        sound, claimed, share = record["eps_sound"], record["eps_claimed"], ratio(record)
        print(f"{kind:<9} {'-' if sigma is None else sigma:>5} {record['eps_lb']:7.3f} "
              f"{'-' if sound is None else f'{sound:.3f}':>9} {'-' if claimed is None else f'{claimed:.3f}':>11} "
              f"{'-' if share is None else f'{share:.3f}':>6} {record['wall_s']:7.1f} "
              f"{record['seconds_per_run']:6.3f} {record['seconds_per_run'] / plain:5.2f}", flush=True)
        if args.json:
            print(json.dumps(record | {"plain_run_s": plain}))

    print(f"\none run, {args.canaries} canaries, {args.guesses} guesses per side")
    print(f"{'defense':<9} {'sigma':>5} {'right':>5} {'eps_lb':>7} {'eps_sound':>9} {'ratio':>6} {'wall_s':>7}")
    for kind, sigma in settings:
        record = one_run_audit(table(kind, args.rounds, sigma), DATA, canaries=args.canaries, guesses=args.guesses)
        sound, share = record["eps_sound"], ratio(record)
        print(f"{kind:<9} {'-' if sigma is None else sigma:>5} {record['correct']:>2}/{record['guesses']:<2} "
              f"{record['eps_lb']:7.3f} {'-' if sound is None else f'{sound:.3f}':>9} "
              f"{'-' if share is None else f'{share:.3f}':>6} {record['wall_s']:7.1f}", flush=True)
        if args.json:
            print(json.dumps(record))


if __name__ == "__main__":
    main()
