"""The adjacency an audit fixes: neighbouring pairs, the audit's setting, and norm geometry.

`Pair` and `Setting` are what every other submodule passes around (the mechanisms' candidates,
laws and claims are all functions of them), so they sit at the bottom of the package's imports;
`l1_reach` and `l2_reach` translate the audit's adjacency ‖x − x′‖_p ≤ 1 into the ℓ1 or ℓ2
sensitivity a mechanism's sound bound needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

NORMS: dict[str, float] = {"l1": 1.0, "l2": 2.0, "linf": math.inf}
"""The adjacencies an audit can use: ‖x − x′‖_p ≤ 1."""


def norm_name(norm: float) -> str:
    return {1.0: "ℓ1", 2.0: "ℓ2", math.inf: "ℓ∞"}[norm]


@dataclass(frozen=True)
class Pair:
    """Two neighbouring inputs x and x′ of a mechanism, with a short description."""

    x: np.ndarray
    x_prime: np.ndarray
    label: str

    def distance(self, norm: float) -> float:
        return float(np.linalg.norm(self.x_prime - self.x, ord=norm))

    def same_as(self, other: Pair) -> bool:
        return np.array_equal(self.x, other.x) and np.array_equal(self.x_prime, other.x_prime)

    def as_dict(self) -> dict[str, Any]:
        return {"x": self.x.tolist(), "x_prime": self.x_prime.tolist(), "label": self.label}


@dataclass(frozen=True)
class Setting:
    """What an audit fixes besides the mechanism: the adjacency ‖x − x′‖_norm ≤ 1, the input
    dimension, the number of releases of the same input the attacker sees together, and the δ at
    which ε is reported (also the δ of claims that take δ as an input)."""

    norm: float
    dim: int
    releases: int
    delta: float


def l1_reach(norm: float, dim: int) -> float:
    """sup ‖v‖₁ over ‖v‖_norm ≤ 1 in dimension dim (Hölder): 1, √dim, dim."""
    return dim ** (1.0 - 1.0 / norm) if math.isfinite(norm) else float(dim)


def l2_reach(norm: float, dim: int) -> float:
    """sup ‖v‖₂ over ‖v‖_norm ≤ 1 in dimension dim: 1 for ℓ1 and ℓ2, √dim for ℓ∞."""
    return math.sqrt(dim) if norm == math.inf else 1.0
