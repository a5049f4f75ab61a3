"""What a candidate batch would have released: the defense's gradient map, replayed on dummy data.

A gradient-inversion attack compares the intercepted target with the release its candidate images
would produce. For a plain D-PSGD gradient that is the batch gradient at the target's point. A
defense that clips (DPDL, DP-D-PSGD, Wang & Zhang, LT-ADMM-DP) releases a bounded map of the
per-sample gradients instead, and LT-ADMM-DP releases the sum of τ local steps, each on a fresh
batch at a point the previous steps moved to. Everything this replay needs is public (the rule,
the bound, τ, the step size and the per-step drift come with the `Target`), so matching the
replayed release — not a raw gradient — is the attack the transcript allows: a clipped release
is a rescaled gradient, which DLG's ℓ2 distance cannot match otherwise.

`release` is vectorised over restarts (`vmap`) and differentiable in the candidates (images and
labels), so an optimiser can run on it by double backward.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import grad, vmap

from privaudit.attacks.extraction import Target
from privaudit.flatmodel import FlatModel


def images_per_target(target: Target, batch_size: int) -> int:
    """How many inputs a target was computed from: `batch_size` per local step."""
    return target.steps * batch_size


def _one_step(model: FlatModel, target: Target) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """(point, x [B, ...], y [B] or [B, C]) → the released gradient of one local step."""
    clipping = target.clipping
    if clipping is None:
        return grad(model.loss)
    if clipping.rule == "smooth_mean":
        return lambda point, x, y: clipping.apply(grad(model.loss)(point, x, y).unsqueeze(0))

    def sample_loss(point: Tensor, xi: Tensor, yi: Tensor) -> Tensor:
        return model.loss(point, xi.unsqueeze(0), yi.unsqueeze(0))

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))
    return lambda point, x, y: clipping.apply(per_sample(point, x, y))


def _is_gradient(target: Target) -> bool:
    """Whether the target is one gradient, not a sum of local steps of size `step_size` (which an
    LT-ADMM-DP target remains at τ = 1: γ g(x_{i,k}), not g)."""
    return target.steps == 1 and target.step_size is None


def _update(model: FlatModel, target: Target, point: Tensor, drift: Tensor | None) -> Callable[[Tensor, Tensor], Tensor]:
    """(x [S·B, ...], y) → the release of one candidate batch: one gradient, or for S local steps
    φ^{t+1} = φ^t − γ g(φ^t; batch t) − drift the sum γ Σ_t g(φ^t; batch t) (seed 002, eq. 5a)."""
    step = _one_step(model, target)
    if _is_gradient(target):
        return lambda x, y: step(point, x, y)
    steps, size = target.steps, target.step_size

    def update(x: Tensor, y: Tensor) -> Tensor:
        batches, labels = x.chunk(steps), y.chunk(steps)
        phi, total = point, None
        for t in range(steps):
            moved = size * step(phi, batches[t], labels[t])
            total = moved if total is None else total + moved
            phi = phi - moved if drift is None else phi - moved - drift
        return total

    return update


def release(model: FlatModel, target: Target, point: Tensor, x: Tensor, y: Tensor,
            drift: Tensor | None = None) -> Tensor:
    """The release of every restart's candidates, comparable with `target.gradient`:
    x [R, S·B, ...], y [R, S·B] class indices or [R, S·B, C] probabilities → [R, P].

    `point` and `drift` are the target's, cast to the attack's dtype by the caller. A plain
    gradient of one restart takes autograd with `create_graph` instead of `vmap`: the same
    gradient at about two thirds of the cost (5.3 → 3.6 ms for DLG's LeNet on one 32×32 image,
    float64, one thread), as vmap's batching rules for convolutions cost more than they save at
    R = 1; with four restarts vmap is faster than a loop (10.5 against 14.3 ms)."""
    if x.shape[0] == 1 and _is_gradient(target) and target.clipping is None:
        with torch.enable_grad():
            flat = point.detach().requires_grad_(True)
            (gradient,) = torch.autograd.grad(model.loss(flat, x[0], y[0]), flat, create_graph=True)
        return gradient.unsqueeze(0)
    return vmap(_update(model, target, point, drift))(x, y)
