"""Canary audits by the attacker's position in the graph (issue 28): what one honest-but-curious
agent, or a coalition of them, tells of one victim's canary from what it receives alone.

A distant agent does not hear the victim, so it cannot rebuild the victim's releases (the state
difference needs the victim's states and all its neighbours'). What it holds are its neighbours'
states, every round, and its own. For a defense whose states follow a public linear recurrence
(D-PSGD and DP-D-PSGD: x^{t+1} = W x^t − η g^t; Muffliato-GD: x^{t+1} = W x^t − s_t g^t with
s_t = η on its update rounds, every K-th, and 0 on the gossip rounds between them;
`privaudit.attacks.coalition.dynamics`) every state it holds is a linear map of all agents' updates:

    x_w^t = (W^t x^0)_w − Σ_{s<t} s_s (W^{t−1−s})_{w,:} g^s,

so the victim's canary term in g_u^s reaches agent w at round t with weight −s_s (W^{t−1−s})_{w,u},
and so does every agent's Gaussian noise N(0, σ²C²/B²) (`sgd_weights` follows the registered
recurrence, time-varying or not: a gossip round's update has weight 0 everywhere, W alone carries
what earlier updates put in the states). Projected on the canary's direction u, the attacker's
view V (the states ⟨x_w^t, u⟩, t ≥ 1, of its neighbours and its own) is, per world, V = B n +
constant with n the agents' updates along u, i.i.d. noise of one variance; the canary moves the
mean of n by the same amount m on the victim's entries of every update round. Its own states
carry what it knows of its own updates (x_a^{t+1} = Σ_j w_aj x_j^t − s_t g_a^t, every x_j^t
held), so the view spans what `privaudit.network_accounting` grants a curious agent: its
neighbours' states and its own noisy updates (the last update, which no state carries, is
independent of the rest and weighs 0). The Neyman–Pearson statistic of that linear-Gaussian model is the likelihood ratio's linear part

    score = Δᵀ Σ⁻¹ V,   Δ = m B 1_u,   Σ ∝ B Bᵀ,   i.e.  score ∝ wᵀ V with w = (B Bᵀ)⁻¹ B 1_u,

the generalised least-squares estimate of the canary's shift. Its direction is the same whatever
m, the noise's scale and the sampling rate: a canary in every batch and the expected shift q m
under Poisson sampling give the same test, so the statistic needs neither (dp_dpsgd samples the
planted gradient canary like any record, Poisson with rate q = B/|D_u|, and so does muffliato;
D-PSGD draws fixed batches; both enter only the runs). The model's separation ‖P 1_u‖ (P the projection on B's row
space) is what `privaudit.network_accounting.sgd_gram` calls √(1ᵀM1): the model predicts
μ = q ‖P 1_u‖/σ (for Muffliato-GD `sgd_gram` with its K gossip steps per update). An attacker more
hops away than the run has rounds holds nothing the victim computed (`reaches`): ε = 0 exactly,
and it is not scored.

The model only chooses the statistic. The other agents' gradients also move along u (u is quiet
for the victim's records only) and depend on the states, the canary is sampled, the states drift:
none of it is in the model, so its mean and law are not trusted. The threshold is chosen on the
first quarter of each side's runs (`privaudit.attacks.audit.canary_statistics.held_out_bound`, whose normal
fit absorbs any offset) and counted on the rest, Clopper–Pearson at √confidence per rate, as
every canary audit here: the bound holds whatever the model gets wrong. The "model" protocol of
`canary_audit` is not offered: its threshold comes from scores simulated from the law, and the
law of these scores (their null mean above all) depends on the other agents' data.

Batched: one side's runs are `worlds` disjoint copies of the network per simulation
(`privaudit.worlds`), and every attacker of the audit reads the same simulations. One tap records
the union of what the attackers receive (`Received`), once; each attacker's score reads only the
transcript its own threat model's tap lets through (`received`: a curious neighbour's or a
coalition's `hears`, its neighbours' broadcasts and its own), so no score touches a message its
attacker does not receive. The pairs of one audit share their runs: each pair's bound holds at
its confidence, not all pairs' at once.

The released model (`released`, issue 38): from the same simulations, each single-agent attacker v
is also scored as if it had heard nothing of the training and been handed only its own final model
x_v^T (the last iterate, T = rounds; `privaudit.threats.Release`, the `released_model` threat):
score = −⟨x_v^T, u⟩, read from the final states alone, never from a message. Why the plain
projection: one run gives one final vector, and in the linear-Gaussian model above it is
x_v^T = const − Σ_s s_s (A_{T−1}⋯A_{s+1})_{v,:} n^s, whose component along u carries the canary's
whole shift, −c m with c = Σ_s s_s (A_{T−1}⋯A_{s+1})_{v,u}, while the isotropic noise leaves every
component orthogonal to u independent of it: the projection is a sufficient statistic, a Gaussian
whose mean the canary moves, and the likelihood ratio is monotone in it. The generalised
least-squares weight of that single observation, b its row over all updates (bᵀ1_u = −c), is
−c/‖b‖² (`released_weight`), a scale no threshold test sees, so only its sign is kept: −1 wherever
the mixing weights are non-negative (c > 0), hence the minus; no other weighting of one vector
does better in the model. Its separation c/‖b‖ stands beside the transcript's ‖P 1_u‖. The threshold is
chosen on the same held-out runs as the transcript's and counted on the rest, with a normal fit of
the scores with the canary where they pass a normality test (`held_out_bound(..., fit_in=True)`: a
final model sums every round's noise, as the canary audits' released models do). x_v^T holds the
victim's influence iff x_v^{d+1} does, d the distance: the reach is the transcript's (`reaches`),
and an unreached agent's released bound is 0 exactly, unscored. A coalition holds several final
models, which the `released_model` threat (one agent's model) does not cover: its pair has none.
The ratio released/transcript says, per pair, how much hiding the transcript costs the attacker;
both bounds hold at the audit's confidence each (they share the runs), neither bounds the other.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from privaudit.attacks import views
from privaudit.attacks.audit.bounds import SELECT_FRACTION, perfect_test_eps
from privaudit.attacks.audit.canary_audit import CPU, Game, audit_delta, simulations, world, worlds_per_run
from privaudit.attacks.audit.canary_statistics import held_out_bound
from privaudit.attacks.audit.estimates import gdp_estimate
from privaudit.attacks.audit.verdict import decide
from privaudit.defenses import DEFENSES
from privaudit.defenses.dpsgd import DPDPSGD
from privaudit.defenses.muffliato import Muffliato, averaging
from privaudit import devices
from privaudit.accounting import Claim, Neighbours
from privaudit.errors import ConfigError
from privaudit.limits import require
from privaudit.network_accounting import (FORMULA_BELOW, PairLoss, averaging_loss, hop_distances, muffliato_averaging_claim,
                                          muffliato_gd_claim, sgd_central, sgd_loss)
from privaudit.progress import Progress
from privaudit.sim import public_knowledge, simulate
from privaudit.threats import Release, build_release, build_tap
from privaudit.topology import Topology
from privaudit.wire import Kind, PublicKnowledge, Tap, Transcript
from privaudit.worlds import Replicated

STATISTIC = "linear_gaussian"
STATISTIC_METHOD = ("the linear part of the log-likelihood ratio of the linear-Gaussian model of the attacker's view "
                    "(its neighbours' states and its own, projected on the canary's direction; the victim's "
                    "canary and every agent's noise spread through the public recurrence): wᵀV with "
                    "w = (BBᵀ)⁻¹B1_u; threshold chosen on held-out runs")

_MIN_RUNS = 8


@dataclass(frozen=True)
class Position:
    """One attacker of the audit: `agents` (one curious agent, or a coalition) `distance` hops from
    the victim; `read`, the agents whose broadcast states it holds (the members' neighbours and the
    members themselves), and its statistic's `weights` [rounds, read] on ⟨x_w^t, u⟩
    (`sgd_weights`); `separation` the model's ‖P 1_u‖. `reached`: whether anything the victim
    computes reaches it within the run (`reaches`); where not, it is not scored."""

    agents: tuple[int, ...]
    read: tuple[int, ...]
    distance: int
    weights: np.ndarray
    separation: float
    reached: bool

    @property
    def heard(self) -> tuple[int, ...]:
        """The agents outside the attacker whose states it receives."""
        return tuple(w for w in self.read if w not in self.agents)

    @property
    def threat(self) -> str:
        return threat_of(self.agents)

    def tap(self, victim: int, network: Topology, kind: Kind) -> Tap:
        return attacker_tap(self.agents, victim, network, kind)


def threat_of(agents: tuple[int, ...]) -> str:
    """One agent is a curious agent (`privaudit.threats`' curious neighbour, wherever it sits);
    several, a coalition."""
    return "curious_neighbour" if len(agents) == 1 else "coalition"


def attacker_tap(agents: tuple[int, ...], victim: int, network: Topology, kind: Kind) -> Tap:
    """The attacker's own threat model: what it receives of `kind` (its own broadcasts included);
    ValueError (one line) for agents the network lacks."""
    return build_tap(threat_of(agents), victim, network, kinds={kind}, observer=agents[0], agents=agents)


class Received(Tap):
    """What several attackers receive, recorded once for all of them: a message any of their taps
    hears. Never read as such: each attacker reads its own part (`received`)."""

    threat_model = "curious agents"

    def __init__(self, taps: Sequence[Tap], kinds: Iterable[Kind]) -> None:
        super().__init__(None, kinds)
        self.taps = list(taps)

    def hears(self, sender: int, receiver: int | None, topology: Topology) -> bool:
        return any(tap.hears(sender, receiver, topology) for tap in self.taps)

    def check(self, topology: Topology) -> None:
        for tap in self.taps:
            tap.check(topology)


def received(transcript: Transcript, tap: Tap, network: Topology) -> Transcript:
    """The part of `transcript` that `tap` lets through: the messages it hears (of its kinds, at its
    rounds) and the private values it observes. An attacker's score reads this and nothing else."""
    return dataclasses.replace(
        transcript, threat_model=tap.threat_model, observer=tap.observer,
        messages=[m for m in transcript.messages if tap.wants(m.round, m.sender, m.receiver, m.kind, network)],
        disclosures=[d for d in transcript.disclosures if tap.wants_disclosure(d.round, d.agent, d.name)])


def _recurrence(game: Game) -> tuple[Kind, PublicKnowledge]:
    """The broadcast kind of the defense's exact linear recurrence and the run's public knowledge;
    ConfigError when the defense has none the position audit can follow."""
    try:
        model = views.dynamics(game.kind)
    except ValueError as error:
        raise ConfigError(f"position audit: {error}") from None
    public = public_knowledge(DEFENSES[game.kind](game.params, game.setup))
    if not model.exact or model.step(_empty(public), 0)[1] is not None:
        raise ConfigError(f"position audit: '{game.kind}' broadcasts no exact state of a recurrence x^(t+1) = "
                          "A x^t - s g^t (its view's dynamics), so a distant agent's view has no linear model")
    return model.kind, public


def _empty(public: PublicKnowledge) -> Transcript:
    return Transcript("public", None, [], [], public)


def sgd_weights(public: PublicKnowledge, victim: int, read: tuple[int, ...],
                rounds: int) -> tuple[np.ndarray, float]:
    """The statistic's weights of an attacker holding the states of `read` at rounds 1..rounds−1
    (round 0's, x^0, is public: weight 0) (module docstring).

    In the space of all agents' updates n_k^s (s < rounds − 1), the state x_w^t is the row
    −s_s (A_{t−1}⋯A_{s+1})_{w,:} on block s < t (the defense's registered recurrence
    x^{t+1} = A_t x^t − s_t g^t; W^{t−1−s} for D-PSGD, 0 on Muffliato-GD's gossip rounds s): B.
    The canary moves n by 1_u (every round's victim entry; a gossip round's column is 0).
    w = (B Bᵀ)⁻¹ B 1_u is the least-squares solution of Bᵀ w = 1_u (Bᵀ w = P 1_u, P the
    projection on B's row space); the separation is ‖P 1_u‖. Returns
    (weights [rounds, read], separation)."""
    n, dynamics = public.agents, views.dynamics(public.defense)
    updates = rounds - 1
    rows, columns = updates * len(read), updates * n
    require("memory", math.ceil(3 * 8 * rows * columns / 2 ** 20),
            f"the position audit's model ({rows} states × {columns} updates)")
    view = np.zeros((updates, len(read), updates, n))
    influence = np.zeros((updates, n, n))  # influence[s] = ∂x^t/∂n^s at the current t (0 for s ≥ t)
    transcript = _empty(public)
    for t in range(1, rounds):
        mixing, _, step = dynamics.step(transcript, t - 1)
        influence[:t - 1] = np.asarray(mixing, dtype=np.float64) @ influence[:t - 1]
        influence[t - 1] = -float(step) * np.eye(n)
        view[t - 1] = influence[:, list(read), :].transpose(1, 0, 2)
    view = view.reshape(rows, columns)
    shift = np.zeros((updates, n))
    shift[:, victim] = 1.0
    solution = np.linalg.lstsq(view.T, shift.ravel(), rcond=None)[0]
    weights = np.zeros((rounds, len(read)))
    weights[1:] = solution.reshape(updates, len(read))
    return weights, float(np.linalg.norm(view.T @ solution))


def released_weight(public: PublicKnowledge, victim: int, agent: int, rounds: int) -> tuple[float, float]:
    """The released model's statistic in the linear-Gaussian model (module docstring): agent's final
    state x^rounds is the row b = ∂x_agent^rounds/∂n over every update n^s (s < rounds, the last one
    included: no message carries it, the final model does), built by the registered recurrence as
    `sgd_weights` builds the heard states'. Returns (sign, separation): the sign of the generalised
    least-squares weight bᵀ1_u/‖b‖² of one observation (−1 where the victim's updates push the
    projection down, as non-negative mixing weights do; −1 also where they do not reach it), and the
    model's separation |bᵀ1_u|/‖b‖ (0 exactly for an agent the victim does not reach)."""
    dynamics, transcript = views.dynamics(public.defense), _empty(public)
    steps = [dynamics.step(transcript, t) for t in range(rounds)]
    row = np.zeros((rounds, public.agents))  # row[s] = ∂x_agent^rounds/∂n^s = −s_s (A_{rounds−1}⋯A_{s+1})_{agent,:}
    reach = np.eye(public.agents)[agent]  # (A_{rounds−1}⋯A_{s+1})_{agent,:}, from s = rounds − 1 down
    for s in range(rounds - 1, -1, -1):
        mixing, _, step = steps[s]
        row[s] = -float(step) * reach
        reach = reach @ np.asarray(mixing, dtype=np.float64)
    shift, norm = float(row[:, victim].sum()), float(np.linalg.norm(row))
    return (1.0 if shift > 0 else -1.0), (abs(shift) / norm if norm > 0 else 0.0)


def reaches(distance: int, rounds: int) -> bool:
    """Whether anything the victim computes reaches an attacker `distance` hops away within a run of
    `rounds` rounds. A message moves one hop a round: the victim's first update enters x_u^1, its
    k-hop neighbours' states from x^{k+1} on, and the attacker holds its neighbours' states (k ≥
    distance − 1) up to x^{rounds−1}. Where not, its view does not depend on the victim's data at
    all, whatever the losses: ε = 0 exactly, no run needed."""
    return distance <= rounds - 1


def _placed(game: Game, attackers: Sequence[int | Iterable[int]] | None
            ) -> list[tuple[tuple[int, ...], tuple[int, ...], int, bool]]:
    """Each attacker of `game`'s victim placed in the graph: its agents, the agents whose states it
    reads, its distance to the victim and whether the victim reaches it (`positions`' checks)."""
    kind, _ = _recurrence(game)
    network, victim = game.setup.topology, game.victim
    chosen = [a for a in range(network.n) if a != victim] if attackers is None else list(attackers)
    if not chosen:
        raise ConfigError("position audit: no attacker given")
    distances = hop_distances(network.W, victim)
    placed = []
    for attacker in chosen:
        single = isinstance(attacker, (int, np.integer))
        agents = (int(attacker),) if single else tuple(sorted({int(a) for a in attacker}))
        if not agents or not all(0 <= a < network.n for a in agents):
            raise ConfigError(f"position audit: attacker {attacker!r} names no agent of 0..{network.n - 1}")
        if victim in agents:
            raise ConfigError(f"position audit: attacker {list(agents)} holds the victim {victim}")
        tap = attacker_tap(agents, victim, network, kind)
        read = tuple(w for w in range(network.n) if tap.hears(w, None, network))
        distance = int(distances[list(agents)].min())
        placed.append((agents, read, distance, reaches(distance, game.rounds)))
    return placed


def model_work(game: Game, attackers: Sequence[int | Iterable[int]] | None = None) -> int:
    """Millions of multiply-adds of the least-squares models `positions` solves for `game`'s
    victim (`sgd_weights`: states × updates × the smaller of the two per reached attacker), known
    before any is solved, so a campaign can refuse a position audit that would take hours (a ring
    of 4 over 3,000 rounds: 9,000 × 12,000 per attacker)."""
    updates = game.rounds - 1
    work = 0
    for _, read, _, reached in _placed(game, attackers):
        if reached:
            rows, columns = updates * len(read), updates * game.setup.topology.n
            work += rows * columns * min(rows, columns)
    return math.ceil(work / 1e6)


def positions(game: Game, attackers: Sequence[int | Iterable[int]] | None = None) -> list[Position]:
    """The attackers of `game`'s victim: each an agent (a curious neighbour, wherever it sits) or a
    collection of agents (a coalition); None: every other agent alone. ConfigError (one line) for
    an agent the network lacks, an attacker holding the victim, a defense without a linear
    recurrence."""
    _, public = _recurrence(game)
    found = []
    for agents, read, distance, reached in _placed(game, attackers):
        weights, separation = (sgd_weights(public, game.victim, read, game.rounds) if reached else
                               (np.zeros((game.rounds, len(read))), 0.0))
        found.append(Position(agents, read, distance, weights, separation, reached))
    return found


@dataclass(frozen=True)
class ReleasedModel:
    """The released-model attacker of one single-agent position: `release`, the `released_model`
    threat receiving agent v's final model and nothing of the transcript
    (`privaudit.threats.Release`); `sign` and `separation` from `released_weight`."""

    release: Release
    sign: float
    separation: float

    @property
    def agent(self) -> int:
        return self.release.agents[0]

    def scores(self, states: Tensor, network: int, direction: Tensor) -> Tensor:
        """Each world's score [copies]: the sign times the released model's projection on the
        canary's direction, from the final states [copies × `network`, P] alone."""
        return self.sign * (self.release.model(states, network).double() @ direction)


def released_models(game: Game, found: list[Position]) -> list[ReleasedModel | None]:
    """Each position's released-model attacker: its own final model for a single agent the victim
    reaches; None for a coalition (`released_model` is one agent's model) or an unreached agent
    (ε = 0 exactly, not scored)."""
    _, public = _recurrence(game)
    network = game.setup.topology
    models: list[ReleasedModel | None] = []
    for position in found:
        if len(position.agents) != 1 or not position.reached:
            models.append(None)
            continue
        agent = position.agents[0]
        sign, separation = released_weight(public, game.victim, agent, game.rounds)
        models.append(ReleasedModel(build_release("released_model", game.victim, network, observer=agent), sign,
                                    separation))
    return models


class PositionListener:
    """The attackers of one simulation of `copies` worlds: after each round, each attacker reads
    its own part of what `tap` recorded (`received`), adds the round's terms of its score per world,
    and the tap forgets the round."""

    def __init__(self, game: Game, found: list[Position], tap: Replicated, kind: Kind, direction: Tensor,
                 copies: int) -> None:
        network = game.setup.topology
        self.found, self.tap, self.kind, self.direction, self.network = found, tap, kind, direction, network
        self.taps = [position.tap(game.victim, network, kind) for position in found]
        self.totals = torch.zeros((len(found), copies), dtype=torch.float64, device=direction.device)

    def after_round(self, t: int, public: PublicKnowledge) -> None:
        transcript = self.tap.transcript(public)
        for i, (position, tap) in enumerate(zip(self.found, self.taps)):
            self.totals[i] += round_score(received(transcript, tap, self.network), position, t, self.kind,
                                          self.direction)
        self.tap.forget(t + 1)


def round_score(view: Transcript, position: Position, t: int, kind: Kind, direction: Tensor) -> Tensor:
    """Round t's terms of the attacker's score in every world [copies]: its weights on the
    projections of the states it holds at t, read from `view` (its own transcript) alone."""
    total = torch.zeros((), dtype=torch.float64, device=direction.device)
    for j, agent in enumerate(position.read):
        total = total + float(position.weights[t, j]) * (view.payload(kind, t, agent, None).double() @ direction)
    return total


def play_positions(game: Game, found: list[Position], present: Tensor, seed: int, copies: int,
                   device: torch.device = CPU, finals: Sequence[ReleasedModel] = ()) -> np.ndarray:
    """One simulation of `copies` worlds (canary where `present`) and every attacker's score in each
    world, then each of `finals`' score of its released model once the run ends (read from the
    final states, no message): [attackers + finals, copies]."""
    kind = views.dynamics(game.kind).kind
    setup = world(game, present, seed, copies).to(device)
    network = game.setup.topology
    direction = game.canaries.u[0].to(device=device, dtype=torch.float64)
    with devices.on(device):
        defense = DEFENSES[game.kind](game.params, setup)
        union = Received([position.tap(game.victim, network, kind) for position in found], {kind})
        tap = Replicated(union, network, copies)
        listener = PositionListener(game, found, tap, kind, direction, copies)
        simulate(defense, game.rounds, taps=[tap], after_round=listener.after_round, evaluation=False)
        states = defense.states.detach()
        released = [final.scores(states, network.n, direction) for final in finals]
    return torch.cat([listener.totals, *(scores[None] for scores in released)]).cpu().numpy()


def position_scores(game: Game, attackers: list[Position], runs: int, include: bool, seed: int, side: int,
                    worlds: int | None = None, workers: int = 1, device: torch.device | None = None,
                    progress: Progress | None = None, finals: Sequence[ReleasedModel] = ()) -> np.ndarray:
    """`runs` independent runs of one world (canary present when `include`), every attacker's score
    in each, then each of `finals`' (`play_positions`): [attackers + finals, runs]. Seeded as `privaudit.attacks.audit.canary_audit.scores` (simulation c by
    (seed, side, c)), `worlds` runs per simulation, spread over `workers` processes on the CPU;
    where a simulation runs does not change its numbers."""
    plan = simulations(game, runs, include, seed, side, worlds, workers, device)
    tick = progress.update if progress is not None else (lambda count: None)
    totals = []
    if plan.workers > 1 and len(plan.seeds) > 1:
        with plan.pool(len(plan.seeds)) as pool:
            for size, scored in zip(plan.sizes, pool.map(play_positions, itertools.repeat(game),
                                                         itertools.repeat(attackers), itertools.repeat(plan.present),
                                                         plan.seeds, plan.sizes, itertools.repeat(CPU),
                                                         itertools.repeat(finals))):
                totals.append(scored)
                tick(size)
    else:
        for chunk_seed, size in zip(plan.seeds, plan.sizes):
            totals.append(play_positions(game, attackers, plan.present, chunk_seed, size, plan.device, finals))
            tick(size)
    return np.concatenate(totals, axis=1)


def position_audit(game: Game, attackers: Sequence[int | Iterable[int]] | None = None, *, runs: int = 200,
                   confidence: float = 0.95, delta: float | None = None, seed: int = 0, null: bool = False,
                   worlds: int | None = None, workers: int = 1, progress: Progress | None = None,
                   released: bool = False) -> list[dict[str, Any]]:
    """The canary audit of `game`'s victim by each attacker of `attackers` (an agent: a curious
    agent wherever it sits; a collection of agents: a coalition pooling what its members receive;
    None: every other agent alone), all read from the same `runs` runs per side (module
    docstring). `game` is a one-canary gradient-canary game (`privaudit.attacks.audit.canary_audit.make_game`;
    its threat model is not used) of a defense with an exact linear recurrence (dpsgd, dp_dpsgd,
    muffliato).
    `null` leaves the canary out on both sides (a calibration: ε_LB 0 but for a 1 − confidence
    chance). `worlds`, `workers` and `progress` (2 × `runs` runs) as `audit_game`'s. `released`:
    each single-agent attacker's own final model is scored too, from the same runs (module
    docstring; `released` below).

    Returns one JSON-ready record per attacker, in the order given:

    * the pair: `victim`; `attacker` (its agents, a list); `threat` ("curious_neighbour" or
      "coalition"); `distance` (hops from the victim to the nearest member, breadth-first);
      `heard` (the agents whose states it receives); `unreached`: None, or why nothing of the
      victim reaches it within the run (`reaches`: ε = 0 exactly; it is not scored, and its
      `test` and `scores` are None);
    * the audit: `defense`, `params`, `rounds`, `agents`, `topology`, `model`, `victim_records`,
      `canary`, `adjacency`, `pair` (the two worlds in words), `null`, `runs_per_side`, `protocol`
      ("held-out"), `statistic` ("linear_gaussian"), `statistic_method`, `separation` (the linear-
      Gaussian model's ‖P 1_u‖: it predicts the scores' μ = q · separation / σ; a model figure,
      neither bound nor estimate);
    * the bound: `eps_lb` at `delta` with `confidence`, and `test` (orientation, threshold, fpr,
      fnr, their upper bounds, `samples`: the fresh runs per side it counts);
    * the estimate: `eps_estimate` (the GDP estimate of `privaudit.attacks.audit.estimates`, not a bound; 0
      on null audits but for its 0.5 % rate), `estimate_method`, `estimates` ({"gdp": ...});
      None and empty where δ is 0 or the scores do not vary;
    * the claims: `eps_claimed` and `eps_sound`, the defense's own for the whole run (its sound ε
      holds for every attacker: all it hears is post-processing of the victim's releases);
      `pairwise`: the network accountant's figures for the pair (`pairwise`), each a dict or
      None, with `reason` where one is missing or not judged; `eps_pair_claimed` and
      `eps_pair_linear` (their ε, or None); `verdict`: the one verdict rule
      (`privaudit.attacks.audit.verdict.decide`) on the pair's claim (Muffliato's), None where there is none
      or where the claim is privaudit's own extension of the formula (`judged`); `formula_finding`:
      for Muffliato's averaging (`is_averaging`), what the pair says of its formula as computed
      (`formula_finding`: below the exact loss of its view, and below ε_LB or not), else None;
    * `scores` (per side: mean, std, min, max), `wall_s` (the simulations of the whole audit,
      shared by its pairs), `device`, `worlds_per_simulation`;
    * `released`: None unless `released` (and for a coalition, which holds no one released
      model); else the `released_model` threat's bound from agent v's final model alone
      (`released_bound`): `agent`, `threat`, `eps_lb` (held-out, normal fit of both sides where
      the scores with the canary pass the normality test; the transcript's δ and confidence),
      `test`, `ratio` (its ε_LB over the transcript's; None where the transcript's is 0),
      `separation` (the model's, `released_weight`), `statistic_method`, `unreached`, `scores`.
    """
    if runs < _MIN_RUNS:
        raise ConfigError(f"runs must be >= {_MIN_RUNS} per world (a quarter chooses the test), got {runs}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    delta = audit_delta(game.claim, delta)
    if not 0 <= delta < 1:
        raise ConfigError(f"delta must lie in [0, 1), got {delta}")
    if game.canaries.kind != "gradient" or len(game.canaries) != 1:
        raise ConfigError("position audit: it follows one gradient canary's direction through the graph; the game has "
                          f"{len(game.canaries)} {game.canaries.kind} canar{'y' if len(game.canaries) == 1 else 'ies'}")
    found = positions(game, attackers)
    scored = [position for position in found if position.reached]
    finals = released_models(game, found) if released else [None] * len(found)
    scored_finals = [final for final in finals if final is not None]
    device = devices.work_device()
    start = time.perf_counter()
    out = into = np.zeros((0, runs))
    if scored:
        out = position_scores(game, scored, runs, False, seed, 0, worlds, workers, device, progress, scored_finals)
        into = position_scores(game, scored, runs, not null, seed, 1, worlds, workers, device, progress,
                               scored_finals)
    wall = time.perf_counter() - start
    if not (np.isfinite(out).all() and np.isfinite(into).all()):
        raise ValueError("the attackers' scores are not finite (diverged training?)")
    shared = {"defense": game.kind, "params": game.params.model_dump(), "rounds": game.rounds,
              "agents": game.setup.topology.n, "topology": game.setup.topology.name, "model": game.setup.model_name,
              "victim": game.victim, "victim_records": game.records, "canary": game.canaries.kind,
              "adjacency": game.channel.adjacency, "pair": game.channel.pair, "null": null, "runs_per_side": runs,
              "protocol": "held-out", "statistic": STATISTIC, "statistic_method": STATISTIC_METHOD, "delta": delta,
              "confidence": confidence, "eps_claimed": game.claim.eps_claimed, "eps_sound": game.claim.eps_sound,
              "wall_s": wall, "device": devices.name(device), "worlds_per_simulation": worlds or worlds_per_run(game, device)}
    samples = iter(zip(out[:len(scored)], into[:len(scored)]))
    final_samples = iter(zip(out[len(scored):], into[len(scored):]))
    records = [_record(game, position, next(samples) if position.reached else None, shared) for position in found]
    if released:
        for record, position, final in zip(records, found, finals):
            record["released"] = released_bound(record, position, final,
                                                None if final is None else next(final_samples))
    return records


def _record(game: Game, position: Position, samples: tuple[np.ndarray, np.ndarray] | None,
            shared: dict[str, Any]) -> dict[str, Any]:
    """One pair's record (`position_audit`); `samples` its scores without and with the canary, None
    for an attacker the victim does not reach (`reaches`)."""
    delta, confidence = shared["delta"], shared["confidence"]
    figures = pairwise(game, position, delta)
    record = {
        **shared,
        "attacker": list(position.agents),
        "threat": position.threat,
        "distance": position.distance,
        "heard": list(position.heard),
        "separation": position.separation,
        "unreached": None if position.reached else
        (f"{position.distance} hops from the victim, nothing the victim computes reaches this attacker within "
         f"{game.rounds} rounds (a message moves one hop a round): its view does not depend on the victim's data, "
         "ε = 0 exactly, and it was not scored"),
        "pairwise": figures,
        "eps_pair_claimed": None if figures["claimed"] is None else figures["claimed"]["epsilon"],
        "eps_pair_linear": None if figures["linear"] is None else figures["linear"]["epsilon"],
        "formula_finding": None,
        "released": None,
    }
    if samples is None:
        record |= {"eps_lb": 0.0, "test": None, "eps_estimate": 0.0 if 0 < delta < 1 else None,
                   "estimate_method": "none: ε = 0 exactly (unreached)", "estimates": {}, "scores": None}
    else:
        out, into = samples
        bound = held_out_bound(out, into, "eps", delta, confidence)
        varied = np.var(out) + np.var(into) > 0
        estimates = {"gdp": gdp_estimate(out, into, delta).as_dict()} if 0 < delta < 1 and varied else {}
        headline = estimates.get("gdp")
        record |= {
            "eps_lb": bound["value"],
            "test": {key: bound[key] for key in ("orientation", "threshold", "fpr", "fnr", "fpr_upper", "fnr_upper",
                                                 "samples")},
            "eps_estimate": None if headline is None else headline["eps_estimate"],
            "estimate_method": headline["method"] if headline is not None else None if varied else
            "none: the scores do not vary (a run without randomness)",
            "estimates": estimates,
            "scores": {side: _summary(values) for side, values in (("without", out), ("with", into))},
        }
    record["verdict"] = pair_verdict(record, game) if judged(game, figures) else None
    if is_averaging(game):
        record["formula_finding"] = formula_finding(record)
    return record


RELEASED_METHOD = ("minus the projection of the agent's own final model (the last iterate) on the canary's "
                   "direction, nothing of the transcript; threshold chosen on held-out runs, a normal law fitted to "
                   "both sides where the scores with the canary pass a normality test")


def _summary(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "max": float(values.max())}


def released_bound(record: dict[str, Any], position: Position, final: ReleasedModel | None,
                   samples: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any] | None:
    """The pair's released-model bound (`position_audit`'s `released`) beside its transcript record
    `record`: from `samples` (the final model's scores without and with the canary), or 0 exactly,
    unscored, for an agent the victim does not reach; None for a coalition."""
    if len(position.agents) != 1:
        return None
    delta, confidence, transcript = record["delta"], record["confidence"], record["eps_lb"]
    found: dict[str, Any] = {"agent": position.agents[0], "threat": "released_model",
                             "statistic_method": RELEASED_METHOD, "unreached": record["unreached"]}
    if final is None or samples is None:
        return found | {"eps_lb": 0.0, "test": None, "ratio": None, "separation": 0.0, "scores": None}
    out, into = samples
    bound = held_out_bound(out, into, "eps", delta, confidence, fit_in=True)
    return found | {
        "eps_lb": bound["value"],
        "test": {key: bound[key] for key in ("orientation", "threshold", "fpr", "fnr", "fpr_upper", "fnr_upper",
                                             "samples")},
        "ratio": bound["value"] / transcript if transcript > 0 else None,
        "separation": final.separation,
        "scores": {side: _summary(values) for side, values in (("without", out), ("with", into))},
    }


def _figure(loss: PairLoss, *assumptions: str) -> dict[str, Any]:
    """A figure of the network accountant as a record: its ε at δ, its Rényi ρ (the curve α ρ a
    claim states and a Gaussian view's exact D_α = α μ²/2), its μ where Gaussian, its words."""
    return {"epsilon": loss.epsilon, "rho": loss.rho, "mu": loss.mu, "delta": loss.delta, "method": loss.method,
            "assumptions": [*loss.assumptions, *assumptions]}


def is_averaging(game: Game) -> bool:
    """Whether `game` runs Muffliato's averaging: one noisy value per agent, then rounds − 1 gossip
    steps, each heard (`privaudit.defenses.muffliato.averaging`)."""
    return game.kind == Muffliato.name and averaging(game.params, game.rounds)


def gossip_steps(game: Game) -> int:
    """K, the gossip steps per noisy update: Muffliato-GD's parameter, 1 for DP-D-PSGD."""
    return game.params.gossip_steps if game.kind == Muffliato.name else 1


def pairwise(game: Game, position: Position, delta: float) -> dict[str, Any]:
    """The network accountant's figures (`privaudit.network_accounting`) for the pair, over the
    rounds − 1 gossip steps its heard states carry (x^1..x^{rounds−1}) and the noisy updates made
    before them (one per step for DP-D-PSGD, one per K for Muffliato-GD): `claimed`, Muffliato's
    claim as published for K = 1 and as privaudit extends it for K > 1 (one curious agent only);
    `linear`, the exact loss of the pair's linear-Gaussian view for the worst non-adaptive canary
    sequence (its assumptions say when it is a bound); `central`, the bound for any losses (no
    network, no subsampling amplification). None each, with `reason`, for a defense without local
    Gaussian noise or δ = 0."""
    missing = {"claimed": None, "linear": None, "central": None}
    if game.kind not in (DPDPSGD.name, Muffliato.name):
        return {**missing, "reason": f"'{game.kind}' adds no local Gaussian noise: the pairwise accountant covers "
                                     f"{DPDPSGD.name} and {Muffliato.name}"}
    if not 0 < delta < 1:
        return {**missing, "reason": f"the pairwise figures are (ε, δ) at 0 < δ < 1, not δ = {delta:g}"}
    W, victim, agents = game.setup.topology.W, game.victim, position.agents
    horizon, sigma, steps = game.rounds - 1, game.params.noise_multiplier, gossip_steps(game)
    if is_averaging(game):
        return averaging_figures(game, agents, delta)
    claimed = muffliato_gd_claim(W, victim, agents[0], horizon, steps, sigma, delta) if len(agents) == 1 else None
    reason = ("Muffliato states its claim for one curious agent, not a coalition" if claimed is None else
              None if steps == 1 else
              f"no verdict: the claimed figure for K = {steps} gossip steps per update is privaudit's extension of "
              "the one-step formula (itself read only in code, never in the theorem's text), shown but not judged")
    return {"claimed": None if claimed is None else _figure(claimed),
            "linear": _figure(sgd_loss(W, victim, agents, horizon, sigma, delta, "worst", gossip_steps=steps)),
            "central": _figure(sgd_central(W, victim, agents, horizon, sigma, delta, gossip_steps=steps)),
            "reason": reason}


AVERAGING_REASON = ("no verdict: Muffliato's averaging formula as its authors' code computes it, shown beside the exact "
                    "loss of the view it bounds; where it lies below, that is a finding about the formula as computed "
                    "(formula_finding), not a verdict on a theorem whose text privaudit has not read")


def averaging_figures(game: Game, agents: tuple[int, ...], delta: float) -> dict[str, Any]:
    """The pair's figures for Muffliato's averaging (`is_averaging`), over the rounds − 1 states
    heard (the noisy values x^1, then W x^1, …): `claimed`, the averaging formula as its authors'
    code computes it (`muffliato_averaging_claim`, Δ/σ = 1/σ: the value moves by ηC/B, its noise is
    ησC/B; one curious agent only); `linear`, the exact loss of the same view (`averaging_loss`:
    the values are computed at the public x^0, so the view is one Gaussian vector whose mean the
    canary moves); `central`, the local loss of the one noisy value. Not judged
    (`AVERAGING_REASON`)."""
    W, victim = game.setup.topology.W, game.victim
    horizon, sigma = game.rounds - 1, game.params.noise_multiplier
    sampled = ("the victim's value holds every record (q = 1); under Poisson sampling at q < 1 the canary is "
               "sampled too, which the figure does not count: it is then the loss of a canary always drawn")
    claimed = muffliato_averaging_claim(W, victim, agents[0], horizon, sigma, delta) if len(agents) == 1 else None
    return {"claimed": None if claimed is None else _figure(claimed),
            "linear": _figure(averaging_loss(W, victim, agents, horizon, sigma, delta), sampled),
            "central": _figure(sgd_central(W, victim, agents, horizon, sigma, delta,
                                           gossip_steps=gossip_steps(game))),
            "reason": ("Muffliato states its claim for one curious agent, not a coalition" if claimed is None else
                       AVERAGING_REASON)}


def formula_finding(record: dict[str, Any]) -> dict[str, Any] | None:
    """What the pair says of Muffliato's averaging formula as computed (None without one): `below`,
    whether its Rényi curve α ρ lies under the view's exact one, α μ²/2, at every order α (then it
    bounds nothing of this view: the formula as computed lies `FORMULA_BELOW`); `audit_above`,
    whether the audit's ε_LB exceeds the formula's ε at the audit's δ and confidence (the same
    shortfall, shown by runs); `text`, both in words. A finding about the formula as its authors'
    code computes it, never a refutation of the theorem, whose text privaudit has not read."""
    figures = record["pairwise"]
    claimed, exact = figures.get("claimed"), figures.get("linear")
    if claimed is None or exact is None:
        return None
    below = claimed["rho"] < exact["rho"] * (1 - 1e-9)
    audit_above = record["eps_lb"] > claimed["epsilon"]
    curve = (f"the averaging formula as its authors' code computes it gives ρ = {claimed['rho']:.4g} "
             f"(ε = {claimed['epsilon']:.4g} at δ = {record['delta']:.3g}), "
             + (f"{FORMULA_BELOW}, ρ = {exact['rho']:.4g} (ε = {exact['epsilon']:.4g}): its Rényi curve lies under "
                "the view's at every order" if below else
                f"not below the exact loss of the view it bounds, ρ = {exact['rho']:.4g} (ε = {exact['epsilon']:.4g})"))
    audit = (f"; the audit's ε lower bound {record['eps_lb']:.4g} {'exceeds' if audit_above else 'does not exceed'} "
             f"the formula's ε ({record['confidence']:.0%} confidence)")
    return {"below": below, "audit_above": audit_above,
            "text": f"Finding about the formula as computed, not a refutation of the theorem: {curve}{audit}."}


def judged(game: Game, figures: dict[str, Any]) -> bool:
    """Whether the pair's claim gets a verdict: a claim is stated for it (one curious agent, local
    Gaussian noise) and is the formula as read, not privaudit's extension to K > 1 gossip steps nor
    the averaging formula (`AVERAGING_REASON`)."""
    return figures["claimed"] is not None and gossip_steps(game) == 1 and not is_averaging(game)


def pair_verdict(record: dict[str, Any], game: Game) -> dict[str, Any]:
    """The verdict on the pair's claim (`record["pairwise"]["claimed"]`) by the one rule of
    `privaudit.attacks.audit.verdict`: refuted when ε_LB exceeds the claimed ε at the audit's δ; inconclusive
    when even an error-free test on the fresh runs could not exceed it."""
    claimed = record["pairwise"]["claimed"]
    eps_lb, eps, delta = record["eps_lb"], claimed["epsilon"], record["delta"]
    claim = Claim(defense=game.kind, notion="pairwise network DP (a Rényi curve, as (ε, δ))",
                  adjacency="add/remove one record of the victim's local dataset", eps_claimed=eps, eps_stated=None,
                  eps_sound=game.claim.eps_sound, delta=delta, horizon=game.rounds - 1, equation=claimed["method"],
                  sound_method=game.claim.sound_method, assumptions=tuple(claimed["assumptions"]),
                  neighbours=Neighbours("add/remove", "record", "one record of the victim's data added or removed"),
                  threat=game.claim.threat)
    forced = (f"agent{'s' * (len(record['attacker']) > 1)} {', '.join(map(str, record['attacker']))} "
              f"({record['distance']} hop{'s' * (record['distance'] != 1)} away) forces ε ≥ {eps_lb:.4g} about "
              f"agent {record['victim']} at δ = {delta:.3g} ({record['confidence']:.0%} confidence)")
    exceeds = eps_lb > eps
    measured = f"{forced}, {'above' if exceeds else 'not above'} the pair's claimed ε = {eps:.4g}"
    runs = record["runs_per_side"]
    ceiling = perfect_test_eps(runs - max(2, int(runs * SELECT_FRACTION)), record["confidence"], delta)
    powerless = (f"this audit cannot refute ε = {eps:.4g}: even an error-free attack on its "
                 f"{record['runs_per_side']:,} runs per side certifies at most ε ≥ {ceiling:.4g}"
                 if ceiling <= eps else None)
    return decide(claim, f"(ε = {eps:.4g}, δ = {delta:.3g}) for the pair", exceeds=exceeds, found=eps_lb > 0,
                  measured=measured, ratio=eps_lb / eps if eps > 0 else math.inf, powerless=powerless).as_dict()
