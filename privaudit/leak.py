"""Whether a reconstruction leaks: a test against the noise floor's distribution, not its mean.

The noise floor is what an attacker who learnt nothing scores: batches of unrelated training
images (none from the victim's batch) scored against the victim's originals exactly as a
reconstruction is (Hungarian pairing, [0, 1] pixels: `privaudit.metrics.image_scores`).
`noise_floor` draws `FLOOR_DRAWS` such batches and keeps every draw.

`decide` is a Monte Carlo rank test (Barnard 1963; Besag & Clifford 1989; Davison & Hinkley
1997, eq. 4.11). The null hypothesis is that the reconstruction is no closer to the originals
than a batch of unrelated images: one more draw, exchangeable with the K stored ones. A statistic
T of the reconstruction then has p = (1 + #{k : T_k ≥ T}) / (K + 1), and P(p ≤ a) ≤ a for any
a; ties, and a score that is undefined (NaN), count against the reconstruction.

Two statistics, each on PSNR and on SSIM:

* the batch mean (what the report's tables show), sensitive to a resemblance of every image;
* the best image (highest PSNR, highest SSIM over the batch), sensitive to a batch of which only a
  few images are recovered: on 20 batches of eight digits with one image exact and seven
  unrelated, the mean at 99 % found 4, the best image 18.

A statistic passes when it passes on PSNR *and* on SSIM, each at level α/2: an intersection-union
test (Berger 1982), so asking for both costs no correction, and a flat grey guess (a high PSNR
against a dark original, a low SSIM) cannot pass. The batch leaks when either statistic passes:
Bonferroni over the two, so under the null a leak is declared with probability ≤ α = 1 − confidence.

A reconstructed image whose every channel has a pixel standard deviation below `FLAT_STD` shows
no structure whatever its scores: it never counts as the batch's best image, and a batch of flat
images is judged "no leak" outright.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from privaudit.data import Dataset, Normalisation
from privaudit.metrics import Scores, image_scores

CONFIDENCE = 0.99
"""The confidence a leak is declared at: under the null, a leak with probability ≤ 1 %."""

FLOOR_DRAWS = 199
"""Unrelated batches per noise floor: the fewest with which the rank test reaches 99 % split over
its two statistics (1/(K + 1) = 0.5 %: the reconstruction must beat every draw). Measured on one
core of a shared two-core machine, 199 draws take 0.1 s for one 8×8 digit, 0.2–0.3 s for batches
of eight, 0.15–0.25 s for one 32×32 colour crop and 0.8–1.3 s for batches of eight crops (most of
it skimage's SSIM), where `BatchInversion` on eight crops took 42 s (`bench/inversion.py
--sections batch8`) and DLG on one digit 0.2–2.7 s (to its tolerance or its 2000 evaluations).
Batches of 32 crops cost 18 s, mostly the pairing's pairwise differences. LPIPS is left out of the
draws: with AlexNet cached it would cost more than the rest, and the test does not use it."""

FLAT_STD = 0.01
"""A reconstructed image is flat when every channel's pixel standard deviation, on [0, 1] pixels,
is below this: 1 % of the range, 2.5 levels of 255, no visible structure."""

STATISTICS = ("psnr", "ssim", "best_psnr", "best_ssim")
"""The tested statistics: batch means, then the best image's scores."""


@dataclass(frozen=True)
class Floor:
    """Every draw of a noise floor: per unrelated batch, its mean MSE, PSNR and SSIM over the
    paired images and its best image's PSNR and SSIM."""

    mse: tuple[float, ...]
    psnr: tuple[float, ...]
    ssim: tuple[float, ...]
    best_psnr: tuple[float, ...]
    best_ssim: tuple[float, ...]

    @property
    def draws(self) -> int:
        return len(self.psnr)

    def summary(self) -> dict[str, float]:
        """The mean over draws of each batch score: a row's `baseline`."""
        return {key: float(np.mean(getattr(self, key))) for key in ("mse", "psnr", "ssim")}

    def record(self) -> dict[str, Any]:
        """The tested statistics of every draw, for a row's `floor`."""
        return {"draws": self.draws} | {key: list(getattr(self, key)) for key in STATISTICS}


def noise_floor(data: Dataset, rows: Tensor, seed: int, size: int | None = None,
                draws: int = FLOOR_DRAWS) -> Floor:
    """`draws` batches of `size` (default: as many as the originals; give the attack's batch size,
    so the draws get as many candidates for the pairing as the reconstruction) training images
    outside `rows`, each drawn without replacement, scored against the originals `rows`."""
    generator = torch.Generator().manual_seed(seed)
    rows = rows.reshape(-1)
    pool = torch.from_numpy(np.setdiff1d(np.arange(len(data.y_train)), rows.numpy()))
    original = data.x_train[rows]
    size = len(rows) if size is None else size
    found: dict[str, list[float]] = {key: [] for key in ("mse",) + STATISTICS}
    for _ in range(draws):
        picks = pool[torch.randperm(len(pool), generator=generator)[:size]]
        scores = image_scores(data.x_train[picks], original, data.normalisation)
        for key in ("mse", "psnr", "ssim"):
            found[key].append(float(np.mean(scores[key])))
        found["best_psnr"].append(float(np.max(scores["psnr"])))
        found["best_ssim"].append(float(np.max(scores["ssim"])))
    return Floor(**{key: tuple(values) for key, values in found.items()})


@dataclass(frozen=True)
class Decision:
    """A leak decision with what it rests on: `ranks[s]` is the reconstruction's rank among the
    K + 1 values of statistic s (1: closer than every draw), `allowed` the largest rank that
    passes, `flat` the number of flat reconstructed images."""

    leak: bool
    confidence: float
    draws: int
    allowed: int
    ranks: dict[str, int]
    flat: int
    reason: str

    @property
    def test(self) -> str:
        """The test in one sentence."""
        return (f"Monte Carlo rank test against {self.draws} batches of unrelated training images: a leak when the "
                f"batch's mean, or its best image, beats {_beaten(self.allowed)} of them on both PSNR and SSIM "
                f"(each statistic at {_percent((1 - self.confidence) / 2)}, Bonferroni over the two: "
                f"{_percent(self.confidence)} confidence); a flat image never counts")

    def record(self) -> dict[str, Any]:
        """The decision as a row's `leak`."""
        return {"leak": self.leak, "confidence": self.confidence, "draws": self.draws, "test": self.test,
                **{f"{key}_rank": rank for key, rank in self.ranks.items()}, "allowed_rank": self.allowed,
                "flat": self.flat, "reason": self.reason}


def flat_images(reconstruction: Tensor, normalisation: Normalisation) -> list[bool]:
    """Per reconstructed image [B, C, H, W] (normalised, clipped to [0, 1] as it is scored),
    whether it is flat: every channel's pixel standard deviation below `FLAT_STD`."""
    pixels = normalisation.denormalise(reconstruction.detach().double().cpu()).clamp(0.0, 1.0)
    spread = pixels.flatten(2).std(dim=-1, unbiased=False).amax(dim=-1)
    return [bool(v < FLAT_STD) for v in spread]


def decide(reconstruction: Tensor, scores: Scores, floor: Floor, normalisation: Normalisation,
           confidence: float = CONFIDENCE) -> Decision:
    """Whether `reconstruction`, scored as `scores` against the originals `floor` was drawn
    for, leaks at `confidence` (the module's docstring gives the test); ValueError when the floor
    has too few draws to reach it."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    alpha = 1.0 - confidence
    allowed = math.floor(alpha / 2 * (floor.draws + 1) + 1e-9)
    if allowed < 1:
        raise ValueError(f"{floor.draws} floor draws cannot give a test at {_percent(confidence)} confidence: "
                         f"it needs at least {math.ceil(2 / alpha - 1 - 1e-9)}")
    paired = [p for p in scores.pairs if p >= 0]
    flat = np.array(flat_images(reconstruction, normalisation))[paired]
    psnr, ssim = np.array(scores.per_image["psnr"]), np.array(scores.per_image["ssim"])
    structured = ~flat
    observed = {"psnr": float(np.mean(psnr)), "ssim": float(np.mean(ssim)),
                "best_psnr": float(np.max(psnr[structured])) if structured.any() else -math.inf,
                "best_ssim": float(np.max(ssim[structured])) if structured.any() else -math.inf}
    ranks = {key: _rank(observed[key], getattr(floor, key)) for key in STATISTICS}
    passes = {kind: ranks[f"{kind}psnr"] <= allowed and ranks[f"{kind}ssim"] <= allowed for kind in ("", "best_")}
    everything_flat = bool(len(flat)) and bool(flat.all())
    if everything_flat:
        reason = (f"{'every' if len(flat) > 1 else 'the'} reconstructed image is flat (no channel's pixel standard "
                  f"deviation reaches {FLAT_STD:g}): a flat image shows nothing of an original")
    else:
        reason = _reason(observed, ranks, passes, floor, allowed, single=len(psnr) == 1)
        if flat.any():
            reason += f" ({int(flat.sum())} of {len(flat)} reconstructed images are flat and never count as its best)"
    return Decision(leak=any(passes.values()) and not everything_flat, confidence=confidence,
                    draws=floor.draws, allowed=allowed, ranks=ranks, flat=int(flat.sum()), reason=reason)


def _reason(observed: dict[str, float], ranks: dict[str, int], passes: dict[str, bool], floor: Floor,
            allowed: int, single: bool) -> str:
    """Why a batch with some structured image leaks or not, from its statistics' ranks (statistic
    kind "" the mean, "best_" the best image; a batch of one image has one: its mean is its best)."""
    names = {"": "its" if single else "its mean", "best_": "its best image's"}
    kinds = [""] if single else ["", "best_"]
    unrelated = f"{floor.draws} unrelated {'images' if single else 'batches'}"
    if any(passes.values()):
        return "; ".join(
            f"{names[k]} PSNR {_db(observed[k + 'psnr'])} and SSIM {observed[k + 'ssim']:.3f} beat those of "
            f"{_beaten(allowed)} of the {unrelated} (theirs reach {_db(max(getattr(floor, k + 'psnr')))} and "
            f"{max(getattr(floor, k + 'ssim')):.3f})" for k in kinds if passes[k])
    return f"of {unrelated}, " + ", ".join(
        f"{ranks[k + metric] - 1} reach {names[k]} {metric.upper()} ({_score(metric, observed[k + metric])})"
        for k in kinds for metric in ("psnr", "ssim"))


def _rank(value: float, draws: tuple[float, ...]) -> int:
    """1 + the number of draws not strictly below `value` (ties and NaN count against it)."""
    return 1 + int(np.count_nonzero(~(np.array(draws) < value)))


def _beaten(allowed: int) -> str:
    return "every one" if allowed == 1 else f"all but {allowed - 1}"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.3g} %"


def _score(metric: str, value: float) -> str:
    return _db(value) if metric == "psnr" else f"{value:.3f}"


def _db(value: float) -> str:
    return "∞ dB" if math.isinf(value) and value > 0 else f"{value:.1f} dB"
