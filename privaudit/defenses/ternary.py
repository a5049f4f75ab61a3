"""Quantization-enabled privacy (Wang & Başar, seed 004): decentralized SGD that sends only a
stochastic ternary quantization of each state.

Algorithm 1 / eq. (3), for every agent i at iteration k:

    x_i^{k+1} = x_i^k + ε^k Σ_{j∈N_i} w_ij (Q(x_j^k) − Q(x_i^k)) − ε^k λ^k g_i^k

with λ^k = a₁/(a₃k + 1)^{δ₁} and ε^k = a₂/(a₃k + 1)^{δ₂} (Corollary 1's form). Stacked over agents
this is eq. (4): x^{k+1} = x^k − ε^k L_w Q(x^k) − ε^k λ^k g^k, with L_w = D − W the graph Laplacian
of Assumption 2. Each agent draws **one** Q(x_i^k) per iteration (Definition 2, `ternary` in
`privaudit/quantizers.py`), broadcasts it to all its neighbours (`Kind.QUANTIZED_STATE`, the only
message) and uses the same draw in its own comparison term — that is what makes eq. (5)'s average
immune to the quantization error, and per-link draws would break it. Each agent couples to the
draws the wire delivered (`delivers`): a neighbour who lies (`privaudit.wire.Malicious`) reaches it. Agents also disclose their
state x_i^k (the quantizer's input) and g_i^k to their own curious-neighbour tap.

Decisions where the paper is silent or ambiguous:

* w_ij are the off-diagonal entries of the run's symmetric mixing matrix (the paper's w_ij are
  any symmetric positive weights on edges). The graph of the paper's Fig. 1 is only an image;
  the preset uses a ring of 5 agents.
* g_i^k is the paper's stochastic gradient g_i^k(x, ξ_i) (Assumption 1: unbiased, bounded
  variance): the mean gradient of `batch_size` local samples drawn uniformly without
  replacement, **not clipped** (the paper clips nothing). No batch size is given; the default,
  1, is the single realization ξ_i of its notation.
* x_i^0 is the model's initial point. Algorithm 1 says x_i^0 = 0, which `linear_estimator` gives
  (its default init); a CNN at θ = 0 has zero gradients in every hidden layer and cannot train,
  so for `wb_mnist` the architecture's own initialisation (the same for all agents) is kept.
* The regulariser r_i‖θ‖² of §VII-A has no stated value; the preset uses r_i = 0.
* r < ‖x_i^k‖_∞ (which the paper excludes without saying what happens): by default the
  quantizer saturates those coordinates at ±r (see `privaudit/quantizers.py`); with
  `on_overflow = "raise"` the run stops. Every run counts how often it happened, and the claim
  reports it, since Theorem 3 assumes it never does.

The claim (Theorem 3, Remarks 6 and 10) is about the quantizer's input, the state x_i^k; see
`claim` for the exact accounting and for why there is no data-level bound.
"""

from __future__ import annotations

from typing import Literal

import dp_accounting
import torch
from pydantic import Field
from torch import Tensor

from privaudit.defenses.base import Defense, DefenseParams, register
from privaudit.accounting import Claim, ClaimThreat, Neighbours
from privaudit.grads import batch_grads
from privaudit.quantizers import TernaryQuantizerDpEvent, outside, ternary, worst_case_delta
from privaudit.setup import Setup
from privaudit.wire import Delivery, Kind, Wire


THREAT = ClaimThreat("honest-but-curious", (
    "seed 004 §II: \"honest-but-curious attacks\", agents that follow \"all protocol steps correctly\", and "
    "\"eavesdropping attacks\" by an external wiretapper; §VI adds that privacy holds \"even when an adversary "
    "has access to all shared messages\", never against one that changes them"))
"""Who Theorem 3 is stated against, read from the paper: agents that follow the protocol, and listeners."""


class TernaryParams(DefenseParams):
    r: float = Field(4.0, gt=0, description="quantization threshold r: levels {−r, 0, r}; Theorem 3's δ = 1/r")
    a1: float = Field(1.0, gt=0, description="λ^k = a1 / (a3 k + 1)^delta1")
    a2: float = Field(1.0, gt=0, description="ε^k = a2 / (a3 k + 1)^delta2")
    a3: float = Field(0.3, gt=0, description="time scale of both schedules")
    delta1: float = Field(0.3, ge=0, description="decay exponent δ₁ of λ^k (not a DP δ)")
    delta2: float = Field(0.6, ge=0, description="decay exponent δ₂ of ε^k (not a DP δ)")
    batch_size: int = Field(1, ge=1, description="samples per stochastic gradient g_i^k")
    on_overflow: Literal["clip", "raise"] = Field(
        "clip", description="when |x_c| > r: saturate at ±r (counted, reported) or stop the run")

    def step_sizes(self, k: int) -> tuple[float, float]:
        """(λ^k, ε^k) of iteration k (Corollary 1's schedules; public, so attackers compute them too)."""
        return schedule(self.a1, self.a3, self.delta1, k), schedule(self.a2, self.a3, self.delta2, k)


def schedule(scale: float, rate: float, decay: float, k: int) -> float:
    """Corollary 1's step-size form scale / (rate · k + 1)^decay."""
    return scale / (rate * k + 1.0) ** decay


@register
class Ternary(Defense):
    name = "ternary"
    title = "Ternary quantization (Wang & Başar)"
    Params = TernaryParams

    def __init__(self, params: TernaryParams, setup: Setup) -> None:
        super().__init__(params, setup)
        setup.local.check_batch_size(params.batch_size)
        off_diagonal = self.W - torch.diag(torch.diagonal(self.W))
        self.laplacian = torch.diag(off_diagonal.sum(dim=1)) - off_diagonal
        self.x = setup.model.initial().repeat(setup.topology.n, 1)
        self.draws = 0
        self.overflow_draws = 0
        self.overflow_coordinates = 0
        self.max_input = 0.0

    @property
    def states(self) -> Tensor:
        return self.x

    def step_sizes(self, k: int) -> tuple[float, float]:
        """(λ^k, ε^k) of iteration k."""
        return self.params.step_sizes(k)

    def local_gradients(self) -> tuple[Tensor, Tensor]:
        """Each agent's stochastic gradient g_i^k at its own state [N, P], and the batch's dataset
        rows [N, B]."""
        xb, yb, rows = self.setup.local.fixed_batches(self.params.batch_size, self.setup.generator)
        return batch_grads(self.setup.model, self.x, xb, yb), rows

    def quantize(self) -> Tensor:
        """One draw of Q(x_i^k) per agent (rows), counting the draws that break r ≥ ‖x_i^k‖_∞."""
        p = self.params
        beyond = outside(self.x, p.r)
        self.draws += self.x.shape[0]
        self.overflow_draws += int(beyond.any(dim=1).sum())
        self.overflow_coordinates += int(beyond.sum())
        self.max_input = max(self.max_input, float(self.x.abs().max()))
        return ternary(self.x, p.r, self.setup.generator, on_overflow=p.on_overflow)

    delivers = True

    def step(self, t: int, wire: Wire) -> None:
        gradients, rows = self.local_gradients()
        quantized = self.quantize()
        delivered = wire.broadcast_each(t, Kind.QUANTIZED_STATE, quantized)
        wire.disclose_each(t, "batch", rows)
        wire.disclose_each(t, "state", self.x)
        wire.disclose_each(t, "gradient", gradients)
        lam, eps = self.step_sizes(t)
        self.x = self.x - eps * self.coupling(quantized, delivered) - eps * lam * gradients

    def coupling(self, quantized: Tensor, delivered: Delivery | None) -> Tensor:
        """L_w Q, row i Σ_j w_ij (Q_i − Q_j) of eq. (3), with each agent's own draw Q_i and the
        neighbours' draws it received: a lying neighbour a's m_{a→i} in place of Q_a lowers row i by
        w_ia (m_{a→i} − Q_a), the correction `Delivery.mix` adds to W Q (here added to zero)."""
        coupled = self.laplacian @ quantized
        if delivered is None:
            return coupled
        return coupled - delivered.mix(torch.zeros_like(quantized), quantized, self.setup.topology)

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        """`rounds` quantizations of one agent's state: no dp_accounting accountant supports it."""
        return TernaryQuantizerDpEvent(threshold=self.params.r, dimension=self.setup.model.dim, count=rounds)

    def premise(self) -> str:
        """Whether this run kept Theorem 3's premise r ≥ ‖x_i^k‖_∞ so far."""
        r = self.params.r
        if self.draws == 0:
            return f"premise r ≥ ‖x_i^k‖_∞ (r = {r:g}): not checked yet, no iteration has run"
        seen = f"largest quantizer input |x| = {self.max_input:.4g}"
        if self.overflow_draws == 0:
            return f"premise r ≥ ‖x_i^k‖_∞ (r = {r:g}) held at all {self.draws} agent-iterations ({seen})"
        return (f"premise r ≥ ‖x_i^k‖_∞ (r = {r:g}) FAILED at {self.overflow_draws} of {self.draws} "
                f"agent-iterations ({self.overflow_coordinates} coordinate(s); {seen}): those coordinates were "
                "saturated at ±r, so Q was biased there and Theorem 3 does not cover those draws")

    def claim(self, rounds: int) -> Claim:
        """Theorem 3's (0, 1/r)-DP per iteration for quantizer inputs with ‖x − y‖₁ ≤ 1, with
        Remark 6 (any ℓp norm) and Remark 10 (budget grows like √T) as separate statements.

        Sound accounting for the claim's own adjacency (`privaudit/quantizers.py`): one draw has
        worst-case TV min(1, 1/r) under ℓ1 — Theorem 3 is tight; under ℓ2 / ℓ∞ in dimension
        P it is about √P/r and 1 − (1 − 1/r)^P; over T iterations δ_T = 1 − (1 − 1/r)^T, at
        every ε ≥ 0. `delta_sound` is that δ_T. There is no data-level bound (`eps_sound` None).
        """
        p = self.params
        dim = self.setup.model.dim
        claimed = 1.0 / p.r
        l1 = worst_case_delta(p.r, dim=dim, norm=1)
        l2 = worst_case_delta(p.r, dim=dim, norm=2)
        linf = worst_case_delta(p.r, dim=dim, norm="inf")
        horizon = worst_case_delta(p.r, dim=dim, norm=1, draws=rounds)
        growth = ", ".join(
            f"T = {t}: δ_T = {worst_case_delta(p.r, dim=dim, norm=1, draws=t).delta:.4g} vs √T/r = "
            f"{min(1.0, t ** 0.5 * claimed):.4g}" for t in (4, 16)
        )
        d1, d2 = p.delta1, p.delta2
        corollary = d1 + d2 <= 1 and d2 > 0.5 and 2 * d1 + d2 > 1
        l2_text = f"ℓ2 {l2.delta:.4g}" + (f" (shift 1/√k on k = {l2.coordinates} coordinates)" if l2.exact
                                          else " (upper bound)")
        remark6_verdict = "holds (P = 1)." if dim == 1 else (
            "fails for P > 1 — the per-coordinate proof does not compose across coordinates.")
        statements = (
            f"Theorem 3 (one iteration, ‖x − y‖₁ ≤ 1): Q is (0, 1/r) = (0, {claimed:.4g})-DP. Exact "
            f"worst-case δ = {l1.delta:.4g} (x = 0 vs y = e₁): "
            + ("holds, and is tight." if l1.delta <= claimed * (1 + 1e-12) else "fails."),
            f"Remark 6 (any ℓp norm): the same (0, {claimed:.4g}) for ‖x − y‖_p ≤ 1. Worst-case δ in "
            f"dimension P = {dim}: {l2_text}, ℓ∞ {linf.delta:.4g} (every coordinate shifted by 1): "
            + remark6_verdict,
            f"Remark 10 (cumulative budget grows roughly like √T): over T = {rounds} iterations of the same "
            f"input (ℓ1 ≤ 1) the exact worst case is (0, δ_T) with δ_T = 1 − (1 − 1/r)^T = "
            f"{horizon.delta:.4g}, the same δ at every ε ≥ 0 (Q(y) reaches outcomes Q(0) never produces); "
            f"{growth}. δ_T grows like T/r (linearly) until it saturates at 1: composition theorems (Kairouz "
            "et al., the paper's [62]) give ε = 0 and δ ≈ Tδ for ε = 0 mechanisms, never √T.",
        )
        violated = (("premise violated", self.premise()),) if self.overflow_draws else ()
        return Claim(
            findings=violated,
            defense=self.name,
            notion="(0, δ)-DP",
            adjacency="quantizer inputs (one agent's state x_i^k) with ‖x − y‖₁ ≤ 1, per iteration",
            neighbours=Neighbours("replace-one", "state", "Theorem 3: two quantizer inputs with ‖x − y‖₁ ≤ 1",
                                  None),
            threat=THREAT,
            eps_claimed=0.0,
            eps_stated=None,
            eps_sound=None,
            delta=claimed,
            horizon=rounds,
            equation=f"Theorem 3: Definition 2's ternary quantizer is (0, 1/r)-DP per iteration; "
            f"r = {p.r:g} → δ = {claimed:.4g}",
            sound_method=(
                "Privacy of the quantizer's INPUT (agent i's state x_i^k), not of agent i's data. For the claim's "
                f"own adjacency the exact worst-case TV of one draw is min(1, 1/r) = {l1.delta:.4g}; over the "
                f"horizon of T = {rounds} iterations delta_sound = 1 − (1 − 1/r)^T = {horizon.delta:.4g} at ε = 0 "
                "(and at every ε ≥ 0): exact for T draws of the same input (attained at x = 0 vs y = e₁), and a "
                "sound bound for adaptively chosen inputs by sequential coupling, provided every iteration's "
                "pair of states is within ℓ1 distance 1. Data level: no sound ε or δ < 1 exists. g_i^k is not "
                "clipped, so one training sample moves x_i^{k+1} by ε^k λ^k (g − g')/B with no bound (and the "
                "difference accumulates over iterations); a pair of datasets can put one state at 0 and the "
                "other at ±r, whose quantizations have TV 1. Theorem 3's transfer to gradients 'by "
                "post-processing' does not hold: g_i^k is a function of the quantizer's input, and "
                "post-processing covers only functions of its output. No dp_accounting accountant supports the "
                "quantizer (mechanism() is an UnsupportedDpEvent); the numbers come from "
                "privaudit.quantizers.worst_case_delta."
            ),
            assumptions=(
                self.premise(),
                f"g_i^k: mean gradient of a batch of B = {p.batch_size} local samples drawn uniformly without "
                "replacement, not clipped (the paper gives no batch size)",
                f"w_ij: off-diagonal entries of the {self.setup.topology.rule} mixing matrix of the "
                f"{self.setup.topology.name} graph (the paper's Fig. 1 graph is not given in its text)",
                f"λ^k = {p.a1:g}/({p.a3:g}k + 1)^{d1:g}, ε^k = {p.a2:g}/({p.a3:g}k + 1)^{d2:g}; Corollary 1's "
                f"conditions (δ₁ + δ₂ ≤ 1, δ₂ > 0.5, 2δ₁ + δ₂ > 1) "
                + ("hold" if corollary else "do NOT hold"),
                "x_i^0 = 0 as in Algorithm 1" if not bool(self.setup.model.initial().any())
                else "x_i^0 = the model's own initialisation, the same for all agents (Algorithm 1 says 0)",
            ),
            delta_sound=horizon.delta,
            statements=statements,
        )
