"""`[[attack]]` tables in campaigns: cells per round and seed sharing one training run, scored
rows with images, failures recorded without stopping the campaign, resumption, one-line errors."""

import json

import pytest
import torch

from privaudit.attacks import views
from privaudit.attacks.extraction import Target
from privaudit.attacks.views import EXTRACTORS
from privaudit.campaign.cells import expand, expand_attacks
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.cli import main

DPSGD = {"kind": "dpsgd", "label": "D-PSGD", "agents": 4, "rounds": 4, "eval_every": 2, "batch_size": 1, "lr": 0.1}
DLG = {"kind": "dlg", "label": "DLG", "rounds": [0, 2], "evaluations": 40, "trace_every": 10}


def _campaign(attacks, defenses=(DPSGD,), seeds=(0,)):
    return parse_campaign({"campaign": {"name": "t", "seeds": list(seeds)}, "data": {"dataset": "digits"},
                           "defense": list(defenses), "attack": list(attacks)})


def _run(campaign, out, **kwargs):
    lines = []
    store = run_campaign(campaign, "# test", out, progress=False, say=lines.append, **kwargs)
    return store, lines


def test_attack_cells_expand_per_run_seed_and_round_with_stable_ids():
    campaign = _campaign([DLG], seeds=(0, 1))
    cells = expand(campaign)
    attacks = expand_attacks(campaign, cells)
    assert [(a.training.seed, a.round) for a in attacks] == [(0, 0), (0, 2), (1, 0), (1, 2)]
    assert len({a.id for a in attacks}) == 4
    assert attacks[0].group == attacks[2].group != attacks[1].group
    assert [a.id for a in expand_attacks(campaign, expand(campaign))] == [a.id for a in attacks]


def test_one_training_run_feeds_every_attack_cell_and_rows_are_scored(tmp_path):
    store, lines = _run(_campaign([DLG]), tmp_path)
    rows = store.rows()
    assert [row["type"] for row in rows] == ["training", "inversion", "inversion"]
    training, first, second = rows
    assert first["training"] == second["training"] == training["cell"]
    assert (first["round"], second["round"]) == (0, 2)
    for row in (first, second):
        assert row["status"] == "ok" and row["target_kind"] == "gradient"
        assert set(row["metrics"]) == {"mse", "psnr", "ssim", "lpips", "label_acc"}
        assert row["metrics"]["psnr"] > 0 and 0 <= row["metrics"]["mse"] <= 1
        assert row["baseline"]["psnr"] > 0
        assert len(row["floor"]["psnr"]) == len(row["floor"]["best_ssim"]) == row["floor"]["draws"] == 199
        assert row["leak"]["confidence"] == 0.99 and isinstance(row["leak"]["leak"], bool) and row["leak"]["reason"]
        assert [point["iteration"] for point in row["trace"]] == [10, 20, 30, 40]
        for name in ("original", "reconstruction", "tensors"):
            assert (tmp_path / row["artifacts"][name]).is_file()
        saved = torch.load(tmp_path / row["artifacts"]["tensors"], weights_only=False)
        assert saved["original"].shape == saved["reconstruction"].shape == (1, 1, 8, 8)
    assert len(lines) == 3 and "PSNR" in lines[1] and "noise floor" in lines[1] and "at 99 %" in lines[1]


def test_the_scored_original_is_the_batch_the_victim_really_used(tmp_path):
    """The ground-truth tap's rows give the image whose gradient crossed the wire: with the
    undefended D-PSGD state difference, the gradient of that image at the broadcast point equals
    the extracted target."""
    from privaudit.campaign.cells import build_defense
    from privaudit.campaign.inversion_findings import plan_attack
    from privaudit.campaign.jobs import run_cell
    from privaudit.grads import batch_grad

    campaign = _campaign([DLG])
    cell = expand(campaign)[0]
    attack = expand_attacks(campaign, [cell])[1]
    defense = build_defense(cell)
    tap, truth = plan_attack(attack, defense)
    _, output = run_cell(cell, defense=defense, taps=[tap, truth])
    heard, known = output.transcripts
    target = EXTRACTORS["dpsgd", "state_difference"].extract(heard, 0, 2)
    (rows,) = [d.value for d in known.disclosures if d.name == "batch"]
    data = defense.setup.data
    gradient = batch_grad(defense.setup.model, target.point, data.x_train[rows], data.y_train[rows])
    assert torch.allclose(target.gradient.float(), gradient, rtol=1e-3, atol=1e-5)
    assert known.messages == [] and known.threat_model == "ground_truth"


def test_a_diverging_attack_is_a_failed_row_and_the_campaign_goes_on(tmp_path, monkeypatch):
    """A target whose squared gradient distance overflows makes DLG's loss infinite at its
    first evaluation; the row says so and the next cell still runs."""
    entry = EXTRACTORS["dpsgd", "state_difference"]

    def huge(transcript, victim, round):
        found = entry.extract(transcript, victim, round)
        scale = 1e200 if round == 0 else 1.0
        return Target(found.gradient * scale, found.point, victim, round, kind=found.kind)

    monkeypatch.setitem(views.EXTRACTORS, ("dpsgd", "state_difference"),
                        type(entry)(**{**entry.__dict__, "extract": huge}))
    store, _ = _run(_campaign([DLG]), tmp_path)
    failed, fine = store.rows()[1:]
    assert failed["status"].startswith("failed: diverged: loss is inf")
    assert failed["metrics"]["psnr"] is None and "reconstruction" not in failed["artifacts"]
    assert fine["status"] == "ok"


def test_an_extraction_that_lacks_messages_is_a_failed_row(tmp_path, monkeypatch):
    entry = EXTRACTORS["dpsgd", "state_difference"]

    def missing(transcript, victim, round):
        raise KeyError("global_listener transcript lacks the 'model' message from agent 3 at round 0")

    monkeypatch.setitem(views.EXTRACTORS, ("dpsgd", "state_difference"),
                        type(entry)(**{**entry.__dict__, "extract": missing}))
    store, _ = _run(_campaign([{**DLG, "rounds": [0]}]), tmp_path)
    assert store.rows()[1]["status"] == ("failed: extraction: global_listener transcript lacks the 'model' "
                                         "message from agent 3 at round 0")


def test_resuming_runs_only_the_missing_attack_cells(tmp_path):
    campaign = _campaign([DLG])
    store, _ = _run(campaign, tmp_path)
    first = store.rows()
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    (tmp_path / "results.jsonl").write_text("\n".join(lines[:2]) + "\n")
    _, said = _run(campaign, tmp_path)
    assert said[0] == f"2 of 3 cells already finished in {tmp_path / 'results.jsonl'}; skipping them"
    rows = store.rows()
    assert [row["type"] for row in rows] == ["training", "inversion", "inversion"]
    assert rows[2]["metrics"] == first[2]["metrics"]
    _, said = _run(campaign, tmp_path)
    assert said == [f"3 of 3 cells already finished in {tmp_path / 'results.jsonl'}; skipping them"]


@pytest.mark.parametrize(
    "attack, expected",
    [
        ({"kind": "dgl", "rounds": [0]}, "attack[0].kind: unknown attack 'dgl' (choose from dlg, idlg, ig, batch, analytic, trap_weights)"),
        ({"kind": "dlg", "rounds": [0], "evals": 3}, "attack[0]: unknown parameter 'evals' for attack 'dlg'"),
        ({"kind": "dlg", "rounds": [0], "defense": ["DPSGD"]}, "attack[0]: no defense table labelled 'DPSGD'"),
        ({"kind": "dlg", "rounds": [0], "scenario": "momentum"},
         "attack[0]: no defense table has the scenario 'momentum'"),
        ({"kind": "dlg", "rounds": [3]}, "the 'state_difference' extractor reads round 4, but 'D-PSGD' runs 4 rounds"),
        ({"kind": "dlg", "rounds": [0], "threat": "eavesdropper", "links": [[1, 5]]},
         "eavesdropper link (1, 5) is not an edge"),
        ({"kind": "dlg", "rounds": [0], "threat": "curious_neighbour", "links": [[0, 1]]},
         "attack[0].links: only the eavesdropper threat has links"),
        ({"kind": "dlg", "rounds": [0], "victim": 9}, "victim 9 is not an agent (0..3)"),
        ({"kind": "dlg"}, "attack[0].rounds: required field is missing"),
    ],
)
def test_bad_attack_tables_give_one_line_and_exit_2(tmp_path, capsys, attack, expected):
    body = {"campaign": {"name": "t"}, "data": {"dataset": "digits"}, "defense": [DPSGD], "attack": [attack]}
    path = tmp_path / "c.toml"
    path.write_text(_toml(body))
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and expected in err and len(err.splitlines()) == 1


def _toml(body: dict) -> str:
    """A small TOML writer for the tables these tests use (strings, numbers, lists)."""
    lines = []
    for name, value in body.items():
        tables = value if isinstance(value, list) else [value]
        for table in tables:
            lines.append(f"[[{name}]]" if isinstance(value, list) else f"[{name}]")
            lines += [f"{key} = {json.dumps(item)}" for key, item in table.items()]
    return "\n".join(lines) + "\n"



def test_an_empty_poisson_batch_is_a_failed_row(tmp_path):
    """DP-D-PSGD samples each record with probability B/|D_i|: at B = 1 the victim's batch is
    often empty, and there is then nothing to rebuild or to score."""
    table = {**DPSGD, "kind": "dp_dpsgd", "label": "DP", "noise_multiplier": 1.0, "rounds": 12}
    store, _ = _run(_campaign([{**DLG, "rounds": list(range(10))}], defenses=(table,)), tmp_path)
    rows = store.rows()[1:]
    empty = [row for row in rows if row["truth_size"] == 0]
    assert empty, "with q = 1/|D_i| some round must have drawn no record"
    assert all(row["status"].startswith("failed: the victim's batch at round") for row in empty)
    assert all(row["metrics"]["psnr"] is None for row in empty)
