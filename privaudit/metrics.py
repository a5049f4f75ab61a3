"""How close a reconstruction is to the private originals: the scoring step of an inversion attack.

This is the only place where the ground truth meets the attack's output (breaching keeps its
metrics apart from its attacks for the same reason). Every image score is computed on the pixels
a person would see: both batches are denormalised with the dataset's `Normalisation` and the
reconstruction is clipped to [0, 1] (an attack that leaves the valid box, as DLG does, is shown
clipped; clipping can only move a pixel closer to an original that lies in [0, 1]).

A reconstructed batch comes in no particular order, so reconstructions are first paired with
originals by the Hungarian assignment (`scipy.optimize.linear_sum_assignment`) that minimises the
total pairwise MSE, and every score, labels included, is computed on those pairs. The two batches
may differ in size (an attacker guesses B, while a Poisson-sampled batch has a random size): then
min(B_rec, B_orig) pairs are formed and scored, and the originals left unpaired are reported.

Scores:

* MSE over all pixels of an image, then averaged over the batch.
* PSNR = 10·log10(1 / MSE) per image (peak 1 on [0, 1] pixels), then averaged. MSE = 0 (a pixel
  exact copy) gives +inf, the limit of the formula, and so does the batch mean.
* SSIM (Wang et al. 2004) from `skimage.metrics.structural_similarity` with `data_range=1.0`,
  colour images through `channel_axis`. Its default 7×7 window must fit in the image, so the
  window is the largest odd size ≤ min(7, H, W) (5×5 for a 5-pixel side); images with a side
  below 3 pixels have no SSIM and are rejected.
* LPIPS (Zhang et al. 2018), AlexNet variant, from the `lpips` package: its linear layers ship
  inside the package, its AlexNet trunk needs ImageNet weights, read from the file
  `privaudit.weights` says (torchvision's published weights in torch hub's cache, or a file the
  user installed with `privaudit weights lpips --from FILE`); nothing is downloaded here. With no
  file, or a file that is not what its name says or lacks AlexNet's feature layers, LPIPS is
  `None` and `lpips_status` says why; it is never computed with a random trunk. A score made with
  a file other than the published weights says so in `lpips_status` and `lpips_backbone`: it is
  not the published metric. AlexNet's two 3×3 stride-2 max pools need inputs of at least
  `LPIPS_MIN_SIDE` pixels; smaller images (digits, LFW) have no LPIPS either, with that reason.
* Label accuracy: the fraction of pairs whose reconstructed label equals the original's.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from skimage.metrics import structural_similarity
from torch import Tensor

from privaudit import weights
from privaudit.data import Normalisation
from privaudit.errors import ConfigError, PrivauditError

SSIM_WINDOW = 7
LPIPS_MIN_SIDE = 31
# lpips' AlexNet trunk cuts torchvision's `features` into five slices at these indices.
_LPIPS_SLICES = (
    (1, range(2)), (2, range(2, 5)), (3, range(5, 8)), (4, range(8, 10)), (5, range(10, 12))
)


@dataclass(frozen=True)
class Scores:
    """Reconstruction scores: batch means over the pairs, per-image values (in the order of the
    paired originals) and the assignment `pairs[i]` = index of the reconstruction paired with
    original i (−1 when original i was left unpaired: fewer reconstructions than originals);
    `lpips_backbone` is the weights file LPIPS was computed with (`Backbone.record`), or None."""

    mse: float
    psnr: float
    ssim: float
    lpips: float | None
    lpips_status: str
    label_acc: float | None
    per_image: dict[str, list[float]] = field(repr=False)
    pairs: tuple[int, ...] = field(repr=False)
    lpips_backbone: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        """The batch scores as a plain dict, for results and reports."""
        return {
            "mse": self.mse,
            "psnr": self.psnr,
            "ssim": self.ssim,
            "lpips": self.lpips,
            "lpips_status": self.lpips_status,
            "lpips_backbone": self.lpips_backbone,
            "label_acc": self.label_acc,
        }


def score_reconstruction(
    reconstruction: Tensor,
    original: Tensor,
    normalisation: Normalisation,
    *,
    labels: Tensor | None = None,
    true_labels: Tensor | None = None,
) -> Scores:
    """Score `reconstruction` [B', C, H, W] against `original` [B, C, H, W], both in the model's
    (normalised) input space; label accuracy when both `labels` and `true_labels` are given."""
    _check_ssim_size(original)
    rec, orig, originals, pairs = _paired(reconstruction, original, normalisation)
    rec = rec[torch.as_tensor(pairs)]
    orig = orig[torch.as_tensor(originals)]

    per_image = _pixel_scores(rec, orig)
    mse, psnr, ssim = per_image["mse"], per_image["psnr"], per_image["ssim"]
    lpips_values, lpips_status, backbone = _lpips(rec.float(), orig.float())
    if lpips_values is not None:
        per_image["lpips"] = lpips_values

    label_acc = None
    if labels is not None and true_labels is not None:
        matched = labels.detach().cpu()[torch.as_tensor(pairs)]
        label_acc = float((matched == true_labels.detach().cpu()[torch.as_tensor(originals)]).double().mean())

    assignment = [-1] * original.shape[0]
    for o, r in zip(originals, pairs):
        assignment[int(o)] = int(r)
    return Scores(
        mse=float(np.mean(mse)),
        psnr=float(np.mean(psnr)),
        ssim=float(np.mean(ssim)),
        lpips=None if lpips_values is None else float(np.mean(lpips_values)),
        lpips_status=lpips_status,
        label_acc=label_acc,
        per_image=per_image,
        pairs=tuple(assignment),
        lpips_backbone=None if backbone is None else backbone.record(),
    )


def image_scores(reconstruction: Tensor, original: Tensor, normalisation: Normalisation) -> dict[str, list[float]]:
    """Per-image MSE, PSNR and SSIM of the Hungarian-paired batches, in the order of the paired
    originals, as in `score_reconstruction` but without LPIPS and labels: cheap enough to score
    hundreds of unrelated batches against the originals (`privaudit.leak`'s noise floor)."""
    _check_ssim_size(original)
    rec, orig, originals, pairs = _paired(reconstruction, original, normalisation)
    return _pixel_scores(rec[torch.as_tensor(pairs)], orig[torch.as_tensor(originals)])


def pixel_errors(reconstruction: Tensor, original: Tensor, normalisation: Normalisation) -> tuple[float, float]:
    """(MSE, PSNR) of the Hungarian-paired batches, as in `score_reconstruction` but without SSIM
    and LPIPS: cheap enough to follow an attack iterate by iterate (a trace)."""
    rec, orig, originals, pairs = _paired(reconstruction, original, normalisation)
    mse = (rec[torch.as_tensor(pairs)] - orig[torch.as_tensor(originals)]).square().flatten(1).mean(-1)
    psnr = [10.0 * math.log10(1.0 / float(v)) if v > 0 else math.inf for v in mse]
    return float(mse.mean()), float(np.mean(psnr))


def _paired(reconstruction: Tensor, original: Tensor, normalisation: Normalisation):
    """Both batches as [0, 1] pixels (the reconstruction clipped) and the Hungarian pairs:
    original `originals[k]` with reconstruction `pairs[k]`, originals in increasing order."""
    if reconstruction.dim() != 4 or original.dim() != 4 or reconstruction.shape[1:] != original.shape[1:]:
        raise ValueError(
            f"reconstruction {tuple(reconstruction.shape)} and original {tuple(original.shape)} "
            "must both be [B, C, H, W] with the same image shape"
        )
    rec = normalisation.denormalise(reconstruction.detach().double().cpu()).clamp(0.0, 1.0)
    orig = normalisation.denormalise(original.detach().double().cpu())
    pairwise = (orig[:, None] - rec[None]).square().flatten(2).mean(-1)
    rows, cols = linear_sum_assignment(pairwise.numpy())
    order = np.argsort(rows)
    return rec, orig, rows[order], cols[order]


def _check_ssim_size(original: Tensor) -> None:
    if min(original.shape[-2:]) < 3:
        raise ValueError(f"images of {tuple(original.shape[-2:])} pixels are too small for SSIM")


def _pixel_scores(rec: Tensor, orig: Tensor) -> dict[str, list[float]]:
    """Per-image MSE, PSNR and SSIM of paired [0, 1] batches (pair k: rec[k] with orig[k])."""
    mse = [float(v) for v in (rec - orig).square().flatten(1).mean(-1)]
    psnr = [10.0 * math.log10(1.0 / v) if v > 0 else math.inf for v in mse]
    ssim = [_ssim(a, b) for a, b in zip(rec.numpy(), orig.numpy())]
    return {"mse": mse, "psnr": psnr, "ssim": ssim}


def _ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two [C, H, W] images in [0, 1], window fitted to small images."""
    side = min(a.shape[-2:])
    window = min(SSIM_WINDOW, side if side % 2 else side - 1)
    return float(structural_similarity(a, b, win_size=window, data_range=1.0, channel_axis=0))


def _lpips(rec: Tensor, orig: Tensor) -> tuple[list[float] | None, str, weights.Backbone | None]:
    """Per-image LPIPS of pixel batches in [0, 1] and the backbone it used, or None and the
    reason it is unavailable."""
    side = min(orig.shape[-2:])
    if side < LPIPS_MIN_SIDE:
        return None, (
            f"unavailable: images of side {side} are below AlexNet's minimum of {LPIPS_MIN_SIDE}"
        ), None
    if orig.shape[1] not in (1, 3):
        return None, f"unavailable: LPIPS needs 1 or 3 channels, got {orig.shape[1]}", None
    try:
        path = weights.scoring_path()
    except ConfigError as error:
        return None, f"unavailable: {error}", None
    if path is None:
        return None, (f"unavailable: AlexNet ImageNet weights not in {weights.published_path()} (`privaudit "
                      "weights lpips` fetches them once, or installs a file you name with --from FILE)"), None
    stat = path.stat()
    network, problem, backbone = _lpips_network(str(path), stat.st_size, stat.st_mtime_ns)
    if network is None:
        return None, f"unavailable: {problem}", None
    if orig.shape[1] == 1:
        rec, orig = rec.expand(-1, 3, -1, -1), orig.expand(-1, 3, -1, -1)
    with torch.no_grad():
        values = network(rec, orig, normalize=True).flatten()
    return [float(v) for v in values], backbone.status(), backbone


@functools.lru_cache(maxsize=2)
def _lpips_network(path: str, size: int, mtime_ns: int) -> tuple[torch.nn.Module | None, str,
                                                                  weights.Backbone | None]:
    """lpips' AlexNet LPIPS with its trunk loaded from `path` (cached per file version), the
    backbone it is, or None and why the file cannot serve (`weights.read`).

    `pnet_rand=True` makes lpips build torchvision's AlexNet without weights, so nothing is
    downloaded; the trunk is then overwritten, every tensor of it, from the file, while
    `pretrained=True` loads the linear layers that ship inside the lpips package.
    """
    import lpips

    try:
        state, backbone = weights.read(Path(path))
    except PrivauditError as error:
        return None, str(error), None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        network = lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, verbose=False)
    trunk = {
        f"slice{number}.{index}.{name}": state[f"features.{index}.{name}"]
        for number, indices in _LPIPS_SLICES
        for index in indices
        for name in ("weight", "bias")
        if f"features.{index}.{name}" in state
    }
    network.net.load_state_dict(trunk, strict=True)
    return network.eval(), "ok", backbone
