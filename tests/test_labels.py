"""Label recovery from the last layer's gradient for batches (privaudit/attacks/inversion/labels.py): presence by the
bias and the weight rows, counts from n_c = B (p̄_c − s_c), exact when p̄ is the batch's own."""

import pytest
import torch

from privaudit.attacks.inversion.labels import count_labels, extract_labels, final_inputs_nonnegative
from privaudit.data import load_dataset
from privaudit.flatmodel import FlatModel
from privaudit.grads import batch_grad
from privaudit.models import build_model

SHAPE = (3, 32, 32)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.fixture(scope="module")
def photos():
    return load_dataset("photos")


def _lenet(seed: int) -> FlatModel:
    """DLG's LeNet with the DLG paper's uniform(−0.5, 0.5) initialisation."""
    torch.manual_seed(seed)
    module = build_model("lenet_dlg", SHAPE, 6)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.uniform_(-0.5, 0.5)
    return FlatModel(module)


def _batch(data, seed: int, size: int):
    generator = torch.Generator().manual_seed(10_000 + seed)
    picks = torch.randint(len(data.y_train), (size,), generator=generator)
    return data.x_train[picks], data.y_train[picks]


def test_counts_are_exact_where_the_output_does_not_depend_on_the_input(digits):
    """A zero final weight makes every sample's softmax that of the bias, which the attacker
    reads off the parameters: the counts of a batch with repeated labels follow exactly."""
    torch.manual_seed(0)
    module = build_model("mlp", digits.shape, 10)
    with torch.no_grad():
        module[-1].weight.zero_()
        module[-1].bias.normal_()
    model = FlatModel(module)
    rows = torch.cat([torch.nonzero(digits.y_train == c).flatten()[:k] for c, k in ((3, 3), (1, 2), (7, 1), (0, 2))])
    x, y = digits.x_train[rows], digits.y_train[rows]
    gradient = batch_grad(model, model.initial(), x, y)
    assert extract_labels(gradient, model, 10, 8) is None
    probe = torch.randn(5, *digits.shape)
    mean = model.output(model.initial(), probe).softmax(-1).mean(0)
    labels = extract_labels(gradient, model, 10, 8, mean_probabilities=mean)
    assert labels.tolist() == sorted(y.tolist()) == [0, 0, 1, 1, 3, 3, 3, 7]


@pytest.mark.parametrize("seed", range(4))
def test_counts_follow_from_the_batchs_own_mean_softmax_on_dlgs_lenet(photos, seed):
    """n_c = Σ_i p_ic − B s_c is an identity: with the batch's own softmax (known here only to
    the test) the counts of a batch of eight crops of six photographs are recovered."""
    model = _lenet(seed)
    x, y = _batch(photos, seed, 8)
    point = model.initial()
    gradient = batch_grad(model, point, x, y)
    with torch.no_grad():
        mean = model.output(point, x).softmax(-1).mean(0)
    labels = extract_labels(gradient, model, 6, 8, mean_probabilities=mean)
    assert len(set(y.tolist())) < 8 and labels.tolist() == sorted(y.tolist())


def test_weight_rows_prove_classes_present_that_the_bias_misses(photos):
    """With sigmoid features (non-negative), an absent class's weight-gradient row has no
    negative entry; over 20 batches of eight the rows find present classes whose bias gradient
    is positive, and never an absent one."""
    extra = 0
    for seed in range(20):
        model = _lenet(seed)
        x, y = _batch(photos, seed, 8)
        gradient = batch_grad(model, model.initial(), x, y)
        bias = gradient[-6:]
        rows = gradient[-6 - 6 * 768 : -6].view(6, 768)
        by_rows = (bias < 0) | (rows < 0).any(-1)
        present = torch.bincount(y, minlength=6) > 0
        assert not (by_rows & ~present).any()
        extra += int((by_rows & ~(bias < 0)).sum())
    assert extra > 0


def test_distinct_labels_proven_by_the_weight_rows_need_no_counts(photos):
    """Batches of three distinct labels in which a present class has a positive bias gradient:
    the bias alone cannot name the labels; where the rows (non-negative inputs) prove all three
    present, they are the labels."""
    found = 0
    for seed in range(30):
        model = _lenet(seed)
        generator = torch.Generator().manual_seed(seed)
        classes = torch.randperm(6, generator=generator)[:3]
        rows = torch.stack([torch.nonzero(photos.y_train == c).flatten()[seed] for c in classes])
        x, y = photos.x_train[rows], photos.y_train[rows]
        gradient = batch_grad(model, model.initial(), x, y)
        by_rows = extract_labels(gradient, model, 6, 3, nonnegative_inputs=True)
        if extract_labels(gradient, model, 6, 3) is None and by_rows is not None:
            assert by_rows.tolist() == sorted(y.tolist())
            found += 1
    assert found > 0


def test_final_inputs_are_probed_for_their_sign(digits):
    lenet = _lenet(0)
    assert final_inputs_nonnegative(lenet, lenet.initial(), torch.randn(2, *SHAPE))
    logreg = FlatModel(build_model("logreg", digits.shape, 10))
    assert not final_inputs_nonnegative(logreg, logreg.initial(), torch.randn(2, *digits.shape))


def test_counting_rounds_to_the_batch_size_within_the_lower_bounds():
    # estimate B (p̄ − s) = [2.6, 2.6, 2.8]: rounding gives 9 for B = 8; the class whose count
    # exceeds its estimate most gives one back.
    s = torch.tensor([0.0, 0.0, 0.0])
    assert count_labels(s, torch.tensor([2.6, 2.6, 2.8]) / 8, 8).tolist() == [2, 3, 3]
    # n_c ≥ −B s_c: with −B s_0 = 1.2 the estimate 1.3 may not round down to 1 (which the sum
    # to B would then have made [1, 4, 3])
    s = torch.tensor([-0.15, 0.075, 0.075])
    assert count_labels(s, torch.tensor([0.0125, 0.49375, 0.49375]), 8).tolist() == [2, 3, 3]
    # lower bounds beyond B: the gradient contradicts the batch size
    assert count_labels(torch.tensor([-0.75, -0.75, 1.5]), torch.tensor([0.0, 0.0, 1.0]), 8) is None
