"""`[[membership]]` tables in campaigns: the attacker's data split, reference models trained by
the same defense, rows with AUC / TPR intervals and saved scores, resumption, one-line errors."""

import json

import numpy as np
import pytest
import torch

from privaudit.campaign.cells import build_defense, expand, expand_membership
from privaudit.campaign.config import parse_campaign
from privaudit.attacks.membership.methods import METHODS
from privaudit.campaign.membership_findings import _pseudo_targets, attacker_data, reference_models
from privaudit.campaign.run import run_campaign
from privaudit.cli import main

DPSGD = {"kind": "dpsgd", "label": "D-PSGD", "agents": 10, "rounds": 30, "eval_every": 30, "batch_size": 5,
         "lr": 0.5}
DATA = {"dataset": "digits", "max_train": 100, "test_fraction": 0.5}
MIA = {"label": "MIA", "threat": "curious_neighbour", "rounds": [10, 29], "references": 8, "non_members": 100,
       "bootstrap": 200}


def _campaign(memberships, defenses=(DPSGD,), seeds=(0,), data=DATA):
    return parse_campaign({"campaign": {"name": "t", "seeds": list(seeds)}, "data": dict(data),
                           "defense": list(defenses), "membership": list(memberships)})


def _run(campaign, out, **kwargs):
    lines = []
    store = run_campaign(campaign, "# test", out, progress=False, say=lines.append, **kwargs)
    return store, lines


def test_membership_cells_expand_per_run_seed_and_round():
    campaign = _campaign([MIA, {"target": "average", "references": 2}], seeds=(0, 1))
    cells = expand_membership(campaign, expand(campaign))
    assert [(c.index, c.training.seed, c.round) for c in cells] == [
        (0, 0, 10), (0, 0, 29), (0, 1, 10), (0, 1, 29), (1, 0, None), (1, 1, None)]
    assert len({c.id for c in cells}) == 6
    assert cells[0].group == cells[2].group != cells[1].group


def test_the_attackers_records_are_disjoint_and_references_never_see_a_candidate():
    campaign = _campaign([MIA])
    cell = expand(campaign)[0]
    defense = build_defense(cell)
    data = attacker_data(campaign.membership[0], defense.setup)
    held_out = [data.non_member_rows, data.population_rows, data.pool_rows]
    assert sum(map(len, held_out)) == len(np.unique(np.concatenate(held_out)))
    assert len(data.non_member_rows) == 100 and len(data.population_rows) == 200
    assert np.array_equal(data.member_rows, defense.setup.local.index[0, :int(defense.setup.local.sizes[0])].numpy())
    assert data.is_member.sum() == len(data.member_rows) and (~data.is_member).sum() == 100
    pool = {tuple(x.flatten().tolist()) for x in data.pool_x}
    assert not pool & {tuple(x.flatten().tolist()) for x in data.candidates_x}


def test_reference_runs_are_the_same_defense_with_their_own_seeds():
    table = _campaign([MIA]).membership[0].model_copy(update={"references": 2})
    campaign = _campaign([MIA])
    cell = expand(campaign)[0]
    defense = build_defense(cell)
    data = attacker_data(table, defense.setup)
    references = reference_models(table, "dpsgd", cell.params, defense.setup, data, cell.run.rounds)
    views, seeds = references.views, references.seeds
    assert set(views) == {(10, 0), (29, 0)} and views[29, 0].shape == (2, defense.setup.model.dim)
    assert len(set(seeds)) == 2 and cell.seed not in seeds
    assert not torch.equal(views[29, 0][0], views[29, 0][1])
    again = reference_models(table, "dpsgd", cell.params, defense.setup, data, cell.run.rounds)
    assert torch.equal(again.views[29, 0], views[29, 0])
    sizes = defense.setup.local.sizes.tolist()
    for shards in references.shards:
        assert [len(shard) for shard in shards] == sizes
        assert all(0 <= shard.min() and shard.max() < len(data.pool_y) for shard in shards)


def test_membership_rows_have_metrics_with_intervals_and_saved_scores(tmp_path):
    store, lines = _run(_campaign([MIA, {"label": "avg", "target": "average", "references": 2,
                                         "non_members": 50, "bootstrap": 100}]), tmp_path)
    rows = store.rows()
    assert [row["type"] for row in rows] == ["training", "membership", "membership", "membership"]
    training, *members = rows
    assert [row["round"] for row in members] == [10, 29, None]
    for row in members:
        assert row["status"] == "ok" and row["training"] == training["cell"]
        assert set(row["metrics"]) == set(METHODS)
        for metrics in row["metrics"].values():
            for key in ("auc", "tpr@0.001", "tpr@0.01", "balanced_accuracy"):
                low, high = metrics[f"{key}_ci"]
                assert 0 <= low <= high <= 1 and 0 <= metrics[key] <= 1
            assert metrics["roc"]["fpr"][0] == 0 and metrics["roc"]["fpr"][-1] == 1
        saved = np.load(tmp_path / row["artifacts"]["scores"])
        assert saved["is_member"].sum() == row["data"]["members"] == 10
        assert set(saved.files) >= set(METHODS) | {"member_rows", "non_member_rows"}
    assert members[0]["threat"] == "curious_neighbour" and members[2]["threat"] == "output"
    assert [row["rmia_a_from"] for row in members] == ["chosen on reference models"] * 2 + ["paper's value 0.3"]
    assert 0 <= members[0]["rmia_a"] <= 1 and members[2]["rmia_a"] == 0.3
    assert members[0]["data"]["non_members"] == 100 and members[2]["data"]["non_members"] == 50
    assert "LIRA AUC" in lines[1] and "final average" in lines[3]


def test_an_overfitting_undefended_agent_is_detected_and_strong_dp_noise_hides_it(tmp_path):
    """Reduced scale of acceptance 1 and 2: 10 agents with 10 records each, 8 reference models.
    Undefended D-PSGD run long enough to memorise: the AUC interval sits above chance, and the
    calibrated attacks do at least as well as LOSS. DP-D-PSGD with σ = 32 (sound ε ≈ 0.7 at
    δ = 1e-5): every interval contains 0.5 or sits just above it. At round 149 RMIA's 310 scores
    hardly tie, though the count over 200 population records has 201 values and the noisy DP
    models round most probabilities to 0 or 1 (the count from probabilities had about a dozen
    distinct values there; what ties now are records whose ratios agree beyond float64: logit gaps in
    the thousands). At round 0 every model is the
    public x_0, so nothing can be inferred (a null check of the whole pipeline)."""
    long = DPSGD | {"rounds": 150, "eval_every": 150}
    private = long | {"kind": "dp_dpsgd", "label": "DP", "noise_multiplier": 32.0, "clip": 1.0}
    table = MIA | {"rounds": [0, 149], "non_members": 300}
    store, _ = _run(_campaign([table], defenses=(long, private)), tmp_path)
    rows = {(row["defense_label"], row["round"]): row["metrics"] for row in store.rows() if row["type"] == "membership"}
    leaky, hidden = rows["D-PSGD", 149], rows["DP", 149]
    assert leaky["loss"]["auc"] > 0.6 and leaky["loss"]["auc_ci"][0] > 0.5
    assert max(leaky["lira"]["auc"], leaky["rmia"]["auc"]) >= leaky["loss"]["auc"]
    for metrics in (hidden, rows["D-PSGD", 0], rows["DP", 0]):
        for method in METHODS:
            low, high = metrics[method]["auc_ci"]
            assert low <= 0.5 <= high or low < 0.55, (method, metrics[method]["auc"])
    for row in store.rows():
        if row["type"] == "membership" and row["round"] == 149:
            rmia = np.load(tmp_path / row["artifacts"]["scores"])["rmia"]
            assert len(np.unique(rmia)) > 0.8 * rmia.size, (row["defense_label"], len(np.unique(rmia)))


def test_a_rerun_skips_finished_membership_cells(tmp_path):
    campaign = _campaign([MIA | {"references": 2}])
    first, _ = _run(campaign, tmp_path)
    lines_before = (tmp_path / "results.jsonl").read_text().splitlines()
    _, lines = _run(campaign, tmp_path)
    assert "3 of 3 cells already finished" in lines[0] and len(lines) == 1
    assert (tmp_path / "results.jsonl").read_text().splitlines() == lines_before


def test_a_diverged_target_is_a_failed_row_and_the_campaign_goes_on(tmp_path):
    blown = DPSGD | {"label": "blown", "lr": 1e30}
    store, lines = _run(_campaign([MIA | {"references": 2}], defenses=(blown, DPSGD)), tmp_path)
    rows = [row for row in store.rows() if row["type"] == "membership"]
    assert [row["defense_label"] for row in rows] == ["blown", "blown", "D-PSGD", "D-PSGD"]
    assert rows[1]["status"].startswith("failed: ") and "non-finite" in rows[1]["status"]
    assert rows[1]["metrics"] == {name: None for name in METHODS}
    assert rows[3]["status"] == "ok"


@pytest.mark.parametrize(
    ("membership", "data", "expected"),
    [
        ({"target": "average", "rounds": [3]}, DATA, "membership[0].rounds: the 'average' target"),
        ({"threat": "global_listener"}, DATA, "membership[0].rounds: required when target = 'intercepted'"),
        ({"rounds": [1], "observer": 1}, DATA, "membership[0].observer: only the curious_neighbour"),
        ({"rounds": [1], "defense": ["nope"]}, DATA, "membership[0]: no defense table labelled 'nope'"),
        ({"rounds": [30]}, DATA, "the model view reads round 30, but 'D-PSGD' runs 30 rounds"),
        ({"rounds": [1], "threat": "eavesdropper", "links": [[3, 4]]}, DATA, "does not hear agent 0's broadcasts"),
        ({"rounds": [1], "rmia_samples": 900}, DATA, "the held-out split has 899 records"),
        ({"rounds": [1], "rmia_score": "mean"}, DATA, "unknown RMIA score 'mean'"),
        ({"rounds": [1], "references": 1}, DATA, "membership[0].references"),
        ({"rounds": [1], "target": "final"}, DATA, "unknown membership target 'final'"),
        ({"rounds": [1], "victims": [0, 0]}, DATA, "membership[0].victims: must be distinct agents"),
        ({"rounds": [1], "victims": [0, 12]}, DATA, "victim 12 is not an agent (0..9)"),
        ({"rounds": [1], "victims": [0, 5], "victim": 1}, DATA, "give victim or victims, not both"),
        ({"rounds": [1], "victims": [0, 5], "threat": "curious_neighbour", "observer": 1},
         DATA, "does not hear agent 5's broadcasts"),
    ],
)
def test_bad_membership_tables_give_one_line_and_exit_2(tmp_path, capsys, membership, data, expected):
    body = {"campaign": {"name": "t"}, "data": data, "defense": [DPSGD], "membership": [membership]}
    path = tmp_path / "c.toml"
    path.write_text(_toml(body))
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and expected in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out" / "results.jsonl").exists()


def _toml(body: dict) -> str:
    lines = []
    for section in ("campaign", "data"):
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in body[section].items()]
    for table in ("defense", "membership"):
        for entry in body[table]:
            lines.append(f"[[{table}]]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


def test_several_victims_pool_their_records_each_against_its_own_model(tmp_path):
    table = MIA | {"threat": "global_listener", "victims": [0, 3, 7], "references": 2, "rounds": [29],
                   "non_members": 90, "rmia_a": 0.5}
    campaign = _campaign([table])
    defense = build_defense(expand(campaign)[0])
    data = attacker_data(campaign.membership[0], defense.setup)
    sizes = defense.setup.local.sizes
    assert data.is_member.sum() == int(sizes[0] + sizes[3] + sizes[7])
    assert [int((data.owners[~data.is_member] == v).sum()) for v in (0, 3, 7)] == [30, 30, 30]
    store, _ = _run(campaign, tmp_path)
    (row,) = [row for row in store.rows() if row["type"] == "membership"]
    assert row["status"] == "ok" and row["victims"] == [0, 3, 7] and row["data"]["members"] == 30
    assert (row["rmia_a"], row["rmia_a_from"]) == (0.5, "set by the campaign")
    saved = np.load(tmp_path / row["artifacts"]["scores"])
    assert sorted(set(saved["owners"].tolist())) == [0, 3, 7]


def test_rmia_score_count_gives_the_papers_count(tmp_path):
    """rmia_score = "count": RMIA's scores are shares of the 200 population records (eq. 4 as is);
    the default refines them, so each candidate has its own."""
    tables = [MIA | {"label": label, "references": 2, "rounds": [29]} | extra
              for label, extra in (("count", {"rmia_score": "count"}), ("refined", {}))]
    store, _ = _run(_campaign(tables), tmp_path)
    rows = {row["label"]: row for row in store.rows() if row["type"] == "membership"}
    count, refined = (np.load(tmp_path / rows[label]["artifacts"]["scores"])["rmia"] for label in ("count", "refined"))
    np.testing.assert_allclose(count * 200, np.round(count * 200), atol=1e-9)
    assert len(np.unique(count)) < len(np.unique(refined)) == refined.size


def test_pseudo_targets_are_reference_models_with_their_own_records():
    """Reference j at the victim's position: its victim's pool records are members, pool records
    none of its agents trained on are non-members, records of its other agents are neither, and
    each record is scored with the other references that did not train on it (none left: dropped)."""
    shards = [[np.array([0, 1]), np.array([2, 3])],   # reference 0: victim 0 trained 0, 1; agent 1 trained 2, 3
              [np.array([4, 5]), np.array([0, 6])],
              [np.array([1, 4]), np.array([7, 2])]]
    pool_prob = np.arange(3 * 9, dtype=float).reshape(3, 9) / 30 + 0.01
    z_prob = np.full((3, 5), 0.5)
    first = _pseudo_targets(0, shards, pool_prob, z_prob)[0]
    kept = [0, 1, 5, 6, 7, 8]  # 2, 3: reference 0's other agent; 4: in both other references
    np.testing.assert_array_equal(first.prob, pool_prob[0, kept])
    np.testing.assert_array_equal(first.is_member, [True, True, False, False, False, False])
    np.testing.assert_array_equal(first.reference_out, [[False, True, False, False, True, True],
                                                        [True, False, True, True, False, True]])
    np.testing.assert_array_equal(first.reference_prob, pool_prob[1:][:, kept])
    assert first.population_prob.shape == (5,) and first.population_reference_prob.shape == (2, 5)


def test_losses_keep_the_margins_cross_entropy_rounds_to_zero():
    """A model sure of its records (logit margins 40 to 60) has cross-entropy losses that round to
    exactly 0 in float64, which would tie them all for LOSS; softplus(−φ) keeps them apart and
    ordered by margin, and agrees with cross-entropy where that does not round."""
    import torch.nn.functional as F

    from privaudit.attacks.membership.scores import logit_confidence
    from privaudit.campaign.membership_findings import _outputs
    from privaudit.flatmodel import FlatModel

    model = FlatModel(torch.nn.Linear(1, 2, bias=False))
    x = torch.linspace(20, 30, 11).view(-1, 1)
    y = torch.zeros(11, dtype=torch.long)
    params = torch.tensor([[1.0, -1.0]])
    losses, phi, log_prob = _outputs(model, params, x, y)
    logits = model.output(params[0], x).double()
    assert (F.cross_entropy(logits, y, reduction="none") == 0).all()
    assert len(np.unique(losses)) == 11 and (np.diff(losses[0]) < 0).all() and (losses > 0).all()
    np.testing.assert_allclose(log_prob, -losses)
    moderate = torch.tensor([[0.5, 1.5], [2.0, 0.1]], dtype=torch.float64)
    np.testing.assert_allclose(np.logaddexp(0.0, -logit_confidence(moderate, torch.tensor([1, 0]))),
                               F.cross_entropy(moderate, torch.tensor([1, 0]), reduction="none").numpy(), rtol=1e-12)
