"""A torch module seen as a pure function of one flat parameter vector.

Decentralized algorithms move, average, perturb and quantize whole parameter vectors: gossip is
`X ← W X` on the stacked states of all agents, noise is added to a vector, an eavesdropper reads a
vector off the wire. Keeping every agent's state as one row of a `[N, P]` tensor makes all of that
one tensor operation, and `torch.func.functional_call` turns a row back into the module's
parameters whenever a loss or a prediction is needed.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap


LOOP_MIN_PARAMETERS = 2_000_000
"""Models of at least this many parameters take per-sample gradients on the CPU one sample at a
time (`FlatModel.loops_samples`), smaller ones with `vmap`. Measured on one thread of 2 cores shared
with other work (load 4-6; CPU seconds, batch 32, 2026-11-28): vmap against the loop, samples per
second, DPDL MNIST CNN (62 k) 2,000 against 295, an MLP of 1.7 M 70 against 67, of 4.1 M 38
against 52, ResNet-18 (11 M) 3.9 (5.1 in chunks of 4) against 6.2: where a sample's work dwarfs
a loop's dispatch, vmap's batched convolution backward (a grouped convolution) costs more than it
saves. On CUDA vmap stays: a loop there waits on kernel launches."""


def _argmax(output: Tensor) -> Tensor:
    """The default prediction: the class with the largest output (a named function, so a model
    pickles into worker processes)."""
    return output.argmax(-1)


class FlatModel:
    """The architecture of `module`, evaluated at any flat parameter vector.

    The module's own parameters are only the initial point (`initial()`); every other call takes
    the parameters as an argument, so the same object serves all agents, the attacker's dummy
    model and `vmap` over agents or samples. A module may refine three things:

    * `loss(output, target)`: its mean loss on a batch (default: cross-entropy), e.g. a squared
      error for the papers' estimation problems or seed 002's binary logistic loss;
    * `predict(output)`: class labels from outputs (default: argmax), for accuracy;
    * `penalty(params)`: a regulariser (seed 002's non-convex term), added to every sample's
      loss so that the mean of per-sample gradients equals the batch gradient.
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module.eval()
        named = list(module.named_parameters())
        self.names = [name for name, _ in named]
        self.shapes = [tuple(p.shape) for _, p in named]
        self.numels = [math.prod(shape) for shape in self.shapes]
        self.dim = sum(self.numels)
        self.buffers = {name: b.detach() for name, b in module.named_buffers()}
        self._penalty = getattr(module, "penalty", None)
        self._loss = getattr(module, "loss", None) or F.cross_entropy
        self._predict = getattr(module, "predict", None) or _argmax
        self._sample_gradients = getattr(module, "sample_gradients", None)
        self._clipped_sums = getattr(module, "clipped_gradient_sums", None)

    def initial(self) -> Tensor:
        """The module's current parameters as one detached flat vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()]).clone()

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """Views of `flat` shaped as the module's parameters (differentiable, vmap-safe)."""
        pieces = torch.split(flat, self.numels)
        return {name: piece.view(shape) for name, piece, shape in zip(self.names, pieces, self.shapes)}

    def output(self, flat: Tensor, x: Tensor) -> Tensor:
        """The module's output (logits, or estimates) on the batch `x` at parameters `flat`."""
        return functional_call(self.module, (self.unflatten(flat), self.buffers), (x,))

    def predict(self, output: Tensor) -> Tensor:
        """Class labels from the module's output."""
        return self._predict(output)

    def data_loss(self, output: Tensor, y: Tensor) -> Tensor:
        """The module's mean loss of `output` against targets `y`, without the penalty."""
        return self._loss(output, y)

    def loss(self, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
        """Mean loss on the batch plus the module's penalty, if it has one."""
        value = self._loss(self.output(flat, x), y)
        if self._penalty is not None:
            value = value + self._penalty(self.unflatten(flat))
        return value

    def without_closed_forms(self) -> FlatModel:
        """This model computing every gradient by autograd: the reference that tests and
        benchmarks set the closed forms against."""
        plain = copy.copy(self)
        plain._sample_gradients = None
        plain._clipped_sums = None
        return plain

    def to(self, device: torch.device) -> FlatModel:
        """This model with its module and buffers on `device` (an audit's worlds on a GPU); the
        module's own loss, penalty and closed forms are taken from the moved module."""
        moved = copy.copy(self)
        moved.module = copy.deepcopy(self.module).to(device)
        moved.buffers = {name: b.detach() for name, b in moved.module.named_buffers()}
        for name in ("_penalty", "_loss", "_predict", "_sample_gradients", "_clipped_sums"):
            bound = getattr(self, name)
            if getattr(bound, "__self__", None) is self.module:
                setattr(moved, name, getattr(moved.module, bound.__name__))
        return moved

    @property
    def closed_form(self) -> bool:
        """Whether per-sample gradients come in closed form (`sample_gradients`)."""
        return self._sample_gradients is not None

    def clipped_sums(self, flats: Tensor, x: Tensor, y: Tensor, mask: Tensor, bound: float) -> Tensor | None:
        """Σ_k mask[a, k] · clip_bound(g_ak) for each agent a's padded batch at its own point (flats
        [A, P], x [A, K, ...] or [A / c, K, ...] shared by c copies of the agents, mask [A, K]) in
        closed form, without forming the per-sample gradients, where the module gives one
        (`clipped_gradient_sums`); None otherwise."""
        if self._clipped_sums is None:
            return None
        sums = self._clipped_sums(self._batched(flats), x, y, mask, bound)
        out, start = torch.empty(len(flats), self.dim, dtype=flats.dtype, device=flats.device), 0
        for name, numel, shape in zip(self.names, self.numels, self.shapes):
            value = sums[name]
            lead = value.shape[: value.dim() - len(shape)]
            out[:, start:start + numel].view(*lead, numel).copy_(value.reshape(*lead, numel))
            start += numel
        return out

    def _batched(self, points: Tensor) -> dict[str, Tensor]:
        """Rows of `points` [M, P] as the module's parameters with a leading axis [M, *shape]."""
        pieces = torch.split(points, self.numels, dim=1)
        return {name: piece.reshape(len(points), *shape) for name, piece, shape in zip(self.names, pieces, self.shapes)}

    def sample_loss(self, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
        """The loss of one sample (`x` without its batch axis) at `flat`."""
        return self.loss(flat, x.unsqueeze(0), y.unsqueeze(0))

    def sample_grads(self, points: Tensor, x: Tensor, y: Tensor) -> Tensor:
        """Gradient of each sample's loss at its own point: points [M, P], x [M, ...], y [M] → [M, P];
        in closed form where the module gives one (`sample_gradients`), else by autograd."""
        if self._sample_gradients is None:
            if self.loops_samples(points):
                return self._looped_sample_grads(points, x, y)
            return vmap(grad(self.sample_loss))(points, x, y)
        grads = self._sample_gradients(self._batched(points), x, y)
        return torch.cat([grads[name].reshape(len(points), -1) for name in self.names], dim=1)

    def loops_samples(self, points: Tensor) -> bool:
        """Whether autograd's per-sample gradients at `points` are taken one sample at a time: on
        the CPU for a model of `LOOP_MIN_PARAMETERS` or more (its docstring has the measurements)."""
        return points.device.type == "cpu" and self.dim >= LOOP_MIN_PARAMETERS

    def _looped_sample_grads(self, points: Tensor, x: Tensor, y: Tensor) -> Tensor:
        """`sample_grads` by autograd, one sample after another, each written into its row."""
        out = torch.empty(len(points), self.dim, dtype=points.dtype, device=points.device)
        with torch.enable_grad():
            for row, (point, sample, target) in enumerate(zip(points, x, y)):
                flat = point.detach().requires_grad_(True)
                out[row] = torch.autograd.grad(self.sample_loss(flat, sample, target), flat)[0]
        return out
