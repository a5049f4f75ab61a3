"""The mechanism interface and its registry.

`Mechanism` is what the audit samples, summarises and bounds (see the package docstring for what
each method says); `register` adds a subclass to `MECHANISMS`, and `build` makes one from
`privaudit audit`'s `--param` strings with one-line errors.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from privaudit.attacks.audit.mechanisms.adjacency import Pair, Setting
from privaudit.attacks.audit.mechanisms.claims import MechanismClaim, Sound
from privaudit.attacks.audit.mechanisms.laws import Factor, law_problem, privacy_curve
from privaudit.errors import ConfigError


class MechanismParams(BaseModel):
    """Base of every mechanism's parameters; unknown fields are errors, and so are inf and nan
    (`eps=inf` is no mechanism the accountants can analyse), and so are finite values whose noise
    scale or privacy loss the accountants cannot evaluate (`Mechanism.unaccountable`): refused
    here, every audit and a campaign's `check` refuse them before anything is sampled."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    mechanism: ClassVar[type[Mechanism] | None] = None
    """The mechanism these parameters belong to (`register` sets it)."""

    def consistent(self) -> None:
        """ValueError when the parameters contradict one another; checked before the accountants."""

    @model_validator(mode="after")
    def _accountable(self) -> MechanismParams:
        self.consistent()
        if self.mechanism is not None:
            problem = self.mechanism(self).unaccountable()
            if problem:
                raise ValueError(problem)
        return self


class Mechanism(ABC):
    """A release with known parameters; subclasses register themselves in `MECHANISMS`."""

    name: ClassVar[str]
    title: ClassVar[str]
    Params: ClassVar[type[MechanismParams]]
    finite: ClassVar[bool] = False
    primary: ClassVar[Literal["eps", "delta"]] = "eps"
    """Which bound the neighbour search maximises: ε at δ, or δ at the claim's ε (flat curves)."""
    defense: ClassVar[str | None] = None
    """The defense (`privaudit.defenses.DEFENSES` name) whose single release this is, if any: the report
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

    def unaccountable(self) -> str | None:
        """Why the accountants cannot evaluate this mechanism at its parameters, in one phrase that
        names them; None when they can. Tried where every audit starts, one release of one
        coordinate under ℓ1 (`REFERENCE`), at the claim's relation and the record level: the claim,
        the sound bound and the exact curve of the first candidate pair (`laws.law_problem`). An
        arithmetic error there is the parameters' fault, never turned into a number; what depends
        on the audit's dimension and releases is refused where the exact curve is formed."""
        beyond = f"{self.given()}: beyond what the accountants evaluate"
        try:
            for mechanism in (self, self.record_level()):
                with np.errstate(all="ignore"):  # an overflow here is the answer, not a warning to print
                    problem = None if mechanism is None else mechanism._reference_problem()
                if problem:
                    return f"{beyond}: {problem}"
        except (ArithmeticError, RecursionError, ValueError) as error:
            return f"{beyond} (their arithmetic fails: {type(error).__name__}: {error})"
        except ConfigError as error:
            return f"{beyond}: {error}"
        return None

    def _reference_problem(self) -> str | None:
        """What goes wrong at `REFERENCE` (see `unaccountable`): releases that are not numbers, an
        exact curve the accountant cannot form, a claim or sound bound that is NaN."""
        pair = self.candidates(REFERENCE.norm, REFERENCE.dim)[0]
        law = self.law(pair)
        problem = law_problem(law, REFERENCE.releases) if law else None
        if problem:
            return problem
        if not np.all(np.isfinite(self.sample(pair.x_prime, 4, np.random.default_rng(0)))):
            return "its releases overflow floating point (a noise scale or a shift beyond it)"
        claim = self.claim(REFERENCE)
        at = claim.eps if claim is not None and claim.eps is not None else 0.0
        sound = self.sound(REFERENCE, at)
        figures = {"sound ε": sound.eps, "sound δ": sound.delta}
        if law:
            curve = privacy_curve(law, REFERENCE.releases)
            figures |= {"exact ε": curve.epsilon(REFERENCE.delta), "exact δ": curve.delta(at)}
        if claim is not None:
            figures |= {"claimed ε": claim.claim.eps_claimed, "claimed δ": claim.claim.delta}
        undefined = [name for name, value in figures.items() if isinstance(value, float) and math.isnan(value)]
        return f"its accountant's {' and '.join(undefined)} are not numbers (NaN)" if undefined else None

    def given(self) -> str:
        """The parameters set, as `name = value` (the defaults when none is)."""
        named = ", ".join(f"{name} = {getattr(self.params, name)}" for name in sorted(self.params.model_fields_set))
        return named or "its defaults"


MECHANISMS: dict[str, type[Mechanism]] = {}


REFERENCE = Setting(1.0, 1, 1, 1e-5)
"""One release of one coordinate under ℓ1, at δ = 1e-5: where `Mechanism.unaccountable` tries the
accountants."""


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: make a mechanism available to `privaudit audit` under `cls.name`, and tie
    its parameters to it (their validation asks it whether the accountants can evaluate them)."""
    MECHANISMS[cls.name] = cls
    cls.Params.mechanism = cls
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
