"""My algorithm: each agent takes one clipped, Gaussian-noised gradient step on a fixed-size batch
from the average of what its neighbours sent; the final models are deployed."""
import dp_accounting
import torch
from pydantic import Field

from privaudit.accounting import Claim, Neighbours
from privaudit.defenses.base import Defense, DefenseParams
from privaudit.grads import per_sample_grads_agents
from privaudit.wire import Kind


class Params(DefenseParams):
    lr: float = Field(0.5, gt=0)
    batch_size: int = Field(10, ge=1)
    clip: float = Field(1.0, gt=0)
    sigma: float = Field(1.0, gt=0)
    delta: float = Field(1e-5, gt=0, lt=1)


class NoisyLocal(Defense):
    name = "noisy_local"
    title = "Noisy local steps then gossip (a user's algorithm)"
    Params = Params

    def __init__(self, params, setup):
        super().__init__(params, setup)
        self.x = setup.model.initial().repeat(setup.topology.n, 1)

    @property
    def states(self):
        return self.x

    def step(self, t, wire):
        p = self.params
        wire.broadcast_each(t, Kind.MODEL, self.x)
        xb, yb, _ = self.setup.local.fixed_batches(p.batch_size, self.setup.generator)
        g = per_sample_grads_agents(self.setup.model, self.x, xb, yb)
        norms = g.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        clipped = (g * (p.clip / norms).clamp(max=1.0)).sum(dim=1)
        noise = torch.randn(clipped.shape, generator=self.setup.generator) * p.sigma * p.clip
        self.x = self.gossip(self.x) - p.lr * (clipped + noise) / p.batch_size

    def mechanism(self, rounds):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(self.params.sigma / 2), rounds)

    def claim(self, rounds):
        accountant = dp_accounting.rdp.RdpAccountant()
        accountant.compose(self.mechanism(rounds))
        eps = accountant.get_epsilon(self.params.delta)
        return Claim(defense=self.name, notion="(ε, δ)-DP", adjacency="one record replaced", eps_claimed=eps,
                     eps_stated=None, eps_sound=eps, delta=self.params.delta, horizon=rounds,
                     equation="Gaussian mechanism per round (sensitivity 2C), RDP composition",
                     sound_method="RDP accountant", neighbours=Neighbours("replace-one"))
