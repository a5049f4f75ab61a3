"""Models of the user's own (issue 37, item 1): a factory named by import path, with the same opt-in
as a defense's; torchvision's classification architectures by name, BatchNorm replaced by GroupNorm
and the row saying so; a user's BatchNorm refused at `check` in one line naming the layer; the
factory's source part of its cells' identity."""

import json
import pickle
import sys

import pytest

from privaudit.campaign.audit_findings import game_for_table
from privaudit.campaign.cells import build_setup, expand
from privaudit.campaign.config import parse_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError
from privaudit.models import build_model, sample_mixing_layers
from tests.helpers import one_line_error

MODELS_MODULE = '''"""A user's model factories, outside privaudit."""
from collections import OrderedDict

import torch
from torch import nn


def build(input_shape, num_classes, *, hidden: int = 16):
    """A small MLP: the factory a campaign names as my_models_NAME:build."""
    width = 1
    for size in input_shape:
        width *= size
    return nn.Sequential(nn.Flatten(), nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


def batch_norm(input_shape, num_classes):
    channels = input_shape[0]
    return nn.Sequential(OrderedDict(conv=nn.Conv2d(channels, 4, 3, padding=1), bn=nn.BatchNorm2d(4),
                                     flatten=nn.Flatten(), head=nn.Linear(4 * input_shape[1] * input_shape[2],
                                                                          num_classes)))


def broken(input_shape, num_classes):
    raise RuntimeError("no such layer")


def not_a_module(input_shape, num_classes):
    return "a string"


def wrong_head(input_shape, num_classes):
    return build(input_shape, num_classes + 1)


class Reads(nn.Module):
    """Reads a value of its input (`.item()`): fine on a batch, impossible under vmap, and on meta."""

    def __init__(self, input_shape, num_classes):
        super().__init__()
        self.linear = nn.Linear(input_shape[0] * input_shape[1] * input_shape[2], num_classes)

    def forward(self, x):
        scale = 1.0 + 0.0 * x.sum().item()
        return self.linear(x.flatten(1)) * scale
'''


def _module(tmp_path, monkeypatch, name: str) -> str:
    """Write the model module as `name` in a folder on sys.path; its name, fresh per test."""
    folder = tmp_path / "mine"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(MODELS_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    return name


def _campaign(tmp_path, model: str, imports: list[str], options: str = "", rounds: int = 2,
              agents: int = 3) -> str:
    path = tmp_path / "campaign.toml"
    path.write_text(f'''[campaign]
name = "mine"
imports = {json.dumps(imports)}

[data]
dataset = "digits"
max_train = 60

[[defense]]
kind = "dp_dpsgd"
label = "DP-D-PSGD"
agents = {agents}
model = "{model}"
{options}
rounds = {rounds}
eval_every = 1
lr = 0.5
batch_size = 4
clip = 1.0
noise_multiplier = 1.0
delta = 1e-5
''')
    return str(path)


def _rows(out) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_factory_named_by_import_path_trains_dp_d_psgd(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch, "my_models_train")
    path, out = _campaign(tmp_path, f"{name}:build", [name], "model_options = { hidden = 8 }"), tmp_path / "out"
    assert main(["run", path, "--allow-code", "--out", str(out), "--quiet"]) == 0
    [row] = _rows(out)
    assert row["type"] == "training" and "error" not in row and len(row["history"]) == 3
    assert row["config"]["run"]["model"] == f"{name}:build"
    assert row["config"]["run"]["model_options"] == {"hidden": 8}
    assert set(row["config"]["code"]) == {name}
    assert "model_note" not in row


def test_without_consent_a_model_path_is_a_one_line_error_naming_the_flag(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch, "my_models_consent")
    listed = _campaign(tmp_path, f"{name}:build", [name])
    err = one_line_error(capsys, ["check", listed, "--out", str(tmp_path / "out")])
    assert "pass --allow-code" in err and name in err
    unlisted = _campaign(tmp_path, f"{name}:build", [])
    err = one_line_error(capsys, ["check", unlisted, "--allow-code", "--out", str(tmp_path / "out")])
    assert f"defense[0].model: model '{name}:build' imports module '{name}'" in err
    assert f"[campaign] imports = ['{name}']" in err
    with pytest.raises(ConfigError, match="allow-code"):
        parse_campaign({"campaign": {"imports": [name]}, "defense": [{"kind": "dp_dpsgd", "model": f"{name}:build"}]})


def test_a_batch_norm_model_is_refused_at_check_naming_the_layer(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch, "my_models_bn")
    path = _campaign(tmp_path, f"{name}:batch_norm", [name])
    err = one_line_error(capsys, ["check", path, "--allow-code", "--out", str(tmp_path / "out")])
    assert f"model '{name}:batch_norm': layer 'bn' is BatchNorm2d" in err
    assert "per-sample gradients" in err and "does not mix samples" in err and "GroupNorm" in err


@pytest.mark.parametrize("factory, said", [
    ("broken", "model factory '{name}:broken' raised RuntimeError: no such layer"),
    ("not_a_module", "model factory '{name}:not_a_module' returned a str, not a torch.nn.Module"),
    ("wrong_head", "model '{name}:wrong_head' maps a batch of shape [2, 1, 8, 8] to [2, 11]; a classifier of 10 "
                   "classes gives logits [2, 10]"),
    ("Reads", "model '{name}:Reads': per-sample gradients (torch.func.vmap over torch.func.grad) fail on it: "),
    ("no_such_factory", "module '{name}' has no attribute 'no_such_factory'"),
])
def test_a_factory_that_fails_is_one_line_at_check_naming_it(tmp_path, monkeypatch, capsys, factory, said):
    name = _module(tmp_path, monkeypatch, f"my_models_{factory.lower()}")
    path = _campaign(tmp_path, f"{name}:{factory}", [name])
    err = one_line_error(capsys, ["check", path, "--allow-code", "--out", str(tmp_path / "out")])
    assert said.format(name=name) in err


def test_model_options_are_checked_against_the_factory_signature(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch, "my_models_options")
    unknown = _campaign(tmp_path, f"{name}:build", [name], "model_options = { width = 3 }")
    err = one_line_error(capsys, ["check", unknown, "--allow-code", "--out", str(tmp_path / "out")])
    assert f"unknown option(s) width for model '{name}:build' (accepted: hidden)" in err
    wrong_type = _campaign(tmp_path, f"{name}:build", [name], "model_options = { hidden = 1.5 }")
    err = one_line_error(capsys, ["check", wrong_type, "--allow-code", "--out", str(tmp_path / "out")])
    assert f"model '{name}:build' option hidden: Input should be a valid integer" in err


def test_editing_the_model_module_reruns_its_cells(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch, "my_models_edited")
    path, out = _campaign(tmp_path, f"{name}:build", [name], rounds=1), tmp_path / "out"
    run = ["run", path, "--allow-code", "--out", str(out), "--quiet"]
    assert main(run) == 0
    source = tmp_path / "mine" / f"{name}.py"
    source.write_text(source.read_text().replace("hidden: int = 16", "hidden: int = 120"))
    capsys.readouterr()
    assert main(["check", path, "--allow-code", "--out", str(out)]) == 0
    checked = capsys.readouterr()
    assert f"plugin module {name} changed since 1 finished cells: they run again" in checked.err
    assert main(run) == 0
    first, second = _rows(out)
    assert first["cell"] != second["cell"] and first["config"]["code"] != second["config"]["code"]


def test_a_grid_varies_the_model_over_a_factory_with_the_tables_consent(tmp_path, monkeypatch):
    name = _module(tmp_path, monkeypatch, "my_models_grid")
    table = {"kind": "dp_dpsgd", "agents": 3, "grid": {"model": [f"{name}:build", "mlp"]}}
    cells = expand(parse_campaign({"campaign": {"imports": [name]}, "defense": [table]}, allow_code=True))
    assert [cell.run.model for cell in cells] == [f"{name}:build", "mlp"]
    assert [set(dict(cell.code)) for cell in cells] == [{name}, set()]
    with pytest.raises(ConfigError, match="allow-code"):
        expand(parse_campaign({"campaign": {"imports": [name]}, "defense": [table]}))


def test_a_worker_that_never_imported_the_factory_imports_it_from_the_path(tmp_path, monkeypatch):
    """A worker process unpickles cells whose model module it has not imported: building the
    set-up imports it from the path the table names (the table was validated with consent)."""
    name = _module(tmp_path, monkeypatch, "my_models_worker")
    table = {"kind": "dp_dpsgd", "agents": 3, "model": f"{name}:build", "model_options": {"hidden": 5}}
    cell = expand(parse_campaign({"campaign": {"imports": [name]}, "data": {"max_train": 60},
                                  "defense": [table]}, allow_code=True))[0]
    shipped = pickle.dumps(cell)
    monkeypatch.delitem(sys.modules, name)
    setup = build_setup(pickle.loads(shipped))
    assert name in sys.modules and setup.model.module[1].out_features == 5


def test_a_canary_game_from_python_imports_the_model_the_table_names(tmp_path, monkeypatch):
    """`game_for_table` (the Python API's canary audit of one table) names the model's module in the
    campaign it builds, as it names a defense's: the caller names it in its own code."""
    name = _module(tmp_path, monkeypatch, "my_models_game")
    table = {"kind": "dp_dpsgd", "agents": 3, "rounds": 2, "batch_size": 4, "model": f"{name}:build",
             "model_options": {"hidden": 6}}
    game = game_for_table(table, {"max_train": 60})
    assert game.setup.model_name == f"{name}:build" and game.setup.model.module[1].out_features == 6


def test_a_shipped_defense_on_a_shipped_model_hashes_no_code():
    campaign = parse_campaign({"defense": [{"kind": "dp_dpsgd", "model": "logreg", "agents": 3}]})
    assert expand(campaign)[0].code == ()


def test_an_entry_point_names_a_model_without_consent(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch, "my_models_entry")
    info = tmp_path / "site" / "mymodels-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mymodels\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[privaudit.models]\ntiny_mlp = {name}:build\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    path = _campaign(tmp_path, "tiny_mlp", [])
    assert main(["check", path, "--out", str(tmp_path / "out")]) == 0
    campaign = parse_campaign({"defense": [{"kind": "dp_dpsgd", "model": "tiny_mlp", "agents": 3}]})
    assert dict(expand(campaign)[0].code).keys() == {name}


def test_an_unknown_model_names_the_three_ways_to_give_one(tmp_path, capsys):
    err = one_line_error(capsys, ["check", _campaign(tmp_path, "resnet19", []), "--out", str(tmp_path / "out")])
    assert "unknown model 'resnet19' (choose from lenet_dlg" in err and "torchvision:<architecture>" in err
    err = one_line_error(capsys, ["check", _campaign(tmp_path, "torchvision:resnet19", []),
                                  "--out", str(tmp_path / "out")])
    assert "unknown torchvision architecture 'resnet19' (choose from alexnet" in err


def test_a_torchvision_architecture_has_group_norm_and_says_so():
    model = build_model("torchvision:resnet18", (3, 32, 32), 10)
    assert sample_mixing_layers(model) == []
    assert "its 20 BatchNorm layers replaced by GroupNorm" in model.model_note
    with pytest.raises(ValueError, match="option weights: privaudit sets it"):
        build_model("torchvision:resnet18", (3, 32, 32), 10, weights="DEFAULT")


def test_a_torchvision_architecture_trains_a_round_and_the_row_says_what_changed(tmp_path, capsys):
    path, out = _campaign(tmp_path, "torchvision:shufflenet_v2_x0_5", [], rounds=1), tmp_path / "out"
    assert main(["check", path, "--out", str(out)]) == 0
    said = capsys.readouterr().err
    assert "privaudit: warning: DP-D-PSGD: model 'torchvision:shufflenet_v2_x0_5' is trained as changed: torchvision's shufflenet_v2_x0_5" in said
    assert main(["run", path, "--out", str(out), "--quiet"]) == 0
    [row] = _rows(out)
    assert "error" not in row and "code" not in row["config"]
    assert row["model_note"].startswith("torchvision's shufflenet_v2_x0_5 without pretrained weights; its ")
    assert "BatchNorm layers replaced by GroupNorm" in row["model_note"]
    assert "its 1-channel input repeated on 3 channels" in row["model_note"]
