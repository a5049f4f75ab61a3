"""What an attacker knows of LT-ADMM-DP (seed 002; `privaudit.defenses.lt_admm_dp`).

Agents send bridge messages m_{ij,k} = z_{ij,k} − 2ρ x_{i,k+1} on each link (`Kind.ADMM_BRIDGE`),
never a model: any one link, both ways, gives the state x_{i,k+1} exactly, and all of a victim's
links give the τ-step update γ Σ_t g_i(φ^t) (with its known per-step drift). The canary channel
reads that update; membership inference reads the state; the coalition attack does not model the
bridge recurrence; σ_e is the noise parameter. A neighbour who lies sets, by its bridge message, the
drift of the victim's next local training, hence the state it starts the round after from
(`steer_bridge`, lag 2), up to the victim's unheard noisy steps in between.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from privaudit.attacks.audit.channels import Channel, Reading, RoundLaw, fixed_batch, targets
from privaudit.attacks.extraction import (Clipping, Extractor, Steering, Target, all_bridge_links, expect, heard,
                                initial_model, neighbours, one_link_both_ways, public_params)
from privaudit.attacks.views.registry import (Noise, register_batch_size, register_channel, register_extractor,
                                    register_model_view, register_noise, register_steering, register_unmodelled)
from privaudit.defenses.lt_admm_dp import LTADMMDP, LTADMMDPParams
from privaudit.wire import Kind, PublicKnowledge, Transcript


def _params(hyper: Mapping[str, Any]) -> LTADMMDPParams:
    return public_params(hyper, LTADMMDPParams)


def _bridges(transcript: Transcript, victim: int, neighbour: int, round: int) -> list[Tensor]:
    """z_{ij,0..round} for i = victim, j = neighbour: z_{ij,0} = x_0 (the defense's documented
    initialisation), z_{ij,l+1} = ½ z_{ij,l} − ½ m_{ji,l} (eq. 5b), from j's messages to i."""
    bridges = [initial_model(transcript)]
    for k in range(round):
        bridges.append(0.5 * bridges[-1] - 0.5 * heard(transcript, Kind.ADMM_BRIDGE, k, neighbour, victim))
    return bridges


def state(transcript: Transcript, victim: int, round: int, neighbour: int | None = None) -> Tensor:
    """x_{i,k+1} (k = `round`), read off the victim's message to `neighbour` j:
    m_{ij,k} = z_{ij,k} − 2ρ x_{i,k+1} (Alg. 1 line 13), so x_{i,k+1} = (z_{ij,k} − m_{ij,k}) / 2ρ with
    z_{ij,k} tracked from x_0 and j's messages m_{ji,0..k−1} (`_bridges`). Exact.

    `neighbour` None takes the lowest j whose messages to the victim at round k the transcript holds.
    Needs both directions of link (i, j) at rounds 0..k: the curious neighbour j, an eavesdropper on
    (i, j), or a global listener.
    """
    expect(transcript, "lt_admm_state", LTADMMDP.name)
    if neighbour is None:
        receivers = sorted(m.receiver for m in transcript.find(Kind.ADMM_BRIDGE, round=round, sender=victim))
        if not receivers:
            raise KeyError(f"{transcript.threat_model} transcript has no '{Kind.ADMM_BRIDGE}' message from "
                           f"agent {victim} at round {round}")
        neighbour = receivers[0]
    rho = _params(transcript.public.hyper).rho
    bridge = _bridges(transcript, victim, neighbour, round)[-1]
    return (bridge - heard(transcript, Kind.ADMM_BRIDGE, round, victim, neighbour)) / (2 * rho)


def bridge_update(transcript: Transcript, victim: int, round: int) -> Target:
    """The τ-step update of LT-ADMM-DP (seed 002, eq. 5a) at round k = `round`: local training
    φ^{t+1} = φ^t − (γ g_i(φ^t) + c), c = β(ρ|N_i| x_{i,k} − Σ_j z_{ij,k}), φ^0 = x_{i,k},
    x_{i,k+1} = φ^τ, summed over the τ steps:

        γ Σ_t g_i(φ^t) = x_{i,k} − x_{i,k+1} − τ c,  g_i(φ) = smooth_clip_ζ(batch mean) + N(0, σ_e² I),

    with x_{i,k}, x_{i,k+1} from `state` and every z_{ij,k} tracked from x_0. Exact; a
    multi-step target (steps τ, step size γ, point x_{i,k}, drift c) made of τ noisy smooth-clipped
    batch gradients at unknown intermediate points. A single neighbour gets the states but not
    c (the other z_{ij}), hence the update only up to τ c.

    Precision. The algebra is exact and computed in float64 from the payloads as heard, so a
    float64 run is recovered to ≈ 1e-14 (relative; the point stays in float64). From float32
    payloads, on a noiseless digits MLP (‖x‖ ≈ 9 moved by ≈ 0.1 a round), the update is 4–8e-6
    away from γ Σ_t g_i(φ^t): ≈ 3e-6 is the defense's own float32 arithmetic (its state
    difference is that far before anything is sent), the rest the rounding of each message
    m = z − 2ρx, over 2ρ. Every reading of the messages goes through one rounded m per state:
    averaging all links, or tracking z in float32 as the agents do, moved the error by < 5%.
    Neither part limits an inversion: iDLG gets the same images from the exact update as from
    the heard one (tests/test_lt_admm_exact.py).

    Needs both directions of every link of the victim at rounds 0..k: a global listener or an
    eavesdropper on all of the victim's links.
    """
    expect(transcript, "lt_admm_bridge_update", LTADMMDP.name)
    around = neighbours(transcript.public.mixing, victim)
    p = _params(transcript.public.hyper)
    rho, beta, tau, gamma = p.rho, p.beta, p.tau, p.gamma
    bridges = {j: _bridges(transcript, victim, j, round) for j in around}
    first = around[0]

    def state_at(k: int) -> Tensor:  # x_{i,k}
        if k == 0:
            return initial_model(transcript)
        return (bridges[first][k - 1] - heard(transcript, Kind.ADMM_BRIDGE, k - 1, victim, first)) / (2 * rho)

    before, after = state_at(round), state_at(round + 1)
    drift = beta * (rho * len(around) * before - sum(bridges[j][round] for j in around))
    return Target(
        gradient=before - after - tau * drift,
        point=before,
        victim=victim,
        round=round,
        kind="multi_step_update",
        steps=tau,
        step_size=gamma,
        drift=drift,
        clipping=Clipping("smooth_mean", p.zeta),
    )


class LTADMMChannel(Channel):
    """LT-ADMM-DP (seed 002): each round the victim takes τ local steps, each on a fresh batch of B
    of its m records (without replacement) whose mean gradient is smooth-clipped and noised,
    g = ζ ḡ/(ζ + ‖ḡ‖) + N(0, σ_e² I). The bridge messages give the round's sum γ Σ_t g(φ^t) exactly
    (`bridge_update`); along a unit direction its noise is N(0, τσ_e²) (divided by γ).
    A canary of length L in a step's batch moves that step's mean by L/B and its smooth-clipped
    mean by about ζ(L/B)/(ζ + L/B) along its direction (the rest of the batch lies near-orthogonal
    to it); the canary is long (10⁴ ζB) so this is ζ to four digits, the sensitivity bound 2ζ of
    the claim's replace-one adjacency being reached with the anti-canary. draws = τ."""

    defense = LTADMMDP.name
    adjacency = "replace-one"
    pair = "one of the victim's records replaced by the canary, or by the anti-canary"

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        p = _params(hyper)
        return 1e4 * p.zeta * p.batch_size

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        p = _params(transcript.public.hyper)
        gradients, points = targets(self.extractors[0].extract, transcript, victims, round)
        scale = p.gamma * p.sigma_e * math.sqrt(p.tau)
        gain = torch.full((len(victims),), p.gamma / scale, dtype=torch.float64)
        return [Reading(gradients / scale, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        p = _params(public.hyper)
        return RoundLaw(fixed_batch(p.batch_size, records), draws=p.tau)

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        p = _params(hyper)
        zeta, mean = p.zeta, lengths / p.batch_size
        return zeta * mean / (zeta + mean)


def _model(transcript: Transcript, victim: int, round: int) -> Tensor:
    """x_{i,k+1} read off one of the victim's links at round k (`state`, exact)."""
    return state(transcript, victim, round).float()


def steer_bridge(transcript: Transcript, round: int, liar: int, victim: int, goal: Tensor) -> Tensor:
    """LT-ADMM-DP's local training solved for the liar's bridge message (seed 002, eqs. 5a–5b).
    The message m_{av,k} the liar a sends victim v at round k sets z_{va,k+1} = ½ z_{va,k} − ½ m_{av,k}
    (eq. 5b), hence the consensus drift of v's next round, c = β(ρ|N_v| x_{v,k+1} − Σ_l z_{vl,k+1})
    (eq. 5a), applied at each of its τ local steps: x_{v,k+2} = x_{v,k+1} − γ Σ_t g_v(φ^t) − τ c. The
    liar makes τ c = x_{v,k+1} − θ*:

        z_{va,k+1} = ρ|N_v| x_{v,k+1} − c/β − Σ_{l ≠ a} (½ z_{vl,k} − ½ m_{lv,k}),
        m_{av,k} = z_{va,k} − 2 z_{va,k+1},

    with x_{v,k+1} read off v's message to it (`state`), every z_{vl,k} tracked from x_0 and the
    messages to v (`_bridges`), and the other neighbours' round-k messages to v heard before it
    sends (rushing). So v starts round k + 2 (lag 2) at x_{v,k+2} = θ* − γ Σ_t g_v(φ^t): the error
    left is v's τ noisy steps of round k + 1, which nobody hears before they are taken (norm ≤ τγζ
    from the smooth clipping, plus γ·N(0, τσ_e² I)). The release read (`bridge_update` of round
    k + 2) sums that round's τ steps, its first at x_{v,k+2}, the others moved from it by the
    honest drift and the steps. Setting only the second local step of round k + 1 (lag 1, the
    error one noisy step) read fewer records: that round's first step, at v's honest state, enters
    the same sum (faint noise, seed 0: 0 of 32 above 40 dB, against 5 at lag 2).
    ValueError when the liar is not the victim's neighbour."""
    around = neighbours(transcript.public.mixing, victim)
    if liar not in around:
        raise ValueError(f"agent {liar} is not a neighbour of agent {victim}: it sends it no bridge message")
    p = _params(transcript.public.hyper)
    state_next = state(transcript, victim, round, neighbour=liar)
    others = sum(0.5 * _bridges(transcript, victim, j, round)[-1] - 0.5 * heard(transcript, Kind.ADMM_BRIDGE, round, j,
                                                                                 victim)
                 for j in around if j != liar)
    drift = (state_next - goal.double()) / p.tau
    bridge_next = p.rho * len(around) * state_next - drift / p.beta - others
    return _bridges(transcript, victim, liar, round)[-1] - 2 * bridge_next


def _victim_state(transcript: Transcript, round: int, victim: int) -> Tensor:
    """x_{v,k+1}, the victim's state after round k's local training, read off its message of round k
    (`state`): the model a liar builds its goal on."""
    return state(transcript, victim, round)


STEERING_RULE = ("the liar's bridge message sets z_{va,k+1} (eq. 5b), hence the drift c of the victim's next τ local "
                 "steps (eq. 5a): τc = x_{v,k+1} − θ* starts its round k + 2 at θ* − γ Σ_t g_v(φ^t), off by its τ "
                 "unheard noisy steps of round k + 1; the release read sums all τ steps of round k + 2")


def _from_start(k: int) -> range:
    return range(0, k + 1)


BRIDGE = register_extractor(Extractor(
    LTADMMDP.name, "bridge", bridge_update, frozenset({Kind.ADMM_BRIDGE}),
    "both directions of every link of the victim at rounds 0..k: a global listener or an eavesdropper on all of the "
    "victim's links", all_bridge_links, _from_start))
register_model_view(Extractor(
    LTADMMDP.name, "model", _model, frozenset({Kind.ADMM_BRIDGE}),
    "both directions of one link of the victim at rounds 0..k: the curious neighbour on it, an eavesdropper on it, "
    "or a global listener", one_link_both_ways, _from_start))
register_channel(LTADMMChannel(BRIDGE))
register_steering(Steering(LTADMMDP.name, Kind.ADMM_BRIDGE, steer_bridge, _victim_state, 2, "bridge", STEERING_RULE,
                           records=lambda hyper: _params(hyper).tau * _params(hyper).batch_size))
register_unmodelled(LTADMMDP.name, "LT-ADMM-DP sends bridge variables on each link, not broadcasts of one state: "
                    "the coalition recurrence is not modelled for it (its bridge scenario attacks a victim's links "
                    "directly)")
register_noise(Noise(LTADMMDP.name, {"sigma_e": ("σ_e", True)}))
register_batch_size(LTADMMDP.name, lambda hyper: _params(hyper).batch_size)
