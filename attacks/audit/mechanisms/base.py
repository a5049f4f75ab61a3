"""The mechanism interface and its registry.

`Mechanism` is what the audit samples, summarises and bounds (see the package docstring for what
each method says); `register` adds a subclass to `MECHANISMS`, and `build` makes one from
`privaudit audit`'s `--param` strings with one-line errors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from attacks.audit.mechanisms.adjacency import Pair, Setting
from attacks.audit.mechanisms.claims import MechanismClaim, Sound
from attacks.audit.mechanisms.laws import Factor
from privaudit.errors import ConfigError


class MechanismParams(BaseModel):
    """Base of every mechanism's parameters; unknown fields are errors, and so are inf and nan
    (`eps=inf` is no mechanism the accountants can analyse)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Mechanism(ABC):
    """A release with known parameters; subclasses register themselves in `MECHANISMS`."""

    name: ClassVar[str]
    title: ClassVar[str]
    Params: ClassVar[type[MechanismParams]]
    finite: ClassVar[bool] = False
    primary: ClassVar[Literal["eps", "delta"]] = "eps"
    """Which bound the neighbour search maximises: ε at δ, or δ at the claim's ε (flat curves)."""
    defense: ClassVar[str | None] = None
    """The defense (`defenses.DEFENSES` name) whose single release this is, if any: the report
    sets the audit beside that defense's runs."""

    def __init__(self, params: MechanismParams) -> None:
        self.params = params

    @abstractmethod
    def sample(self, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` independent releases of M(x): shape [n, dim]."""

    def statistic(self, outputs: np.ndarray, pair: Pair) -> np.ndarray | None:
        """A per-release summary [m, k] of outputs [m, dim] that the audit tests on, or None."""
        return None

    @abstractmethod
    def candidates(self, norm: float, dim: int) -> list[Pair]:
        """Neighbouring pairs at ‖x − x′‖_norm ≤ 1, the most distinguishable first where known."""

    @abstractmethod
    def law(self, pair: Pair) -> list[Factor] | None:
        """The exact law of one release of M(x) against M(x′), or None when none is available."""

    def claim(self, setting: Setting) -> MechanismClaim | None:
        """The claim stated for this mechanism, evaluated for the setting; None when none is."""
        return None

    @abstractmethod
    def sound(self, setting: Setting, at: float) -> Sound:
        """A sound bound over the adjacency, with δ at ε = `at`."""

    def record_level(self) -> Mechanism | None:
        """The same release at the record level, where the claim's relation is a premise the code
        does not enforce for records (a gradient-level relation under per-record clipping): the
        audit then also measures what one record replaced leaks. None when the claim's relation
        is already the record level, or has no record-level bound."""
        return None


MECHANISMS: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: make a mechanism available to `privaudit audit` under `cls.name`."""
    MECHANISMS[cls.name] = cls
    return cls


def build(name: str, params: dict[str, Any] | None = None) -> Mechanism:
    """The mechanism `name` with `params` (strings are converted); ConfigError in one line."""
    if name not in MECHANISMS:
        raise ConfigError(f"unknown mechanism '{name}' (choose from {', '.join(MECHANISMS)})")
    cls = MECHANISMS[name]
    try:
        return cls(cls.Params.model_validate(params or {}))
    except ValidationError as error:
        first = error.errors()[0]
        where = "".join(f"--param {part}: " for part in first["loc"][:1])
        if first["type"] == "extra_forbidden":
            what = f"unknown parameter (choose from {', '.join(cls.Params.model_fields)})"
        elif first["type"] == "value_error":
            what = str(first["ctx"]["error"])
        else:
            what = f"{first['msg']} (got {first.get('input')!r})"
        raise ConfigError(f"{name}: {where}{what}") from None
