"""Per-sample gradients (torch.func) equal a per-sample Python loop on every model; clipping rules."""

import pytest
import torch

from privaudit.flatmodel import FlatModel
from privaudit.grads import (batch_grad, batch_grads, clip_l1, clip_l2, per_sample_grads,
                             per_sample_grads_agents, smooth_clip)
from privaudit.models import MODELS, build_model

SHAPES = {
    "linear_estimator": (3, 2),
    "lenet_dlg": (3, 32, 32),
    "dpdl_mnist": (1, 28, 28),
    "dpdl_cifar": (3, 32, 32),
    "wz_mnist": (1, 28, 28),
    "wb_mnist": (1, 28, 28),
    "logreg": (5,),
    "mlp": (1, 8, 8),
    "resnet18": (3, 32, 32),
}
OPTIONS = {"logreg": {"nonconvex_reg": 0.1, "binary": True}, "linear_estimator": {"init": (0.3, -0.2)}}
OUTPUTS = {"logreg": 2, "linear_estimator": 3}


def _model(name: str) -> FlatModel:
    torch.manual_seed(0)
    return FlatModel(build_model(name, SHAPES[name], OUTPUTS.get(name, 10), **OPTIONS.get(name, {})))


def _targets(name: str, batch: int, generator: torch.Generator) -> torch.Tensor:
    if name == "linear_estimator":
        return torch.randn((batch, 3), generator=generator)
    return torch.randint(0, OUTPUTS.get(name, 10), (batch,), generator=generator)


def _loop(model: FlatModel, flat, x, y):
    rows = []
    for xi, yi in zip(x, y):
        point = flat.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(model.loss(point, xi[None], yi[None]), point)
        rows.append(g)
    return torch.stack(rows)


def test_every_model_is_covered():
    assert set(SHAPES) == set(MODELS)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_per_sample_grads_equal_a_loop(name):
    model = _model(name)
    batch = 2 if name in ("resnet18", "wb_mnist") else 5
    generator = torch.Generator().manual_seed(1)
    x = torch.randn((batch, *SHAPES[name]), generator=generator)
    y = _targets(name, batch, generator)
    flat = model.initial()
    fast = per_sample_grads(model, flat, x, y)
    slow = _loop(model, flat, x, y)
    assert fast.shape == (batch, model.dim)
    assert torch.allclose(fast, slow, rtol=1e-5, atol=1e-6)
    assert torch.allclose(fast.mean(0), batch_grad(model, flat, x, y), rtol=1e-4, atol=1e-6)


def test_agent_axis_uses_each_agents_own_point():
    model = _model("mlp")
    flats = torch.stack([model.initial(), model.initial() * 0.5, model.initial() + 0.01])
    x = torch.randn(3, 4, 1, 8, 8)
    y = torch.randint(0, 10, (3, 4))
    together = per_sample_grads_agents(model, flats, x, y)
    for i in range(3):
        assert torch.allclose(together[i], per_sample_grads(model, flats[i], x[i], y[i]), atol=1e-6)
    assert torch.allclose(batch_grads(model, flats, x, y), together.mean(1), atol=1e-6)


def test_l2_clipping_bounds_norms_and_keeps_small_vectors():
    g = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    clipped = clip_l2(g, 1.0)
    assert torch.allclose(clipped[0], torch.tensor([0.6, 0.8]))
    assert torch.equal(clipped[1], g[1])


def test_l1_clipping_bounds_the_l1_norm():
    g = torch.tensor([[3.0, -1.0], [0.1, 0.2]])
    clipped = clip_l1(g, 2.0)
    assert torch.allclose(clipped.abs().sum(-1), torch.tensor([2.0, 0.3]))


def test_smooth_clipping_is_seed_002_formula():
    g = torch.tensor([3.0, 4.0])
    assert torch.allclose(smooth_clip(g, 1.0), g / 6.0)
    huge = smooth_clip(torch.tensor([3e6, 4e6]), 1.0)
    assert float(huge.norm()) < 1.0


@pytest.mark.parametrize("options", [{}, {"nonconvex_reg": 0.3}, {"binary": True}, {"binary": True, "nonconvex_reg": 0.2}])
def test_closed_form_per_sample_gradients_equal_autograd(options):
    """Logistic regression's closed forms (`sample_gradients`, `clipped_gradient_sums`) against
    autograd on the same model (`without_closed_forms`), with points, clipping and masks that bite."""
    from privaudit.grads import clipped_sums, masked_sums
    from privaudit.models import build_model

    torch.manual_seed(0)
    classes = 2 if options.get("binary") else 10
    model = FlatModel(build_model("logreg", (8, 8), classes, **options))
    reference = model.without_closed_forms()
    assert model.closed_form and not reference.closed_form
    points, x, y = torch.randn(7, model.dim) * 0.3, torch.randn(7, 8, 8), torch.randint(classes, (7,))
    assert torch.allclose(model.sample_grads(points, x, y), reference.sample_grads(points, x, y), atol=1e-5)
    flats, xb, yb = torch.randn(5, model.dim) * 0.3, torch.randn(5, 6, 8, 8), torch.randint(classes, (5, 6))
    mask = (torch.rand(5, 6) < 0.6).float()
    expected = masked_sums(reference, flats, xb, yb, mask, lambda g: clip_l2(g, 0.5))
    assert torch.allclose(clipped_sums(model, flats, xb, yb, mask, 0.5), expected, atol=1e-5)
    assert torch.allclose(per_sample_grads_agents(model, flats, xb, yb), per_sample_grads_agents(reference, flats, xb, yb),
                          atol=1e-5)


def test_planted_records_keep_their_gradient_in_the_closed_form_clipped_sums():
    from privaudit.attacks.audit.canaries import PlantedModel
    from privaudit.grads import clipped_sums, masked_sums
    from privaudit.models import build_model

    torch.manual_seed(1)
    base = FlatModel(build_model("logreg", (8, 8), 10, nonconvex_reg=0.1))
    flats, xb, yb = torch.randn(5, base.dim) * 0.3, torch.randn(5, 6, 8, 8), torch.randint(10, (5, 6))
    planted = PlantedModel(base, xb[1:3, 2], 3 * torch.randn(2, base.dim))
    mask = (torch.rand(5, 6) < 0.5).float()
    mask[1, 2] = mask[2, 2] = 1.0
    reference = PlantedModel(base.without_closed_forms(), xb[1:3, 2], planted.planted_gradients)
    expected = masked_sums(reference, flats, xb, yb, mask, lambda g: clip_l2(g, 0.5))
    assert torch.allclose(clipped_sums(planted, flats, xb, yb, mask, 0.5), expected, atol=1e-5)
    assert torch.allclose(planted.sample_grads(flats[1:3], xb[1:3, 2], yb[1:3, 2]),
                          reference.sample_grads(flats[1:3], xb[1:3, 2], yb[1:3, 2]), atol=1e-5)
