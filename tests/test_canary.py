"""Canary audits: the canary reaches only the victim, the bound separates an undefended run from
a noisy one, and the estimator gives ε_LB = 0 when nothing differs between the worlds."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from attacks.canary import build_world, eps_bound, one_run_eps, one_run_p_value, with_record
from defenses import DEFENSES
from privaudit.campaign.audit_findings import canary_audit, game_for_table, one_run_audit
from privaudit.errors import ConfigError

DATA = {"dataset": "digits", "max_train": 200}
BASE = {"topology": "complete", "agents": 4, "model": "logreg", "rounds": 10, "batch_size": 10, "lr": 0.5}


def test_with_record_adds_the_canary_to_the_victim_only():
    game = game_for_table({"kind": "dpsgd", **BASE}, DATA, victim=2)
    before = game.setup.local
    after = with_record(game.setup, 2, game.canary).local
    assert after.sizes.tolist() == [s + (i == 2) for i, s in enumerate(before.sizes.tolist())]
    x, y = after.shard(2)
    assert torch.equal(x[-1], game.canary.x) and int(y[-1]) == int(game.canary.y)
    for agent in (0, 1, 3):
        assert torch.equal(after.shard(agent)[0], before.shard(agent)[0])


def test_canary_world_keeps_the_sampling_rates_of_the_world_without():
    game = game_for_table({"kind": "dp_dpsgd", **BASE}, DATA)
    reference = DEFENSES["dp_dpsgd"](game.params, game.setup)
    with_canary = build_world(game, True, 0)
    assert int(with_canary.setup.local.sizes[0]) == int(reference.setup.local.sizes[0]) + 1
    unpinned = DEFENSES["dp_dpsgd"](game.params, dataclasses.replace(with_canary.setup, rate_sizes=None))
    assert float(unpinned.rates[0]) < float(reference.rates[0])  # what the fixed sizes exist to undo
    assert torch.equal(with_canary.rates, reference.rates)


def test_undefended_dpsgd_gives_a_clearly_positive_bound():
    table = {"kind": "dpsgd", **BASE, "rounds": 20, "batch_size": 20}  # canary in some batch w.p. 1 − 1e-4
    record = canary_audit(table, DATA, runs=24)
    assert record["eps_sound"] is None
    assert record["scores"]["with"]["min"] > record["scores"]["without"]["max"]
    assert record["eps_lb"] > 1.0  # 18 fresh runs per side, perfectly separated: CP caps it near 1.5


def test_dp_dpsgd_at_large_noise_stays_below_its_sound_eps():
    record = canary_audit({"kind": "dp_dpsgd", **BASE, "noise_multiplier": 8.0}, DATA, runs=16)
    assert 0 <= record["eps_lb"] <= record["eps_sound"]
    assert record["delta"] == 1e-5


def test_null_audit_of_the_whole_pipeline_gives_zero():
    record = canary_audit({"kind": "dpsgd", **BASE}, DATA, runs=24, null=True)
    assert record["eps_lb"] == 0.0


def test_eps_bound_on_identical_worlds_is_zero_in_most_seeds():
    rng = np.random.default_rng(0)
    bounds = [eps_bound(rng.normal(size=100), rng.normal(size=100), 1e-5, 0.95)["value"] for _ in range(200)]
    assert np.mean(np.array(bounds) > 0) <= 0.1


def test_eps_bound_grows_with_the_shift():
    rng = np.random.default_rng(1)
    small = eps_bound(rng.normal(size=400), rng.normal(0.5, size=400), 1e-5, 0.95)["value"]
    large = eps_bound(rng.normal(size=400), rng.normal(4.0, size=400), 1e-5, 0.95)["value"]
    assert 0 <= small < large


@pytest.mark.parametrize("table, message", [
    ({"kind": "tvss_output", "agents": 4, "rounds": 10}, "no canary audit for defense 'tvss_output'"),
    ({"kind": "dpsgd", **BASE, "rounds": 1}, "rounds >= 2"),
])
def test_bad_tables_are_one_line_errors(table, message):
    with pytest.raises(ConfigError, match=message):
        game_for_table(table, DATA)


def test_bad_audit_arguments_are_one_line_errors():
    with pytest.raises(ConfigError, match="runs must be >= 8"):
        canary_audit({"kind": "dpsgd", **BASE}, DATA, runs=3)
    with pytest.raises(ConfigError, match="victim 9 is not an agent"):
        game_for_table({"kind": "dpsgd", **BASE}, DATA, victim=9)
    with pytest.raises(ConfigError, match="canary_label 10"):
        game_for_table({"kind": "dpsgd", **BASE}, DATA, canary_label=10)


@pytest.mark.slow
def test_null_audit_is_zero_in_most_seeds():
    bounds = [canary_audit({"kind": "dp_dpsgd", **BASE}, DATA, runs=40, null=True, seed=seed)["eps_lb"]
              for seed in range(5)]
    assert sum(bound > 0 for bound in bounds) <= 1


def test_one_run_eps_matches_the_closed_form_for_perfect_guesses_at_zero_delta():
    # every one of r guesses right: P[Bin(r, q) ≥ r] = q^r < 0.05 exactly when ε > logit(0.05^(1/r))
    q = 0.05 ** (1 / 40)
    assert one_run_eps(40, 40, 200, 0.0, 0.95) == pytest.approx(math.log(q / (1 - q)), abs=1e-4)
    assert one_run_eps(40, 40, 200, 1e-5, 0.95) <= one_run_eps(40, 40, 200, 0.0, 0.95)


def test_one_run_p_value_increases_in_eps():
    values = [one_run_p_value(eps, 30, 40, 200, 1e-5) for eps in (0.0, 0.5, 1.0, 2.0, 4.0)]
    assert all(a <= b for a, b in zip(values, values[1:]))
    assert values[0] < 0.05 < values[-1]


def test_one_run_eps_on_coin_flip_guesses_is_zero_in_most_seeds():
    rng = np.random.default_rng(2)
    bounds = [one_run_eps(int(rng.binomial(40, 0.5)), 40, 200, 1e-5, 0.95) for _ in range(400)]
    assert np.mean(np.array(bounds) > 0) <= 0.06


def test_one_run_audit_separates_undefended_from_noisy_dpsgd():
    table = {**BASE, "rounds": 20, "batch_size": 20}
    undefended = one_run_audit({"kind": "dpsgd", **table}, DATA, canaries=100, guesses=10)
    noisy = one_run_audit({"kind": "dp_dpsgd", **table, "noise_multiplier": 8.0}, DATA, canaries=100, guesses=10)
    assert undefended["correct"] >= 18 and undefended["eps_lb"] > 1.0
    assert 0 <= noisy["eps_lb"] <= noisy["eps_sound"]
    with pytest.raises(ConfigError, match="guesses must satisfy"):
        one_run_audit({"kind": "dpsgd", **table}, DATA, canaries=10, guesses=6)
