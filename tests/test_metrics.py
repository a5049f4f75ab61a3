"""Reconstruction scores: exact values on known inputs, Hungarian pairing, denormalisation, and
LPIPS that is either computed with the real AlexNet weights or reported unavailable, offline."""

import math

import pytest
import torch

from privaudit import metrics, weights
from privaudit.data import Normalisation
from privaudit.metrics import score_reconstruction

HALF = Normalisation(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
IDENTITY = Normalisation(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))


@pytest.fixture(autouse=True)
def empty_hub(tmp_path, monkeypatch):
    """Every test sees an empty torch hub cache unless it puts a file there itself."""
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.delenv(weights.VARIABLE, raising=False)
    metrics._lpips_network.cache_clear()


@pytest.fixture
def no_download(monkeypatch):
    """Make every way torch or torchvision could fetch weights fail loudly."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"download attempted: {args}")

    import torchvision.models._api as tv_api

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    monkeypatch.setattr(tv_api, "load_state_dict_from_url", refuse)
    return calls


def _images(batch=3, channels=3, side=32, seed=0):
    return torch.rand((batch, channels, side, side), generator=torch.Generator().manual_seed(seed))


def test_identical_images_score_perfectly():
    x = HALF.normalise(_images())
    scores = score_reconstruction(x.clone(), x, HALF, labels=torch.tensor([0, 1, 2]),
                                  true_labels=torch.tensor([0, 1, 2]))
    assert scores.mse == 0.0
    assert scores.psnr == math.inf
    assert scores.ssim == pytest.approx(1.0)
    assert scores.label_acc == 1.0
    assert scores.pairs == (0, 1, 2)
    assert set(scores.summary()) == {"mse", "psnr", "ssim", "lpips", "lpips_status", "lpips_backbone",
                                      "label_acc"}


def test_known_mse_gives_known_psnr():
    original = torch.tensor([0.3, 0.6]).view(2, 1, 1, 1).expand(2, 3, 16, 16)
    offsets = torch.tensor([0.1, 0.01]).view(2, 1, 1, 1)
    scores = score_reconstruction(original + offsets, original, IDENTITY)
    assert scores.per_image["mse"] == pytest.approx([0.01, 1e-4], rel=1e-4)
    assert scores.per_image["psnr"] == pytest.approx([20.0, 40.0], rel=1e-5)
    assert scores.psnr == pytest.approx(30.0, rel=1e-5)
    assert scores.mse == pytest.approx((0.01 + 1e-4) / 2, rel=1e-4)


def test_scores_are_computed_on_denormalised_pixels():
    original = torch.full((1, 3, 16, 16), 0.5)
    # A normalised offset of 0.2 is 0.1 in pixels under mean/std 0.5: MSE 0.01, PSNR 20 dB.
    scores = score_reconstruction(HALF.normalise(original) + 0.2, HALF.normalise(original), HALF)
    assert scores.mse == pytest.approx(0.01)
    assert scores.psnr == pytest.approx(20.0)


def test_reconstruction_is_clipped_to_the_pixel_range():
    original = torch.ones((1, 3, 16, 16))
    scores = score_reconstruction(original + 5.0, original, IDENTITY)
    assert scores.mse == 0.0


def test_hungarian_matching_recovers_a_permuted_batch():
    original = HALF.normalise(_images(batch=5))
    order = torch.tensor([3, 0, 4, 1, 2])
    labels = torch.tensor([7, 8, 9, 5, 6])
    scores = score_reconstruction(original[order], original, HALF, labels=labels[order],
                                  true_labels=labels)
    assert scores.mse == 0.0
    assert scores.label_acc == 1.0
    assert [int(order[p]) for p in scores.pairs] == [0, 1, 2, 3, 4]


def test_wrong_labels_count_against_accuracy():
    x = HALF.normalise(_images(batch=4))
    scores = score_reconstruction(x, x, HALF, labels=torch.tensor([0, 1, 0, 0]),
                                  true_labels=torch.tensor([0, 1, 2, 3]))
    assert scores.label_acc == 0.5


def test_ssim_drops_for_noise_and_fits_small_images():
    original = _images(batch=2, channels=1, side=8)
    norm = Normalisation((0.0,), (1.0,))
    noisy = original + 0.3 * torch.randn(original.shape, generator=torch.Generator().manual_seed(1))
    assert score_reconstruction(original, original, norm).ssim == pytest.approx(1.0)
    assert score_reconstruction(noisy, original, norm).ssim < 0.9
    tiny = _images(batch=1, channels=1, side=5)
    assert score_reconstruction(tiny, tiny, norm).ssim == pytest.approx(1.0)


def test_images_too_small_for_ssim_are_rejected():
    tiny = _images(batch=1, channels=1, side=2)
    with pytest.raises(ValueError, match="too small"):
        score_reconstruction(tiny, tiny, Normalisation((0.0,), (1.0,)))


def test_lpips_without_cached_backbone_is_unavailable_and_downloads_nothing(no_download):
    x = HALF.normalise(_images())
    scores = score_reconstruction(x, x, HALF)
    assert scores.lpips is None
    assert scores.lpips_status.startswith("unavailable: AlexNet ImageNet weights not in ")
    assert str(weights.published_path()) in scores.lpips_status and "privaudit weights lpips" in scores.lpips_status
    assert "lpips" not in scores.per_image
    assert no_download == []


def test_alexnet_weights_path_is_torchvisions_cache_file(tmp_path):
    path = weights.published_path()
    assert path.parent == tmp_path / "hub" / "checkpoints"
    assert path.name == "alexnet-owt-7be5be79.pth"


def test_lpips_is_unavailable_for_images_alexnet_cannot_take(no_download):
    x = _images(batch=1, channels=1, side=25)
    scores = score_reconstruction(x, x, Normalisation((0.0,), (1.0,)))
    assert scores.lpips is None and "below AlexNet's minimum" in scores.lpips_status


def _fake_alexnet_file(directory, monkeypatch, tamper=False):
    """A file with AlexNet's feature tensors (random values), named by torch hub's convention so
    its hash prefix matches (or, with `tamper`, does not); the published name is made its name."""
    from torchvision.models import alexnet

    state = {k: v for k, v in alexnet().state_dict().items() if k.startswith("features.")}
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / "staging.pth"
    torch.save(state, staging)
    digest = weights.sha256(staging)
    prefix = ("0" if digest[0] != "0" else "1") + digest[1:8] if tamper else digest[:8]
    path = directory / f"alexnet-owt-{prefix}.pth"
    staging.rename(path)
    monkeypatch.setattr(weights, "published_url", lambda: f"https://download.invalid/{path.name}")
    return path, state


def test_lpips_uses_the_cached_backbone_when_present(tmp_path, monkeypatch, no_download):
    path, state = _fake_alexnet_file(tmp_path / "hub" / "checkpoints", monkeypatch)
    x = HALF.normalise(_images(batch=2))
    same = score_reconstruction(x, x, HALF)
    assert same.lpips_status == "ok"
    assert same.lpips == pytest.approx(0.0, abs=1e-6)
    different = score_reconstruction(HALF.normalise(_images(batch=2, seed=5)), x, HALF)
    assert different.lpips > 0.0 and len(different.per_image["lpips"]) == 2
    assert same.lpips_backbone == {"published": True, "sha256": weights.sha256(path), "file": path.name}
    network, _, _ = metrics._lpips_network(str(path), path.stat().st_size, path.stat().st_mtime_ns)
    trunk = network.net.state_dict()
    assert torch.equal(trunk["slice1.0.weight"], state["features.0.weight"])
    assert torch.equal(trunk["slice5.10.bias"], state["features.10.bias"])
    assert no_download == []


def test_lpips_rejects_a_file_that_is_not_the_published_one(tmp_path, monkeypatch, no_download):
    _fake_alexnet_file(tmp_path / "hub" / "checkpoints", monkeypatch, tamper=True)
    x = HALF.normalise(_images(batch=1))
    scores = score_reconstruction(x, x, HALF)
    assert scores.lpips is None
    assert "not the published AlexNet weights" in scores.lpips_status


def test_mismatched_image_shapes_are_rejected():
    with pytest.raises(ValueError, match="must both be"):
        score_reconstruction(_images(batch=2, side=16), _images(batch=2, side=32), HALF)


def test_batches_of_different_sizes_score_the_pairs_they_form():
    """Two reconstructions against three originals: each pairs with its copy, the third original
    stays unpaired (−1) and the means are over the two pairs."""
    original = _images(batch=3)
    reconstruction = torch.stack([original[2], original[0] + 0.1])
    scores = score_reconstruction(reconstruction, original, IDENTITY, labels=torch.tensor([5, 1]),
                                  true_labels=torch.tensor([1, 0, 5]))
    assert scores.pairs == (1, -1, 0)
    assert len(scores.per_image["mse"]) == 2
    assert scores.label_acc == 1.0
    assert scores.mse == pytest.approx(float((original[0].clamp(max=0.9) + 0.1 - original[0]).square().mean()) / 2,
                                       rel=1e-4)


def test_pixel_errors_agree_with_the_full_scores():
    original = _images(batch=2)
    reconstruction = (original.flip(0) + 0.05).clamp(0, 1)
    mse, psnr = metrics.pixel_errors(reconstruction, original, IDENTITY)
    scores = score_reconstruction(reconstruction, original, IDENTITY)
    assert mse == pytest.approx(scores.mse) and psnr == pytest.approx(scores.psnr)
