"""What one round of a defense's messages says about a canary, and the per-round likelihood ratio
of the mechanism the defense really runs.

An end-to-end canary audit listens to the running algorithm with a threat model's tap, turns the
messages of each round into the victim's released gradients with the suite's extractors
(`attacks.views.extraction`: the attacker's whole view, nothing of the defense's state), projects each onto
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

`CHANNELS` maps each defense to its channel: which extractor scenarios it reads, the adjacency of
the claim audited (add/remove or replace-one), how long the gradient canary is, and the law.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor

from attacks.views.extraction import EXTRACTORS, Extractor, dpdl_cross_gradient, dpdl_self_gradient
from defenses.ternary import schedule as ternary_schedule
from defenses.tvss import Schedule
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

    def mixture(sign: float) -> Tensor:
        means = sign * counts[None, :, None] * shift[:, None, :]
        return torch.logsumexp(weights + _log_density(y[:, None, :] - means, law.family).sum(-1), dim=1)

    without = mixture(-1.0) if adjacency == "replace-one" else _log_density(y, law.family).sum(-1)
    return mixture(1.0) - without


def _targets(extract: Any, transcript: Transcript, victims: list[int], round: int,
             **options: Any) -> tuple[Tensor, Tensor]:
    """The extractor's target for every victim: gradients [R, P] (float64) and points [R, P]."""
    found = [extract(transcript, victim, round, **options) for victim in victims]
    return (torch.stack([target.gradient.double() for target in found]),
            torch.stack([target.point.double() for target in found]))


class Channel(ABC):
    """One defense's canary channel (module docstring)."""

    defense: ClassVar[str]
    scenarios: ClassVar[tuple[str, ...]]
    adjacency: ClassVar[Adjacency]
    unit: ClassVar[Unit] = "record"
    """What the canary pair changes: one record, or (for a gradient-level claim) one sample's gradient."""
    coordinate: ClassVar[bool] = False
    """Whether the gradient canary lies along one coordinate (an ℓ1 mechanism's worst direction)."""
    pair: ClassVar[str] = ""
    """How the two worlds' canary records differ, in words, for the audit's row."""
    unaudited: ClassVar[str | None] = None
    """Why this channel's bound cannot be set against the defense's claim, when it cannot."""

    @property
    def extractors(self) -> list[Extractor]:
        return [EXTRACTORS[self.defense, scenario] for scenario in self.scenarios]

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
    def canary_norm(self, hyper: dict[str, Any]) -> float:
        """The length of the gradient canary (its clipped length is what enters a release)."""

    @abstractmethod
    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        """The round's readings, one per channel heard (`scenarios`), for victims holding `records`
        records each."""

    @abstractmethod
    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        """How the canary enters round `round` for a victim holding `records` records."""

    @abstractmethod
    def clipped(self, hyper: dict[str, Any], lengths: Tensor) -> Tensor:
        """What a canary gradient of each length [R] contributes along its direction, after the
        defense's clipping, in the units `Reading.gain` multiplies."""


def _fixed_batch(hyper: dict[str, Any], records: int) -> float:
    """Inclusion probability of one record in a batch of B drawn without replacement from `records`."""
    return min(1.0, int(hyper["batch_size"]) / records)


class DPSGDChannel(Channel):
    """D-PSGD / DP-D-PSGD: the released gradient at each round, exactly, from the state difference
    (`attacks.views.extraction.dpsgd_state_difference`). DP-D-PSGD: (Σ_b clip_C(g_b) + N(0, σ²C²I))/B, Poisson
    rate q = B/|D_i| (the rate of the world without the canary); projected on a unit direction the
    noise is N(0, (σC/B)²), a canary in the batch adds its clipped length over B. D-PSGD: the plain
    batch mean of B records drawn without replacement, no noise."""

    defense = "dp_dpsgd"
    scenarios = ("state_difference",)
    adjacency = "add/remove"
    pair = "the canary record added to the victim's data, or absent"

    def canary_norm(self, hyper: dict[str, Any]) -> float:
        return float(hyper.get("clip", 1.0))

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper = transcript.public.hyper
        gradients, points = _targets(EXTRACTORS[self.defense, "state_difference"].extract, transcript, victims, round)
        batch = float(hyper["batch_size"])
        noise = float(hyper["noise_multiplier"]) * float(hyper["clip"]) / batch if "noise_multiplier" in hyper else 1.0
        gain = torch.full((len(victims),), 1.0 / (batch * noise), dtype=torch.float64)
        return [Reading(gradients / noise, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        hyper = public.hyper
        return RoundLaw(min(1.0, float(hyper["batch_size"]) / records))

    def clipped(self, hyper: dict[str, Any], lengths: Tensor) -> Tensor:
        return lengths.clamp(max=float(hyper["clip"]))


class UndefendedChannel(DPSGDChannel):
    defense = "dpsgd"

    def canary_norm(self, hyper: dict[str, Any]) -> float:
        return 1.0

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return RoundLaw(_fixed_batch(public.hyper, records), family=None)

    def clipped(self, hyper: dict[str, Any], lengths: Tensor) -> Tensor:
        return lengths


class DPDLChannel(Channel):
    """DPDL (seed 000, Alg. 1): per round, one batch of B of the victim's records (drawn without
    replacement) enters every cross-gradient the victim sends and its self-gradient, so all its
    channels share the canary's presence.

    * cross-gradient to each neighbour j whose link the tap hears (`dpdl_cross_gradient`):
      g̈^{ji} = (Σ_b clip_C(∇F_i(x^j; ζ_b)) + z^{ji})/B, noise N(0, (σC/B)²) along a unit direction;
    * self-gradient (`dpdl_self_gradient`, from the momentum and the cross-gradients sent to the
      victim): R = s ĝ^{ii} + z^{ii}/(B√w_ii N) with s = 1/(√w_ii N) + α Σ_{j∈N_i} w_ij c^{ij}, noise
      N(0, (σC/(B√w_ii N))²); the calibration weights c^{ij} = 1/(1 + e^{cos}) depend on the clean
      self-gradient, which nobody hears: the law takes c = ½ (cosines near 0 under noise), so the
      self channel's shift is (1 + α√w_ii N/2)·L/(σC) for a clipped canary length L.

    The claim's adjacency is replace-one (Def. 3): the world without the canary holds the
    anti-canary. ND variant (no noise): the same projections without a law."""

    defense = "dpdl"
    scenarios = ("cross_gradient", "self_gradient")
    adjacency = "replace-one"
    pair = "one of the victim's records replaced by the canary, or by the anti-canary"

    def canary_norm(self, hyper: dict[str, Any]) -> float:
        return float(hyper["clip"])

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper, public = transcript.public.hyper, transcript.public
        batch, clip = float(hyper["batch_size"]), float(hyper["clip"])
        noisy = bool(hyper["noise"]) and float(hyper["noise_multiplier"]) > 0
        sigma = float(hyper["noise_multiplier"]) if noisy else 0.0
        W, n = public.mixing, public.agents
        readings = []
        if "cross_gradient" in scenarios:
            offsets = [victim - victim % n for victim in victims]
            local = victims[0] % n
            heard = [j for j in torch.nonzero(W[local, :n]).flatten().tolist() if j != local
                     and transcript.find("cross_gradient", round=round, sender=victims[0], receiver=offsets[0] + j)]
            for j in heard:
                found = [dpdl_cross_gradient(transcript, victim, round, receiver=offset + j)
                         for victim, offset in zip(victims, offsets)]
                vectors = torch.stack([t.gradient.double() for t in found])
                points = torch.stack([t.point.double() for t in found])
                scale = sigma * clip / batch if noisy else 1.0
                gain = torch.full((len(victims),), 1.0 / (batch * scale), dtype=torch.float64)
                readings.append(Reading(vectors / scale, points, gain))
        if "self_gradient" in scenarios:
            vectors, points = _targets(dpdl_self_gradient, transcript, victims, round)
            w_self = torch.stack([W[v, v] for v in victims])
            if noisy:
                scale = sigma * clip / (batch * w_self.sqrt() * n)
                weight = 1.0 / (w_self.sqrt() * n) + float(hyper["alpha"]) / 2
                readings.append(Reading(vectors / scale[:, None], points, weight / (batch * scale)))
            else:
                readings.append(Reading(vectors, points, torch.full((len(victims),), 1.0 / batch,
                                                                    dtype=torch.float64)))
        return readings

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        hyper = public.hyper
        noisy = bool(hyper["noise"]) and float(hyper["noise_multiplier"]) > 0
        return RoundLaw(_fixed_batch(hyper, records), family="gaussian" if noisy else None)

    def clipped(self, hyper: dict[str, Any], lengths: Tensor) -> Tensor:
        return lengths.clamp(max=float(hyper["clip"]))


class LTADMMChannel(Channel):
    """LT-ADMM-DP (seed 002): each round the victim takes τ local steps, each on a fresh batch of B
    of its m records (without replacement) whose mean gradient is smooth-clipped and noised,
    g = ζ ḡ/(ζ + ‖ḡ‖) + N(0, σ_e² I). The bridge messages give the round's sum γ Σ_t g(φ^t) exactly
    (`lt_admm_bridge_update`); along a unit direction its noise is N(0, τσ_e²) (divided by γ).
    A canary of length L in a step's batch moves that step's mean by L/B and its smooth-clipped
    mean by about ζ(L/B)/(ζ + L/B) along its direction (the rest of the batch lies near-orthogonal
    to it); the canary is long (10⁴ ζB) so this is ζ to four digits, the sensitivity bound 2ζ of
    the claim's replace-one adjacency being reached with the anti-canary. draws = τ."""

    defense = "lt_admm_dp"
    scenarios = ("bridge",)
    adjacency = "replace-one"
    pair = "one of the victim's records replaced by the canary, or by the anti-canary"

    def canary_norm(self, hyper: dict[str, Any]) -> float:
        return 1e4 * float(hyper["zeta"]) * int(hyper["batch_size"])

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper = transcript.public.hyper
        gradients, points = _targets(EXTRACTORS[self.defense, "bridge"].extract, transcript, victims, round)
        scale = float(hyper["gamma"]) * float(hyper["sigma_e"]) * math.sqrt(int(hyper["tau"]))
        gain = torch.full((len(victims),), float(hyper["gamma"]) / scale, dtype=torch.float64)
        return [Reading(gradients / scale, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        hyper = public.hyper
        return RoundLaw(_fixed_batch(hyper, records), draws=int(hyper["tau"]))

    def clipped(self, hyper: dict[str, Any], lengths: Tensor) -> Tensor:
        zeta, mean = float(hyper["zeta"]), lengths / int(hyper["batch_size"])
        return zeta * mean / (zeta + mean)


class _TVSSChannel(Channel):
    """Wang & Zhang (seed 003): at iteration k the victim averages the ℓ1-clipped gradients of
    γ_k = min(⌈a₃(k+a₂)^γ⌉, |D_i|) of its records drawn without replacement; the canary pair of the
    claim's Definition 1 are two gradients differing by C in ℓ1: ±(C/2)e_c along one coordinate
    (Laplace noise is per coordinate, so one coordinate is the worst direction), replace-one."""

    adjacency = "replace-one"
    unit = "gradient"
    coordinate = True
    pair = "one of the victim's records replaced by the canary (+C/2 along one coordinate) or the anti-canary (−C/2)"

    def canary_norm(self, hyper: dict[str, Any]) -> float:
        return float(hyper["clip"]) / 2

    @staticmethod
    def schedule(hyper: dict[str, Any]) -> Schedule:
        names = ("a1", "a2", "a3", "alpha", "beta", "gamma", "eta", "sigma_scale")
        return Schedule(*(float(hyper[name]) for name in names))

    def batch(self, hyper: dict[str, Any], round: int, records: int) -> int:
        return int(min(float(self.schedule(hyper).batch(round)), records))

    def law_for(self, public: PublicKnowledge, round: int, records: int, family: Family) -> RoundLaw:
        return RoundLaw(self.batch(public.hyper, round, records) / records, family=family)

    def clipped(self, hyper: dict[str, Any], lengths: Tensor) -> Tensor:
        return lengths.clamp(max=float(hyper["clip"]))


class TVSSGradientChannel(_TVSSChannel):
    """Alg. 2: the released noisy gradient g + n, n ~ Laplace(σ_k) per coordinate, exactly
    (`tvss_state_difference`); the canary adds its clipped length over γ_k."""

    defense = "tvss_gradient"
    scenarios = ("state_difference",)

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper = transcript.public.hyper
        gradients, points = _targets(EXTRACTORS[self.defense, "state_difference"].extract, transcript, victims, round)
        scale = float(self.schedule(hyper).scale(round))
        batch = self.batch(hyper, round, records)
        gain = torch.full((len(victims),), 1.0 / (batch * scale), dtype=torch.float64)
        return [Reading(gradients / scale, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return self.law_for(public, round, records, "laplace")


class TVSSOutputChannel(_TVSSChannel):
    """Alg. 1: only the noisy states y = x + n are heard; `tvss_noisy_state` gives the gradient
    estimate ĝ = g + ((1−β_k) n_k [k ≥ 1] − n_{k+1})/α_k, whose error is two Laplace draws; the law
    takes it as Gaussian with the same variance 2((1−β_k)²σ_k² [k ≥ 1] + σ_{k+1}²)/α_k²
    (an approximation: the statistic stays a valid test, see the module docstring)."""

    defense = "tvss_output"
    scenarios = ("noisy_state",)

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper = transcript.public.hyper
        schedule = self.schedule(hyper)
        gradients, points = _targets(EXTRACTORS[self.defense, "noisy_state"].extract, transcript, victims, round)
        step, weight = float(schedule.step(round)), float(schedule.weight(round))
        own = (1 - weight) ** 2 * float(schedule.scale(round)) ** 2 if round >= 1 else 0.0
        scale = math.sqrt(2 * (own + float(schedule.scale(round + 1)) ** 2)) / step
        batch = self.batch(hyper, round, records)
        gain = torch.full((len(victims),), 1.0 / (batch * scale), dtype=torch.float64)
        return [Reading(gradients / scale, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return self.law_for(public, round, records, "gaussian")


class TernaryChannel(Channel):
    """Ternary quantization (seed 004), at the data level: the victim's stochastic gradient (B
    records without replacement, not clipped) is estimated from the quantized states
    (`ternary_state_difference`), with the quantizer's error; no DP noise, so no likelihood ratio.
    The gradient canary's length is B/(ε⁰λ⁰): one inclusion moves the victim's state by 1 along its
    coordinate — neighbouring states of Theorem 3's ℓ1 adjacency at the first step. The claim is
    about states, not records: there is no data-level claim to refute, and the audit says so."""

    defense = "ternary"
    scenarios = ("state_difference",)
    adjacency = "replace-one"
    coordinate = True
    pair = ("one of the victim's records replaced by the canary or the anti-canary, whose gradients move the "
            "state by ±1 along one coordinate at the first step")
    unaudited = ("Theorem 3's claim is about neighbouring states (‖x − x′‖₁ ≤ 1), not records: one record's "
                 "unclipped gradient moves the state without bound, so the paper makes no data-level claim; the "
                 "bound says what one record leaks through the running algorithm")

    def canary_norm(self, hyper: dict[str, Any]) -> float:
        lam = ternary_schedule(float(hyper["a1"]), float(hyper["a3"]), float(hyper["delta1"]), 0)
        eps = ternary_schedule(float(hyper["a2"]), float(hyper["a3"]), float(hyper["delta2"]), 0)
        return int(hyper["batch_size"]) / (lam * eps)

    def read(self, transcript: Transcript, victims: list[int], round: int, scenarios: list[str],
             records: int) -> list[Reading]:
        hyper = transcript.public.hyper
        gradients, points = _targets(EXTRACTORS[self.defense, "state_difference"].extract, transcript, victims, round)
        gain = torch.full((len(victims),), 1.0 / int(hyper["batch_size"]), dtype=torch.float64)
        return [Reading(gradients, points, gain)]

    def law(self, public: PublicKnowledge, round: int, records: int) -> RoundLaw:
        return RoundLaw(_fixed_batch(public.hyper, records), family=None)

    def clipped(self, hyper: dict[str, Any], lengths: Tensor) -> Tensor:
        return lengths


CHANNELS: dict[str, Channel] = {channel.defense: channel for channel in (
    UndefendedChannel(), DPSGDChannel(), DPDLChannel(), LTADMMChannel(), TVSSGradientChannel(),
    TVSSOutputChannel(), TernaryChannel())}
"""Every defense a canary audit runs on, with its channel."""
