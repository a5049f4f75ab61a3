"""What one round of a defense's messages says about a canary, and the per-round likelihood ratio
of the mechanism the defense really runs.

An end-to-end canary audit listens to the running algorithm with a threat model's tap, turns the
messages of each round into the victim's released gradients with the suite's extractors
(`privaudit.attacks.extraction`: the attacker's whole view, nothing of the defense's state), projects each onto
the canary's direction, and scores the round by the log-likelihood ratio of that projection under
the two worlds. One round's law, per defense, in units of the noise along the direction:

    y_c = k · shift_c + noise_c,   k ~ Binomial(draws, inclusion)  (canary in k of the round's batches)

in the world with the canary, and k · (−shift_c) (the anti-canary, replace-one) or 0 (add/remove)
in the world without it; channels c of one round share k, their noises are independent. The sum
over rounds of log f_in(y)/f_out(y) is the Neyman–Pearson statistic of the rounds taken one by one
(Nasr et al. 2023 sum per-step likelihood ratios the same way); where a law is approximate (DPDL's
data-dependent calibration weights, Wang & Zhang Alg. 1's two-draw Laplace error, the ternary
quantizer's error) the statistic is still a fixed function of what was heard, so every bound built
on it stays valid — only its power depends on the approximation.

A channel that adds no noise (undefended D-PSGD, DPDL's ND variant, ternary quantization, whose
only randomness is the quantizer's) has no likelihood ratio; its statistic is the projection
weighted by its shift, summed.

Each defense's view module (`privaudit/attacks/views/<defense>.py`) defines its channel — which extractors
it reads, the adjacency of the claim audited (add/remove or replace-one), how long the gradient
canary is, and the law — and registers it (`privaudit.attacks.views.register_channel`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor

from privaudit.attacks.extraction import Extractor
from privaudit.accounting import Unit
from privaudit.topology import Topology
from privaudit.wire import PublicKnowledge, Tap, Transcript

Adjacency = Literal["add/remove", "replace-one"]
Family = Literal["gaussian", "laplace"]


@dataclass(frozen=True)
class Reading:
    """One channel of one round for every victim: the released vectors [R, P] (float64, divided by
    the noise scale so that their projection on a unit direction has unit noise), the model points
    [R, P] at which each was computed, and `gain` [R]: the projection's shift per unit of the
    canary's clipped gradient length when the canary is in one batch."""

    vectors: Tensor
    points: Tensor
    gain: Tensor


@dataclass(frozen=True)
class RoundLaw:
    """How the canary enters one round (module docstring): `draws` batches per round, each holding
    the canary with probability `inclusion`; `family` the unit noise law (None: no noise)."""

    inclusion: float
    draws: int = 1
    family: Family | None = "gaussian"


def _log_density(z: Tensor, family: Family) -> Tensor:
    """Log density of unit noise up to a constant (it cancels in every ratio)."""
    return -0.5 * z.square() if family == "gaussian" else -z.abs()


def log_likelihood_ratio(y: Tensor, shift: Tensor, law: RoundLaw, adjacency: Adjacency) -> Tensor:
    """log f_in(y)/f_out(y) of one round's projections y [R, c] with shifts [R, c] (module docstring);
    without noise, the shift-weighted projection Σ_c y_c shift_c. Returns [R]."""
    if law.family is None:
        return (y * shift).sum(-1)
    counts = torch.arange(law.draws + 1, dtype=y.dtype)
    weights = torch.tensor([math.log(math.comb(law.draws, k)) for k in range(law.draws + 1)], dtype=y.dtype)
    p = min(max(law.inclusion, 1e-300), 1.0)
    weights = weights + counts * math.log(p) + ((law.draws - counts) * math.log1p(-p) if p < 1 else
                                                 torch.where(counts < law.draws, -math.inf, 0.0))

    if law.family == "gaussian":
        # −½‖y − k·s‖² = −½‖y‖² + k⟨y, s⟩ − ½k²‖s‖²: the −½‖y‖² cancels in the ratio, so each mixture
        # needs only ⟨y, s⟩ and ‖s‖² per row ([R, draws + 1] terms, not [R, draws + 1, c])
        projection, energy = (y * shift).sum(-1), shift.square().sum(-1)

        def mixture(sign: float) -> Tensor:
            if law.draws == 1:  # two terms: logaddexp is several times faster than logsumexp
                return torch.logaddexp(weights[0].expand_as(projection),
                                       weights[1] + sign * projection - 0.5 * energy)
            return torch.logsumexp(weights + sign * counts * projection[:, None]
                                   - 0.5 * counts.square() * energy[:, None], dim=1)

        without = mixture(-1.0) if adjacency == "replace-one" else torch.zeros_like(projection)
        return mixture(1.0) - without

    def mixture(sign: float) -> Tensor:
        means = sign * counts[None, :, None] * shift[:, None, :]
        return torch.logsumexp(weights + _log_density(y[:, None, :] - means, law.family).sum(-1), dim=1)

    without = mixture(-1.0) if adjacency == "replace-one" else _log_density(y, law.family).sum(-1)
    return mixture(1.0) - without


def targets(extract: Any, transcript: Transcript, victims: list[int], round: int,
             **options: Any) -> tuple[Tensor, Tensor]:
    """The extractor's target for every victim: gradients [R, P] (float64) and points [R, P]."""
    found = [extract(transcript, victim, round, **options) for victim in victims]
    return (torch.stack([target.gradient.double() for target in found]),
            torch.stack([target.point.double() for target in found]))


class Channel(ABC):
    """One defense's canary channel (module docstring), made with the extractors it reads, in the
    order `read` takes them."""

    defense: ClassVar[str]
    adjacency: ClassVar[Adjacency]
    unit: ClassVar[Unit] = "record"
    """What the canary pair changes: one record, or (for a gradient-level claim) one sample's gradient."""
    coordinate: ClassVar[bool] = False
    """Whether the gradient canary lies along one coordinate (an ℓ1 mechanism's worst direction)."""
    pair: ClassVar[str] = ""
    """How the two worlds' canary records differ, in words, for the audit's row."""
    unaudited: ClassVar[str | None] = None
    """Why this channel's bound cannot be set against the defense's claim, when it cannot."""

    def __init__(self, *extractors: Extractor) -> None:
        foreign = [f"{e.defense}/{e.scenario}" for e in extractors if e.defense != self.defense]
        if not extractors or foreign:
            raise ValueError(f"a '{self.defense}' channel reads that defense's extractors, got "
                             f"{', '.join(foreign) or 'none'}")
        self.extractors = list(extractors)

    @property
    def scenarios(self) -> tuple[str, ...]:
        return tuple(e.scenario for e in self.extractors)

    def reads(self, round: int) -> range:
        """The rounds whose messages observing `round` needs."""
        spans = [e.rounds(round) for e in self.extractors]
        return range(max(0, min(s.start for s in spans)), max(s.stop for s in spans))

    def last_observable(self, rounds: int) -> int:
        """The last round a run of `rounds` rounds lets the attacker observe."""
        return max(t for t in range(rounds) if self.reads(t).stop <= rounds)

    def heard(self, tap: Tap, victim: int, network: Topology) -> list[str]:
        """The scenarios `tap` can feed for `victim`; ValueError naming what it misses when none."""
        usable = [e.scenario for e in self.extractors if e.missing(tap, victim, network) is None]
        if not usable:
            self.extractors[0].check(tap, victim, network)
        return usable

    @abstractmethod
    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        """The length of the gradient canary (its clipped length is what enters a release), from the
        defense's public hyperparameters."""

    @abstractmethod
    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        """The round's readings, one per channel heard (`scenarios`), for victims holding `records`
        records each."""

    @abstractmethod
    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        """How the canary enters round `round` for a victim holding `records` records."""

    @abstractmethod
    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        """What a canary gradient of each length [R] contributes along its direction, after the
        defense's clipping, in the units `Reading.gain` multiplies."""


class PairChannel(Channel):
    """The canary pair of a released-model game on a defense whose view registers no extractor: the
    attacker reads final states, never a message, so the game needs only the relation the pair
    tests and the gradient canary's length. It reads nothing and states no law."""

    def __init__(self, defense: str, adjacency: Adjacency, coordinate: bool = False, norm: float = 1.0) -> None:
        self.defense, self.adjacency, self.coordinate, self.norm = defense, adjacency, coordinate, norm
        self.pair = ("one of the victim's records replaced by the canary, or by the anti-canary"
                     if adjacency == "replace-one" else "the canary record added to the victim's data, or absent")
        self.extractors = []

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        return self.norm

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        raise ValueError(f"'{self.defense}' registers no extractor: a released-model game reads no message")

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        raise ValueError(f"'{self.defense}' states no law: a released-model game reads final states")

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths


def fixed_batch(batch_size: int, records: int) -> float:
    """Inclusion probability of one record in a batch of `batch_size` drawn without replacement from
    `records`."""
    return min(1.0, batch_size / records)


class ProjectionChannel(Channel):
    """The law-free channel of any defense whose view has extractors: each extractor the tap feeds
    is one channel, its target (the victim's released gradient, update or estimate, exactly as the
    view rebuilds it from what was heard) projected on the canary's direction, with no noise law,
    no scale and no gain. The statistic built on it (`privaudit.attacks.audit.canary_audit`, statistic
    "projection") learns each round's weight on held-out runs, so nothing about the mechanism is
    assumed: it tests the code, not a model of it. An extractor that cannot be read at some round
    (a momentum difference at round 0) is left out of that round, the same in every run."""

    def __init__(self, defense: str, extractors: list[Extractor], adjacency: Adjacency,
                 coordinate: bool = False, norm: float = 1.0) -> None:
        self.defense = defense
        self.adjacency = adjacency
        self.coordinate = coordinate
        self.norm = norm
        self.pair = ("one of the victim's records replaced by the canary, or by the anti-canary"
                     if adjacency == "replace-one" else "the canary record added to the victim's data, or absent")
        super().__init__(*extractors)

    def canary_norm(self, hyper: Mapping[str, Any]) -> float:
        return self.norm

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        readings = []
        for extractor in self.extractors:
            if extractor.scenario not in scenarios:
                continue
            try:
                gradients, points = targets(extractor.extract, transcript, victims, round)
            except ValueError:
                continue
            readings.append(Reading(gradients, points, torch.ones(len(victims), dtype=torch.float64)))
        return readings

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return RoundLaw(1.0, family=None)

    def clipped(self, hyper: Mapping[str, Any], lengths: Tensor) -> Tensor:
        return lengths
