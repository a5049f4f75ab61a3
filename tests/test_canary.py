"""End-to-end canary audits: the three kinds of number stay apart and calibrated (a null audit gives
0 bound and 0 estimate; a bound exceeds the truth no more often than its confidence allows), every
defense kind can be audited, and bad inputs are one-line errors."""

import math

import numpy as np
import pytest
import torch

from attacks.canary import audit_game, scores
from attacks.canary_statistics import law_epsilon, law_estimate, model_bound, simulated_scores
from attacks.channels import RoundLaw
from privaudit.campaign.audit_findings import canary_audit, canary_verdict, game_for_table, one_run_audit
from privaudit.errors import ConfigError

DATA = {"dataset": "digits", "max_train": 200}
BASE = {"topology": "complete", "agents": 4, "model": "logreg", "rounds": 6, "batch_size": 10, "lr": 0.5}
DP = {"kind": "dp_dpsgd", **BASE, "clip": 1.0, "noise_multiplier": 1.0}


def test_null_audits_give_zero_bound_and_zero_estimate_in_at_least_19_of_20_seeds():
    """Both worlds without the canary (the attacker still scores against it): ε_LB and both
    estimates must be 0 but for their stated error rates (5 % and 0.5 % per seed)."""
    game = game_for_table(DP, DATA)
    bounds, estimates = [], []
    for seed in range(20):
        record = audit_game(game, runs=64, seed=seed, null=True)
        bounds.append(record["eps_lb"])
        estimates.append(max(estimate["eps_estimate"] for estimate in record["estimates"].values()))
    assert sum(bound > 0 for bound in bounds) <= 1
    assert sum(estimate > 0 for estimate in estimates) <= 1


def test_the_rigorous_bound_covers_the_truth_and_comes_close_to_it():
    """Scores drawn from a known law (a Gaussian release of shift 2, every run sampled) stand for
    the runs: over 40 seeds the 95 % bound exceeds the law's exact ε in at most 4 (5 or more has
    probability 0.048 for a valid bound; a bound exceeding 25 % of the time passes with
    probability 0.016), and its median reaches most of the exact ε (measured: 0.80 of it at 4000 runs)."""
    laws = [(RoundLaw(1.0), torch.tensor([2.0], dtype=torch.float64))]
    exact = law_epsilon(laws, "add/remove", 1.0, 0.1)
    model = simulated_scores(laws, "add/remove", 200_000, seed=0)
    bounds = [model_bound(*simulated_scores(laws, "add/remove", 4000, seed=1 + seed), model, "eps", 0.1, 0.95)["value"]
              for seed in range(40)]
    assert sum(bound > exact for bound in bounds) <= 4
    assert np.median(bounds) > 0.7 * exact


def test_the_law_estimate_finds_the_laws_own_epsilon_and_zero_on_null_scores():
    laws = [(RoundLaw(0.2), torch.tensor([1.0], dtype=torch.float64))] * 10
    exact = law_epsilon(laws, "add/remove", 1.0, 1e-5)
    out, inn = simulated_scores(laws, "add/remove", 20_000, seed=3)
    estimate = law_estimate(out, inn, laws, "add/remove", 1e-5, None, seed=4)
    assert estimate["eps_estimate"] == pytest.approx(exact, rel=0.1)
    assert "not a bound" in estimate["method"]
    capped = law_estimate(out, inn, laws, "add/remove", 1e-5, 0.5 * exact, seed=4)
    assert capped["capped"] and capped["eps_estimate"] == 0.5 * exact
    null = law_estimate(out, simulated_scores(laws, "add/remove", 20_000, seed=5)[0], laws, "add/remove", 1e-5,
                        None, seed=4)
    assert null["eps_estimate"] == 0.0 and null["strength"] == 0.0


def test_dp_dpsgd_audit_separates_the_worlds_and_stays_below_its_sound_eps():
    record = canary_audit({**DP, "rounds": 10}, DATA, runs=256)
    assert record["protocol"] == "model" and record["canary"] == "gradient"
    assert record["adjacency"] == "add/remove" and record["channels"] == ["state_difference"]
    assert 0 < record["eps_lb"] <= record["eps_sound"]
    assert 0 < record["eps_estimate"] <= record["eps_sound"]
    assert "not a bound" in record["estimate_method"]
    assert record["delta"] == 1e-5


def test_undefended_dpsgd_gives_a_clearly_positive_bound():
    record = canary_audit({"kind": "dpsgd", **BASE, "rounds": 20, "batch_size": 20}, DATA, runs=64)
    assert record["eps_sound"] is None and record["protocol"] == "held-out"
    assert record["scores"]["with"]["min"] > record["scores"]["without"]["max"]
    assert record["eps_lb"] > 2.0
    assert canary_verdict(record | {"confidence": 0.95})["status"] == "not evaluable"


def test_spreading_the_simulations_over_processes_changes_no_number():
    game = game_for_table(DP, DATA)
    alone = scores(game, 96, True, seed=1, side=1, worlds=32)[0]
    spread = scores(game, 96, True, seed=1, side=1, worlds=32, workers=2)[0]
    assert np.array_equal(alone, spread)


EVERY_DEFENSE = [
    ("dpdl", {"dataset": "digits", "max_train": 120},
     {"topology": "ring", "agents": 3, "model": "logreg", "rounds": 4, "batch_size": 8, "noise_multiplier": 2.0},
     "replace-one", ["cross_gradient", "self_gradient"]),
    ("lt_admm_dp", {"dataset": "logistic", "samples_per_agent": 40},
     {"topology": "ring", "agents": 3, "model": "logreg", "model_options": {"binary": True}, "rounds": 4, "tau": 2},
     "replace-one", ["bridge"]),
    ("tvss_output", {"dataset": "estimation_wz", "samples_per_agent": 20},
     {"topology": "ring", "agents": 3, "model": "linear_estimator", "rounds": 4}, "replace-one", ["noisy_state"]),
    ("tvss_gradient", {"dataset": "estimation_wz", "samples_per_agent": 20},
     {"topology": "ring", "agents": 3, "model": "linear_estimator", "rounds": 4}, "replace-one", ["state_difference"]),
    ("ternary", {"dataset": "estimation_wb", "samples_per_agent": 20},
     {"topology": "ring", "agents": 3, "model": "linear_estimator", "rounds": 4}, "replace-one", ["state_difference"]),
]


@pytest.mark.parametrize("kind, data, table, adjacency, channels", EVERY_DEFENSE)
def test_every_seed_algorithm_has_an_end_to_end_audit(kind, data, table, adjacency, channels):
    record = canary_audit({"kind": kind, **table}, data, runs=32)
    assert (record["adjacency"], record["channels"]) == (adjacency, channels)
    assert record["eps_lb"] >= 0 and record["pair"]
    if record["eps_sound"] is not None and math.isfinite(record["eps_sound"]):
        assert record["eps_lb"] <= record["eps_sound"]
    verdict = canary_verdict(record | {"confidence": 0.95})
    if kind == "ternary":
        assert verdict["status"] == "not evaluable" and "not records" in verdict["reason"]
        assert record["delta_lb"] is not None and record["delta_lb_eps"] == 0
    if kind.startswith("tvss"):
        assert record["delta"] == 0 and record["estimates"].get("gdp") is None


def test_a_curious_neighbour_hears_only_the_cross_gradient_sent_to_it():
    table = {"kind": "dpdl", **EVERY_DEFENSE[0][2]}
    game = game_for_table(table, EVERY_DEFENSE[0][1], threat="curious_neighbour", observer=1)
    assert game.scenarios == ("cross_gradient",)
    with pytest.raises(ConfigError, match="does not hear 'dpdl''s 'self_gradient' channel"):
        game_for_table(table, EVERY_DEFENSE[0][1], threat="curious_neighbour", observer=1,
                       scenarios=["self_gradient"])


@pytest.mark.parametrize("options, message", [
    ({"canary": "ghost"}, "unknown canary 'ghost'"),
    ({"victim": 9}, "victim 9 is not an agent"),
    ({"canary": "outlier", "canary_label": 10}, "canary_label 10"),
    ({"scenarios": ["momentum"]}, "has no canary channel 'momentum'"),
])
def test_bad_games_are_one_line_errors(options, message):
    with pytest.raises(ConfigError, match=message) as caught:
        game_for_table(DP, DATA, **options)
    assert "\n" not in str(caught.value)


def test_bad_audit_arguments_are_one_line_errors():
    with pytest.raises(ConfigError, match="rounds >= 2"):
        game_for_table({**DP, "rounds": 1}, DATA)
    with pytest.raises(ConfigError, match="use canary = 'gradient'"):
        game_for_table({"kind": "tvss_gradient", **EVERY_DEFENSE[3][2]}, EVERY_DEFENSE[3][1], canary="record")
    with pytest.raises(ConfigError, match="runs must be >= 8"):
        canary_audit(DP, DATA, runs=3)
    with pytest.raises(ConfigError, match="adds no noise"):
        canary_audit({"kind": "dpsgd", **BASE}, DATA, runs=16, protocol="model")


def test_record_and_outlier_canaries_are_audited_with_the_held_out_protocol():
    for canary in ("record", "outlier"):
        record = canary_audit({**DP, "noise_multiplier": 0.5}, DATA, runs=64, canary=canary)
        assert record["canary"] == canary and record["protocol"] == "held-out"
        assert 0 <= record["eps_lb"] <= record["eps_sound"]


def test_one_run_audit_separates_undefended_from_noisy_dpsgd():
    table = {**BASE, "rounds": 10, "batch_size": 20}
    undefended = one_run_audit({"kind": "dpsgd", **table}, DATA, canaries=100, guesses=10)
    noisy = one_run_audit({**DP, **table, "noise_multiplier": 8.0}, DATA, canaries=100, guesses=10)
    assert undefended["correct"] >= 18 and undefended["eps_lb"] > 1.0 and undefended["fdp"]["mu_lb"] > 0
    assert 0 <= noisy["eps_lb"] <= noisy["eps_sound"]
    with pytest.raises(ConfigError, match="guesses must satisfy"):
        one_run_audit({"kind": "dpsgd", **table}, DATA, canaries=10, guesses=6)
