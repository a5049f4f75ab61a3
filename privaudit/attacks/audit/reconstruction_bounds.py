"""The smallest ε a reconstruction attack's success forces: reconstruction robustness read backwards.

In the informed-adversary game (Balle, Cherubin & Hayes 2022, "Reconstructing Training Data with
Informed Adversaries"), each trial draws a target z from a prior π, releases M(D₋ ∪ {z}) and
lets the attack output one guess g; the trial succeeds when success(g, z) holds. If M is (ε, δ)-DP
for replacing one record, comparing M(D₋ ∪ {z}) with M(D₋ ∪ {z₀}) for a fixed z₀ — whose output,
and so whose guess, is independent of z — gives, for every attack,

    P[success] ≤ e^ε κ + δ,   κ = sup_g P_{z∼π}[success(g, z)]                          (ReRo)

where κ is the prior's baseline: the best success rate of a guess made without the release (the
"(ε, δ)-DP implies ReRo" bound of Balle et al. 2022, restated by Hayes, Mahloujifar & Balle 2023,
"Bounding data reconstruction attacks with the hypothesis testing interpretation of DP"). With k
successes in n independent trials of one game (same D₋, prior and attack; fresh z and randomness)
and p_LB the one-sided Clopper–Pearson lower bound on the success rate at confidence C, with
probability ≥ C

    ε ≥ ε_LB = log((p_LB − δ)/κ̄),   and 0 when p_LB − δ ≤ κ̄,

for any κ̄ ≥ κ: a larger κ gives a smaller bound, so only an upper bound on κ keeps ε_LB sound.

For the criterion "PSNR(g, z) ≥ τ" of `privaudit.metrics` (PSNR = 10·log10(1/MSE) on [0, 1]
pixels, MSE over every pixel of one image), a success is MSE(g, z) ≤ r² with r² = 10^(−τ/10). Under
a prior uniform over candidates x_1..x_N, `psnr_kappa` brackets κ:

    κ ≥ max_i |{j : MSE(x_i, x_j) ≤ r²}| / N          (guess a candidate)
    κ ≤ max_i |{j : RMSE(x_i, x_j) ≤ 2r}| / N          (every success set has RMSE-diameter ≤ 2r,
                                                       so lies in the 2r-ball of any member)

— RMSE is a metric, MSE is not, hence the ball of MSE radius (2r)² = 4r². The metrics clip a
guess to [0, 1], which only narrows the guesses the upper bound ranges over. One guess per trial:
an attack scored on its best of m guesses needs κ for m guesses. Nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import beta as beta_law

_CHUNK_ENTRIES = 1 << 22
"""Pairwise distances held at once (32 MiB of float64): 10,000 candidates go 419 rows at a time."""

_UNIT_ROUNDOFF = 2.0 ** -53


def clopper_pearson_lower(successes: Any, trials: Any, level: float) -> np.ndarray:
    """One-sided lower confidence bound at `level` on a binomial rate (Clopper & Pearson 1934):
    the p with P(Bin(trials, p) ≥ successes) = 1 − level, i.e. the (1 − level) quantile of
    Beta(successes, trials − successes + 1); 0 when no trial succeeded."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    bound = beta_law.ppf(1.0 - level, np.maximum(k, 1.0), n - k + 1.0)
    return np.where(k <= 0, 0.0, bound)


@dataclass(frozen=True)
class ReconstructionBound:
    """A lower bound `eps_lb` on ε at `delta`, holding with probability ≥ `confidence`, with its
    evidence: `successes` of `trials`, their Clopper–Pearson lower bound `p_lower`, the baseline
    upper bound `kappa` the bound divides by and a lower bound `kappa_lower` (their gap says how
    loose the baseline is), and what counted as a success."""

    eps_lb: float
    successes: int
    trials: int
    p_lower: float
    kappa: float
    kappa_lower: float
    delta: float
    confidence: float
    criterion: str
    method: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reconstruction_bound(successes: int, trials: int, kappa: float, delta: float, confidence: float,
                         kappa_lower: float | None = None, criterion: str = "") -> ReconstructionBound:
    """ε_LB = log((p_LB − δ)/κ) from k successes in n trials (module docstring, (ReRo)); `kappa`
    must bound the baseline from above (1/N for exact identification among N equally likely
    candidates, `psnr_kappa`'s upper value for a PSNR threshold). `kappa_lower` defaults to
    `kappa`, i.e. a baseline known exactly."""
    kappa_lower = kappa if kappa_lower is None else kappa_lower
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 ≤ successes ≤ trials and trials ≥ 1, got {successes} of {trials}")
    if not 0 < kappa_lower <= kappa <= 1:
        raise ValueError(f"need 0 < kappa_lower ≤ kappa ≤ 1, got kappa_lower={kappa_lower}, kappa={kappa}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must lie in [0, 1), got {delta}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    p_lower = float(clopper_pearson_lower(successes, trials, confidence))
    eps_lb = math.log((p_lower - delta) / kappa) if p_lower - delta > kappa else 0.0
    method = (f"ReRo read backwards: eps >= log((p_LB - delta)/kappa), p_LB one-sided Clopper-Pearson at "
              f"{confidence} (Balle, Cherubin & Hayes 2022; Hayes, Mahloujifar & Balle 2023)")
    return ReconstructionBound(eps_lb, int(successes), int(trials), p_lower, float(kappa), float(kappa_lower),
                               float(delta), float(confidence), criterion, method)


def psnr_kappa(candidates: Any, threshold_db: float) -> tuple[float, float]:
    """(lower, upper) bounds on the baseline κ of "PSNR ≥ `threshold_db`" under a prior uniform over
    `candidates` ([N, ...] pixels in [0, 1], numpy or torch): the two ball counts of the module
    docstring, with r² = 10^(−τ/10). Distinct candidates further apart than 2r give 1/N twice."""
    if hasattr(candidates, "detach"):
        candidates = candidates.detach().cpu()
    pixels = np.asarray(candidates, dtype=np.float64)
    if pixels.ndim < 1 or pixels.shape[0] < 1 or pixels[0].size < 1:
        raise ValueError(f"candidates must be a non-empty [N, ...] array, got shape {pixels.shape}")
    if not math.isfinite(threshold_db):
        raise ValueError(f"threshold_db must be finite, got {threshold_db}")
    if not np.all((pixels >= 0.0) & (pixels <= 1.0)):
        raise ValueError("candidates must be [0, 1] pixels, as privaudit.metrics scores them (denormalise first)")
    radius2 = 10.0 ** (-threshold_db / 10.0)
    sure, possible = _ball_counts(pixels.reshape(len(pixels), -1), radius2, 4.0 * radius2)
    return int(sure.max()) / len(pixels), int(possible.max()) / len(pixels)


def _ball_counts(flat: np.ndarray, within: float, beyond: float) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate i, how many candidates j surely have MSE(x_i, x_j) ≤ `within` and how many
    possibly have MSE(x_i, x_j) ≤ `beyond`. MSE comes from ‖a‖² + ‖b‖² − 2a·b in chunks of rows;
    its rounding error is at most 4γ_{d+3}(‖a‖² + ‖b‖²)/d (Higham 2002, §3.1), and each count errs
    on its own safe side of it (and of a 1e-12 relative margin on the radii), so the lower κ is
    attained and the upper κ is sound whatever the rounding."""
    n, d = flat.shape
    norms = np.einsum("ij,ij->i", flat, flat)
    gamma = 4.0 * (d + 3) * _UNIT_ROUNDOFF / (1.0 - (d + 3) * _UNIT_ROUNDOFF)
    sure, possible = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    step = max(1, _CHUNK_ENTRIES // n)
    for start in range(0, n, step):
        stop = min(start + step, n)
        scale = norms[start:stop, None] + norms[None, :]
        mse = np.maximum(scale - 2.0 * (flat[start:stop] @ flat.T), 0.0) / d
        error = gamma * scale / d
        low, high = mse - error, mse + error
        rows = np.arange(stop - start)
        low[rows, rows + start] = high[rows, rows + start] = 0.0
        sure[start:stop] = np.count_nonzero(high <= within * (1.0 - 1e-12), axis=1)
        possible[start:stop] = np.count_nonzero(low <= beyond * (1.0 + 1e-12), axis=1)
    return sure, possible
