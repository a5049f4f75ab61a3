"""Pairwise network DP: what one curious agent (or a coalition) learns about one victim, by where
the two sit in the graph.

The attacker is an honest-but-curious agent v of a gossip algorithm: it hears only the messages
its neighbours send it (their states, every step), and it knows its own data and its own noise.
Pairwise network DP (PNDP, Cyffers, Even, Bellet & Massoulié 2022, "Muffliato", NeurIPS 2022,
arXiv 2206.05091) bounds, for every pair u ≠ v, the Rényi divergence of v's view between two
datasets that differ in u's data only: ε_{u→v}(α). This module gives three kinds of figure for
such a pair, kept apart on purpose (SPEC.md: a claim is not a sound bound):

* **the literature's claim**, evaluated as published (`muffliato_averaging_claim`,
  `muffliato_sgd_claim`): a Rényi curve α ρ, converted to (ε, δ) by dp_accounting's RDP
  conversion. Neither is used here as a sound bound: the averaging formula, as its authors' code
  computes it, can lie below the exact loss of the very view it bounds (`averaging_loss`; on a
  line 0 − 1 − 2 after two steps, agent 0 has heard x_1 + η_1 and the average of all three noisy
  values and knows its own, so it solves for x_2 + η_2: the whole local loss, where the formula
  gives a third of it; on the authors' indexing, one step, a third against a half): a finding
  about the formula as computed, not a refutation of a theorem whose text we have not read; and the
  optimisation one rests on a composition over rounds whose soundness under adaptive gradients we
  could not check (it was never below the exact non-adaptive loss in our tests);
* **the exact loss of the linear-Gaussian view** (`averaging_loss`, `sgd_loss`): with fixed
  inputs every message is a linear map of the agents' Gaussian noise, so the attacker's view is
  one Gaussian vector whose mean moves with the victim's input: a Gaussian mechanism with
  correlated outputs, μ-GDP with μ the Mahalanobis length of the mean shift (`gaussian_view_mu`),
  (ε, δ) by the exact Gaussian trade-off (`gaussian_epsilon`). For Muffliato averaging (noise
  drawn once, inputs fixed) this is the exact loss, sound and tight. For DP-D-PSGD it is exact for
  a non-adaptive canary only (the victim's clipped contribution in each round fixed in advance,
  every other agent's input the same in both worlds, as with linear losses). The same
  linear-system view underlies Koskela & Kulkarni 2025 (arXiv 2505.19969) and Bellet,
  Cyffers, Frey, Gaudel, Lerévérend & Taïani 2026 (ICLR, arXiv 2510.17480, whose code projects on
  the messages heard plus the attacker's own noise and bounds the worst canary sequence by
  Σ|M_st|, which `worst_sequence` shows is not tight where M has negative entries);
* **the central bound** (`sgd_central`): every message is a post-processing of all agents'
  noisy updates, so whatever any agent sees of u is bounded by u's T noisy updates themselves,
  T adaptive Gaussian compositions: sound for any losses, with no amplification by the network.

Agents are the indices of W; the links are W's nonzero off-diagonal entries (privaudit's
topologies put positive weight on every edge). `hop_distances` is the graph distance (breadth-
first search); privaudit.topology has none yet, and it can move there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import dp_accounting
import numpy as np
from scipy import linalg, optimize, sparse, special
from scipy.sparse import csgraph

from privaudit.accounting import epsilon as accountant_epsilon
from privaudit.limits import require

Canary = Literal["worst", "constant"]

_AVERAGING_SOURCE = (
    "the Muffliato averaging bound (Cyffers, Even, Bellet & Massoulié 2022, arXiv 2206.05091: noise "
    "N(0, σ²) added once, then T steps of x ← W x), evaluated as its authors' code does "
    "(github.com/totilas/muffliato, muffliato.py: α Δ²/(2σ²) Σ_t Σ_{w∈N(v)} (W^t)²_{uw} / ‖(W^t)_w‖², "
    "one term per message v receives; that code sums t = 1..T, we take t = 0..T−1, the messages the "
    "algorithm sends), capped at the local loss α Δ²/(2σ²) as the authors' figures do")

_SGD_SOURCE = (
    "the Muffliato-GD bound for one gossip step per iteration in its corrected form (Cyffers et al. 2022, "
    "arXiv 2206.05091, Theorem 11 of the revised version, as evaluated in the code of Bellet, Cyffers, "
    "Frey, Gaudel, Lerévérend & Taïani 2026, arXiv 2510.17480, 'the original paper's corrected formula': "
    "α/(2σ²) Σ_{t=1}^{T} Σ_{j=t}^{T} Σ_{w∈N(v)} (W^{j−t})_{uw} / ‖(W^{j−t})_w‖², capped at T α/(2σ²), "
    "the local composition, as those authors did after discussion with the original ones)")

_GD_SOURCE = (
    "the Muffliato-GD bound with K gossip steps per noisy update as privaudit extends the corrected one-step "
    "formula (Cyffers et al. 2022, arXiv 2206.05091, Theorem 11 of the revised version, as evaluated in the code of "
    "Bellet et al. 2026, arXiv 2510.17480): α/(2σ²) Σ over every noisy update and every state of a neighbour "
    "w ∈ N(v) heard after it of (W^p)_{uw} / ‖(W^p)_w‖², p the gossip steps between them, capped at ⌈T/K⌉ α/(2σ²), "
    "the local composition")


@dataclass(frozen=True)
class PairLoss:
    """The privacy loss from `victim` to `attacker` (one agent, or a coalition), `distance` hops
    apart (0 when the attacker includes the victim, ∞ when no path joins them).

    `rho` is the Rényi curve: D_α(view under D ‖ view under D') ≤ α ρ for every order α > 1 (a
    μ-GDP Gaussian has ρ = μ²/2). `mu` is the Gaussian-DP parameter where the view is Gaussian
    (the exact figures and the central bound), None where the figure is a Rényi bound only.
    `mu_attained`: for a worst case over canary sequences, the loss a sequence found here attains
    (≤ `mu`; equal: the worst case is tight). `epsilon` is the loss at `delta`. `method` names the
    accountant and the theorem (a Claim's `sound_method`, or its `equation` for a claim);
    `assumptions` says what the number rests on.
    """

    victim: int
    attacker: tuple[int, ...]
    distance: float
    rho: float
    mu: float | None
    epsilon: float
    delta: float
    method: str
    assumptions: tuple[str, ...] = ()
    mu_attained: float | None = None

    def renyi(self, order: float) -> float:
        """ε(α) of the Rényi curve at order α > 1: α ρ."""
        if order <= 1:
            raise ValueError(f"a Rényi order must be > 1, not {order}")
        return order * self.rho


# ---------------------------------------------------------------------------------------------
# The graph


def _mixing(W: np.ndarray) -> np.ndarray:
    """W as float64, refused unless it is a gossip matrix as the theorems assume it: square,
    finite, symmetric, nonnegative, rows summing to 1 (privaudit.topology.check_mixing's
    conditions without the graph, which W's support gives here)."""
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1] or not len(W):
        raise ValueError(f"W must be a square matrix, got shape {W.shape}")
    if not np.isfinite(W).all() or (W < 0).any():
        raise ValueError("W must have finite, nonnegative entries")
    stochastic = np.allclose(W.sum(axis=1), 1.0, rtol=0.0, atol=1e-10)
    if not np.allclose(W, W.T, rtol=0.0, atol=1e-10) or not stochastic:
        raise ValueError("W must be symmetric and doubly stochastic (rows summing to 1)")
    return W


def _agents(W: np.ndarray, agents: int | Iterable[int], what: str) -> tuple[int, ...]:
    """`agents` as a sorted tuple of distinct valid indices of W."""
    chosen = (agents,) if isinstance(agents, (int, np.integer)) else tuple(agents)
    chosen = tuple(sorted({int(a) for a in chosen}))
    if not chosen or chosen[0] < 0 or chosen[-1] >= len(W):
        raise ValueError(f"{what} must name agents in 0..{len(W) - 1}, got {agents!r}")
    return chosen


def _agent(W: np.ndarray, agent: int, what: str) -> int:
    """One valid index of W (the Muffliato formulas are stated for one attacker, not a coalition)."""
    if not isinstance(agent, (int, np.integer)):
        raise ValueError(f"{what} must be one agent for this formula, got {agent!r}")
    return _agents(W, agent, what)[0]


def hop_distances(W: np.ndarray, source: int) -> np.ndarray:
    """The number of links on a shortest path from `source` to every agent (∞ where none),
    over the links of W: a breadth-first search (scipy's unweighted shortest paths)."""
    links = sparse.csr_matrix(np.asarray(W) != 0)
    return csgraph.shortest_path(links, unweighted=True, indices=int(source))


def neighbours(W: np.ndarray, agents: tuple[int, ...]) -> list[int]:
    """The agents outside `agents` whose states `agents` receive: those w with W[a, w] ≠ 0."""
    heard = np.asarray(W)[list(agents)].any(axis=0)
    heard[list(agents)] = False
    return [int(w) for w in np.flatnonzero(heard)]


def _distance(W: np.ndarray, victim: int, attacker: tuple[int, ...]) -> float:
    return float(hop_distances(W, victim)[list(attacker)].min())


def _powers(W: np.ndarray, rows: list[int], count: int) -> np.ndarray:
    """(W^p)[rows, :] for p = 0..count−1, [count, len(rows), n]: each by one product with W, so
    only the rows a view reads are ever held."""
    out = np.empty((count, len(rows), len(W)))
    if count:
        out[0] = np.eye(len(W))[rows]
    for p in range(1, count):
        out[p] = out[p - 1] @ W
    return out


# ---------------------------------------------------------------------------------------------
# From a privacy curve to (ε, δ)


def gaussian_delta(mu: float, eps: float) -> float:
    """δ(ε) of μ-GDP, the Gaussian mechanism's exact privacy profile (Balle & Wang 2018,
    Theorem 8; Dong, Roth & Su 2022, Corollary 2.13): Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."""
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    first = special.ndtr(-eps / mu + mu / 2)
    second = math.exp(eps + special.log_ndtr(-eps / mu - mu / 2))
    return float(max(0.0, first - second))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The smallest ε ≥ 0 with δ(ε) ≤ `delta` for μ-GDP (`gaussian_delta`, decreasing in ε): 0
    for μ = 0, ∞ for μ = ∞. At ε = μ²/2 + μ √(2 ln(1/δ)), δ(ε) ≤ Φ(−√(2 ln(1/δ))) ≤ δ (the tail
    bound P(Z > x) ≤ e^{−x²/2}), which brackets the root."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if math.isinf(mu):
        return math.inf
    if gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    top = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    return float(optimize.brentq(lambda eps: gaussian_delta(mu, eps) - delta, 0.0, top, xtol=1e-12, rtol=1e-12))


def _renyi_epsilon(rho: float, delta: float) -> float:
    """(ε at δ) of a Rényi curve α ρ, by dp_accounting's RDP → (ε, δ) conversion, which holds for
    any mechanism with that curve: the curve is a Gaussian's of noise multiplier 1/√(2ρ), so the
    RDP accountant on that event converts it (Gaussian or not, the conversion reads the curve)."""
    if rho == 0:
        return 0.0
    return accountant_epsilon(dp_accounting.GaussianDpEvent(1 / math.sqrt(2 * rho)), delta, "rdp")


# ---------------------------------------------------------------------------------------------
# The literature's claims


def _per_message(W: np.ndarray, victim: int, attacker: int, count: int, power: int) -> np.ndarray:
    """Σ_{w∈N(v)} (W^s)_{uw}^power / ‖(W^s)_w‖² for s = 0..count−1: the Muffliato theorems' share of
    the victim's input in each message v hears, over that message's noise variance in units of σ²."""
    heard = neighbours(W, (attacker,))
    rows = _powers(W, heard, count)
    return (rows[:, :, victim] ** power / (rows ** 2).sum(axis=2)).sum(axis=1)


FORMULA_BELOW = "below the exact loss of the view it bounds"
"""How privaudit words the averaging formula against `averaging_loss`: a finding about the formula as
its authors' code computes it, not a refutation of a theorem whose text privaudit has not read."""


def muffliato_averaging_claim(W: np.ndarray, victim: int, attacker: int, steps: int, noise: float,
                              delta: float, sensitivity: float = 1.0, *, first: int = 0) -> PairLoss:
    """The claimed ε_{u→v} of Muffliato gossip averaging: each agent adds N(0, σ²) to its value
    (ℓ2 sensitivity Δ) once, then `steps` = T synchronous steps x ← W x; v hears x_w^t for each
    neighbour w and t = first..first+T−1: `first` = 0 (privaudit's runs), the messages the
    algorithm sends, the noisy values themselves first; `first` = 1, the indexing of the authors'
    code (t = 1..T, the states after each step). The formula is `_AVERAGING_SOURCE`: the
    per-message Rényi losses of the Gaussian mechanism, summed as if each message's noise were
    fresh. The messages share the same noise, and `averaging_loss` computes the exact loss of the
    same view, which can be larger: on a line the end agent's neighbour's states over n − 1 steps,
    with its own value, determine every noisy value, the local loss for every agent, where the
    formula decays with distance. A finding about the formula as computed (`FORMULA_BELOW`), not a
    sound bound: this is the claim to audit. Victim = attacker: the local loss (no network)."""
    W = _mixing(W)
    u, v = _agent(W, victim, "victim"), _agent(W, attacker, "attacker")
    _require_steps(steps, len(W))
    _require_first(first)
    local = sensitivity ** 2 / (2 * noise ** 2)
    share = 1.0 if u == v else min(1.0, float(_per_message(W, u, v, steps + first, power=2)[first:].sum()))
    rho = local * share
    return PairLoss(u, (v,), _distance(W, u, (v,)), rho, None, _renyi_epsilon(rho, delta), delta,
                    method=f"claim: {_AVERAGING_SOURCE}; RDP → (ε, δ) by dp_accounting's conversion",
                    assumptions=("the formula as the authors' code evaluates it; we could not read the theorem's "
                                 "statement here: compare it before relying on this",
                                 f"a finding about the formula as computed: it can lie {FORMULA_BELOW} "
                                 "(averaging_loss, exact for fixed inputs), not a refutation of the theorem"))


def _require_first(first: int) -> None:
    """The first power of W an averaging view hears: 0 (the messages sent) or 1 (the authors' indexing)."""
    if first not in (0, 1):
        raise ValueError(f"first must be 0 (the messages sent) or 1 (the states after each step), got {first!r}")


def muffliato_sgd_claim(W: np.ndarray, victim: int, attacker: int, rounds: int, noise_multiplier: float,
                        delta: float) -> PairLoss:
    """The claimed ε_{u→v} of DP-D-PSGD's local noise seen through W (Muffliato-GD with one
    gossip step per iteration): x^{t+1} = W x^t − η (clipped sum + N(0, σ²C² I))/B for T =
    `rounds` noisy updates, v hearing its neighbours' states. The formula is `_SGD_SOURCE`; its
    Δ/σ is the noise multiplier σ (sensitivity C of the clipped sum under add/remove, noise σC),
    and η, B, C cancel. Without Poisson subsampling amplification: the record is taken to be in
    every batch, which makes the figure larger (looser) than one that counts the sampling rate.
    Its proof composes over rounds; we did not check that composition against gradients that
    depend on earlier noise, so this is the claim to audit. Victim = attacker: the local
    composition, T α/(2σ²)."""
    W = _mixing(W)
    u, v = _agent(W, victim, "victim"), _agent(W, attacker, "attacker")
    _require_steps(rounds, len(W))
    rho = _muffliato_sum(W, u, v, rounds, 1) / (2 * noise_multiplier ** 2)
    return PairLoss(u, (v,), _distance(W, u, (v,)), rho, None, _renyi_epsilon(rho, delta), delta,
                    method=f"claim: {_SGD_SOURCE}; RDP → (ε, δ) by dp_accounting's conversion",
                    assumptions=("no subsampling amplification (the record in every batch)",
                                 "the formula as those authors' code evaluates the revised theorem; we could not "
                                 "read the statement here"))


def _updates(steps: int, gossip_steps: int) -> int:
    """The noisy updates of `steps` gossip steps with one update before steps 1, K + 1, 2K + 1, …"""
    if gossip_steps < 1:
        raise ValueError(f"gossip_steps must be >= 1, got {gossip_steps}")
    return -(-steps // gossip_steps)


def _muffliato_sum(W: np.ndarray, victim: int, attacker: int, steps: int, gossip_steps: int) -> float:
    """Σ over every (noisy update, state v hears after it) of `_per_message` at the number p of
    gossip steps between them, capped at the number of updates (the local composition): with an
    update before gossip steps 1, K + 1, …, the state after step m carries the update before step
    iK + 1 through W^(m − 1 − iK), so lag p is heard after ⌊(T − 1 − p)/K⌋ + 1 updates (T − p for
    K = 1, the corrected formula's count). Victim = attacker: the local composition."""
    updates = _updates(steps, gossip_steps)
    if victim == attacker:
        return float(updates)
    lags = np.arange(steps)
    heard_after = (steps - 1 - lags) // gossip_steps + 1
    return min(float(updates), float((heard_after * _per_message(W, victim, attacker, steps, power=1)).sum()))


def muffliato_gd_claim(W: np.ndarray, victim: int, attacker: int, steps: int, gossip_steps: int,
                       noise_multiplier: float, delta: float) -> PairLoss:
    """The claimed ε_{u→v} of Muffliato-GD with K = `gossip_steps` gossip steps per noisy update:
    T = `steps` synchronous gossip steps x ← W x, each agent's noisy update (clipped sum + N(0,
    σ²C² I))/B entering before steps 1, K + 1, 2K + 1, … (⌈T/K⌉ updates), v hearing its
    neighbours' states after every step. K = 1 is DP-D-PSGD's schedule and this is
    `muffliato_sgd_claim` exactly (same figure, same words). For K > 1 the figure is `_GD_SOURCE`:
    the corrected formula's sum carried to K gossip steps per update by us, which no text we could
    read states; it is a reading of the claim, and a verdict on it is no stronger than that."""
    if gossip_steps == 1:
        return muffliato_sgd_claim(W, victim, attacker, steps, noise_multiplier, delta)
    W = _mixing(W)
    u, v = _agent(W, victim, "victim"), _agent(W, attacker, "attacker")
    _require_steps(steps, len(W))
    rho = _muffliato_sum(W, u, v, steps, gossip_steps) / (2 * noise_multiplier ** 2)
    return PairLoss(u, (v,), _distance(W, u, (v,)), rho, None, _renyi_epsilon(rho, delta), delta,
                    method=f"claim: {_GD_SOURCE}; RDP → (ε, δ) by dp_accounting's conversion",
                    assumptions=("no subsampling amplification (the record in every batch)",
                                 f"K = {gossip_steps} gossip steps per update: the K = 1 formula, read only in a later "
                                 "paper's code as the 'corrected' version of the revised Theorem 11, never in the "
                                 "theorem's text, extended to K steps by privaudit"))


# ---------------------------------------------------------------------------------------------
# The exact loss of a linear-Gaussian view


def gaussian_view_mu(cov: np.ndarray, shift: np.ndarray, rtol: float = 1e-10) -> float:
    """μ = √(Δᵀ Σ⁺ Δ) of a Gaussian view N(m, Σ) against N(m + Δ, Σ): the log-likelihood ratio
    depends on the view only through its whitened coordinate along Σ^(-1/2) Δ, which is N(0, 1)
    against N(μ, 1), so the pair is exactly μ-GDP (Dong, Roth & Su 2022's G_μ; the log-likelihood
    ratio is N(∓μ²/2, μ²) under the two worlds). A singular Σ (messages that repeat one another)
    is inverted on its range; a shift with a component outside that range moves values the noise
    never touches, and the view tells the worlds apart surely: μ = ∞. Eigenvalues below `rtol`
    times the largest are taken as zero, and a shift whose part there exceeds √rtol of its length
    as outside."""
    cov = np.asarray(cov, dtype=np.float64)
    shift = np.asarray(shift, dtype=np.float64)
    if not shift.any():
        return 0.0
    values, vectors = np.linalg.eigh((cov + cov.T) / 2)
    kept = values > rtol * max(values.max(initial=0.0), 0.0)
    along = vectors.T @ shift
    if np.linalg.norm(along[~kept]) > math.sqrt(rtol) * np.linalg.norm(shift):
        return math.inf
    return float(math.sqrt(np.sum(along[kept] ** 2 / values[kept])))


def _require_view(rows: int, columns: int) -> None:
    """ConfigError when an averaging view's matrix and its SVD (about three matrices of rows ×
    columns float64) would pass the memory limit (`privaudit.limits`)."""
    require("memory", math.ceil(3 * 8 * rows * columns / 2 ** 20),
            f"the pairwise accountant's view ({rows} messages × {columns} noise draws)")


def _require_steps(steps: int, agents: int) -> None:
    if steps < 0:
        raise ValueError(f"the number of steps must be >= 0, got {steps}")
    require("rounds", steps, "the pairwise accountant's horizon")
    require("agents", agents, "the pairwise accountant's network")


def _row_space(rows: np.ndarray) -> np.ndarray:
    """An orthonormal basis (as rows) of the span of `rows`, by SVD: singular values below
    max(shape) · machine ε · the largest are rank deficiency (numpy's matrix_rank rule)."""
    if not rows.size:
        return np.zeros((0, rows.shape[1]))
    _, values, basis = np.linalg.svd(rows, full_matrices=False)
    kept = values > max(rows.shape) * np.finfo(np.float64).eps * values[0]
    return basis[kept]


def averaging_loss(W: np.ndarray, victim: int, attacker: int | Iterable[int], steps: int, noise: float,
                   delta: float, sensitivity: float = 1.0, *, first: int = 0) -> PairLoss:
    """The exact loss from `victim` to `attacker` of Muffliato gossip averaging (noise N(0, σ²)
    added once to each value of ℓ2 sensitivity Δ, then `steps` = T steps x ← W x).

    The attacker hears x^t_w = (W^t (x + η))_w for each neighbour w and t = 0..T−1 and knows its own
    noisy value; per coordinate the view is A (x + η) with A's rows those (W^t)_w and e_v. The
    inputs are fixed, so the view is one Gaussian vector; its law moves by A e_u Δ between the worlds
    and its covariance is σ² A Aᵀ, so μ = (Δ/σ) ‖P e_u‖ with P the projection on A's row space
    (`gaussian_view_mu` with Σ = σ² A Aᵀ reduces to it). Coordinates of a vector value decouple and
    the worst Δ-shift puts all of Δ on the victim, so μ holds for vectors too. Exact, and sound:
    no adaptivity enters. An attacker that includes the victim hears the victim's noisy value
    itself: μ = Δ/σ, the local loss; one with no path to the victim hears nothing of it: μ = 0
    (set, not computed, so that rounding leaves no 1e-32). `first` = 1 hears t = 1..T instead, the
    view `muffliato_averaging_claim(first=1)` bounds as the authors' code indexes it."""
    W = _mixing(W)
    u, coalition = _agent(W, victim, "victim"), _agents(W, attacker, "attacker")
    _require_steps(steps, len(W))
    _require_first(first)
    heard = neighbours(W, coalition)
    _require_view(steps * len(heard) + len(coalition), len(W))
    distance = _distance(W, u, coalition)
    share = 0.0
    if not math.isinf(distance):
        heard_rows = _powers(W, heard, steps + first)[first:].reshape(-1, len(W))
        rows = np.vstack([heard_rows, np.eye(len(W))[list(coalition)]])
        share = min(1.0, float(np.sum(_row_space(rows)[:, u] ** 2)))
    mu = sensitivity / noise * math.sqrt(share)
    return PairLoss(u, coalition, distance, mu * mu / 2, mu, gaussian_epsilon(mu, delta), delta,
                    method="exact loss of the attacker's Gaussian view (μ = (Δ/σ)‖P e_u‖, P the projection on the "
                    "span of the messages heard and the attacker's own noisy value); (ε, δ) of μ-GDP by the exact "
                    "Gaussian trade-off (Balle & Wang 2018, Thm 8)",
                    assumptions=("noise drawn once, inputs fixed (Muffliato averaging): nothing adaptive",))


def sgd_gram(W: np.ndarray, victim: int, attacker: int | Iterable[int], rounds: int,
             gossip_steps: int = 1) -> np.ndarray:
    """M [U, U]: the Gram matrix of the victim's noisy updates in the attacker's view of DP-D-PSGD,
    M_{st} = ⟨P e_{(s,u)}, P e_{(t,u)}⟩ with P the projection on the span of the view's rows in the
    space of all agents' noisy updates n_k^s = g_k^s + z_k^s (`_gram` builds it). With
    `gossip_steps` K > 1 (Muffliato-GD's schedule), `rounds` = T gossip steps x ← W x and the
    noisy updates enter before steps 1, K + 1, …: U = ⌈T/K⌉ of them (`_gossip_gram`); K = 1 is
    DP-D-PSGD, U = T.

    Per coordinate the noise is N(0, σ²C² I) on the noisy updates and the view is A n; a canary
    moving the victim's clipped sum by d_s ∈ R^p in update s (‖d_s‖ ≤ C) moves the view's law by a
    Gaussian of μ² = Σ_{s,t} M_{st} ⟨d_s, d_t⟩ / (σ²C²) (coordinates decouple; the same whitening
    as `gaussian_view_mu`). M is a principal block of a projection: PSD, M ⪯ I."""
    W = _mixing(W)
    u, coalition = _agent(W, victim, "victim"), _agents(W, attacker, "attacker")
    return _victim_gram(W, u, coalition, rounds, gossip_steps)


def _victim_gram(W: np.ndarray, victim: int, coalition: tuple[int, ...], steps: int, gossip_steps: int) -> np.ndarray:
    """`sgd_gram` of validated arguments: `_gram` for one gossip step per update, else `_gossip_gram`."""
    _updates(steps, gossip_steps)
    return _gram(W, victim, coalition, steps) if gossip_steps == 1 else _gossip_gram(W, victim, coalition, steps,
                                                                                     gossip_steps)


def _gossip_gram(W: np.ndarray, victim: int, coalition: tuple[int, ...], steps: int, gossip_steps: int) -> np.ndarray:
    """`sgd_gram` for K = `gossip_steps` > 1, from the view's matrix A itself: the state of a
    neighbour w heard after step m is the row (W^(m−1−r))_{w,:} on the block of every update made
    before step r + 1 ≤ m (r = 0, K, 2K, …), the coalition's own noisy updates are unit rows.
    Between updates the heard states are only powers of W, so A can lose rank (more heard states
    than one update block has agents): the projection comes from an SVD of A (`_row_space`), not
    from `_gram`'s Cholesky of A Aᵀ. M = Qᵤᵀ Qᵤ, Qᵤ the victim's columns of the orthonormal row
    basis. Zero without a path from the victim to the coalition (set, not computed)."""
    _require_steps(steps, len(W))
    heard, n = neighbours(W, coalition), len(W)
    starts = range(0, steps, gossip_steps)
    updates = len(starts)
    rows = steps * len(heard) + updates * len(coalition)
    require("memory", math.ceil(3 * 8 * rows * updates * n / 2 ** 20),
            f"the pairwise accountant's view ({rows} messages × {updates * n} noisy updates)")
    if math.isinf(_distance(W, victim, coalition)):
        return np.zeros((updates, updates))
    powers = _powers(W, heard, steps)
    states = np.zeros((steps, len(heard), updates, n))
    own = np.zeros((updates, len(coalition), updates, n))
    for block, start in enumerate(starts):
        states[start:, :, block, :] = powers[:steps - start]
        own[block, :, block, list(coalition)] = np.eye(len(coalition))
    view = np.vstack([states.reshape(-1, updates * n), own.reshape(-1, updates * n)])
    victim_columns = _row_space(view).reshape(-1, updates, n)[:, :, victim]
    return victim_columns.T @ victim_columns


def _gram(W: np.ndarray, victim: int, coalition: tuple[int, ...], rounds: int) -> np.ndarray:
    """`sgd_gram` of validated arguments, as M = A_uᵀ (A Aᵀ)⁻¹ A_u with A_u the view's columns of
    the victim's updates, without forming A (T·(|N| + |S|) rows by T·n columns).

    x^{j+1} = W x^j − c n^j gives x^{j+1} = W^{j+1} x^0 − c Σ_{s≤j} W^{j−s} n^s: the state of
    neighbour w heard after update j is the row (W^{j−s})_{w,:} on the blocks s ≤ j (c and the
    public W^{j+1} x^0 change no span); the coalition's own noisy updates (it knows its data and its
    noise) are the rows e_{(s,a)}. W symmetric makes W^a (W^b)ᵀ = W^{a+b}, so two heard states meet
    in A Aᵀ as Σ_{s≤min(j,j')} (W^{j+j'−2s})_{ww'}: a difference of two running sums of (W^p)_{ww'}
    over p of one parity. A state meets an own row in (W^{j−s})_{wa} (s ≤ j), own rows meet as I.
    On the columns (j, w) and (s, a), rows ordered by round form a unit lower-triangular matrix (a
    state heard after update j reaches only blocks s ≤ j and is e_w on block j; an own row is a unit
    vector), so A has full row rank and A Aᵀ is positive definite: Cholesky solves it.
    Zero without a path from the victim to the coalition (no message depends on the victim: set,
    not computed, so that rounding leaves no 1e-32)."""
    _require_steps(rounds, len(W))
    heard = neighbours(W, coalition)
    size = rounds * (len(heard) + len(coalition))
    require("memory", math.ceil(8 * (3 * size ** 2 + 2 * rounds * len(heard) * len(W)) / 2 ** 20),
            f"the pairwise accountant's view ({size} messages over {rounds} rounds)")
    if math.isinf(_distance(W, victim, coalition)):
        return np.zeros((rounds, rounds))
    powers = _powers(W, heard, 2 * rounds - 1)
    step = np.arange(rounds)
    lag = step[:, None] - step[None, :]
    running = np.zeros((2 * rounds + 1, len(heard), len(heard)))
    for p in range(2 * rounds - 1):
        running[p + 2] = running[p] + powers[p][:, heard]
    states = running[step[:, None] + step[None, :] + 2] - running[np.abs(lag)]
    before = np.maximum(lag, 0)
    cross = np.where((lag >= 0)[:, :, None, None], powers[:, :, list(coalition)][before], 0.0)
    gram = np.block([[states.transpose(0, 2, 1, 3).reshape(rounds * len(heard), -1),
                      cross.transpose(0, 2, 1, 3).reshape(rounds * len(heard), -1)],
                     [cross.transpose(1, 3, 0, 2).reshape(rounds * len(coalition), -1),
                      np.eye(rounds * len(coalition))]])
    victim_columns = np.concatenate([
        np.where((lag >= 0)[:, :, None], powers[:, :, victim][before], 0.0)
        .transpose(0, 2, 1).reshape(rounds * len(heard), rounds),
        np.kron(np.eye(rounds), np.array(coalition)[:, None] == victim)])
    return victim_columns.T @ linalg.cho_solve(linalg.cho_factor(gram), victim_columns)


def worst_sequence(M: np.ndarray, sweeps: int = 300) -> tuple[float, float]:
    """max Σ_{s,t} M_{st} ⟨d_s, d_t⟩ over vectors ‖d_s‖ ≤ 1 (in dimension ≥ T), for PSD M: the
    semidefinite program max ⟨M, X⟩ over X ⪰ 0 with X_ss ≤ 1 (X the Gram of the d_s; a convex
    objective peaks on the spheres). Returns (upper, attained).

    `attained` is a feasible sequence's value, found by block-coordinate ascent on d_s ∈
    R^r (Burer & Monteiro 2003; r(r+1)/2 > T leaves room for an optimum's rank): each d_s in turn
    becomes the unit vector along Σ_{t≠s} M_{st} d_t, which never lowers the objective. `upper` is
    a dual certificate: for y_s = (M X)_ss, Diag(y) − M shifted by its most negative eigenvalue is
    ⪰ 0, so Σ y_s + T · shift ≥ every feasible value (weak duality); it equals `attained` when the
    ascent reached the optimum. Bounded by T λ_max(M) too (tr(D M Dᵀ) ≤ λ_max Σ ‖d_s‖²).
    C² Σ |M_st| also bounds it, and is attained by d_s = ±C·e when M's signs factor as σ_s σ_t
    (all entries ≥ 0 in particular); where they do not (the attacker's neighbour as victim) it can
    pass even T, the central loss, and is not used."""
    size = len(M)
    if not np.any(M):
        return 0.0, 0.0
    rank = min(size, math.isqrt(2 * size) + 2)
    top = np.linalg.eigh(M)[1][:, -1]
    vectors = np.zeros((size, rank))
    vectors[:, 0] = np.where(top >= 0, 1.0, -1.0)
    vectors[:, 1:] = 0.01 * np.random.default_rng(0).standard_normal((size, rank - 1))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    value = float(np.sum(M * (vectors @ vectors.T)))
    for _ in range(sweeps):
        for s in range(size):
            pull = M[s] @ vectors - M[s, s] * vectors[s]
            length = np.linalg.norm(pull)
            if length > 0:
                vectors[s] = pull / length
        previous, value = value, float(np.sum(M * (vectors @ vectors.T)))
        if value - previous <= 1e-13 * value:
            break
    dual = np.sum(M * (vectors @ vectors.T), axis=1)
    shift = max(0.0, -float(np.linalg.eigvalsh(np.diag(dual) - M)[0]))
    upper = min(float(dual.sum()) + size * shift, size * float(np.linalg.eigvalsh(M)[-1]))
    return max(upper, value), value


def sgd_loss(W: np.ndarray, victim: int, attacker: int | Iterable[int], rounds: int, noise_multiplier: float,
             delta: float, canary: Canary = "worst", gossip_steps: int = 1) -> PairLoss:
    """The exact loss from `victim` to `attacker` of DP-D-PSGD for a non-adaptive canary:
    x^{t+1} = W x^t − η (clipped sum + N(0, σ²C² I))/B over T = `rounds` noisy updates, the
    attacker hearing its neighbours' states x^1..x^T and knowing its own noise (a run of R rounds
    on privaudit's wire shows x^1..x^{R−1}: T = R − 1, or R when the final models are published).

    μ² = Σ M_st ⟨d_s, d_t⟩/(σ²C²) (`sgd_gram`). `canary="constant"`: the canary's clipped gradient
    is the same vector of norm C every round (a gradient canary, or a linear loss): μ² = 1ᵀM1/σ².
    `canary="worst"`: the largest μ over sequences with ‖d_s‖ ≤ C (`worst_sequence`; `mu` is the
    certified upper value, `mu_attained` a sequence's).

    What it rests on: the victim's contribution fixed in advance and every other agent's inputs the
    same in both worlds (non-adaptive). A constant canary is a real run (linear losses), so no sound
    accountant of DP-D-PSGD at q = 1 can give less than its figure for the pair. The record is in
    every batch (no subsampling amplification): under Poisson sampling each pattern of rounds the
    record is drawn in is one of the sequences the worst case ranges over (d_s = 0 elsewhere), and
    hockey-stick divergences are jointly convex, so sampling only lowers the worst case; the
    constant canary's figure is then that of a canary drawn every round, not a bound.
    Under adaptive gradients it is not a bound we can vouch for: an agent between the two whose
    gradient is a steep function of its state can relay what that state holds about the victim
    louder than the noise the linear view counts; `sgd_central` is the bound for any losses. An
    attacker that includes the victim sees the victim's noisy updates: M = I, the central loss.

    `gossip_steps` K > 1: Muffliato-GD's schedule, `rounds` = T gossip steps heard (x^1..x^T) with
    a noisy update before steps 1, K + 1, … (`sgd_gram`); the canary sequence ranges over those
    ⌈T/K⌉ updates."""
    W = _mixing(W)
    u, coalition = _agent(W, victim, "victim"), _agents(W, attacker, "attacker")
    M = _victim_gram(W, u, coalition, rounds, gossip_steps)
    if canary == "constant":
        upper = attained = float(M.sum())
        what = "a constant canary (the same clipped gradient of norm C every round): μ² = 1ᵀM1/σ²"
    elif canary == "worst":
        upper, attained = worst_sequence(M)
        found = (" (tight: a sequence attains it)" if upper - attained <= 1e-6 * upper else
                 f" (a sequence attains μ² = {attained / noise_multiplier ** 2:.6g})")
        what = ("the worst canary sequence (‖d_s‖ ≤ C each round): the semidefinite program max ⟨M, X⟩, X ⪰ 0, "
                f"X_ss ≤ 1, with a dual certificate{found}")
    else:
        raise ValueError(f"unknown canary '{canary}' (choose from worst, constant)")
    mu = math.sqrt(max(upper, 0.0)) / noise_multiplier
    return PairLoss(u, coalition, _distance(W, u, coalition), mu * mu / 2, mu,
                    gaussian_epsilon(mu, delta), delta,
                    method="exact loss of the attacker's linear-Gaussian view of DP-D-PSGD (the span of the "
                    "neighbours' states and its own noisy updates, M = victim block of its projection), for "
                    f"{what}; (ε, δ) of μ-GDP by the exact Gaussian trade-off (Balle & Wang 2018, Thm 8)",
                    assumptions=("non-adaptive canary: the victim's clipped contributions fixed in advance, the other "
                                 "agents' inputs the same in both worlds",
                                 "no subsampling amplification (the record in every batch)"),
                    mu_attained=math.sqrt(max(attained, 0.0)) / noise_multiplier)


def sgd_central(W: np.ndarray, victim: int, attacker: int | Iterable[int], rounds: int, noise_multiplier: float,
                delta: float, gossip_steps: int = 1) -> PairLoss:
    """The bound from `victim` to any attacker for any losses: every message is a post-processing
    of all agents' noisy updates, and the victim's T noisy updates are T adaptive compositions of
    the Gaussian mechanism of noise multiplier σ, so √T/σ-GDP (Dong, Roth & Su 2022, Cor. 3.3);
    (ε, δ) by the exact Gaussian trade-off. No amplification by the network, nor by subsampling;
    W and `attacker` only place the pair (its distance). With `gossip_steps` K, `rounds` gossip
    steps hold ⌈rounds/K⌉ noisy updates (`sgd_gram`)."""
    W = _mixing(W)
    u, coalition = _agent(W, victim, "victim"), _agents(W, attacker, "attacker")
    _require_steps(rounds, len(W))
    updates = _updates(rounds, gossip_steps)
    mu = math.sqrt(updates) / noise_multiplier
    return PairLoss(u, coalition, _distance(W, u, coalition), mu * mu / 2, mu, gaussian_epsilon(mu, delta),
                    delta, method=f"central bound: {updates} adaptive compositions of the Gaussian mechanism (σ = "
                    f"{noise_multiplier:g}), μ = √T/σ (Dong, Roth & Su 2022, Cor. 3.3); (ε, δ) by the exact "
                    "Gaussian trade-off (Balle & Wang 2018, Thm 8)",
                    assumptions=("no subsampling amplification (the record in every batch)",))
