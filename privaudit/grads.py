"""Gradients of a `FlatModel`: batch, per-sample, and across agents, with the clipping rules the
private algorithms use.

Per-sample gradients are the hot path of every DP defense (N agents × neighbours × batch per
round, and an audit's thousands of worlds), so they are computed by the model's `sample_grads`:
in closed form where the model has one (logistic regression), else with `torch.func` (`vmap` over
samples), with a Python loop over samples only on the CPU for models of millions of parameters,
where it is the faster (`privaudit.flatmodel.LOOP_MIN_PARAMETERS`).

They are formed in chunks of at most `chunk_rows` samples (agents × samples where agents are
batched too), so that a real-size CNN's fit the `memory` limit: a ResNet-18's gradient is 45 MB, a
batch of 32 of them 1.4 GB, and every agent of a run holds one batch. A caller that needs only a
reduction of them (`masked_sums`: DP-SGD's clipped sums) gets it reduced chunk by chunk, so the
whole [samples, P] tensor never exists.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import grad, vmap

from privaudit.flatmodel import FlatModel
from privaudit.limits import limit

WORKING_COPIES = 4
"""Copies of a per-sample gradient that one chunk holds at its peak, the unit `chunk_rows` divides
the `memory` limit by: the gradient as the parameters' pieces and as their concatenated flat row
(`torch.func.grad` of a flat vector), the row's own point where each sample has one (`masked_sums`
gathers it) and a transform's output (clipping). A CNN's activations per sample are smaller than
its gradient at the sizes the suite builds (ResNet-18 on 32 × 32: about 3 M values against 11 M
parameters) and ride in this margin."""


def chunk_rows(parameters: int, itemsize: int = 4) -> int:
    """The most per-sample gradients of a model of `parameters` entries of `itemsize` bytes that one
    chunk forms: the `memory` limit over `WORKING_COPIES` rows, at least one (a single row over the
    limit is refused where the model is checked: `privaudit.campaign.cells`)."""
    return max(1, limit("memory") * 2**20 // (WORKING_COPIES * itemsize * max(parameters, 1)))


def _chunk_rows_of(model: FlatModel, points: Tensor) -> int:
    """`chunk_rows` for `model` at points of `points`' dtype."""
    return chunk_rows(model.dim, points.element_size())


def batch_grad(model: FlatModel, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Gradient of the mean loss on the batch at `flat`: shape [P]."""
    return grad(model.loss)(flat, x, y)


def batch_grads(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Each agent's batch gradient at its own point: flats [N, P], x [N, B, ...] → [N, P]."""
    return vmap(grad(model.loss))(flats, x, y)


def per_sample_grads(model: FlatModel, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Gradient of each sample's loss at `flat`: x [B, ...] → [B, P], `chunk_rows` samples at a time."""
    rows = _chunk_rows_of(model, flat)
    if len(x) <= rows:
        return _sample_grads_at(model, flat, x, y)
    out = None
    for start in range(0, len(x), rows):
        part = _sample_grads_at(model, flat, x[start:start + rows], y[start:start + rows])
        out = _filled(out, (len(x), *part.shape[1:]), part)
        out[start:start + rows] = part
    return out


def _sample_grads_at(model: FlatModel, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Per-sample gradients of one chunk at one point: the closed form or a loop over samples
    (`FlatModel.sample_grads`), or `vmap` with the point unbatched (each convolution then runs once
    on the chunk, not once per sample's weights)."""
    if model.closed_form or model.loops_samples(flat):
        return model.sample_grads(flat.expand(len(x), -1), x, y)
    return vmap(grad(model.sample_loss), in_dims=(None, 0, 0))(flat, x, y)


def _filled(out: Tensor | None, shape: tuple[int, ...], like: Tensor) -> Tensor:
    """`out`, or a new uninitialised tensor of `shape` with `like`'s dtype and device."""
    return out if out is not None else torch.empty(shape, dtype=like.dtype, device=like.device)


def per_sample_grads_agents(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Per-sample gradients of every agent's batch at that agent's point (or, for cross-gradients,
    at any point per row): flats [N, P], x [N, B, ...] → [N, B, P], in chunks of at most
    `chunk_rows` agents × samples (whole batches of several agents, or part of one agent's)."""
    agents, batch = x.shape[:2]
    rows = _chunk_rows_of(model, flats)
    if agents * batch <= rows:
        return _agents_grads(model, flats, x, y)
    per_agent, per_slot = max(1, rows // batch), min(batch, rows)
    out = None
    for first in range(0, agents, per_agent):
        who = slice(first, first + per_agent)
        for start in range(0, batch, per_slot):
            slots = slice(start, start + per_slot)
            part = _agents_grads(model, flats[who], x[who, slots], y[who, slots])
            out = _filled(out, (agents, batch, *part.shape[2:]), part)
            out[who, slots] = part
    return out


def _agents_grads(model: FlatModel, flats: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """`per_sample_grads_agents` of one chunk, formed at once."""
    if not (model.closed_form or model.loops_samples(flats)):
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
    shared by c copies of the agents (agent w·N/c + i reads row i: `LocalData.shards`). The sums
    are accumulated `chunk_rows` samples at a time: no more per-sample gradients exist at once."""
    agents, slots = torch.nonzero(mask > 0, as_tuple=True)
    sums = torch.zeros_like(flats)
    step = _chunk_rows_of(model, flats)
    for start in range(0, len(agents), step):
        who, where = agents[start:start + step], slots[start:start + step]
        rows = who % len(x)
        sums.index_add_(0, who, transform(model.sample_grads(flats[who], x[rows, where], y[rows, where])))
    return sums


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
