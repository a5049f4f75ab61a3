"""Gradients of a `FlatModel`: batch, per-sample, and across agents, with the clipping rules the
private algorithms use.

Per-sample gradients are the hot path of every DP defense (N agents × neighbours × batch per
round), so they are computed with `torch.func` (`vmap` over samples, and over agents on top),
never with a Python loop over samples.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import grad, vmap

from privaudit.flatmodel import FlatModel


def batch_grad(model: FlatModel, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Gradient of the mean loss on the batch at `flat`: shape [P]."""
    return grad(model.loss)(flat, x, y)


def batch_grads(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Each agent's batch gradient at its own point: flats [N, P], x [N, B, ...] → [N, P]."""
    return vmap(grad(model.loss))(flats, x, y)


def _sample_loss(model: FlatModel):
    def loss(flat: Tensor, xi: Tensor, yi: Tensor) -> Tensor:
        return model.loss(flat, xi.unsqueeze(0), yi.unsqueeze(0))

    return loss


def per_sample_grads(model: FlatModel, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Gradient of each sample's loss at `flat`: x [B, ...] → [B, P]."""
    return vmap(grad(_sample_loss(model)), in_dims=(None, 0, 0))(flat, x, y)


def per_sample_grads_agents(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Per-sample gradients of every agent's batch at that agent's point (or, for cross-gradients,
    at any point per row): flats [N, P], x [N, B, ...] → [N, B, P]."""
    per_agent = vmap(grad(_sample_loss(model)), in_dims=(None, 0, 0))
    return vmap(per_agent)(flats, x, y)


def masked_sums(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor, mask: Tensor,
                transform: Callable[[Tensor], Tensor]) -> Tensor:
    """Σ_k transform(per-sample gradient) over the real samples of each agent's padded batch
    (flats [N, P], x [N, K, ...], mask [N, K] with 1.0 on real samples) → [N, P]. Gradients are
    computed for the real samples only: Poisson batches are padded to the largest, often twice the
    mean, and a padded slot costs as much as a real one."""
    agents, slots = torch.nonzero(mask > 0, as_tuple=True)
    if len(agents) == 0:
        return torch.zeros_like(flats)
    per_sample = vmap(grad(_sample_loss(model)))(flats[agents], x[agents, slots], y[agents, slots])
    return torch.zeros_like(flats).index_add_(0, agents, transform(per_sample))


def clip_l2(g: Tensor, bound: float) -> Tensor:
    """Scale each vector along the last axis to ℓ2 norm at most `bound` (DP-SGD's clipping)."""
    norms = torch.linalg.vector_norm(g, ord=2, dim=-1, keepdim=True)
    return g * torch.clamp(bound / (norms + 1e-12), max=1.0)


def clip_l1(g: Tensor, bound: float) -> Tensor:
    """Scale each vector along the last axis to ℓ1 norm at most `bound`: the sensitivity that
    seed 003's Laplace mechanisms assume (the paper states it without clipping; we enforce it)."""
    norms = torch.linalg.vector_norm(g, ord=1, dim=-1, keepdim=True)
    return g * torch.clamp(bound / (norms + 1e-12), max=1.0)


def smooth_clip(g: Tensor, zeta: float) -> Tensor:
    """Seed 002's smooth clipping of a batch-mean gradient: g · ζ / (ζ + ‖g‖₂), so the result's
    norm is below ζ for every g (sensitivity bound) while small gradients pass almost unchanged."""
    norms = torch.linalg.vector_norm(g, ord=2, dim=-1, keepdim=True)
    return g * (zeta / (zeta + norms))
