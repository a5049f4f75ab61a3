"""Issue 37, acceptance 1: a user's own model module and image folder, audited end to end.

A folder of 64 random 32×32 images in 4 classes (torchvision's ImageFolder layout) and a model
module outside the package, written by the test; one campaign trains DP-D-PSGD with that model on
that folder, inverts a victim's update (and, beside it, an undefended D-PSGD's with the same
factory unpooled, where the inversion must find a leak), runs LOSS / LiRA / RMIA
membership inference and a one-run canary audit, and renders the report. A model with BatchNorm
is refused at `check` in one line naming the layer. The preset `privaudit/presets/your_model.toml`
is this campaign at the size of a ResNet-18.
"""

import json

import numpy as np
import pytest
from PIL import Image

from privaudit.cli import main
from tests.helpers import one_line_error

NETS = '''"""A user's model factories, outside privaudit."""
from torch import nn


def small_cnn(input_shape, num_classes, *, width: int = 4, pool: int = 8):
    """Convolution, group norm, pooling, a linear head: a few hundred parameters at pool 8."""
    channels, height, wide = input_shape
    return nn.Sequential(nn.Conv2d(channels, width, 3, padding=1), nn.GroupNorm(2, width), nn.Tanh(),
                         nn.AvgPool2d(pool), nn.Flatten(),
                         nn.Linear(width * (height // pool) * (wide // pool), num_classes))


def with_batch_norm(input_shape, num_classes):
    channels, height, wide = input_shape
    return nn.Sequential(nn.Conv2d(channels, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Flatten(),
                         nn.Linear(4 * height * wide, num_classes))
'''

CAMPAIGN = '''[campaign]
name = "your-model"
seeds = [0]
imports = ["{module}"]

[data]
dataset = "folder"
path = "{folder}"
test_fraction = 0.5

[[defense]]
kind = "dp_dpsgd"
label = "DP-D-PSGD"
topology = "ring"
agents = 4
model = "{module}:{factory}"
rounds = 4
eval_every = 2
lr = 0.1
batch_size = 4
clip = 1.0
noise_multiplier = 1.0

[[defense]]
kind = "dpsgd"
label = "D-PSGD"
topology = "ring"
agents = 4
model = "{module}:{factory}"
model_options = {{ pool = 1 }}
rounds = 2
eval_every = 2
lr = 0.1
batch_size = 1

[[attack]]
kind = "ig"
label = "IG"
defense = ["DP-D-PSGD"]
threat = "global_listener"
victim = 0
rounds = [1]
iterations = 100

[[attack]]
kind = "idlg"
label = "iDLG"
defense = ["D-PSGD"]
threat = "global_listener"
victim = 0
rounds = [0]

[[membership]]
label = "MIA"
defense = ["DP-D-PSGD"]
threat = "global_listener"
victim = 0
references = 2
non_members = 8
rmia_samples = 8
rounds = [3]

[[audit]]
kind = "canary"
label = "one-run canary"
defense = ["DP-D-PSGD"]
method = "one_run"
canaries = 20
guesses = 5
'''


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """The image folder and the model module (a name of its own, so no other test's import of a
    same-named module is reused), both outside the package."""
    rng = np.random.default_rng(0)
    for name in ("ant", "bee", "cat", "dog"):
        folder = tmp_path / "images" / name
        folder.mkdir(parents=True)
        for index in range(16):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{index:02d}.png")
    code = tmp_path / "code"
    code.mkdir()
    (code / "your_nets.py").write_text(NETS)
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.delitem(__import__("sys").modules, "your_nets", raising=False)
    monkeypatch.setenv("PRIVAUDIT_PROGRESS_SECONDS", "3600")  # no progress line beside a one-line error
    return tmp_path


def _campaign(workspace, factory: str) -> str:
    path = workspace / f"{factory}.toml"
    path.write_text(CAMPAIGN.format(module="your_nets", factory=factory, folder=workspace / "images"))
    return str(path)


def test_a_users_model_on_a_users_image_folder_is_trained_attacked_audited_and_reported(workspace):
    out = workspace / "results"
    assert main(["run", _campaign(workspace, "small_cnn"), "--allow-code", "--out", str(out), "--quiet"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_type = {}
    for row in rows:
        by_type.setdefault(row["type"], []).append(row)
    assert sorted(by_type) == ["audit", "inversion", "membership", "training"]

    for training in by_type["training"]:
        assert training["config"]["run"]["model"] == "your_nets:small_cnn"
        content = training["config"]["data"]["content"]
        assert content["source"].startswith(f"image folder {workspace / 'images'}: 64 images of 32×32 pixels (RGB) "
                                            "in 4 classes")
        assert len(content["sha256"]) == 64
    private = next(row for row in by_type["training"] if row["label"] == "DP-D-PSGD")
    assert private["claim"]["eps_claimed"] > 0 and private["claim"]["eps_sound"] > 0

    inversion = {row["defense_label"]: row for row in by_type["inversion"]}
    assert set(inversion) == {"DP-D-PSGD", "D-PSGD"}
    undefended = inversion["D-PSGD"]
    assert undefended["status"] == "ok" and undefended["leak"]["leak"], undefended["leak"]["reason"]
    assert undefended["metrics"]["psnr"] > 40 > max(undefended["floor"]["psnr"])
    assert inversion["DP-D-PSGD"]["status"] == "ok"

    membership = by_type["membership"]
    assert {row["status"] for row in membership} == {"ok"}
    assert all(0.0 <= row["metrics"][attack]["auc"] <= 1.0 for row in membership for attack in ("loss", "lira", "rmia"))

    (audit,) = by_type["audit"]
    assert audit["status"] == "ok" and audit["method"] == "one_run"
    assert 0.0 <= audit["eps_lb"] <= audit["eps_sound"]

    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    for section in ("Reconstruction attacks", "Membership inference", "Empirical audits", "your_nets:small_cnn",
                    "image folder"):
        assert section in page


def test_a_users_batch_norm_model_is_refused_at_check_in_one_line(workspace, capsys):
    message = one_line_error(capsys, ["check", _campaign(workspace, "with_batch_norm"), "--allow-code"])
    assert "model 'your_nets:with_batch_norm': layer '1' is BatchNorm2d" in message


def test_gradient_canaries_too_many_for_the_memory_limit_are_refused_at_check_in_one_line(workspace, capsys,
                                                                                          monkeypatch):
    """A one-run audit's gradient canaries are directions as long as the model: 200 of them on a
    ResNet-18 take 18 GB for their float64 draws alone, which killed `check`; the memory limit refuses them
    first (here a 1 MB limit against 200 canaries of the small model's 380 parameters; the
    campaign's attacks, which need more, are left out)."""
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", "1")
    path = _campaign(workspace, "small_cnn")
    text = open(path).read()
    text = text[:text.index("[[attack]]")] + text[text.index("[[audit]]"):]
    open(path, "w").write(text.replace("canaries = 20\n", "canaries = 200\n"))
    message = one_line_error(capsys, ["check", path, "--allow-code"])
    assert "200 gradient canaries' directions (200 × 380 parameters × 28 bytes" in message
    assert "record or outlier canaries" in message
