"""Wang & Zhang (seed 003): differentially private distributed stochastic optimization with
time-varying sample sizes — Algorithm 1 (output perturbation) and Algorithm 2 (gradient
perturbation).

Schedules (Theorem 2, §V): α_k = a₁/(k+a₂)^α (gradient step), β_k = a₁/(k+a₂)^β (consensus
weight; the paper gives the two the same a₁ and a₂, and so do both its examples: 0.5/(k+1)^·,
0.01/(k+2)^·), γ_k = ⌈a₃(k+a₂)^γ⌉ samples per iteration, Laplace noise of scale σ_k per
coordinate (variance 2σ_k², §3), σ_k = s·(k+a₂)^η. The paper writes σ_k = O((k+a₂)^η); its
examples use s = 1, the default here. A is doubly stochastic with a positive diagonal
(Assumption 3, N_i includes i): the topology's W, checked.

* Algorithm 1, eq. (3): agent i broadcasts y_{i,k} = x_{i,k} + n_{i,k} (`Kind.NOISY_STATE`, one
  draw per agent and iteration, the same to every neighbour) and updates
  x_{i,k+1} = (1−β_k) x_{i,k} + β_k Σ_{j∈N_i} a_ij (x_{j,k} + n_{j,k}) − α_k g_i^k.
  The sum runs over N_i, which includes i, with noisy states: agent i mixes its own *noisy*
  state, as (3) reads and as the proof of Lemma 1 assumes (only (1−β_k) x_{i,k} is clean).
* Algorithm 2, §4: agent i broadcasts x_{i,k} (`Kind.MODEL`) and updates
  x_{i,k+1} = (1−β_k) x_{i,k} + β_k Σ_j a_ij x_{j,k} − α_k (g_i^k + n_{i,k}).

g_i^k = (1/γ_k) Σ_l g_i(x_{i,k}, ξ_i^l) (§2.2). Each agent mixes what the wire delivered
(`delivers`): a neighbour who lies (`privaudit.wire.Malicious`) reaches it. Decisions where the paper is silent or loose:

* **Clipping.** The paper's adjacency (Definition 1) *assumes* two samples' gradients differ by
  at most C in ℓ1; nothing enforces it, and its own estimation example violates it (a sampled
  gradient u uᵀx − d u has ℓ1 norm ≈ 30 at x_0 and ≈ 0.5 at x*, against C = 0.2). We clip every
  per-sample gradient to ℓ1 norm C (`clip_l1`) before averaging, so a sensitivity exists.
* **Batches.** γ_k distinct samples drawn uniformly without replacement from the agent's data,
  **capped at the local dataset size** (`LocalData.capped_batches`), as the paper's §4.2 remark
  prescribes for a finite sample space. The paper's MNIST run draws by "bootstrapping" (with
  replacement); a sample drawn r times would multiply its influence by r and void the 1/γ_k in
  every sensitivity below, so we do not. Once γ_k ≥ |D_i| every iteration uses the whole
  dataset: the same record enters every release.
* **Ceiling.** The notation section defines ⌈x⌉ as "the smallest integer greater than x", which
  for an integer x is x+1 (and §2.2 says γ_k > 1). We read it as the usual ceiling (smallest
  integer ≥ x, so γ_0 = 1 in the examples) and report the strict reading as an alternative.
* **Graph.** The paper gives none for its estimation example (only "satisfies Assumption 3");
  the preset uses a ring of 6 with Metropolis weights (1/3 each).

Claims (pure ε-DP, additive composition), implemented as printed; `horizon` = "run" sums the
iterations a run of T rounds executes (k = 1..T−1: the paper's sums start at k = 1), "infinite"
the whole series, bounded rigorously (see `Budget`). The claim uses the γ_k the run really uses
(capped at the smallest local dataset), the paper's formula applied to its own capped
algorithm; the uncapped schedule's values (the paper's unlimited-sample setting, where its stated
numbers live) are given in the statements.

* Alg. 1, Lemma 1 eq. (4) + Theorem 1: Δ_1 = Cα₀/γ₀, Δ_k = Σ_{l=0}^{k−2} Π_{t=l+1}^{k−1}(1−β_t)
  Cα_l/γ_l (k > 1), ε = Σ_{k≥1} Δ_k/σ_k. Finding: the recursion (5)–(8) it is derived from,
  δ_k = (1−β_{k−1}) δ_{k−1} + Cα_{k−1}/γ_{k−1}, gives Σ_{l=0}^{k−1}; the printed closed form
  drops the newest term l = k−1 for k > 1 (its k = 1 case keeps it). We implement (4) as printed
  and use the identity Δ_k = (1−β_{k−1}) δ_{k−1} (k ≥ 2) to evaluate it in one pass.
* Alg. 2, Theorem 5: ε = Σ_{k≥1} C/(γ_k σ_k). Finding: the first noisy gradient (k = 0) is
  released too, and the sum omits it.
* Worked examples (§V): Alg. 1 "ε ≈ 0.864", Alg. 2 "ε ≈ 0.488", for an infinite number of
  iterations. Recomputed literally: ε_∞ ≈ 0.958 and ≈ 0.556. Readings that come close, not
  adopted: summing from k = 2 (as the proof of Theorem 2 writes Σ_{k=2}^∞) gives ≈ 0.862 and
  ≈ 0.493 (0.488 when also truncated at k = 10⁷); the literal partial sums reach the stated
  values at k = 87 and k = 2061 — no single horizon gives both. Shown in each claim's statements.

Sound accounting, at two relations. The claim's own (`eps_sound`): **Definition 1**, one sample
whose gradient changes by at most C in ℓ1, the relation an audit of the claim tests. And **one
record replaced** (the paper's "differ in exactly one data sample l₀, l₀′"; batch sizes are a
public schedule): ℓ1 clipping to C lets a replaced record change its gradient by 2C, so the code
does not enforce Definition 1's premise for records and every sensitivity taken at a common
point doubles (`RECORD_FACTOR`); the claim reports that as a "premise not enforced" finding with
the record-level sound ε, not as a breach of the theorem. Each release is
a Laplace mechanism given everything released before (adaptive composition; the batch draws are
independent of the data and are coupled between the two datasets), so ε = Σ_k Δ_k^sound/σ_k
(`pure_epsilon`; δ = 0). No amplification by sampling is used (sound, possibly loose early on).

* Alg. 2: the release at iteration k is g_i^k + n_{i,k} (x_{i,k+1} reveals it given the public
  states; every state is post-processing). Given the history, x_{i,k} is public, so only the
  replaced record's clipped gradient changes: Δ_k = 2C/min(γ_k, |D_i|) for a record, C/min(γ_k, |D_i|)
  under Definition 1 (the paper's C/γ_k). Counted for k = 0..T−1 (the last one reaches only the
  final states, counted as released, as DP-D-PSGD does).
* Alg. 1: the release is y_{i,k} = x_{i,k} + n_{i,k}, and x_{i,k} depends on every past gradient.
  Given the released noisy states (including i's own, which it mixes), the two datasets' states
  differ by δ_{k+1} = (1−β_k) δ_k − α_k (ḡ(x_{i,k}; D) − ḡ(x'_{i,k}; D')). Lemma 1 bounds the
  gradient difference by C/γ_k as if both were taken at the same point; that holds at k = 0 only.
  Afterwards x_{i,k} ≠ x'_{i,k} and every sample's clipped gradient may differ; with no public
  Lipschitz bound (the estimation problem's regressors are unbounded) the only data-independent
  bound is ‖ḡ − ḡ'‖₁ ≤ 2C (each clipped mean has ℓ1 norm ≤ C), under either relation. Hence the
  sound sensitivity δ_k with inputs Cα₀/min(γ₀, |D_i|) (2Cα₀/min(γ₀, |D_i|) for a record), then
  2Cα_l: even under Definition 1 the paper's Δ_k is not the sensitivity of the
  released sequence. It grows like 2C α_k/β_k, so for the worked example the sound ε diverges
  over an infinite horizon. The broadcasts y_{i,0..T−1} are covered; the final clean states are
  not (publishing them would void any bound).

Infinite horizons: partial sums to k = 10⁵, then a tail bound from a power-law envelope of the
summands (`_series_tail`, `_recursion_tail`), or ε = ∞ when the series provably diverges.
"""

from __future__ import annotations

import functools
import math
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import dp_accounting
import numpy as np
import torch
from pydantic import Field, model_validator
from torch import Tensor

from privaudit.defenses.base import Defense, DefenseParams, register
from privaudit.accounting import Claim, ClaimThreat, Neighbours, pure_epsilon
from privaudit.grads import clip_l1, per_sample_grads_agents
from privaudit.setup import Setup
from privaudit.wire import Kind, Wire

TAIL_FROM = 100_000
"""Infinite horizons: the series is summed exactly up to k = TAIL_FROM, then bounded."""
_TAIL_LIMIT = 10_000_000
_CHUNK_FLOATS = 1 << 24
"""Per-sample gradients are computed in chunks of samples holding at most this many floats."""

Ceiling = Literal["ceil", "strict", "none"]


THREAT = ClaimThreat("honest-but-curious", (
    "seed 003 §2.2: \"the following passive attackers\": semi-honest agents that \"follow the specified protocol and "
    "perform the correct computations\" and \"external eavesdroppers\" wiretapping every channel"))
"""Who the theorems are stated against, read from the paper: passive attackers only."""


class TVSSParams(DefenseParams):
    """Seed 003's constants; the defaults are §V's first worked example (Algorithm 1)."""

    clip: float = Field(0.2, gt=0, description="C: per-sample ℓ1 clip, the paper's adjacency bound")
    a1: float = Field(0.5, gt=0, description="a₁ in α_k = a₁/(k+a₂)^α and β_k = a₁/(k+a₂)^β")
    a2: float = Field(1.0, gt=0, description="a₂: offset of k in every schedule")
    a3: float = Field(1.0, gt=0, description="a₃ in γ_k = ⌈a₃(k+a₂)^γ⌉")
    alpha: float = Field(0.9, gt=0, le=1, description="α: decay of the gradient step α_k")
    beta: float = Field(0.6, gt=0, le=1, description="β: decay of the consensus weight β_k")
    gamma: float = Field(1.1, ge=0, description="γ: growth of the sample size γ_k")
    eta: float = Field(0.05, ge=0, description="η: growth of the Laplace scale σ_k")
    sigma_scale: float = Field(1.0, gt=0, description="s in σ_k = s·(k+a₂)^η (the paper: O((k+a₂)^η))")
    horizon: Literal["run", "infinite"] = Field(
        "run", description="claim over the run's iterations, or over infinitely many (the paper's)"
    )

    @model_validator(mode="after")
    def _weights_below_one(self) -> TVSSParams:
        if self.a1 >= self.a2**self.beta:
            raise ValueError(f"a1 = {self.a1} must be below a2^beta = {self.a2 ** self.beta:.6g} "
                             "(Theorem 2: 0 < a₁ < a₂^β, so that 0 < β_k < 1)")
        return self


class TVSSGradientParams(TVSSParams):
    """Defaults: §V's second worked example (Algorithm 2)."""

    alpha: float = Field(0.8, gt=0, le=1, description="α: decay of the gradient step α_k")
    beta: float = Field(0.5, gt=0, le=1, description="β: decay of the consensus weight β_k")
    gamma: float = Field(1.2, ge=0, description="γ: growth of the sample size γ_k")
    eta: float = Field(0.1, ge=0, description="η: growth of the Laplace scale σ_k")


@dataclass(frozen=True)
class Schedule:
    """α_k, β_k, γ_k and σ_k of one run, for arrays of iterations k (float64, numpy)."""

    a1: float
    a2: float
    a3: float
    alpha: float
    beta: float
    gamma: float
    eta: float
    sigma_scale: float

    @classmethod
    def of(cls, params: TVSSParams) -> Schedule:
        return cls(params.a1, params.a2, params.a3, params.alpha, params.beta, params.gamma, params.eta,
                   params.sigma_scale)

    def u(self, k) -> np.ndarray:
        return np.asarray(k, dtype=np.float64) + self.a2

    def step(self, k) -> np.ndarray:
        """α_k = a₁/(k+a₂)^α."""
        return self.a1 / self.u(k) ** self.alpha

    def weight(self, k) -> np.ndarray:
        """β_k = a₁/(k+a₂)^β."""
        return self.a1 / self.u(k) ** self.beta

    def batch(self, k, cap: int | None = None, ceiling: Ceiling = "ceil") -> np.ndarray:
        """γ_k = ⌈a₃(k+a₂)^γ⌉, capped at `cap` samples. `ceiling` selects a reading of ⌈·⌉:
        "ceil" (smallest integer ≥ x, used), "strict" (smallest integer > x, the paper's notation
        section), "none" (no rounding); the last two only for the worked examples' readings."""
        raw = self.a3 * self.u(k) ** self.gamma
        size = {"ceil": np.ceil(raw), "strict": np.floor(raw) + 1.0, "none": raw}[ceiling]
        return size if cap is None else np.minimum(size, float(cap))

    def scale(self, k) -> np.ndarray:
        """σ_k = s·(k+a₂)^η, the Laplace scale per coordinate."""
        return self.sigma_scale * self.u(k) ** self.eta

    def capped_from(self, cap: int) -> int | None:
        """The first k with γ_k ≥ `cap` (None if never): ⌈a₃u^γ⌉ ≥ cap ⟺ u > ((cap−1)/a₃)^{1/γ}."""
        if self.batch(0) >= cap:
            return 0
        if self.gamma == 0:
            return None
        k = max(0, math.floor(((cap - 1) / self.a3) ** (1 / self.gamma) - self.a2) - 1)
        for k in range(k, k + _ROUNDING_STEPS):
            if self.batch(k) >= cap:
                return k
        raise ValueError(f"the batch schedule γ_k = ⌈a₃(k+a₂)^γ⌉ (a₃ = {self.a3:g}, a₂ = {self.a2:g}, γ = {self.gamma:g}) "
                         f"does not reach {cap} within {_ROUNDING_STEPS} steps of its closed form: floating point "
                         "cannot evaluate it at these parameters")


_ROUNDING_STEPS = 1000
"""How far past its closed form `Schedule.capped_from` looks for the first capped step: the
closed form misses only by rounding, a step or two; at extreme parameters (γ near 0) floating
point cannot place it and the search would run for hours (the claims fuzz found one)."""


@dataclass(frozen=True)
class Budget:
    """ε summed over a horizon. Finite horizon: `value` = `lower` = the exact sum. Infinite
    horizon: `lower` is the partial sum up to k = `last`, `value` adds a rigorous bound on the
    rest (math.inf when the series provably diverges), so the true ε_∞ lies in [lower, value]."""

    value: float
    lower: float
    last: int


@dataclass(frozen=True)
class Envelope:
    """A power-law bound on the inputs of a series from k = K on: c_k ≤ scale·u^−exponent,
    u = k + a₂ (`_gamma_envelope` says why a matching lower bound c_k ≥ c′·u^−exponent, c′ > 0,
    also holds, which is what makes a series with a non-summable envelope diverge)."""

    scale: float
    exponent: float


def _series_tail(schedule: Schedule, envelope: Envelope, last: int) -> float:
    """Bound on Σ_{k>K} c_k/σ_k, K = `last`: c_k/σ_k ≤ (c/s) u^−r with r = q + η, decreasing,
    so the tail is at most ∫_K^∞ = (c/s) u_K^{1−r}/(r−1); for r ≤ 1 the lower envelope
    (c′/s) u^−r makes the series diverge: ∞."""
    r = envelope.exponent + schedule.eta
    if r <= 1:
        return math.inf
    u_last = last + schedule.a2
    return envelope.scale / schedule.sigma_scale * u_last ** (1 - r) / (r - 1)


def _recursion_tail(schedule: Schedule, envelope: Envelope, last: int, state: float) -> float:
    """Bound on Σ_{k>K} δ_k/σ_k for δ_{k+1} = (1−β_k) δ_k + c_k, K = `last`, δ_K = `state`.

    Upper envelope (c_k ≤ c u^−q), by induction on k ≥ K: δ_k ≤ D u^−p with p = q − β and
    D = max(δ_K u_K^p, c/(a₁ − max(p, 0) u_K^{β−1})). Step: (1 − a₁u^−β) D u^−p + c u^−q ≤
    D (u+1)^−p because (u+1)^−p ≥ u^−p (1 − max(p, 0)/u) (convexity for p > 0, monotonicity for
    p ≤ 0) and u^{β−1} ≤ u_K^{β−1}. So the tail is at most (D/s) u_K^{1−r}/(r−1), r = p + η > 1.
    Divergence for r ≤ 1 (c_k ≥ c′ u^−q): likewise δ_k ≥ D′ u^−p with
    D′ = min(δ_K u_K^p, c′/(a₁ + κ u_K^{β−1})),
    κ = max(−p, 0)(1 + 1/u_K)^{max(−p−1, 0)}, and Σ u^−r = ∞. Raises ValueError when the upper
    induction cannot start (β = 1 with p ≥ a₁, or K beyond 10⁷)."""
    p = envelope.exponent - schedule.beta
    r = p + schedule.eta
    if r <= 1:
        return math.inf
    u_last = last + schedule.a2
    margin = schedule.a1 - max(p, 0.0) * u_last ** (schedule.beta - 1)
    if margin <= 0:
        raise ValueError(f"no tail bound for β = {schedule.beta}, a₁ = {schedule.a1} with decay exponent "
                         f"{p:.4g} from k = {last}")
    scale = max(state * u_last**p, envelope.scale / margin)
    return scale / schedule.sigma_scale * u_last ** (1 - r) / (r - 1)


def _tail_start(schedule: Schedule, exponent: float, tail_from: int) -> int:
    """The first K ≥ `tail_from` from which `_recursion_tail`'s induction starts with margin ≥ a₁/2
    (any K when the series diverges: no induction is needed then)."""
    p = exponent - schedule.beta
    if p <= 0 or p + schedule.eta <= 1:
        return tail_from
    if schedule.beta >= 1:
        if p >= schedule.a1:
            raise ValueError(f"no tail bound for β = 1 when the decay exponent {p:.4g} ≥ a₁ = {schedule.a1}")
        return tail_from
    needed = math.ceil((2 * p / schedule.a1) ** (1 / (1 - schedule.beta)) - schedule.a2)
    if needed > _TAIL_LIMIT:
        raise ValueError(f"the tail bound would start at k = {needed}, beyond {_TAIL_LIMIT}")
    return max(tail_from, needed)


def _recursion(decay: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """δ_0 = 0, δ_{k+1} = decay_k δ_k + inputs_k: returns δ_0..δ_K (K = len(inputs)). A plain loop:
    a linear recurrence with varying coefficients has no stable vectorised form (the products
    Π(1−β_t) underflow), and 10⁵ steps take a few hundredths of a second."""
    out = [0.0]
    state = 0.0
    for a, c in zip(decay.tolist(), inputs.tolist()):
        state = a * state + c
        out.append(state)
    return np.asarray(out)


def _gamma_envelope(schedule: Schedule, scale: float, cap: int | None, last: int, ceiling: Ceiling,
                    with_step: bool) -> Envelope:
    """Envelope of c_k = scale·(α_k if with_step else 1)/min(γ_k, cap) for k ≥ `last`.
    Uncapped: a₃u^γ ≤ γ_k ≤ a₃u^γ + 1 ≤ (a₃ + u_K^−γ) u^γ (every reading of ⌈·⌉), exponent
    α + γ (resp. γ). Capped: min(γ_K, cap) ≤ min(γ_k, cap) ≤ cap, as γ_k does not decrease, so
    the exponent drops to α (resp. 0)."""
    factor = scale * (schedule.a1 if with_step else 1.0)
    base = schedule.alpha if with_step else 0.0
    if cap is None:
        return Envelope(factor / schedule.a3, base + schedule.gamma)
    return Envelope(factor / float(schedule.batch(last, cap, ceiling)), base)


def lemma1_sensitivities(schedule: Schedule, clip: float, last: int, cap: int | None = None, *,
                         ceiling: Ceiling = "ceil", newest_term: bool = False) -> np.ndarray:
    """Δ_0..Δ_last of Lemma 1, eq. (4), as printed: Δ_0 = 0 (x_{i,0} is public), Δ_1 = Cα₀/γ₀,
    Δ_k = Σ_{l=0}^{k−2} Π_{t=l+1}^{k−1}(1−β_t) Cα_l/γ_l = (1−β_{k−1}) δ_{k−1} for k ≥ 2, where δ
    is the recursion (8). `newest_term` = True gives δ_k itself (Σ up to l = k−1, what (8)
    yields) — a reading reported beside the claim, never the claim."""
    k = np.arange(last)
    full = _recursion(1.0 - schedule.weight(k), clip * schedule.step(k) / schedule.batch(k, cap, ceiling))
    return full if newest_term else _printed(schedule, full)


def _printed(schedule: Schedule, full: np.ndarray) -> np.ndarray:
    """Eq. (4) from the recursion's δ_0..δ_K: Δ_1 = δ_1, Δ_k = (1−β_{k−1}) δ_{k−1} for k ≥ 2."""
    printed = full.copy()
    printed[2:] = (1.0 - schedule.weight(np.arange(1, len(full) - 1))) * full[1:-1]
    return printed


@functools.cache
def output_claim(schedule: Schedule, clip: float, rounds: int | None, cap: int | None = None, *,
                 first: int = 1, ceiling: Ceiling = "ceil", newest_term: bool = False,
                 tail_from: int = TAIL_FROM) -> Budget:
    """Theorem 1: ε = Σ_{k≥first} Δ_k/σ_k with Lemma 1's Δ_k, over the iterations k < `rounds`
    of a run (the releases y_{i,1..T−1}), or over all k when `rounds` is None. `first` = 1 is
    the paper; other values, `ceiling` and `newest_term` are readings for the statements."""
    if rounds is not None:
        sensitivities = lemma1_sensitivities(schedule, clip, max(rounds - 1, 0), cap, ceiling=ceiling,
                                             newest_term=newest_term)
        k = np.arange(len(sensitivities))
        total = float(np.sum((sensitivities / schedule.scale(k))[first:]))
        return Budget(total, total, rounds - 1)
    last = _tail_start(schedule, schedule.alpha + (schedule.gamma if cap is None else 0.0), tail_from)
    envelope = _gamma_envelope(schedule, clip, cap, last, ceiling, with_step=True)
    full = lemma1_sensitivities(schedule, clip, last + 1, cap, ceiling=ceiling, newest_term=True)
    sensitivities = full if newest_term else _printed(schedule, full)
    k = np.arange(last + 2)
    partial = float(np.sum((sensitivities / schedule.scale(k))[first:]))
    # Printed Δ_k = (1−β_{k−1}) δ_{k−1} ≤ δ_{k−1} and σ_k ≥ σ_{k−1}: its tail beyond k = K+1 is
    # within δ's tail beyond K, and so is δ's own (the newest-term reading).
    return Budget(partial + _recursion_tail(schedule, envelope, last, float(full[last])), partial, last + 1)


@functools.cache
def gradient_claim(schedule: Schedule, clip: float, rounds: int | None, cap: int | None = None, *,
                   first: int = 1, ceiling: Ceiling = "ceil", tail_from: int = TAIL_FROM) -> Budget:
    """Theorem 5: ε = Σ_{k≥first} C/(γ_k σ_k) over the iterations k < `rounds` of a run, or over
    all k when `rounds` is None. `first` = 1 is the paper."""
    last = (rounds - 1) if rounds is not None else tail_from
    k = np.arange(first, last + 1)
    partial = float(np.sum(clip / (schedule.batch(k, cap, ceiling) * schedule.scale(k))))
    if rounds is not None:
        return Budget(partial, partial, last)
    envelope = _gamma_envelope(schedule, clip, cap, last, ceiling, with_step=False)
    return Budget(partial + _series_tail(schedule, envelope, last), partial, last)


DEFINITION_1 = 1.0
"""The claim's own relation (Definition 1): one sample's gradient changes by at most C in ℓ1."""
RECORD_FACTOR = 2.0
"""How far one record replaced moves a clipped mean at a common point beyond Definition 1's
premise: two per-sample gradients clipped to ℓ1 norm C differ by up to 2C, the premise allows C."""


def output_sound_sensitivities(schedule: Schedule, clip: float, last: int, cap: int,
                               factor: float = RECORD_FACTOR) -> np.ndarray:
    """δ_0..δ_last, the ℓ1 sensitivity of Algorithm 1's release x_{i,k} given all released noisy
    states: δ_{k+1} = (1−β_k) δ_k + c_k with c_0 = factor·Cα₀/min(γ₀, |D_i|) (same point, one
    sample's gradient changed by at most factor·C: 2 for a replaced record under ℓ1 clipping to C,
    1 under Definition 1) and c_k = 2Cα_k for k ≥ 1 (different points: any two clipped means
    differ by at most 2C in ℓ1, whichever relation)."""
    k = np.arange(last)
    inputs = 2.0 * clip * schedule.step(k)
    if last:
        inputs[0] *= factor / 2.0 / float(schedule.batch(0, cap))
    return _recursion(1.0 - schedule.weight(k), inputs)


@functools.cache
def output_sound(schedule: Schedule, clip: float, rounds: int | None, cap: int, *,
                 factor: float = RECORD_FACTOR, tail_from: int = TAIL_FROM) -> Budget:
    """Sound ε of Algorithm 1: Σ_{k≥1} δ_k/σ_k over the broadcasts of a run (k < `rounds`) or over
    all of them (`rounds` None; the tail envelope has q = α, c = 2Ca₁); `factor` as in
    `output_sound_sensitivities`."""
    if rounds is not None:
        sensitivities = output_sound_sensitivities(schedule, clip, max(rounds - 1, 0), cap, factor)
        total = float(np.sum(sensitivities[1:] / schedule.scale(np.arange(1, len(sensitivities)))))
        return Budget(total, total, rounds - 1)
    envelope = Envelope(2.0 * clip * schedule.a1, schedule.alpha)
    last = _tail_start(schedule, envelope.exponent, tail_from)
    sensitivities = output_sound_sensitivities(schedule, clip, last, cap, factor)
    partial = float(np.sum(sensitivities[1:] / schedule.scale(np.arange(1, last + 1))))
    return Budget(partial + _recursion_tail(schedule, envelope, last, float(sensitivities[last])), partial, last)


def gradient_sound_sensitivities(schedule: Schedule, clip: float, rounds: int, cap: int,
                                 factor: float = RECORD_FACTOR) -> np.ndarray:
    """factor·C/min(γ_k, |D_i|) for k = 0..rounds−1: the ℓ1 sensitivity of each noisy gradient at the
    public point x_{i,k}, one sample's gradient changed by at most factor·C (2 for a replaced record
    under ℓ1 clipping to C, 1 under Definition 1)."""
    return factor * clip / schedule.batch(np.arange(rounds), cap)


@functools.cache
def gradient_sound(schedule: Schedule, clip: float, rounds: int | None, cap: int, *,
                   factor: float = RECORD_FACTOR, tail_from: int = TAIL_FROM) -> Budget:
    """Sound ε of Algorithm 2: Σ_{k≥0} factor·C/(min(γ_k, |D_i|) σ_k), over a run's T noisy gradients
    or over all of them (the capped terms decay like σ_k⁻¹ only: finite iff η > 1)."""
    last = (rounds - 1) if rounds is not None else tail_from
    k = np.arange(last + 1)
    partial = float(np.sum(gradient_sound_sensitivities(schedule, clip, last + 1, cap, factor) / schedule.scale(k)))
    if rounds is not None:
        return Budget(partial, partial, last)
    envelope = _gamma_envelope(schedule, factor * clip, cap, last, "ceil", with_step=False)
    return Budget(partial + _series_tail(schedule, envelope, last), partial, last)


@dataclass(frozen=True)
class WorkedExample:
    """A configuration §V states a number for, and that number."""

    values: dict[str, float]
    stated: float

    def matches(self, params: TVSSParams) -> bool:
        return all(math.isclose(getattr(params, key), value) for key, value in self.values.items())


def _interval(budget: Budget) -> str:
    return f"[{budget.lower:.4f}, {budget.value:.4f}]" if math.isfinite(budget.value) else "∞ (diverges)"


def _bounded(compute: Callable[[], Budget]) -> str:
    """`_interval` of an infinite-horizon budget, or why it could not be bounded."""
    try:
        return _interval(compute())
    except ValueError as error:
        return f"not bounded ({error})"


class _TimeVaryingSamples(Defense):
    """What both algorithms share: schedules, capped batches, clipped sampled gradients, Laplace
    noise, and the claim record; each algorithm supplies its update, claim and release."""

    example: ClassVar[WorkedExample]
    equation: ClassVar[str]
    release: ClassVar[str]
    theorem: ClassVar[str]
    readings: ClassVar[dict[str, dict]]

    def __init__(self, params: TVSSParams, setup: Setup) -> None:
        super().__init__(params, setup)
        if bool((np.diagonal(setup.topology.network.W) <= 0).any()):
            raise ValueError("seed 003 needs a mixing matrix with a positive diagonal (Assumption 3: "
                             "N_i includes i); choose another mixing rule")
        self.schedule = Schedule.of(params)
        self.cap = int(setup.local.sizes.min())
        self.x = setup.model.initial().repeat(setup.topology.n, 1)
        if params.horizon == "infinite":
            self.claimed(None, self.cap)  # a series we cannot bound fails here, before training
            self.sound(None)

    @property
    def states(self) -> Tensor:
        return self.x

    def batch_size(self, k: int) -> int:
        """γ_k of the schedule, before capping."""
        return int(self.schedule.batch(k))

    def local_gradients(self, t: int, wire: Wire) -> Tensor:
        """g_i^k for every agent: the mean of min(γ_k, |D_i|) per-sample gradients at x_{i,k}, each
        clipped to ℓ1 norm C; each agent's batch rows and gradient are disclosed (agent-private)."""
        xb, yb, rows, mask = self.setup.local.capped_batches(self.batch_size(t), self.setup.generator)
        n, width = mask.shape
        chunk = max(1, _CHUNK_FLOATS // (n * self.setup.model.dim))
        total = torch.zeros_like(self.x)
        for start in range(0, width, chunk):
            part = slice(start, start + chunk)
            per_sample = per_sample_grads_agents(self.setup.model, self.x, xb[:, part], yb[:, part])
            total += (clip_l1(per_sample, self.params.clip) * mask[:, part, None]).sum(dim=1)
        gradients = total / mask.sum(dim=1, keepdim=True)
        wire.disclose_each(t, "batch", lambda: [r[m > 0] for r, m in zip(rows, mask)])
        wire.disclose_each(t, "gradient", gradients)
        return gradients

    def laplace(self, t: int) -> Tensor:
        """One Laplace(σ_k) draw per agent and coordinate: σ_k (E₁ − E₂), E exponential(1)."""
        first = torch.empty(self.x.shape).exponential_(generator=self.setup.generator)
        second = torch.empty(self.x.shape).exponential_(generator=self.setup.generator)
        return float(self.schedule.scale(t)) * (first - second)

    def mix(self, t: int) -> tuple[float, float]:
        """(α_k, β_k)."""
        return float(self.schedule.step(t)), float(self.schedule.weight(t))

    @abstractmethod
    def claimed(self, rounds: int | None, cap: int | None, **reading) -> Budget:
        """The paper's ε over `rounds` (None: infinite) with γ_k capped at `cap` (None: uncapped)."""

    @abstractmethod
    def claimed_terms(self, last: int) -> np.ndarray:
        """The claim's summands Δ_k/σ_k for k = 1..last, uncapped schedule."""

    @abstractmethod
    def sound(self, rounds: int | None, factor: float = DEFINITION_1) -> Budget:
        """The sound ε over `rounds` (None: infinite), at Definition 1 (`factor` 1) or for a replaced
        record (`RECORD_FACTOR`)."""

    @abstractmethod
    def condition(self) -> tuple[str, bool]:
        """The paper's condition for a finite ε over infinitely many iterations, and whether it holds."""

    @abstractmethod
    def releases(self, rounds: int, factor: float = DEFINITION_1) -> tuple[np.ndarray, np.ndarray]:
        """(ℓ1 sensitivities, Laplace scales) of every data-dependent release of a `rounds` run, at
        Definition 1 (`factor` 1) or for a replaced record (`RECORD_FACTOR`)."""

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        """One Laplace event per data-dependent release, noise multiplier σ_k/Δ_k with Δ_k the ℓ1
        sensitivity under the claim's relation (Definition 1). Its pure ε (Σ Δ_k/σ_k) is exact for
        the d-dimensional release; an (ε, δ)
        accountant would read each event as one-dimensional, which we have not shown to dominate
        the d-dimensional Laplace — the sound ε is `pure_epsilon`."""
        sensitivities, scales = self.releases(rounds)
        return dp_accounting.ComposedDpEvent(
            [dp_accounting.LaplaceDpEvent(float(b / d)) for d, b in zip(sensitivities, scales) if d > 0]
        )

    def worked_example(self) -> str:
        """The worked example recomputed literally at several horizons and to infinity, and the
        readings that do (or do not) reproduce the stated number — none of them adopted."""
        stated = self.example.stated
        partial = np.cumsum(self.claimed_terms(TAIL_FROM))
        literal = "; ".join(f"k ≤ {10 ** e}: {partial[10 ** e - 1]:.4f}" for e in range(1, 6))
        reached = np.flatnonzero(partial >= stated)
        when = (f"first reaches {stated} at k = {int(reached[0]) + 1}" if len(reached)
                else f"stays below {stated} up to k = {TAIL_FROM}")
        infinite = self.claimed(None, None)
        readings = "; ".join(f"{name}: {_interval(self.claimed(None, None, **reading))}"
                             for name, reading in self.readings.items())
        return (f"§V: ε ≈ {stated} for this schedule over an infinite number of iterations. Recomputed as "
                f"printed (uncapped γ_k, from k = 1): up to {literal}; k → ∞: {_interval(infinite)} (partial "
                f"sum to k = {infinite.last} + tail bound); the partial sum {when}. Other readings, not "
                f"adopted (ε_∞): {readings}")

    def claim(self, rounds: int) -> Claim:
        p = self.params
        infinite = p.horizon == "infinite"
        claimed = self.claimed(None if infinite else rounds, self.cap)

        def sound_at(factor: float) -> float:
            return self.sound(None, factor).value if infinite else pure_epsilon(*self.releases(rounds, factor))

        sound, record_level = sound_at(DEFINITION_1), sound_at(RECORD_FACTOR)
        capped_from = self.schedule.capped_from(self.cap)
        assumptions = (
            f"per-sample gradients clipped to ℓ1 norm C = {p.clip} (the paper assumes the bound; we enforce it)",
            f"γ_k capped at the smallest local dataset, {self.cap} samples (paper §4.2), "
            + (f"from k = {capped_from}" if capped_from is not None else "never reached")
            + "; the claim uses the capped γ_k the run uses",
            "⌈x⌉ read as the usual ceiling (smallest integer ≥ x); the paper's notation says 'greater than'",
            f"Laplace scale σ_k = {p.sigma_scale}·(k+{p.a2})^{p.eta} per coordinate (the paper: O((k+a₂)^η))",
            "horizon 'run' = the iterations k = 0..T−1 a T-round run executes; the paper's sums start at k = 1",
        )
        condition, holds = self.condition()
        statements = [
            f"{self.theorem}: ε is finite over an infinite number of iterations when {condition} "
            f"({'holds' if holds else 'fails'} here). Recomputed ε_∞: uncapped γ_k (unlimited samples, the "
            f"paper's setting) {_bounded(lambda: self.claimed(None, None))}; γ_k capped at {self.cap} (this "
            f"run's data) {_bounded(lambda: self.claimed(None, self.cap))}; sound {_bounded(lambda: self.sound(None))}",
        ]
        if self.example.matches(p):
            statements.append(self.worked_example())
        return Claim(
            defense=self.name,
            notion="ε-DP (pure, Laplace)",
            adjacency=("Definition 1: agent i's sampled gradients at one iteration differ in one sample, "
                       "whose gradients differ by at most C in ℓ1"),
            eps_claimed=claimed.value,
            eps_stated=self.example.stated if self.example.matches(p) else None,
            eps_sound=sound,
            delta=0.0,
            horizon="infinite" if infinite else rounds,
            equation=self.equation,
            sound_method=self.release,
            assumptions=assumptions,
            statements=tuple(statements),
            neighbours=Neighbours("replace-one", "gradient", "Definition 1: the two data sets' sampled gradients "
                                  "differ in one sample, by at most C in ℓ1", RECORD_FACTOR),
            threat=THREAT,
            findings=(("premise not enforced",
                       f"Definition 1 assumes one sample changes agent i's gradient by at most C = {p.clip:g} in ℓ1; "
                       f"per-record ℓ1 clipping to C lets a replaced record change it by 2C, so at the record level "
                       f"every sensitivity at a common point doubles (factor {RECORD_FACTOR:g}): the sound ε is "
                       f"{record_level:.4g} for records against {sound:.4g} under Definition 1"),),
        )


@register
class OutputPerturbation(_TimeVaryingSamples):
    name = "tvss_output"
    title = "Wang & Zhang Alg. 1 (time-varying sample sizes, output perturbation)"
    Params = TVSSParams
    example = WorkedExample({"clip": 0.2, "a1": 0.5, "a2": 1.0, "a3": 1.0, "alpha": 0.9, "beta": 0.6,
                             "gamma": 1.1, "eta": 0.05, "sigma_scale": 1.0}, 0.864)
    equation = ("Lemma 1 eq. (4) + Theorem 1: Δ_1 = Cα₀/γ₀, Δ_k = Σ_{l=0}^{k−2} Π_{t=l+1}^{k−1}(1−β_t) "
                "Cα_l/γ_l (k > 1), ε = Σ_{k≥1} Δ_k/σ_k — as printed; the recursion (8) it is derived from "
                "also has the newest term l = k−1")
    release = ("pure_epsilon over the broadcasts y_{i,k} = x_{i,k} + n_{i,k}, k = 1..T−1, replace-one adjacency, "
               "Laplace scale σ_k. Given the released noisy states the two datasets' states differ by "
               "δ_{k+1} = (1−β_k)δ_k + c_k with c_0 = 2Cα₀/min(γ₀,|D_i|) and c_k = 2Cα_k for k ≥ 1: Lemma 1 takes "
               "both gradients at the same point, true at k = 0 only; afterwards the states differ and only "
               "‖ḡ − ḡ′‖₁ ≤ 2C holds (no public Lipschitz bound)")
    theorem = "Theorems 1–2"
    readings = {
        "sum from k = 2 (as the proof of Theorem 2 writes)": {"first": 2},
        "Δ_k with the newest term l = k−1 (recursion (8))": {"newest_term": True},
        "⌈x⌉ = smallest integer > x (the notation section)": {"ceiling": "strict"},
        "γ_k without the ceiling": {"ceiling": "none"},
    }

    delivers = True

    def step(self, t: int, wire: Wire) -> None:
        """Eq. (3): broadcast x_{i,k} + n_{i,k}, then mix the noisy states delivered (own included)
        and step."""
        noise = self.laplace(t)
        released = self.x + noise
        delivered = wire.broadcast_each(t, Kind.NOISY_STATE, released)
        wire.disclose_each(t, "noise", noise)
        gradients = self.local_gradients(t, wire)
        alpha, beta = self.mix(t)
        self.x = (1.0 - beta) * self.x + beta * self.gossip(released, delivered) - alpha * gradients

    def claimed(self, rounds: int | None, cap: int | None, **reading) -> Budget:
        return output_claim(self.schedule, self.params.clip, rounds, cap, **reading)

    def claimed_terms(self, last: int) -> np.ndarray:
        sensitivities = lemma1_sensitivities(self.schedule, self.params.clip, last)
        return sensitivities[1:] / self.schedule.scale(np.arange(1, last + 1))

    def sound(self, rounds: int | None, factor: float = DEFINITION_1) -> Budget:
        return output_sound(self.schedule, self.params.clip, rounds, self.cap, factor=factor)

    def condition(self) -> tuple[str, bool]:
        p = self.params
        if p.beta < 1:
            value = p.alpha + p.gamma - p.beta + p.eta
            return f"α+γ−β+η = {value:.4g} > 1 (condition iii)", value > 1
        if p.alpha + p.gamma - p.a1 < 1:
            return f"α+γ+η = {p.alpha + p.gamma + p.eta:.4g} > 2 (condition i)", p.alpha + p.gamma + p.eta > 2
        return f"a₁+η = {p.a1 + p.eta:.4g} > 1 (condition ii)", p.a1 + p.eta > 1

    def releases(self, rounds: int, factor: float = DEFINITION_1) -> tuple[np.ndarray, np.ndarray]:
        sensitivities = output_sound_sensitivities(self.schedule, self.params.clip, max(rounds - 1, 0), self.cap,
                                                   factor)
        return sensitivities[1:], self.schedule.scale(np.arange(1, len(sensitivities)))


@register
class GradientPerturbation(_TimeVaryingSamples):
    name = "tvss_gradient"
    title = "Wang & Zhang Alg. 2 (time-varying sample sizes, gradient perturbation)"
    Params = TVSSGradientParams
    example = WorkedExample({"clip": 0.2, "a1": 0.5, "a2": 1.0, "a3": 1.0, "alpha": 0.8, "beta": 0.5,
                             "gamma": 1.2, "eta": 0.1, "sigma_scale": 1.0}, 0.488)
    equation = ("Theorem 5: ε = Σ_{k≥1} C/(γ_k σ_k) — as printed; the noisy gradient of k = 0 is released "
                "too but not summed")
    release = ("pure_epsilon over the noisy gradients g_i^k + n_{i,k}, k = 0..T−1 (the states are their "
               "post-processing), replace-one adjacency, Laplace scale σ_k: Δ_k = 2C/min(γ_k, |D_i|), one "
               "clipped sample replaced at a public point (the paper's C/γ_k covers only pairs whose gradients "
               "differ by ≤ C, not every replacement of a sample clipped to ℓ1 norm C)")
    theorem = "Theorem 5"
    readings = {
        "sum from k = 2": {"first": 2},
        "sum from k = 0 (the first noisy gradient)": {"first": 0},
        "⌈x⌉ = smallest integer > x (the notation section)": {"ceiling": "strict"},
        "γ_k without the ceiling": {"ceiling": "none"},
    }

    delivers = True

    def step(self, t: int, wire: Wire) -> None:
        """§4: broadcast x_{i,k}, mix the clean states delivered and step along the noisy gradient."""
        delivered = wire.broadcast_each(t, Kind.MODEL, self.x)
        gradients = self.local_gradients(t, wire)
        noise = self.laplace(t)
        wire.disclose_each(t, "noise", noise)
        alpha, beta = self.mix(t)
        self.x = (1.0 - beta) * self.x + beta * self.gossip(self.x, delivered) - alpha * (gradients + noise)

    def claimed(self, rounds: int | None, cap: int | None, **reading) -> Budget:
        return gradient_claim(self.schedule, self.params.clip, rounds, cap, **reading)

    def claimed_terms(self, last: int) -> np.ndarray:
        k = np.arange(1, last + 1)
        return self.params.clip / (self.schedule.batch(k) * self.schedule.scale(k))

    def sound(self, rounds: int | None, factor: float = DEFINITION_1) -> Budget:
        return gradient_sound(self.schedule, self.params.clip, rounds, self.cap, factor=factor)

    def condition(self) -> tuple[str, bool]:
        value = self.params.eta + self.params.gamma
        return f"η+γ = {value:.4g} > 1", value > 1

    def releases(self, rounds: int, factor: float = DEFINITION_1) -> tuple[np.ndarray, np.ndarray]:
        return (gradient_sound_sensitivities(self.schedule, self.params.clip, rounds, self.cap, factor),
                self.schedule.scale(np.arange(rounds)))
