"""Pieces shared by the location mechanisms, M(x) = x (or a multiple of it) + independent noise:
the Laplace and Gaussian mechanisms (`textbook.py`) and the defenses' releases (`releases.py`).

Boundary candidate pairs, sufficient statistics (the Laplace log-likelihood ratio, the Gaussian
projection), the exact Laplace law, and `GaussianLocation`, the base of every release that is a
Gaussian shift of its input; `_unit` also builds the candidates of randomized response and the
quantizers.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np

from privaudit.attacks.audit.mechanisms.adjacency import Pair, Setting, l2_reach
from privaudit.attacks.audit.mechanisms.base import Mechanism
from privaudit.attacks.audit.mechanisms.laws import Factor, GaussianFactor, LaplaceFactor, PrivacyCurve, privacy_curve


def _unit(dim: int, k: int = 0) -> np.ndarray:
    vector = np.zeros(dim)
    vector[k] = 1.0
    return vector


def _location_pairs(norm: float, dim: int, symmetric: bool = False) -> list[Pair]:
    """Boundary shifts of a location mechanism from x = 0: one coordinate by 1 (the ℓ1 vertex),
    every coordinate by 1/√dim (ℓ2) or by 1 (ℓ∞); with `symmetric`, also x = −v/2, x′ = v/2."""
    zero = np.zeros(dim)
    shifts = [(_unit(dim), "one coordinate moved by 1")]
    if dim > 1 and norm == 2:
        shifts.append((np.full(dim, dim ** -0.5), "every coordinate moved by 1/√dim"))
    if dim > 1 and norm == math.inf:
        shifts.append((np.ones(dim), "every coordinate moved by 1"))
    pairs = [Pair(zero, v, f"x = 0, x′: {text}") for v, text in shifts]
    if symmetric:
        pairs += [Pair(-v / 2, v / 2, f"x = −v/2, x′ = v/2, v: {text}") for v, text in shifts]
    return pairs


ROUNDING_DECIMALS = 9
"""Statistics that fold the output (|y − x| − |y − x′|) are rounded to this many decimals: in
floating point, y = x + noise and y = x′ + noise lie on different lattices of doubles, and a
folded statistic exposes those last bits (Mironov 2012) — a real weakness of the float sampler,
which would make the audit measure the implementation's low bits instead of the mechanism."""


def _laplace_log_ratio(outputs: np.ndarray, mean: np.ndarray, mean_prime: np.ndarray, scale: float) -> np.ndarray:
    """log p(y | x′) − log p(y | x) of independent Laplace(scale) coordinates: the exact
    log-likelihood ratio, a sufficient statistic for the pair (rounded: `ROUNDING_DECIMALS`)."""
    moved = mean != mean_prime
    y = outputs[:, moved]
    ratio = (np.abs(y - mean[moved]) - np.abs(y - mean_prime[moved])).sum(axis=1) / scale
    return np.round(ratio, ROUNDING_DECIMALS)[:, None]


def _projection(outputs: np.ndarray, mean: np.ndarray, mean_prime: np.ndarray) -> np.ndarray:
    """⟨y − mean, mean′ − mean⟩: for spherical Gaussian noise, an increasing function of the
    log-likelihood ratio, hence a sufficient statistic for the pair."""
    return ((outputs - mean) @ (mean_prime - mean))[:, None]


def _laplace_factors(scale: float, shift: np.ndarray) -> list[Factor]:
    """Independent Laplace coordinates moved by |shift_c|; equal shifts are grouped."""
    moved = np.abs(shift[shift != 0])
    values, counts = np.unique(moved, return_counts=True)
    return [LaplaceFactor(scale, float(v), int(c)) for v, c in zip(values, counts)]


class GaussianLocation(Mechanism):
    """A release whose law, in the input's units, is x plus spherical Gaussian noise of std
    `input_sigma`: against a neighbour it is a Gaussian shift of ‖x − x′‖₂, the projection on
    x′ − x is sufficient, and the boundary pairs are the location pairs."""

    @property
    @abstractmethod
    def input_sigma(self) -> float:
        """The noise std in units of the input (its ℓ2 sensitivity)."""

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray:
        return _projection(outputs, pair.x, pair.x_prime)

    def candidates(self, norm: float, dim: int) -> list[Pair]:
        return _location_pairs(norm, dim)

    def law(self, pair: Pair) -> list[Factor]:
        shift = pair.distance(2)
        return [GaussianFactor(self.input_sigma, shift)] if shift > 0 else []

    def worst_curve(self, setting: Setting) -> tuple[PrivacyCurve, float]:
        """The exact curve of the worst pair of the adjacency (the largest ℓ2 shift it allows), and
        that shift."""
        reach = l2_reach(setting.norm, setting.dim)
        return privacy_curve([GaussianFactor(self.input_sigma, reach)], setting.releases), reach
