"""The reconstruction bound of `privaudit.attacks.audit.reconstruction_bounds`: exact on perfect reconstructions,
0 on unrelated ones, its baseline κ bracketed by a brute-force search over guesses, its PSNR criterion
the one `privaudit.metrics` reports, never above the true ε of a known ε-DP reconstruction game, and
its input errors one line each."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import beta

from privaudit.attacks.audit import reconstruction_bounds
from privaudit.attacks.audit.reconstruction_bounds import psnr_kappa, reconstruction_bound
from privaudit.data import Normalisation
from privaudit.metrics import pixel_errors
from tests.import_graph import external_imports, read_graph

DELTA = 1e-5


def psnr_of(radius: float) -> float:
    """The PSNR threshold whose success ball has RMSE radius `radius` (peak 1)."""
    return -20.0 * math.log10(radius)


def brute_force_kappa(candidates: np.ndarray, guesses: np.ndarray, threshold_db: float) -> float:
    """The best share of candidates one guess reconstructs at PSNR ≥ threshold, over `guesses`."""
    mse = ((guesses[:, None, :] - candidates[None, :, :]) ** 2).mean(-1)
    return float((mse <= 10.0 ** (-threshold_db / 10.0)).sum(1).max()) / len(candidates)


@pytest.mark.parametrize("successes, trials", [(50, 50), (37, 50)])
def test_exact_reconstructions_give_the_clopper_pearson_bound(successes, trials):
    images = np.random.default_rng(0).random((1000, 3, 8, 8))
    lower, upper = psnr_kappa(images, 30.0)
    assert lower == upper == 1 / 1000
    found = reconstruction_bound(successes, trials, upper, DELTA, 0.95, kappa_lower=lower, criterion="PSNR ≥ 30 dB")
    p_lower = beta.ppf(0.05, successes, trials - successes + 1)
    assert found.p_lower == pytest.approx(p_lower, rel=1e-12)
    assert found.eps_lb == pytest.approx(math.log((p_lower - DELTA) * 1000), rel=1e-12)
    assert found.eps_lb > 0
    if successes == trials:
        assert found.p_lower == pytest.approx(0.05 ** (1 / trials), rel=1e-12)
    assert found.as_dict()["criterion"] == "PSNR ≥ 30 dB" and found.as_dict()["trials"] == trials


@pytest.mark.parametrize("successes, trials, kappa", [(0, 500, 1e-3), (20, 2000, 0.01), (25, 2000, 0.01)])
def test_unrelated_reconstructions_show_nothing(successes, trials, kappa):
    """No success, or the prior's own success rate (and a little above it, within sampling noise)."""
    found = reconstruction_bound(successes, trials, kappa, DELTA, 0.95)
    assert found.eps_lb == 0.0
    assert found.p_lower < kappa + DELTA


def test_a_pair_within_two_radii_is_one_guess_apart_in_one_dimension():
    """Two candidates 1.8r apart: no candidate reconstructs the other (lower κ = 1/N), the midpoint
    reconstructs both, and the upper κ counts them together — an MSE ball of 2r² instead of (2r)²
    would not, and would fall below the brute-force κ."""
    radius = 0.05
    candidates = np.array([[0.5 - 0.9 * radius], [0.5 + 0.9 * radius], [0.1], [0.9]])
    lower, upper = psnr_kappa(candidates, psnr_of(radius))
    found = brute_force_kappa(candidates, np.linspace(0.0, 1.0, 10001)[:, None], psnr_of(radius))
    assert (lower, found, upper) == (1 / 4, 2 / 4, 2 / 4)


@pytest.mark.parametrize("dim", [1, 2])
@pytest.mark.parametrize("seed", range(5))
def test_kappa_brackets_the_best_guess_on_clustered_candidates(dim, seed):
    rng = np.random.default_rng(seed)
    radius = 0.04
    centres = rng.uniform(0.2, 0.8, (3, dim))
    candidates = np.clip(centres[rng.integers(3, size=24)] + radius * rng.standard_normal((24, dim)), 0.0, 1.0)
    axis = np.linspace(0.0, 1.0, 10001 if dim == 1 else 201)
    grid = np.stack(np.meshgrid(*[axis] * dim), -1).reshape(-1, dim)
    guesses = np.concatenate([grid, candidates])
    lower, upper = psnr_kappa(candidates, psnr_of(radius))
    found = brute_force_kappa(candidates, guesses, psnr_of(radius))
    assert 1 / 24 < lower <= found <= upper


def test_threshold_is_the_psnr_privaudit_metrics_reports():
    """A pair scored at PSNR s by `pixel_errors` reconstructs each other just below s and not just
    above it; the upper κ's ball joins them until 2r reaches their distance, at s − 20·log10(2)."""
    rng = np.random.default_rng(1)
    first = rng.uniform(0.2, 0.8, (1, 3, 8, 8))
    second = first + rng.uniform(-0.05, 0.05, first.shape)
    identity = Normalisation((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    _, score = pixel_errors(torch.from_numpy(second), torch.from_numpy(first), identity)
    pair = torch.from_numpy(np.concatenate([first, second]))
    assert psnr_kappa(pair, score - 1e-6) == (1.0, 1.0)
    assert psnr_kappa(pair, score + 1e-6) == (0.5, 1.0)
    assert psnr_kappa(pair, score + 20 * math.log10(2) - 1e-6)[1] == 1.0
    assert psnr_kappa(pair, score + 20 * math.log10(2) + 1e-6)[1] == 0.5


def test_chunked_counts_equal_direct_differences(monkeypatch):
    rng = np.random.default_rng(2)
    centres = rng.uniform(0.3, 0.7, (4, 2, 3, 3))
    candidates = np.clip(centres[rng.integers(4, size=37)] + 0.03 * rng.standard_normal((37, 2, 3, 3)), 0, 1)
    mse = ((candidates[:, None] - candidates[None]) ** 2).reshape(37, 37, -1).mean(-1)
    threshold = psnr_of(0.03)
    radius2 = 10.0 ** (-threshold / 10.0)
    expected = ((mse <= radius2).sum(1).max() / 37, (mse <= 4 * radius2).sum(1).max() / 37)
    assert psnr_kappa(candidates, threshold) == expected
    monkeypatch.setattr(reconstruction_bounds, "_CHUNK_ENTRIES", 50)
    assert psnr_kappa(candidates, threshold) == expected
    assert expected[0] > 1 / 37


@pytest.mark.parametrize("candidates, eps, trials", [(1000, 2.0, 20000), (1000, 0.0, 20000), (2, 1.0, 2000)])
def test_the_bound_never_exceeds_the_true_eps_of_randomized_response(candidates, eps, trials):
    """Randomized response over N candidates is ε-DP for replacing the target and leaks it at
    nearly the (ReRo) rate e^ε/N when N ≫ e^ε: it reports the target with probability
    e^ε/(e^ε + N − 1), else a uniform other candidate; the attack guesses the report. At confidence
    0.99 the bound may exceed ε in 1% of seeds: it must stay at or below ε in at least 95 of 100,
    show a leak of ε > 0 in every seed and, where the game is that tight, most of it."""
    keep = math.exp(eps) / (math.exp(eps) + candidates - 1)
    bounds = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        targets = rng.integers(candidates, size=trials)
        others = (targets + rng.integers(1, candidates, size=trials)) % candidates
        reports = np.where(rng.random(trials) < keep, targets, others)
        successes = int((reports == targets).sum())
        bounds.append(reconstruction_bound(successes, trials, 1 / candidates, DELTA, 0.99).eps_lb)
    assert sum(bound > eps for bound in bounds) <= 5
    if eps > 0:
        assert min(bounds) > 0
    if eps > 0 and candidates > 100 * math.exp(eps):
        assert np.median(bounds) > 0.8 * eps


@pytest.mark.parametrize("arguments", [
    dict(successes=-1), dict(successes=51), dict(trials=0, successes=0), dict(kappa=0.0), dict(kappa=1.5),
    dict(kappa_lower=0.5), dict(kappa_lower=0.0), dict(delta=1.0), dict(delta=-0.1), dict(confidence=0.0),
    dict(confidence=1.0),
])
def test_invalid_bound_inputs_raise_one_line_errors(arguments):
    given = dict(successes=10, trials=50, kappa=0.01, delta=DELTA, confidence=0.95) | arguments
    with pytest.raises(ValueError) as error:
        reconstruction_bound(**given)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("candidates, threshold", [
    (np.zeros((0, 3)), 20.0), (np.zeros((2, 0)), 20.0), (np.full((2, 3), 1.5), 20.0), (np.zeros((2, 3)), math.inf),
])
def test_invalid_kappa_inputs_raise_one_line_errors(candidates, threshold):
    with pytest.raises(ValueError) as error:
        psnr_kappa(candidates, threshold)
    assert "\n" not in str(error.value)


def test_the_module_reaches_torch_through_no_import():
    graph = read_graph(Path(__file__).resolve().parent.parent)
    assert external_imports(graph, ["privaudit.attacks.audit.reconstruction_bounds"], "torch") == []
