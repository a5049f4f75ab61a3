"""Claims and sound accounting.

A defense states two things about privacy, kept apart on purpose:

* its **claim**: what its paper asserts, evaluated literally for the run's parameters, with every
  assumption needed to evaluate it written down (see SPEC.md, rule 1);
* its **mechanism**: what the code really releases, described as a dp_accounting `DpEvent`
  (composed over rounds and neighbours), so that a standard accountant gives a **sound** ε.

This module holds the `Claim` record and the accountant calls. It imports no torch, so the
accounting and the audit statistics can be used on their own. Fixed-size batches drawn without
replacement, which dp_accounting's PLD accountant does not support and its RDP accountant bounds
loosely, have their own tight accountant here (`without_replacement_epsilon`).
"""

from __future__ import annotations

import functools
import logging
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence
from typing import Any, Literal

import attr
import dp_accounting
import numpy as np
from dp_accounting import pld, privacy_accountant, rdp
from dp_accounting.pld import pld_pmf, privacy_loss_distribution, privacy_loss_mechanism

from privaudit.limits import require

# dp_accounting logs one warning per RDP order it cannot evaluate and then excludes that order,
# which is the sound behaviour; the warnings would flood every campaign log.
logging.getLogger("absl").setLevel(logging.ERROR)

Accountant = Literal["rdp", "pld"]
Relation = Literal["add_remove", "replace_one"]
_RELATIONS = {
    "add_remove": privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": privacy_accountant.NeighboringRelation.REPLACE_ONE,
}


FINDING_KINDS = ("premise violated", "premise not enforced", "outside its theorem's range", "no sound bound",
                 "vacuous claim")
"""Analytic findings about a claim, which need no attack: it does not apply to the run (its premise
failed, or the code does not enforce it for records), or says nothing."""

OUTSIDE_RANGE = "outside its theorem's range"
"""The finding that makes a claim unrefutable in a run: the theorem (or a lemma its proof uses)
does not cover the run's parameters, so no audit of the run can contradict it."""

VACUOUS = "vacuous claim"
"""The finding of a claim that constrains nothing (δ ≥ 1 or ε = ∞): every mechanism satisfies it,
so no audit can refute it and an audit's verdict says so."""

Unit = Literal["record", "gradient", "state"]


@dataclass(frozen=True)
class Neighbours:
    """The neighbouring relation a claim is stated for, which an audit of the claim must test.

    `unit` is what differs between the two neighbouring inputs: one record of the agent's data,
    the agent's gradients at one iteration (a premise on them, such as Wang & Zhang's Definition 1:
    they differ by at most C), or the mechanism's input state (Wang & Başar's Theorem 3). `change`
    is add/remove or replace-one. `premise` says the relation in the paper's words.
    `record_factor` is how far one record replaced can move a release beyond what the relation
    allows, under the code's own clipping: 1 at the record level, 2 for "gradients differ by ≤ C"
    under per-record clipping to norm C (the code does not enforce the premise for records, and
    the record-level guarantee is that factor weaker), None where no record-level bound exists
    (an unclipped gradient moves a state without bound)."""

    change: Literal["add/remove", "replace-one"]
    unit: Unit = "record"
    premise: str = ""
    record_factor: float | None = 1.0

    @property
    def enforced(self) -> bool:
        """Whether every pair of records the code can see stays within the claim's relation."""
        return self.record_factor == 1.0

    def words(self) -> str:
        """The relation in one phrase, for rows and reports."""
        what = {"record": "one record", "gradient": "one sample's gradient", "state": "the input state"}[self.unit]
        return f"{self.change}, {what}" + (f" ({self.premise})" if self.premise else "")


ThreatKind = Literal["honest-but-curious", "eavesdropper", "any adversary"]
THREAT_KINDS: tuple[ThreatKind, ...] = ("honest-but-curious", "eavesdropper", "any adversary")
_THREAT_PHRASES = {"honest-but-curious": "honest-but-curious agents", "eavesdropper": "an external eavesdropper",
                   "any adversary": "any adversary"}


@dataclass(frozen=True)
class ClaimThreat:
    """The adversary a claim's theorem is stated against, which decides what evidence can refute it.

    `kind` is "honest-but-curious" (agents, colluding or not, that follow the protocol and keep
    what they receive), "eavesdropper" (an outsider who hears the messages on the links) or "any
    adversary" (the theorem bounds what anyone who observes the releases learns, whatever they send:
    a clipped and noised release is DP whatever point it is computed at, so adaptive
    composition covers an agent that chooses that point). `source` is where that reading comes
    from: the paper's words and section, or, where no paper text was read, privaudit's reading of
    the mechanism, said as such. An active attack (one that sends crafted messages) is outside a
    claim whose kind is not "any adversary": its result is a finding there, never a refutation
    (`privaudit.attacks.audit.verdict.decide`)."""

    kind: ThreatKind
    source: str

    @property
    def covers_active(self) -> bool:
        """Whether an adversary that sends crafted messages is inside the claim's threat model."""
        return self.kind == "any adversary"

    def words(self) -> str:
        """The threat model in one phrase, for rows and reports."""
        return f"{_THREAT_PHRASES[self.kind]} ({self.source})"


@dataclass(frozen=True)
class AssumedConstant:
    """A constant a claim needs and the paper never gives, with the value assumed to evaluate it.

    `power`: the claimed ε is proportional to value**power when the other constants are held, so
    a verdict resting on it can say for which values it holds (`privaudit.attacks.audit.verdict`); None where the
    claim moves with it in no such way, and `effect` says how it does in words."""

    name: str
    assumed: float
    power: float | None
    effect: str


@dataclass(frozen=True)
class Claim:
    """A defense's privacy claim for one run, beside the sound ε of the mechanism it runs.

    `eps_claimed` is the paper's formula recomputed for the run; `eps_stated` is a number the
    paper prints for this configuration (None when it prints none); `eps_sound` comes from a
    standard accountant on the real mechanism (None when no sound bound exists, with the reason
    in `sound_method`). A mismatch between any two of them is a finding, never corrected.
    Where the notion is (0, δ)-DP, `delta` is the claimed δ and `delta_sound` the sound one.
    `statements` lists further claims the paper makes about the same mechanism (another norm,
    a growth rate over the horizon), each to be audited on its own. `findings` are what the
    defense itself found wrong with the claim in this run, as (kind, sentence) with a kind of
    `FINDING_KINDS` (its premise failed, it lies outside its theorem's range); `analytic` adds
    those that follow from the numbers alone (no sound bound, a vacuous claim). `neighbours` is
    the claim's own neighbouring relation (what an audit of it must test, and `eps_sound` is
    computed for), `constants` the constants assumed to evaluate it, which every verdict built
    on it carries, `threat` the adversary its theorem is stated against (`ClaimThreat`: what an
    active attack's result means for it; None only where nothing is claimed).
    """

    defense: str
    notion: str
    adjacency: str
    eps_claimed: float | None
    eps_stated: float | None
    eps_sound: float | None
    delta: float | None
    horizon: int | str | None
    equation: str
    sound_method: str
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    delta_sound: float | None = None
    statements: tuple[str, ...] = field(default_factory=tuple)
    findings: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    neighbours: Neighbours | None = None
    constants: tuple[AssumedConstant, ...] = field(default_factory=tuple)
    threat: ClaimThreat | None = None

    def problem(self) -> str | None:
        """What makes this claim unusable, in words, or None: a privacy loss that is not a number
        ≥ 0 (∞ allowed), a δ outside [0, 1], a text field that is not text. Shipped defenses never
        trip it; a defense written elsewhere can, and a report must not show δ = 2 as a claim."""
        for name in ("eps_claimed", "eps_stated", "eps_sound"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                          and value >= 0):
                return f"{name} = {value!r} is not a privacy loss (a number >= 0, or None)"
        for name in ("delta", "delta_sound"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                          and 0 <= value <= 1):
                return f"{name} = {value!r} is not a probability in [0, 1] (or None)"
        for name in ("defense", "notion", "adjacency", "equation", "sound_method"):
            if not isinstance(getattr(self, name), str):
                return f"{name} = {getattr(self, name)!r} is not text"
        if self.threat is not None and not (isinstance(self.threat, ClaimThreat) and self.threat.kind in THREAT_KINDS
                                            and isinstance(self.threat.source, str) and self.threat.source.strip()):
            return (f"threat = {self.threat!r} is not a ClaimThreat of a kind in {', '.join(THREAT_KINDS)} "
                    "with a source in words")
        return None

    @classmethod
    def no_privacy(cls, defense: str, horizon: int | str | None, equation: str, reason: str) -> Claim:
        """The claim of an algorithm that adds no DP noise: nothing claimed, no sound bound."""
        return cls(defense=defense, notion="none", adjacency="none", eps_claimed=None, eps_stated=None,
                   eps_sound=None, delta=None, horizon=horizon, equation=equation, sound_method=reason)

    def analytic(self) -> list[tuple[str, str]]:
        """Every analytic finding about this claim: the defense's own, then a vacuous claim (δ ≥ 1
        or ε = ∞ constrains nothing) and a claim with no sound bound beside it."""
        found = list(self.findings)
        if self.notion == "none":
            return found
        if self.delta is not None and self.delta >= 1:
            found.append((VACUOUS, f"the claimed δ = {self.delta:g} ≥ 1 constrains nothing"))
        elif self.eps_claimed is not None and math.isinf(self.eps_claimed):
            found.append((VACUOUS, "the claimed ε = ∞ constrains nothing"))
        if self.eps_sound is None and self.delta_sound is None:
            found.append(("no sound bound", f"no sound bound exists for the mechanism the code runs: {self.sound_method}"))
        return found

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["assumptions"] = list(self.assumptions)
        record["statements"] = list(self.statements)
        record["findings"] = [{"kind": kind, "text": text} for kind, text in self.analytic()]
        record["constants"] = [asdict(constant) for constant in self.constants]
        return record

    def outside(self) -> list[str]:
        """The sentences saying the claim lies outside its theorem's range in this run."""
        return [text for kind, text in self.findings if kind == OUTSIDE_RANGE]


PLD_COST_LIMIT = 1000.0
"""The largest √T / σ² (T composed events, σ the smallest Gaussian noise multiplier in them) the
PLD accountant is asked for: its grid grows about as that cost, about 2 MB per unit. Measured
here (Poisson rate 0.2, peak memory): σ = 0.3, T = 30: 0.26 GB; σ = 1, T = 10⁵: 1.3 GB; σ = 0.1,
T = 30: 1.1 GB; σ = 0.05, T = 30: 4.2 GB in 30 s; σ = 0.1, T = 1000 and σ = 0.3, T = 10⁵ passed
6 GB; σ = 0.02, T = 30 reached 24 GB. Beyond it the RDP accountant gives the sound bound
(`tightest`), looser than PLD but finite, and a claim says so."""


def _gaussian_noise(event: dp_accounting.DpEvent) -> list[float]:
    """The noise multipliers of the Gaussian events inside `event`."""
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return [event.noise_multiplier]
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return _gaussian_noise(event.event)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return [noise for part in event.events for noise in _gaussian_noise(part)]
    inner = getattr(event, "event", None)
    return _gaussian_noise(inner) if isinstance(inner, dp_accounting.DpEvent) else []


def pld_cost(event: dp_accounting.DpEvent) -> float:
    """√T / σ² of `event` (`PLD_COST_LIMIT`); 0 without a Gaussian."""
    noise = _gaussian_noise(event)
    return math.sqrt(compositions(event)) / min(noise) ** 2 if noise else 0.0


def tightest(event: dp_accounting.DpEvent) -> Accountant:
    """The tightest accountant that can evaluate `event` on this machine: PLD, unless its grid
    would pass `PLD_COST_LIMIT`, then RDP."""
    return "rdp" if pld_cost(event) > PLD_COST_LIMIT else "pld"


def sound_method(event: dp_accounting.DpEvent, accountant: Accountant, noise_multiplier: float, steps: str) -> str:
    """The sound ε's method in words, for a claim: the PLD accountant, or — where its grid's cost
    (`pld_cost`) is over `PLD_COST_LIMIT` — the RDP accountant, saying why and that it is looser by an
    unmeasured margin. `steps` names what composes ("30 rounds", "15 updates")."""
    if accountant == "pld":
        return "PLD accountant (dp_accounting, pessimistic) on the same event"
    return (f"RDP accountant on the same event: at σ = {noise_multiplier:g} over {steps} the PLD grid "
            f"(√T / σ² = {pld_cost(event):.4g} > {PLD_COST_LIMIT:g}) needs more memory than a machine has; the RDP "
            "bound is sound and looser than PLD's by an unmeasured margin")


def epsilon(event: dp_accounting.DpEvent, delta: float, accountant: Accountant = "pld",
            relation: Relation = "add_remove") -> float:
    """ε at `delta` of the composed `event` under the given adjacency of one agent's dataset.

    "pld" (privacy loss distributions, pessimistic discretisation) is the tightest sound bound
    dp_accounting offers for Gaussian and Laplace events; "rdp" is the moments accountant most
    DP-SGD papers report (Mironov 2017; Abadi et al. 2016), kept for comparison with them.
    Sampling without replacement is analysed by dp_accounting only under "replace_one" and by
    the RDP accountant only, loosely: `without_replacement_epsilon` is its tight accountant.
    Pure ε-DP (Laplace) composes additively: see `pure_epsilon`.

    `relation` is dp_accounting's, and changes the number, not only its label: a noise multiplier
    is relative to the sensitivity of adding or removing one record, so under "replace_one" the PLD
    accountant takes a Gaussian's sensitivity as 2 (the ε of σ/2 under "add_remove"); its RDP
    accountant gives a plain Gaussian the same ε under both and refuses a Poisson-sampled one under
    "replace_one" (ValueError above). Pass the relation the claim states (`Neighbours.change`), and
    the noise multiplier relative to add/remove (docs/extending.md).
    """
    key = (_event_key(event), delta, accountant, relation)
    if key[0] is None:
        return _epsilon(event, delta, accountant, relation)
    if key not in _EPSILONS:
        _EPSILONS[key] = _epsilon(event, delta, accountant, relation)
    return _EPSILONS[key]


_EPSILONS: dict[Any, float] = {}
"""`epsilon` once per mechanism, δ, accountant and relation (`_event_key`): a run states a claim
several times (planning its cells, each audit's game, each row), and one PLD composition takes
about half a second."""


def _event_key(value: Any) -> Any:
    """A hashable value equal for two DpEvents exactly when they describe the same mechanism: the
    event's class and each of its fields, lists and tuples as tuples, every leaf with its type (so
    that a count 10 and 10.0 stay apart); None where a field is not hashable (no cache)."""
    if attr.has(type(value)):
        fields = tuple(_event_key(getattr(value, name.name)) for name in attr.fields(type(value)))
        return None if None in fields else (type(value), fields)
    if isinstance(value, (list, tuple)):
        items = tuple(_event_key(item) for item in value)
        return None if None in items else (type(value), items)
    try:
        hash(value)
    except TypeError:
        return None
    return (type(value), value)


def _epsilon(event: dp_accounting.DpEvent, delta: float, accountant: Accountant, relation: Relation) -> float:
    """`epsilon` computed by the accountant, every time."""
    if accountant == "rdp":
        engine = rdp.RdpAccountant(neighboring_relation=_RELATIONS[relation])
    elif accountant == "pld":
        engine = pld.PLDAccountant(neighboring_relation=_RELATIONS[relation])
    else:
        raise ValueError(f"unknown accountant '{accountant}' (choose from rdp, pld)")
    if not engine.supports(event):
        raise ValueError(f"the {accountant} accountant does not support {type(event).__name__} "
                         f"under {relation} adjacency")
    require_compositions(event)
    if accountant == "pld" and tightest(event) == "rdp":
        raise ValueError(f"this event's PLD grid (√T / σ² = {pld_cost(event):.4g} > {PLD_COST_LIMIT:g}) needs more "
                         "memory than a machine has: use the RDP accountant (`tightest`)")
    engine.compose(event)
    return float(engine.get_epsilon(delta))


def pure_epsilon(sensitivities: Sequence[float], scales: Sequence[float]) -> float:
    """ε of releasing each query with ℓ1 sensitivity Δ_k through Laplace noise of scale b_k:
    pure ε-DP composes additively, ε = Σ_k Δ_k / b_k (Dwork & Roth 2014, Thm 3.6 and 3.16)."""
    if len(sensitivities) != len(scales):
        raise ValueError("one Laplace scale per sensitivity is needed")
    return float(sum(delta / scale for delta, scale in zip(sensitivities, scales)))


def subsampled_gaussian(sampling_rate: float, noise_multiplier: float, steps: int) -> dp_accounting.DpEvent:
    """`steps` compositions of the Poisson-subsampled Gaussian mechanism (DP-SGD's release)."""
    step = dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier))
    return dp_accounting.SelfComposedDpEvent(step, steps)


# ---------------------------------------------------------------------------------------------
# Fixed-size sampling without replacement under replace-one adjacency


WITHOUT_REPLACEMENT_METHOD = (
    "tight PLD accountant for fixed-size sampling without replacement under replace-one (the dominating "
    "pair of Zhu, Dong & Wang 2022, Prop. 30 and Cor. 32: the Poisson-subsampled Gaussian's 'remove' "
    "PLD above loss 0, its mirror image below; connect-the-dots discretisation, self-composed by "
    "dp_accounting)")
"""The `sound_method` words for a figure from `without_replacement_epsilon` / `_delta`."""

_GRID = 4000
"""Grid points per sign of one step's privacy loss: the discretisation interval is h = L/4000, with
L the largest finite loss kept (beyond it lies mass below e^-50). Against h ten times finer, ε moved
by less than 2e-5 relatively on six settings (seed 002 §VI: 707.510 against 707.502; 1000 steps at
s 366, q 2/3, a DPDL ring; 10,000 steps at s 5, q 0.01; …), and seed 002's 16,000 steps compose
in 0.05 s."""


_LOSS_CEILING = 1e4
"""A step whose privacy loss reaches beyond this many nats (noise below about 1/140 of the
sensitivity) gets no finite bound: its grid would be too coarse to mean anything, and dp_accounting's
discretisation overflows far before the loss is reached. ∞ is then the sound answer."""


def _unbounded(event: dp_accounting.DpEvent) -> bool:
    """Whether a step of `event` has a privacy loss beyond `_LOSS_CEILING` (then no finite ε)."""
    return any(_largest_loss(noise, rate) > _LOSS_CEILING for noise, rate, _ in _steps(event))


def compositions(event: dp_accounting.DpEvent) -> int:
    """How many basic events `event` composes (self-compositions multiplied out, compositions
    summed): what a PLD accountant's arrays grow with (10⁸ took 1.7 GB and 10 s here)."""
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return event.count * compositions(event.event)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return sum(compositions(part) for part in event.events)
    return 1


def require_compositions(event: dp_accounting.DpEvent) -> None:
    """ConfigError when `event` composes more events than the `compositions` limit allows
    (LT-ADMM-DP's τ = 424255037 asked a PLD for 29.8 GB)."""
    require("compositions", compositions(event), "the claim's accountant would compose")


def without_replacement_epsilon(event: dp_accounting.DpEvent, delta: float) -> float:
    """ε at `delta` of `event`, a composition of `SampledWithoutReplacementDpEvent`s of Gaussians
    under replace-one adjacency, with the tight accountant of `without_replacement_pld`; ∞ when the
    noise is too small for a finite bound (`_LOSS_CEILING`)."""
    require_compositions(event)
    if _unbounded(event):
        return math.inf
    return float(without_replacement_pld(event).get_epsilon_for_delta(delta))


def without_replacement_delta(event: dp_accounting.DpEvent, eps: float) -> float:
    """δ at ε = `eps` of the same composition (see `without_replacement_epsilon`), at most 1
    (rounding can lift the PLD's sum a few ulps above it); 1 when no finite bound exists."""
    require_compositions(event)
    if _unbounded(event):
        return 1.0
    return min(1.0, float(without_replacement_pld(event).get_delta_for_epsilon(eps)))


def without_replacement_pld(event: dp_accounting.DpEvent) -> privacy_loss_distribution.PrivacyLossDistribution:
    """A pessimistic PLD of `event` made of steps `SampledWithoutReplacementDpEvent(m, B, G)`, composed
    by `SelfComposedDpEvent` / `ComposedDpEvent`, with G a `GaussianDpEvent` or a composition of them
    on the same batch. A Gaussian's noise multiplier is its noise std over the ℓ2 sensitivity Δ of
    the batch statistic under replacing one record (the record's effect when it is in the batch).

    Each step is the Gaussian mechanism on a batch of B of m records drawn uniformly without
    replacement, q = B/m. Under replace-one the record is in the batch with probability q in both
    worlds, and the step's privacy profile for ε ≥ 0 is that of the pair (qN(Δ, s²) + (1−q)N(0, s²),
    N(0, s²)) (Balle, Barthe & Gaboardi 2018, sampling without replacement under substitution:
    ε' = log(1 + q(e^ε − 1)), δ' = qδ), attained when every other record equals the replacement.
    The relation is symmetric, so for ε < 0 the profile is that of the pair swapped. Zhu, Dong &
    Wang 2022 give this two-part bound (Prop. 30) and the single pair that dominates both parts and
    so composes, adaptively too (Cor. 32): its PLD is the Poisson-subsampled Gaussian's "remove" PLD
    on losses > 0, that PLD mirrored (mass e^-ℓ ω(ℓ) at −ℓ) on losses < 0, and an atom at 0 (in
    f-DP terms, Dong, Roth & Su 2022's C_q(f) = min{f_q, f_q^-1}**).

    Composing the "remove" pair alone is what Poisson accountants report (Opacus's PRV); Lebeda,
    Regehr, Kamath & Steinke 2024 conjecture, without proof, that it suffices for the Gaussian.
    They also show that the mixture pair dp_accounting builds for REPLACE_ONE with sampling_prob,
    q N(−Δ/2) + (1−q)N(0) against q N(Δ/2) + (1−q)N(0), does not dominate sampling without
    replacement: for seed 002 §VI it gives ε = 56.3, below the ≈ 619.7 of the "remove" datasets,
    where this accountant gives 707.5.

    Each step's profile is discretised by connect-the-dots (Doroshenko et al. 2022, Algorithm 1;
    pessimistic) on a grid of `_GRID` points per sign, the steps self-composed and composed by
    dp_accounting (truncated tails go to the infinite loss). Cached: a claim and its audit ask for
    the same event.
    """
    return _composed_pld(_steps(event))


def _steps(event: dp_accounting.DpEvent) -> tuple[tuple[float, float, int], ...]:
    """`event` as sorted (noise multiplier, sampling rate, count) triples, equal steps merged."""
    counts: Counter[tuple[float, float]] = Counter()
    _count_steps(event, 1, counts)
    if not counts:
        raise ValueError("the event holds no SampledWithoutReplacementDpEvent to account for")
    return tuple(sorted((noise, rate, count) for (noise, rate), count in counts.items()))


def _count_steps(event: dp_accounting.DpEvent, times: int, counts: Counter[tuple[float, float]]) -> None:
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        _count_steps(event.event, times * event.count, counts)
    elif isinstance(event, dp_accounting.ComposedDpEvent):
        for inner in event.events:
            _count_steps(inner, times, counts)
    elif isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
        if not 0 < event.sample_size <= event.source_dataset_size:
            raise ValueError(f"sample_size {event.sample_size} must be in 1..source_dataset_size "
                             f"({event.source_dataset_size})")
        counts[(_noise_multiplier(event.event), event.sample_size / event.source_dataset_size)] += times
    else:
        raise ValueError(f"the without-replacement accountant handles compositions of "
                         f"SampledWithoutReplacementDpEvent(Gaussian) only, not {type(event).__name__}")


def _noise_multiplier(event: dp_accounting.DpEvent) -> float:
    """The one Gaussian equivalent to Gaussians σ_k on the same batch: σ = (Σ_k σ_k^-2)^(-1/2)
    (μ-GDP composes as μ = √Σ μ_k², Dong, Roth & Su 2022, Cor. 3.3; the sum of the releases is
    sufficient, so the equivalence is exact)."""
    return 1 / math.sqrt(_precision(event))


def _precision(event: dp_accounting.DpEvent) -> float:
    if isinstance(event, dp_accounting.GaussianDpEvent):
        if event.noise_multiplier <= 0:
            raise ValueError(f"the noise multiplier must be positive, not {event.noise_multiplier}")
        return event.noise_multiplier ** -2
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return event.count * _precision(event.event)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return sum(_precision(inner) for inner in event.events)
    raise ValueError(f"a batch sampled without replacement must feed Gaussian releases, not {type(event).__name__}")


@functools.lru_cache(maxsize=32)
def _composed_pld(steps: tuple[tuple[float, float, int], ...]) -> privacy_loss_distribution.PrivacyLossDistribution:
    """Every step on one grid, the finest any of them needs (PLDs compose only on a common grid)."""
    interval = min(_largest_loss(noise, rate) for noise, rate, _ in steps) / _GRID
    composed = None
    for noise, rate, count in steps:
        step = privacy_loss_distribution.PrivacyLossDistribution(_step_pmf(noise, rate, interval))
        step = step.self_compose(count)
        composed = step if composed is None else composed.compose(step)
    return composed


def _remove_loss(noise: float, rate: float) -> privacy_loss_mechanism.GaussianPrivacyLoss:
    """The pair (q N(1, σ²) + (1−q) N(0, σ²), N(0, σ²)), in units of Δ."""
    return privacy_loss_mechanism.GaussianPrivacyLoss(noise, sensitivity=1.0, sampling_prob=rate,
                                                      adjacency_type=privacy_loss_mechanism.AdjacencyType.REMOVE)


def _largest_loss(noise: float, rate: float) -> float:
    return _remove_loss(noise, rate).connect_dots_bounds().epsilon_upper


def _step_pmf(noise: float, rate: float, interval: float) -> pld_pmf.PLDPmf:
    """Connect-the-dots PMF of the dominating pair's profile on the grid kh, |k| ≤ L/h: δ(ε) is the
    "remove" pair's for ε ≥ 0 and 1 − e^ε + e^ε δ(−ε) for ε < 0 (the pair is symmetric, and
    H_α(P‖Q) = 1 − α + α H_{1/α}(Q‖P) for any pair)."""
    top = math.ceil(_largest_loss(noise, rate) / interval)
    above = np.asarray(_remove_loss(noise, rate).get_delta_for_epsilon(np.arange(top + 1) * interval))
    below_eps = -np.arange(top, 0, -1) * interval
    below = -np.expm1(below_eps) + np.exp(below_eps) * above[:0:-1]
    return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, -top, top,
                                                                 np.concatenate([below, above]))
