"""A defense defined outside privaudit: gossip averaging with Laplace noise on the models.

Nothing in privaudit imports this module. A campaign names the class by its import path,

    [[defense]]
    kind = "examples.laplace_gossip:LaplaceGossip"

and privaudit imports it, checks it and registers it under its `name`, "laplace_gossip"
(`privaudit.defenses.external`). Importing the module also registers the attacker's view of it, at the bottom
of this file: an extractor (`register_extractor`, for gradient inversion), the model view
(`register_model_view`, for membership inference), a canary channel (`register_channel`, for the
canary audit) and its noise parameter (`register_noise`, for the privacy-utility section).

The algorithm. Agent i keeps one model s_i, the model it broadcasts. Round t:

    broadcast s_i^t                                          (`Kind.NOISY_STATE`)
    g_i^t = (1/B) Σ_{z ∈ batch} clip₁(∇ℓ(s_i^t; z), C)          B distinct records, uniformly drawn
    s_i^{t+1} = Σ_j w_ij s_j^t − η g_i^t + n_i^{t+1},   n ~ Laplace(b)^P,   s_i^0 = x_0 + n_i^0

with clip₁ scaling a vector to ℓ1 norm at most C. The agent mixes the models it heard, its own
included, and takes its step at the point it broadcast, so its next model is the public
information of round t plus one gradient step and fresh noise. The models s_i^T it ends with are
the run's output (what `states` gives); they are noised like every broadcast.

The claim (pure ε-DP). Adjacency: D_i and D_i' differ by replacing one record of agent i's local
dataset; batch positions are drawn independently of the data, so the two runs' draws are coupled.
Given everything on the wire up to round t, s_i^{t+1} is a public vector minus η g_i^t, plus
noise: a Laplace mechanism on D_i ↦ η g_i^t. At most one of the B records differs, and each
clipped gradient has ℓ1 norm ≤ C, so

    Δ = ‖η (g_i^t(D_i) − g_i^t(D_i'))‖₁ ≤ η · 2C / B,    ε_0 = Δ / b per release,

and the noise scale is set from the per-round ε_0 a user asks for: b = 2ηC / (B ε_0) (Dwork &
Roth 2014, Thm 3.6). A T-round run makes T data-dependent releases of agent i, s_i^1 .. s_i^T
(s_i^0 does not depend on the data; s_i^T is never sent but is the output). Everything else an
attacker sees — other agents' models, the evaluations — is post-processing of these and of data
independent of D_i, so adaptive composition gives ε = T ε_0, δ = 0 (Thm 3.16). The same releases
are also (ε', δ')-DP for ε' = √(2T ln(1/δ')) ε_0 + T ε_0 (e^{ε_0} − 1) (advanced composition,
Thm 3.20), smaller than T ε_0 for long runs: stated beside the claim, at δ' = 1e-5. Not used: the
amplification a random batch gives (so the bound is sound, and loose).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import dp_accounting
import torch
from pydantic import Field
from torch import Tensor

from privaudit.attacks.audit.channels import Channel, Reading, RoundLaw, fixed_batch, targets
from privaudit.attacks.extraction import Clipping, Extractor, Link, Target, public_params
from privaudit.attacks.views import (Noise, register_batch_size, register_channel, register_extractor, register_model_view,
                           register_noise)
from privaudit.defenses.base import Defense, DefenseParams
from privaudit.accounting import Claim, Neighbours, pure_epsilon
from privaudit.grads import clip_l1, per_sample_grads_agents
from privaudit.setup import Setup
from privaudit.topology import Topology
from privaudit.wire import Kind, PublicKnowledge, Transcript, Wire

ADVANCED_DELTA = 1e-5
"""δ' of the advanced-composition figure stated beside the claim."""


class LaplaceGossipParams(DefenseParams):
    lr: float = Field(0.1, gt=0, description="step size η")
    batch_size: int = Field(16, ge=1, description="B: distinct records per agent per round")
    clip: float = Field(1.0, gt=0, description="C: per-sample ℓ1 clip norm")
    epsilon: float = Field(1.0, gt=0, description="ε_0: pure ε of one round's release")


def sensitivity(params: LaplaceGossipParams) -> float:
    """Δ = η · 2C/B: the ℓ1 distance one replaced record moves a release (module docstring)."""
    return 2 * params.lr * params.clip / params.batch_size


def laplace_scale(params: LaplaceGossipParams) -> float:
    """b = Δ/ε_0, the Laplace scale of every release."""
    return sensitivity(params) / params.epsilon


class LaplaceGossip(Defense):
    name = "laplace_gossip"
    title = "Laplace gossip (example: Laplace noise on every broadcast model)"
    Params = LaplaceGossipParams

    def __init__(self, params: LaplaceGossipParams, setup: Setup) -> None:
        super().__init__(params, setup)
        setup.local.check_batch_size(params.batch_size)
        self.sensitivity = sensitivity(params)
        self.scale = laplace_scale(params)
        self.s = setup.model.initial().repeat(setup.topology.n, 1)
        self.s = self.s + self.laplace()

    @property
    def states(self) -> Tensor:
        return self.s

    def laplace(self) -> Tensor:
        """One Laplace(b) draw per agent and coordinate: b (E₁ − E₂), E exponential(1)."""
        first = torch.empty(self.s.shape).exponential_(generator=self.setup.generator)
        second = torch.empty(self.s.shape).exponential_(generator=self.setup.generator)
        return self.scale * (first - second)

    def step(self, t: int, wire: Wire) -> None:
        p = self.params
        for i in range(self.setup.topology.n):
            wire.broadcast(t, i, Kind.NOISY_STATE, self.s[i])
        xb, yb, rows = self.setup.local.fixed_batches(p.batch_size, self.setup.generator)
        per_sample = per_sample_grads_agents(self.setup.model, self.s, xb, yb)
        gradients = clip_l1(per_sample, p.clip).mean(dim=1)
        for i in range(self.setup.topology.n):
            wire.disclose(t, i, "batch", rows[i])
            wire.disclose(t, i, "gradient", gradients[i])
        self.s = self.W @ self.s - p.lr * gradients + self.laplace()

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        """T Laplace releases of noise multiplier b/Δ = 1/ε_0. Each is read by an (ε, δ)
        accountant as one-dimensional, which is not shown to dominate the P-dimensional release:
        the sound ε is the pure one, `pure_epsilon`."""
        return dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(self.scale / self.sensitivity),
                                                 rounds)

    def claim(self, rounds: int) -> Claim:
        p = self.params
        advanced = advanced_composition(p.epsilon, rounds, ADVANCED_DELTA)
        return Claim(
            defense=self.name,
            notion="ε-DP (pure, Laplace)",
            adjacency="replace one record of an agent's local dataset (batch positions drawn independently "
                      "of the data)",
            neighbours=Neighbours("replace-one"),
            eps_claimed=rounds * p.epsilon,
            eps_stated=None,
            eps_sound=pure_epsilon([self.sensitivity] * rounds, [self.scale] * rounds),
            delta=0.0,
            horizon=rounds,
            equation=f"ε = T ε_0 = {rounds} × {p.epsilon}: each release s_i^t, t = 1..T, is a Laplace mechanism "
                     f"of scale b = 2ηC/(B ε_0) = {self.scale:.4g} on one gradient step of ℓ1 sensitivity "
                     f"2ηC/B = {self.sensitivity:.4g}, composed over the T releases (Dwork & Roth 2014, "
                     "Thm 3.6, 3.16)",
            sound_method="pure_epsilon: additive composition of the T releases s_i^1..s_i^T (the final models "
                         "included), Δ/b each; every other message is post-processing",
            assumptions=(
                f"per-sample gradients clipped to ℓ1 norm C = {p.clip}",
                "s_i^0 = x_0 + noise does not depend on the data; s_i^T is never sent but is the run's output, "
                "counted as released",
                "no amplification by the random batch is claimed",
                "the float32 Laplace draws are taken as exact (floating-point attacks, Mironov 2012, not modelled)",
            ),
            statements=(
                f"advanced composition (Dwork & Roth 2014, Thm 3.20): ({advanced:.4g}, {ADVANCED_DELTA:g})-DP over "
                f"the same {rounds} releases, {'below' if advanced < rounds * p.epsilon else 'no better than'} "
                "T ε_0",
            ),
        )


def advanced_composition(epsilon: float, rounds: int, delta: float) -> float:
    """ε' of `rounds`-fold adaptive composition of ε-DP mechanisms, at δ' = `delta`:
    √(2k ln(1/δ')) ε + k ε (e^ε − 1) (Dwork & Roth 2014, Thm 3.20); ∞ when e^ε overflows."""
    growth = math.expm1(epsilon) if epsilon < 700 else math.inf
    return math.sqrt(2 * rounds * math.log(1 / delta)) * epsilon + rounds * epsilon * growth


# ---------------------------------------------------------------- what attacks read


def state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """The update solved for the gradient: ĝ = (Σ_j w_ij s_j^t − s_i^{t+1}) / η = g_i^t − n_i^{t+1}/η,
    at the point s_i^t, which is exactly where g_i^t was computed. Unbiased, with Laplace(b/η)
    error per coordinate: at ε_0 per round its ℓ1 norm is ≈ 2CP/(B ε_0), against ≤ C for the
    gradient. Needs s of the victim at t and t+1 and of its neighbours at t."""
    W = transcript.public.mixing
    hyper = transcript.public.hyper
    mixed = sum(W[victim, j] * heard(transcript, j, round) for j in torch.nonzero(W[victim]).flatten().tolist())
    return Target(
        gradient=(mixed - heard(transcript, victim, round + 1)) / hyper["lr"],
        point=heard(transcript, victim, round).float(),
        victim=victim,
        round=round,
        kind="gradient_estimate",
        clipping=Clipping("per_sample_l1", float(hyper["clip"])),
    )


def heard(transcript: Transcript, agent: int, round: int) -> Tensor:
    """Agent `agent`'s model as broadcast at `round`, in float64."""
    return transcript.payload(Kind.NOISY_STATE, round, agent, None).double()


def noisy_model(transcript: Transcript, victim: int, round: int) -> Tensor:
    """The victim's model as an attacker holds it at `round`: its broadcast, noise included."""
    return heard(transcript, victim, round).float()


def _victim_and_neighbours(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [tuple((agent, None) for agent in [victim, *topology.neighbours(victim)])]


def _victim(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [((victim, None),)]


class LaplaceGossipChannel(Channel):
    """The canary audit's reading of one round: the state difference (`state_difference`) is
    g_i^t − n/η, n ~ Laplace(b) per coordinate, so along one coordinate its noise is Laplace(b/η).
    A batch of B records drawn without replacement holds the canary with probability B/|D_i|; the
    canary's gradient, ℓ1-clipped to C, then moves the mean by its clipped length over B. The
    canary pair is ±C along one coordinate (Laplace noise is per coordinate, so one coordinate is
    the worst direction): one record replaced, the claim's own relation."""

    defense = LaplaceGossip.name
    adjacency = "replace-one"
    coordinate = True
    pair = "one of the victim's records replaced by the canary (+C along one coordinate) or the anti-canary (−C)"

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        return public_params(hyper, LaplaceGossipParams).clip

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        p = public_params(transcript.public.hyper, LaplaceGossipParams)
        gradients, points = targets(self.extractors[0].extract, transcript, victims, round)
        scale = laplace_scale(p) / p.lr
        gain = torch.full((len(victims),), 1.0 / (p.batch_size * scale), dtype=torch.float64)
        return [Reading(gradients / scale, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        batch = public_params(public.hyper, LaplaceGossipParams).batch_size
        return RoundLaw(fixed_batch(batch, records), family="laplace")

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths.clamp(max=public_params(hyper, LaplaceGossipParams).clip)


STATE_DIFFERENCE = register_extractor(Extractor(
    LaplaceGossip.name, "state_difference", state_difference, frozenset({Kind.NOISY_STATE}),
    "noisy models of the victim (t, t+1) and its neighbours (t): a global listener, an eavesdropper on all of "
    "the victim's links, or a curious neighbour adjacent to all of the victim's neighbours",
    _victim_and_neighbours, lambda t: range(t, t + 2)))

register_model_view(Extractor(
    LaplaceGossip.name, "model", noisy_model, frozenset({Kind.NOISY_STATE}),
    "the victim's noisy model at the round: any tap on one of its links", _victim, lambda t: range(t, t + 1)))
register_channel(LaplaceGossipChannel(STATE_DIFFERENCE))
register_noise(Noise(LaplaceGossip.name, {"epsilon": ("ε_0", False)}))
register_batch_size(LaplaceGossip.name, lambda hyper: public_params(hyper, LaplaceGossipParams).batch_size)
