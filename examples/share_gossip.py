"""A second defense defined outside privaudit, with a false claim: noisy gossip that sends its noise
beside its model. Nothing in privaudit imports this module; `examples/share_gossip.toml` audits it.

The algorithm. Agent i takes a local step u_i = x_i − η g_i (per-sample ℓ2 clipping to C, the mean
over B records), broadcasts y_i = u_i + n_i with n_i ~ N(0, (σΔ)² I), Δ = 2ηC/B, and — the flaw —
sends n_i itself to its lowest-numbered neighbour as a "backup share"; then x_i ← Σ_j w_ij y_j.

The claim: the Gaussian mechanism per round (one record replaced moves u_i by at most Δ in ℓ2),
composed over the T rounds by RDP. It holds for an attacker who never hears a share, and is false
for one who hears both messages: y_i − n_i is the noiseless step.

Its view, at the bottom: two extractors, no law. "noisy" reads (x_i^t − y_i^t)/η = g − n/η from
the broadcasts; "exact" also subtracts the share, when the tap hears it. The canary audit scores
them law-free (`privaudit.attacks.audit.canary_audit`, statistic "projection"): no one had to write down how
the noise enters, so the audit tests the code, not a model of it.
"""

import dp_accounting
import torch
from pydantic import Field

from privaudit.attacks.extraction import Extractor, Target, broadcasts, heard, initial_model, public_params, span
from privaudit.attacks.views import register_extractor
from privaudit.defenses.base import Defense, DefenseParams
from privaudit.accounting import Claim, Neighbours
from privaudit.grads import clip_l2, per_sample_grads_agents
from privaudit.wire import Kind, Transcript

SHARE = Kind.CROSS_GRADIENT
"""The kind the backup share travels as (a directed message)."""


class ShareGossipParams(DefenseParams):
    lr: float = Field(0.5, gt=0)
    batch_size: int = Field(8, ge=1)
    clip: float = Field(1.0, gt=0)
    sigma: float = Field(4.0, gt=0)
    delta: float = Field(1e-5, gt=0, lt=1)


class ShareGossip(Defense):
    name = "share_gossip"
    title = "Share gossip (noise sent beside the model)"
    Params = ShareGossipParams

    def __init__(self, params, setup):
        super().__init__(params, setup)
        self.x = setup.model.initial().repeat(setup.topology.n, 1)

    @property
    def states(self):
        return self.x

    def step(self, t, wire):
        p, topology = self.params, self.setup.topology
        xb, yb, _ = self.setup.local.fixed_batches(p.batch_size, self.setup.generator)
        g = clip_l2(per_sample_grads_agents(self.setup.model, self.x, xb, yb), p.clip).mean(dim=1)
        noise = torch.randn(self.x.shape, generator=self.setup.generator) * (p.sigma * 2 * p.lr * p.clip / p.batch_size)
        y = self.x - p.lr * g + noise
        for i in range(topology.n):
            wire.broadcast(t, i, Kind.NOISY_STATE, y[i])
            wire.send(t, i, min(topology.neighbours(i)), SHARE, noise[i])
        self.x = self.W @ y

    def mechanism(self, rounds):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(self.params.sigma), rounds)

    def claim(self, rounds):
        accountant = dp_accounting.rdp.RdpAccountant()
        accountant.compose(self.mechanism(rounds))
        eps = accountant.get_epsilon(self.params.delta)
        return Claim(defense=self.name, notion="(ε, δ)-DP", adjacency="one record of an agent replaced",
                     eps_claimed=eps, eps_stated=None, eps_sound=eps, delta=self.params.delta, horizon=rounds,
                     equation="Gaussian mechanism per round, RDP composition", sound_method="RDP accountant",
                     assumptions=("no attacker hears a share",), neighbours=Neighbours("replace-one"))


def _state(transcript: Transcript, victim: int, round: int) -> torch.Tensor:
    """x_i^t: x_0 at t = 0, else Σ_j w_ij y_j^{t−1}."""
    if round == 0:
        return initial_model(transcript)
    W = transcript.public.mixing
    return sum(W[victim, j] * heard(transcript, Kind.NOISY_STATE, round - 1, j, None)
               for j in torch.nonzero(W[victim]).flatten().tolist())


def noisy_step(transcript: Transcript, victim: int, round: int) -> Target:
    """(x_i^t − y_i^t)/η = g_i^t − n_i^t/η."""
    p = public_params(transcript.public.hyper, ShareGossipParams)
    point = _state(transcript, victim, round)
    return Target((point - heard(transcript, Kind.NOISY_STATE, round, victim, None)) / p.lr, point.float(), victim,
                  round, kind="noisy_gradient")


def exact_step(transcript: Transcript, victim: int, round: int) -> Target:
    """(x_i^t − y_i^t + n_i^t)/η = g_i^t, the share subtracted."""
    p = public_params(transcript.public.hyper, ShareGossipParams)
    point = _state(transcript, victim, round)
    receiver = min(int(j) for j in torch.nonzero(transcript.public.mixing[victim]).flatten().tolist() if j != victim)
    released = heard(transcript, Kind.NOISY_STATE, round, victim, None) - heard(transcript, SHARE, round, victim,
                                                                                receiver)
    return Target((point - released) / p.lr, point.float(), victim, round, kind="gradient")


def _around(victim, topology):
    return [broadcasts([victim, *topology.neighbours(victim)])]


def _with_share(victim, topology):
    return [broadcasts([victim, *topology.neighbours(victim)]) + ((victim, min(topology.neighbours(victim))),)]


register_extractor(Extractor("share_gossip", "noisy", noisy_step, frozenset({Kind.NOISY_STATE}),
                             "the victim's and its neighbours' broadcasts", _around, span(-1, 0)))
register_extractor(Extractor("share_gossip", "exact", exact_step, frozenset({Kind.NOISY_STATE, SHARE}),
                             "the broadcasts and the victim's share to its lowest neighbour", _with_share, span(-1, 0)))
