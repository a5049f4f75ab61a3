"""privaudit.models: shapes, the papers' sizes, the registry, the penalty, per-sample gradients."""

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from privaudit.models import MODELS, build_model

MNIST = (1, 28, 28)
CIFAR = (3, 32, 32)
DIGITS = (1, 8, 8)
TABULAR = (5,)

SHAPE_CASES = [
    ("lenet_dlg", CIFAR, {}),
    ("lenet_dlg", MNIST, {}),
    ("lenet_dlg", DIGITS, {}),
    ("dpdl_mnist", MNIST, {}),
    ("dpdl_cifar", CIFAR, {}),
    ("wz_mnist", MNIST, {}),
    ("wz_mnist", DIGITS, {}),
    ("wb_mnist", MNIST, {}),
    ("wb_mnist", DIGITS, {}),
    ("logreg", TABULAR, {}),
    ("logreg", MNIST, {"nonconvex_reg": 0.1}),
    ("mlp", TABULAR, {}),
    ("mlp", DIGITS, {"hidden": (16, 8)}),
    ("resnet18", CIFAR, {}),
    ("resnet18", MNIST, {}),
]

# One input shape per model for the per-sample gradient check, small enough to stay fast.
GRAD_CASES = {
    "lenet_dlg": CIFAR,
    "dpdl_mnist": MNIST,
    "dpdl_cifar": CIFAR,
    "wz_mnist": MNIST,
    "wb_mnist": MNIST,
    "logreg": TABULAR,
    "mlp": TABULAR,
    "resnet18": CIFAR,
}


@pytest.fixture(autouse=True)
def seeded_torch():
    torch.manual_seed(0)


@pytest.mark.parametrize(("name", "in_shape", "options"), SHAPE_CASES)
def test_output_is_one_logit_row_per_sample(name, in_shape, options):
    model = build_model(name, in_shape, 10, **options)
    logits = model(torch.randn(3, *in_shape))
    assert logits.shape == (3, 10)


REGRESSION_MODELS = {"linear_estimator"}


def test_every_registered_model_has_shape_and_gradient_cases():
    classifiers = set(MODELS) - REGRESSION_MODELS
    assert {name for name, _, _ in SHAPE_CASES} == classifiers == set(GRAD_CASES)


def test_linear_estimator_predicts_u_theta_and_scales_its_squared_error():
    model = build_model("linear_estimator", (1, 3), 1, init=(3.0, 1.0, 1.0), loss_scale=0.5)
    u = torch.tensor([[[1.0, 2.0, 0.0]], [[0.0, 0.0, 1.0]]])
    output = model(u)
    assert torch.equal(output, torch.tensor([[5.0], [1.0]]))
    target = torch.tensor([[4.0], [3.0]])
    assert float(model.loss(output.detach(), target)) == pytest.approx(0.5 * (1.0 + 4.0) / 2)
    params = dict(model.named_parameters())
    gradient = grad(lambda p: model.loss(functional_call(model, p, (u[:1],)), target[:1]))(params)["theta"]
    assert torch.allclose(gradient, u[0, 0] * (5.0 - 4.0))  # seed 003's u uᵀx − d u


def test_linear_estimator_checks_its_shapes():
    with pytest.raises(ValueError, match="needs inputs"):
        build_model("linear_estimator", (3, 2), 1)
    with pytest.raises(ValueError, match="init has 3 entries"):
        build_model("linear_estimator", (3, 2), 3, init=(1.0, 2.0, 3.0))


def test_binary_logreg_is_seed_002_loss_without_intercept():
    model = build_model("logreg", (2,), 2, binary=True)
    assert [name for name, _ in model.named_parameters()] == ["linear.weight"]
    with torch.no_grad():
        model.linear.weight.copy_(torch.tensor([[1.0, -1.0]]))
    a = torch.tensor([[2.0, 0.0], [0.0, 3.0]])
    b = torch.tensor([1, 1])
    expected = (torch.log1p(torch.exp(torch.tensor(-2.0))) + torch.log1p(torch.exp(torch.tensor(3.0)))) / 2
    assert float(model.loss(model(a).detach(), b)) == pytest.approx(float(expected))
    assert model.predict(model(a)).tolist() == [1, 0]
    with pytest.raises(ValueError, match="needs 2 classes"):
        build_model("logreg", (2,), 3, binary=True)


def test_wb_mnist_has_the_parameter_count_stated_in_seed_004():
    model = build_model("wb_mnist", MNIST, 10)
    assert sum(parameter.numel() for parameter in model.parameters()) == 1_676_266


@pytest.mark.parametrize(
    ("name", "in_shape", "features_width"),
    [
        ("lenet_dlg", CIFAR, 768),  # DLG's LeNet: Linear(768, classes) on 32x32
        ("dpdl_mnist", MNIST, 16 * 5 * 5),  # LeNet-5's feature map
        ("dpdl_cifar", CIFAR, 32 * 6 * 6),
        ("wz_mnist", MNIST, 32 * 7 * 7),
        ("wb_mnist", MNIST, 64 * 7 * 7),
    ],
)
def test_classifier_input_width_follows_the_documented_choice(name, in_shape, features_width):
    model = build_model(name, in_shape, 10)
    first_linear = next(m for m in model.modules() if isinstance(m, nn.Linear))
    assert first_linear.in_features == features_width


def test_unknown_model_names_the_choices():
    expected = r"unknown model 'x' \(choose from lenet_dlg, .*resnet18; or torchvision:<architecture>, or an import path"
    with pytest.raises(ValueError, match=expected):
        build_model("x", MNIST, 10)


@pytest.mark.parametrize(("name", "in_shape"), [("mlp", TABULAR), ("wb_mnist", MNIST)])
def test_unknown_option_is_named(name, in_shape):
    with pytest.raises(ValueError, match="unknown option.*width"):
        build_model(name, in_shape, 10, width=3)


@pytest.mark.parametrize(
    ("name", "in_shape"), [("dpdl_mnist", DIGITS), ("dpdl_cifar", DIGITS), ("lenet_dlg", TABULAR)]
)
def test_image_model_rejects_an_input_shape_it_cannot_take(name, in_shape):
    with pytest.raises(ValueError, match=name):
        build_model(name, in_shape, 10)


def test_mlp_uses_the_hidden_widths():
    model = build_model("mlp", TABULAR, 3, hidden=(16, 8))
    widths = [(m.in_features, m.out_features) for m in model.modules() if isinstance(m, nn.Linear)]
    assert widths == [(5, 16), (16, 8), (8, 3)]


@pytest.mark.parametrize(
    ("in_shape", "kernel", "stride", "pools"),
    [(CIFAR, 3, 1, False), (MNIST, 3, 1, False), ((3, 96, 96), 7, 2, True)],
)
def test_resnet18_stem_fits_the_input(in_shape, kernel, stride, pools):
    model = build_model("resnet18", in_shape, 10)
    assert model.conv1.in_channels == in_shape[0]
    assert model.conv1.kernel_size == (kernel, kernel)
    assert model.conv1.stride == (stride, stride)
    assert isinstance(model.maxpool, nn.MaxPool2d) == pools


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_no_model_normalises_with_batch_statistics(name):
    model = build_model(name, GRAD_CASES[name], 10)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def test_logreg_penalty_is_the_seed_002_regulariser():
    model = build_model("logreg", (2,), 2, nonconvex_reg=0.5)
    params = {
        "linear.weight": torch.tensor([[1.0, 2.0], [0.0, -1.0]]),
        "linear.bias": torch.tensor([3.0, 0.0]),
    }
    # 0.5 * (1/2 + 4/5 + 0 + 1/2 + 9/10 + 0)
    torch.testing.assert_close(model.penalty(params), torch.tensor(1.35))


def test_logreg_penalty_is_zero_without_regulariser():
    model = build_model("logreg", TABULAR, 3)
    assert model.penalty(dict(model.named_parameters())).item() == 0.0


def test_logreg_penalty_differentiates_through_the_given_params():
    model = build_model("logreg", TABULAR, 3, nonconvex_reg=0.5)
    params = {name: torch.randn_like(value) for name, value in model.named_parameters()}
    gradients = grad(model.penalty)(params)
    for name, value in params.items():
        torch.testing.assert_close(gradients[name], 0.5 * 2 * value / (1 + value.square()).square())


@pytest.mark.parametrize("name", sorted(set(GRAD_CASES) - {"logreg"}))
def test_models_without_regulariser_have_no_penalty(name):
    assert not hasattr(build_model(name, GRAD_CASES[name], 10), "penalty")


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_per_sample_gradients_match_single_sample_gradients(name):
    in_shape = GRAD_CASES[name]
    options = {"nonconvex_reg": 0.1} if name == "logreg" else {}
    model = build_model(name, in_shape, 10, **options)
    params = {key: value.detach() for key, value in model.named_parameters()}
    inputs, labels = torch.randn(2, *in_shape), torch.tensor([3, 7])

    def sample_loss(params, sample, label):
        logits = functional_call(model, params, (sample.unsqueeze(0),))
        loss = nn.functional.cross_entropy(logits, label.unsqueeze(0))
        return loss + model.penalty(params) if name == "logreg" else loss

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, inputs, labels)
    alone = grad(sample_loss)(params, inputs[1], labels[1])
    for key, value in params.items():
        assert per_sample[key].shape == (2, *value.shape)
        assert torch.isfinite(per_sample[key]).all()
        torch.testing.assert_close(per_sample[key][1], alone[key], rtol=1e-4, atol=1e-6)
