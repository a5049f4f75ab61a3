"""Gradient inversion: reconstruct a victim's private batch from one intercepted gradient.

An attack sees only what was shared: a `Target` (the gradient and the parameter point it was
computed at), the public architecture as a `FlatModel`, the input shape, the number of classes,
the batch size and the data's normalisation (which fixes the valid pixel box). The private batch
never reaches this module; `privaudit.metrics` scores the result against it afterwards.

Four optimising attacks, each a frozen dataclass whose fields are its parameters, registered under
the names a campaign gives them (`privaudit.attacks.inversion.base.INVERSIONS`, beside the closed-form
`privaudit.attacks.inversion.analytic.Analytic` as "analytic"):

* `DLG` — Deep Leakage from Gradients (Zhu et al. 2019, eq. 4): dummy images and dummy labels
  (logits through a softmax, fed to cross-entropy as soft targets) minimise the squared ℓ2
  distance ‖∇θ L(x̂, ŷ) − g‖² with L-BFGS.
* `IDLG` — improved DLG (Zhao et al. 2020): the label is read off the last layer's gradient
  (`extract_labels`), then DLG runs with that hard label fixed.
* `InvertingGradients` — Geiping et al. 2020 (eq. 4): cosine distance 1 − cos(∇θ L(x̂, y), g)
  plus a total-variation prior, pixels kept in the valid box, the restart with the lowest
  gradient distance kept. Minimised by default with L-BFGS, one of the two optimisers the
  authors' code offers; the paper's own, Adam on the sign of the image gradient with step
  decay, is `optimizer="adam"` (the class docstring says why, with the numbers).
* `BatchInversion` — for batches with repeated labels: DLG's distance with a total-variation
  prior whose weight steps down (a continuation), the label counts read off the last layer
  with the first stage's images (`privaudit.attacks.inversion.labels`), then held fixed.

The same L-BFGS and prior also rebuild images from their features rather than a gradient
(`match_features`: the active attack's reading of a CNN's trapped head,
`privaudit.attacks.active.recovery`).

The candidates are compared with the target through `privaudit.attacks.inversion.replay`: the defense's own map
(its clipping rule, and for a multi-step target its τ local steps with their drift) replayed on
the candidates, so a clipped or multi-step release is matched as what it is, not as a raw
gradient; a multi-step target of batch size B is rebuilt as τ·B images, one batch per step.
Only `BatchInversion` screens the order of the steps and has the prior such a batch needs (its
docstring says why, with numbers): iDLG and Inverting Gradients give the extracted labels to
the steps in class order and, on noiseless τ = 2 LT-ADMM-DP updates of two photo crops, reach
12–22 dB (seeds 0–4), and 16–19 dB even when given the true labels in their steps (seeds 0–1).
Restarts are vectorised: the releases of all R candidates are computed at once by `vmap` over
restarts (a single plain gradient takes autograd, which is faster), and differentiated again by
autograd (double backward). The restarts do not interact, so the gradient of the summed loss is, block by block,
each restart's own gradient. Adam acts element-wise, so Adam restarts evolve exactly as R
separate runs would. L-BFGS (DLG, iDLG, IG's default) does not: it runs on the stacked
[R, B, ...] variable with one curvature memory and one step size, so batched restarts are R
coupled searches, not R independent ones (and one restart's NaN ends them all); DLG and IG
therefore default to one restart, as DLG's paper does.

L-BFGS is torch's iteration and line search with our own arithmetic for the direction
(`_CurvatureMemory`, the compact representation), which lets it keep 400 curvature pairs at
less cost per iteration than `torch.optim.LBFGS` has with 100.

NaN or Inf never escapes as an exception: the attempt ends with status
"failed: diverged: loss is nan at iteration k (restart r)" and keeps, per restart, the best
finite iterate seen so far (or no images, if there was none).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

import torch
from pydantic import AfterValidator, Field
from scipy.optimize import linear_sum_assignment
from torch import Tensor
from torch.optim.lbfgs import _strong_wolfe

from privaudit import devices
from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.base import Observer, Reconstruction, register_inversion
from privaudit.attacks.inversion.labels import extract_labels, final_inputs_nonnegative
from privaudit.attacks.inversion.replay import images_per_target, release
from privaudit.data import Normalisation
from privaudit.flatmodel import FlatModel
from privaudit.limits import within

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}

Count = Annotated[int, Field(ge=1)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Restarts = Annotated[int, Field(ge=1), AfterValidator(within("runs"))]
Evaluations = Annotated[int, Field(ge=1), AfterValidator(within("evaluations"))]
DType = Literal["float32", "float64"]
"""The attacks' parameter types: the dataclasses ignore them at run time, and a campaign validates
an attack's parameters against them (pydantic), so a bad value is a one-line error naming the
field before anything trains, not an exception in the middle of a campaign."""

PAIR_DTYPE = torch.float32
"""Storage of L-BFGS's curvature pairs (see `_CurvatureMemory`)."""


def working_megabytes(attack: object, batch_size: int, input_shape: tuple[int, ...], num_classes: int,
                      parameters: int) -> int:
    """The megabytes an inversion attack's largest buffers take, known before it runs: L-BFGS's
    curvature pairs (`history_size` × 2 × the variables of all restarts, in `PAIR_DTYPE`), their
    m × m products, and a few [restarts, parameters] gradients in float64. A campaign checks it
    against the `memory` limit, so `restarts = 100000` or `history_size = 10⁹` is a one-line
    refusal at check time, not an allocation failure after training."""
    restarts = int(getattr(attack, "restarts", 1))
    history = int(getattr(attack, "history_size", 0))
    variables = restarts * batch_size * (math.prod(input_shape) + num_classes)
    pair_bytes = history * 2 * variables * PAIR_DTYPE.itemsize + 2 * history * history * 8
    return math.ceil((pair_bytes + 4 * restarts * parameters * 8) / 2**20)


def squared_distance(model_grads: Tensor, target: Tensor) -> Tensor:
    """DLG's ‖∇θ L(x̂, ŷ) − g‖² (Zhu et al. 2019, eq. 4) per restart: [R, P] → [R]."""
    return (model_grads - target).square().sum(-1)


def cosine_distance(model_grads: Tensor, target: Tensor) -> Tensor:
    """Geiping et al.'s 1 − ⟨∇θ L(x̂, y), g⟩ / (‖∇θ L(x̂, y)‖ ‖g‖) (2020, eq. 4) per restart."""
    inner = model_grads @ target
    return 1.0 - inner / (model_grads.norm(dim=-1) * target.norm()).clamp_min(1e-30)


def total_variation(x: Tensor) -> Tensor:
    """Anisotropic total variation per restart of x [R, B, C, H, W]: the mean absolute difference
    of vertical plus horizontal neighbours (Geiping et al. 2020's prior, Rudin et al. 1992)."""
    dh = (x[..., 1:, :] - x[..., :-1, :]).abs().flatten(1).mean(-1)
    dw = (x[..., :, 1:] - x[..., :, :-1]).abs().flatten(1).mean(-1)
    return dh + dw


class _Diverged(Exception):
    """A loss evaluation gave NaN or Inf (caught inside this module, never raised to callers)."""


class _Stop(Exception):
    """The tolerance or the observer ended an L-BFGS run early."""


class _Tracker:
    """Per restart: the best finite iterate by objective and its gradient distance; also the
    loss evaluations so far and how the run ended."""

    def __init__(self, restarts: int, observer: Observer | None) -> None:
        self.best_objective = torch.full((restarts,), math.inf, dtype=torch.float64)
        self.best_distance = torch.full((restarts,), math.inf, dtype=torch.float64)
        self.best_x: Tensor | None = None
        self.best_y: Tensor | None = None
        self.evaluations = 0
        self.observer = observer
        self.failure = ""
        self.stopped_by = "budget"

    def record(self, objective: Tensor, distance: Tensor, x: Tensor, y: Tensor) -> None:
        """Keep improving iterates; raise `_Diverged` on the first non-finite objective."""
        self.evaluations += 1
        values = objective.detach().double()
        if not math.isfinite(float(values.sum())):
            restart = int(torch.nonzero(~torch.isfinite(values))[0])
            self.failure = (
                f"diverged: loss is {float(values[restart])} at iteration {self.evaluations} "
                f"(restart {restart})"
            )
            self.stopped_by = "diverged"
            raise _Diverged(self.failure)
        if len(values) == 1:
            if float(values) < float(self.best_objective):
                self.best_x, self.best_y = x.detach().clone(), y.detach().clone()
                self.best_objective = values
                self.best_distance = distance.detach().double()
            return
        better = values < self.best_objective
        if better.any():
            if self.best_x is None:
                self.best_x, self.best_y = x.detach().clone(), y.detach().clone()
            self.best_x[better] = x.detach()[better]
            self.best_y[better] = y.detach()[better]
            self.best_objective = torch.where(better, values, self.best_objective)
            self.best_distance = torch.where(better, distance.detach().double(), self.best_distance)

    def observe(self, x: Tensor, objective: Tensor) -> bool:
        if self.observer is not None and self.observer(self.evaluations, x.detach(), objective.detach()):
            self.stopped_by = "observer"
            return True
        return False


@dataclass(frozen=True)
class _Setup:
    """The public knowledge an attack runs on, checked and cast to the attack's dtype."""

    model: FlatModel
    target: Target
    point: Tensor
    gradient: Tensor
    drift: Tensor | None
    input_shape: tuple[int, ...]
    num_classes: int
    batch_size: int
    low: Tensor
    high: Tensor
    generator: torch.Generator

    @classmethod
    def build(
        cls, target: Target, model: FlatModel, input_shape: tuple[int, ...], num_classes: int,
        batch_size: int, normalisation: Normalisation, seed: int, dtype: str,
    ) -> _Setup:
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if target.gradient.shape != (model.dim,) or target.point.shape != (model.dim,):
            raise ValueError(
                f"target gradient {tuple(target.gradient.shape)} and point "
                f"{tuple(target.point.shape)} must both be [{model.dim}] for this model"
            )
        if batch_size < 1 or num_classes < 2:
            raise ValueError(
                f"need batch_size >= 1 and num_classes >= 2, got {batch_size} and {num_classes}"
            )
        kind = DTYPES[dtype]
        channels = len(normalisation.mean)
        pixel_box = torch.stack([torch.zeros(channels), torch.ones(channels)]).to(kind)
        low, high = normalisation.normalise(pixel_box.view(2, channels, 1, 1))
        return cls(
            model=model,
            target=target,
            point=target.point.detach().to(kind),
            gradient=target.gradient.detach().to(kind),
            drift=None if target.drift is None else target.drift.detach().to(kind),
            input_shape=tuple(input_shape),
            num_classes=num_classes,
            batch_size=images_per_target(target, batch_size),
            low=low,
            high=high,
            generator=devices.generator(target.gradient.device, seed),
        )

    def released(self, x: Tensor, y: Tensor) -> Tensor:
        """What every restart's candidates would have released, comparable with the target."""
        return release(self.model, self.target, self.point, x, y, self.drift)

    def project(self, x: Tensor) -> Tensor:
        """x clipped into the box of valid pixels, [0, 1] before normalisation, per channel."""
        return torch.maximum(torch.minimum(x, self.high), self.low)

    def initial_images(self, restarts: int, std: float) -> Tensor:
        """Gaussian dummy images N(0, std²) in the normalised space, [R, B, ...]."""
        size = (restarts, self.batch_size, *self.input_shape)
        return std * torch.randn(size, generator=self.generator, dtype=self.point.dtype)

    def initial_logits(self, restarts: int) -> Tensor:
        """Gaussian dummy label logits [R, B, C], DLG's initialisation."""
        size = (restarts, self.batch_size, self.num_classes)
        return torch.randn(size, generator=self.generator, dtype=self.point.dtype)


def _finish(tracker: _Tracker, started: float, label_source: str) -> Reconstruction:
    """The reconstruction of the restart with the lowest gradient distance."""
    status = f"failed: {tracker.failure}" if tracker.failure else "ok"
    wall = time.perf_counter() - started
    if tracker.best_x is None:
        return Reconstruction(None, None, label_source, math.nan, tracker.evaluations, wall,
                              status, tracker.stopped_by)
    restart = int(torch.argmin(tracker.best_distance))
    labels = tracker.best_y[restart]
    if labels.is_floating_point():
        labels = labels.argmax(-1)
    return Reconstruction(
        images=tracker.best_x[restart],
        labels=labels.long(),
        label_source=label_source,
        loss=float(tracker.best_distance[restart]),
        iterations=tracker.evaluations,
        wall_s=wall,
        status=status,
        stopped_by=tracker.stopped_by,
        restart=restart,
        restart_losses=tuple(float(v) for v in tracker.best_distance),
    )


def _failed(reason: str, label_source: str, started: float) -> Reconstruction:
    return Reconstruction(None, None, label_source, math.nan, 0, time.perf_counter() - started,
                          f"failed: {reason}", "not run")


def _unusable(setup: _Setup) -> str:
    """Why the target cannot be attacked ("" when it can)."""
    if not torch.isfinite(setup.gradient).all():
        return "target gradient has non-finite entries"
    return ""


def _needs_cross_entropy(model: FlatModel, attack: str) -> None:
    if getattr(model.module, "loss", None) is not None:
        raise ValueError(f"{attack} needs a classifier with the default cross-entropy loss")


Objective = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]
"""(images [R, B, ...], labels) → (objective [R] to minimise, gradient distance [R])."""


@dataclass(frozen=True)
class _Candidates:
    """The variables of one attack: dummy images [R, B, ...] and either fixed hard labels
    [R, B] or dummy label logits [R, B, C] optimised with them (DLG's soft labels)."""

    x: Tensor
    logits: Tensor
    hard: Tensor | None

    @classmethod
    def start(
        cls, setup: _Setup, restarts: int, init_std: float, labels: Tensor | None, boxed: bool
    ) -> _Candidates:
        x = setup.initial_images(restarts, init_std)
        x = (setup.project(x) if boxed else x).requires_grad_(True)
        logits = setup.initial_logits(restarts).requires_grad_(labels is None)
        return cls(x, logits, None if labels is None else labels.expand(restarts, -1))

    @property
    def variables(self) -> list[Tensor]:
        return [self.x] if self.hard is not None else [self.x, self.logits]

    def labels(self) -> Tensor:
        """What the loss sees: hard labels, or the softmax of the logits."""
        return self.logits.softmax(-1) if self.hard is None else self.hard

    def kept_labels(self) -> Tensor:
        """What the tracker keeps: hard labels, or the logits."""
        return self.logits if self.hard is None else self.hard

    def flat(self) -> Tensor:
        """The optimised variables as one detached vector: images, then logits if optimised."""
        return torch.cat([v.detach().flatten() for v in self.variables])

    def at(self, flat: Tensor) -> _Candidates:
        """Candidates whose variables are views of `flat` (laid out as `flat()`)."""
        size = self.x.numel()
        logits = self.logits if self.hard is not None else flat[size:].view(self.logits.shape)
        return _Candidates(flat[:size].view(self.x.shape), logits, self.hard)

    def reordered(self, order: tuple[int, ...]) -> _Candidates:
        """Fresh leaf candidates whose local steps are taken in `order`: a multi-step target's
        images (and labels) are one block per step along dimension 1, and block t of the result
        is block `order[t]` of these."""

        def blocks(v: Tensor) -> Tensor:
            parts = v.detach().chunk(len(order), dim=1)
            return torch.cat([parts[t] for t in order], dim=1)

        hard = None if self.hard is None else blocks(self.hard)
        logits = blocks(self.logits).requires_grad_(hard is None)
        return _Candidates(blocks(self.x).requires_grad_(True), logits, hard)


class _CurvatureMemory:
    """L-BFGS's last `size` curvature pairs s = z⁺ − z, y = ∇f(z⁺) − ∇f(z), and the quasi-Newton
    direction −H∇f they define (Nocedal 1980; Nocedal & Wright 2006, Alg. 7.4).

    H is the usual L-BFGS inverse-Hessian approximation, H₀ = γI with γ = s·y / y·y of the newest
    pair, and pairs with s·y ≤ 1e-10 are skipped, as in `torch.optim.LBFGS`; only the arithmetic
    differs. torch's two-loop recursion issues ~4m small vector operations from Python per
    iteration (≈ 2.8 ms of DLG's 8.6 ms per evaluation at m = 100, more with a longer memory).
    Here H∇f comes from the compact representation of Byrd, Nocedal & Schnabel (1994, eq. 3.13;
    Nocedal & Wright eq. 7.24): with R the upper triangle of SᵀY, D its diagonal, u = R⁻¹Sᵀg and
    w = R⁻ᵀ((D + γYᵀY)u − γYᵀg),  Hg = γg + Sw − γYu:
    one matrix product with the stored pairs for Sᵀg and Yᵀg, one for Sw − γYu and two m × m
    triangular solves, whatever m. SᵀY and YᵀY are updated from the product that also gives
    the next gradient's Sᵀg and Yᵀg. The pairs live in a ring buffer, the small matrices
    oldest first.

    The pairs are stored in `PAIR_DTYPE` (float32), everything else in the attack's dtype: the
    two products are bound by memory traffic (at m = 400 and 3,078 variables, 0.9 against
    3.1 ms per iteration in float64 on this CPU). The scalars of a new pair (s·y, y·y, its
    products) are computed from its stored, rounded copy, so that H is the L-BFGS matrix of
    the stored pairs up to float32 rounding of the products. On DLG (five photo crops) the
    median evaluations to 30 dB were 395 against 399 with float64 storage, and the median PSNR
    at DLG's own stop 48.3 against 48.1 dB.
    """

    def __init__(self, size: int, dim: int, dtype: torch.dtype) -> None:
        self.size = size
        self.pairs = torch.zeros(size, 2, dim, dtype=PAIR_DTYPE)
        self.sy = torch.zeros(size, size, dtype=dtype)
        self.yy = torch.zeros(size, size, dtype=dtype)
        self.count = 0
        self.oldest = 0
        self.gamma = 1.0
        self.products = torch.zeros(0, 2, dtype=dtype)

    def clear(self) -> None:
        self.count, self.oldest, self.products = 0, 0, self.products[:0]

    def _times(self, rows: Tensor) -> Tensor:
        """(s_i·v, y_i·v) for every stored pair and every row v of `rows` [k, n], oldest pair
        first: [m, 2, k], in the dtype of `rows`. One product over the pairs (as [k, n] times
        the pairs' transpose: MKL took half as long again for pairs times [n, k])."""
        m = self.count
        raw = (rows.to(PAIR_DTYPE) @ self.pairs[:m].flatten(0, 1).T).T.to(rows.dtype)
        raw = raw.reshape(m, 2, len(rows))
        return raw.roll(-self.oldest, 0) if self.oldest else raw

    def restart_at(self, gradient: Tensor) -> None:
        """Take `gradient` as the current one (after a projection moved the iterate)."""
        self.products = self._times(gradient[None])[..., 0]

    def direction(self, gradient: Tensor) -> Tensor:
        """−H g for the current gradient g (the one last passed to `update` or `restart_at`)."""
        m = self.count
        if m == 0:
            return -gradient
        sy = self.sy[:m, :m]
        u = torch.linalg.solve_triangular(sy, self.products[:, :1], upper=True)
        w = sy.diagonal()[:, None] * u + self.gamma * (self.yy[:m, :m] @ u - self.products[:, 1:])
        w = torch.linalg.solve_triangular(sy.mT, w, upper=False)
        coefficients = torch.cat([w, -self.gamma * u], 1)
        if self.oldest:
            coefficients = coefficients.roll(self.oldest, 0)
        pairs = coefficients.view(-1).to(PAIR_DTYPE) @ self.pairs[:m].flatten(0, 1)
        return -(self.gamma * gradient + pairs.to(gradient.dtype))

    def update(self, s: Tensor, y: Tensor, gradient: Tensor) -> None:
        """Add the pair (s, y) unless s·y ≤ 1e-10, the oldest one dropped when full; `gradient`
        (the one at the new iterate) becomes the current one."""
        s, y = s.to(PAIR_DTYPE).to(s.dtype), y.to(PAIR_DTYPE).to(y.dtype)
        both = self._times(torch.stack([gradient, y]))
        products, column = both[..., 0], both[..., 1]
        sy = float(s @ y)
        if sy > 1e-10:
            m, slot = self.count, self.count
            if m == self.size:
                slot, self.oldest = self.oldest, (self.oldest + 1) % self.size
                self.sy[: m - 1, : m - 1] = self.sy[1:m, 1:m].clone()
                self.yy[: m - 1, : m - 1] = self.yy[1:m, 1:m].clone()
                products, column, m = products[1:], column[1:], m - 1
            yy = float(y @ y)
            self.sy[:m, m], self.sy[m, m] = column[:, 0], sy
            self.yy[:m, m], self.yy[m, :m], self.yy[m, m] = column[:, 1], column[:, 1], yy
            self.pairs[slot, 0], self.pairs[slot, 1] = s, y
            products = torch.cat([products, torch.stack([s @ gradient, y @ gradient])[None]])
            self.count, self.gamma = m + 1, sy / yy
        self.products = products


LINE_SEARCHES = ("strong_wolfe", None)


def _lbfgs(
    setup: _Setup, candidates: _Candidates, objective: Objective, tracker: _Tracker, *,
    evaluations: int, lr: float, history_size: int, line_search: str | None,
    stop_at: float, project_every: int | None,
) -> None:
    """L-BFGS on the stacked candidates of all restarts, the objective summed over restarts.

    The iteration of `torch.optim.LBFGS` (first step min(1, 1/‖g‖₁)·lr, then lr; its strong
    Wolfe line search, `torch.optim.lbfgs._strong_wolfe`, a private torch function imported as
    is, or a fixed step when `line_search` is None) with the direction from `_CurvatureMemory`.
    Should that direction not descend (rounding), the memory is dropped and −g taken. It runs
    until the budget, the tolerance or the observer stops it, a non-finite loss, or a stall:
    not even −g descends (a zero gradient, e.g. from saturated sigmoids) or a zero step. With
    `project_every` the images are projected into the valid box
    whenever that many evaluations have passed since the last projection (as the Inverting
    Gradients code does between its L-BFGS steps); the iterate is evaluated again there and the
    curvature memory carried over.
    """
    if line_search not in LINE_SEARCHES:
        raise ValueError(f"line_search must be 'strong_wolfe' or None, got {line_search!r}")
    if history_size < 1:
        raise ValueError(f"history_size must be >= 1, got {history_size}")

    def evaluate(flat: Tensor) -> tuple[float, Tensor]:
        flat = flat.detach().requires_grad_(True)
        current = candidates.at(flat)
        value, distance = objective(current.x, current.labels())
        tracker.record(value, distance, current.x, current.kept_labels())
        if bool((distance <= stop_at).all()):
            tracker.stopped_by = "tolerance"
            raise _Stop
        if tracker.observe(current.x, value) or tracker.evaluations >= evaluations:
            raise _Stop
        total = value.sum()
        (gradient,) = torch.autograd.grad(total, flat)
        return float(total.detach()), gradient

    def project(flat: Tensor) -> Tensor:
        boxed = setup.project(candidates.at(flat).x)
        return torch.cat([boxed.flatten(), flat[boxed.numel():]])

    z = candidates.flat()
    memory = _CurvatureMemory(history_size, z.numel(), z.dtype)
    try:
        f, g = evaluate(z)
        size = float(g.abs().sum())
        step = lr * (min(1.0, 1.0 / size) if size > 0 else 1.0)
        projected_at = tracker.evaluations
        while True:
            d = memory.direction(g)
            slope = float(g @ d)
            if not slope < 0 and memory.count:
                memory.clear()
                d = -g
                slope = float(g @ d)
            if not slope < 0:
                break
            if line_search is None:
                f, g_new = evaluate(z + step * d)
            else:
                f, g_new, step, _ = _strong_wolfe(
                    lambda base, t, direction: evaluate(base + t * direction),
                    z, step, d, f, g, slope,
                )
            s = float(step) * d
            z = z + s
            memory.update(s, g_new - g, g_new)
            g = g_new
            if not bool(s.any()):
                break
            step = lr
            if project_every is not None and tracker.evaluations - projected_at >= project_every:
                z = project(z)
                f, g = evaluate(z)
                memory.restart_at(g)
                projected_at = tracker.evaluations
        tracker.stopped_by = "stalled"
    except (_Stop, _Diverged):
        pass


def _dlg_objective(setup: _Setup) -> Objective:
    def objective(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        distance = squared_distance(setup.released(x, y), setup.gradient)
        return distance, distance

    return objective


def _lbfgs_match(
    setup: _Setup, params: DLG, labels: Tensor | None, observer: Observer | None, started: float
) -> Reconstruction:
    """Shared run of DLG and iDLG: soft labels are optimised when `labels` is None."""
    candidates = _Candidates.start(setup, params.restarts, params.init_std, labels, boxed=False)
    tracker = _Tracker(params.restarts, observer)
    _lbfgs(setup, candidates, _dlg_objective(setup), tracker, evaluations=params.evaluations,
           lr=params.lr, history_size=params.history_size, line_search=params.line_search,
           stop_at=params.tolerance * float(setup.gradient.square().sum()), project_every=None)
    return _finish(tracker, started, "optimised" if labels is None else "extracted")


@dataclass(frozen=True)
class DLG:
    """Deep Leakage from Gradients (Zhu et al. 2019).

    The paper's L-BFGS (lr 1, history 100, randn dummies) with four changes, each measured on
    32×32 photo crops with DLG's LeNet (bench/inversion.py, one thread): a strong Wolfe line
    search (without one, 1 of 6 crops blew up to −3.7 dB, and 2 of 5 did not reach 30 dB
    within 2,000 evaluations); dummy images N(0, 0.1²) instead of N(0, 1) (median evaluations
    to 30 dB over five crops 395 against 1,028, one of them never; 0.05 and 0.2 gave 391 and
    415); a history of 400 curvature pairs instead of 100 (median evaluations to 30 dB: 743 at
    100, 546 at 200, 459 at 300, 395 at 400, 395 at 1,000), affordable because `_lbfgs` computes
    the direction in a few matrix products rather than torch's two-loop recursion; and float64
    (float32 needed as many evaluations, 383 against 395, and with torch's default oneDNN
    convolutions was no cheaper per evaluation, 4.1 against 3.7 ms).

    The run stops after `evaluations` loss evaluations, or once every restart's loss is below
    `tolerance`·‖g‖², a relative gradient error that needs no ground truth. 30 dB was reached at
    relative errors of about 1e-6 to 5e-6 in our trials, hence 1e-8. A small error does not
    imply a good image, though: on LeNet with torch's default initialisation DLG meets 1e-8
    within 31–84 evaluations at only 18.5–26.5 dB, median 19.5 dB, on five crops
    (bench/inversion.py --victim-init default).
    """

    evaluations: Evaluations = 2000
    lr: Positive = 1.0
    history_size: Count = 400
    line_search: Literal["strong_wolfe"] | None = "strong_wolfe"
    restarts: Restarts = 1
    init_std: Positive = 0.1
    tolerance: NonNegative = 1e-8
    dtype: DType = "float64"

    fixes_labels: ClassVar[bool] = False
    title: ClassVar[str] = "DLG"

    def run(
        self, target: Target, model: FlatModel, *, input_shape: tuple[int, ...], num_classes: int,
        batch_size: int, normalisation: Normalisation, seed: int, observer: Observer | None = None,
    ) -> Reconstruction:
        """Reconstruct `batch_size` inputs from `target`, with their labels optimised (DLG) or
        extracted first (iDLG)."""
        started = time.perf_counter()
        label_source = "extracted" if self.fixes_labels else "optimised"
        _needs_cross_entropy(model, self.title)
        setup = _Setup.build(target, model, input_shape, num_classes, batch_size, normalisation,
                             seed, self.dtype)
        problem = _unusable(setup)
        if problem:
            return _failed(problem, label_source, started)
        labels = None
        if self.fixes_labels:
            labels = extract_labels(setup.gradient, model, num_classes, setup.batch_size)
            if labels is None:
                return _failed("labels not recoverable from the last layer's gradient", label_source, started)
        return _lbfgs_match(setup, self, labels, observer, started)


@dataclass(frozen=True)
class IDLG(DLG):
    """iDLG (Zhao et al. 2020): DLG with the labels fixed to `extract_labels`' answer. Fails
    (status, not exception) when the gradient does not determine the labels."""

    fixes_labels: ClassVar[bool] = True
    title: ClassVar[str] = "iDLG"


@dataclass(frozen=True)
class InvertingGradients:
    """Inverting Gradients (Geiping et al. 2020, eq. 4 and §4).

    Objective: cosine distance 1 − cos(∇θ L(x̂, y), g) + `tv_weight`·TV(x̂), pixels kept in the
    valid box. Gaussian dummies N(0, `init_std`²) projected into the box; `restarts` random
    starts (vectorised), the one of lowest cosine distance kept. Labels come from
    `extract_labels` when the gradient determines them, otherwise soft labels are optimised with
    the images (Adam: on their plain gradient), as in the authors' code (inversefed).

    Optimiser, `optimizer`:

    * "lbfgs" (default), the other choice inversefed offers: `_lbfgs` with DLG's settings (lr 1,
      strong Wolfe, `history_size` pairs) for `iterations` evaluations, projecting into the box
      every `project_every` evaluations. Its iterates between two projections, and so the
      returned best one, may leave the box.
    * "adam", the paper's: Adam with step size `lr` on the *sign* of the image gradient
      (`signed`), the step size ×`decay` at the `milestones` fractions of `iterations`, pixels
      projected after every step. `lr`, `signed`, `decay` and `milestones` are Adam's only. The
      paper ran 24,000 iterations; our earlier default was `optimizer="adam", iterations=4800,
      restarts=4`.

    Why L-BFGS is the default. On five 32×32 photo crops with DLG's LeNet (bench/inversion.py
    ig1, float64, one thread), median PSNR [range], crops at ≥ 25 dB and seconds per crop:

    * the paper's signed Adam (lr 0.1, TV 1e-4), 4,800 iterations, 4 restarts, our earlier
      default: 16.4 dB [13.0–26.0], 1 of 5, 54–58 s (14.7 and 23.5 dB on two crops after the
      paper's 24,000 iterations);
    * the best Adam we found, unsigned, lr 0.1, TV 1e-2, 4,800 iterations, 1 restart: 28.3 dB
      [26.2–37.3], 5 of 5, 19–24 s. Chosen on three of the crops: at TV 1e-6 to 3e-3 Adam
      stayed at 12–20 dB; signed Adam reached 22–28 dB at TV 1e-2 and 23–34 dB at 1e-1 (2 of
      5 below 25 dB); lr 0.01 and 0.03 were worse, 4 restarts no better (28.4 dB);
    * L-BFGS with these defaults (TV 1e-4, 1,000 evaluations, 1 restart): 49.1 dB [44.3–53.6],
      5 of 5, 4–6 s (500 evaluations: 45.8 dB [38.9–51.2]; float32: 30.2 dB [25.8–36.3]).

    A tuned Adam does pass 25 dB, but an audit that runs a weaker attack than one readily at
    hand understates the leak, so the default is the stronger and faster one. One restart: the
    restarts of L-BFGS are coupled (module docstring), and four gave no better single crops
    (46.5 dB median) at four times the cost, and a worse batch of four (13.2 against 16.3 dB).

    A batch of four crops of four photographs (bench ig4; the labels were extracted for one of
    the four batches tried, otherwise optimised) is much harder: on bench's batch, L-BFGS 16.3
    dB in 16 s, tuned Adam 16.0 dB in 42 s (22.9 dB with 4 restarts, 121 s), the paper's Adam
    10.2 dB in 135 s. A larger TV weight helps L-BFGS on batches and costs it on single crops:
    over four batches, TV 1e-4 gave 16.3, 32.7, 24.4 and 28.8 dB, 1e-3 gave 23.7, 32.1, 26.3
    and 30.1 dB, 1e-2 gave 25.2, 28.6, 21.9 and 21.1 dB, against single-crop medians of 49.1,
    41.7 and 36.6 dB. The default stays at 1e-4, the best of the three for single images;
    `tv_weight=1e-3` did better on these batches (chosen on them, so not a tested default).
    """

    iterations: Evaluations = 1000
    optimizer: Literal["lbfgs", "adam"] = "lbfgs"
    lr: Positive = 0.1
    tv_weight: NonNegative = 1e-4
    restarts: Restarts = 1
    signed: bool = True
    decay: Positive = 0.1
    milestones: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = (3 / 8, 5 / 8, 7 / 8)
    project_every: Count = 20
    history_size: Count = 400
    init_std: Positive = 1.0
    dtype: DType = "float64"

    title: ClassVar[str] = "Inverting Gradients"

    def run(
        self, target: Target, model: FlatModel, *, input_shape: tuple[int, ...], num_classes: int,
        batch_size: int, normalisation: Normalisation, seed: int, observer: Observer | None = None,
    ) -> Reconstruction:
        """Reconstruct `batch_size` inputs from `target`."""
        started = time.perf_counter()
        _needs_cross_entropy(model, "Inverting Gradients")
        if self.optimizer not in ("adam", "lbfgs"):
            raise ValueError(f"optimizer must be 'adam' or 'lbfgs', got {self.optimizer!r}")
        setup = _Setup.build(target, model, input_shape, num_classes, batch_size, normalisation,
                             seed, self.dtype)
        problem = _unusable(setup)
        if problem:
            return _failed(problem, "extracted", started)
        labels = extract_labels(setup.gradient, model, num_classes, setup.batch_size)
        candidates = _Candidates.start(setup, self.restarts, self.init_std, labels, boxed=True)
        tracker = _Tracker(self.restarts, observer)
        if self.optimizer == "adam":
            self._adam(setup, candidates, tracker)
        else:
            _lbfgs(setup, candidates, self._objective(setup), tracker, evaluations=self.iterations,
                   lr=1.0, history_size=self.history_size, line_search="strong_wolfe",
                   stop_at=-math.inf,
                   project_every=self.project_every)
        return _finish(tracker, started, "optimised" if labels is None else "extracted")

    def _objective(self, setup: _Setup) -> Objective:
        def objective(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
            distance = cosine_distance(setup.released(x, y), setup.gradient)
            return distance + self.tv_weight * total_variation(x), distance

        return objective

    def _adam(self, setup: _Setup, candidates: _Candidates, tracker: _Tracker) -> None:
        """`iterations` steps of (signed) Adam with step decay and box projection; the last
        iterate is evaluated too, so that it can be kept."""
        x = candidates.x
        optimizer = torch.optim.Adam(candidates.variables, lr=self.lr)
        schedule = torch.optim.lr_scheduler.MultiStepLR(
            optimizer, milestones=sorted({round(m * self.iterations) for m in self.milestones}),
            gamma=self.decay,
        )
        objective = self._objective(setup)
        try:
            for step in range(self.iterations + 1):
                optimizer.zero_grad()
                value, distance = objective(x, candidates.labels())
                tracker.record(value, distance, x, candidates.kept_labels())
                if step == self.iterations or tracker.observe(x, value):
                    return
                value.sum().backward()
                if self.signed:
                    x.grad.sign_()
                optimizer.step()
                schedule.step()
                with torch.no_grad():
                    x.copy_(setup.project(x))
        except _Diverged:
            pass


@dataclass(frozen=True)
class BatchInversion:
    """Inversion of a batch gradient with repeated labels: label counts, then a TV continuation.

    The gradient of a batch of B images is a sum of B per-sample gradients, so it holds fewer
    numbers than the batch has pixels once B is large enough (DLG's LeNet with 6 classes has
    12,750 parameters against 24,576 pixels at B = 8): exact gradient matching then has a whole
    family of solutions, and plain L-BFGS DLG with the true labels ended at 13.5 and 14.0 dB on
    two of bench/inversion.py's batches of eight (2,000 evaluations). Hence a prior, and labels
    counted rather than guessed:

    * Objective: DLG's squared distance (Zhu et al. 2019, eq. 4) relative to ‖g‖², plus a total
      variation prior (Geiping et al. 2020) whose weight steps down over `tv_weights`, one
      L-BFGS run of `evaluations` per weight, each starting from the last one's best images (a
      continuation: a heavily smoothed problem first, fine detail later). On bench's five
      batches of eight with the true labels, three stages of 300 evaluations at
      1e-2, 1e-3, 1e-4 gave 20.2–27.2 dB (median 21.9); a fourth at 0 lowered every batch
      slightly.
    * Labels: read off the gradient where it determines them (`extract_labels`: B = 1, or B
      classes proven present, the weight rows counting as proof when the final layer's inputs
      are non-negative). Otherwise the first stage optimises DLG's soft labels with the images,
      and the counts follow from the final bias gradient and the mean softmax of that stage's
      images (`privaudit.attacks.inversion.labels.count_labels`, Geng et al. 2021's rule with the reconstruction in
      place of their dummy data); the labels are assigned to the images by the soft labels
      (Hungarian assignment) and held fixed from the second stage on (iDLG's insight: fixed
      labels make the match easier). On 40 batches of eight (bench's victims and crops, seeds
      0–39) this counted 35 right, the mean softmax of 256 smooth random dummy images (Geng et
      al.'s way) 33. A miss is one sample moved between the two classes the model predicts
      most; screening the alternatives by 150 evaluations of the second stage did not find it
      (the wrong counts matched as well or better), so none is screened. Counting needs a
      plain gradient (no clipping, no step size, one local step) and a second stage; else the
      soft labels stay throughout.
    * Multi-step targets (LT-ADMM-DP's γ Σ_t g(φ^t)): τ·B images, one block of B per local step,
      with soft labels throughout. The last layer's gradient is then a sum over the steps, whose
      signs name the classes present but not the step of each, and on noiseless runs (τ = 2,
      B = 1, σ_e = 1e-6, `bench/multistep_inversion.py`, seeds 0–9) near-zero signals of absent
      classes took the noise's sign: the rule named a wrong class in 2 of 10 runs and no labels
      in 3, and gave 4 of the 5 right pairs in the wrong step order. The order matters as such:
      both steps are taken at nearly the same point (φ¹ is φ⁰ moved by γ times a smooth-clipped
      gradient, ≈ 0.1 against ‖φ⁰‖ ≈ 44), so images grown in each other's steps are a local
      minimum of the match (seeds 0–4: 20.5–29.0 dB, relative distance ≈ 1e-4 against the
      truth's ≈ 1e-8). Hence the second stage runs from every order of the first stage's step
      blocks (images with their labels) when there are at most `step_orders` (τ! ≤ 6: τ ≤ 3,
      else the first stage's order is kept), and the one of lowest objective goes on. In seeds
      0–4 the right order's objective was the lower by 1.5–6× after the stage's 500 evaluations
      (already after 50): 47.7, 34.2, 41.3, 40.5 and 38.0 dB, 16–18 s each, 2,000 evaluations;
      seeds 5–9: 14.3, 27.4, 42.4, 44.9 and 33.5 dB (1,000 evaluations a stage: 15.2, 40.0 and
      37.6 dB on seeds 5, 6 and 9). Seed 5's two records, of one class, are classified
      confidently (the first step's gradient has norm 0.085, ≈ 30 in seeds 0–1): four starts ended
      near 14.5 dB, though the truth is a basin (from it perturbed by N(0, 0.3²) the last two
      stages reach 31 dB). τ = 3 (six orders screened), seeds 0 and 1: 29.6 and 15.5 dB, 47 s.

    Measured (bench/inversion.py batch8: five batches of eight random crops, labels repeating,
    float64, one thread): 28.3, 22.0, 19.1, 27.7 and 30.3 dB, median 27.7 dB, median SSIM 0.80,
    the counts right in all five, 26–28 s per batch (1,500 evaluations at 17–19 ms, load 1.0–1.5).
    Twice the evaluations per stage gave 30.2, 23.0, 19.3, 28.6 and 31.0 dB (median 28.6) at
    twice the time. The two weak batches hold near-copies under one label (two or three crops of
    the same coins) that the reconstruction blends into each other, and a crop the model already
    classifies confidently (p_y ≈ 0.9): its share of the gradient is scaled by 1 − p_y.

    Tried and left out (bench's batches of eight): three independent restarts of the first
    stage, the lowest objective kept, ended within 4% of each other's objective and no better
    (17.8–19.1 dB after that stage on the two weak batches); a hyper-Laplacian prior
    (Σ|∇x|^½, Krishnan & Fergus 2009), meant to stop two images of a batch from blending into
    each other, gained 0.9–2.6 dB on three batches and lost 6 dB on the fourth;
    a per-layer normalised distance and a low-resolution parametrisation (the gradient depends
    on fine detail: the true images' 8×8 low-pass left a larger residual than a wrong optimum)
    were both worse.
    """

    tv_weights: Annotated[tuple[NonNegative, ...], Field(min_length=1)] = (1e-2, 1e-3, 1e-4)
    evaluations: Evaluations = 500
    step_orders: Count = 6
    history_size: Count = 400
    init_std: Positive = 0.1
    dtype: DType = "float64"

    title: ClassVar[str] = "Batch inversion"

    def run(
        self, target: Target, model: FlatModel, *, input_shape: tuple[int, ...], num_classes: int,
        batch_size: int, normalisation: Normalisation, seed: int, observer: Observer | None = None,
    ) -> Reconstruction:
        """Reconstruct `batch_size` inputs (τ·B for a τ-step target) and their labels."""
        started = time.perf_counter()
        _needs_cross_entropy(model, self.title)
        if not self.tv_weights:
            raise ValueError("tv_weights needs at least one weight (one stage)")
        setup = _Setup.build(target, model, input_shape, num_classes, batch_size, normalisation,
                             seed, self.dtype)
        problem = _unusable(setup)
        if problem:
            return _failed(problem, "extracted", started)
        candidates = _Candidates.start(setup, 1, self.init_std, None, boxed=False)
        plain = target.clipping is None and target.steps == 1 and target.step_size is None
        nonnegative = plain and final_inputs_nonnegative(model, setup.point, candidates.x[0].detach())
        labels = None if target.steps > 1 else extract_labels(setup.gradient, model, num_classes, setup.batch_size,
                                                              nonnegative_inputs=nonnegative)
        source = "optimised" if labels is None else "extracted"
        if labels is not None:
            candidates = _Candidates(candidates.x, candidates.logits.detach(), labels.expand(1, -1))
        scale = float(setup.gradient.square().sum()) or 1.0
        evaluations, tracker = 0, None
        for stage, weight in enumerate(self.tv_weights):
            orders = _step_orders(target.steps, self.step_orders) if stage == 1 else []
            screened: list[_Tracker] = []
            for start in [candidates.reordered(order) for order in orders] if len(orders) > 1 else [candidates]:
                screened.append(_Tracker(1, _shifted(observer, evaluations)))
                _lbfgs(setup, start, _relative_tv_objective(setup, weight, scale), screened[-1],
                       evaluations=self.evaluations, lr=1.0, history_size=self.history_size,
                       line_search="strong_wolfe", stop_at=-math.inf, project_every=None)
                evaluations += screened[-1].evaluations
                if screened[-1].stopped_by == "observer":
                    break
            tracker = min(screened, key=_rank)
            if (tracker.best_x is None or tracker.failure or screened[-1].stopped_by == "observer"
                    or stage == len(self.tv_weights) - 1):
                break
            if labels is None and plain:
                labels = _counted_labels(setup, tracker, nonnegative)
                source = "optimised" if labels is None else "counted"
            x = tracker.best_x.clone().requires_grad_(True)
            if labels is None:
                candidates = _Candidates(x, tracker.best_y.clone().requires_grad_(True), None)
            else:
                candidates = _Candidates(x, candidates.logits.detach(), labels.expand(1, -1))
        result = _finish(tracker, started, source)
        return dataclasses.replace(result, iterations=evaluations)


def _relative_tv_objective(setup: _Setup, weight: float, scale: float) -> Objective:
    """‖∇θ L(x̂, y) − g‖² / ‖g‖² + weight · TV(x̂), and the plain squared distance."""

    def objective(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        distance = squared_distance(setup.released(x, y), setup.gradient)
        return distance / scale + weight * total_variation(x), distance

    return objective


@dataclass(frozen=True)
class _Box:
    """The valid pixel box alone, which is all `_lbfgs` asks of a setup when it projects."""

    low: Tensor
    high: Tensor

    def project(self, x: Tensor) -> Tensor:
        return torch.maximum(torch.minimum(x, self.high), self.low)


def match_features(features: Callable[[Tensor], Tensor], wanted: Tensor, start: Tensor, normalisation: Normalisation,
                   *, evaluations: int, tv_weight: float, history_size: int = 100,
                   project_every: int | None = 25) -> Reconstruction:
    """Images x [K, ...] whose `features(x)` [K, F] match `wanted` [K, F]: the same L-BFGS as the
    attacks above (`_lbfgs`, from `start`, projected into the pixel box every `project_every`
    evaluations) on Σ_k ‖φ(x_k) − f_k‖² / ‖φ(s_k) − f_k‖² + tv_weight · TV(x) (Geiping et al.'s
    prior; Mahendran & Vedaldi 2015's representation inversion), for inputs read off a layer after
    a known function of the image, such as a CNN's features. Each distance is relative to the
    start's s_k, not to ‖f_k‖: features can vary by less than 0.1 % of their norm between records
    (lenet_dlg's sigmoids at torch's initialisation), and relative to the norm the whole
    difference between two images would weigh less than the prior. `loss` is that relative feature
    distance of the images returned."""
    started = time.perf_counter()
    channels = len(normalisation.mean)
    pixel_box = torch.stack([torch.zeros(channels), torch.ones(channels)]).to(start)
    low, high = normalisation.normalise(pixel_box.view(2, channels, 1, 1))
    box = _Box(low, high)
    with torch.no_grad():
        scale = (features(box.project(start)) - wanted).square().sum(-1).clamp_min(1e-30)
    labels = torch.zeros(1, len(start), dtype=torch.long, device=start.device)
    candidates = _Candidates(box.project(start).unsqueeze(0).requires_grad_(True), labels, labels)

    def objective(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        distance = ((features(x[0]) - wanted).square().sum(-1) / scale).sum().unsqueeze(0)
        return distance + tv_weight * total_variation(x), distance

    tracker = _Tracker(1, None)
    _lbfgs(box, candidates, objective, tracker, evaluations=evaluations, lr=1.0, history_size=history_size,
           line_search="strong_wolfe", stop_at=0.0, project_every=project_every)
    result = _finish(tracker, started, "none")
    if result.images is None:
        return result
    return dataclasses.replace(result, images=box.project(result.images), labels=None, restart=None,
                               restart_losses=())


def _step_orders(steps: int, limit: int) -> list[tuple[int, ...]]:
    """The orders of τ local steps to screen: all τ! of them when there are at most `limit`,
    else only the one the images already have."""
    if math.factorial(steps) > limit:
        return [tuple(range(steps))]
    return list(itertools.permutations(range(steps)))


def _rank(tracker: _Tracker) -> tuple[bool, bool, float]:
    """Sort key of screened runs: one with a finite iterate and no failure first, then the lowest
    objective."""
    return tracker.best_x is None, bool(tracker.failure), float(tracker.best_objective[0])


def _shifted(observer: Observer | None, offset: int) -> Observer | None:
    """The observer, told the evaluations of the earlier stages too."""
    if observer is None:
        return None
    return lambda evaluations, x, objective: observer(offset + evaluations, x, objective)


def _counted_labels(setup: _Setup, tracker: _Tracker, nonnegative: bool) -> Tensor | None:
    """Labels counted from the final bias gradient and the mean softmax of the tracked images,
    each assigned to an image by its soft labels (the Hungarian assignment maximising the summed
    log-probabilities); None when the gradient does not allow counting."""
    x, logits = tracker.best_x[0], tracker.best_y[0]
    with torch.no_grad():
        mean = setup.model.output(setup.point, x).softmax(-1).mean(0)
    counted = extract_labels(setup.gradient, setup.model, setup.num_classes, setup.batch_size,
                             mean_probabilities=mean, nonnegative_inputs=nonnegative)
    if counted is None:
        return None
    cost = -logits.detach().log_softmax(-1)[:, counted]
    slots, picks = linear_sum_assignment(cost.double().cpu().numpy())
    return counted[torch.as_tensor(picks[slots.argsort()])]


for _name, _cls in (("dlg", DLG), ("idlg", IDLG), ("ig", InvertingGradients), ("batch", BatchInversion)):
    register_inversion(_name, _cls)
