"""Canary audits of a defense: how much one record of the victim's data moves what the attacker
hears, turned into an ε lower bound.

The game (Jagielski et al. 2020; Nasr et al. 2021, 2023): R training runs on the victim's data D
and R on D ∪ {canary}, each with its own draw of the defense's randomness (batches, noise). The
canary is an outlier input with a fixed label, so its gradient points where no real record's does.
The attacker hears what its threat model allows (by default a global listener on the model
broadcasts), extracts the victim's released gradient ĝ_t at every round it can (for D-PSGD and
DP-D-PSGD `attacks.extract.dpsgd_state_difference`, exact), and scores the run with the white-box
statistic

    s = Σ_t ⟨ĝ_t, c_t⟩ / ‖c_t‖,

c_t the canary's gradient at the broadcast point x_i^t, passed through the defense's public
clipping (DP-D-PSGD: per-sample ℓ2 clip C), i.e. the direction the canary adds when it is sampled.
The two samples of s are then a hypothesis test between neighbouring datasets, and
`attacks.audit`'s held-out protocol turns it into ε_LB at δ: the test "canary in when s > t", t
chosen on a held-out quarter of the runs (`choose_threshold`), its FPR/FNR bounded by
Clopper–Pearson on the rest (`attacks.audit.bound_test`), so the bound holds at the stated
confidence (that module's docstring).

`one_run_game` is the one-training-run variant (Steinke, Nasr & Jagielski 2023): many canaries,
each in the victim's data with probability ½, the same score per canary, and ε_LB from the count
of right guesses among the highest and lowest scored (their binomial-tail theorem for (ε, δ)-DP).

Neighbouring datasets: add/remove of the canary, the adjacency DP-D-PSGD's claim is for. Its code
samples agent i's records with rate q_i = B/|D_i|, which the canary would lower by a factor
|D_i|/(|D_i|+1); the accountant analyses one fixed q, so the world with the canary keeps the
sampling sizes of the world without it (`privaudit.setup.Setup.rate_sizes`, set by `with_records`).
A defense joins by naming, in `SCENARIOS`, an extractor whose target is the victim's released
single-step gradient at a known point.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.stats import binom, norm
from torch import Tensor

from attacks.audit import SELECT_FRACTION, bound_test, clopper_pearson_upper
from attacks.extract import Target, extractor
from defenses import DEFENSES
from defenses.base import Defense, DefenseParams
from privaudit.errors import ConfigError
from privaudit.flatmodel import FlatModel
from privaudit.grads import per_sample_grads_agents
from privaudit.sampling import LocalData
from privaudit.setup import Setup
from privaudit.sim import simulate
from privaudit.threats import build_tap
from privaudit.wire import Kind, Transcript

SCENARIOS: dict[str, str] = {"dpsgd": "state_difference", "dp_dpsgd": "state_difference"}
"""Defenses a canary audit runs on, with the extraction scenario that yields the victim's released
gradient at each round (a `(defense, scenario)` key of `attacks.extract.EXTRACTORS`)."""

DEFAULT_DELTA = 1e-5
"""δ of the bound for a defense that states none (undefended D-PSGD)."""

_MIN_RUNS = 8


@dataclass(frozen=True)
class Canary:
    """One record: an input shaped like the dataset's (normalised units) and its label."""

    x: Tensor
    y: Tensor


def outlier_canary(setup: Setup, label: int = 0, scale: float = 2.0, seed: int = 0) -> Canary:
    """A random ±`scale` pattern (normalised units, so every pixel `scale` standard deviations off
    the mean) labelled `label`: nearly orthogonal to every real input, hence its gradient is too,
    and its loss stays high because no real record pulls the model towards it. Fixed by `seed`, so
    both worlds and every run audit the same record."""
    generator = torch.Generator().manual_seed(seed)
    shape = setup.data.shape
    signs = torch.randint(0, 2, shape, generator=generator).to(setup.data.x_train.dtype) * 2 - 1
    return Canary(signs * scale, torch.tensor(label, dtype=setup.data.y_train.dtype))


def with_record(setup: Setup, agent: int, canary: Canary) -> Setup:
    """`setup` with `canary` appended to `agent`'s shard (a new row of the training pool that no
    other agent holds); everything else, the test data included, is shared."""
    return with_records(setup, agent, canary.x[None], canary.y[None])


def with_records(setup: Setup, agent: int, x: Tensor, y: Tensor) -> Setup:
    """`setup` with the records x [k, ...], y [k] appended to `agent`'s shard (see `with_record`),
    its sampling rates still computed from the sizes without them (module docstring)."""
    local = setup.local
    pool = len(local.x)
    shards = [local.index[i, : int(local.sizes[i])].numpy() for i in range(local.n_agents)]
    shards[agent] = np.append(shards[agent], np.arange(pool, pool + len(x)))
    return dataclasses.replace(setup, local=LocalData(torch.cat([local.x, x]), torch.cat([local.y, y]), shards),
                               rate_sizes=setup.sampling_sizes)


def released_gradients(transcript: Transcript, victim: int, scenario: str, rounds: int) -> list[Target]:
    """The victim's released gradients ĝ_t with their points, read from the transcript alone, for
    t = 0..rounds−2 (the state difference at t needs the broadcast of t+1)."""
    extract = extractor(transcript.public.defense, scenario).extract
    return [extract(transcript, victim, t) for t in range(rounds - 1)]


def canary_scores(model: FlatModel, targets: list[Target], x: Tensor, y: Tensor) -> Tensor:
    """s_j = Σ_t ⟨ĝ_t, c_tj⟩/‖c_tj‖ for each of the k records x [k, ...], y [k] (module
    docstring): c_tj is record j's gradient at ĝ_t's point, clipped as the defense clips, i.e. the
    direction record j adds to ĝ_t when it is sampled. Returns [k]."""
    released = torch.stack([target.gradient.double() for target in targets])
    points = torch.stack([target.point.float() for target in targets])
    count = len(targets)
    per_sample = per_sample_grads_agents(model, points, x.expand(count, *x.shape), y.expand(count, *y.shape))
    clipping = targets[0].clipping
    direction = (clipping.apply(per_sample[:, :, None]) if clipping is not None else per_sample).double()
    unit = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.einsum("tp,tkp->k", released, unit)


def canary_score(model: FlatModel, transcript: Transcript, victim: int, canary: Canary, scenario: str,
                 rounds: int) -> float:
    """The one canary's score s (`canary_scores`): large when the canary was in the batches."""
    targets = released_gradients(transcript, victim, scenario, rounds)
    return float(canary_scores(model, targets, canary.x[None], canary.y[None])[0])


@dataclass(frozen=True)
class Game:
    """What every run of one audit shares: the set-up without the canary, the defense to run, the
    victim, the threat model and the canary the attacker scores against."""

    setup: Setup
    kind: str
    params: DefenseParams
    rounds: int
    victim: int
    threat: str
    canary: Canary

    @property
    def scenario(self) -> str:
        return SCENARIOS[self.kind]


def build_world(game: Game, include: bool, seed: int) -> Defense:
    """The defense of one run, its randomness seeded by `seed`, the canary in the victim's data
    when `include`."""
    setup = dataclasses.replace(game.setup, generator=torch.Generator().manual_seed(seed), seed=seed)
    if include:
        setup = with_record(setup, game.victim, game.canary)
    return DEFENSES[game.kind](game.params, setup)


def play(game: Game, include: bool, seed: int) -> float:
    """One training run (`build_world`) and the attacker's score of what its tap heard."""
    defense = build_world(game, include, seed)
    setup = defense.setup
    tap = build_tap(game.threat, game.victim, setup.topology, rounds=range(game.rounds), kinds=[Kind.MODEL])
    extractor(game.kind, game.scenario).check(tap, game.victim, setup.topology, game.rounds - 2)
    transcript = simulate(defense, game.rounds, eval_every=game.rounds, taps=[tap]).transcripts[0]
    return canary_score(setup.model, transcript, game.victim, game.canary, game.scenario, game.rounds)


def scores(game: Game, runs: int, include: bool, seed: int, side: int) -> np.ndarray:
    """`runs` independent scores of one world, the canary in the victim's data when `include`;
    run r is seeded by (seed, side, r), so the two sides of an audit (`side` 0 and 1) never share
    a draw, even when both leave the canary out (the null audit)."""
    seeds = np.random.SeedSequence([seed, side]).generate_state(runs)
    return np.array([play(game, include, int(s)) for s in seeds])


def choose_threshold(held_out: np.ndarray, held_in: np.ndarray, delta: float, confidence: float,
                     fresh_out: int, fresh_in: int) -> float:
    """The threshold t of the test "the canary was in when s > t", chosen on the held-out runs
    alone (so the bound on the fresh ones stays valid): the t whose forward bound
    log((1 − δ − β̄)/ᾱ), at the rates predicted for `fresh_out` / `fresh_in` runs, is largest.
    The FPR is predicted by a normal law fitted to the canary-free scores (a sum of ~T rounds of
    Gaussian noise and other records' projections); the FNR by the held-out fraction, because
    the scores with the canary mix over how often it was sampled, a left tail no normal law fits.

    Why not `attacks.audit.choose_test` on the held-out scores: with tens of runs its argmax sits
    where one held-out sample ends, often in that mixture's tail, which the fresh runs do not
    reproduce (measured on DP-D-PSGD, σ = 1, 200 runs: held-out FPR 33/50 and FNR 0/50, fresh
    0.83 and 0.07, so ε_LB = 0)."""
    mean, spread = held_out.mean(), max(held_out.std(ddof=1), 1e-12)
    grid = np.unique(np.concatenate([np.linspace(mean - 6 * spread, mean + 6 * spread, 2001), held_in]))
    fpr = norm.sf(grid, mean, spread)
    fnr = np.searchsorted(np.sort(held_in), grid, side="right") / len(held_in)
    level = math.sqrt(confidence)
    fpr_upper = clopper_pearson_upper(np.round(fpr * fresh_out), fresh_out, level)
    fnr_upper = clopper_pearson_upper(np.round(fnr * fresh_in), fresh_in, level)
    with np.errstate(divide="ignore"):
        forward = np.log(np.maximum(1 - delta - fnr_upper, 0.0) / fpr_upper)
    return float(grid[int(np.argmax(forward))])


def eps_bound(scores_out: np.ndarray, scores_in: np.ndarray, delta: float, confidence: float) -> dict[str, Any]:
    """ε_LB at δ from the two score samples, with `attacks.audit`'s held-out protocol: the test
    chosen on the first `SELECT_FRACTION` of each sample (`choose_threshold`), its rates bounded by
    `attacks.audit.bound_test` (Clopper–Pearson at √confidence each) on the rest. Returns the
    bound's record (value, test, observed and bounded rates)."""
    held_out = max(2, int(len(scores_out) * SELECT_FRACTION))
    held_in = max(2, int(len(scores_in) * SELECT_FRACTION))
    if held_out >= len(scores_out) or held_in >= len(scores_in):
        raise ConfigError("too few runs to hold out a split for choosing the test")
    fresh_out, fresh_in = scores_out[held_out:], scores_in[held_in:]
    threshold = choose_threshold(scores_out[:held_out], scores_in[:held_in], delta, confidence, len(fresh_out),
                                 len(fresh_in))
    return bound_test(fresh_out, fresh_in, 1, threshold, "eps", delta, confidence, "threshold").as_dict()


def _summary(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "max": float(values.max())}


def make_game(setup: Setup, kind: str, params: DefenseParams, rounds: int, *, victim: int = 0,
              threat: str = "global_listener", canary_label: int = 0, canary_scale: float = 2.0) -> Game:
    """The game of one defense configuration on `setup` (its outlier canary fixed by the set-up's
    seed); every problem is a one-line ConfigError."""
    if kind not in SCENARIOS:
        raise ConfigError(f"no canary audit for defense '{kind}' (known: {', '.join(sorted(SCENARIOS))})")
    if rounds < 2:
        raise ConfigError(f"a canary audit needs rounds >= 2 (a state difference reads rounds t and t+1), "
                          f"got {rounds}")
    if not 0 <= canary_label < setup.data.num_classes:
        raise ConfigError(f"canary_label {canary_label} is not a class (0..{setup.data.num_classes - 1})")
    try:
        tap = build_tap(threat, victim, setup.topology, rounds=range(rounds), kinds=[Kind.MODEL])
        extractor(kind, SCENARIOS[kind]).check(tap, victim, setup.topology, rounds - 2)
    except ValueError as error:
        raise ConfigError(f"canary audit: {error}") from None
    return Game(setup, kind, params, rounds, victim, threat, outlier_canary(setup, canary_label, canary_scale,
                                                                           setup.seed))


def audit_game(game: Game, *, runs: int = 200, confidence: float = 0.95, delta: float | None = None,
               seed: int = 0, null: bool = False) -> dict[str, Any]:
    """`runs` runs per world, ε_LB at δ (the defense's δ, else `DEFAULT_DELTA`) with `confidence`,
    beside the defense's claimed and sound ε. `null` runs the canary-free world on both sides (the
    attacker still scores against the canary): a calibration whose ε_LB must be 0 but for a
    (1 − confidence) chance. Returns a JSON-ready record."""
    if runs < _MIN_RUNS:
        raise ConfigError(f"runs must be >= {_MIN_RUNS} per world (a quarter chooses the test), got {runs}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    claim = DEFENSES[game.kind](game.params, game.setup).claim(game.rounds)
    delta = delta if delta is not None else (claim.delta if claim.delta is not None else DEFAULT_DELTA)
    if not 0 < delta < 1:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")
    start = time.perf_counter()
    scores_out = scores(game, runs, False, seed, side=0)
    scores_in = scores(game, runs, not null, seed, side=1)
    wall = time.perf_counter() - start
    bound = eps_bound(scores_out, scores_in, delta, confidence)
    return {
        "defense": game.kind,
        "params": game.params.model_dump(),
        "rounds": game.rounds,
        "agents": game.setup.topology.n,
        "topology": game.setup.topology.name,
        "model": game.setup.model_name,
        "victim": game.victim,
        "victim_records": int(game.setup.local.sizes[game.victim]),
        "threat": game.threat,
        "null": null,
        "runs_per_side": runs,
        "select_fraction": SELECT_FRACTION,
        "delta": delta,
        "confidence": confidence,
        "eps_lb": bound["value"],
        "eps_sound": claim.eps_sound,
        "eps_claimed": claim.eps_claimed,
        "test": {key: bound[key] for key in ("orientation", "threshold", "fpr", "fnr", "fpr_upper", "fnr_upper",
                                             "samples")},
        "scores": {"without": _summary(scores_out), "with": _summary(scores_in)},
        "wall_s": wall,
        "seconds_per_run": wall / (2 * runs),
    }


def ratio(record: dict[str, Any]) -> float | None:
    """ε_LB / ε_sound, None where the defense has no sound ε."""
    sound = record["eps_sound"]
    return None if sound is None or not math.isfinite(sound) or sound == 0 else record["eps_lb"] / sound


# ---------------------------------------------------------------------------------------------
# One training run (Steinke, Nasr & Jagielski 2023)


def one_run_p_value(eps: float, correct: int, guesses: int, canaries: int, delta: float) -> float:
    """P[at least `correct` right out of `guesses`] under (ε, δ)-DP, m = `canaries` each included
    with probability ½ (Steinke, Nasr & Jagielski 2023: their theorem for (ε, δ)-DP, in the form
    their Appendix D evaluates):

        P[Bin(r, q) ≥ v] + 2mδ · max_{1≤i≤v} P[v − i ≤ Bin(r, q) < v] / i,   q = e^ε/(1 + e^ε),

    the binomial tail of r guesses each right with the accuracy of ε-DP randomized response, plus
    the δ term. Increasing in ε: a larger ε allows more right guesses."""
    q = 1 / (1 + math.exp(-eps))
    tail = float(binom.sf(correct - 1, guesses, q))
    if correct == 0 or delta == 0:
        return min(tail, 1.0)
    below = np.cumsum(binom.pmf(correct - np.arange(1, correct + 1), guesses, q))
    return min(tail + 2 * canaries * delta * float((below / np.arange(1, correct + 1)).max()), 1.0)


def one_run_eps(correct: int, guesses: int, canaries: int, delta: float, confidence: float) -> float:
    """The largest ε the outcome refutes at `confidence`: sup{ε : p-value(ε) < 1 − confidence}
    (bisection to 1e-6 on `one_run_p_value`, which increases in ε); 0 when even ε = 0 stands."""
    alpha = 1 - confidence
    if one_run_p_value(0.0, correct, guesses, canaries, delta) >= alpha:
        return 0.0
    low, high = 0.0, 1.0
    while one_run_p_value(high, correct, guesses, canaries, delta) < alpha and high < 100:
        low, high = high, 2 * high
    while high - low > 1e-6:
        middle = (low + high) / 2
        refuted = one_run_p_value(middle, correct, guesses, canaries, delta) < alpha
        low, high = (middle, high) if refuted else (low, middle)
    return low


def outlier_canaries(setup: Setup, count: int, scale: float, seed: int) -> tuple[Tensor, Tensor]:
    """`count` canaries as `outlier_canary` makes one, each with its own pattern and a random
    label, so their gradients point in different directions: x [count, ...], y [count]."""
    generator = torch.Generator().manual_seed(seed)
    shape = (count, *setup.data.shape)
    signs = torch.randint(0, 2, shape, generator=generator).to(setup.data.x_train.dtype) * 2 - 1
    labels = torch.randint(0, setup.data.num_classes, (count,), generator=generator).to(setup.data.y_train.dtype)
    return signs * scale, labels


def one_run_game(game: Game, *, canaries: int = 200, guesses: int = 20, confidence: float = 0.95,
                 delta: float | None = None, seed: int = 0, canary_scale: float = 2.0) -> dict[str, Any]:
    """Steinke et al. 2023's audit in ONE training run: `canaries` outliers, each put in the
    victim's data with probability ½ (sampling rates those of the world without any, as for the
    repeated runs); the attacker scores each from the transcript (`canary_scores`), guesses "in" for the
    `guesses` highest scores and "out" for the `guesses` lowest (k₊ = k₋ fixed in advance, so
    no correction is needed), and the count of right guesses gives ε_LB (`one_run_eps`).
    Returns a JSON-ready record like `audit_game`'s."""
    if not (1 <= guesses and 2 * guesses <= canaries):
        raise ConfigError(f"guesses must satisfy 1 <= guesses and 2 * guesses <= canaries ({canaries}), "
                          f"got {guesses}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    victim, threat = game.victim, game.threat
    claim = DEFENSES[game.kind](game.params, game.setup).claim(game.rounds)
    delta = delta if delta is not None else (claim.delta if claim.delta is not None else DEFAULT_DELTA)
    start = time.perf_counter()
    x, y = outlier_canaries(game.setup, canaries, canary_scale, seed)
    included = torch.rand(canaries, generator=torch.Generator().manual_seed(seed + 1)) < 0.5
    run_seed = int(np.random.SeedSequence([seed, 2]).generate_state(1)[0])
    setup = dataclasses.replace(game.setup, generator=torch.Generator().manual_seed(run_seed), seed=run_seed)
    trained = DEFENSES[game.kind](game.params, with_records(setup, victim, x[included], y[included]))
    tap = build_tap(threat, victim, setup.topology, rounds=range(game.rounds), kinds=[Kind.MODEL])
    transcript = simulate(trained, game.rounds, eval_every=game.rounds, taps=[tap]).transcripts[0]
    scored = canary_scores(setup.model, released_gradients(transcript, victim, game.scenario, game.rounds), x, y)
    order = torch.argsort(scored)
    correct = int((~included[order[:guesses]]).sum() + included[order[-guesses:]].sum())
    return {
        "defense": game.kind,
        "params": game.params.model_dump(),
        "rounds": game.rounds,
        "victim": victim,
        "threat": threat,
        "canaries": canaries,
        "included": int(included.sum()),
        "guesses": 2 * guesses,
        "correct": correct,
        "delta": delta,
        "confidence": confidence,
        "eps_lb": one_run_eps(correct, 2 * guesses, canaries, delta, confidence),
        "eps_sound": claim.eps_sound,
        "eps_claimed": claim.eps_claimed,
        "wall_s": time.perf_counter() - start,
    }
