"""`[[audit]] kind = "reconstruction"`: the informed-adversary game in campaigns. An undefended run
is rebuilt in every trial and forces ε ≥ log((p_LB − δ)/κ); a very noisy DP run is rebuilt in none
and forces nothing; bad tables are one-line errors; other audits keep their cell ids."""

import math

import pytest
import torch

from privaudit.attacks.audit.reconstruction_bounds import clopper_pearson_lower, psnr_kappa
from privaudit.attacks.audit.reconstruction_game import holding, play_trial
from privaudit.campaign.audit_findings import reconstruction_game
from privaudit.campaign.cells import expand, expand_audits
from privaudit.campaign.config import AuditConfig, parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError

DPSGD = {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "rounds": 3, "eval_every": 3, "batch_size": 1,
         "lr": 0.1, "model": "logreg"}
DP = DPSGD | {"kind": "dp_dpsgd", "label": "DP-D-PSGD", "clip": 1.0, "noise_multiplier": 20.0}
RECONSTRUCTION = {"kind": "reconstruction", "label": "rebuild", "trials": 10}


def _campaign(audits, defenses=(DPSGD,)):
    return parse_campaign({"campaign": {"name": "t", "seeds": [0]}, "data": {"dataset": "digits"},
                           "defense": list(defenses), "audit": list(audits)})


def _audit_rows(campaign, out):
    store = run_campaign(campaign, "# t", out, progress=False, say=lambda _: None)
    return [row for row in store.rows() if row["type"] == "audit"]


def test_the_victim_holds_exactly_the_drawn_record_and_every_batch_is_it():
    campaign = _campaign([RECONSTRUCTION])
    (cell,) = expand_audits(campaign, expand(campaign))
    game = reconstruction_game(cell)
    setup = holding(game.setup, 0, game.pool_x[:1], game.pool_y[:1], 7)
    assert int(setup.local.sizes[0]) == 1 and torch.equal(setup.local.x[setup.local.index[0, 0]], game.pool_x[0])
    assert [int(n) for n in setup.local.sizes[1:]] == [int(n) for n in game.setup.local.sizes[1:]]
    first, again = play_trial(game, 3), play_trial(game, 3)
    assert first == again and first.success and first.psnr >= 30


def test_an_undefended_run_is_rebuilt_in_every_trial_and_forces_the_reconstruction_bound(tmp_path):
    (row,) = _audit_rows(_campaign([RECONSTRUCTION]), tmp_path)
    detail = row["detail"]
    assert row["status"] == "ok" and row["kind"] == "reconstruction" and row["samples"] == 10
    assert detail["successes"] == detail["trials"] == 10 and min(detail["psnr"]) >= 30
    assert len({trial["record"] for trial in detail["trial_records"]}) > 1
    kappa = detail["kappa"]
    assert 0 < detail["kappa_lower"] <= kappa and detail["pool"] <= 1000
    expected = math.log((float(clopper_pearson_lower(10, 10, row["confidence"])) - row["delta"]) / kappa)
    assert row["eps_lb"] == pytest.approx(expected) and row["eps_lb"] > 0
    assert row["eps_claimed"] is None and row["verdict"]["status"] == "not evaluable"
    assert "iDLG on the state_difference target at round 0, 10 trials" in row["attack"]
    assert "PSNR ≥ 30 dB" in row["attack"] and f"{detail['pool']:,} records" in row["attack"]
    assert row["relation"]["audited"] == "replace-one, one record"
    from privaudit.reports.summary import summary
    (verdict,) = summary(tmp_path)["verdicts"]
    assert verdict["subject"] == "D-PSGD" and verdict["kind"] == "defense run"
    assert verdict["eps_lb"] == pytest.approx(row["eps_lb"])


def test_kappa_is_the_pool_bracket_the_bound_divides_by():
    campaign = _campaign([RECONSTRUCTION | {"pool": 50}])
    (cell,) = expand_audits(campaign, expand(campaign))
    game = reconstruction_game(cell)
    pixels = game.setup.data.normalisation.denormalise(game.pool_x.double()).clamp(0, 1)
    assert len(game.pool_x) == 50 and psnr_kappa(pixels, 30.0) == (1 / 50, 1 / 50)


def test_a_very_noisy_dp_run_is_rebuilt_in_no_trial_and_is_not_refuted(tmp_path):
    (row,) = _audit_rows(_campaign([RECONSTRUCTION | {"trials": 5}], defenses=(DP,)), tmp_path)
    assert row["status"] == "ok" and row["detail"]["successes"] == 0 and row["eps_lb"] == 0.0
    assert max(row["detail"]["psnr"]) < 30
    assert row["verdict"]["status"] not in ("refuted", "conditionally refuted")
    assert row["verdict"]["status"] == "inconclusive"
    # add/remove claim: replacing one record is (2ε, (1 + e^ε)δ), at which the bound is computed
    eps = row["eps_claimed"]
    assert row["delta"] == pytest.approx((1 + math.exp(eps)) * 1e-5)
    assert row["relation"]["same"] is False and "2ε" in row["relation"]["why"]
    assert f"{2 * eps:.4g}" in row["verdict"]["reason"]


def test_reconstruction_audits_target_only_tables_with_the_scenario():
    plain = {"kind": "dpsgd", "label": "plain", "agents": 4, "rounds": 3}
    campaign = _campaign([RECONSTRUCTION | {"defense": ["D-PSGD"]}], defenses=(DPSGD, plain))
    assert [a.training.label for a in expand_audits(campaign, expand(campaign))] == ["D-PSGD"]
    assert campaign.audit_targets(0) == [0]


@pytest.mark.parametrize("table, message", [
    ({"runs": 10}, "audit[0].runs: not a field of a reconstruction audit"),
    ({"canary": "record"}, "audit[0].canary: not a field of a reconstruction audit"),
    ({"mechanism": "ternary"}, "audit[0].mechanism: not a field of a reconstruction audit"),
    ({"attack": "dgl"}, "audit[0].attack: unknown attack 'dgl'"),
    ({"trials": 0}, "audit[0].trials"),
    ({"pool": 0}, "audit[0].pool"),
    ({"scenario": "nope", "defense": ["D-PSGD"]}, "defense 'D-PSGD' (dpsgd) has no scenario 'nope'"),
    ({"observer": 1}, "audit[0].observer: only the curious_neighbour threat has one"),
    ({"links": [[0, 1]]}, "audit[0].links: only the eavesdropper threat has links"),
])
def test_bad_reconstruction_tables_are_one_line_errors(table, message):
    with pytest.raises(ConfigError) as error:
        _campaign([RECONSTRUCTION | table])
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("table, field", [
    ({"kind": "canary", "trials": 5}, "trials"),
    ({"kind": "canary", "threshold_db": 20}, "threshold_db"),
    ({"kind": "mechanism", "mechanism": "ternary", "round": 2}, "round"),
])
def test_reconstruction_fields_on_other_audits_are_refused(table, field):
    with pytest.raises(ConfigError, match=rf"audit\[0\]\.{field}: not a field of a (canary|mechanism) audit"):
        _campaign([table])


@pytest.mark.parametrize("table, message", [
    ({"round": 5}, "extractor reads round 6, but the run has 3 rounds"),
    ({"victim": 9}, "victim 9 is not an agent"),
])
def test_check_refuses_what_the_run_cannot_serve_in_one_line(tmp_path, capsys, table, message):
    path = tmp_path / "c.toml"
    rows = ", ".join(f"{key} = {value!r}".replace("'", '"') for key, value in (RECONSTRUCTION | table).items())
    path.write_text('[data]\ndataset = "digits"\n[[defense]]\nkind = "dpsgd"\nagents = 4\nrounds = 3\n'
                    'batch_size = 1\nmodel = "logreg"\n[[audit]]\n' + rows.replace(", ", "\n") + "\n")
    assert main(["check", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privaudit: error:") and message in err[0]


def test_a_victim_of_one_record_cannot_draw_larger_fixed_batches():
    from privaudit.campaign.audit_findings import check_audit

    campaign = _campaign([RECONSTRUCTION], defenses=(DPSGD | {"batch_size": 4},))
    (cell,) = expand_audits(campaign, expand(campaign))
    with pytest.raises(ConfigError, match=r"^audit\[0\] \(rebuild on D-PSGD, seed 0\): .*batch_size 4 exceeds"):
        check_audit(cell)


def test_defaults_leave_the_dump_and_the_list_describes_the_fields():
    dumped = AuditConfig(kind="canary").model_dump(mode="json")
    assert not {"attack", "scenario", "round", "threshold_db", "trials", "pool"} & set(dumped)
    assert AuditConfig(kind="reconstruction", trials=7).model_dump(mode="json")["trials"] == 7
    from privaudit.campaign.catalogue import attacks
    fields = {field["name"]: field for field in attacks()["audits"]["table"]}
    for name in ("attack", "scenario", "round", "threshold_db", "trials", "pool"):
        assert fields[name]["description"].startswith("reconstruction:")


def _claim(change, eps, delta):
    from privaudit.accounting import Claim, Neighbours
    return Claim(defense="x", notion="(ε, δ)-DP", adjacency=change, eps_claimed=eps, eps_stated=None, eps_sound=eps,
                 delta=delta, horizon=1, equation="", sound_method="", neighbours=Neighbours(change, "record"))


@pytest.mark.parametrize("change, eps, successes, status, compared", [
    ("replace-one", 1.0, 10, "refuted", (1.0, 1e-5)),
    ("add/remove", 1.0, 10, "refuted", (2.0, (1 + math.e) * 1e-5)),
    ("add/remove", 2.5, 7, "consistent", (5.0, (1 + math.exp(2.5)) * 1e-5)),
    ("replace-one", 8.0, 10, "inconclusive", (8.0, 1e-5)),
])
def test_the_verdict_compares_with_the_claim_for_replacing_one_record(change, eps, successes, status, compared):
    """Against 360 candidates, 10 successes of 10 force ε ≥ 5.59, above 1 (replace-one) and 2 × 1
    (add/remove); 7 of 10 force 4.95, below 2 × 2.5 though 10 of 10 would exceed it; no 10 trials
    can refute 8."""
    from privaudit.attacks.audit.reconstruction_bounds import reconstruction_bound
    from privaudit.campaign.audit_findings import reconstruction_delta, reconstruction_verdict, replace_one_claim

    claim = _claim(change, eps, 1e-5)
    assert replace_one_claim(claim) == pytest.approx(compared)
    delta = reconstruction_delta(claim, None)
    record = reconstruction_bound(successes, 10, 1 / 360, delta, 0.95).as_dict()
    assert reconstruction_verdict(record, claim)["status"] == status
    lower = reconstruction_verdict(record | {"delta": delta / 2}, claim)
    assert lower["status"] == "inconclusive" and "below the claim's δ" in lower["reason"]
