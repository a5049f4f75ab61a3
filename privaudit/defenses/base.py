"""The defense interface and its registry.

A defense is a private decentralized algorithm as its paper describes it. The simulator calls
`step` once per round; the defense updates its agents and sends every message the paper sends on
the wire — nothing reaches an attacker any other way. Beside the algorithm, a defense states its
paper's claim (`claim`) and describes the mechanism it really runs as a dp_accounting event
(`mechanism`), so the sound accountant and the audits are independent of the claim.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import dp_accounting
import torch
from pydantic import BaseModel, ConfigDict
from torch import Tensor

from privaudit.accounting import Claim
from privaudit.setup import Setup
from privaudit.wire import Delivery, Wire


class DefenseParams(BaseModel):
    """Base of every defense's hyperparameters; unknown fields are errors, and so are inf and nan
    (no hyperparameter means anything by them: an infinite step size is a run that diverges)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Defense(ABC):
    """One private algorithm running N agents; subclasses register themselves in `DEFENSES`."""

    name: ClassVar[str]
    title: ClassVar[str]
    Params: ClassVar[type[DefenseParams]]

    def __init__(self, params: DefenseParams, setup: Setup) -> None:
        self.params = params
        self.setup = setup

    @functools.cached_property
    def W(self) -> Tensor:
        """The mixing matrix of every simulated agent, float32 [n, n]. On an audit's many worlds
        it is block-diagonal and grows as the square of their number: gossip with `gossip` instead."""
        return torch.tensor(self.setup.topology.W, dtype=torch.float32)

    delivers: ClassVar[bool] = False
    """Whether `step` mixes what the wire delivered (`gossip` with `Wire.broadcast_each`'s
    `Delivery`) rather than its own copy of the states it sent: only then can a participant who
    lies (`privaudit.wire.Malicious`) reach its neighbours. Read through `delivering`."""

    @classmethod
    def delivering(cls) -> bool:
        """`delivers` as the class that defines `step` declares it: a subclass that steps its own way
        does not inherit a parent's promise about a `step` it replaced."""
        owner = next(klass for klass in cls.__mro__ if "step" in vars(klass))
        return bool(vars(owner).get("delivers", False))

    def gossip(self, x: Tensor, delivered: Delivery | None = None) -> Tensor:
        """W x: one gossip step of the agents' stacked values x [n, ...]; with the `delivered`
        messages of that broadcast, each agent mixes what it received instead of what was sent."""
        mixed = self.setup.topology.mix(x)
        return mixed if delivered is None else delivered.mix(mixed, x, self.setup.topology)

    @abstractmethod
    def step(self, t: int, wire: Wire) -> None:
        """Run round `t` for every agent, sending its messages on `wire`."""

    @property
    @abstractmethod
    def states(self) -> Tensor:
        """Every agent's current model as rows of a [N, P] tensor (for evaluation)."""

    @abstractmethod
    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        """What the code really releases about one agent's data over `rounds` rounds;
        `NonPrivateDpEvent` when there is no DP noise."""

    @abstractmethod
    def claim(self, rounds: int) -> Claim:
        """The paper's claim for this run, with the sound ε of `mechanism(rounds)` beside it."""

    def public(self) -> dict[str, Any]:
        """Hyperparameters every attacker is assumed to know (the paper publishes them)."""
        return self.params.model_dump()


DEFENSES: dict[str, type[Defense]] = {}
"""Defenses by name: the shipped ones, registered when `defenses` is imported, and those defined
outside privaudit that a campaign names (`privaudit.defenses.external`)."""


def register(cls: type[Defense]) -> type[Defense]:
    """Class decorator: make a defense available to campaigns under `cls.name`."""
    DEFENSES[cls.name] = cls
    return cls
