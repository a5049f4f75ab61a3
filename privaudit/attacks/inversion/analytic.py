"""Closed-form inversion through a fully connected first layer with a bias (Phong et al. 2017,
"Privacy-preserving deep learning via additively homomorphic encryption", §3.1; Fowl et al.
2022, "Robbing the Fed", for batches).

For a first layer z = W x + b on the flattened input x, and any loss, the gradient of a batch's
mean loss is, per unit j of that layer,

    ∂L/∂W_j = (1/B) Σ_i δ_ij x_i,      ∂L/∂b_j = (1/B) Σ_i δ_ij,      δ_ij = ∂ℓ_i/∂z_ij.

Where one sample i alone has δ_ij ≠ 0 (a ReLU unit active for it only, say), the ratio
∂L/∂W_j / ∂L/∂b_j is x_i exactly; for B = 1 every unit with a non-zero bias gradient gives x.
Per-sample clipping scales sample i's δ_ij by its own factor, which cancels in the ratio, so a
clipped release is inverted as it is, and a τ-step release is a sum over τ·B samples to which
the same applies. Noise added to the release does not cancel.

The gradient does not say which units hold one sample. But a sample alone in two or more units
gives the same ratio in each, while a unit that mixes samples gives a weighted mean of them
whose weights differ from unit to unit. So the ratios are grouped: units whose ratios agree
to `tolerance` (relative) are one sample, recovered exactly. The attack returns those first
(the most units first) and fills the batch with the remaining single-unit ratios by
decreasing |∂L/∂b_j| (each a sample alone in one unit, or a mixture: nothing tells them apart),
so a batch is scored over all its images, not only the exact ones.

No optimisation and no ground truth: the images are read off the target. Labels are extracted
for B = 1 only (`privaudit.attacks.inversion.labels.extract_labels`); for a batch the recovered images carry none.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Annotated, ClassVar

import torch
from pydantic import Field
from torch import Tensor, nn

from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.base import Observer, Reconstruction, register_inversion
from privaudit.attacks.inversion.labels import extract_labels
from privaudit.attacks.inversion.replay import images_per_target
from privaudit.data import Normalisation
from privaudit.flatmodel import FlatModel

Tolerance = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]

NEGLIGIBLE = 1e-9
"""Units whose bias gradient is below this fraction of the largest are left out: their ratio is
rounding error over rounding error (an inactive unit's is exactly 0)."""


@dataclass(frozen=True)
class Analytic:
    """Inputs read off a fully connected first layer as ∂L/∂W_j / ∂L/∂b_j, exact for a sample
    alone in its units (module docstring).

    `tolerance`: how close (relative) two units' ratios must be to count as one sample. Direct
    gradients agree to about 1e-7; through D-PSGD's state difference (float32 states, digits,
    an MLP, batches of eight, two seeds × two rounds) 1e-5 grouped 0–3 exact images per batch
    and 1e-4 3–6, as did 1e-3, which at B = 4 lost one of the 14 exact images that 1e-4 found. It
    fails with a status, not an exception, when the model's first layer is not fully connected
    with a bias, or when no unit of it has a bias gradient."""

    tolerance: Tolerance = 1e-4

    title: ClassVar[str] = "Analytic (first fully connected layer)"

    def run(
        self, target: Target, model: FlatModel, *, input_shape: tuple[int, ...], num_classes: int,
        batch_size: int, normalisation: Normalisation, seed: int, observer: Observer | None = None,
    ) -> Reconstruction:
        """Read up to τ·`batch_size` inputs off the first layer's gradient. `normalisation`,
        `seed` and `observer` are unused: nothing is optimised and the ratios need no box."""
        started = time.perf_counter()
        labels_from = "extracted" if batch_size == 1 and target.steps == 1 else "none"
        gradient = target.gradient.detach().double()
        if gradient.shape != (model.dim,):
            raise ValueError(f"target gradient {tuple(gradient.shape)} must be [{model.dim}] for this model")
        if not torch.isfinite(gradient).all():
            return _failed("target gradient has non-finite entries", labels_from, started)
        problem = first_layer_problem(model, input_shape)
        if problem:
            return _failed(problem, labels_from, started)
        read = read_inputs(LinearLayer.first(model), gradient, self.tolerance, images_per_target(target, batch_size))
        if read is None:
            return _failed("no unit of the first layer has a non-zero bias gradient", labels_from, started)
        inputs, exact = read
        images = inputs.view(len(inputs), *input_shape)
        labels = None
        if labels_from == "extracted":
            labels = extract_labels(gradient, model, num_classes, 1)
            labels_from = "extracted" if labels is not None else "none"
        return Reconstruction(
            images=images.to(target.gradient.dtype), labels=labels, label_source=labels_from,
            loss=math.nan, iterations=0, wall_s=time.perf_counter() - started, status="ok",
            stopped_by="closed form", exact=exact,
        )


@dataclass(frozen=True)
class LinearLayer:
    """An `nn.Linear` with a bias inside a model, and where its weight [H, F] and bias [H] lie in
    the model's flat parameter vector (`start`: the weight's first entry; the bias follows it)."""

    path: str
    module: nn.Linear
    start: int

    @classmethod
    def first(cls, model: FlatModel) -> LinearLayer | None:
        """The model's first `nn.Linear` with a bias, in the order of its parameters (a
        `nn.Sequential`'s: the order of its forward), or None when it has none."""
        start = 0
        for index, name in enumerate(model.names):
            path = name.removesuffix("weight").removesuffix(".")
            following = model.names[index + 1] if index + 1 < len(model.names) else ""
            if name.endswith("weight") and following == name.removesuffix("weight") + "bias":
                module = model.module.get_submodule(path)
                if isinstance(module, nn.Linear):
                    return cls(path, module, start)
            start += model.numels[index]
        return None

    @property
    def units(self) -> int:
        return self.module.out_features

    @property
    def width(self) -> int:
        """The size of each input the layer reads (F)."""
        return self.module.in_features

    def weight(self, flat: Tensor) -> Tensor:
        """The layer's weight [H, F] within a flat vector (parameters or their gradient)."""
        return flat[self.start:self.start + self.units * self.width].view(self.units, self.width)

    def bias(self, flat: Tensor) -> Tensor:
        """The layer's bias [H] within a flat vector (parameters or their gradient)."""
        begin = self.start + self.units * self.width
        return flat[begin:begin + self.units]

    def traced(self, model: FlatModel, flat: Tensor, x: Tensor) -> tuple[list[Tensor], list[Tensor], Tensor]:
        """What the layer receives (flattened, [N, F] per call) and returns ([N, H] per call) in a
        forward pass of the model at `flat` on `x`, and the model's output; differentiable."""
        inputs: list[Tensor] = []
        outputs: list[Tensor] = []

        def keep(module: nn.Module, received: tuple[Tensor, ...], returned: Tensor) -> None:
            inputs.append(received[0].flatten(1))
            outputs.append(returned)

        handle = self.module.register_forward_hook(keep)
        try:
            output = model.output(flat, x)
        finally:
            handle.remove()
        return inputs, outputs, output

    def inputs(self, model: FlatModel, flat: Tensor, x: Tensor) -> Tensor:
        """The layer's input [N, F] for the records `x` at `flat` (its features, for a head after
        convolutions; the flattened records themselves for an MLP)."""
        (received,), _, _ = self.traced(model, flat, x)
        return received


def trap_layer_problem(model: FlatModel, input_shape: tuple[int, ...]) -> str:
    """Why trap weights cannot be set in this model ("" when they can): it needs an `nn.Linear`
    with a bias (`LinearLayer.first`) that a forward pass calls exactly once (checked with a hook on
    a probe), whose input is the raw records (an MLP) or features computed from them (a CNN's
    classifier head)."""
    layer = LinearLayer.first(model)
    if layer is None:
        return "trap weights need an nn.Linear layer with a bias; this model has none"
    probe = torch.linspace(-1, 1, math.prod(input_shape)).view(1, *input_shape)
    with torch.no_grad():
        inputs, _, _ = layer.traced(model, model.initial(), probe)
    if len(inputs) != 1:
        return (f"trap weights need a linear layer called once per forward pass; {layer.path} is called "
                f"{len(inputs)} times")
    return ""


def read_inputs(layer: LinearLayer, gradient: Tensor, tolerance: float, count: int,
                centre: Tensor | None = None) -> tuple[Tensor, int] | None:
    """Up to `count` inputs of `layer` read off its part of `gradient` as ∂L/∂W_j / ∂L/∂b_j (module
    docstring): the groups of agreeing units first, and how many of them are exact (two or more
    units); None when no unit has a bias gradient. With `centre` (a typical input, e.g. the
    public data's mean) units agree within `tolerance` of their ratios' distance from it, not of
    their norm: inputs that differ by less than `tolerance` of their norm (a CNN's features) are
    then told apart."""
    ratios = _ratios(layer.weight(gradient), layer.bias(gradient))
    if len(ratios) == 0:
        return None
    groups = _agreeing(ratios if centre is None else ratios - centre, tolerance)
    picks = [group[0] for group in groups[:count]]
    return ratios[torch.as_tensor(picks)], sum(len(group) > 1 for group in groups[:count])


def first_layer_problem(model: FlatModel, input_shape: tuple[int, ...]) -> str:
    """Why the analytic attack cannot read this model ("" when it can): its first two parameters
    must be the weight [H, F] and bias [H] of one `nn.Linear`, F the input's size, and a forward
    pass must feed that layer the flattened input itself (checked with a hook on a probe)."""
    why = "the analytic attack needs a first layer that is fully connected with a bias"
    names, shapes = model.names, model.shapes
    size = math.prod(input_shape)
    if (
        len(names) < 2
        or not names[0].endswith("weight")
        or names[1] != names[0].removesuffix("weight") + "bias"
        or len(shapes[0]) != 2
        or shapes[0][1] != size
        or shapes[1] != shapes[0][:1]
    ):
        first = names[0] if names else "none"
        return f"{why}; this model's first parameter is {first} {tuple(shapes[0]) if shapes else ()}"
    layer = model.module.get_submodule(names[0].removesuffix("weight").removesuffix("."))
    if not isinstance(layer, nn.Linear):
        return f"{why}; {names[0]} is not an nn.Linear weight"
    probe = torch.linspace(-1, 1, size).view(1, *input_shape)
    seen: list[Tensor] = []
    handle = layer.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].detach()))
    try:
        with torch.no_grad():
            model.output(model.initial(), probe)
    finally:
        handle.remove()
    if len(seen) != 1 or not torch.equal(seen[0].flatten(1).to(probe.dtype), probe.flatten(1)):
        return f"{why}; the layer owning {names[0]} does not receive the raw input"
    return ""


def _ratios(weight: Tensor, bias: Tensor) -> Tensor:
    """∂L/∂W_j / ∂L/∂b_j [K, F] for the K units with a non-negligible bias gradient, by
    decreasing |∂L/∂b_j| (the most precise first)."""
    strength = bias.abs()
    keep = torch.nonzero(strength > NEGLIGIBLE * strength.max()).flatten()
    keep = keep[strength[keep].argsort(descending=True)]
    return weight[keep] / bias[keep, None]


def _agreeing(ratios: Tensor, tolerance: float) -> list[list[int]]:
    """Rows of `ratios` grouped greedily: each joins the first group whose first row lies within
    `tolerance` of it relative to the larger norm; groups by decreasing size (then first row)."""
    norms = ratios.norm(dim=-1)
    distances = torch.cdist(ratios, ratios)
    groups: list[list[int]] = []
    for row in range(len(ratios)):
        for group in groups:
            head = group[0]
            if distances[row, head] <= tolerance * max(float(norms[row]), float(norms[head]), 1e-30):
                group.append(row)
                break
        else:
            groups.append([row])
    return sorted(groups, key=lambda group: (-len(group), group[0]))


def _failed(reason: str, label_source: str, started: float) -> Reconstruction:
    return Reconstruction(None, None, label_source, math.nan, 0, time.perf_counter() - started,
                          f"failed: {reason}", "not run")


register_inversion("analytic", Analytic)
