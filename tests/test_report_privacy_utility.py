"""The report's "Privacy and utility" section (issue 17, item 2), from hand-written rows: a sweep is
found where runs agree in everything but their noise (a run without noise joins as "no noise"),
its figure and table carry the utility beside every attack's success, and nothing is shown when
no campaign varies the noise. The DPDL σ-sweep preset validates and ends at Theorem 1's σ for
ε = 1."""

import pytest

from privaudit.attacks.views import noise
from privaudit.campaign.cells import claims
from privaudit.campaign.config import load_campaign
from privaudit.campaign.run import run_campaign
from privaudit.store import ResultsStore
from privaudit.reports.html import render_report
from privaudit.reports.privacy_utility import find_sweeps, privacy_utility_section
from tests.helpers import small_campaign

DPDL = {"lr": 0.005, "batch_size": 1, "clip": 2.0, "beta": 0.7, "alpha": 2.0, "delta": 1e-5, "h": 1.0,
        "c1": 1.0, "c2": 2.0, "target_rounds": None, "target_epsilon": None}


def _claim(sigma: float | None, sound: bool = False) -> dict:
    if sigma is None:
        return {"notion": "none", "eps_claimed": None, "eps_stated": None, "eps_sound": None, "delta": None,
                "horizon": 100, "equation": "none", "sound_method": "-", "assumptions": []}
    return {"notion": "(ε, δ)-DP", "eps_claimed": 30 / sigma, "eps_stated": None,
            "eps_sound": 20 / sigma if sound else None, "delta": 1e-5, "horizon": 100, "equation": "eq. 23",
            "sound_method": "-", "assumptions": []}


def _training(cell: str, sigma: float | None, seed: int = 0, accuracy: float = 0.6, topology: str = "ring",
              defense: str = "dpdl", sound: bool = False) -> dict:
    params = {**DPDL, "noise": sigma is not None, "noise_multiplier": sigma}
    label = "ND" if sigma is None else f"DPDL (noise_multiplier={sigma})"
    return {
        "type": "training", "cell": cell, "group": f"{defense}-{topology}-{sigma}", "defense": defense,
        "label": label, "title": "DPDL", "seed": seed,
        "config": {"data": {"dataset": "photos"}, "params": params, "seed": seed,
                   "run": {"kind": defense, "label": label, "topology": topology, "agents": 10, "rounds": 100,
                           "grid": {}}},
        "metrics": {"avg_acc": accuracy, "agent_acc_mean": accuracy}, "claim": _claim(sigma, sound),
        "noise": None if noise(defense) is None else noise(defense).as_dict(),
        "history": [{"round": 100, "avg_acc": accuracy, "agent_acc_mean": accuracy}],
        "messages": {"model": 10}, "wall_s": 1.0, "version": "0",
    }


def _inversion(cell: str, training: str, label: str, scenario: str, psnr: float, floor: float = 12.0,
               leak: bool | None = None, round_: int = 1, seed: int = 0) -> dict:
    return {
        "type": "inversion", "cell": cell, "group": f"g-{cell}", "training": training, "label": label,
        "attack": "ig", "attack_title": "Inverting Gradients", "defense": "dpdl", "defense_label": "DPDL",
        "defense_table": "DPDL", "setting": {}, "scenario": scenario, "threat": "global_listener", "victim": 0,
        "round": round_, "seed": seed, "warnings": [], "batch_size": 1, "status": "ok",
        "metrics": {"mse": 0.01, "psnr": psnr, "ssim": 0.5, "lpips": None},
        "baseline": {"mse": 0.1, "psnr": floor, "ssim": 0.3},
        **({"leak": {"leak": leak, "confidence": 0.99}} if leak is not None else {}),
        "artifacts": {}, "wall_s": 1.0, "version": "0",
    }


def _membership(cell: str, training: str, auc: float) -> dict:
    return {"type": "membership", "cell": cell, "group": f"g-{cell}", "training": training, "label": "MIA",
            "defense": "dpdl", "defense_label": "DPDL", "round": None, "seed": 0, "status": "ok",
            "metrics": {"loss": {"auc": auc - 0.1}, "rmia": {"auc": auc}}, "wall_s": 1.0, "version": "0"}


def _audit(cell: str, training: str, eps_lb: float) -> dict:
    return {"type": "audit", "cell": cell, "group": f"g-{cell}", "training": training, "label": "canary",
            "kind": "canary", "seed": 0, "status": "ok", "eps_lb": eps_lb, "delta": 1e-5, "wall_s": 1.0,
            "version": "0"}


def _sweep_rows() -> list[dict]:
    """ND and σ ∈ {1e-3, 1} on a ring, two seeds, CG and MM* inversions, a membership table and a
    canary audit; a complete-graph run at σ = 1 that belongs to no sweep."""
    rows = []
    for seed in (0, 1):
        rows += [_training(f"nd{seed}", None, seed, 0.66), _training(f"lo{seed}", 0.001, seed, 0.64 + seed / 100),
                 _training(f"hi{seed}", 1.0, seed, 0.19)]
        rows += [_inversion(f"a{seed}", f"nd{seed}", "CG", "cross_gradient", 48.0, 9.0, True, seed=seed),
                 _inversion(f"b{seed}", f"lo{seed}", "CG", "cross_gradient", 14.0, 12.0, False, seed=seed),
                 _inversion(f"c{seed}", f"hi{seed}", "CG", "cross_gradient", 6.0, 12.0, False, seed=seed),
                 _inversion(f"d{seed}", f"lo{seed}", "MM*", "self_gradient", 35.0, 12.0, True, seed=seed),
                 _inversion(f"e{seed}", f"lo{seed}", "MM*", "self_gradient", 20.0, 12.0, True, round_=5, seed=seed)]
    rows += [_membership("m0", "lo0", 0.62), _audit("u0", "hi0", 0.25),
             _training("other", 1.0, topology="complete")]
    return rows


def test_a_sweep_is_the_runs_that_differ_only_in_their_noise():
    sweeps = find_sweeps(_sweep_rows())
    assert len(sweeps) == 1 and sweeps[0].parameter == "noise_multiplier"
    assert [run.label for run in sweeps[0].ordered()] == ["ND", "DPDL (noise_multiplier=0.001)",
                                                          "DPDL (noise_multiplier=1.0)"]


def test_rows_that_name_no_noise_parameters_make_no_sweep():
    """Rows written before rows declared their noise parameters (privaudit 0.1) name none: the
    report does not guess them."""
    rows = [{key: value for key, value in row.items() if key != "noise"} for row in _sweep_rows()]
    assert find_sweeps(rows) == []


def test_a_defense_declares_its_own_noise_parameters():
    """The sweep follows the declaration the row carries, whatever the parameter is called."""
    rows = _sweep_rows()
    for row in rows:
        if row["type"] == "training":
            row["noise"] = {"parameters": {"lr": ["η", False]}, "switch": None, "companions": []}
    assert find_sweeps(rows) == []  # every run has the same η: no sweep over it
    groups = sorted({row["group"] for row in rows if row["type"] == "training"})
    for row in rows:
        if row["type"] == "training":
            row["config"]["params"] = {**DPDL, "noise": True, "noise_multiplier": 1.0,
                                       "lr": 0.1 * (1 + groups.index(row["group"]))}
    (sweep,) = find_sweeps(rows)
    assert (sweep.parameter, sweep.label) == ("lr", "η")
    assert [sweep.tag(run) for run in sweep.ordered()] == sorted({sweep.tag(run) for run in sweep.runs}, reverse=True)


def test_the_table_puts_utility_beside_every_attack():
    (section,) = privacy_utility_section(_sweep_rows())
    assert section["columns"] == ["CG (cross_gradient)", "MM* (self_gradient)", "MIA", "canary"]
    assert section["figure"].startswith("data:image/png;base64,")
    assert section["sound"] is False  # DPDL: no run has a sound ε, the figure uses the claimed one
    nd, low, high = section["table"]
    assert (nd["level"], nd["utility"], nd["claimed"], nd["seeds"]) == ("no noise", "0.660 ± 0.000", "no DP", "0, 1")
    assert nd["measures"][0] == "48.0 ± 0.0 dB, floor 9.0 ± 0.0 (round 1); leak detected in 2 of 2 seeds"
    assert nd["measures"][1:] == ["—", "—", "—"]
    assert (low["level"], low["utility"], low["claimed"], low["sound"]) == ("σ=0.001", "0.645 ± 0.005", "3e+04",
                                                                         "no sound ε")
    assert low["measures"][1].startswith("35.0 ± 0.0 dB, floor 12.0 ± 0.0 (round 1)")  # the attacker's best round
    assert low["measures"][2] == "AUC 0.62 (RMIA, final average model)"
    assert (high["level"], high["utility"]) == ("σ=1", "0.190 ± 0.000")
    assert high["measures"][3] == "ε_LB 0.25"


def test_a_sweep_with_sound_eps_draws_the_claimed_one_beside_it():
    rows = [_training(f"s{k}", sigma, defense="dp_dpsgd", sound=True) for k, sigma in enumerate((0.5, 1.0, 2.0))]
    (section,) = privacy_utility_section(rows)
    assert section["sound"] and section["both_eps"]
    assert [r["sound"] for r in section["table"]] == ["40", "20", "10"]
    assert section["columns"] == [] and section["figure"]


def test_one_sweep_per_value_of_the_other_grid_keys():
    rows = [_training(f"{topology}{k}", sigma, topology=topology)
            for topology in ("ring", "complete") for k, sigma in enumerate((0.1, 1.0))]
    sections = privacy_utility_section(rows)
    assert len(sections) == 2 and {"ring" in s["title"] for s in sections} == {True, False}
    for lr, row in zip((0.1, 0.1, 0.01, 0.01), rows):
        row["config"]["params"]["lr"] = lr
        row["config"]["run"]["topology"] = "ring"
    titles = [s["title"] for s in privacy_utility_section(rows)]
    assert titles[0].endswith("σ sweep · lr=0.1") and titles[1].endswith("σ sweep · lr=0.01")


@pytest.mark.parametrize("rows", [
    [_training("a", 1.0), _training("b", 1.0, topology="complete")],  # varies the topology, not the noise
    [_training("a", 1.0), _training("b", None, defense="dpsgd")],  # two defenses, one noise level each
    [_training("a", 1.0)],
])
def test_nothing_is_shown_without_a_noise_sweep(tmp_path, rows):
    assert privacy_utility_section(rows) == []
    store = ResultsStore(tmp_path)
    for row in rows:
        store.append(row)
    html = render_report(tmp_path, tmp_path / "report.html").read_text()
    assert "privacy-utility" not in html and "Privacy and utility" not in html


def test_the_section_is_rendered_after_training_and_escaped(tmp_path):
    rows = _sweep_rows()
    rows[0]["label"] = rows[0]["config"]["run"]["label"] = "<script>alert(1)</script>"
    store = ResultsStore(tmp_path)
    for row in rows:
        store.append(row)
    html = render_report(tmp_path, tmp_path / "report.html").read_text()
    assert html.index('<section id="training">') < html.index('<section id="privacy-utility">') \
        < html.index('<section id="inversion">')
    section = html[html.index('<section id="privacy-utility">'):html.index('<section id="inversion">')]
    assert "<h2>Privacy and utility</h2>" in section and "not detected at this strength" in section
    assert "<script>" not in section and "&lt;script&gt;" in section
    assert section.count('<img alt="utility and attack success') == 1
    contents = html[html.index('<nav class="toc">'):html.index("</nav>")]
    assert '<a href="#training">Training</a> · <a href="#privacy-utility">Privacy and utility</a>' in contents


def test_the_dpdl_sweep_preset_runs_from_no_noise_to_theorem_1_at_epsilon_1():
    campaign = load_campaign("privaudit/presets/dpdl_sweep.toml")
    scenarios = {table.scenario for table in campaign.attack}
    assert {"cross_gradient", "momentum"} <= scenarios
    found = claims(campaign)
    assert found[0]["notion"] == "none"  # the ND variant: σ = 0
    noisy = [row["eps_claimed"] for row in found[1:]]
    assert noisy == sorted(noisy, reverse=True) and 0.99 < noisy[-1] <= 1.0


def test_a_campaign_grid_over_sigma_is_found_in_its_rows(tmp_path):
    campaign = small_campaign([{"kind": "dp_dpsgd", "label": "DP-D-PSGD", "agents": 4, "rounds": 4, "eval_every": 4,
                                "batch_size": 8, "grid": {"noise_multiplier": [0.5, 2.0]}},
                               {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "rounds": 4, "eval_every": 4,
                                "batch_size": 8}], min_size=8)
    store = run_campaign(campaign, "", tmp_path, progress=False, say=lambda _: None)
    (section,) = privacy_utility_section(store.rows())
    assert section["parameter"] == "noise_multiplier" and section["sound"]
    assert [line["level"] for line in section["table"]] == ["σ=0.5", "σ=2"]
    assert all(float(line["sound"]) > 0 for line in section["table"])
