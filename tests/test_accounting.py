"""The accountants behind the sound ε, checked against published values for DP-SGD's
Poisson-subsampled Gaussian (the mechanism `dp_dpsgd` describes)."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from privaudit.accounting import epsilon, pure_epsilon, subsampled_gaussian

ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def _classic_rdp_epsilon(event, delta):
    """ε = min_α RDP(α) + log(1/δ)/(α − 1) (Mironov 2017, Prop. 3): the conversion the moments
    accountant used when the reference values below were published."""
    accountant = rdp_privacy_accountant.RdpAccountant(orders=ORDERS)
    accountant.compose(event)
    return float(np.min(np.array(accountant._rdp) + math.log(1 / delta) / (np.array(ORDERS) - 1)))


@pytest.mark.parametrize(
    "q, sigma, steps, published",
    [
        # Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, §3.1:
        # q = 0.01, σ = 4, δ = 1e-5, T = 10000 → ε ≈ 1.26 with the moments accountant.
        (0.01, 4.0, 10_000, 1.26),
        # Dong, Roth & Su, "Gaussian Differential Privacy", Harvard Data Science Review 2020,
        # Fig. 4: p = 256/60000, σ = 0.7, 70 epochs → (8.68, 1e-5)-DP by the moments accountant.
        (256 / 60_000, 0.7, math.ceil(70 * 60_000 / 256), 8.68),
    ],
)
def test_subsampled_gaussian_reproduces_published_moments_accountant_values(q, sigma, steps, published):
    event = subsampled_gaussian(q, sigma, steps)
    assert _classic_rdp_epsilon(event, 1e-5) == pytest.approx(published, abs=0.005)
    tighter_rdp, pld = epsilon(event, 1e-5, "rdp"), epsilon(event, 1e-5, "pld")
    assert pld <= tighter_rdp <= published + 0.005


def test_more_noise_or_fewer_steps_never_costs_more():
    base = epsilon(subsampled_gaussian(0.05, 1.0, 200), 1e-5)
    assert epsilon(subsampled_gaussian(0.05, 2.0, 200), 1e-5) < base
    assert epsilon(subsampled_gaussian(0.05, 1.0, 100), 1e-5) < base


def test_replace_one_supports_sampling_without_replacement_and_add_remove_does_not():
    event = dp_accounting.SampledWithoutReplacementDpEvent(1000, 8, dp_accounting.GaussianDpEvent(2.0))
    assert epsilon(event, 1e-5, "rdp", "replace_one") > 0
    with pytest.raises(ValueError, match="does not support SampledWithoutReplacementDpEvent"):
        epsilon(event, 1e-5, "rdp", "add_remove")


def test_pure_epsilon_adds_up_laplace_releases():
    assert pure_epsilon([0.2, 0.1], [1.0, 0.5]) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        pure_epsilon([1.0], [1.0, 2.0])


def test_a_mechanism_is_accounted_once_and_equal_mechanisms_share_the_number():
    from privaudit import accounting

    step = dp_accounting.PoissonSampledDpEvent(0.2, dp_accounting.GaussianDpEvent(2.0))
    composed = dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(step, 7)])
    again = dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(step, 7)])
    first = accounting.epsilon(composed, 1e-5, "rdp")
    assert accounting._event_key(composed) == accounting._event_key(again)
    assert accounting.epsilon(again, 1e-5, "rdp") == first == accounting._epsilon(composed, 1e-5, "rdp", "add_remove")
    assert accounting.epsilon(dp_accounting.SelfComposedDpEvent(step, 8), 1e-5, "rdp") > first
    assert accounting._event_key(dp_accounting.SelfComposedDpEvent(step, 7)) != accounting._event_key(
        dp_accounting.SelfComposedDpEvent(step, 7.0))
