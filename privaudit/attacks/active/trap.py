"""Trap weights: a first fully connected layer whose units each fire for few of a batch's records,
so that the analytic inversion reads most records exactly (Fowl et al. 2022, "Robbing the Fed",
imprint; Boenisch et al. 2023, "When the curious abandon honesty", trap weights).

Unit k gets a random unit direction r_k and a bias at the (1 − 1/B) quantile of r_k · x over the
attacker's public data, so it fires (r_k · x + b_k > 0, a ReLU) for a fraction 1/B of the records
of the task: of a batch of B, exactly one with probability (1 − 1/B)^{B−1} ≈ 1/e, the largest such
a threshold allows. A record alone in unit k gives ∂L/∂W_k / ∂L/∂b_k = x exactly (per-sample
clipping scales both alike; `privaudit.attacks.inversion.analytic`), and with H units each record
is alone in about H/(eB) of them (256 units, B = 16: about six), so nearly every record of the
batch is read exactly. Every other parameter is left as the base model holds it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from privaudit.attacks.inversion.analytic import first_layer_problem
from privaudit.flatmodel import FlatModel


def trap_weights(model: FlatModel, base: Tensor, public: Tensor, batch_size: int, seed: int) -> Tensor:
    """`base` [P] with its first fully connected layer set to traps (module docstring), placed with
    the `public` records [N, ...] of the task; ValueError (one line) when the model's first layer
    is not fully connected with a bias on the raw input, or the public data is too small to place
    a threshold that fires for one record in `batch_size`."""
    problem = first_layer_problem(model, tuple(public.shape[1:]))
    if problem:
        raise ValueError(problem)
    if len(public) < 2 * batch_size:
        raise ValueError(f"trap weights place each unit's threshold with public data: {len(public)} public "
                         f"records cannot place one that fires for 1 in {batch_size}")
    units, features = model.shapes[0]
    generator = torch.Generator().manual_seed(seed)
    directions = torch.randn(units, features, generator=generator, dtype=torch.float64)
    directions /= directions.norm(dim=1, keepdim=True)
    projections = public.reshape(len(public), -1).double() @ directions.T
    thresholds = torch.quantile(projections, 1.0 - 1.0 / batch_size, dim=0)
    trapped = base.double().clone()
    size = units * features
    trapped[:size] = directions.flatten()
    trapped[size:size + units] = -thresholds
    return trapped.to(base.dtype)


def expected_alone(units: int, batch_size: int) -> float:
    """The expected number of units in which one given record of a batch fires alone: H · (1/B) ·
    (1 − 1/B)^{B−1}, for records distributed as the public data."""
    fire = 1.0 / batch_size
    return units * fire * math.pow(1.0 - fire, batch_size - 1)
