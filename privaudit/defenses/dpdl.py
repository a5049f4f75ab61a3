"""DPDL (Yuan et al., seed 000/001): noisy cross-gradients, similarity calibration, momentum.

Algorithm 1 (seed 000, lines 1–30), per round t and agent i:

1. broadcast the model x^i_{t−1} (line 3; `Kind.MODEL`) and draw a batch of B distinct samples
   (line 4; `LocalData.fixed_batches`, the paper's "randomly sample B data");
2. for each neighbour j: the cross-gradient of i's batch at x^j_{t−1} (eq. 8), clipped per sample
   to C (eq. 9), summed, plus fresh z^{ji} ~ N(0, σ²C² I), divided by B (eq. 10), sent to j
   (line 10; `Kind.CROSS_GRADIENT`, one directed message per link);
3. the self-gradient at x^i_{t−1}, clipped (eq. 12), its mean ĝ^{ii} (eq. 14) and its noisy
   version g̈^{ii} with z^{ii} ~ N(0, σ²C² I) (eq. 13 / line 16);
4. calibration over j ∈ N_i, i included with g̈^{ii} (eqs. 15–18): S = cos(g̈^{ij}, ĝ^{ii}),
   c^{ij} = 1 / (1 + e^S), g̃^{ij} = g̈^{ij} / (√w_ij N) + α w_ij c^{ij} ĝ^{ii}, g̃^i = Σ_j g̃^{ij};
5. ṽ^i = β v^i + g̃^i (eq. 19), x̃^i = x^i − η ṽ^i (eq. 20), both broadcast (line 26;
   `Kind.MOMENTUM`, `Kind.PREGOSSIP_MODEL`), then gossip v^i = Σ_j w_ij ṽ^j, x^i = Σ_j w_ij x̃^j
   (eqs. 21–22). Every agent starts from the same x_0, with v_0 = 0.

Every agent computes its cross-gradients at the models it received and mixes the momenta and models
it received (`delivers`): a neighbour who lies (`privaudit.wire.Malicious`) chooses, by the model it
sends agent i, the very point at which i computes the cross-gradient it sends back in that round.

All clipped gradient sums of a round (every directed pair (i → j) at x^j plus every self pair
(i, i)) come from one `clipped_sums` call over pairs (in closed form for a linear model, else from
per-sample gradients), split into row chunks only when one call would exceed a memory budget (the
paper's MNIST grid at N = 30 would need ~48 GB at once).
Each agent discloses (`Wire.disclose`, seen only by a curious-neighbour tap of that agent) its
batch (`batch`, dataset rows), ĝ^{ii} (`self_gradient`) and, when noisy, z^{ii}
(`self_noise`) and each z^{ji} (`noise_to_{j}`).

Decisions where the paper is ambiguous:

* z^{ii} has variance σ²C² as in line 16 (the prose before eq. 12 says σ²; SPEC.md decision).
* ND variant (`noise = false`, paper §VI-D): no Gaussian noise anywhere, clipping kept (SPEC.md
  decision; the paper's ND-CG speaks of the "original cross-gradient", which could be unclipped).
* σ: the paper states only ε per experiment (MNIST {0.25, 0.5, 1}, CIFAR-10 {2, 4, 8}), never σ.
  `target_epsilon` records that stated ε (→ `eps_stated`); when `noise_multiplier` is omitted, σ
  is the smallest that eq. 23 accepts for it at T = `target_rounds` under the assumed constants,
  the reading "the paper set σ by its Theorem 1" (defenses are not told the run's rounds, hence
  the extra field).
* Claim: eq. 23 of the main text (Theorem 1) solved for ε. Appendix A ends in a different form —
  15α(1 − w_min)/8 instead of 15αN/8, and Σ_{j∈N_i} 1/w_min instead of 1/w_max under the root —
  and its second term also lost the factor N that the line before it carries. The theorem as
  stated is the claim: it asks for at least the σ of the appendix's form with N restored (its
  numerator is larger, its root smaller), so it is the paper's headline and the weaker of the two.
  The appendix's printed form is evaluated as a statement beside it.
* N_i contains i (Alg. 1 lines 5 and 19 write N_i \\ {i} for the neighbours), so |N_i| = deg(i)+1
  and w_min, w_max range over w_ii too. σ is one number for all agents, so the claimed ε is the
  largest over agents: the smallest |N_i|.
* c₁, c₂ and h are never given: parameters with documented defaults, listed as assumptions.
  c₂ = 2 is the leading-order value of the paper's own derivation (Lemma 1's factor
  λ(λ+1)/((1−q)λ²) → 1, and λ = 2 ln(1/δ)/ε from Lemma 5 gives the factor 2, as in Abadi et al.'s
  moments accountant); c₁ = 1 (no value can be derived); h = 1, the infimum of its definition,
  so the claim is evaluated at its most favourable point (any real h ≥ 1 claims a larger ε).
  The h realised in the run is reported beside it once rounds have been run.
* δ: the paper gives none; 1e-5 by default.

Sound accounting. The cross-gradients are Gaussian releases: agent i's clipped batch sum
(sensitivity 2C when one record of i's dataset is replaced, since the batch has a fixed size B)
with noise σC, deg(i) fresh-noise copies of the same batch per round, the batch drawn without
replacement (dp_accounting's `SampledWithoutReplacementDpEvent`, replace-one), T rounds; the tight
accountant for this sampling (`privaudit.accounting.without_replacement_epsilon`) evaluates it.
But i's broadcasts ṽ^i and x̃^i contain α Σ_j w_ij c^{ij} ĝ^{ii}, its clipped self-gradient
*without* noise (line 21 / eq. 17 use ĝ^{ii}, not g̈^{ii}). A listener who hears the
cross-gradients sent to i subtracts them and β v^i_{t−1} (known from the previous broadcasts):
what remains is (1/(√w_ii N) + α Σ_j w_ij c^{ij}) ĝ^{ii} + z^{ii}/(B √w_ii N), a data- and
noise-dependent scaling of the un-noised gradient, masked only by i's own self-noise. That is no
post-processing of the Gaussian releases and no standard accountant supports it, so no sound ε is
certified for the transcript (`UnsupportedDpEvent`); the cross-gradient channel's ε is reported as
a clearly labelled partial figure. The paper's proof reaches a bound by counting the neighbours'
noises z^{ij} (eq. 40) as masking i's release, although those noises travel on the wire inside
the g̈^{ij} themselves. In the ND variant the transcript has no noise at all (`NonPrivateDpEvent`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import dp_accounting
import torch
from pydantic import Field, model_validator
from torch import Tensor

from privaudit.defenses.base import Defense, DefenseParams, register
from privaudit.accounting import (OUTSIDE_RANGE, WITHOUT_REPLACEMENT_METHOD, AssumedConstant, Claim, ClaimThreat,
                                  Neighbours,
                                  without_replacement_epsilon)
from privaudit.grads import clipped_sums
from privaudit.setup import Setup
from privaudit.wire import Delivery, Kind, Wire

# Largest per-sample gradient tensor (rows × B × P floats) computed in one call.
_CHUNK_FLOATS = 2**26


THREAT = ClaimThreat("eavesdropper", (
    "seed 000 §III: \"an adversary may eavesdrop on their communications\"; Appendix A, Theorem 1's proof: "
    "an adversary reconstructs an agent's data \"by eavesdropping on the communications to its peers\". The "
    "paper names no agent that sends crafted models"))
"""Who Theorem 1 is stated against, read from the paper: a listener on the links."""


class DPDLParams(DefenseParams):
    """Algorithm 1's inputs, defaulting to the paper's MNIST setting (§VI-A); σ has no paper value."""

    lr: float = Field(0.005, gt=0, description="η (paper: 0.005 on MNIST, 0.03 on CIFAR-10)")
    batch_size: int = Field(216, ge=1, description="B, distinct samples drawn by each agent per round")
    clip: float = Field(2.0, gt=0, description="per-sample ℓ2 clip norm C (paper: 2 MNIST, 3 CIFAR-10)")
    noise_multiplier: float | None = Field(
        None, gt=0, description="σ: noise std σC on each clipped batch sum; omit to take the σ that "
        "eq. 23 requires for target_epsilon")
    target_epsilon: float | None = Field(
        None, gt=0, description="the ε the paper states for the experiment this run reproduces "
        "(MNIST 0.25/0.5/1, CIFAR-10 2/4/8): an input of the paper's experiments, reported as eps_stated")
    target_rounds: int | None = Field(
        None, ge=1, description="T at which eq. 23 sets σ for target_epsilon (the run's `rounds`, which "
        "defenses are not told); needed only when noise_multiplier is omitted")
    beta: float = Field(0.7, ge=0, lt=1, description="momentum coefficient β")
    alpha: float = Field(1.5, ge=0, description="calibration weight α (paper: 1.5; 2 on the ring)")
    noise: bool = Field(True, description="false: the paper's ND variant (no Gaussian noise, clipping kept)")
    delta: float = Field(1e-5, gt=0, lt=1, description="δ of the claim (the paper gives none)")
    h: float = Field(1.0, ge=1, description="Theorem 1's data-dependent h ≥ 1 (never given; 1 = its infimum)")
    c1: float = Field(1.0, gt=0, description="Theorem 1's constant c₁ in ε ≤ c₁q²T (never given)")
    c2: float = Field(2.0, gt=0, description="Theorem 1's constant c₂ in eq. 23 (never given; 2 = leading order)")

    @model_validator(mode="after")
    def _noise_level(self) -> DPDLParams:
        if self.noise and self.noise_multiplier is None and self.target_epsilon is None:
            raise ValueError("set noise_multiplier (σ), or target_epsilon and target_rounds to take σ from "
                             "eq. 23 (or noise = false for the ND variant)")
        if self.noise and self.noise_multiplier is None and self.target_rounds is None:
            raise ValueError("target_rounds (T, the run's rounds) is needed to take σ from eq. 23 for "
                             "target_epsilon")
        return self


@dataclass(frozen=True)
class Theorem1:
    """The run-dependent quantities of Theorem 1 (seed 000, eq. 23), for the worst agent."""

    n_agents: int
    w_min: float
    w_max: float
    neighbourhood: int
    q: float
    rounds: int
    delta: float
    alpha: float
    h: float
    c2: float

    def epsilon(self, sigma: float) -> float:
        """Eq. 23 solved for ε: ε = (2/√w_min + 15αN/8 + α w_max (h+1)² N/(2h)) · c₂ q
        √(T ln(1/δ)) / (√(|N_i| / w_max) · σ)."""
        factor = (2 / math.sqrt(self.w_min) + 15 * self.alpha * self.n_agents / 8
                  + self.alpha * self.w_max * (self.h + 1) ** 2 * self.n_agents / (2 * self.h))
        return factor * self._scale() / (math.sqrt(self.neighbourhood / self.w_max) * sigma)

    def appendix_epsilon(self, sigma: float) -> float:
        """Appendix A's final form solved for ε: (2/√w_min + 15α(1 − w_min)/8 + α w_max (h+1)² N/(2h))
        · c₂ q √(T ln(1/δ)) / (√(|N_i| / w_min) · σ)."""
        factor = (2 / math.sqrt(self.w_min) + 15 * self.alpha * (1 - self.w_min) / 8
                  + self.alpha * self.w_max * (self.h + 1) ** 2 * self.n_agents / (2 * self.h))
        return factor * self._scale() / (math.sqrt(self.neighbourhood / self.w_min) * sigma)

    def sigma(self, eps: float) -> float:
        """The smallest σ eq. 23 accepts for ε (ε·σ is constant in eq. 23)."""
        return self.epsilon(1.0) / eps

    def _scale(self) -> float:
        return self.c2 * self.q * math.sqrt(self.rounds * math.log(1 / self.delta))


def lemma1_violations(q: float, sigma: float) -> list[str]:
    """The conditions of Lemma 1 (seed 000, Appendix: the moments bound Theorem 1's proof uses)
    that the run breaks: each record sampled with probability q < 1/(32σ), and σ ≥ c > 1 for a
    sensitivity c; σ is the noise multiplier (noise σC against sensitivity C)."""
    broken = []
    if q >= 1 / (32 * sigma):
        broken.append(f"Lemma 1, which the proof of Theorem 1 uses, needs q < 1/(32σ) = {1 / (32 * sigma):.3g}; "
                      f"the run has q = {q:.4g} at σ = {sigma:.4g}")
    if sigma <= 1:
        broken.append(f"Lemma 1, which the proof of Theorem 1 uses, needs σ > 1; the run has σ = {sigma:.4g}")
    return broken


@register
class DPDL(Defense):
    name = "dpdl"
    title = "DPDL (noisy cross-gradients, similarity calibration, momentum)"
    Params = DPDLParams

    def __init__(self, params: DPDLParams, setup: Setup) -> None:
        super().__init__(params, setup)
        topology = setup.topology
        n = topology.n
        setup.local.check_batch_size(params.batch_size)
        around = [topology.neighbours(i) for i in range(n)]
        # on a regular graph the pairs are slot-major (row d·n + i is agent i's pair with its d-th
        # neighbour), so every slot reads the agents' batches in agent order (`_clipped_sums`)
        self.slotted = len({len(js) for js in around}) == 1
        cross = ([(i, around[i][d]) for d in range(len(around[0])) for i in range(n)] if self.slotted
                 else [(i, j) for i in range(n) for j in around[i]])
        pairs = cross + [(i, i) for i in range(n)]
        self.sender = torch.tensor([i for i, _ in pairs])
        self.point = torch.tensor([j for _, j in pairs])
        self.n_cross = len(pairs) - n
        self.links = pairs[:self.n_cross]
        self.max_degree = max(topology.degree(i) for i in range(n))
        self.weights = topology.weights(self.point, self.sender)
        if bool((self.weights <= 0).any()):
            raise ValueError("DPDL divides by √w_ij: W must be positive on every edge and on its diagonal")
        self.noisy_weight = 1 / (self.weights.sqrt() * topology.network_size)
        self.self_weight = params.alpha * self.weights
        self.x = setup.model.initial().repeat(n, 1)
        self.v = torch.zeros_like(self.x)
        self.h_observed: float | None = None
        if not params.noise:
            self.sigma = 0.0
        elif params.noise_multiplier is not None:
            self.sigma = params.noise_multiplier
        else:
            self.sigma = self.theorem(params.target_rounds).sigma(params.target_epsilon)

    @property
    def states(self) -> Tensor:
        return self.x

    def public(self) -> dict[str, Any]:
        """The parameters with σ as the run uses it (set from eq. 23 when only a target ε is given);
        the ND variant publishes its parameters as given (it adds no noise)."""
        if not self.params.noise:
            return self.params.model_dump()
        return {**self.params.model_dump(), "noise_multiplier": self.sigma}

    delivers = True

    def step(self, t: int, wire: Wire) -> None:
        """One round of Algorithm 1 for every agent at once (rows = directed pairs, then self pairs).
        Each agent computes its cross-gradients at the models it received (line 3) and mixes the
        momenta and models it received (eqs. 21–22): a neighbour who lies reaches it (`delivers`)."""
        p = self.params
        models = wire.broadcast_each(t, Kind.MODEL, self.x)  # line 3
        xb, yb, rows = self.setup.local.fixed_batches(p.batch_size, self.setup.generator)  # line 4
        sums = self._clipped_sums(xb, yb, models)  # eqs. 8–9, 11–12
        noise = None
        if p.noise:
            noise = torch.randn(sums.shape, generator=self.setup.generator).mul_(self.sigma * p.clip)
        clean_self = sums[self.n_cross:] / p.batch_size  # eq. 14
        noisy = (sums if noise is None else sums.add_(noise)).div_(p.batch_size)  # eqs. 10 and 13
        wire.send_each(t, Kind.CROSS_GRADIENT, self.links, noisy[:self.n_cross])  # line 10: g̈^{ji} from i to j
        self._disclose(t, wire, rows, clean_self, noise)

        # ĝ^{jj} beside every g̈ that agent j receives (or its own g̈^{jj}): anchor_r = clean_self[point_r]
        noisy_norms, clean_norms = noisy.norm(dim=1), clean_self.norm(dim=1)
        dots = (noisy * clean_self[self.point]).sum(dim=1)
        cosine = dots / (noisy_norms * clean_norms[self.point]).clamp_min(1e-30)  # eq. 15
        calibration = torch.sigmoid(-cosine)  # eq. 16: 1 / (1 + e^S)
        # eqs. 17–18: Σ_{r → j} (w_r g̈_r + c_r anchor_r) = Σ_{r → j} w_r g̈_r + (Σ_{r → j} c_r) ĝ^{jj}
        aggregated = torch.zeros_like(self.x).index_add_(0, self.point, noisy.mul_(self.noisy_weight[:, None]))
        anchor_weight = torch.zeros(len(self.x)).index_add_(0, self.point, self.self_weight * calibration)
        aggregated.add_(anchor_weight[:, None] * clean_self)

        v_tilde = p.beta * self.v + aggregated  # eq. 19
        x_tilde = self.x - p.lr * v_tilde  # eq. 20
        momenta = wire.broadcast_each(t, Kind.MOMENTUM, v_tilde)  # line 26
        pregossip = wire.broadcast_each(t, Kind.PREGOSSIP_MODEL, x_tilde)
        self.v = self.gossip(v_tilde, momenta)  # eq. 21
        self.x = self.gossip(x_tilde, pregossip)  # eq. 22
        ratio = clean_norms / noisy_norms[self.n_cross:].clamp_min(1e-30)
        self.h_observed = max(self.h_observed or 0.0, float(ratio.max()) + 1)  # Theorem 1's h, as realised

    def _points(self, delivered: Delivery | None) -> Tensor:
        """The model at which each row's gradient is computed [R, P]: x^{point_r} as agent sender_r
        received it (Alg. 1 line 3 broadcasts it; eq. 8 evaluates agent i's batch at x^j), the
        crafted model where a liar j sent i one in its place, the agent's own for a self pair."""
        points = self.x[self.point]
        if delivered is None:
            return points
        crafted = delivered.by_link(self.setup.topology)
        for r in range(self.n_cross):
            link = (int(self.point[r]), int(self.sender[r]))
            if link in crafted:
                points[r] = crafted[link]
        return points

    def _clipped_sums(self, xb: Tensor, yb: Tensor, delivered: Delivery | None = None) -> Tensor:
        """Σ_b clip_C(∇F(p_r; ζ_{sender_r, b})) for every row r → [R, P], p_r the model sender_r
        received from point_r (`_points`, with the `delivered` models), from each agent's batch
        (xb [n, B, ...]). In closed form on a regular graph, whose slot-major rows share the
        agents' batches (`FlatModel.clipped_sums`: few large products); else from per-sample
        gradients, in row chunks within the memory budget."""
        model, clip = self.setup.model, self.params.clip
        points = self._points(delivered)
        if model.closed_form and self.slotted:
            return clipped_sums(model, points, xb, yb, torch.ones(len(points), xb.shape[1]), clip)
        x, y = xb[self.sender], yb[self.sender]
        rows, batch = x.shape[:2]
        chunk = max(1, _CHUNK_FLOATS // (batch * points.shape[1]))
        sums = []
        for start in range(0, rows, chunk):
            part = slice(start, start + chunk)
            mask = torch.ones(x[part].shape[:2])
            sums.append(clipped_sums(model, points[part], x[part], y[part], mask, clip))
        return sums[0] if len(sums) == 1 else torch.cat(sums)

    def _disclose(self, t: int, wire: Wire, rows: Tensor, clean_self: Tensor, noise: Tensor | None) -> None:
        """Each agent's private values: its batch (dataset rows), ĝ^{ii} and its noise draws."""
        wire.disclose_each(t, "batch", rows)
        wire.disclose_each(t, "self_gradient", clean_self)
        if noise is not None:
            wire.disclose_each(t, "self_noise", noise[self.n_cross:])
            if wire.observes_anyone():
                size = self.setup.topology.network_size
                for r, (i, j) in enumerate(self.links):  # named by j in its own network (an audit's worlds)
                    wire.disclose(t, i, f"noise_to_{j % size}", noise[r])

    def theorem(self, rounds: int) -> Theorem1:
        """Theorem 1's quantities for this run: w over N_i (i included), the smallest |N_i|,
        q = B / (N min_i D_i)."""
        topology, p = self.setup.topology, self.params
        n = topology.network_size
        return Theorem1(
            n_agents=n,
            w_min=float(self.weights.min()),
            w_max=float(self.weights.max()),
            neighbourhood=min(topology.degree(i) for i in range(topology.n)) + 1,
            q=p.batch_size / (n * int(self.setup.local.sizes.min())),
            rounds=rounds,
            delta=p.delta,
            alpha=p.alpha,
            h=p.h,
            c2=p.c2,
        )

    def cross_gradient_mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        """The cross-gradient messages alone, for the worst agent (largest degree, smallest D_i):
        per round deg(i) Gaussian releases with fresh noise σC of one clipped batch sum whose
        replace-one sensitivity is 2C (noise multiplier σ/2 each), the batch of B drawn without
        replacement from D_i, composed over `rounds`."""
        per_round = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(self.sigma / 2),
                                                     self.max_degree)
        sampled = dp_accounting.SampledWithoutReplacementDpEvent(
            int(self.setup.local.sizes.min()), self.params.batch_size, per_round)
        return dp_accounting.SelfComposedDpEvent(sampled, rounds)

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        if not self.params.noise:
            return dp_accounting.NonPrivateDpEvent()
        return dp_accounting.UnsupportedDpEvent()

    def claim(self, rounds: int) -> Claim:
        if not self.params.noise:
            return self._nd_claim(rounds)
        p = self.params
        theorem = self.theorem(rounds)
        claimed = theorem.epsilon(self.sigma)
        limit = p.c1 * theorem.q ** 2 * rounds
        outside = "" if claimed <= limit else (
            f" — OUTSIDE the theorem's range (ε = {claimed:.4g} > c₁q²T = {limit:.4g}): Theorem 1 claims "
            "nothing for this σ")
        out_of_range = [] if claimed <= limit else [(
            OUTSIDE_RANGE,
            f"Theorem 1 holds only for ε ≤ c₁q²T = {limit:.4g}; the recomputed ε = {claimed:.4g} lies outside it, "
            "so the theorem claims nothing for this σ")]
        out_of_range += [(OUTSIDE_RANGE, text) for text in lemma1_violations(theorem.q, self.sigma)]
        return Claim(
            findings=tuple(out_of_range),
            neighbours=Neighbours("replace-one", "record", "Def. 3: one record of an agent's local dataset replaced"),
            threat=THREAT,
            constants=self._constants(),
            defense=self.name,
            notion="(ε, δ)-DP",
            adjacency="one record of an agent's local dataset replaced (Def. 3; Lemma 1's proof)",
            eps_claimed=claimed,
            eps_stated=p.target_epsilon,
            eps_sound=None,
            delta=p.delta,
            horizon=rounds,
            equation="Theorem 1, eq. 23: σ ≥ (2/√w_min + 15αN/8 + α w_max (h+1)² N/(2h)) c₂ q "
                     "√(T ln(1/δ)) / (√(Σ_{j∈N_i} 1/w_max) ε), q = B/(N min_i D_i), for ε ≤ c₁q²T; solved "
                     "for ε at the run's σ" + outside,
            sound_method=(
                "none certified (UnsupportedDpEvent): agent i's broadcasts ṽ^i and x̃^i carry "
                "α Σ_j w_ij c^{ij} ĝ^{ii}, its clipped self-gradient WITHOUT noise (Alg. 1 line 21, eq. 17); "
                "a listener who hears the cross-gradients sent to i subtracts them and β v^i_{t−1}, leaving "
                "ĝ^{ii} scaled by data- and noise-dependent calibration weights and masked only by "
                "z^{ii}/(B√w_ii N). That is not post-processing of the Gaussian releases, and no standard "
                "accountant (RDP / PLD) bounds it"
            ),
            assumptions=self._assumptions(theorem),
            statements=self._statements(theorem, claimed, limit),
        )

    def _nd_claim(self, rounds: int) -> Claim:
        return Claim.no_privacy(
            self.name, rounds,
            "ND variant (seed 000 §VI-D): no Gaussian noise, clipping kept; the paper claims no privacy for it",
            "no DP noise: the cross-gradients are clipped batch gradients and the momenta carry the clipped "
            "self-gradient in the clear, so no ε bound exists",
        )

    def _constants(self) -> tuple[AssumedConstant, ...]:
        """The constants eq. 23 needs and the paper never gives: ε is proportional to c₂; it grows
        with h (h = 1 is its smallest claim); c₁ enters only the range ε ≤ c₁q²T."""
        p = self.params
        return (AssumedConstant("c₂", p.c2, 1.0, "eq. 23's ε is proportional to c₂"),
                AssumedConstant("h", p.h, None, "eq. 23's ε grows with h ≥ 1; h = 1 gives its smallest ε"),
                AssumedConstant("c₁", p.c1, None, "only in the range condition ε ≤ c₁q²T"))

    def _assumptions(self, theorem: Theorem1) -> tuple[str, ...]:
        p, smallest = self.params, int(self.setup.local.sizes.min())
        return (
            f"c₂ = {p.c2:g} (never given; 2 is the leading order of the paper's own moments derivation)",
            f"c₁ = {p.c1:g} (never given) in the range condition ε ≤ c₁q²T",
            f"h = {p.h:g} (data- and noise-dependent, never given; 1 is its infimum, the value most "
            "favourable to the claim)",
            f"δ = {p.delta:g} (the paper gives none)",
            f"N_i includes i: |N_i| = deg(i) + 1 = {theorem.neighbourhood} for the worst agent (smallest "
            f"|N_i|); w_min = {theorem.w_min:.4g}, w_max = {theorem.w_max:.4g} over N_i, w_ii included",
            f"q = B/(N min_i D_i) = {p.batch_size}/({theorem.n_agents}·{smallest}) = {theorem.q:.4g}, with "
            "this run's local dataset sizes",
            f"σ = {self.sigma:.4g}" + ("" if p.noise_multiplier is not None else
                                       f" (from eq. 23 for target_epsilon at T = {p.target_rounds})"),
        )

    def _statements(self, theorem: Theorem1, claimed: float, limit: float) -> tuple[str, ...]:
        p, rounds = self.params, theorem.rounds
        partial = without_replacement_epsilon(self.cross_gradient_mechanism(rounds), p.delta)
        statements = [
            f"PARTIAL figure, cross-gradient messages only (not a bound for the transcript): ε = {partial:.4g} "
            f"at δ = {p.delta:g} ({WITHOUT_REPLACEMENT_METHOD}; per round {self.max_degree} fresh Gaussian "
            f"releases of one clipped batch sum, noise σC = {self.sigma * p.clip:.4g} against sensitivity 2C; "
            f"B = {p.batch_size} of D_i = {int(self.setup.local.sizes.min())} drawn without replacement; "
            f"{rounds} rounds)",
            f"Theorem 1 requires ε ≤ c₁q²T = {limit:.4g}: the recomputed ε = {claimed:.4g} is "
            + ("inside that range" if claimed <= limit else "OUTSIDE it, so the theorem makes no claim at this σ"),
            f"Appendix A's final form (15α(1−w_min)/8, and √(Σ_{{j∈N_i}} 1/w_min) below) gives "
            f"ε = {theorem.appendix_epsilon(self.sigma):.4g}; its second term also lost the factor N that the "
            "line before it carries",
            f"q = B/(N min_i D_i) = {theorem.q:.4g} is 1/N of the rate at which an agent's records are really "
            f"sampled: B/min_i D_i = {p.batch_size / int(self.setup.local.sizes.min()):.4g} per round",
            "the proof's noise (eq. 40) counts the neighbours' z^{ij} as masking agent i's release, but they "
            "travel on the wire inside the cross-gradients g̈^{ij}: only z^{ii}/(B√w_ii N) is private to i",
        ]
        if self.h_observed is not None:
            realised = replace(theorem, h=self.h_observed).epsilon(self.sigma)
            statements.append(f"h realised in the rounds run: {self.h_observed:.4g}; eq. 23 at it gives "
                              f"ε = {realised:.4g}")
        if p.target_epsilon is not None:
            origin = ("σ was taken from eq. 23 for it" if p.noise_multiplier is None
                      else f"eq. 23 needs σ ≥ {theorem.sigma(p.target_epsilon):.4g} for it")
            statements.append(f"the paper states ε = {p.target_epsilon:g} as an input of its experiment; {origin}")
        return tuple(statements)
