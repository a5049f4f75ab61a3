"""`privaudit weights lpips`: a backbone file the user names is checked and installed where scoring
finds it, and LPIPS is then scored and says which backbone it used; the download is fetched once and
checked, and offline it fails in one line. Every test works in its own weights folder
(PRIVAUDIT_WEIGHTS) and torch hub folder with a stand-in backbone of random tensors it makes; any
real download fails the test."""

import pickle
import socket
import urllib.error
from pathlib import Path

import pytest
import torch

from privaudit import metrics, weights
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.run import run_campaign
from privaudit.cli import main
from privaudit.data import Normalisation
from privaudit.metrics import score_reconstruction
from privaudit.reports.html import render_report
from tests.helpers import one_line_error

HALF = Normalisation(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
PUBLISHED = "alexnet-owt-7be5be79.pth"


@pytest.fixture(autouse=True)
def folder(tmp_path, monkeypatch):
    """An empty weights folder of this test's own; torch hub's folder moved too, and every way torch
    could download made to fail the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"download attempted: {args}")

    import torchvision.models._api as tv_api

    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(tv_api, "load_state_dict_from_url", refuse)
    monkeypatch.setenv(weights.VARIABLE, str(tmp_path / "weights"))
    metrics._lpips_network.cache_clear()
    yield tmp_path / "weights"
    metrics._lpips_network.cache_clear()


def _stand_in(seed: int = 0) -> dict[str, torch.Tensor]:
    """AlexNet's feature tensors drawn at random (He-scaled, so activations stay finite): the shapes
    lpips' AlexNet takes, none of ImageNet's values."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in weights.ALEXNET_FEATURES.items():
        fan_in = int(torch.tensor(shape[1:]).prod()) if len(shape) > 1 else 1
        state[key] = torch.randn(shape, generator=generator) * (2.0 / fan_in) ** 0.5 if len(shape) > 1 \
            else torch.zeros(shape)
    return state


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    """A 10 MB backbone file of random AlexNet feature tensors, made once for the module."""
    path = tmp_path_factory.mktemp("stand_in") / "my_alexnet.pth"
    torch.save(_stand_in(), path)
    return path


def _images(batch=2, side=32, seed=0):
    return torch.rand((batch, 3, side, side), generator=torch.Generator().manual_seed(seed))


def _save(tmp_path: Path, name: str, state) -> Path:
    path = tmp_path / name
    torch.save(state, path)
    return path


def _publish(monkeypatch, path: Path) -> str:
    """Make `path`'s hash the published one: the published URL names its prefix, as torch hub's do."""
    name = f"alexnet-owt-{weights.sha256(path)[:8]}.pth"
    monkeypatch.setattr(weights, "published_url", lambda: f"https://download.invalid/models/{name}")
    return name


def test_the_shapes_checked_are_torchvisions_alexnet_features():
    from torchvision.models import AlexNet

    features = AlexNet().features.state_dict()
    assert weights.ALEXNET_FEATURES == {f"features.{key}": tuple(value.shape) for key, value in features.items()}


def test_weights_lpips_from_a_file_makes_lpips_scored_and_names_the_backbone(folder, stand_in, capsys):
    assert main(["weights", "lpips", "--from", str(stand_in)]) == 0
    printed = capsys.readouterr().out
    installed = folder / weights.USER_FILE
    assert printed.startswith(f"installed: {installed} (sha256 {weights.sha256(stand_in)[:8]}…)")
    assert "not torchvision's published" in printed
    assert installed.read_bytes() == stand_in.read_bytes()

    x = HALF.normalise(_images())
    same = score_reconstruction(x.clone(), x, HALF)
    different = score_reconstruction(HALF.normalise(_images(seed=5)), x, HALF)
    assert same.lpips == pytest.approx(0.0, abs=1e-6)
    assert different.lpips > 0.0 and len(different.per_image["lpips"]) == 2
    digest = weights.sha256(stand_in)
    assert different.lpips_status == (f"ok (backbone: user file sha256 {digest[:8]}…, not torchvision's published "
                                      "ImageNet weights: not the published LPIPS)")
    assert different.lpips_backbone == {"published": False, "sha256": digest, "file": weights.USER_FILE}
    assert different.summary()["lpips_backbone"] == different.lpips_backbone


def test_without_weights_the_score_keeps_its_reason(folder):
    x = HALF.normalise(_images())
    scores = score_reconstruction(x, x, HALF)
    assert scores.lpips is None and scores.lpips_backbone is None
    assert scores.lpips_status == (f"unavailable: AlexNet ImageNet weights not in {folder / PUBLISHED} (`privaudit "
                                   "weights lpips` fetches them once, or installs a file you name with --from FILE)")


def test_the_listing_says_where_and_what_is_installed(folder, stand_in, capsys):
    assert main(["weights"]) == 0
    before = capsys.readouterr().out
    assert f"folder: {folder} ({weights.VARIABLE})" in before
    assert all(line.split()[1] == "absent" for line in before.splitlines()[1:3])
    assert "LPIPS is reported unavailable until one is installed" in before
    main(["weights", "lpips", "--from", str(stand_in)])
    capsys.readouterr()
    assert main(["weights"]) == 0
    after = capsys.readouterr().out.splitlines()
    assert after[2].split()[:3] == [weights.USER_FILE, "used", "by"] and len(after) == 3


class _RunsCode:
    """A pickle that would create a file when unpickled by anything but a weights-only load."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    missing = _stand_in()
    del missing["features.6.weight"], missing["features.10.bias"]
    wrong = _stand_in() | {"features.0.weight": torch.zeros(64, 3, 7, 7)}
    code = tmp_path / "code.pth"
    with open(code, "wb") as stream:
        pickle.dump({"features.0.weight": _RunsCode(tmp_path / "ran")}, stream, protocol=2)
    (tmp_path / "noise.pth").write_bytes(b"\x00not a torch file" * 100)
    return {
        "missing": (_save(tmp_path, "missing.pth", missing), "lacks features.6.weight, features.10.bias (AlexNet's"),
        "shape": (_save(tmp_path, "shape.pth", wrong),
                  "features.0.weight has shape (64, 3, 7, 7), AlexNet's is (64, 3, 11, 11)"),
        "nan": (_save(tmp_path, "nan.pth", _stand_in() | {"features.3.bias": torch.full((192,), float("nan"))}),
                "features.3.bias holds values that are not finite"),
        "tensor": (_save(tmp_path, "tensor.pth", torch.zeros(3)), "holds Tensor, not a state dict"),
        "code": (code, "is not a weights file torch reads without running code (torch.load weights_only)"),
        "noise": (tmp_path / "noise.pth", "is not a weights file torch reads without running code"),
        "absent": (tmp_path / "absent.pth", "--from " + str(tmp_path / "absent.pth") + ": no such file"),
    }


@pytest.mark.parametrize("kind", ["missing", "shape", "nan", "tensor", "code", "noise", "absent"])
def test_a_wrong_file_is_a_one_line_error_and_installs_nothing(kind, folder, tmp_path, capsys):
    path, expected = _bad_files(tmp_path)[kind]
    error = one_line_error(capsys, ["weights", "lpips", "--from", str(path)])
    assert expected in error
    assert not (tmp_path / "ran").exists()
    assert not folder.exists() or not list(folder.iterdir())


def test_a_whole_alexnet_state_dict_is_read_for_its_features(folder, tmp_path, capsys):
    whole = _stand_in(seed=1) | {"classifier.6.weight": torch.zeros(10, 4), "classifier.6.bias": torch.zeros(10)}
    assert main(["weights", "lpips", "--from", str(_save(tmp_path, "whole.pth", whole))]) == 0
    x = HALF.normalise(_images())
    assert score_reconstruction(HALF.normalise(_images(seed=3)), x, HALF).lpips > 0


def test_a_reinstalled_file_is_read_again(folder, tmp_path, stand_in, capsys):
    """The network is cached per file version (path, size, mtime): a new file replaces it."""
    x = HALF.normalise(_images())
    main(["weights", "lpips", "--from", str(stand_in)])
    first = score_reconstruction(HALF.normalise(_images(seed=3)), x, HALF)
    other = _save(tmp_path, "other.pth", _stand_in(seed=2))
    main(["weights", "lpips", "--from", str(other)])
    second = score_reconstruction(HALF.normalise(_images(seed=3)), x, HALF)
    assert second.lpips_backbone["sha256"] == weights.sha256(other) != first.lpips_backbone["sha256"]
    assert second.lpips != first.lpips


def test_the_published_file_is_installed_under_its_name_and_wins(folder, monkeypatch, stand_in, tmp_path, capsys):
    name = _publish(monkeypatch, stand_in)
    assert main(["weights", "lpips", "--from", str(stand_in)]) == 0
    assert "torchvision's published ImageNet AlexNet weights" in capsys.readouterr().out
    assert (folder / name).read_bytes() == stand_in.read_bytes()
    x = HALF.normalise(_images())
    scores = score_reconstruction(HALF.normalise(_images(seed=4)), x, HALF)
    assert scores.lpips_status == "ok" and scores.lpips_backbone["published"] is True

    assert main(["weights", "lpips", "--from", str(_save(tmp_path, "mine.pth", _stand_in(seed=7)))]) == 0
    assert f"note: scoring uses {folder / name} first" in capsys.readouterr().out
    assert score_reconstruction(HALF.normalise(_images(seed=4)), x, HALF).lpips_status == "ok"


def test_a_damaged_file_under_the_published_name_is_not_scored(folder, stand_in):
    folder.mkdir()
    (folder / PUBLISHED).write_bytes(stand_in.read_bytes())
    x = HALF.normalise(_images())
    scores = score_reconstruction(x, x, HALF)
    assert scores.lpips is None
    assert scores.lpips_status.startswith(f"unavailable: {folder / PUBLISHED} is not the published AlexNet weights")


def _fake_download(stand_in: Path, calls: list):
    def download(url, dst, hash_prefix=None, progress=True):
        calls.append(url)
        Path(dst).write_bytes(stand_in.read_bytes())
    return download


def test_weights_lpips_downloads_once_into_the_folder_and_checks_it(folder, monkeypatch, stand_in, capsys):
    name = _publish(monkeypatch, stand_in)
    calls = []
    monkeypatch.setattr(torch.hub, "download_url_to_file", _fake_download(stand_in, calls))
    assert main(["weights", "lpips"]) == 0
    assert capsys.readouterr().out.startswith(f"downloaded: {folder / name}")
    assert main(["weights", "lpips"]) == 0
    assert capsys.readouterr().out.startswith(f"already installed: {folder / name}")
    assert calls == [f"https://download.invalid/models/{name}"]
    assert sorted(path.name for path in folder.iterdir()) == [name]
    x = HALF.normalise(_images())
    assert score_reconstruction(HALF.normalise(_images(seed=1)), x, HALF).lpips_status == "ok"


def test_a_damaged_published_file_is_downloaded_again(folder, monkeypatch, stand_in, capsys):
    name = _publish(monkeypatch, stand_in)
    folder.mkdir()
    (folder / name).write_bytes(b"truncated")
    calls = []
    monkeypatch.setattr(torch.hub, "download_url_to_file", _fake_download(stand_in, calls))
    assert main(["weights", "lpips"]) == 0
    assert len(calls) == 1 and (folder / name).read_bytes() == stand_in.read_bytes()


def test_a_download_that_is_not_the_published_file_is_refused(folder, monkeypatch, stand_in, capsys):
    monkeypatch.setattr(torch.hub, "download_url_to_file", _fake_download(stand_in, []))
    error = one_line_error(capsys, ["weights", "lpips"])
    digest = weights.sha256(stand_in)[:8]
    assert f"has SHA-256 {digest}…, not the published 7be5be79…; nothing was installed" in error
    assert list(folder.iterdir()) == []


def test_offline_the_download_fails_in_one_line_and_suggests_from(folder, monkeypatch, capsys):
    def offline(url, dst, hash_prefix=None, progress=True):
        Path(dst).write_bytes(b"partial")
        raise urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    error = one_line_error(capsys, ["weights", "lpips"])
    assert error.startswith(f"privaudit: error: cannot reach {weights.published_url()} (")
    assert "Temporary failure in name resolution" in error and "privaudit weights lpips --from FILE" in error
    assert list(folder.iterdir()) == []


def test_a_weights_variable_naming_a_file_is_one_line_and_the_reason_of_the_score(tmp_path, monkeypatch, capsys):
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv(weights.VARIABLE, str(tmp_path / "a_file"))
    expected = f"{weights.VARIABLE}={str(tmp_path / 'a_file')!r} is not a folder"
    assert expected in one_line_error(capsys, ["weights"])
    x = HALF.normalise(_images())
    assert score_reconstruction(x, x, HALF).lpips_status.startswith(f"unavailable: {expected}")


def test_weights_from_without_a_name_is_a_usage_error(stand_in, capsys):
    assert "name it: privaudit weights lpips --from FILE" in one_line_error(capsys, ["weights", "--from",
                                                                                     str(stand_in)])
    assert "invalid choice" in one_line_error(capsys, ["weights", "vgg"])


def test_an_inversion_row_of_a_campaign_on_32_pixel_images_has_lpips_and_its_backbone(stand_in, tmp_path, capsys):
    assert main(["weights", "lpips", "--from", str(stand_in)]) == 0
    campaign = parse_campaign({
        "campaign": {"name": "lpips", "seeds": [0]}, "data": {"dataset": "photos"},
        "defense": [{"kind": "dpsgd", "label": "D-PSGD", "agents": 3, "rounds": 2, "batch_size": 1, "lr": 0.1}],
        "attack": [{"kind": "dlg", "label": "DLG", "rounds": [0], "evaluations": 4}]})
    store = run_campaign(campaign, "# test", tmp_path / "out", progress=False, say=lambda line: None)
    [row] = [row for row in store.rows() if row["type"] == "inversion"]
    assert row["status"] == "ok" and isinstance(row["metrics"]["lpips"], float)
    assert row["lpips_status"].startswith("ok (backbone: user file sha256 ")
    assert row["lpips_backbone"] == {"published": False, "sha256": weights.sha256(stand_in),
                                     "file": weights.USER_FILE}
    report = render_report(tmp_path / "out").read_text(encoding="utf-8")
    assert "LPIPS ok (backbone: user file sha256 " in report
