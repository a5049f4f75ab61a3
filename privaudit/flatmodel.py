"""A torch module seen as a pure function of one flat parameter vector.

Decentralized algorithms move, average, perturb and quantize whole parameter vectors: gossip is
`X ← W X` on the stacked states of all agents, noise is added to a vector, an eavesdropper reads a
vector off the wire. Keeping every agent's state as one row of a `[N, P]` tensor makes all of that
one tensor operation, and `torch.func.functional_call` turns a row back into the module's
parameters whenever a loss or a prediction is needed.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call


class FlatModel:
    """The architecture of `module`, evaluated at any flat parameter vector.

    The module's own parameters are only the initial point (`initial()`); every other call takes
    the parameters as an argument, so the same object serves all agents, the attacker's dummy
    model and `vmap` over agents or samples. A module may define `penalty(params)` (a
    regulariser, e.g. seed 002's non-convex term); it is added to every sample's loss, so the mean
    of per-sample gradients equals the batch gradient.
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module.eval()
        named = list(module.named_parameters())
        self.names = [name for name, _ in named]
        self.shapes = [tuple(p.shape) for _, p in named]
        self.numels = [math.prod(shape) for shape in self.shapes]
        self.dim = sum(self.numels)
        self.buffers = {name: b.detach() for name, b in module.named_buffers()}
        self._penalty = getattr(module, "penalty", None)

    def initial(self) -> Tensor:
        """The module's current parameters as one detached flat vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()]).clone()

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """Views of `flat` shaped as the module's parameters (differentiable, vmap-safe)."""
        pieces = torch.split(flat, self.numels)
        return {name: piece.view(shape) for name, piece, shape in zip(self.names, pieces, self.shapes)}

    def logits(self, flat: Tensor, x: Tensor) -> Tensor:
        """The module's output on the batch `x` at parameters `flat`."""
        return functional_call(self.module, (self.unflatten(flat), self.buffers), (x,))

    def loss(self, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
        """Mean cross-entropy on the batch plus the module's penalty, if it has one."""
        value = F.cross_entropy(self.logits(flat, x), y)
        if self._penalty is not None:
            value = value + self._penalty(self.unflatten(flat))
        return value
