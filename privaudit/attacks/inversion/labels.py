"""A batch's labels read off the last layer's gradient: which classes occur, and how many times.

For the mean cross-entropy over a batch of B, the gradient of the final linear layer (logits
z = W h + b) is, per class c,

    ∂L/∂b_c = s_c = (1/B) Σ_i (p_ic − [y_i = c]),      ∂L/∂W_c = (1/B) Σ_i (p_ic − [y_i = c]) h_i,

with p the softmax outputs and h the layer's inputs. Three facts follow, each used here:

* Presence by sign (iDLG, Zhao et al. 2020, §3; Wainakh et al. 2022, "User-level label leakage
  from gradients in federated learning", LLG): as p_ic > 0, s_c < 0 only if class c occurs.
  When the layer's inputs are non-negative (a sigmoid or ReLU before it), a class that does not
  occur has a weight-gradient row with no negative entry, so any negative entry of row c proves
  c occurs too, also where s_c ≥ 0 (a present class that the model predicts elsewhere in the
  batch; on DLG's LeNet at B = 8 the rows found 16 such classes in 60 batches that the bias missed,
  and none that was absent).
* Counts by magnitude (Geng et al. 2021, "Towards general deep leakage in federated learning",
  §3.1): summing over the batch, n_c = Σ_i p_ic − B s_c. Given the batch's mean softmax
  p̄_c = (1/B) Σ_i p_ic, the count is n_c = B (p̄_c − s_c), exactly. The attacker does not
  know p̄; Geng et al. estimate it from the model's outputs on dummy inputs, our batch attack
  from its own first reconstruction (`privaudit.attacks.inversion.gradient_matching.BatchInversion`). Where the model's
  output does not depend on its input (a zero final weight, as some initialisations have) any
  input gives p̄ and the counts are exact.
* Lower bounds: n_c ≥ −B s_c (as Σ_i p_ic ≥ 0), and n_c ≥ 1 for a class proven present.

Both rules assume the final layer's output is the logits (no operation after it), which
parameter names cannot show; true for every classifier in `privaudit.models`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from privaudit.flatmodel import FlatModel


def extract_labels(
    gradient: Tensor, model: FlatModel, num_classes: int, batch_size: int, *,
    mean_probabilities: Tensor | None = None, nonnegative_inputs: bool = False,
) -> Tensor | None:
    """The batch's labels read off the last layer's gradient (class order: a reconstruction is
    an unordered set), or None when the gradient does not determine them.

    B = 1: the one negative class, argmin s. B > 1: the classes proven present (module
    docstring; weight rows only with `nonnegative_inputs`); when there are exactly B of them,
    each occurs once. Otherwise, given `mean_probabilities` (p̄ [C], the batch's mean softmax,
    known or estimated), the counts `count_labels` rounds from B (p̄ − s); without it, None.

    The final linear layer is found from the `FlatModel`'s parameters: the last two must be a
    weight [C, F] and its bias [C] (same module prefix), or the last one alone a weight [C, F]
    with no bias, C = num_classes. Without a bias, s_c is the row sum of the weight gradient,
    (1/B) Σ_i (p_ic − [y_i = c]) Σ_f h_if; the sign argument holds when the layer's inputs h are
    non-negative (as in every image model here), which the gradient alone cannot confirm, and
    the magnitudes carry no counts. Models with their own loss (not cross-entropy) get None.
    """
    layer = _last_layer(gradient, model, num_classes)
    if layer is None:
        return None
    signal, weight, has_bias = layer
    if not torch.isfinite(signal).all():
        return None
    if batch_size == 1:
        return signal.argmin().reshape(1)
    present = _present(signal, weight if nonnegative_inputs else None)
    if int(present.sum()) == batch_size:
        return torch.nonzero(present).flatten()
    if mean_probabilities is None or not has_bias:
        return None
    counts = count_labels(signal, mean_probabilities, batch_size, present)
    return None if counts is None else torch.repeat_interleave(torch.arange(num_classes), counts)


def count_labels(bias_gradient: Tensor, mean_probabilities: Tensor, batch_size: int,
                 present: Tensor | None = None) -> Tensor | None:
    """Label counts n [C] from the final bias gradient s and the batch's mean softmax p̄:
    B (p̄ − s) rounded, each count at least its lower bound (max(⌈−B s_c⌉, 1 if `present`)),
    then moved one by one towards the estimate until they sum to B (largest remainder first).
    Exact when p̄ is the batch's own; None when the lower bounds alone exceed B."""
    size = batch_size
    estimate = size * (mean_probabilities.double() - bias_gradient.double())
    lower = torch.ceil(-size * bias_gradient.double() - 1e-6).clamp_min(0)
    if present is not None:
        lower = torch.maximum(lower, present.double())
    if float(lower.sum()) > size:
        return None
    counts = torch.maximum(estimate.round().clamp_min(0), lower)
    while float(counts.sum()) > size:
        excess = torch.where(counts > lower, counts - estimate, torch.full_like(counts, -math.inf))
        counts[int(excess.argmax())] -= 1
    while float(counts.sum()) < size:
        counts[int((estimate - counts).argmax())] += 1
    return counts.long()


def _present(signal: Tensor, weight: Tensor | None) -> Tensor:
    """Classes proven present: a negative bias gradient, or a negative entry in their weight row
    (only meaningful for non-negative layer inputs)."""
    present = signal < 0
    if weight is not None:
        present = present | (weight < 0).any(-1)
    return present


def _last_layer(gradient: Tensor, model: FlatModel,
                num_classes: int) -> tuple[Tensor, Tensor, bool] | None:
    """The final linear layer's per-class signal (its bias gradient, or weight-gradient row sums
    without a bias), its weight gradient [C, F], and whether it has a bias."""
    if getattr(model.module, "loss", None) is not None or gradient.shape != (model.dim,):
        return None
    pieces = torch.split(gradient, model.numels)
    names, shapes = model.names, model.shapes

    def is_weight(k: int) -> bool:
        return len(shapes[k]) == 2 and shapes[k][0] == num_classes and names[k].endswith("weight")

    last = len(shapes) - 1
    if (
        last >= 1
        and shapes[last] == (num_classes,)
        and names[last].endswith("bias")
        and is_weight(last - 1)
        and names[last].removesuffix("bias") == names[last - 1].removesuffix("weight")
    ):
        return pieces[last], pieces[last - 1].view(shapes[last - 1]), True
    if is_weight(last):
        weight = pieces[last].view(shapes[last])
        return weight.sum(-1), weight, False
    return None


def final_inputs_nonnegative(model: FlatModel, point: Tensor, probe: Tensor) -> bool:
    """Whether the final linear layer's inputs were non-negative on every probe input [N, ...]
    at `point` (read with a forward hook): true for a sigmoid or ReLU before it whatever the
    input, false at once for a layer fed raw normalised pixels (logistic regression)."""
    final = _final_linear(model)
    if final is None:
        return False
    seen: list[Tensor] = []
    handle = final.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].detach()))
    try:
        with torch.no_grad():
            model.output(point.to(probe.dtype), probe)
    finally:
        handle.remove()
    return len(seen) == 1 and bool((seen[0] >= 0).all())


def _final_linear(model: FlatModel) -> nn.Linear | None:
    """The `nn.Linear` that owns the model's last parameter, if it is one."""
    prefix = model.names[-1].rpartition(".")[0]
    try:
        module = model.module.get_submodule(prefix)
    except AttributeError:
        return None
    return module if isinstance(module, nn.Linear) else None
