"""Wang & Başar's stochastic ternary quantizer (seed 004, Definition 2) as a mechanism of its own.

`Q(x)_c = r · sign(x_c) · b_c` with independent `b_c ~ Bernoulli(|x_c| / r)`: every coordinate is
sent as one of the three levels {−r, 0, r}, and `E[Q(x)] = x`. The paper requires `r ≥ ‖x‖_∞`
and does not say what happens otherwise. Our decision: **saturate** — the Bernoulli probability
is clipped to 1, so a coordinate with |x_c| > r is sent as `r · sign(x_c)` with certainty (the
quantizer is then biased, and the paper's DP statement, which assumes the premise, does not
apply to that draw). `on_overflow="raise"` refuses such inputs instead; `overflows(x, r)` counts
them so that a run can report how often the premise failed.

Beside the sampler (`ternary`) this module gives the quantizer's exact output law and the exact
privacy quantities an audit needs, all without running a defense:

* `ternary_pmf(x, r)`: P(Q(x)_c = level) for the levels (−r, 0, r), coordinate by coordinate.
* `coordinate_tv(x, y, r)`: the total-variation distance of Q(x)_c and Q(y)_c. With `|x_c|,
  |y_c| ≤ r`: `|x_c − y_c| / r` when x_c y_c ≥ 0 (same sign, or one of them 0), and
  `max(|x_c|, |y_c|) / r` when the signs differ (Q(x)_c puts |x_c|/r on r, Q(y)_c puts |y_c|/r
  on −r, and the zero level differs by ||x_c| − |y_c||/r). Both cases are ≤ |x_c − y_c| / r.
* `ternary_tv(x, y, r, draws)`: the exact TV of `draws` independent quantizations of x and of y
  (vectors), by enumerating the outcome counts of the coordinates where the laws differ.
* `worst_case_delta(r, dim, norm, sensitivity, draws)`: the exact sup of that TV over all inputs
  with `‖x − y‖_p ≤ sensitivity` — the smallest δ for which Q is (0, δ)-DP, since (0, δ)-DP is
  exactly TV ≤ δ.

The worst case follows from two facts. (1) For product laws, max_c TV_c ≤ TV ≤ 1 − Π_c (1 − TV_c)
(couple each coordinate maximally; the couplings agree everywhere with probability Π(1 − TV_c)),
and for `draws` i.i.d. releases the product runs over coordinates and draws. (2) The upper bound
is attained at x = 0: Q(0) is the point mass at 0, so the TV is 1 − P(Q(y) = 0) =
1 − Π_c (1 − |y_c|/r). Hence the sup is 1 − min Π_c (1 − min(1, a_c/r))^draws over shifts
a ≥ 0 with ‖a‖_p ≤ sensitivity, and δ_T = 1 − (1 − δ_1)^T **exactly** for T draws of the same
input (not merely as a bound). Because Q(y) then puts mass on outcomes that Q(0) never produces,
the hockey-stick divergence is the same at every ε ≥ 0: no ε > 0 buys a smaller δ. The same
sequential coupling bounds T adaptively chosen inputs, so 1 − (1 − δ_1)^T is also a sound bound
for a run in which every iteration's pair of inputs is within the adjacency.

The minimisation over a: ℓ1 puts all of the shift on one coordinate (Σ log(1 − a_c/r) is concave,
minimised at a vertex), δ = min(1, Δ/r) — Theorem 3's 1/r, tight. ℓ∞ shifts every coordinate by
Δ, δ = 1 − (1 − min(1, Δ/r))^dim. For 1 < p < ∞ the KKT condition a_c^{p−1}(r/Δ − a_c) = const has
one root below 1 when r/Δ ≥ p/(p−1), so the optimum shifts k coordinates equally and δ is the
largest of 1 − (1 − k^{−1/p}Δ/r)^k over k = 1..dim (exact; for ℓ2 and r ≥ 2Δ this is k = dim,
δ ≈ √dim·Δ/r). Below that threshold we return the sound bound 1 − (1 − Δ/r)^{dim^{1−1/p}} (the
chord of the convex −log(1 − a/r) and Hölder's Σ a_c ≤ dim^{1−1/p} Δ) and say it is a bound.
Saturated inputs (|x_c| > r) have the law of their clipped values, and clipping to [−r, r] shrinks
every ℓp distance, so these sups also hold over all of R^dim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import attr
import dp_accounting
import numpy as np
import torch
from numpy.typing import ArrayLike
from scipy.special import gammaln
from torch import Tensor

LEVELS: tuple[int, int, int] = (-1, 0, 1)
"""The output levels in units of r, in the order `ternary_pmf` lists their probabilities."""

Overflow = Literal["clip", "raise"]
_MAX_OUTCOMES = 1 << 22


def _check_threshold(r: float) -> None:
    if not r > 0:
        raise ValueError(f"ternary quantizer threshold r must be > 0, got {r}")


def outside(x: Tensor, r: float) -> Tensor:
    """Where `x` breaks the paper's premise |x_c| ≤ r (non-finite values included)."""
    return ~(x.abs() <= r)


def overflows(x: Tensor, r: float) -> int:
    """How many coordinates of `x` break the paper's premise |x_c| ≤ r."""
    return int(outside(x, r).sum())


def ternary(x: Tensor, r: float, generator: torch.Generator | None = None, *,
            on_overflow: Overflow = "clip") -> Tensor:
    """One draw of Q(x) (Definition 2) for every coordinate of `x`, any shape, in one call.

    `b_c = [u_c < min(1, |x_c|/r)]` with u_c uniform on [0, 1), so P(b_c = 1) is exactly the
    clipped ratio; coordinates with |x_c| > r saturate at r·sign(x_c) (see the module docstring),
    or raise ValueError when `on_overflow="raise"`. Same generator state, same draw.
    """
    _check_threshold(r)
    if on_overflow not in ("clip", "raise"):
        raise ValueError(f"on_overflow must be 'clip' or 'raise', got {on_overflow!r}")
    magnitude = x.abs()
    if on_overflow == "raise" and bool(outside(x, r).any()):
        raise ValueError(f"ternary quantizer input has ‖x‖_∞ = {float(magnitude.max()):.4g} > r = {r}: "
                         f"{overflows(x, r)} coordinates out of range")
    uniform = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
    return r * torch.sign(x) * (uniform < (magnitude / r).clamp(max=1.0)).to(x.dtype)


def _as_array(x: ArrayLike | Tensor) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


def ternary_pmf(x: ArrayLike | Tensor, r: float) -> np.ndarray:
    """The exact law of Q(x): shape [..., 3], P(Q(x)_c = level · r) for level in `LEVELS`.

    Uses the same saturation as `ternary` for |x_c| > r, so it is the law of what is sent.
    """
    _check_threshold(r)
    values = _as_array(x)
    ones = np.clip(np.abs(values) / r, 0.0, 1.0)
    return np.stack([np.where(values < 0, ones, 0.0), 1.0 - ones, np.where(values > 0, ones, 0.0)], axis=-1)


def coordinate_tv(x: ArrayLike | Tensor, y: ArrayLike | Tensor, r: float) -> np.ndarray:
    """Exact TV between Q(x)_c and Q(y)_c for every coordinate c (closed forms in the module
    docstring); computed from the laws, so saturated inputs are handled as they are sent."""
    return 0.5 * np.abs(ternary_pmf(x, r) - ternary_pmf(y, r)).sum(axis=-1)


def _count_law(pmf: np.ndarray, draws: int) -> np.ndarray:
    """P(counts of each level = n) over `draws` i.i.d. draws of one coordinate, for every count
    vector n (a sufficient statistic, so the TV over counts equals the TV over sequences)."""
    low = np.arange(draws + 1)
    n_low, n_mid = np.meshgrid(low, low, indexing="ij")
    keep = n_low + n_mid <= draws
    counts = np.stack([n_low[keep], n_mid[keep], draws - n_low[keep] - n_mid[keep]], axis=-1)
    log_coef = gammaln(draws + 1) - gammaln(counts + 1).sum(axis=-1)
    return np.exp(log_coef) * np.prod(np.power(pmf, counts), axis=-1)


def ternary_tv(x: ArrayLike | Tensor, y: ArrayLike | Tensor, r: float, draws: int = 1) -> float:
    """Exact TV between the laws of `draws` independent quantizations of x and of y.

    Coordinates where the two laws agree are dropped (a common independent factor leaves the TV
    unchanged); the others are enumerated by their level counts. ValueError when that would
    exceed 2^22 joint outcomes — use `worst_case_delta` or the coupling bound 1 − Π(1 − TV_c)^draws.
    """
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    px, py = ternary_pmf(x, r).reshape(-1, 3), ternary_pmf(y, r).reshape(-1, 3)
    if px.shape != py.shape:
        raise ValueError(f"x and y must have the same number of coordinates, got {len(px)} and {len(py)}")
    differ = np.abs(px - py).sum(axis=1) > 0
    per_coordinate = (draws + 1) * (draws + 2) // 2
    if per_coordinate ** int(differ.sum()) > _MAX_OUTCOMES:
        raise ValueError(f"{int(differ.sum())} differing coordinates × {draws} draws is too many outcomes to "
                         "enumerate; use worst_case_delta or the coupling bound")
    joint_x, joint_y = np.ones(1), np.ones(1)
    for cx, cy in zip(px[differ], py[differ]):
        joint_x = np.outer(joint_x, _count_law(cx, draws)).ravel()
        joint_y = np.outer(joint_y, _count_law(cy, draws)).ravel()
    return float(0.5 * np.abs(joint_x - joint_y).sum())


@dataclass(frozen=True)
class WorstCase:
    """The sup over adjacent inputs of the TV of Q's output, and a pair that attains it.

    `delta` is that sup (the exact (0, δ)-DP level) when `exact`, else a sound upper bound.
    The attaining pair is x = 0 and y with its first `coordinates` entries equal to `shift`
    (`pair()` builds it); None when only a bound is known.
    """

    delta: float
    exact: bool
    coordinates: int | None
    shift: float | None

    def pair(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        if self.coordinates is None or self.shift is None:
            raise ValueError("no attaining pair is known: delta is only an upper bound")
        y = np.zeros(dim)
        y[: self.coordinates] = self.shift
        return np.zeros(dim), y


def _norm_order(norm: float | str) -> float:
    if norm in ("inf", "linf", math.inf):
        return math.inf
    if isinstance(norm, str) and norm.startswith("l"):
        norm = norm[1:]
    order = float(norm)
    if order < 1:
        raise ValueError(f"the adjacency norm must be an ℓp norm with p >= 1, got p = {order}")
    return order


def worst_case_delta(r: float, *, dim: int = 1, norm: float | str = 1, sensitivity: float = 1.0,
                     draws: int = 1) -> WorstCase:
    """sup TV(Q(x)^{⊗draws}, Q(y)^{⊗draws}) over x, y ∈ [−r, r]^dim with ‖x − y‖_p ≤ sensitivity.

    `norm` is p (1, 2, …, or "inf"/"linf"). This is the smallest δ for which `draws` releases of
    Q are (0, δ)-DP under that adjacency, at every ε ≥ 0 (module docstring). Exact for ℓ1, ℓ∞,
    and for 1 < p < ∞ when r ≥ sensitivity · p/(p−1); otherwise a sound upper bound, marked so.
    """
    _check_threshold(r)
    if dim < 1 or draws < 1 or not sensitivity > 0:
        raise ValueError(f"need dim >= 1, draws >= 1 and sensitivity > 0, got {dim}, {draws}, {sensitivity}")
    p = _norm_order(norm)
    rho = r / sensitivity

    def compose(one: float) -> float:
        return -math.expm1(draws * math.log1p(-one)) if one < 1 else 1.0

    if rho <= 1:
        return WorstCase(1.0, True, 1, r)
    if p == 1:
        return WorstCase(compose(1.0 / rho), True, 1, sensitivity)
    if p == math.inf:
        return WorstCase(compose(-math.expm1(dim * math.log1p(-1.0 / rho))), True, dim, sensitivity)
    if rho >= p / (p - 1):
        k = np.arange(1, dim + 1, dtype=np.float64)
        log_keep = k * np.log1p(-(k ** (-1.0 / p)) / rho)
        best = int(np.argmin(log_keep))
        return WorstCase(compose(-math.expm1(float(log_keep[best]))), True, best + 1,
                         sensitivity * (best + 1) ** (-1.0 / p))
    spread = dim ** (1.0 - 1.0 / p)
    return WorstCase(compose(-math.expm1(spread * math.log1p(-1.0 / rho))), False, None, None)


@attr.s(frozen=True)
class TernaryQuantizerDpEvent(dp_accounting.UnsupportedDpEvent):
    """`count` releases of the ternary quantizer with threshold r on a `dimension`-vector.

    No dp_accounting accountant supports it (it is an `UnsupportedDpEvent`, so every accountant's
    `supports` is False); it carries what an audit needs to rebuild the mechanism, and the exact
    accounting for input adjacency is `worst_case_delta`.
    """

    threshold = attr.ib()
    dimension = attr.ib()
    count = attr.ib()
