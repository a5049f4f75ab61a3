"""Issue 39 item 2 for the shipped CNNs: the liar traps the first linear layer of the classifier head,
placed on the public data's features at the victim's model; the recovery reads the isolated records'
features exactly and rebuilds their images from them, beside the passive side on the same run. A
model with no linear layer at all is refused in one line, at `trap_weights` and at `check`."""

import json

import pytest
import torch
from torch import nn

from privaudit.attacks.active.trap import SINK_MARGIN, trap_kind, trap_weights
from privaudit.attacks.active.trial import override_trial
from privaudit.attacks.inversion.analytic import LinearLayer
from privaudit.flatmodel import FlatModel
from tests.helpers import one_line_error


def _table(model: str, batch_size: int = 8) -> dict:
    return {"kind": "dpsgd", "topology": "ring", "agents": 4, "model": model, "lr": 0.1, "batch_size": batch_size}


def test_a_cnn_heads_trap_units_each_fire_for_one_public_record_in_B(defense_of):
    setup = defense_of(_table("wb_mnist")).setup
    model, base = setup.model, setup.model.initial()
    trapped = trap_weights(model, base, setup.data.x_test, 8, seed=0)
    layer = LinearLayer.first(model)
    assert layer.path == "classifier.0" and layer.start > 0
    features = layer.inputs(model, trapped, setup.data.x_test)
    firing = ((features @ layer.weight(trapped).T + layer.bias(trapped)) > 0).double().mean(dim=0)
    assert torch.allclose(firing, torch.full_like(firing, 1 / 8), atol=0.02)
    head = layer.start + layer.units * (layer.width + 1)
    assert torch.equal(trapped[:layer.start], base[:layer.start]) and torch.equal(trapped[head:], base[head:])


def test_a_head_of_one_logit_layer_becomes_a_class_sink(defense_of):
    setup = defense_of(_table("lenet_dlg")).setup
    model, base = setup.model, setup.model.initial()
    layer = LinearLayer.first(model)
    trapped = trap_weights(model, base, setup.data.x_test, 8, seed=0)
    assert not layer.weight(trapped).any()
    assert sorted(layer.bias(trapped).tolist()) == [0.0] * (layer.units - 1) + [SINK_MARGIN]
    assert trap_kind(model, trapped) == "its logit layer replaced by a class sink"
    mlp = defense_of(_table("mlp") | {"model_options": {"hidden": [32]}}).setup.model
    assert trap_kind(mlp, trap_weights(mlp, mlp.initial(), setup.data.x_test, 8, seed=0)).endswith("trap weights")


def test_a_cnn_trap_recovers_more_records_than_the_passive_side(defense_of):
    trial = override_trial(lambda: defense_of(_table("lenet_dlg"), seed=0), victim=0, round=2, agents=[1, 3])
    active, passive = trial.active, trial.passive
    assert trial.records == 8 and active.reconstruction.ok
    assert active.recovered(20) > passive.recovered(20)
    finite = [value for value in passive.psnr if value > -float("inf")]
    assert sum(active.psnr) / len(active.psnr) > sum(finite) / len(finite)


class _ConvOnly(nn.Module):
    """Logits straight from a convolution: no linear layer to trap."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 10, kernel_size=8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).flatten(1)


def test_trap_weights_refuse_a_model_without_a_linear_layer_in_one_line():
    model = FlatModel(_ConvOnly())
    with pytest.raises(ValueError, match="trap weights need an nn.Linear layer with a bias; this model has none") \
            as raised:
        trap_weights(model, model.initial(), torch.rand(40, 1, 8, 8), 8, seed=0)
    assert "\n" not in str(raised.value)


CONV_ONLY = '''from torch import nn


def conv_only(input_shape, num_classes):
    return nn.Sequential(nn.Conv2d(input_shape[0], num_classes, kernel_size=input_shape[1:]), nn.Flatten())
'''


def test_check_refuses_a_model_without_a_linear_layer_in_one_line(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "my_conv_only.py").write_text(CONV_ONLY)
    monkeypatch.syspath_prepend(str(folder))
    defense = _table("my_conv_only:conv_only") | {"rounds": 4, "eval_every": 4}
    lines = ["[campaign]", 'name = "t"', "seeds = [0]", 'imports = ["my_conv_only"]', "[data]", 'dataset = "digits"',
             "[[defense]]", *[f"{key} = {json.dumps(value)}" for key, value in defense.items()], "[[attack]]",
             'kind = "trap_weights"', 'threat = "malicious"', "agents = [1, 3]", "rounds = [1]"]
    path = tmp_path / "active.toml"
    path.write_text("\n".join(lines) + "\n")
    err = one_line_error(capsys, ["check", str(path), "--allow-code", "--out", str(tmp_path / "out")])
    assert "trap weights need an nn.Linear layer with a bias; this model has none" in err
