"""The analytic attack (privaudit/attacks/inversion/analytic.py): an input read off a fully connected first layer's
gradient as ∂L/∂W_j / ∂L/∂b_j, exactly for B = 1 and for the samples of a batch that are alone
in two or more units; a clear failed status for models without such a layer (campaign use:
tests/test_campaign_new_attacks.py)."""

import pytest
import torch
from torch.func import grad, vmap

from privaudit.attacks.extraction import Clipping, Target
from privaudit.attacks.inversion import INVERSIONS
from privaudit.data import load_dataset
from privaudit.flatmodel import FlatModel
from privaudit.grads import batch_grad
from privaudit.metrics import score_reconstruction
from privaudit.models import build_model

EXACT_DB = 100.0


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def _mlp(data, seed: int = 0) -> FlatModel:
    torch.manual_seed(seed)
    return FlatModel(build_model("mlp", data.shape, data.num_classes))


def _run(model, target, data, batch_size):
    return INVERSIONS["analytic"]().run(target, model, input_shape=data.shape, num_classes=data.num_classes,
                                        batch_size=batch_size, normalisation=data.normalisation, seed=0)


def _alone(model, point, x, y) -> list[int]:
    """For each sample, the number of first-layer units in which it alone has a non-zero bias
    gradient (ground truth, from per-sample gradients)."""
    def loss(p, xi, yi):
        return model.loss(p, xi[None], yi[None])

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(point, x, y)
    bias = per_sample[:, model.numels[0] : model.numels[0] + model.numels[1]] != 0
    single = bias.sum(0) == 1
    return [int((bias[i] & single).sum()) for i in range(len(x))]


def test_one_input_through_an_mlp_is_recovered_exactly(digits):
    model = _mlp(digits)
    x, y = digits.x_train[5:6], digits.y_train[5:6]
    point = model.initial()
    result = _run(model, Target(batch_grad(model, point, x, y), point, 0, 0), digits, 1)
    assert result.ok and result.stopped_by == "closed form" and result.exact == 1
    assert score_reconstruction(result.images, x, digits.normalisation).psnr > EXACT_DB
    assert result.labels.tolist() == y.tolist() and result.label_source == "extracted"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_samples_alone_in_their_units_are_recovered_exactly(digits, seed):
    model = _mlp(digits, seed)
    x, y = digits.x_train[8 * seed : 8 * seed + 8], digits.y_train[8 * seed : 8 * seed + 8]
    point = model.initial()
    result = _run(model, Target(batch_grad(model, point, x, y), point, 0, 0), digits, 8)
    assert result.ok and len(result.images) == 8 and result.labels is None
    alone = _alone(model, point, x, y)
    twice = [i for i, units in enumerate(alone) if units >= 2]
    assert twice and result.exact == len(twice)
    scores = score_reconstruction(result.images, x, digits.normalisation)
    assert all(scores.per_image["psnr"][i] > EXACT_DB for i in twice)
    # the images returned as exact are the first ones, each a copy of one of those samples
    assert sorted(scores.pairs[i] for i in twice) == list(range(len(twice)))


def test_per_sample_clipping_cancels_in_the_ratio(digits):
    model = _mlp(digits)
    x, y = digits.x_train[:1], digits.y_train[:1]
    point = model.initial()
    clipping = Clipping("per_sample_l2", 1e-3)

    def loss(p, xi, yi):
        return model.loss(p, xi[None], yi[None])

    released = clipping.apply(vmap(grad(loss), in_dims=(None, 0, 0))(point, x, y))
    result = _run(model, Target(released, point, 0, 0, clipping=clipping), digits, 1)
    assert score_reconstruction(result.images, x, digits.normalisation).psnr > EXACT_DB


@pytest.mark.parametrize("name, options, shape, classes, why", [
    ("lenet_dlg", {}, (3, 32, 32), 6, "first parameter is features.0.weight (12, 3, 5, 5)"),
    ("logreg", {"binary": True}, (1, 8, 8), 2, "first parameter is linear.weight (1, 64)"),
])
def test_a_model_without_a_fully_connected_first_layer_fails_with_a_status(digits, name, options, shape, classes,
                                                                            why):
    model = FlatModel(build_model(name, shape, classes, **options))
    point = model.initial()
    result = INVERSIONS["analytic"]().run(Target(torch.ones(model.dim), point, 0, 0), model, input_shape=shape,
                                          num_classes=classes, batch_size=1, normalisation=digits.normalisation,
                                          seed=0)
    assert result.images is None and result.stopped_by == "not run"
    assert result.status == ("failed: the analytic attack needs a first layer that is fully connected with a "
                             f"bias; this model's {why}")


def test_a_zero_bias_gradient_fails_with_a_status(digits):
    model = _mlp(digits)
    result = _run(model, Target(torch.zeros(model.dim), model.initial(), 0, 0), digits, 1)
    assert result.status == "failed: no unit of the first layer has a non-zero bias gradient"
