"""The replayed release of a candidate batch: equal to what the defense released for the true
batch (clipped DPDL cross-gradients, smooth-clipped multi-step LT-ADMM-DP updates), vectorised
over restarts and differentiable in the candidates."""

import pytest
import torch

from privaudit.attacks.extraction import Clipping, Target
from privaudit.attacks.inversion.replay import images_per_target, release
from privaudit.attacks.views.dpdl import cross_gradient as dpdl_cross_gradient
from privaudit.campaign.cells import build_defense, expand
from privaudit.flatmodel import FlatModel
from privaudit.grads import batch_grad, clip_l1, per_sample_grads, smooth_clip
from privaudit.sim import simulate
from privaudit.wire import CuriousNeighbour, GlobalListener
from tests.helpers import small_campaign


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return FlatModel(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.Sigmoid(),
                                         torch.nn.Linear(8, 3)))


def _batch(count, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn((count, 1, 4, 4), generator=generator), torch.randint(0, 3, (count,), generator=generator)


def test_plain_release_is_the_batch_gradient_for_every_restart(model):
    point = model.initial()
    x, y = _batch(6)
    target = Target(torch.zeros(model.dim), point, 0, 0)
    out = release(model, target, point, x.view(2, 3, 1, 4, 4), y.view(2, 3))
    for r in range(2):
        assert torch.allclose(out[r], batch_grad(model, point, x[3 * r:3 * r + 3], y[3 * r:3 * r + 3]), atol=1e-6)


def test_per_sample_l1_clipping_is_replayed(model):
    point = model.initial()
    x, y = _batch(4)
    target = Target(torch.zeros(model.dim), point, 0, 0, clipping=Clipping("per_sample_l1", 0.3))
    expected = clip_l1(per_sample_grads(model, point, x, y), 0.3).mean(0)
    assert torch.allclose(release(model, target, point, x[None], y[None])[0], expected, atol=1e-6)


def test_multi_step_release_replays_the_local_steps_with_their_drift(model):
    """τ = 3 steps of size γ on three fresh batches, smooth clipping ζ, a constant drift c."""
    point = model.initial()
    x, y = _batch(6, seed=1)
    drift = 0.01 * torch.ones(model.dim)
    target = Target(torch.zeros(model.dim), point, 0, 0, kind="multi_step_update", steps=3, step_size=0.5,
                    drift=drift, clipping=Clipping("smooth_mean", 0.2))
    phi, total = point, torch.zeros(model.dim)
    for t in range(3):
        moved = 0.5 * smooth_clip(batch_grad(model, phi, x[2 * t:2 * t + 2], y[2 * t:2 * t + 2]), 0.2)
        total, phi = total + moved, phi - moved - drift
    assert images_per_target(target, 2) == 6
    assert torch.allclose(release(model, target, point, x[None], y[None], drift)[0], total, atol=1e-6)


def test_release_is_differentiable_in_images_and_soft_labels(model):
    point = model.initial()
    x, _ = _batch(2)
    x = x[None].clone().requires_grad_(True)
    logits = torch.zeros((1, 2, 3), requires_grad=True)
    target = Target(torch.zeros(model.dim), point, 0, 0, clipping=Clipping("per_sample_l2", 0.01))
    release(model, target, point, x, logits.softmax(-1)).square().sum().backward()
    assert x.grad.abs().sum() > 0 and logits.grad.abs().sum() > 0


def test_dpdl_nd_cross_gradient_is_the_release_of_the_victims_true_batch():
    table = {"kind": "dpdl", "topology": "ring", "agents": 4, "model": "mlp", "model_options": {"hidden": [8]},
             "batch_size": 4, "noise": False, "clip": 0.05}
    defense = build_defense(expand(small_campaign([table]))[0])
    listener, truth = GlobalListener(rounds=[1]), CuriousNeighbour(0, rounds=[1])
    output = simulate(defense, rounds=2, eval_every=10, taps=[listener, truth])
    target = dpdl_cross_gradient(output.transcripts[0], 0, 1)
    (rows,) = [d.value for d in output.transcripts[1].disclosures if d.name == "batch"]
    data = defense.setup.data
    replayed = release(defense.setup.model, target, target.point, data.x_train[rows][None], data.y_train[rows][None])
    assert torch.allclose(replayed[0].double(), target.gradient, rtol=1e-4, atol=1e-7)
    unclipped = batch_grad(defense.setup.model, target.point, data.x_train[rows], data.y_train[rows])
    assert not torch.allclose(unclipped.double(), target.gradient, rtol=1e-2), "clipping must bite for this test"
