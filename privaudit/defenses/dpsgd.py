"""D-PSGD (Lian et al. 2017), the undefended baseline, and DP-D-PSGD, its DP-SGD variant.

D-PSGD: `x_i^{t+1} = Σ_j w_ij x_j^t − η g_i(x_i^t)`. Each round every agent sends its model
`x_i^t` to its neighbours (one broadcast), computes a mini-batch gradient at `x_i^t`, then mixes.
An attacker who knows W and η and hears the states recovers `g_i^t` exactly from two
consecutive rounds — the leak the private algorithms exist to close. Each agent mixes what the
wire delivered (`delivers`): a neighbour who lies (`privaudit.wire.Malicious`) reaches it.

DP-D-PSGD (cited by seed 000 as DP-DPSGD / A(DP)²SGD): the same, with the local gradient made
private as in DP-SGD (Abadi et al. 2016): Poisson sampling with rate q_i = B/|D_i|, per-sample
ℓ2 clipping to C, Gaussian noise N(0, σ²C² I) on the sum, division by the expected batch size B.
Every release of agent i's data is that one noisy gradient per round (the states are its
post-processing), so the mechanism is T compositions of the Poisson-subsampled Gaussian; the claim
is the accountant such papers use (RDP), and the sound ε is the tighter PLD accountant on the
same event. The worst agent (largest q) is reported.
"""

from __future__ import annotations

from collections.abc import Callable

import dp_accounting
import torch
from pydantic import Field
from torch import Tensor

from privaudit.defenses.base import Defense, DefenseParams, register
from privaudit.accounting import Claim, ClaimThreat, Neighbours, epsilon, sound_method, subsampled_gaussian, tightest
from privaudit.grads import batch_grads, clipped_sums
from privaudit.setup import Setup
from privaudit.wire import Kind, Wire


class DPSGDParams(DefenseParams):
    lr: float = Field(0.1, gt=0, description="step size η")
    batch_size: int = Field(32, ge=1, description="samples per agent per round")


class DPDPSGDParams(DPSGDParams):
    clip: float = Field(1.0, gt=0, description="per-sample ℓ2 clip norm C")
    noise_multiplier: float = Field(1.0, gt=0, description="σ: noise std is σC on the clipped sum")
    delta: float = Field(1e-5, gt=0, lt=1, description="δ at which ε is reported")


@register
class DPSGD(Defense):
    name = "dpsgd"
    title = "D-PSGD (no privacy)"
    Params = DPSGDParams

    def __init__(self, params: DPSGDParams, setup: Setup) -> None:
        super().__init__(params, setup)
        setup.local.check_batch_size(params.batch_size)
        self.x = setup.model.initial().repeat(setup.topology.n, 1)

    @property
    def states(self) -> Tensor:
        return self.x

    delivers = True

    def step(self, t: int, wire: Wire) -> None:
        delivered = wire.broadcast_each(t, Kind.MODEL, self.x)
        gradients, batches = self.local_gradients()
        wire.disclose_each(t, "batch", batches)
        wire.disclose_each(t, "gradient", lambda: gradients)
        self.x = self.gossip(self.x, delivered) - self.params.lr * gradients

    def local_gradients(self) -> tuple[Tensor, Callable[[], list[Tensor]]]:
        """Each agent's mini-batch gradient at its own model [N, P], and (when asked for) its
        batch's dataset rows."""
        xb, yb, rows = self.setup.local.fixed_batches(self.params.batch_size, self.setup.generator)
        return batch_grads(self.setup.model, self.x, xb, yb), lambda: list(rows)

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        return dp_accounting.NonPrivateDpEvent()

    def claim(self, rounds: int) -> Claim:
        return Claim.no_privacy(self.name, rounds, "no privacy claimed",
                                "no DP noise: the states reveal each local gradient exactly, no ε bound exists")


@register
class DPDPSGD(DPSGD):
    name = "dp_dpsgd"
    title = "DP-D-PSGD (clipped, noisy local gradients)"
    Params = DPDPSGDParams

    def __init__(self, params: DPDPSGDParams, setup: Setup) -> None:
        super().__init__(params, setup)
        self.rates = (params.batch_size / setup.sampling_sizes.to(torch.float32)).clamp(max=1.0)

    def local_gradients(self) -> tuple[Tensor, Callable[[], list[Tensor]]]:
        p = self.params
        local = self.setup.local
        chosen = local.poisson_mask(self.rates, self.setup.generator)
        clipped_sum = clipped_sums(self.setup.model, self.x, *local.shards(), chosen.to(self.x.dtype), p.clip)
        noise = torch.randn(clipped_sum.shape, generator=self.setup.generator) * (p.noise_multiplier * p.clip)
        return (clipped_sum + noise) / p.batch_size, lambda: [r[m] for r, m in zip(local.index, chosen)]

    def updates(self, rounds: int) -> int:
        """The noisy local updates of a run of `rounds` rounds, each one release of the agent's data:
        one a round."""
        return rounds

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        return subsampled_gaussian(float(self.rates.max()), self.params.noise_multiplier, self.updates(rounds))

    def claim(self, rounds: int) -> Claim:
        p = self.params
        event = self.mechanism(rounds)
        q = float(self.rates.max())
        sound = tightest(event)
        equation, assumptions, statements = self.claim_words(rounds, q)
        return Claim(
            defense=self.name,
            notion="(ε, δ)-DP",
            adjacency="add/remove one record of an agent's local dataset",
            neighbours=Neighbours("add/remove", "record", "one record of an agent's local dataset added or removed"),
            threat=self.claim_threat(),
            eps_claimed=epsilon(event, p.delta, "rdp"),
            eps_stated=None,
            eps_sound=epsilon(event, p.delta, sound),
            delta=p.delta,
            horizon=rounds,
            equation=equation,
            sound_method=sound_method(event, sound, p.noise_multiplier, f"{self.updates(rounds)} updates"),
            assumptions=(f"worst agent: q = B / min_i |D_i| = {q:.4g}", *assumptions),
            statements=statements,
        )

    def claim_threat(self) -> ClaimThreat:
        """Who the claim holds against: anyone who observes the releases, a lying neighbour
        included. No paper text of DP-D-PSGD was read; this is the mechanism's own property."""
        return ClaimThreat("any adversary", (
            "privaudit's reading of the mechanism, no paper text read: each round releases one per-sample clipped "
            "gradient sum plus N(0, σ²C² I), DP whatever model it is computed at, so DP-SGD's composition "
            "(Abadi et al. 2016) holds adaptively, also against a neighbour that chooses that model"))

    def claim_words(self, rounds: int, q: float) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """The claim's equation in words, its assumptions beyond the worst agent's rate, and what
        else the paper states: a defense stepping as this one does (Muffliato-GD) says its own."""
        return (f"RDP of the Poisson-subsampled Gaussian (q={q:.4g}, σ={self.params.noise_multiplier}), composed over "
                f"{rounds} rounds (Abadi et al. 2016; Mironov 2017)", (), ())
