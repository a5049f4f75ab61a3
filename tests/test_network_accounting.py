"""The pairwise network accountant: closed forms worked by hand, monotonicity by distance, the exact
linear-Gaussian loss against a simulation of the dynamics, the claims against the exact loss, and
the degenerate pairs."""

from __future__ import annotations

import math

import dp_accounting
import networkx as nx
import numpy as np
import pytest

from privaudit.accounting import epsilon
from privaudit.errors import ConfigError
from privaudit.network_accounting import (averaging_loss, gaussian_epsilon, gaussian_view_mu, hop_distances,
                                          muffliato_averaging_claim, muffliato_sgd_claim, sgd_central, sgd_gram,
                                          sgd_loss, worst_sequence)
from privaudit.topology import mixing_matrix

DELTA = 1e-5


def _line(n: int) -> np.ndarray:
    return mixing_matrix(nx.path_graph(n), "metropolis")


def test_complete_graph_with_uniform_W_matches_the_closed_forms():
    """K_n with the uniform rule is W = J/n: every agent hears every other. By hand, for u ≠ v:
    Muffliato averaging's sum is 1 (t = 0: u's own noisy value) + (T − 1)(n − 1)/n (t ≥ 1: each of
    the n − 1 neighbours' rows is 1/n, (1/n²)/(1/n) = 1/n), capped at 1: the local loss Δ²/(2σ²).
    The SGD formula is T (lag 0) + (n − 1) T(T − 1)/2 (lag s ≥ 1: n − 1 neighbours, ratio
    (1/n)/(1/n) = 1, T − s pairs), capped at T: T/(2σ²). Exactly, v knows the average (its own state
    minus its own noisy update) and so every neighbour's noisy update: the central √T/σ; and in
    averaging v hears every noisy value: μ = Δ/σ."""
    n, T, sigma, sens = 5, 4, 1.5, 2.0
    W = mixing_matrix(nx.complete_graph(n), "uniform")
    assert np.allclose(W, np.full((n, n), 1 / n))
    for u, v in [(0, 1), (3, 2)]:
        local = sens ** 2 / (2 * sigma ** 2)
        assert muffliato_averaging_claim(W, u, v, T, sigma, DELTA, sens).rho == pytest.approx(local)
        assert muffliato_sgd_claim(W, u, v, T, sigma, DELTA).rho == pytest.approx(T / (2 * sigma ** 2))
        assert averaging_loss(W, u, v, T, sigma, DELTA, sens).mu == pytest.approx(sens / sigma)
        assert sgd_loss(W, u, v, T, sigma, DELTA).mu == pytest.approx(math.sqrt(T) / sigma, rel=1e-6)
        assert sgd_gram(W, u, v, T) == pytest.approx(np.eye(T), abs=1e-9)


def test_a_line_of_three_matches_the_view_worked_by_hand():
    """Line 0 − 1 − 2, Metropolis (w_01 = w_12 = 1/3, diagonal 2/3, 1/3, 2/3), attacker 0, victim 2,
    T = 2 noisy updates n^s = g^s + z^s. Agent 0 hears x_1^1 = −c n_1^0 and x_1^2 = −c (W_1 · n^0 +
    n_1^1) (x^0 public) and knows n_0^0, n_0^1. Taking out e_(0,0), e_(0,1), what remains of the
    span is (1/3) e_(0,2) + e_(1,1), of squared length 10/9: the victim's first update projects to
    squared length (1/9)/(10/9) = 1/10, its second to nothing. M = diag(1/10, 0), μ² = 1/(10σ²).
    The SGD formula: lag 0 gives (I)_{21} = 0, lag 1 gives w_21/‖W_1‖² = (1/3)/(1/3) = 1 once (T − 1
    = 1 pair): ρ = 1/(2σ²), above the exact ρ = 1/(20σ²)."""
    W = _line(3)
    sigma = 0.7
    assert sgd_gram(W, 2, 0, 2) == pytest.approx(np.diag([0.1, 0.0]), abs=1e-12)
    for canary in ("worst", "constant"):
        assert sgd_loss(W, 2, 0, 2, sigma, DELTA, canary).mu == pytest.approx(math.sqrt(0.1) / sigma)
    assert muffliato_sgd_claim(W, 2, 0, 2, sigma, DELTA).rho == pytest.approx(1 / (2 * sigma ** 2))


def test_the_muffliato_averaging_formula_is_below_the_exact_loss_of_its_view():
    """The same line, averaging, two steps: agent 0 hears x_1 + η_1, then (x_0 + x_1 + x_2 + η_0 + η_1
    + η_2)/3, and knows x_0 + η_0: it solves for x_2 + η_2, the whole local loss Δ²/(2σ²). The
    formula sums t = 0: (I)_{21}² = 0 and t = 1: w_21²/‖W_1‖² = (1/9)/(1/3) = 1/3: a third of it. The
    formula, as its authors' code computes it, is below the exact loss of the view it bounds at
    every order α: a finding about the formula as computed (its theorem's text is not in the seeds)."""
    W = _line(3)
    claim = muffliato_averaging_claim(W, 2, 0, 2, 1.0, DELTA)
    exact = averaging_loss(W, 2, 0, 2, 1.0, DELTA)
    assert claim.rho == pytest.approx(1 / 6)
    assert exact.rho == pytest.approx(1 / 2)
    assert claim.epsilon < exact.epsilon


def test_on_a_line_of_eight_the_exact_loss_falls_with_distance_and_the_claim_never_rises():
    """Metropolis W, victim at an end, 30 noisy updates: the exact loss falls strictly with the
    attacker's distance (the agent next to the end sees the victim's updates unmixed: the central
    loss); the SGD formula, capped at the local composition, is flat at T = 30 and falls non-strictly
    at T = 6, where agents beyond reach get nothing from it."""
    W = _line(8)
    exact = [sgd_loss(W, 0, v, 30, 1.0, DELTA).epsilon for v in range(1, 8)]
    assert all(a > b for a, b in zip(exact, exact[1:]))
    assert exact[0] == pytest.approx(sgd_central(W, 0, 1, 30, 1.0, DELTA).epsilon, rel=1e-6)
    for T in (30, 6):
        claimed = [muffliato_sgd_claim(W, 0, v, T, 1.0, DELTA).epsilon for v in range(1, 8)]
        assert all(a >= b for a, b in zip(claimed, claimed[1:]))
    assert [hop_distances(W, 0)[v] for v in range(8)] == list(range(8))


def _dense_gram(W: np.ndarray, victim: int, coalition: list[int], rounds: int) -> np.ndarray:
    """M by brute force: the view's matrix A built by running the dynamics x^{t+1} = W x^t − n^t on
    each unit noisy update (s, k) in turn (all of them at once, one per row of `x`), the projection
    on its row space by numpy's pseudo-inverse."""
    n = len(W)
    heard = [w for w in range(n) if w not in coalition and W[coalition, w].any()]
    units = np.eye(rounds * n).reshape(rounds * n, rounds, n)
    x = np.zeros((rounds * n, n))
    view = []
    for t in range(rounds):
        x = x @ W.T - units[:, t]
        view += [x[:, heard], units[:, t, coalition]]
    A = np.hstack(view).T
    columns = np.arange(rounds) * n + victim
    return (np.linalg.pinv(A) @ A)[np.ix_(columns, columns)]


@pytest.mark.parametrize("graph, victim, coalition", [(nx.path_graph(6), 4, [1]), (nx.cycle_graph(6), 1, [0, 3]),
                                                      (nx.star_graph(4), 2, [0]), (nx.path_graph(4), 1, [1, 3])])
def test_the_gram_matrix_built_from_powers_of_W_matches_the_dynamics_run_by_brute_force(graph, victim, coalition):
    W = mixing_matrix(graph, "metropolis")
    assert sgd_gram(W, victim, coalition, 7) == pytest.approx(_dense_gram(W, victim, coalition, 7), abs=1e-9)


def _simulated_views(W: np.ndarray, victim: int, attacker: int, rounds: int, runs: int, canary: float,
                     rng: np.random.Generator) -> np.ndarray:
    """The attacker's view of scalar DP-D-PSGD with c = η/B = 1, C = 1, σ = 1 and no gradients but
    the canary: x^{t+1} = W x^t − (canary e_u + z^t), run `runs` times; the view is its neighbours'
    states x^1..x^T and its own noise, [runs, 2T] on a line (one neighbour)."""
    n = len(W)
    heard = [w for w in range(n) if w != attacker and W[attacker, w] != 0]
    x = np.zeros((runs, n))
    view = []
    for _ in range(rounds):
        noise = rng.standard_normal((runs, n))
        step = noise.copy()
        step[:, victim] += canary
        x = x @ W.T - step
        view += [x[:, heard], noise[:, [attacker]]]
    return np.hstack(view)


def test_the_exact_mu_matches_a_simulation_of_the_dynamics():
    """μ of a constant canary against the separation measured on simulated runs of the dynamics
    themselves (not the accountant's matrices): for two Gaussians of one covariance the
    log-likelihood ratio is affine in wᵀy, w = Σ⁻¹Δ; w is fitted on one half of the runs and the
    other half gives (mean difference)/(standard deviation) of wᵀy, an estimate of μ (from below,
    up to sampling noise). Also the empirical mean shift and covariance give μ through
    `gaussian_view_mu`. Seeded; 12,000 runs per world."""
    W = _line(5)
    victim, attacker, rounds, runs = 2, 0, 8, 12_000
    mu = sgd_loss(W, victim, attacker, rounds, 1.0, DELTA, "constant").mu
    rng = np.random.default_rng(7)
    absent = _simulated_views(W, victim, attacker, rounds, runs, 0.0, rng)
    present = _simulated_views(W, victim, attacker, rounds, runs, 1.0, rng)
    half = runs // 2
    shift = present[:half].mean(0) - absent[:half].mean(0)
    cov = (np.cov(present[:half].T) + np.cov(absent[:half].T)) / 2
    w = np.linalg.solve(cov, shift)
    score_in, score_out = present[half:] @ w, absent[half:] @ w
    separation = (score_in.mean() - score_out.mean()) / math.sqrt((score_in.var() + score_out.var()) / 2)
    assert 0.5 < mu < 3
    assert separation == pytest.approx(mu, rel=0.05)
    assert gaussian_view_mu(cov, shift) == pytest.approx(mu, rel=0.05)


@pytest.mark.parametrize("graph", [nx.path_graph(6), nx.cycle_graph(6), nx.star_graph(4),
                                   nx.convert_node_labels_to_integers(nx.grid_2d_graph(2, 3))])
def test_the_sgd_claim_is_never_below_the_exact_non_adaptive_loss(graph):
    """A sound bound cannot be beaten by the exact loss of a special case (linear losses are a
    non-adaptive DP-D-PSGD run); the averaging formula can (test above)."""
    W = mixing_matrix(graph, "metropolis")
    for rounds in (1, 3, 7):
        for u in range(len(W)):
            for v in range(len(W)):
                if u != v:
                    exact = sgd_loss(W, u, v, rounds, 1.0, DELTA)
                    assert muffliato_sgd_claim(W, u, v, rounds, 1.0, DELTA).rho >= exact.rho - 1e-9
                    assert exact.mu_attained <= exact.mu + 1e-9


def test_an_attacker_that_is_the_victim_gets_the_central_gaussian_composition():
    W = _line(6)
    rounds, sigma = 12, 1.3
    central = epsilon(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), rounds), DELTA, "pld")
    for loss in (sgd_loss(W, 2, 2, rounds, sigma, DELTA), sgd_loss(W, 2, [2, 4], rounds, sigma, DELTA),
                 sgd_central(W, 2, 5, rounds, sigma, DELTA)):
        assert loss.epsilon == pytest.approx(central, rel=2e-3)
    local = epsilon(dp_accounting.GaussianDpEvent(sigma / 0.5), DELTA, "pld")
    assert averaging_loss(W, 3, 3, 4, sigma, DELTA, sensitivity=0.5).epsilon == pytest.approx(local, rel=2e-3)
    assert gaussian_epsilon(1.0, DELTA) == pytest.approx(epsilon(dp_accounting.GaussianDpEvent(1.0), DELTA, "pld"),
                                                         rel=2e-3)


def test_a_disconnected_pair_loses_nothing():
    W = np.kron(np.eye(2), _line(3))
    for loss in (sgd_loss(W, 0, 4, 5, 1.0, DELTA), averaging_loss(W, 0, 4, 5, 1.0, DELTA),
                 muffliato_sgd_claim(W, 0, 4, 5, 1.0, DELTA), muffliato_averaging_claim(W, 0, 4, 5, 1.0, DELTA)):
        assert loss.epsilon == 0.0 and loss.rho == 0.0 and math.isinf(loss.distance)


def test_a_singular_view_is_inverted_on_its_range_and_a_shift_outside_it_is_certain():
    """Σ = [[1, 1], [1, 1]] has range (1, 1)/√2 with eigenvalue 2: the shift (2, 2) is 2√2 along it,
    μ² = 8/2; (1, −1) lies in the null space."""
    cov = np.array([[1.0, 1.0], [1.0, 1.0]])
    assert gaussian_view_mu(cov, np.array([2.0, 2.0])) == pytest.approx(2.0)
    assert gaussian_view_mu(cov, np.array([1.0, -1.0])) == math.inf
    assert gaussian_epsilon(math.inf, DELTA) == math.inf
    assert gaussian_view_mu(cov, np.zeros(2)) == 0.0


def test_the_worst_canary_sequence_is_certified_and_the_sum_of_magnitudes_is_not_always_tight():
    """Nonnegative M: the constant canary is the worst, Σ M. M = [[1, −.4, −.4], …] (PSD): Σ|M| = 5.4,
    but unit vectors at 120° give the optimum 3 + 6·0.4·0.5 = 4.2 = T λ_max."""
    positive = np.array([[1.0, 0.5], [0.5, 0.5]])
    assert worst_sequence(positive) == pytest.approx((2.5, 2.5), rel=1e-6)
    mixed = np.full((3, 3), -0.4) + 1.4 * np.eye(3)
    upper, attained = worst_sequence(mixed)
    assert upper == pytest.approx(4.2, rel=1e-6) and attained == pytest.approx(4.2, rel=1e-6)
    assert np.abs(mixed).sum() == pytest.approx(5.4)


def test_a_view_too_large_for_memory_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", "1")
    with pytest.raises(ConfigError, match="the pairwise accountant's view") as raised:
        sgd_loss(_line(8), 0, 3, 200, 1.0, DELTA)
    assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="symmetric"):
        sgd_loss(np.array([[0.5, 0.5], [0.2, 0.8]]), 0, 1, 3, 1.0, DELTA)
