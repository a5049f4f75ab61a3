"""Gradients of a `FlatModel`: batch, per-sample, and across agents, with the clipping rules the
private algorithms use.

Per-sample gradients are the hot path of every DP defense (N agents × neighbours × batch per
round, and an audit's thousands of worlds), so they are computed by the model's `sample_grads`:
in closed form where the model has one (logistic regression), else with `torch.func` (`vmap` over
samples), never with a Python loop over samples.
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


def per_sample_grads(model: FlatModel, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Gradient of each sample's loss at `flat`: x [B, ...] → [B, P]."""
    if model.closed_form:
        return model.sample_grads(flat.expand(len(x), -1), x, y)
    return vmap(grad(model.sample_loss), in_dims=(None, 0, 0))(flat, x, y)


def per_sample_grads_agents(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Per-sample gradients of every agent's batch at that agent's point (or, for cross-gradients,
    at any point per row): flats [N, P], x [N, B, ...] → [N, B, P]."""
    if not model.closed_form:
        return vmap(vmap(grad(model.sample_loss), in_dims=(None, 0, 0)))(flats, x, y)
    agents, batch = x.shape[:2]
    points = flats[:, None].expand(-1, batch, -1).reshape(agents * batch, -1)
    grads = model.sample_grads(points, x.reshape(agents * batch, *x.shape[2:]), y.reshape(agents * batch, *y.shape[2:]))
    return grads.reshape(agents, batch, -1)


def masked_sums(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor, mask: Tensor,
                transform: Callable[[Tensor], Tensor]) -> Tensor:
    """Σ_k transform(per-sample gradient) over the real samples of each agent's padded batch
    (flats [N, P], x [N, K, ...], mask [N, K] with 1.0 on real samples) → [N, P]. Gradients are
    computed for the real samples only: Poisson batches are padded to the largest, often twice the
    mean, and a padded slot costs as much as a real one. `x` and `y` may hold N / c rows, a batch
    shared by c copies of the agents (agent w·N/c + i reads row i: `LocalData.shards`)."""
    agents, slots = torch.nonzero(mask > 0, as_tuple=True)
    if len(agents) == 0:
        return torch.zeros_like(flats)
    rows = agents % len(x)
    per_sample = model.sample_grads(flats[agents], x[rows, slots], y[rows, slots])
    return torch.zeros_like(flats).index_add_(0, agents, transform(per_sample))


def clipped_sums(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor, mask: Tensor, bound: float) -> Tensor:
    """DP-SGD's clipped sum Σ_k clip_C(g_k) over the real samples of each agent's padded batch
    (`masked_sums` with `clip_l2`; `x` may be shared by copies of the agents, as there), in closed
    form where the model has one (`FlatModel.clipped_sums`: no per-sample gradient is formed, which
    is what thousands of audited worlds spend their time on)."""
    closed = model.clipped_sums(flats, x, y, mask, bound)
    if closed is not None:
        return closed
    return masked_sums(model, flats, x, y, mask, lambda g: clip_l2(g, bound))


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
