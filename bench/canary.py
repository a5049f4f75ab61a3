"""End-to-end canary audits of DP-D-PSGD at σ = 1 and 2 (and undefended D-PSGD): the rigorous ε_LB
against the sound ε, the GDP estimate beside it, and the runs per second of one world per
simulation against many worlds per simulation, measured in the same run.

    OMP_NUM_THREADS=1 python bench/canary.py [--runs 64000] [--sigmas 1 2] [--seeds 0 1 2] [--rounds 30]
                                             [--canary gradient] [--workers 2] [--json]

Set-up (issue 14's acceptance): digits cut to 200 training records, 4 agents on a complete graph
(50 records each), the `logreg` model, B = 10 (Poisson rate q = 0.2), η = 0.5, C = 1, δ = 1e-5,
30 rounds; the victim is agent 0, the attacker a global listener, the canary a white-box gradient
canary (`privaudit/attacks/audit/canaries.py`), the score the per-round likelihood ratio summed over the rounds
heard (`privaudit/attacks/audit/channels.py`), the threshold fixed in advance from the mechanism's law (protocol
"model"). `ratio` is ε_LB/ε_sound (≤ 1 for a sound claim); `estimate` is the uncapped GDP
estimate (`privaudit/attacks/audit/estimates.py`), above ε_sound when the runs leak more than the accountant allows.

The one-run audit (Steinke et al. 2023) prints ε_LB, μ_LB (Mahloujifar et al. 2024) and
`eps_if_gaussian_curve`, the ε of μ_LB-GDP: that holds only for a mechanism whose privacy curve is
Gaussian, and is neither a bound nor an estimate for any other.

Runs per second: `before` is one world per simulation with per-sample gradients by autograd (how
each run was simulated before the worlds were batched and the closed forms written, and still the
path of a model without closed forms), then one world per simulation with the closed forms, `after`
the batched audit itself, and the machine's limit for the same arithmetic as bare tensor operations
(`bare_runs_per_second`), so `after` reads as a fraction of it; all on this machine in this run,
with the thread settings printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import os
import time

import torch

from privaudit.attacks.audit.canary_audit import Game, audit_game, one_run_game, ratio, scores, worlds_per_run
from privaudit.campaign.audit_findings import game_for_table

DATA = {"dataset": "digits", "max_train": 200}
CPU = torch.device("cpu")


def table(kind: str, rounds: int, sigma: float | None) -> dict:
    base = {"kind": kind, "topology": "complete", "agents": 4, "model": "logreg", "rounds": rounds,
            "eval_every": rounds, "batch_size": 10, "lr": 0.5}
    return base if sigma is None else base | {"clip": 1.0, "noise_multiplier": sigma, "delta": 1e-5}


def runs_per_second(game, runs: int, worlds: int, device: torch.device = CPU) -> float:
    """Runs per second of the audit's simulation and scoring, `worlds` worlds per simulation on
    `device`, after one untimed simulation (the first call of a path loads and compiles what it uses)."""
    scores(game, min(runs, worlds), True, seed=98, side=0, worlds=worlds, device=device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    scores(game, runs, True, seed=99, side=0, worlds=worlds, device=device)
    return runs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=64000, help="training runs per world")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sigmas", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--canary", default="gradient", choices=["gradient", "record", "outlier"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="audit seeds (the runs' draws); "
                        "with several, the median ratio is printed")
    parser.add_argument("--workers", type=int, default=1, help="processes the simulations are spread over")
    parser.add_argument("--speed-runs", type=int, default=256, help="runs timed for the speed comparison")
    parser.add_argument("--canaries", type=int, default=100, help="canaries of the one-run audit (at most the "
                        "victim's quiet directions, 157 here: more would overlap and blur each other)")
    parser.add_argument("--guesses", type=int, default=20, help="guesses per side of the one-run audit")
    parser.add_argument("--parts", nargs="+", default=["speed", "repeated", "one_run"],
                        choices=["speed", "repeated", "one_run"], help="what to measure")
    parser.add_argument("--json", action="store_true", help="print the records as JSON lines too")
    args = parser.parse_args()
    print(f"torch threads {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, workers {args.workers}")

    if "speed" in args.parts:
        speed(args)
    if "repeated" in args.parts:
        repeated(args)
    if "one_run" in args.parts:
        one_run(args)


def bare_runs_per_second(worlds: int, rounds: int, agents: int = 4, records: int = 50, rate: float = 0.2,
                         features: int = 64, classes: int = 10, repeats: int = 3) -> float:
    """The machine's limit for this audit's arithmetic: one run's work as bare tensor operations on
    `worlds` worlds at once, in the formulation the audit uses and nothing else — per round, each
    agent's Poisson mask over its `records` records (rate q), logistic regression's logits and
    residuals on its whole shard (shared by the worlds: [worlds × classes, F] × [F, records] per
    agent), the per-sample norms ‖r‖²(‖x‖² + 1), ℓ2 clipping, the clipped sums in closed form,
    Gaussian noise on every parameter, each world's 4 × 4 mixing and the projection on a canary
    direction. The best of `repeats` timings; runs per second = worlds / time."""
    generator = torch.Generator().manual_seed(0)
    n, size = worlds * agents, features * classes + classes
    x = torch.randn(agents, records, features, generator=generator)
    y = torch.nn.functional.one_hot(torch.randint(classes, (agents, records), generator=generator),
                                    classes).float().transpose(1, 2)
    mixing = torch.full((agents, agents), 1.0 / agents)
    direction = torch.randn(n, size, generator=generator)
    squared_inputs = x.square().sum(-1) + 1
    best = float("inf")
    for _ in range(repeats):
        state = torch.zeros(n, size)
        start = time.perf_counter()
        for _ in range(rounds):
            mask = (torch.rand(n, records, generator=generator) < rate).float().reshape(worlds, agents, records)
            weights = state[:, :-classes].reshape(worlds, agents, classes, features)
            bias = state[:, -classes:].reshape(worlds, agents, classes)
            residual = torch.softmax(torch.einsum("wncf,nkf->wnck", weights, x) + bias[..., None], dim=2) - y
            norms = (residual.square().sum(2) * squared_inputs).sqrt()
            weighted = residual * (mask * torch.clamp(1.0 / (norms + 1e-12), max=1.0))[:, :, None, :]
            update = torch.empty(n, size)
            update[:, :-classes].view(worlds, agents, -1).copy_(
                torch.einsum("wnck,nkf->wncf", weighted, x).reshape(worlds, agents, -1))
            update[:, -classes:] = weighted.sum(3).reshape(n, classes)
            update = (update + torch.randn(n, size, generator=generator)) / 10
            state = state - 0.5 * update
            state = torch.einsum("ij,wjp->wip", mixing, state.reshape(worlds, agents, size)).reshape(n, size)
            (state * direction).sum(-1)
        best = min(best, time.perf_counter() - start)
    return worlds / best


def autograd_game(game: Game) -> Game:
    """The game with the model computing every gradient by autograd (the path before the closed forms)."""
    return dataclasses.replace(game, setup=dataclasses.replace(game.setup, model=game.setup.model.without_closed_forms()))


def speed(args: argparse.Namespace) -> None:
    game = game_for_table(table("dp_dpsgd", args.rounds, 1.0), DATA, canary=args.canary)
    slow_runs = max(8, args.speed_runs // 32)
    before = runs_per_second(autograd_game(game), slow_runs, worlds=1)
    one_world = runs_per_second(game, slow_runs, worlds=1)
    worlds = worlds_per_run(game)
    after = runs_per_second(game, max(args.speed_runs, worlds), worlds=worlds)
    sizes = sorted({worlds, 256, 1024})
    limits = {size: bare_runs_per_second(size, args.rounds) for size in sizes}
    best = max(limits, key=limits.get)
    limit = limits[best]
    print(f"runs per second, one world per simulation with autograd per-sample gradients (before): {before:.1f}; "
          f"one world per simulation with the closed forms: {one_world:.1f}; batched ({worlds} worlds per "
          f"simulation): {after:.1f}; speed-up {after / before:.1f}× over before ({after / one_world:.1f}× over one "
          "world with the closed forms)")
    tried = ", ".join(f"{size} worlds {rate:.0f}" for size, rate in limits.items())
    print(f"measured limit of this machine for the same arithmetic as bare tensor operations: {limit:.0f} runs per "
          f"second ({best} worlds at once; {tried}); the batched audit runs at {after / limit:.1%} of it")
    record = {"runs_per_second_before": before, "runs_per_second_one_world": one_world,
              "runs_per_second_after": after, "runs_per_second_limit": limit, "worlds_per_simulation": worlds}
    if torch.cuda.is_available():
        cuda = torch.device("cuda")
        on_gpu = worlds_per_run(game, cuda)
        record["runs_per_second_cuda"] = runs_per_second(game, 4 * on_gpu, worlds=on_gpu, device=cuda)
        print(f"on {torch.cuda.get_device_name()}: {record['runs_per_second_cuda']:.0f} runs per second ({on_gpu} worlds "
              f"per simulation), {record['runs_per_second_cuda'] / before:.0f}× the one-world CPU path (before)")
    if args.json:
        print(json.dumps(record))


def repeated(args: argparse.Namespace) -> None:
    print(f"\n{'defense':<9} {'sigma':>5} {'seed':>4} {'runs':>6} {'eps_lb':>7} {'eps_sound':>9} {'ratio':>6} "
          f"{'estimate':>8} {'est/sound':>9} {'wall_s':>7} {'runs/s':>7}")
    for kind, sigma in [("dp_dpsgd", sigma) for sigma in args.sigmas] + [("dpsgd", None)]:
        runs = args.runs if sigma is not None else min(args.runs, 2000)
        game = game_for_table(table(kind, args.rounds, sigma), DATA, canary=args.canary)
        shares = []
        for seed in args.seeds if sigma is not None else args.seeds[:1]:
            record = audit_game(game, runs=runs, workers=args.workers, seed=seed)
            sound, share, estimate = record["eps_sound"], ratio(record), record["eps_estimate"]
            shares.append(share)
            print(f"{kind:<9} {'-' if sigma is None else sigma:>5} {seed:>4} {runs:>6} {record['eps_lb']:7.3f} "
                  f"{'-' if sound is None else f'{sound:.3f}':>9} {'-' if share is None else f'{share:.3f}':>6} "
                  f"{'-' if estimate is None else f'{estimate:.3f}':>8} "
                  f"{'-' if sound is None or estimate is None else f'{estimate / sound:.3f}':>9} "
                  f"{record['wall_s']:7.1f} {record['runs_per_second']:7.1f}", flush=True)
            if args.json:
                print(json.dumps(record))
        if sigma is not None and len(shares) > 1:
            print(f"{kind:<9} {sigma:>5} median ratio eps_lb/eps_sound over seeds {args.seeds}: "
                  f"{statistics.median(shares):.3f}", flush=True)


def one_run(args: argparse.Namespace) -> None:
    print(f"\none run, {args.canaries} canaries, {args.guesses} guesses per side")
    print("eps_if_gaussian_curve is the epsilon of mu_lb-GDP: a lower bound only for a mechanism whose privacy "
          "curve is Gaussian; for any other mechanism it is neither a bound nor an estimate (it can exceed the true "
          "epsilon). eps_lb is the bound that holds for every mechanism.")
    print(f"{'defense':<9} {'sigma':>5} {'right':>7} {'eps_lb':>7} {'mu_lb':>6} {'eps_if_gaussian_curve':>21} "
          f"{'eps_sound':>9}")
    for kind, sigma in [("dp_dpsgd", sigma) for sigma in args.sigmas] + [("dpsgd", None)]:
        game = game_for_table(table(kind, args.rounds, sigma), DATA, canary=args.canary, count=args.canaries)
        record = one_run_game(game, guesses=args.guesses)
        fdp, sound = record["fdp"], record["eps_sound"]
        print(f"{kind:<9} {'-' if sigma is None else sigma:>5} {record['correct']:>3}/{record['guesses']:<3} "
              f"{record['eps_lb']:7.3f} {fdp['mu_lb']:6.3f} {fdp['eps_if_gaussian']:21.3f} "
              f"{'-' if sound is None else f'{sound:.3f}':>9}", flush=True)
        if args.json:
            print(json.dumps(record))


if __name__ == "__main__":
    main()
