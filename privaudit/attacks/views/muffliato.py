"""What an attacker knows of Muffliato-GD (`privaudit.defenses.muffliato`).

Every agent broadcasts its model every round (`Kind.MODEL`), and the states follow the public,
time-varying recurrence x^{t+1} = W x^t − s_t g̃^t with s_t = η on update rounds (t ≡ 0 mod K)
and 0 on the K − 1 gossip rounds between them. Across an update round the state difference gives
the released noisy gradient exactly, as for DP-D-PSGD: (Σ_b clip_C(g_b) + N(0, σ²C²I))/B, Poisson
rate q = B/|D_i|; across a gossip round it is pure gossip and says nothing of the victim's data.
The canary channel therefore reads the update rounds only, each with DP-D-PSGD's law; the
coalition and the position audit follow the recurrence; σ is the noise parameter.

A neighbour who lies (`STEERING`) solves the victim's gossip row for its model broadcast, as for
DP-D-PSGD, at a round t whose next round t + 1 takes a local step: the victim mixes to θ* at t (and
steps to θ* − η g̃_v^t when t is itself an update round, K = 1), computes its noisy gradient of
t + 1 there, and the state difference of t + 1 gives it away. Before a gossip round t + 1 the
victim computes no gradient, so the override refuses such a round.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from privaudit.attacks.audit.channels import Reading
from privaudit.attacks.coalition.dynamics import Dynamics
from privaudit.attacks.extraction import (ALL_NEIGHBOURS, MODEL_NEEDS, Clipping, Extractor, Steering, Target, broadcast_model,
                                expect, heard_model, public_params, span, steer_mixing, victim_and_neighbours,
                                victim_only)
from privaudit.attacks.views.dpsgd import DPSGDChannel, solved_gradient
from privaudit.attacks.views.registry import (Noise, register_batch_size, register_channel, register_dynamics, register_extractor,
                                    register_model_view, register_noise, register_steering)
from privaudit.defenses.muffliato import Muffliato, MuffliatoParams
from privaudit.wire import Kind, Transcript

NAME = Muffliato.name


def _params(hyper: Mapping[str, Any]) -> MuffliatoParams:
    return public_params(hyper, MuffliatoParams)


def update_round(hyper: Mapping[str, Any], round: int) -> bool:
    """Whether `round` takes a noisy local step (every K-th round from round 0)."""
    return round % _params(hyper).gossip_steps == 0


def state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """The update round's `x_i^{t+1} = Σ_j w_ij x_j^t − η g̃_i^t` solved for the released noisy
    gradient, `g̃_i^t = (Σ_j w_ij x_j^t − x_i^{t+1}) / η`, at the point `x_i^t` (exact, as
    `privaudit.attacks.views.dpsgd.state_difference`). ValueError on a gossip round: its difference is
    W's alone. Needs the victim's broadcasts at t and t+1 and every neighbour's at t."""
    expect(transcript, "muffliato_state_difference", NAME)
    hyper = transcript.public.hyper
    if not update_round(hyper, round):
        raise ValueError(f"round {round} of muffliato is a gossip round (K = {_params(hyper).gossip_steps}): its state "
                         "difference is pure gossip and carries no gradient")
    p = _params(hyper)
    return solved_gradient(transcript, victim, round, p.lr, "noisy_gradient", Clipping("per_sample_l2", p.clip))


class MuffliatoChannel(DPSGDChannel):
    """The released noisy gradient of each update round, exactly (`state_difference`), read as
    DP-D-PSGD's (`privaudit.attacks.views.dpsgd.DPSGDChannel`): projected on a unit direction the noise is
    N(0, (σC/B)²), a canary in the batch adds its clipped length over B, Poisson rate q = B/|D_i|.
    A gossip round gives no reading."""

    defense = NAME

    def params(self, hyper: Mapping[str, Any]) -> MuffliatoParams:
        return _params(hyper)

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        if not update_round(transcript.public.hyper, round):
            return []
        return super().read(transcript, victims, round, scenarios, records)


def steering_refusal(hyper: Mapping[str, Any], round: int) -> str | None:
    """Why an override at `round` cannot steer Muffliato-GD: the round after it is a gossip round,
    at which the victim computes no gradient (its next one comes at the next update round, after
    gossip steps that mix the steered point away)."""
    if update_round(hyper, round + 1):
        return None
    steps = _params(hyper).gossip_steps
    return (f"an override at round {round} of muffliato steers the victim's model of round {round + 1}, a gossip round "
            f"(K = {steps}) at which it computes no gradient: choose a round t with t + 1 a multiple of {steps}")


def _step(transcript: Transcript, t: int) -> tuple[Tensor, None, float]:
    """x^{t+1} = W x^t − s_t g̃^t, s_t = η on update rounds and 0 on gossip rounds."""
    hyper = transcript.public.hyper
    return transcript.public.mixing, None, _params(hyper).lr if update_round(hyper, t) else 0.0


STATE_DIFFERENCE = register_extractor(Extractor(
    NAME, "state_difference", state_difference, frozenset({Kind.MODEL}),
    f"model broadcasts of the victim (t, t+1) and its neighbours (t), t an update round: {ALL_NEIGHBOURS}",
    victim_and_neighbours, span(0, 1)))
register_model_view(Extractor(NAME, "model", broadcast_model(Kind.MODEL), frozenset({Kind.MODEL}),
                              MODEL_NEEDS.format("model"), victim_only, span(0, 0)))
register_channel(MuffliatoChannel(STATE_DIFFERENCE))
register_dynamics(Dynamics(NAME, Kind.MODEL, True, _step,
                           "the local noisy gradient of an update round (clipped, with its DP noise); nothing on a "
                           "gossip round"))
register_noise(Noise(NAME, {"noise_multiplier": ("σ", True)}))
register_batch_size(NAME, lambda hyper: _params(hyper).batch_size)
register_steering(Steering(
    NAME, Kind.MODEL, steer_mixing(Kind.MODEL), heard_model(Kind.MODEL), 1, "state_difference",
    "the victim's gossip row x_v^{t+1} = Σ_j w_vj m_{j→v}^t − s_t g̃_v^t solved for the liar's model broadcast at a "
    "round t before an update round, so the victim mixes to θ* and computes its noisy gradient of t + 1 at θ* "
    "(K > 1: s_t = 0, exactly) or at θ* − η g̃_v^t (K = 1, as DP-D-PSGD)",
    steering_refusal))
