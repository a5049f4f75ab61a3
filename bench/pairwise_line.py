"""Pairwise ε_{u→v} of DP-D-PSGD by the attacker's distance from the victim (issue 28), with the
seconds each accountant took, all measured in this run.

    python bench/pairwise_line.py [--agents 8] [--graph line] [--rule metropolis] [--rounds 30]
                                  [--sigma 1] [--delta 1e-5] [--victim 0]

Columns: `claim` is Muffliato-GD's corrected formula as published (`muffliato_sgd_claim`, a Rényi
bound converted by dp_accounting); `worst` and `constant` are the exact loss of the attacker's
linear-Gaussian view for the worst non-adaptive canary sequence and for a constant canary
(`sgd_loss`), `certified` says whether a sequence attains the worst case; `central` is the bound
for any losses, with no network amplification (`sgd_central`). η, B and C cancel from all of them;
none counts subsampling amplification.
"""

from __future__ import annotations

import argparse
import time

from privaudit.network_accounting import hop_distances, muffliato_sgd_claim, sgd_central, sgd_loss
from privaudit.topology import Topology


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--graph", default="line")
    parser.add_argument("--rule", default="metropolis")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--victim", type=int, default=0)
    args = parser.parse_args()
    W = Topology.build(args.graph, args.agents, args.rule).W
    distances = hop_distances(W, args.victim)
    seconds = {"claim": 0.0, "exact": 0.0}
    print(f"{args.graph} of {args.agents} ({args.rule}), victim {args.victim}, T = {args.rounds}, "
          f"σ = {args.sigma:g}, δ = {args.delta:g}")
    print(f"{'attacker':>8} {'hops':>4} {'claim':>8} {'worst':>8} {'constant':>8} {'central':>8} {'μ worst':>8} "
          "certified")
    for attacker in sorted(range(args.agents), key=lambda v: (distances[v], v)):
        if attacker == args.victim:
            continue
        start = time.perf_counter()
        claim = muffliato_sgd_claim(W, args.victim, attacker, args.rounds, args.sigma, args.delta)
        seconds["claim"] += time.perf_counter() - start
        start = time.perf_counter()
        worst = sgd_loss(W, args.victim, attacker, args.rounds, args.sigma, args.delta, "worst")
        constant = sgd_loss(W, args.victim, attacker, args.rounds, args.sigma, args.delta, "constant")
        seconds["exact"] += time.perf_counter() - start
        central = sgd_central(W, args.victim, attacker, args.rounds, args.sigma, args.delta)
        print(f"{attacker:>8} {distances[attacker]:>4.0f} {claim.epsilon:>8.3f} {worst.epsilon:>8.3f} "
              f"{constant.epsilon:>8.3f} {central.epsilon:>8.3f} {worst.mu:>8.4f} "
              f"{'yes' if worst.mu - worst.mu_attained <= 1e-6 * worst.mu else 'no'}")
    print(f"seconds: claim {seconds['claim']:.3f}, exact (worst + constant) {seconds['exact']:.3f}")


if __name__ == "__main__":
    main()
