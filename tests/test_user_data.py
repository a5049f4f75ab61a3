"""A user's own data (issue 37, item 2): an image folder in torchvision's ImageFolder layout, an
.npz of arrays, or a loader by import path; trained on through the same partitions and caps as the
shipped sets, refused in one line when wrong, and named in every row by its source and a content
hash that is part of the cells' identity."""

import json
import sys

import numpy as np
import pytest
from PIL import Image

from privaudit.campaign.cells import build_setup, expand
from privaudit.campaign.config import parse_campaign
from privaudit.cli import main
from privaudit.data import load_dataset
from privaudit.errors import ConfigError, DataError
from privaudit.rows import problem
from tests.helpers import one_line_error

CLASSES = ("cat", "dog", "fox", "owl")
PER_CLASS = 16


def _image_folder(root, size=(32, 32), mode="RGB"):
    """64 random images of `size` (height, width) in 4 class folders, as PNG files."""
    rng = np.random.default_rng(0)
    for name in CLASSES:
        (root / name).mkdir(parents=True)
        for index in range(PER_CLASS):
            shape = size + ((3,) if mode == "RGB" else ())
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(root / name / f"{index:02d}.png")
    return root


def _arrays(n=64, classes=4):
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, (n, 3, 8, 8), dtype=np.uint8), np.arange(n) % classes


def _campaign_file(tmp_path, data: str, imports: str = "") -> str:
    path = tmp_path / "c.toml"
    path.write_text(f'[campaign]\nname = "mine"\n{imports}\n[data]\n{data}\n[[defense]]\nkind = "dpsgd"\n'
                    'agents = 3\nrounds = 2\neval_every = 2\nmodel = "logreg"\nbatch_size = 4\n')
    return str(path)


def _training_rows(out) -> list[dict]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [row for row in rows if row.get("type") == "training"]


def test_an_image_folder_trains_and_its_rows_name_the_folder_and_its_hash(tmp_path, capsys):
    folder = _image_folder(tmp_path / "images")
    path = _campaign_file(tmp_path, f'dataset = "folder"\npath = "{folder}"')
    out = tmp_path / "out"
    assert main(["run", path, "--out", str(out), "--quiet"]) == 0
    [row] = _training_rows(out)
    content = row["config"]["data"]["content"]
    assert problem(row) is None and row.get("status") != "failed" and "avg_acc" in row["metrics"]
    assert content["source"].startswith(f"image folder {folder}: 64 images of 32×32 pixels (RGB) in 4 classes")
    assert len(content["sha256"]) == 64

    data = load_dataset("folder", path=folder)
    assert data.shape == (3, 32, 32) and data.num_classes == 4 and data.class_names == CLASSES
    assert len(data.y_train) + len(data.y_test) == 64 and data.content.sha256 == content["sha256"]
    assert -1.0 <= float(data.x_train.min()) and float(data.x_train.max()) <= 1.0

    first = (folder / "dog" / "03.png").read_bytes()
    pixels = np.asarray(Image.open(folder / "dog" / "03.png")).copy()
    pixels[0, 0] = 255 - pixels[0, 0]
    Image.fromarray(pixels).save(folder / "dog" / "03.png")
    assert (folder / "dog" / "03.png").read_bytes() != first
    capsys.readouterr()
    assert main(["run", path, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"data image folder {folder}: 64 images" in said and "changed since 1 finished cells: they run again" in said
    rows = _training_rows(out)
    assert len(rows) == 2 and rows[0]["cell"] != rows[1]["cell"]
    assert rows[1]["config"]["data"]["content"]["sha256"] != content["sha256"]
    assert main(["run", path, "--out", str(out), "--quiet"]) == 0
    assert len(_training_rows(out)) == 2


def test_an_npz_trains_through_the_same_partitions_and_caps(tmp_path):
    x, y = _arrays()
    np.savez(tmp_path / "d.npz", x_train=x, y_train=y)
    path = _campaign_file(tmp_path, f'dataset = "npz"\npath = "{tmp_path / "d.npz"}"\nmax_train = 30\n'
                          'partition = "shards"\nshards_per_agent = 2')
    out = tmp_path / "out"
    assert main(["run", path, "--out", str(out), "--quiet"]) == 0
    [row] = _training_rows(out)
    content = row["config"]["data"]["content"]
    assert content["source"].startswith(f"npz file {tmp_path / 'd.npz'}: 64 training records of shape (3, 8, 8)")
    import hashlib
    assert content["sha256"] == hashlib.sha256((tmp_path / "d.npz").read_bytes()).hexdigest()

    campaign = parse_campaign({"data": {"dataset": "npz", "path": str(tmp_path / "d.npz"), "max_train": 30,
                                        "partition": "shards"}, "defense": [{"kind": "dpsgd", "agents": 3}]})
    setup = build_setup(expand(campaign)[0])
    assert len(setup.data.y_train) == 30 and int(setup.local.sizes.sum()) == 30


def test_an_npz_test_pair_is_kept_and_feature_vectors_are_used_as_given(tmp_path):
    rng = np.random.default_rng(2)
    features = rng.normal(size=(40, 5)).astype(np.float64)
    np.savez(tmp_path / "f.npz", x_train=features[:30], y_train=np.arange(30) % 3, x_test=features[30:],
             y_test=np.arange(10) % 3)
    data = load_dataset("npz", path=tmp_path / "f.npz")
    assert data.shape == (5,) and data.num_classes == 3 and len(data.y_test) == 10
    assert np.allclose(data.x_train.numpy(), features[:30].astype(np.float32))


LOADER = '''import numpy as np
import torch


def load():
    rng = np.random.default_rng(3)
    return {"x_train": torch.tensor(rng.random((48, 1, 6, 6), dtype=np.float32)),
            "y_train": torch.arange(48) % 4}
'''


@pytest.fixture
def loader_module(tmp_path, monkeypatch):
    (tmp_path / "my_data.py").write_text(LOADER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_data"
    sys.modules.pop("my_data", None)


def test_a_loader_by_import_path_needs_consent_and_then_trains(tmp_path, capsys, loader_module):
    path = _campaign_file(tmp_path, 'dataset = "my_data:load"', 'imports = ["my_data"]')
    err = one_line_error(capsys, ["check", path, "--out", str(tmp_path / "o")])
    assert "pass --allow-code" in err and "my_data" in err
    unlisted = _campaign_file(tmp_path, 'dataset = "my_data:load"')
    err = one_line_error(capsys, ["check", unlisted, "--allow-code", "--out", str(tmp_path / "o")])
    assert "dataset 'my_data:load' imports module 'my_data'" in err and "[campaign] imports" in err

    path = _campaign_file(tmp_path, 'dataset = "my_data:load"', 'imports = ["my_data"]')
    out = tmp_path / "out"
    assert main(["run", path, "--allow-code", "--out", str(out), "--quiet"]) == 0
    [row] = _training_rows(out)
    assert row["config"]["data"]["content"]["source"].startswith("loader my_data:load: 48 training records of "
                                                                  "shape (1, 6, 6) in 4 classes")


def _config_error(data: dict) -> str:
    with pytest.raises((ConfigError, DataError)) as caught:
        campaign = parse_campaign({"data": data, "defense": [{"kind": "dpsgd", "agents": 3}]})
        build_setup(expand(campaign)[0])
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_folder_errors_are_one_line_naming_what_is_wrong(tmp_path, capsys):
    assert f"no folder {tmp_path / 'absent'}" in _config_error({"dataset": "folder", "path": str(tmp_path / "absent")})
    assert "needs path" in _config_error({"dataset": "folder"})
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.png").write_bytes(b"")
    assert "holds no class sub-folder" in _config_error({"dataset": "folder", "path": str(tmp_path / "flat")})

    folder = _image_folder(tmp_path / "broken")
    (folder / "owl" / "07.png").write_bytes(b"not a png")
    message = _config_error({"dataset": "folder", "path": str(folder)})
    assert f"cannot read image {folder / 'owl' / '07.png'}" in message

    mixed = _image_folder(tmp_path / "mixed")
    Image.fromarray(np.zeros((30, 32, 3), dtype=np.uint8)).save(mixed / "fox" / "05.png")
    message = _config_error({"dataset": "folder", "path": str(mixed)})
    assert f"image {mixed / 'fox' / '05.png'} is 30×32 pixels" in message and "size = [height, width]" in message
    data = load_dataset("folder", path=mixed, size=(16, 16))
    assert data.shape == (3, 16, 16)

    linked = _image_folder(tmp_path / "linked")
    outside = tmp_path / "secret.png"
    Image.fromarray(np.zeros((32, 32, 3), dtype=np.uint8)).save(outside)
    (linked / "cat" / "99.png").symlink_to(outside)
    message = _config_error({"dataset": "folder", "path": str(linked)})
    assert f"{linked / 'cat' / '99.png'} is a symbolic link" in message
    (linked / "cat" / "99.png").unlink()
    (linked / "elsewhere").symlink_to(tmp_path / "mixed", target_is_directory=True)
    assert f"{linked / 'elsewhere'} is a symbolic link" in _config_error({"dataset": "folder", "path": str(linked)})

    path = _campaign_file(tmp_path, f'dataset = "folder"\npath = "{folder}"')
    err = one_line_error(capsys, ["check", path, "--out", str(tmp_path / "o")])
    assert "07.png" in err


def test_grayscale_folders_give_one_channel_and_the_cap_on_bytes_holds(tmp_path, monkeypatch):
    folder = _image_folder(tmp_path / "gray", size=(10, 12), mode="L")
    data = load_dataset("folder", path=folder)
    assert data.shape == (1, 10, 12) and data.normalisation.mean == (0.5,)
    monkeypatch.setenv("PRIVAUDIT_MAX_DATA_MB", "1")
    (folder / "cat" / "big.png").write_bytes(np.random.default_rng(0).bytes(2**20 + 1))
    message = _config_error({"dataset": "folder", "path": str(folder)})
    assert "PRIVAUDIT_MAX_DATA_MB" in message


@pytest.mark.parametrize("arrays, expected", [
    ({"x_train": np.zeros((10, 3, 4, 4), np.uint8)}, "gives no y_train"),
    ({"x_train": np.zeros((10, 4, 4), np.uint8), "y_train": np.arange(10) % 2}, "add the channel axis"),
    ({"x_train": np.zeros((10, 3, 4, 4), np.uint8), "y_train": np.arange(9) % 2}, "y_train 9 labels"),
    ({"x_train": np.zeros((10, 3, 4, 4), np.uint8), "y_train": np.arange(10) - 1}, "holds the label -1"),
    ({"x_train": np.zeros((10, 3, 4, 4), np.uint8), "y_train": np.arange(10) * 0.5}, "integer class labels"),
    ({"x_train": np.zeros((10, 3, 4, 4), np.uint8), "y_train": np.zeros(10, int)}, "one class only"),
    ({"x_train": np.full((10, 3, 4, 4), 2.0), "y_train": np.arange(10) % 2}, "pixels in [0, 1]"),
    ({"x_train": np.zeros((10, 3, 4, 4), np.uint8), "y_train": np.arange(10) % 2, "x_test": np.zeros((2, 3, 4, 4))},
     "without y_test"),
    ({"x_train": np.zeros((10, 3, 4, 4), np.uint8), "y_train": np.arange(10) % 2,
      "x_test": np.zeros((2, 3, 5, 5)), "y_test": np.arange(2)}, "give both one shape"),
    ({"X_train": np.zeros((10, 3, 4, 4), np.uint8)}, "holds an array 'X_train'"),
    ({"x_train": np.array([object()] * 10), "y_train": np.arange(10) % 2}, "cannot be read"),
])
def test_npz_errors_are_one_line(tmp_path, arrays, expected):
    np.savez(tmp_path / "d.npz", **arrays)
    message = _config_error({"dataset": "npz", "path": str(tmp_path / "d.npz")})
    assert expected in message and "dataset 'npz'" in message


def test_npz_that_is_not_an_archive_and_misplaced_fields_are_refused(tmp_path):
    np.save(tmp_path / "one.npy", np.zeros(3))
    assert "not an .npz archive" in _config_error({"dataset": "npz", "path": str(tmp_path / "one.npy")})
    assert "no file" in _config_error({"dataset": "npz", "path": str(tmp_path / "none.npz")})
    assert "path applies to dataset 'folder' or 'npz' only" in _config_error({"dataset": "digits", "path": "x"})
    assert "size applies to dataset 'folder' only" in _config_error({"dataset": "npz", "path": "x", "size": 8})


def test_shipped_datasets_keep_their_cell_ids():
    """The new fields stay out of a shipped dataset's dump, so results stored before keep their cells."""
    campaign = parse_campaign({"data": {"dataset": "digits"}, "defense": [{"kind": "dpsgd", "agents": 3}]})
    assert set(expand(campaign)[0].describe()["data"]) == {
        "dataset", "data_root", "download", "test_fraction", "max_train", "samples_per_agent", "partition", "alpha",
        "min_size", "shards_per_agent"}


def test_data_edited_after_the_cells_were_planned_are_refused_not_trained_under_the_old_id(tmp_path):
    folder = _image_folder(tmp_path / "images")
    campaign = parse_campaign({"data": {"dataset": "folder", "path": str(folder)},
                               "defense": [{"kind": "dpsgd", "agents": 3}]})
    [cell] = expand(campaign)
    assert build_setup(cell).data.content.sha256 == cell.describe()["data"]["content"]["sha256"]
    (folder / "cat" / "00.png").write_bytes((folder / "cat" / "01.png").read_bytes())
    with pytest.raises(ConfigError, match="changed since the campaign was planned"):
        build_setup(cell)
    assert expand(campaign)[0].id != cell.id


def test_a_row_with_a_malformed_content_hash_is_named_not_read():
    row = {"type": "training", "cell": "c", "label": "l", "title": "t", "seed": 0, "metrics": {}, "claim": None,
           "history": [], "messages": {}, "config": {"run": {"rounds": 1, "topology": "ring", "agents": 2},
                                                     "data": {"dataset": "folder",
                                                              "content": {"source": "image folder x", "sha256": 7}}}}
    assert "config.data.content.sha256" in problem(row)
    row["config"]["data"]["content"]["sha256"] = "ab" * 32
    assert problem(row) is None
