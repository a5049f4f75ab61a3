"""What an attacker knows of Wang & Zhang's time-varying sample sizes (seed 003; `privaudit.defenses.tvss`).

* Alg. 1 (`tvss_output`) broadcasts noisy states y = x + n (`Kind.NOISY_STATE`): the state
  difference gives a gradient estimate whose error is two Laplace draws over α_k; the broadcast is
  the model an attacker holds.
* Alg. 2 (`tvss_gradient`) broadcasts raw states (`Kind.MODEL`): the state difference gives the
  noisy gradient g + n exactly.

Both canary channels plant the claim's Definition 1 pair (two gradients C apart in ℓ1, along one
coordinate); the coalition attack does not model either recurrence; the Laplace scale s is the
noise parameter.

A neighbour who lies solves the victim's consensus step for its broadcast (`steer_consensus`): the
victim's combination (1−β_k) x_{v,k} + β_k Σ_j a_vj m_{j→v} lands on θ*, the victim steps to
θ* − α_k (its update of round k, which the liar cannot know before it is computed) and computes its
gradient of round k + 1 there. Alg. 2 hears x_{v,k} itself, so the combination is exact. Alg. 1
hears only y_{v,k} = x_{v,k} + n_{v,k}: the liar puts y_{v,k} in place of the clean own term, which
leaves the victim's combination at θ* − (1−β_k) n_{v,k}, a Laplace error of scale (1−β_k) σ_k per
coordinate; only at k = 0, where x_{v,0} = x_0 is public, is it exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from privaudit.attacks.audit.channels import Channel, Family, Reading, RoundLaw, targets
from privaudit.attacks.extraction import (ALL_NEIGHBOURS, MODEL_NEEDS, Clipping, Extractor, Steering, Target,
                                broadcast_model, expect, heard, initial_model, mixed, public_params, span, steer_mixing,
                                victim_and_neighbours, victim_only)
from privaudit.attacks.views.registry import (Noise, register_channel, register_extractor, register_model_view, register_noise,
                                    register_steering, register_unmodelled)
from privaudit.defenses.tvss import GradientPerturbation, OutputPerturbation, Schedule, TVSSParams
from privaudit.wire import Kind, PublicKnowledge, Transcript


def _params(hyper: Mapping[str, Any], defense: str) -> TVSSParams:
    algorithm = GradientPerturbation if defense == GradientPerturbation.name else OutputPerturbation
    return public_params(hyper, algorithm.Params)


def noisy_state(transcript: Transcript, victim: int, round: int) -> Target:
    """Wang & Zhang Alg. 1 (seed 003, eq. 3): x_{i,k+1} = (1−β_k) x_{i,k} + β_k Σ_{j∈N_i} a_ij y_{j,k}
    − α_k g_i^k, where only the noisy states y = x + n are heard (N_i includes i).

    The mixed term is heard exactly; putting y in place of the unknown states gives

        ĝ_i^k = ((1−β_k) x̂_{i,k} + β_k Σ_j a_ij y_{j,k} − y_{i,k+1}) / α_k,
        x̂_{i,0} = x_0 (public), x̂_{i,k} = y_{i,k} for k ≥ 1,
        ĝ_i^k − g_i^k = ((1−β_k) n_{i,k} [k ≥ 1] − n_{i,k+1}) / α_k,

    unbiased, with Laplace error of variance 2((1−β_k)² σ_k² [k ≥ 1] + σ_{k+1}²)/α_k² per
    coordinate — the noise of two rounds over the (decaying) step α_k. The point is x_0 at k = 0,
    else the Laplace-noised y_{i,k}. As for the ternary extractor, the linear system y_{i,1..K}
    in g_i^{0..K−1} is square, so no other unbiased linear estimate exists; y_{i,0} − x_0 even
    reveals n_{i,0}, which enters nothing else. Schedules from `privaudit.defenses.tvss.Schedule`.

    Needs y of the victim at k and k+1 and of all its neighbours at k: a global listener, an
    eavesdropper on all of the victim's links, or a curious neighbour adjacent to all of them.
    """
    expect(transcript, "tvss_noisy_state", OutputPerturbation.name)
    p = _params(transcript.public.hyper, OutputPerturbation.name)
    schedule = Schedule.of(p)
    alpha, beta = float(schedule.step(round)), float(schedule.weight(round))
    neighbourhood = mixed(transcript, Kind.NOISY_STATE, round, victim)
    point = initial_model(transcript) if round == 0 else heard(transcript, Kind.NOISY_STATE, round, victim, None)
    following = heard(transcript, Kind.NOISY_STATE, round + 1, victim, None)
    return Target(
        gradient=((1 - beta) * point + beta * neighbourhood - following) / alpha,
        point=point.float(),
        victim=victim,
        round=round,
        kind="gradient_estimate",
        clipping=Clipping("per_sample_l1", p.clip),
    )


def state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """Wang & Zhang Alg. 2 (seed 003, §4): x_{i,k+1} = (1−β_k) x_{i,k} + β_k Σ_{j∈N_i} a_ij x_{j,k}
    − α_k (g_i^k + n_{i,k}) with the raw states broadcast, solved for the released noisy gradient:
    g_i^k + n_{i,k} = ((1−β_k) x_{i,k} + β_k Σ_j a_ij x_{j,k} − x_{i,k+1}) / α_k, exact, at x_{i,k}.

    Needs the victim's states at k and k+1 and all its neighbours' at k: a global listener, an
    eavesdropper on all of the victim's links, or a curious neighbour adjacent to all of them.
    """
    expect(transcript, "tvss_state_difference", GradientPerturbation.name)
    p = _params(transcript.public.hyper, GradientPerturbation.name)
    schedule = Schedule.of(p)
    alpha, beta = float(schedule.step(round)), float(schedule.weight(round))
    own = heard(transcript, Kind.MODEL, round, victim, None)
    neighbourhood = mixed(transcript, Kind.MODEL, round, victim)
    following = heard(transcript, Kind.MODEL, round + 1, victim, None)
    return Target(
        gradient=((1 - beta) * own + beta * neighbourhood - following) / alpha,
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind="noisy_gradient",
        clipping=Clipping("per_sample_l1", p.clip),
    )


def own_state(kind: Kind) -> Callable[[Transcript, int, int], Tensor]:
    """A `Steering.base`: the victim's state x_{v,k} as the liar holds it, float64: the public x_0
    at k = 0 (exact for both algorithms), else the victim's broadcast of `kind` at k (Alg. 2's
    clean state, exact; Alg. 1's noisy y_{v,k} = x_{v,k} + n_{v,k}, unbiased)."""

    def base(transcript: Transcript, round: int, victim: int) -> Tensor:
        return initial_model(transcript) if round == 0 else heard(transcript, kind, round, victim, None)

    base.__doc__ = f"The victim's state at the round: x_0 at round 0, else its '{kind}' broadcast."
    return base


def steer_consensus(kind: Kind) -> Callable[[Transcript, int, int, int, Tensor], Tensor]:
    """The craft of Wang & Zhang's consensus step (seed 003, eq. (3) for Alg. 1, §4 for Alg. 2):
    agent v combines (1−β_k) x_{v,k} + β_k Σ_{j∈N_v} a_vj m_{j→v} (N_v includes v, its own
    broadcast) and then steps by −α_k(·). Setting the combination to θ* is the plain averaging row
    at the goal (θ* − (1−β_k) x̂_{v,k}) / β_k (`steer_mixing`), x̂_{v,k} the victim's state as the liar
    holds it (`own_state`): exact for Alg. 2 and at k = 0, off by (1−β_k) n_{v,k} for Alg. 1 at k ≥ 1."""
    average = steer_mixing(kind)
    state = own_state(kind)

    def craft(transcript: Transcript, round: int, liar: int, victim: int, goal: Tensor) -> Tensor:
        weight = float(_schedule(transcript).weight(round))
        own = state(transcript, round, victim)
        return average(transcript, round, liar, victim, (goal.double() - (1.0 - weight) * own) / weight)

    craft.__doc__ = f"The liar's '{kind}' broadcast that makes the victim's consensus step land on the goal."
    return craft


def _schedule(transcript: Transcript) -> Schedule:
    return Schedule.of(_params(transcript.public.hyper, transcript.public.defense))


class _TVSSChannel(Channel):
    """Wang & Zhang (seed 003): at iteration k the victim averages the ℓ1-clipped gradients of
    γ_k = min(⌈a₃(k+a₂)^γ⌉, |D_i|) of its records drawn without replacement; the canary pair of the
    claim's Definition 1 are two gradients differing by C in ℓ1: ±(C/2)e_c along one coordinate
    (Laplace noise is per coordinate, so one coordinate is the worst direction), replace-one."""

    adjacency = "replace-one"
    unit = "gradient"
    coordinate = True
    pair = "one of the victim's records replaced by the canary (+C/2 along one coordinate) or the anti-canary (−C/2)"

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        return _params(hyper, self.defense).clip / 2

    def schedule(self, hyper: Mapping[str, Any]) -> Schedule:
        return Schedule.of(_params(hyper, self.defense))

    def batch(self, hyper: Mapping[str, Any], round: int, records: int) -> int:
        return int(min(float(self.schedule(hyper).batch(round)), records))

    def law_for(self, public: PublicKnowledge, round: int, records: int, family: Family) -> RoundLaw:
        return RoundLaw(self.batch(public.hyper, round, records) / records, family=family)

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths.clamp(max=_params(hyper, self.defense).clip)


class TVSSGradientChannel(_TVSSChannel):
    """Alg. 2: the released noisy gradient g + n, n ~ Laplace(σ_k) per coordinate, exactly
    (`state_difference`); the canary adds its clipped length over γ_k."""

    defense = GradientPerturbation.name

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper = transcript.public.hyper
        gradients, points = targets(self.extractors[0].extract, transcript, victims, round)
        scale = float(self.schedule(hyper).scale(round))
        batch = self.batch(hyper, round, records)
        gain = torch.full((len(victims),), 1.0 / (batch * scale), dtype=torch.float64)
        return [Reading(gradients / scale, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return self.law_for(public, round, records, "laplace")


class TVSSOutputChannel(_TVSSChannel):
    """Alg. 1: only the noisy states y = x + n are heard; `noisy_state` gives the gradient
    estimate ĝ = g + ((1−β_k) n_k [k ≥ 1] − n_{k+1})/α_k, whose error is two Laplace draws; the law
    takes it as Gaussian with the same variance 2((1−β_k)²σ_k² [k ≥ 1] + σ_{k+1}²)/α_k²
    (an approximation: the statistic stays a valid test, see the module docstring)."""

    defense = OutputPerturbation.name

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper = transcript.public.hyper
        schedule = self.schedule(hyper)
        gradients, points = targets(self.extractors[0].extract, transcript, victims, round)
        step, weight = float(schedule.step(round)), float(schedule.weight(round))
        own = (1 - weight) ** 2 * float(schedule.scale(round)) ** 2 if round >= 1 else 0.0
        scale = math.sqrt(2 * (own + float(schedule.scale(round + 1)) ** 2)) / step
        batch = self.batch(hyper, round, records)
        gain = torch.full((len(victims),), 1.0 / (batch * scale), dtype=torch.float64)
        return [Reading(gradients / scale, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return self.law_for(public, round, records, "gaussian")


NOISY_STATE = register_extractor(Extractor(
    OutputPerturbation.name, "noisy_state", noisy_state, frozenset({Kind.NOISY_STATE}),
    f"noisy states of the victim (k, k+1) and its neighbours (k): {ALL_NEIGHBOURS}", victim_and_neighbours,
    span(0, 1)))
STATE_DIFFERENCE = register_extractor(Extractor(
    GradientPerturbation.name, "state_difference", state_difference, frozenset({Kind.MODEL}),
    f"model broadcasts of the victim (k, k+1) and its neighbours (k): {ALL_NEIGHBOURS}", victim_and_neighbours,
    span(0, 1)))
register_model_view(Extractor(
    OutputPerturbation.name, "model", broadcast_model(Kind.NOISY_STATE), frozenset({Kind.NOISY_STATE}),
    MODEL_NEEDS.format("noisy state (its model plus Laplace noise)"), victim_only, span(0, 0)))
register_model_view(Extractor(GradientPerturbation.name, "model", broadcast_model(Kind.MODEL), frozenset({Kind.MODEL}),
                              MODEL_NEEDS.format("model"), victim_only, span(0, 0)))
register_channel(TVSSGradientChannel(STATE_DIFFERENCE))
register_channel(TVSSOutputChannel(NOISY_STATE))
register_unmodelled(OutputPerturbation.name, "Wang & Zhang Alg. 1 broadcasts its state plus fresh Laplace noise whose "
                    "scale the schedule changes every round: the coalition recurrence is not modelled for it")
register_unmodelled(GradientPerturbation.name, "Wang & Zhang Alg. 2's recurrence is not modelled for the coalition "
                    "attack")
for _name in (OutputPerturbation.name, GradientPerturbation.name):
    register_noise(Noise(_name, {"sigma_scale": ("Laplace scale s", True)}))

STEERING_RULES = {
    GradientPerturbation.name: (
        "the consensus step (1−β_k) x_{v,k} + β_k Σ_j a_vj m_{j→v} (§4) solved for the liar's model broadcast, exact "
        "(it hears x_{v,k}): the victim lands on θ*, steps to θ* − α_k (g_v^k + n_{v,k}) and computes its gradient of "
        "k + 1 there"),
    OutputPerturbation.name: (
        "the consensus step (1−β_k) x_{v,k} + β_k Σ_j a_vj y_{j→v} (eq. (3)) solved for the liar's noisy-state "
        "broadcast with the victim's heard y_{v,k} in place of its clean x_{v,k}: exact at k = 0 (x_0 is public), "
        "otherwise the victim lands on θ* − (1−β_k) n_{v,k}, a Laplace error of scale (1−β_k)σ_k per coordinate; "
        "it steps by −α_k g_v^k and computes its gradient of k + 1 there"),
}
for _defense, _kind, _scenario in ((GradientPerturbation.name, Kind.MODEL, "state_difference"),
                                   (OutputPerturbation.name, Kind.NOISY_STATE, "noisy_state")):
    register_steering(Steering(_defense, _kind, steer_consensus(_kind), own_state(_kind), 1, _scenario,
                               STEERING_RULES[_defense]))
