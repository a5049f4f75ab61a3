"""What an attacker knows of DPDL (seed 000, Alg. 1; `privaudit.defenses.dpdl`).

What each message gives away (derived in each extractor's docstring):

* `cross_gradient` g̈^{ji}: a clipped (noisy) batch gradient of i at x^j, exactly.
* `momentum`: the paper's difference ṽ^i_t − ṽ^i_{t−1} is not a gradient of i, but the aggregate
  g̃^i_t is recovered exactly from the neighbours' momenta, and with the cross-gradients sent to i
  the self-gradient term is isolated: exactly ĝ^{ii} in the ND variant, a positive multiple of it
  plus i's own self-noise otherwise.
* `model`: the victim's model, broadcast every round (membership inference reads it).

The canary channel reads the cross-gradients and the isolated self-gradient; the coalition attack
does not model DPDL's recurrence; σ (or the target ε from which Theorem 1 sets it) is the noise
parameter, `noise` its switch. A neighbour who lies sets the point of the victim's cross-gradient
to it by the model it sends the victim in the same round (`steer_cross_gradient`, lag 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from privaudit.attacks.audit.channels import Channel, Reading, RoundLaw, fixed_batch, targets
from privaudit.attacks.extraction import (ALL_NEIGHBOURS, MODEL_NEEDS, Clipping, Extractor, Steering, Target,
                                broadcast_model, cross_to_victim, expect, heard, heard_model, mixed, neighbours,
                                one_cross_link, public_params, span, victim_and_neighbours, victim_only)
from privaudit.attacks.views.registry import (Noise, register_batch_size, register_channel, register_extractor,
                                    register_model_view, register_noise, register_steering, register_unmodelled)
from privaudit.defenses.dpdl import DPDL, DPDLParams
from privaudit.wire import Kind, PublicKnowledge, Transcript


def _params(hyper: Mapping[str, Any]) -> DPDLParams:
    return public_params(hyper, DPDLParams)


def _noisy(p: DPDLParams) -> bool:
    """Whether the run adds noise: not the ND variant, and σ > 0."""
    return p.noise and (p.noise_multiplier or 0.0) > 0


def _l2(transcript: Transcript) -> Clipping:
    """Per-sample ℓ2 clipping at the public clip norm C (eq. 9)."""
    return Clipping("per_sample_l2", _params(transcript.public.hyper).clip)


def _model_sent(transcript: Transcript, round: int, sender: int, receiver: int) -> Tensor | None:
    """The model `sender` delivered to `receiver` at `round` (Alg. 1 line 3): the message it sent
    that agent alone where it sent one (a liar's, `privaudit.wire.Malicious`), else its broadcast;
    None when the transcript holds neither."""
    for found in (transcript.find(Kind.MODEL, round=round, sender=sender, receiver=receiver),
                  transcript.find(Kind.MODEL, round=round, sender=sender, receiver=None)):
        if len(found) == 1:
            return found[0].payload
    return None


def cross_gradient(transcript: Transcript, victim: int, round: int, receiver: int | None = None) -> Target:
    """DPDL's CG scenario (seed 000 §VI-D): the cross-gradient the victim i sends to neighbour j,
    `g̈^{ji}_t = (1/B)(Σ_b clip_C(∇F_i(x^j_{t−1}; ζ_b)) + z^{ji}_t)` (eqs. 8–10), is a clipped mean
    gradient of i's batch plus N(0, σ²C²I)/B, at j's model x^j_{t−1}, which j sent i in the same
    round (Alg. 1 line 3). Target = the payload, point = the model j sent i (its broadcast, or the
    model a lying j sent i alone); exact (ND variant: no noise, kind `gradient`).

    `receiver` = j; None takes, among the j whose message (and model) the transcript holds, first
    one that sent the victim a model of its own (a liar: the point it chose), then the lowest.
    Sufficient: an eavesdropper on link (i, j), the curious neighbour j, a global listener.
    """
    expect(transcript, "dpdl_cross_gradient", DPDL.name)
    if receiver is None:
        receivers = sorted((not transcript.find(Kind.MODEL, round=round, sender=m.receiver, receiver=victim),
                            m.receiver) for m in transcript.find(Kind.CROSS_GRADIENT, round=round, sender=victim)
                           if _model_sent(transcript, round, m.receiver, victim) is not None)
        if not receivers:
            raise KeyError(f"{transcript.threat_model} transcript has no '{Kind.CROSS_GRADIENT}' message from "
                           f"agent {victim} at round {round} together with the '{Kind.MODEL}' its receiver sent it")
        receiver = receivers[0][1]
    gradient = heard(transcript, Kind.CROSS_GRADIENT, round, victim, receiver)
    point = _model_sent(transcript, round, receiver, victim)
    if point is None:
        raise KeyError(f"{transcript.threat_model} transcript lacks the '{Kind.MODEL}' agent {receiver} sent agent "
                       f"{victim} at round {round}")
    return Target(
        gradient=gradient,
        point=point,
        victim=victim,
        round=round,
        kind="noisy_gradient" if _params(transcript.public.hyper).noise else "gradient",
        clipping=_l2(transcript),
    )


def momentum_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """DPDL's MM scenario (seed 000 §VI-D): the difference of two consecutive momentum broadcasts
    ṽ^i_t − ṽ^i_{t−1}, at the point x^i_{t−1} (the victim's `model` broadcast of round t).

    What it equals (eqs. 19, 21): ṽ^i_t = β v^i_{t−1} + g̃^i_t with v^i_{t−1} = Σ_j w_ij ṽ^j_{t−1},
    so ṽ^i_t − ṽ^i_{t−1} = g̃^i_t + (β Σ_{j∈N_i} w_ij ṽ^j_{t−1} − ṽ^i_{t−1}), and
    g̃^i_t = Σ_{j≠i} g̈^{ij}_t/(√w_ij N) + (1/(√w_ii N) + α Σ_{j∈N_i} w_ij c^{ij}_t) ĝ^{ii}_t
    + z^{ii}_t/(B √w_ii N): the neighbours' noisy cross-gradients (of THEIR data at x^i), the
    victim's clipped self-gradient scaled by data-dependent weights, its self-noise, plus a
    momentum residue. Not a gradient of the victim's batch; `momentum_gradient` removes the
    residue exactly. Needs only the victim's broadcasts at t−1 and t: any tap on one of its links.
    """
    expect(transcript, "dpdl_momentum_difference", DPDL.name)
    if round < 1:
        raise ValueError(f"the momentum difference needs rounds t−1 and t: round {round} has no predecessor "
                         "(use momentum_gradient, ṽ^i_0 = g̃^i_0)")
    return Target(
        gradient=heard(transcript, Kind.MOMENTUM, round, victim, None)
        - heard(transcript, Kind.MOMENTUM, round - 1, victim, None),
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind="momentum_difference",
    )


def _calibrated(transcript: Transcript, victim: int, round: int) -> Tensor:
    """g̃^i_t = ṽ^i_t − β Σ_{j∈N_i} w_ij ṽ^j_{t−1} (eqs. 19, 21; v_0 = 0)."""
    current = heard(transcript, Kind.MOMENTUM, round, victim, None)
    if round == 0:
        return current
    return current - _params(transcript.public.hyper).beta * mixed(transcript, Kind.MOMENTUM, round - 1, victim)


def momentum_gradient(transcript: Transcript, victim: int, round: int) -> Target:
    """The better MM estimate: eq. 19 with eq. 21 solved for the aggregate,
    g̃^i_t = ṽ^i_t − β Σ_{j∈N_i} w_ij ṽ^j_{t−1} (g̃^i_0 = ṽ^i_0, since v_0 = 0), exact, at x^i_{t−1}.

    g̃^i_t is still a mixture (see `momentum_difference`); `self_gradient` isolates the
    victim's part. Needs the momenta of the victim at t and of all of N_i at t−1 (and the victim's
    model at t): a global listener, an eavesdropper on all of the victim's links, or a curious
    neighbour adjacent to all of the victim's neighbours.
    """
    expect(transcript, "dpdl_momentum_gradient", DPDL.name)
    return Target(
        gradient=_calibrated(transcript, victim, round),
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind="calibrated_gradient",
    )


def self_gradient(transcript: Transcript, victim: int, round: int) -> Target:
    """The victim's self-gradient, isolated from its momentum: subtracting from g̃^i_t (exact, see
    `momentum_gradient`) the cross-gradients g̈^{ij}_t its neighbours sent it (eq. 17) leaves

        R = g̃^i_t − Σ_{j≠i} g̈^{ij}_t / (√w_ij N) = s ĝ^{ii}_t + z^{ii}_t / (B √w_ii N),
        s = 1/(√w_ii N) + α Σ_{j∈N_i} w_ij c^{ij}_t,  c^{ij} = 1/(1 + e^{cos(g̈^{ij}, ĝ^{ii})}),

    with ĝ^{ii} the clipped self-gradient WITHOUT noise (eq. 14) at x^i_{t−1}.

    * ND variant (no noise): R = s ĝ^{ii}, s > 0, so the direction u = R/‖R‖ is exact; every c is
      then computable as DPDL computes it (cosines are scale-free: c^{ij} from the intercepted
      g̈^{ij} and u, c^{ii} = 1/(1 + e) because g̈^{ii} = ĝ^{ii}), hence s, and ĝ^{ii} = R/s
      exactly (kind `gradient`).
    * Noisy: c^{ii} needs cos(ĝ^{ii} + z^{ii}/B, ĝ^{ii}), and g̈^{ii} never crosses the wire, so
      s is not recoverable; returned is R itself (kind `scaled_noisy_gradient`), a positive
      multiple of ĝ^{ii} — s lies in [1/(√w_ii N) + α/(1+e), 1/(√w_ii N) + α e/(1+e)] since every
      c is in [1/(1+e), e/(1+e)] and the w_ij of N_i sum to 1 — plus N(0, (σC/(B √w_ii N))² I),
      the victim's own self-noise only.

    Needs everything `momentum_gradient` needs plus every cross-gradient sent to the victim
    at round t: a global listener or an eavesdropper on all of the victim's links.
    """
    expect(transcript, "dpdl_self_gradient", DPDL.name)
    W, n = transcript.public.mixing, transcript.public.agents
    p = _params(transcript.public.hyper)
    residual = _calibrated(transcript, victim, round)
    received = {j: heard(transcript, Kind.CROSS_GRADIENT, round, j, victim) for j in neighbours(W, victim)}
    for j, gradient in received.items():
        residual = residual - gradient / (math.sqrt(W[victim, j]) * n)
    point = transcript.payload(Kind.MODEL, round, victim, None)
    if p.noise:
        return Target(residual, point, victim, round, kind="scaled_noisy_gradient", clipping=_l2(transcript))
    direction = residual / residual.norm().clamp_min(1e-300)

    def calibration(gradient: Tensor) -> float:
        cosine = float(gradient @ direction / gradient.norm().clamp_min(1e-30))
        return 1.0 / (1.0 + math.exp(cosine))

    weight = float(W[victim, victim]) * calibration(direction)
    weight += sum(float(W[victim, j]) * calibration(gradient) for j, gradient in received.items())
    scale = 1.0 / (math.sqrt(W[victim, victim]) * n) + p.alpha * weight
    return Target(residual / scale, point, victim, round, kind="gradient", clipping=_l2(transcript))


class DPDLChannel(Channel):
    """DPDL (seed 000, Alg. 1): per round, one batch of B of the victim's records (drawn without
    replacement) enters every cross-gradient the victim sends and its self-gradient, so all its
    channels share the canary's presence.

    * cross-gradient to each neighbour j whose link the tap hears (`cross_gradient`):
      g̈^{ji} = (Σ_b clip_C(∇F_i(x^j; ζ_b)) + z^{ji})/B, noise N(0, (σC/B)²) along a unit direction;
    * self-gradient (`self_gradient`, from the momentum and the cross-gradients sent to the
      victim): R = s ĝ^{ii} + z^{ii}/(B√w_ii N) with s = 1/(√w_ii N) + α Σ_{j∈N_i} w_ij c^{ij}, noise
      N(0, (σC/(B√w_ii N))²); the calibration weights c^{ij} = 1/(1 + e^{cos}) depend on the clean
      self-gradient, which nobody hears: the law takes c = ½ (cosines near 0 under noise), so the
      self channel's shift is (1 + α√w_ii N/2)·L/(σC) for a clipped canary length L.

    The claim's adjacency is replace-one (Def. 3): the world without the canary holds the
    anti-canary. ND variant (no noise): the same projections without a law."""

    defense = DPDL.name
    adjacency = "replace-one"
    pair = "one of the victim's records replaced by the canary, or by the anti-canary"

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        return _params(hyper).clip

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        public = transcript.public
        p = _params(public.hyper)
        batch, clip, noisy = float(p.batch_size), p.clip, _noisy(p)
        sigma = p.noise_multiplier if noisy else 0.0
        W, n = public.mixing, public.agents
        readings = []
        if "cross_gradient" in scenarios:
            offsets = [victim - victim % n for victim in victims]
            local = victims[0] % n
            links = [j for j in torch.nonzero(W[local, :n]).flatten().tolist() if j != local
                     and transcript.find(Kind.CROSS_GRADIENT, round=round, sender=victims[0], receiver=offsets[0] + j)]
            for j in links:
                found = [cross_gradient(transcript, victim, round, receiver=offset + j)
                         for victim, offset in zip(victims, offsets)]
                vectors = torch.stack([t.gradient.double() for t in found])
                points = torch.stack([t.point.double() for t in found])
                scale = sigma * clip / batch if noisy else 1.0
                gain = torch.full((len(victims),), 1.0 / (batch * scale), dtype=torch.float64)
                readings.append(Reading(vectors / scale, points, gain))
        if "self_gradient" in scenarios:
            vectors, points = targets(self_gradient, transcript, victims, round)
            w_self = torch.stack([W[v, v] for v in victims])
            if noisy:
                scale = sigma * clip / (batch * w_self.sqrt() * n)
                weight = 1.0 / (w_self.sqrt() * n) + p.alpha / 2
                readings.append(Reading(vectors / scale[:, None], points, weight / (batch * scale)))
            else:
                readings.append(Reading(vectors, points, torch.full((len(victims),), 1.0 / batch,
                                                                    dtype=torch.float64)))
        return readings

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        p = _params(public.hyper)
        return RoundLaw(fixed_batch(p.batch_size, records), family="gaussian" if _noisy(p) else None)

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths.clamp(max=_params(hyper).clip)


CROSS_GRADIENT = register_extractor(Extractor(
    DPDL.name, "cross_gradient", cross_gradient, frozenset({Kind.CROSS_GRADIENT, Kind.MODEL}),
    "one cross-gradient from the victim to a neighbour j and j's model broadcast (t): an eavesdropper on link "
    "(victim, j), the curious neighbour j, or a global listener", one_cross_link, span(0, 0)))
register_extractor(Extractor(
    DPDL.name, "momentum", momentum_difference, frozenset({Kind.MOMENTUM, Kind.MODEL}),
    "the victim's momentum (t−1, t) and model (t) broadcasts: any tap on one of its links", victim_only, span(-1, 0)))
register_extractor(Extractor(
    DPDL.name, "momentum_gradient", momentum_gradient, frozenset({Kind.MOMENTUM, Kind.MODEL}),
    f"momentum broadcasts of the victim (t) and its neighbours (t−1): {ALL_NEIGHBOURS}", victim_and_neighbours,
    span(-1, 0)))
SELF_GRADIENT = register_extractor(Extractor(
    DPDL.name, "self_gradient", self_gradient, frozenset({Kind.MOMENTUM, Kind.MODEL, Kind.CROSS_GRADIENT}),
    "momentum_gradient's messages plus every cross-gradient sent to the victim (t): a global listener or an "
    "eavesdropper on all of the victim's links", cross_to_victim, span(-1, 0)))
register_model_view(Extractor(DPDL.name, "model", broadcast_model(Kind.MODEL), frozenset({Kind.MODEL}),
                              MODEL_NEEDS.format("model"), victim_only, span(0, 0)))
register_channel(DPDLChannel(CROSS_GRADIENT, SELF_GRADIENT))
def steer_cross_gradient(transcript: Transcript, round: int, liar: int, victim: int, goal: Tensor) -> Tensor:
    """DPDL's cross-gradient solved for the liar's model message: agent v evaluates its batch at
    the model x^a_{t−1} that neighbour a sent it in the same round (Alg. 1 line 3) and sends a
    g̈^{av}_t = (Σ_b clip_C(∇F_v(x^a_{t−1}; ζ_b)) + z^{av}_t)/B (seed 000, eqs. 8–10; line 10). The
    point is the message itself, so the liar sends m_{a→v} = θ*: v computes its release of this
    very round at θ* (lag 0), exactly up to the float32 payload, whatever else it heard; its own
    state is untouched (it mixes the momenta and pre-gossip models, eqs. 21–22, not the models).
    ValueError when the liar is not the victim's neighbour."""
    W = transcript.public.mixing
    if liar == victim or float(W[victim, liar]) == 0.0:
        raise ValueError(f"agent {liar} is not a neighbour of agent {victim}: it sends it no model to steer")
    return goal.double()


STEERING_RULE = ("the victim's cross-gradient for the liar, g̈^{av} = (Σ_b clip_C(∇F_v(x^a; ζ_b)) + z^{av})/B "
                 "(seed 000 eqs. 8–10), is computed at the model the liar sent it in the same round (Alg. 1 line "
                 "3): the liar sends θ* itself and reads that release, exact up to the float32 payload")
register_steering(Steering(DPDL.name, Kind.MODEL, steer_cross_gradient, heard_model(Kind.MODEL), 0,
                           "cross_gradient", STEERING_RULE))
register_unmodelled(DPDL.name, "DPDL's state moves by a momentum built from cross-gradients that neighbours evaluate "
                    "at each other's models, not by one gradient per agent: the coalition recurrence is not modelled "
                    "for it (its curious-neighbour and listener scenarios attack the messages directly)")
register_noise(Noise(DPDL.name, {"noise_multiplier": ("σ", True), "target_epsilon": ("target ε", False)},
                     switch="noise", companions=("target_rounds",)))
register_batch_size(DPDL.name, lambda hyper: _params(hyper).batch_size)
