"""What an attacker knows of Wang & Başar's ternary quantization (seed 004; `privaudit.defenses.ternary`).

Agents broadcast one ternary draw Q_i^k of their state (`Kind.QUANTIZED_STATE`) and update
x^{k+1} = x^k − ε^k L_w Q(x^k) − ε^k λ^k g^k. The state difference gives an unbiased gradient
estimate whose error is two quantization draws over ε^k λ^k; the broadcast itself is the model an
attacker holds; the coalition attack solves the recurrence with unheard draws as unknowns; the
threshold r is the noise parameter (the quantizer's only randomness).

A neighbour who lies solves eq. (3) for its message (`steer_quantized`): the victim's
x_v^k + ε^k Σ_j w_vj (m_{j→v} − Q_v^k) lands on θ*, then steps by −ε^k λ^k g_v^k (computed before,
at x_v^k) and computes its gradient of k + 1 there. The liar hears only the victim's draw Q_v^k, not
x_v^k: at k = 0 the state is the public x_0 and the override is exact; at k ≥ 1 it puts Q_v^k in
place of x_v^k, which leaves the victim at θ* + x_v^k − Q_v^k, the draw's error (variance
r|x_c| − x_c² per coordinate, up to r²/4). The crafted message is real-valued, not a ternary draw:
eq. (3) as printed, and this simulator, mix whatever arrives; a receiver that accepts only symbols
in {−r, 0, r} (two bits per coordinate on a real link) refuses it, and this steering does not apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from privaudit.attacks.audit.channels import Channel, Reading, RoundLaw, fixed_batch, targets
from privaudit.attacks.coalition.dynamics import Dynamics
from privaudit.attacks.extraction import (ALL_NEIGHBOURS, MODEL_NEEDS, Extractor, Steering, Target, broadcast_model, expect,
                                heard, initial_model, neighbours, public_params, received, span, victim_and_neighbours, victim_only)
from privaudit.attacks.views.registry import (Noise, register_batch_size, register_channel, register_dynamics, register_extractor,
                                    register_model_view, register_noise, register_steering)
from privaudit.defenses.ternary import Ternary, TernaryParams
from privaudit.wire import Kind, PublicKnowledge, Transcript


def _params(hyper: Mapping[str, Any]) -> TernaryParams:
    return public_params(hyper, TernaryParams)


def state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """The state difference under ternary quantization (seed 004, eq. 3):
    x_i^{k+1} = x_i^k + ε^k Σ_j w_ij (Q_j^k − Q_i^k) − ε^k λ^k g_i^k, where only the Q's are heard.

    Write Q_i^k = x_i^k + ν_i^k (ν the quantization error; E[ν | x] = 0 while r ≥ ‖x‖_∞). Putting
    the heard Q's in place of the unknown states gives

        ĝ_i^k = (x̂_i^k − Q_i^{k+1} + ε^k Σ_j w_ij (Q_j^k − Q_i^k)) / (ε^k λ^k),
        x̂_i^0 = x_0 (public), x̂_i^k = Q_i^k for k ≥ 1,
        ĝ_i^k − g_i^k = (ν_i^k [k ≥ 1] − ν_i^{k+1}) / (ε^k λ^k),

    an unbiased estimate (each draw has E[ν | x] = 0) whose error has per-coordinate variance
    (r|x_c| − x_c², summed over the two uncorrelated draws) / (ε^k λ^k)² — it grows with r and as
    the schedules decay; with saturated coordinates (|x_c| > r) ν is biased. When r ≫ ‖x‖_∞ most
    Q's are 0 and the estimate is mostly x̂ − 0 over ε^k λ^k, or 0: nothing of g is left. The point is x_0 at
    k = 0 (exact) and the unbiased but ternary Q_i^k afterwards. Nothing better is identifiable:
    from x_0 and the heard couplings the attacker knows x_i^{k+1} + Σ_{l≤k} ε^l λ^l g_i^l exactly,
    so the weighted SUM of past gradients is known up to the single draw ν_i^{k+1} (a bounded
    error that does not accumulate), but each round's gradient only up to two draws over ε^k λ^k.

    Needs Q of the victim at k and k+1 and of all its neighbours at k: a global listener, an
    eavesdropper on all of the victim's links, or a curious neighbour adjacent to all of them.
    """
    expect(transcript, "ternary_state_difference", Ternary.name)
    lam, eps = _params(transcript.public.hyper).step_sizes(round)
    W = transcript.public.mixing
    own = heard(transcript, Kind.QUANTIZED_STATE, round, victim, None)
    coupling = torch.zeros_like(own)
    for j in neighbours(W, victim):
        coupling += W[victim, j] * (received(transcript, Kind.QUANTIZED_STATE, round, j, victim) - own)
    following = heard(transcript, Kind.QUANTIZED_STATE, round + 1, victim, None)
    point = initial_model(transcript) if round == 0 else own
    return Target(
        gradient=(point - following + eps * coupling) / (eps * lam),
        point=point.float(),
        victim=victim,
        round=round,
        kind="gradient_estimate",
    )


def held_state(transcript: Transcript, round: int, victim: int) -> Tensor:
    """The victim's state x_v^k as the liar holds it, float64 (a `Steering.base`): the public x_0
    at k = 0, exact; afterwards its heard draw Q_v^k, unbiased while r ≥ ‖x_v^k‖_∞."""
    return initial_model(transcript) if round == 0 else heard(transcript, Kind.QUANTIZED_STATE, round, victim, None)


def steer_quantized(transcript: Transcript, round: int, liar: int, victim: int, goal: Tensor) -> Tensor:
    """Seed 004 eq. (3), x_v^{k+1} = x_v^k + ε^k Σ_{j∈N_v} w_vj (m_{j→v} − Q_v^k) − ε^k λ^k g_v^k, solved
    for the liar a's message so that the victim's coupling step lands on θ*:

        m_{a→v} = ((θ* − x̂_v^k)/ε^k + d_v Q_v^k − Σ_{j∈N_v, j≠a} w_vj Q_j^k) / w_va,   d_v = Σ_{j≠v} w_vj,

    with x̂_v^k the victim's state as the liar holds it (`held_state`: exact at k = 0). ValueError
    when the liar does not weigh in the victim's coupling."""
    W = transcript.public.mixing
    if liar == victim or float(W[victim, liar]) == 0.0:
        raise ValueError(f"agent {liar} does not weigh in agent {victim}'s coupling (w = 0): it cannot steer it")
    _, eps = _params(transcript.public.hyper).step_sizes(round)
    own = heard(transcript, Kind.QUANTIZED_STATE, round, victim, None)
    needed = (goal.double() - held_state(transcript, round, victim)) / eps
    for j in neighbours(W, victim):
        needed = needed + W[victim, j] * own
        if j != liar:
            needed = needed - W[victim, j] * heard(transcript, Kind.QUANTIZED_STATE, round, j, None)
    return needed / W[victim, liar]


class TernaryChannel(Channel):
    """Ternary quantization (seed 004), at the data level: the victim's stochastic gradient (B
    records without replacement, not clipped) is estimated from the quantized states
    (`state_difference`), with the quantizer's error; no DP noise, so no likelihood ratio.
    The gradient canary's length is B/(ε⁰λ⁰): one inclusion moves the victim's state by 1 along its
    coordinate — neighbouring states of Theorem 3's ℓ1 adjacency at the first step. The claim is
    about states, not records: there is no data-level claim to refute, and the audit says so."""

    defense = Ternary.name
    adjacency = "replace-one"
    coordinate = True
    pair = ("one of the victim's records replaced by the canary or the anti-canary, whose gradients move the "
            "state by ±1 along one coordinate at the first step")
    unaudited = ("Theorem 3's claim is about neighbouring states (‖x − x′‖₁ ≤ 1), not records: one record's "
                 "unclipped gradient moves the state without bound, so the paper makes no data-level claim; the "
                 "bound says what one record leaks through the running algorithm")

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        p = _params(hyper)
        lam, eps = p.step_sizes(0)
        return p.batch_size / (lam * eps)

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        gradients, points = targets(self.extractors[0].extract, transcript, victims, round)
        gain = torch.full((len(victims),), 1.0 / _params(transcript.public.hyper).batch_size, dtype=torch.float64)
        return [Reading(gradients, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return RoundLaw(fixed_batch(_params(public.hyper).batch_size, records), family=None)

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths


def _step(transcript: Transcript, t: int) -> tuple[Tensor, Tensor, float]:
    """Seed 004, eq. (4): x^{k+1} = x^k − ε^k L_w Q(x^k) − ε^k λ^k g^k."""
    lam, eps = _params(transcript.public.hyper).step_sizes(t)
    W = transcript.public.mixing
    off = W - torch.diag(torch.diag(W))
    laplacian = torch.diag(off.sum(dim=1)) - off
    return torch.eye(len(W), dtype=torch.float64), -eps * laplacian, eps * lam


STATE_DIFFERENCE = register_extractor(Extractor(
    Ternary.name, "state_difference", state_difference, frozenset({Kind.QUANTIZED_STATE}),
    f"quantized states of the victim (k, k+1) and its neighbours (k): {ALL_NEIGHBOURS}", victim_and_neighbours,
    span(0, 1)))
register_model_view(Extractor(
    Ternary.name, "model", broadcast_model(Kind.QUANTIZED_STATE), frozenset({Kind.QUANTIZED_STATE}),
    MODEL_NEEDS.format("quantized state (one ternary draw of its model)"), victim_only, span(0, 0)))
register_channel(TernaryChannel(STATE_DIFFERENCE))
register_dynamics(Dynamics(Ternary.name, Kind.QUANTIZED_STATE, False, _step,
                           "the local gradient up to the quantization draws, which enter as unknowns where unheard"))
register_noise(Noise(Ternary.name, {"r": ("r", True)}))
register_batch_size(Ternary.name, lambda hyper: _params(hyper).batch_size)
register_steering(Steering(
    Ternary.name, Kind.QUANTIZED_STATE, steer_quantized, held_state, 1, "state_difference",
    "eq. (3)'s coupling x_v^k + ε^k Σ_j w_vj (m_{j→v} − Q_v^k) solved for the liar's message, a real-valued vector "
    "(a receiver that accepts only ternary symbols refuses it): exact at k = 0 (x_0 is public), otherwise off by the "
    "victim's quantization error x_v^k − Q_v^k (variance up to r²/4 per coordinate); the victim steps by "
    "−ε^k λ^k g_v^k and computes its gradient of k + 1 there"))
