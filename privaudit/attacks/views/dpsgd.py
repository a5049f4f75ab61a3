"""What an attacker knows of D-PSGD (Lian et al. 2017) and DP-D-PSGD (`privaudit.defenses.dpsgd`).

Both broadcast their model every round (`Kind.MODEL`) and update x^{t+1} = W x^t − η g^t, so the
state difference gives the local gradient exactly: D-PSGD's batch mean, DP-D-PSGD's clipped noisy
gradient (Σ_b clip_C(g_b) + N(0, σ²C²I))/B. The coalition attack solves the same recurrence; the
canary audit projects the released gradient on the canary's direction; σ is the noise parameter.
A neighbour who lies solves the victim's averaging row for its model broadcast (`STEERING`): the
victim mixes to the goal θ*, steps to x_v^{t+1} = θ* − η g_v^t, and computes its gradient of round
t + 1 there, which the state difference of t + 1 gives away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from privaudit.attacks.audit.channels import Channel, Reading, RoundLaw, fixed_batch, targets
from privaudit.attacks.coalition.dynamics import Dynamics
from privaudit.attacks.extraction import (ALL_NEIGHBOURS, MODEL_NEEDS, Clipping, Extractor, Steering, Target, broadcast_model,
                                expect, heard, heard_model, mixed, public_params, span, steer_mixing, victim_and_neighbours,
                                victim_only)
from privaudit.attacks.views.registry import (Noise, register_batch_size, register_channel, register_dynamics, register_extractor,
                                    register_model_view, register_noise, register_steering)
from privaudit.defenses.dpsgd import DPDPSGD, DPSGD, DPDPSGDParams, DPSGDParams
from privaudit.wire import Kind, PublicKnowledge, Transcript

UNDEFENDED, NOISY = DPSGD.name, DPDPSGD.name


def _params(hyper: Mapping[str, Any], defense: str) -> DPSGDParams:
    return public_params(hyper, DPDPSGDParams if defense == NOISY else DPSGDParams)


def _noisy(hyper: Mapping[str, Any]) -> DPDPSGDParams:
    return public_params(hyper, DPDPSGDParams)


def state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """D-PSGD's update `x_i^{t+1} = Σ_j w_ij x_j^t − η g_i^t` solved for the gradient:
    `g_i^t = (Σ_j w_ij x_j^t − x_i^{t+1}) / η`, computed at the point `x_i^t`.

    Exact: for DP-D-PSGD the result is the released noisy gradient (clipped sum + N(0, σ²C²I))/B
    (`noisy_gradient`). Needs the victim's broadcasts at rounds t and t+1 and every neighbour's at
    round t: a global listener, an eavesdropper on all of the victim's links, or a curious
    neighbour whose own neighbours include all of the victim's.
    """
    expect(transcript, "dpsgd_state_difference", UNDEFENDED, NOISY)
    defense = transcript.public.defense
    p = _params(transcript.public.hyper, defense)
    return solved_gradient(transcript, victim, round, p.lr, "gradient" if defense == UNDEFENDED else "noisy_gradient",
                           None if defense == UNDEFENDED else Clipping("per_sample_l2", p.clip))


def solved_gradient(transcript: Transcript, victim: int, round: int, lr: float, kind: str,
                    clipping: Clipping | None) -> Target:
    """The recurrence `x_i^{t+1} = Σ_j w_ij x_j^t − η g_i^t` solved for the update g_i^t, at the
    point `x_i^t`, from the victim's broadcasts at t and t+1 and its neighbours' at t: the state
    difference of every defense that steps this way (D-PSGD, DP-D-PSGD, Muffliato-GD's update rounds)."""
    following = heard(transcript, Kind.MODEL, round + 1, victim, None)
    return Target(
        gradient=(mixed(transcript, Kind.MODEL, round, victim) - following) / lr,
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind=kind,
        clipping=clipping,
    )


class DPSGDChannel(Channel):
    """DP-D-PSGD: the released gradient at each round, exactly, from the state difference
    (`state_difference`): (Σ_b clip_C(g_b) + N(0, σ²C²I))/B, Poisson rate q = B/|D_i| (the rate of
    the world without the canary); projected on a unit direction the noise is N(0, (σC/B)²), a
    canary in the batch adds its clipped length over B."""

    defense = NOISY
    adjacency = "add/remove"
    pair = "the canary record added to the victim's data, or absent"

    def params(self, hyper: Mapping[str, Any]) -> DPDPSGDParams:
        """The public hyperparameters the channel's law reads (a defense stepping as DP-D-PSGD does,
        Muffliato-GD, reads its own)."""
        return _noisy(hyper)

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        return self.params(hyper).clip

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        gradients, points = targets(self.extractors[0].extract, transcript, victims, round)
        batch, noise = self.scale(transcript.public.hyper)
        gain = torch.full((len(victims),), 1.0 / (batch * noise), dtype=torch.float64)
        return [Reading(gradients / noise, points, gain)]

    def scale(self, hyper: Mapping[str, Any]) -> tuple[float, float]:
        """(B, the noise's standard deviation along a unit direction: σC/B)."""
        p = self.params(hyper)
        return float(p.batch_size), p.noise_multiplier * p.clip / p.batch_size

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return RoundLaw(fixed_batch(self.params(public.hyper).batch_size, records))

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths.clamp(max=self.params(hyper).clip)


class UndefendedChannel(DPSGDChannel):
    """D-PSGD: the plain batch mean of B records drawn without replacement, no noise."""

    defense = UNDEFENDED

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        return 1.0

    def scale(self, hyper: Mapping[str, Any]) -> tuple[float, float]:
        return float(_params(hyper, UNDEFENDED).batch_size), 1.0

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return RoundLaw(fixed_batch(_params(public.hyper, UNDEFENDED).batch_size, records), family=None)

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths


def _step(transcript: Transcript, t: int) -> tuple[Tensor, None, float]:
    """D-PSGD (Lian et al. 2017): x^{t+1} = W x^t − η g^t."""
    return transcript.public.mixing, None, _params(transcript.public.hyper, transcript.public.defense).lr


def _batch_size(public: PublicKnowledge) -> int:
    return _params(public.hyper, public.defense).batch_size


_RECOVERS = {UNDEFENDED: "the local gradient",
             NOISY: "the local noisy gradient (clipped, with its DP noise: averaged over the window)"}

for _name in (UNDEFENDED, NOISY):
    _extractor = register_extractor(Extractor(
        _name, "state_difference", state_difference, frozenset({Kind.MODEL}),
        f"model broadcasts of the victim (t, t+1) and its neighbours (t): {ALL_NEIGHBOURS}",
        victim_and_neighbours, span(0, 1)))
    register_model_view(Extractor(_name, "model", broadcast_model(Kind.MODEL), frozenset({Kind.MODEL}),
                                  MODEL_NEEDS.format("model"), victim_only, span(0, 0)))
    register_channel((UndefendedChannel if _name == UNDEFENDED else DPSGDChannel)(_extractor))
    register_dynamics(Dynamics(_name, Kind.MODEL, True, _step, _RECOVERS[_name],
                               batch_size=_batch_size if _name == UNDEFENDED else None))

STEERING_RULE = ("the victim's averaging x_v^{t+1} = Σ_j w_vj m_{j→v}^t − η g_v^t solved for the liar's model "
                 "broadcast, so the victim mixes to θ* and computes its next gradient at θ* − η g_v^t")

for _name in (UNDEFENDED, NOISY):
    register_steering(Steering(_name, Kind.MODEL, steer_mixing(Kind.MODEL), heard_model(Kind.MODEL), 1,
                               "state_difference", STEERING_RULE))

register_noise(Noise(NOISY, {"noise_multiplier": ("σ", True)}))
for _name in (UNDEFENDED, NOISY):
    register_batch_size(_name, lambda hyper, name=_name: _params(hyper, name).batch_size)
