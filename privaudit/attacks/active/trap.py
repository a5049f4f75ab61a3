"""Trap weights: the first fully connected layer's units each fire for few of a batch's records,
so that the analytic inversion reads most records' inputs to that layer exactly (Fowl et al. 2022,
"Robbing the Fed", imprint; Boenisch et al. 2023, "When the curious abandon honesty", trap weights).

Unit k gets a random unit direction r_k and a bias at the (1 − 1/B) quantile of r_k · f over the
attacker's public data, f the layer's input, so it fires (r_k · f + b_k > 0, a ReLU) for a fraction
1/B of the records of the task: of a batch of B, exactly one with probability (1 − 1/B)^{B−1} ≈
1/e, the largest such a threshold allows. A record alone in unit k gives ∂L/∂W_k / ∂L/∂b_k = f
exactly (per-sample clipping scales both alike; `privaudit.attacks.inversion.analytic`), and with
H units each record is alone in about H/(eB) of them (256 units, B = 16: about six), so nearly
every record of the batch is read exactly.

For an MLP f is the record itself. For a CNN the layer is the first `nn.Linear` of its classifier
head and f the record's features, φ(x), computed by the model's own convolutional part, and the
traps are placed on the public data's features at the victim's model (read with a forward hook).
The liar leaves every parameter before the layer as the victim holds it: the features the victim
computes at the trapped point are then those the thresholds were placed on, and φ is a function
the attacker knows (it heard the victim's model), so the recovery rebuilds each image from its
features (`privaudit.attacks.active.recovery`). Every parameter after the layer is left too.

Where that layer produces the logits itself (lenet_dlg, wz_mnist, resnet18: a head of one linear
layer) no ReLU follows it, and a unit's δ_ij = p_ij − y_ij is non-zero for every record of its class
whatever the weights. The liar then sets a class sink (`class_sink`): W = 0 and every bias 0 but one
class's, `SINK_MARGIN`, so every record puts p ≈ 1 on the sink and unit j's gradient is −(1/B) Σ_{y_i
= j} f_i over −n_j / B: a record alone in its class in the batch is read exactly (B · (1 − 1/C)^{B−1}
of the B in expectation, C classes, records of the sink's class excepted), and the others as their
class's mean.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from privaudit.attacks.inversion.analytic import LinearLayer, trap_layer_problem
from privaudit.flatmodel import FlatModel

SINK_MARGIN = 30.0
"""How far the sink class's logit lies above the others' in a class sink: every other class gets
p = e^{−30} / (1 + (C − 1) e^{−30}) ≈ 1e-13, which moves a recovered feature vector by that much
relative to it, far below the float32 rounding of the release; the loss stays finite."""


def trap_weights(model: FlatModel, base: Tensor, public: Tensor, batch_size: int, seed: int) -> Tensor:
    """`base` [P] with its first fully connected layer set to traps (module docstring), placed with
    the `public` records [N, ...] of the task; ValueError (one line) when the model has no such
    layer, or the public data is too small to place a threshold that fires for one record in
    `batch_size`."""
    problem = trap_layer_problem(model, tuple(public.shape[1:]))
    if problem:
        raise ValueError(problem)
    if len(public) < 2 * batch_size:
        raise ValueError(f"trap weights place each unit's threshold with public data: {len(public)} public "
                         f"records cannot place one that fires for 1 in {batch_size}")
    layer = LinearLayer.first(model)
    with torch.no_grad():
        (features,), (produced,), output = layer.traced(model, base, public.to(base))
    if produced.shape == output.shape and torch.equal(produced, output):
        return class_sink(layer, base, seed)
    generator = torch.Generator().manual_seed(seed)
    directions = torch.randn(layer.units, layer.width, generator=generator, dtype=torch.float64)
    directions /= directions.norm(dim=1, keepdim=True)
    projections = features.double().cpu() @ directions.T
    thresholds = torch.quantile(projections, 1.0 - 1.0 / batch_size, dim=0)
    trapped = base.double().clone()
    layer.weight(trapped).copy_(directions)
    layer.bias(trapped).copy_(-thresholds)
    return trapped.to(base.dtype)


def trap_kind(model: FlatModel, trapped: Tensor) -> str:
    """What `trap_weights` set in `trapped`, in words: a class sink, where the first fully
    connected layer gives the logits itself (its W is 0 there), or trap weights."""
    if not bool(LinearLayer.first(model).weight(trapped).any()):
        return "its logit layer replaced by a class sink"
    return "its first fully connected layer replaced by trap weights"


def class_sink(layer: LinearLayer, base: Tensor, seed: int) -> Tensor:
    """`base` with the logit layer `layer` set to a class sink (module docstring): W = 0, bias
    `SINK_MARGIN` for one class drawn with `seed`, 0 for the others."""
    generator = torch.Generator().manual_seed(seed)
    sink = int(torch.randint(layer.units, (1,), generator=generator))
    trapped = base.clone()
    layer.weight(trapped).zero_()
    layer.bias(trapped).zero_()
    layer.bias(trapped)[sink] = SINK_MARGIN
    return trapped


def expected_alone(units: int, batch_size: int) -> float:
    """The expected number of units in which one given record of a batch fires alone: H · (1/B) ·
    (1 − 1/B)^{B−1}, for records distributed as the public data."""
    fire = 1.0 / batch_size
    return units * fire * math.pow(1.0 - fire, batch_size - 1)
