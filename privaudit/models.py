"""Registry of the classifiers the seed papers train, built so per-sample gradients work.

Every model maps a float batch [B, C, H, W] (image models) or [B, ...] (tabular models, which
flatten) to logits [B, num_classes]. Attacks and defenses compute per-sample gradients with
`torch.func.vmap(torch.func.grad(...))` over `torch.func.functional_call`, so no model contains
BatchNorm (batch statistics mix the samples of a batch: one sample's gradient would depend on the
others, which breaks per-sample clipping and hence the DP sensitivity argument), dropout, or
data-dependent Python control flow. Parameters keep torch's default initialisation (torchvision's
own for `resnet18`) unless a builder's `init` option says otherwise; the caller seeds torch.

Where a paper leaves an architecture detail open, the builder's docstring states the choice.

Besides the shipped names (`MODELS`), a campaign can name torchvision's classification
architectures without weights, `torchvision:<name>` (`build_torchvision`: BatchNorm replaced by
GroupNorm, which the model's note says), and a factory of its own, `package.module:factory`
(`build_user_model`: a model with BatchNorm is refused, naming the layer, since converting someone's
model would audit another one). A model that changed on the way says how in its note
(`model_note`), which the training row carries.
"""

import functools
import inspect
import json
import math
import typing
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from torch import Tensor, nn

from privaudit.limits import exceeded

RESNET_SMALL_INPUT_MAX_SIDE = 64


def _image_shape(name: str, in_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """Return (channels, height, width), rejecting shapes an image model cannot take."""
    if len(in_shape) != 3:
        raise ValueError(f"model '{name}' needs an image in_shape (C, H, W), got {in_shape}")
    channels, height, width = in_shape
    return channels, height, width


def _flattened_width(name: str, features: nn.Module, in_shape: tuple[int, ...]) -> int:
    """Width of `features`' flattened output, found by a shape-only (meta device) forward pass."""
    try:
        out = features(torch.empty(1, *in_shape, device="meta"))
    except RuntimeError as error:
        raise ValueError(f"in_shape {in_shape} is too small for model '{name}': {error}") from None
    return math.prod(out.shape[1:])


def _conv_classifier(
    name: str, in_shape: tuple[int, ...], features: nn.Sequential, head_widths: tuple[int, ...]
) -> nn.Sequential:
    """`features`, flatten, then linear layers of `head_widths` with ReLU between them."""
    widths = (_flattened_width(name, features, in_shape), *head_widths)
    head: list[nn.Module] = []
    for layer_in, layer_out in zip(widths[:-1], widths[1:]):
        head += [nn.Linear(layer_in, layer_out), nn.ReLU()]
    return nn.Sequential(
        OrderedDict(features=features, flatten=nn.Flatten(), classifier=nn.Sequential(*head[:-1]))
    )


LENET_DLG_INITS = ("torch", "dlg")


def build_lenet_dlg(in_shape: tuple[int, ...], num_classes: int, *, init: str = "torch") -> nn.Module:
    """The LeNet of Deep Leakage from Gradients (Zhu et al. 2019; seed 004 [26], §VII-B).

    Three 5×5 convolutions with 12 channels, strides 2, 2, 1 and padding 2, each followed by a
    sigmoid (DLG needs a twice-differentiable network), then one linear layer: 768 inputs for
    3×32×32. `init="dlg"` applies the DLG code's re-initialisation, uniform(−0.5, 0.5) on every
    parameter; with torch's default one (`"torch"`) DLG matched gradients to a relative error of
    1e-8 at only ~19.5 dB PSNR in our trials (bench/inversion.py --victim-init default).
    """
    if init not in LENET_DLG_INITS:
        raise ValueError(f"lenet_dlg init must be one of {', '.join(LENET_DLG_INITS)}, got {init!r}")
    channels, _, _ = _image_shape("lenet_dlg", in_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 12, kernel_size=5, stride=2, padding=2),
        nn.Sigmoid(),
        nn.Conv2d(12, 12, kernel_size=5, stride=2, padding=2),
        nn.Sigmoid(),
        nn.Conv2d(12, 12, kernel_size=5, stride=1, padding=2),
        nn.Sigmoid(),
    )
    model = _conv_classifier("lenet_dlg", in_shape, features, (num_classes,))
    if init == "dlg":
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.uniform_(-0.5, 0.5)
    return model


def build_dpdl_mnist(in_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """DPDL's MNIST "LeNet" (seed 000 §VI-A): conv 6@5×5, pool, conv 16@5×5, pool, FC.

    The paper gives the kernels (1×5×5 and 6×5×5) and 2×2 max pooling after each convolution,
    but not the second convolution's channels, the FC widths nor the activation. Choices:
    LeNet-5's 16 channels and FC 120 → 84 → classes; padding 2 on the first convolution so
    28×28 MNIST gives LeNet-5's 16×5×5 feature map; ReLU, because the paper's max pooling marks
    the modern LeNet variant (LeNet-5 itself used average subsampling and scaled tanh) and
    nothing in the paper asks for a smooth activation.
    """
    channels, _, _ = _image_shape("dpdl_mnist", in_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 6, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )
    return _conv_classifier("dpdl_mnist", in_shape, features, (120, 84, num_classes))


def build_dpdl_cifar(in_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """DPDL's CIFAR-10 CNN (seed 000 §VI-A): conv 16@3×3, pool, conv 32@3×3, pool, FC.

    The paper gives the kernels (3×3×3 and 16×3×3) and 2×2 max pooling after each convolution,
    but not the second convolution's channels, the FC widths nor the activation. Choices: 32
    channels (doubling, as the first layer's 16 suggests), no padding (none is mentioned), one
    hidden FC of 128, ReLU (as for `dpdl_mnist`).
    """
    channels, _, _ = _image_shape("dpdl_cifar", in_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 16, kernel_size=3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, kernel_size=3),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )
    return _conv_classifier("dpdl_cifar", in_shape, features, (128, num_classes))


def build_wz_mnist(in_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Wang & Zhang's MNIST CNN (seed 003 §5): conv 16, conv 32, max pooling, sigmoid, FC.

    The paper: "2 convolutional layers, and each layer has 16 and 32 filters, respectively,
    followed by a max pooling layer. The Sigmoid function is used as the activation function,
    and hence Assumption 1 is satisfied [smoothness]. Then, the output is flattened and sent to
    a fully connected layer". Kernel size, padding and whether one or two pools are used are
    not given. Choices: 5×5 kernels with padding 2 and a 2×2 max pool after each convolution
    (reading "each layer ... followed by a max pooling layer"), which gives 32×7×7 features on
    MNIST. Sigmoid is monotone, so it commutes with max pooling: the order of the two does not
    matter.
    """
    channels, _, _ = _image_shape("wz_mnist", in_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 16, kernel_size=5, padding=2),
        nn.Sigmoid(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, kernel_size=5, padding=2),
        nn.Sigmoid(),
        nn.MaxPool2d(2),
    )
    return _conv_classifier("wz_mnist", in_shape, features, (num_classes,))


def build_wb_mnist(in_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Wang & Başar's MNIST CNN (seed 004 §VII-B): conv32, conv32, conv64, conv64, dense 512.

    The paper names the layers and states d = 1,676,266 parameters, but no kernel, padding,
    pooling or activation. 3×3 'same' convolutions with a 2×2 max pool after each pair give
    exactly that count on 1×28×28 with 10 classes (64×7×7 → 512 → 10); ReLU, as the paper
    names no activation. No dropout: it has no parameters and the paper does not mention it.
    """
    channels, _, _ = _image_shape("wb_mnist", in_shape)
    features = nn.Sequential(
        nn.Conv2d(channels, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 64, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )
    return _conv_classifier("wb_mnist", in_shape, features, (512, num_classes))


class LogisticRegression(nn.Module):
    """Multinomial logistic regression with seed 002's optional non-convex regulariser.

    Seed 002 §VI trains f_i(x) = (1/m_i) Σ_h log(1 + exp(−b_h a_hᵀx)) + ε Σ_ℓ [x]_ℓ² / (1 + [x]_ℓ²)
    (binary labels, no intercept). Here the classifier is multinomial with a bias, and the
    regulariser's weight ε is `nonconvex_reg` (named apart from the privacy ε); it applies to
    every entry of every parameter, the whole decision variable x.
    """

    def __init__(self, in_features: int, num_classes: int, nonconvex_reg: float) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        self.nonconvex_reg = nonconvex_reg

    def forward(self, inputs: Tensor) -> Tensor:
        return self.linear(inputs.flatten(start_dim=1))

    def penalty(self, params: dict[str, Tensor]) -> Tensor:
        """Seed 002 §VI's ε Σ_ℓ [x]_ℓ² / (1 + [x]_ℓ²) over every entry of `params`.

        f_i holds it once: add it once to the mean loss (or, equally, to every sample's loss).
        It reads the given dict, not the module's own parameters, so that it differentiates
        under `torch.func.functional_call` / `grad`.
        """
        if self.nonconvex_reg == 0:  # the common case: no regulariser, and no work in every gradient
            return torch.zeros(())
        per_tensor = [(value.square() / (1 + value.square())).sum() for value in params.values()]
        return self.nonconvex_reg * torch.stack(per_tensor).sum()

    def penalty_gradients(self, params: dict[str, Tensor]) -> dict[str, Tensor]:
        """The penalty's gradient, entry by entry: ε · 2v / (1 + v²)²."""
        return {name: self.nonconvex_reg * 2 * value / (1 + value.square()).square() for name, value in params.items()}

    def sample_gradients(self, params: dict[str, Tensor], inputs: Tensor, targets: Tensor) -> dict[str, Tensor]:
        """Each sample's gradient in closed form (`FlatModel.sample_gradients`), one point per sample:
        the cross-entropy's (softmax(Wx + b) − y) ⊗ [x, 1], plus the penalty's gradient."""
        weight, bias = params["linear.weight"], params["linear.bias"]
        x = inputs.flatten(start_dim=1).to(weight.dtype)
        logits = torch.einsum("mcf,mf->mc", weight, x) + bias
        expected = (targets.to(logits.dtype) if targets.shape == logits.shape
                    else nn.functional.one_hot(targets.long(), logits.shape[-1]).to(logits.dtype))
        residual = torch.softmax(logits, dim=-1) - expected
        grads = {"linear.weight": residual[:, :, None] * x[:, None, :], "linear.bias": residual}
        return self._with_penalty(grads, params)

    def clipped_gradient_sums(self, params: dict[str, Tensor], inputs: Tensor, targets: Tensor, mask: Tensor,
                              bound: float) -> dict[str, Tensor]:
        """DP-SGD's clipped sum Σ_k mask_k · clip_C(g_k) of each agent's samples in closed form
        (`FlatModel.clipped_sums`), one point per agent (`params` [A, *shape], inputs [A, K, ...] or
        [A / w, K, ...] shared by w copies of the agents), without forming a per-sample gradient:
        g_k = (r_k ⊗ x_k, r_k) + p with r_k = softmax − y and p the penalty's gradient, so
        ‖g_k‖² = ‖r_k‖²(‖x_k‖² + 1) + 2(r_kᵀ P_W x_k + r_k·p_b) + ‖p‖² and
        Σ_k s_k g_k = (Σ_k s_k r_k ⊗ x_k, Σ_k s_k r_k) + (Σ_k s_k) p. Shared inputs make the
        products [copies · classes, F] × [F, K] per agent of one copy: large, fast ones."""
        x = inputs.flatten(start_dim=2).to(params["linear.weight"].dtype)
        agents, (n, slots) = len(params["linear.weight"]), x.shape[:2]
        copies = agents // n
        weight = params["linear.weight"].reshape(copies, n, *params["linear.weight"].shape[1:])
        bias = params["linear.bias"].reshape(copies, n, -1)
        # classes on axis 2 ([w, n, C, K]): reductions over a short last axis are slow on CPUs
        logits = torch.einsum("wncf,nkf->wnck", weight, x) + bias[..., None]
        expected = (targets.to(logits.dtype) if targets.dim() == 3
                    else nn.functional.one_hot(targets.long(), logits.shape[2]).to(logits.dtype)).transpose(1, 2)
        residual = torch.softmax(logits, dim=2) - expected
        squared = residual.square().sum(2) * (x.square().sum(-1) + 1)
        penalty = None
        if self.nonconvex_reg != 0:
            penalty = {name: value.reshape(copies, n, *value.shape[1:])
                       for name, value in self.penalty_gradients(params).items()}
            pw, pb = penalty["linear.weight"], penalty["linear.bias"]
            cross = torch.einsum("wnck,wncf,nkf->wnk", residual, pw, x) + torch.einsum("wnck,wnc->wnk", residual, pb)
            squared = squared + 2 * cross + (pw.square().sum((2, 3)) + pb.square().sum(2))[..., None]
        scale = mask.reshape(copies, n, slots).to(x.dtype) * torch.clamp(
            bound / (squared.clamp(min=0).sqrt() + 1e-12), max=1.0)
        weighted = residual * scale[:, :, None, :]
        sums = {"linear.weight": torch.einsum("wnck,nkf->wncf", weighted, x), "linear.bias": weighted.sum(3)}
        if penalty is not None:
            total = scale.sum(2)
            sums = {name: value + total.reshape(copies, n, *[1] * (value.dim() - 2)) * penalty[name]
                    for name, value in sums.items()}
        return sums

    def _with_penalty(self, grads: dict[str, Tensor], params: dict[str, Tensor]) -> dict[str, Tensor]:
        if self.nonconvex_reg == 0:
            return grads
        penalty = self.penalty_gradients(params)
        return {name: value + penalty[name] for name, value in grads.items()}


class BinaryLogisticRegression(LogisticRegression):
    """Seed 002 §VI's classifier exactly: one score aᵀx with no intercept, labels b ∈ {−1, +1}
    stored as {0, 1}, loss log(1 + exp(−b aᵀx)), plus the same non-convex regulariser."""

    def __init__(self, in_features: int, nonconvex_reg: float) -> None:
        nn.Module.__init__(self)
        self.linear = nn.Linear(in_features, 1, bias=False)
        self.nonconvex_reg = nonconvex_reg

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        sign = 2.0 * target.to(output.dtype) - 1.0
        return nn.functional.softplus(-sign * output.squeeze(-1)).mean()

    clipped_gradient_sums = None
    """No closed-form clipped sums for the single-score form: its per-sample gradients are formed."""

    def predict(self, output: Tensor) -> Tensor:
        return (output.squeeze(-1) > 0).long()

    def sample_gradients(self, params: dict[str, Tensor], inputs: Tensor, targets: Tensor) -> dict[str, Tensor]:
        """Each sample's gradient of log(1 + exp(−b aᵀx)): −b σ(−b aᵀx) x, plus the penalty's."""
        weight = params["linear.weight"]
        x = inputs.flatten(start_dim=1).to(weight.dtype)
        sign = 2.0 * targets.to(weight.dtype) - 1.0
        score = torch.einsum("mf,mf->m", weight[:, 0], x)
        factor = -sign * torch.sigmoid(-sign * score)
        return self._with_penalty({"linear.weight": (factor[:, None] * x)[:, None, :]}, params)


def build_logreg(
    in_shape: tuple[int, ...], num_classes: int, *, nonconvex_reg: float = 0.0, binary: bool = False
) -> nn.Module:
    """Logistic regression on the flattened input: multinomial (`LogisticRegression`), or with
    `binary = true` seed 002's single-score form (`BinaryLogisticRegression`, 2 classes only)."""
    if nonconvex_reg < 0:
        raise ValueError(f"nonconvex_reg must be >= 0, got {nonconvex_reg}")
    if binary:
        if num_classes != 2:
            raise ValueError(f"logreg with binary = true needs 2 classes, got {num_classes}")
        return BinaryLogisticRegression(math.prod(in_shape), float(nonconvex_reg))
    return LogisticRegression(math.prod(in_shape), num_classes, float(nonconvex_reg))


class LinearEstimator(nn.Module):
    """The decision variable of the papers' distributed estimation problems: θ ∈ R^d, with
    measurements y = U θ (+ noise) for a regressor matrix U [s, d] per sample.

    Loss `loss_scale · ‖y − Uθ‖²` averaged over the batch. Seed 003 §V states the sampled gradient
    u uᵀx − d u, the gradient of ½(d − uᵀx)² (loss_scale ½); seed 004 §VII-A's
    f_i(θ) = (1/n_i) Σ_j ‖z_ij − M_i θ‖² has loss_scale 1. `init` sets θ's starting value (seed
    003: [3, 1, 1, 3, 3, 1]; seed 004: 0); without it θ starts at 0.
    """

    task = "regression"

    def __init__(self, dim: int, loss_scale: float, init: tuple[float, ...] | None) -> None:
        super().__init__()
        start = torch.zeros(dim) if init is None else torch.tensor(init, dtype=torch.float32)
        self.theta = nn.Parameter(start)
        self.loss_scale = loss_scale

    def forward(self, inputs: Tensor) -> Tensor:
        return inputs @ self.theta

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return self.loss_scale * (output - target).square().sum(-1).mean()


def build_linear_estimator(
    in_shape: tuple[int, ...], num_classes: int, *, loss_scale: float = 0.5,
    init: tuple[float, ...] | None = None,
) -> nn.Module:
    """A `LinearEstimator` for regressor matrices of shape in_shape = (s, d); `num_classes` is
    the measurement size s and must agree with in_shape."""
    if len(in_shape) != 2 or in_shape[0] != num_classes:
        raise ValueError(f"linear_estimator needs inputs (s, d) with s = {num_classes} outputs, got {in_shape}")
    if init is not None and len(init) != in_shape[1]:
        raise ValueError(f"linear_estimator init has {len(init)} entries, θ has {in_shape[1]}")
    if loss_scale <= 0:
        raise ValueError(f"loss_scale must be > 0, got {loss_scale}")
    return LinearEstimator(in_shape[1], float(loss_scale), None if init is None else tuple(init))


MLP_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid}
"""The hidden activations `build_mlp` offers. Sigmoid is DLG's choice (Zhu et al. 2019): its
gradient is smooth in the input, where ReLU's jumps whenever a unit's pre-activation changes sign,
which is what separates an attack that fits records by Gauss–Newton from one that stalls at the
first flipped unit (`privaudit.attacks.coalition.record_fit`)."""


def build_mlp(
    in_shape: tuple[int, ...], num_classes: int, *, hidden: tuple[int, ...] = (128,), activation: str = "relu"
) -> nn.Module:
    """Fully connected network on the flattened input, with `hidden` layer widths and `activation`
    (one of `MLP_ACTIVATIONS`) between layers, at most `PRIVAUDIT_MAX_LAYERS` of them (1,000).

    The layers are counted before any is built: a layer's cost is not in its parameters (10⁵
    layers of width 1 are few parameters, but each is a module built, checked and run every
    round)."""
    if not isinstance(hidden, (list, tuple)) or not all(isinstance(w, int) and not isinstance(w, bool) for w in hidden):
        raise ValueError(f"hidden must be a list of layer widths (integers, e.g. [128]), got {hidden!r}")
    too_many = exceeded("layers", len(hidden))
    if too_many:
        raise ValueError(f"hidden: {too_many}")
    hidden = tuple(hidden)
    if any(width < 1 for width in hidden):
        raise ValueError(f"hidden widths must be >= 1, got {hidden}")
    if activation not in MLP_ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(MLP_ACTIVATIONS)}, got '{activation}'")
    widths = (math.prod(in_shape), *hidden, num_classes)
    layers: list[nn.Module] = [nn.Flatten()]
    for layer_in, layer_out in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(layer_in, layer_out), MLP_ACTIVATIONS[activation]()]
    return nn.Sequential(*layers[:-1])


def _group_norm(channels: int) -> nn.GroupNorm:
    """GroupNorm with 32 groups (Wu & He 2018); every ResNet-18 width is a multiple of 32."""
    return nn.GroupNorm(32, channels)


def build_resnet18(in_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """torchvision's ResNet-18 with GroupNorm instead of BatchNorm and a stem fitted to in_shape.

    BatchNorm normalises with statistics of the whole batch, so a sample's output and gradient
    depend on the other samples: per-sample gradients, their clipping and the DP sensitivity no
    longer mean anything. GroupNorm normalises each sample on its own. For inputs of at most
    64 px per side the stem is a 3×3 stride-1 convolution without max pooling (the usual CIFAR
    adaptation: the ImageNet 7×7 stride-2 stem and pool would shrink 32×32 to 8×8 at once);
    larger inputs keep the ImageNet stem with in_shape's channel count.
    """
    from torchvision.models import resnet18  # here, not at import: torchvision takes seconds to load

    channels, height, width = _image_shape("resnet18", in_shape)
    model = resnet18(num_classes=num_classes, norm_layer=_group_norm)
    if max(height, width) <= RESNET_SMALL_INPUT_MAX_SIDE:
        model.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    else:
        model.conv1 = nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.model_note = "GroupNorm (32 groups) in place of torchvision's BatchNorm: per-sample gradients need it"
    return model


MODELS: dict[str, Callable[..., nn.Module]] = {
    "lenet_dlg": build_lenet_dlg,
    "dpdl_mnist": build_dpdl_mnist,
    "dpdl_cifar": build_dpdl_cifar,
    "wz_mnist": build_wz_mnist,
    "wb_mnist": build_wb_mnist,
    "logreg": build_logreg,
    "linear_estimator": build_linear_estimator,
    "mlp": build_mlp,
    "resnet18": build_resnet18,
}


def model_task(module: nn.Module) -> str:
    """"regression" for models with a regression loss, else "classification"."""
    return getattr(module, "task", "classification")


def model_note(module: nn.Module) -> str | None:
    """How the model differs from what its name says when it was changed on the way (BatchNorm
    replaced by GroupNorm, a gray image repeated on three channels), in words; None when not. The
    training row carries it, so no result hides the change."""
    note = getattr(module, "model_note", None)
    return note if isinstance(note, str) and note else None


def error_line(error: BaseException) -> str:
    """`Type: message` of an error raised by a model's code, its message cut to its first line (torch's
    are often paragraphs), so the error that quotes it stays one line."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _hints(builder: Callable[..., Any]) -> dict[str, Any]:
    """The annotations of a builder's parameters (a class's: its `__init__`'s), as types; none
    when they cannot be evaluated (a user's factory whose annotations name what its module never
    imported): its options are then validated as plain TOML values."""
    try:
        return typing.get_type_hints(builder.__init__ if isinstance(builder, type) else builder)
    except Exception:  # noqa: BLE001 - any failure of a user's annotations leaves the options unchecked by type
        return {}


@functools.cache
def _options(builder: Callable[..., nn.Module]) -> type[BaseModel]:
    """The options of a model builder as a strict model, from its signature's types: a campaign's
    `model_options` are numbers one way, as every other field (no `true` for a float). The first
    two positional parameters are the input shape and the classes; every other named parameter is
    an option (a shipped builder's are keyword-only), and a builder taking `**kwargs` takes any
    other option unchecked."""
    hints = _hints(builder)
    parameters = list(inspect.signature(builder).parameters.values())
    positional = [p.name for p in parameters
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)][:2]
    fields = {p.name: (hints.get(p.name, Any), ... if p.default is inspect.Parameter.empty else p.default)
              for p in parameters if p.name not in positional
              and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    extra = "allow" if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters) else "forbid"
    name = getattr(builder, "__name__", type(builder).__name__)
    return create_model(f"{name}_options", __config__=ConfigDict(strict=True, extra=extra,
                                                                arbitrary_types_allowed=True), **fields)


def _checked_options(builder: Callable[..., nn.Module], name: str, options: dict[str, Any]) -> dict[str, Any]:
    """`options` validated against `builder`'s signature (`_options`); ValueError naming the
    model and the first bad option."""
    accepted = _options(builder)
    if accepted.model_config.get("extra") == "forbid":
        unknown = sorted(set(options) - set(accepted.model_fields))
        if unknown:
            raise ValueError(
                f"unknown option(s) {', '.join(unknown)} for model '{name}' "
                f"(accepted: {', '.join(accepted.model_fields) or 'none'})"
            )
    try:
        checked = accepted.model_validate_json(json.dumps(options), strict=True)
    except (ValidationError, TypeError) as error:
        first = error.errors()[0] if isinstance(error, ValidationError) else {"loc": (), "msg": str(error)}
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"model '{name}' option {where}: {first['msg']}") from None
    return {key: getattr(checked, key) for key in options}


def _checked_shape(in_shape: tuple[int, ...], num_classes: int) -> tuple[int, ...]:
    in_shape = tuple(in_shape)
    if not in_shape or any(size < 1 for size in in_shape):
        raise ValueError(f"in_shape must be non-empty positive sizes, got {in_shape}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    return in_shape


TORCHVISION = "torchvision:"
"""How a campaign names one of torchvision's classification architectures: `torchvision:resnet34`."""


def build_model(name: str, in_shape: tuple[int, ...], num_classes: int, **options) -> nn.Module:
    """Build model `name` (a shipped name, or `torchvision:<architecture>`: `build_torchvision`)
    for inputs of shape `in_shape` (no batch dimension)."""
    if name.startswith(TORCHVISION):
        return build_torchvision(name.removeprefix(TORCHVISION), in_shape, num_classes, **options)
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}' (choose from {', '.join(MODELS)}; or torchvision:<architecture>, "
                         "or an import path 'package.module:factory')")
    builder = MODELS[name]
    options = _checked_options(builder, name, options)
    return builder(_checked_shape(in_shape, num_classes), num_classes, **options)


SAMPLE_MIXING: tuple[type[nn.Module], ...] = (nn.modules.batchnorm._BatchNorm,)
"""Layers whose output for one sample depends on the other samples of its batch: BatchNorm (all
of its forms: 1d, 2d, 3d, lazy, synchronised) normalises with the batch's statistics. Under them
a sample has no gradient of its own, so per-sample clipping bounds nothing and the DP sensitivity
argument fails; and privaudit evaluates models in eval mode (`FlatModel`), where BatchNorm would
silently normalise by fixed statistics that never train."""


def sample_mixing_layers(module: nn.Module) -> list[tuple[str, str]]:
    """(name, type) of each layer of `module` that mixes the samples of a batch (`SAMPLE_MIXING`)."""
    return [(name, type(layer).__name__) for name, layer in module.named_modules() if isinstance(layer, SAMPLE_MIXING)]


GROUP_NORM_MAX_GROUPS = 32
"""Groups of the GroupNorm that replaces a BatchNorm: 32, Wu & He's (2018) default, or the
largest power of two dividing the channels when 32 does not (gcd(channels, 32))."""


def _group_norm_for(layer: nn.modules.batchnorm._BatchNorm) -> nn.GroupNorm:
    """A GroupNorm over `layer`'s channels with its ε, its affinity and its initial scale and shift."""
    channels = layer.num_features
    norm = nn.GroupNorm(math.gcd(channels, GROUP_NORM_MAX_GROUPS), channels, eps=layer.eps, affine=layer.affine)
    if layer.affine and not isinstance(layer.weight, nn.parameter.UninitializedParameter):
        with torch.no_grad():
            norm.weight.copy_(layer.weight)
            norm.bias.copy_(layer.bias)
    return norm


def to_group_norm(module: nn.Module) -> int:
    """Replace, in place, every BatchNorm of `module` by a GroupNorm over the same channels
    (`_group_norm_for`); the number replaced. GroupNorm normalises each sample on its own (as the
    shipped `resnet18`), so per-sample gradients exist."""
    found = [name for name, layer in module.named_modules() if isinstance(layer, SAMPLE_MIXING)]
    for name in found:
        parent, _, leaf = name.rpartition(".")
        owner = module.get_submodule(parent)
        setattr(owner, leaf, _group_norm_for(getattr(owner, leaf)))
    return len(found)


class _RepeatedChannel(nn.Module):
    """A three-channel network fed a one-channel image repeated on its three channels (no
    parameter is added: the network is torchvision's, and gray data reach it unchanged)."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, inputs: Tensor) -> Tensor:
        return self.network(inputs.expand(-1, 3, -1, -1))


@functools.cache
def torchvision_architectures() -> tuple[str, ...]:
    """torchvision's classification architectures (`torchvision.models.list_models` of the
    classification package: no detection, segmentation, video or optical-flow model)."""
    from torchvision import models  # here, not at import: torchvision takes seconds to load

    return tuple(models.list_models(module=models))


TORCHVISION_SET_BY_PRIVAUDIT = ("weights", "progress", "num_classes", "norm_layer")
"""Arguments of torchvision's builders that privaudit sets: no pretrained weights (an audit trains
from scratch, and nothing is downloaded), the data's classes, and its own normalisation."""


def check_torchvision(name: str) -> str:
    """`name` (`torchvision:<architecture>`) when torchvision has that classification
    architecture; ValueError listing them otherwise."""
    architecture = name.removeprefix(TORCHVISION)
    if architecture not in torchvision_architectures():
        raise ValueError(f"unknown torchvision architecture '{architecture}' (choose from "
                         f"{', '.join(torchvision_architectures())})")
    return name


def build_torchvision(architecture: str, in_shape: tuple[int, ...], num_classes: int, **options: Any) -> nn.Module:
    """torchvision's classification architecture `architecture` without weights, for `num_classes`
    classes, with every BatchNorm replaced by GroupNorm (`to_group_norm`) and a one-channel image
    repeated on three channels; `model_note` says what changed. The architecture is otherwise
    torchvision's, ImageNet stem included (a ResNet still reaches a 1×1 map at 32×32; the shipped
    `resnet18` has the CIFAR stem instead). `options` go to torchvision's builder (`width_mult`,
    `image_size`, `dropout`, ...), except those privaudit sets (`TORCHVISION_SET_BY_PRIVAUDIT`)."""
    from torchvision import models

    name = check_torchvision(TORCHVISION + architecture)
    set_here = sorted(set(options) & set(TORCHVISION_SET_BY_PRIVAUDIT))
    if set_here:
        raise ValueError(f"model '{name}' option {set_here[0]}: privaudit sets it (no pretrained weights, the "
                         "data's classes, GroupNorm)")
    channels, _, _ = _image_shape(name, _checked_shape(in_shape, num_classes))
    if channels not in (1, 3):
        raise ValueError(f"model '{name}' takes 3-channel images (a 1-channel one is repeated on 3), the data have "
                         f"{channels} channels")
    try:
        network = models.get_model(architecture, weights=None, num_classes=num_classes, **options)
    except (TypeError, ValueError, AssertionError) as error:
        raise ValueError(f"model '{name}': {error_line(error)}") from None
    notes = [f"torchvision's {architecture} without pretrained weights"]
    replaced = to_group_norm(network)
    if replaced:
        notes.append(f"its {replaced} BatchNorm layers replaced by GroupNorm (gcd(channels, {GROUP_NORM_MAX_GROUPS}) "
                     "groups): batch statistics mix a batch's samples, and per-sample gradients need a layer that "
                     "does not")
    if channels == 1:
        network = _RepeatedChannel(network)
        notes.append("its 1-channel input repeated on 3 channels")
    network.model_note = "; ".join(notes)
    return _checked_output(network, name, in_shape, num_classes)


def build_user_model(factory: Callable[..., Any], name: str, in_shape: tuple[int, ...], num_classes: int,
                     **options: Any) -> nn.Module:
    """The module a user's factory `name` (`package.module:factory`) builds:
    `factory(input_shape, num_classes, **options)`, its options validated against its signature
    as a shipped builder's (`_checked_options`). ValueError, one line, naming the factory when it
    raises, returns no `nn.Module`, has no parameter, holds a layer that mixes the samples of a
    batch (`sample_mixing_layers`: refused, not converted, since the model audited must be the
    user's), or maps a batch to outputs of the wrong shape (`_checked_output`)."""
    in_shape = _checked_shape(in_shape, num_classes)
    if not callable(factory):
        raise ValueError(f"model '{name}' is a {type(factory).__name__}, not a factory (a function or class called "
                         "as factory(input_shape, num_classes, **model_options))")
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None  # no signature to read (a builtin): the call below says what is wrong
    if signature is not None:
        options = _checked_options(factory, name, options)
        try:
            signature.bind(in_shape, num_classes, **options)
        except TypeError as error:
            raise ValueError(f"model factory '{name}' cannot be called as factory(input_shape, num_classes, "
                             f"**model_options): {error_line(error)}") from None
    try:
        module = factory(in_shape, num_classes, **options)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure of user code is reported on one line
        raise ValueError(f"model factory '{name}' raised {error_line(error)}") from None
    if not isinstance(module, nn.Module):
        raise ValueError(f"model factory '{name}' returned a {type(module).__name__}, not a torch.nn.Module")
    if not any(True for _ in module.parameters()):
        raise ValueError(f"model factory '{name}' returned a module without parameters: there is nothing to train")
    mixing = sample_mixing_layers(module)
    if mixing:
        layer, kind = mixing[0]
        raise ValueError(f"model '{name}': layer '{layer}' is {kind}: it normalises with the whole batch's "
                         "statistics, and per-sample gradients (clipping, the DP sensitivity) need a layer that "
                         "does not mix samples; use nn.GroupNorm or nn.LayerNorm, or model = 'torchvision:<name>', "
                         f"whose BatchNorm privaudit replaces by GroupNorm ({len(mixing)} such layer(s))")
    return _checked_output(module, name, in_shape, num_classes)


CHECK_BATCH = 2
"""Samples of the batch a built model's forward pass is checked on: more than one, so a model
that drops or mixes the batch axis is seen."""


def _checked_output(module: nn.Module, name: str, in_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """`module` in eval mode (as `FlatModel` runs it) once a batch of zeros of `in_shape` passes
    through it to one output per sample, `num_classes` logits for a classifier; ValueError naming
    the model otherwise (an input too small for its pooling, a head of the wrong width). On the
    meta device nothing is computed: only shapes."""
    module.eval()
    batch = torch.zeros(CHECK_BATCH, *in_shape)
    try:
        with torch.no_grad():
            output = module(batch)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the model may be a user's: one line
        raise ValueError(f"model '{name}': its forward pass on a batch of shape {list(batch.shape)} raised "
                         f"{error_line(error)}") from None
    wanted = [CHECK_BATCH, num_classes]
    if not isinstance(output, Tensor):
        raise ValueError(f"model '{name}' returns a {type(output).__name__}, not a tensor of logits {wanted}")
    if model_task(module) == "classification" and list(output.shape) != wanted:
        raise ValueError(f"model '{name}' maps a batch of shape {list(batch.shape)} to {list(output.shape)}; a "
                         f"classifier of {num_classes} classes gives logits {wanted}")
    if model_task(module) != "classification" and (output.dim() == 0 or output.shape[0] != CHECK_BATCH):
        raise ValueError(f"model '{name}' maps a batch of shape {list(batch.shape)} to {list(output.shape)}, not one "
                         "output per sample")
    return module
