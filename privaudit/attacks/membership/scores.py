"""Membership inference scores (LOSS, offline LiRA, RMIA) and the metrics the field reports.

Everything here is a pure function of per-example model outputs the caller has already
computed — losses, logits, correct-class probabilities of the target model and of reference
models — so the attacks never see a defense's internals, and ground truth (`is_member`) reaches
only `membership_metrics`. Inputs may be numpy arrays or CPU torch tensors (anything
`np.asarray` accepts); all arithmetic is float64 numpy, so the module imports without torch.

Every score follows one convention: **higher means more likely a member**.

References
- LOSS: Yeom, Giacomelli, Fredrikson, Jha, "Privacy Risk in Machine Learning: Analyzing the
  Connection to Overfitting", CSF 2018 (the threshold adversary, Def. 4 / Alg. 1).
- LiRA: Carlini, Chien, Nasr, Song, Terzis, Tramèr, "Membership Inference Attacks From First
  Principles", IEEE S&P 2022 (logit scaling §IV-B eq. 4; offline variant §IV-C, Alg. 1 with the
  "offline" lines; global variance §VI-A / Fig. 8).
- RMIA: Zarifzadeh, Liu, Ramakrishnan, Shokri, "Low-Cost High-Power Membership Inference
  Attacks", ICML 2024 (pairwise likelihood ratio eq. 3, score eq. 4, Pr(x) over reference
  models eq. 5, offline linear approximation §3 / App. B.2.2, with a chosen by attacking reference
  models with the others). By default the count of eq. 4 has its ties broken by the mean log
  pairwise likelihood ratio (`rmia_scores`, score = "refined"); score = "count" gives eq. 4 as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp
from scipy.stats import norm
from sklearn.metrics import roc_auc_score, roc_curve

ROC_POINTS = 512
"""At most this many ROC points are stored per result (half log-spaced, half linear in FPR)."""


def _np(x: ArrayLike) -> np.ndarray:
    """A numpy view of a numpy array, sequence or (CPU or device) torch tensor."""
    return np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)


def _f64(x: ArrayLike) -> NDArray[np.float64]:
    return _np(x).astype(np.float64, copy=False)


# ---------------------------------------------------------------------------------------- LOSS


def loss_scores(losses: ArrayLike) -> NDArray[np.float64]:
    """LOSS attack (Yeom et al. 2018, Alg. 1): predict "member" when the target's loss on x is
    below a threshold. As a score, −loss: thresholding it at −τ is exactly the paper's test, and
    the ROC sweeps τ so no threshold has to be chosen here."""
    return -_f64(losses)


# ---------------------------------------------------------------------------------------- LiRA


def logit_confidence(logits: ArrayLike, labels: ArrayLike) -> NDArray[np.float64]:
    """φ = log(p_y / (1 − p_y)) of softmax(logits) at the true label (Carlini et al. 2022, eq. 4).

    Computed as z_y − logsumexp_{j≠y} z_j, which equals log p_y − log(1 − p_y) exactly (both
    share the normaliser logsumexp_j z_j) and never forms 1 − p_y, so it stays finite when
    p_y rounds to 1 (the case that matters most: confidently memorised members). The paper uses
    the same "stable logit" form for the same reason.

    logits: [..., n, C] (leading axes, e.g. K reference models, are kept); labels: [n] ints.
    Returns φ with shape [..., n].
    """
    z = _f64(logits)
    y = _np(labels).astype(np.int64)
    if z.ndim < 2 or z.shape[-1] < 2:
        raise ValueError("logits must be [..., n, C] with C >= 2 classes")
    if y.shape != z.shape[-2:-1]:
        raise ValueError(f"labels shape {y.shape} does not match logits {z.shape}")
    onehot = np.arange(z.shape[-1]) == y[:, None]
    z_y = np.take_along_axis(z, np.broadcast_to(y[:, None], z.shape[:-1] + (1,)), axis=-1)[..., 0]
    rest = np.where(onehot, -np.inf, z)
    return z_y - logsumexp(rest, axis=-1)


def lira_offline_scores(
    target_conf: ArrayLike,
    reference_conf_out: ArrayLike,
    fixed_variance: bool = False,
) -> NDArray[np.float64]:
    """Offline LiRA (Carlini et al. 2022, Alg. 1, offline lines; §IV-C "one-sided" test).

    For each example, fit N(μ_out, σ²_out) to the logit-scaled confidences φ of K reference
    models that did NOT train on it, and score the target's φ by how far it sits in the upper
    tail: Λ = 1 − Pr[Z > φ_target], Z ~ N(μ_out, σ²_out). Members raise φ, so only the upper tail
    is evidence — hence one-sided.

    The score returned is −log Pr[Z > φ_target] = −logsf, a strictly increasing function of the
    paper's Λ, so every ROC point is identical; unlike Λ itself it does not saturate at 1.0 in
    float64 for far-out members, which would tie them and blur exactly the low-FPR region the
    attack is judged on.

    fixed_variance: use one σ for all examples — the pooled within-example variance
    Σ_i Σ_k (φ_ki − μ_i)² / (n(K − 1)) — as the paper recommends when there are few reference
    models (§VI-A, Fig. 8: per-example σ from a handful of models is too noisy). We pool
    deviations around each example's own mean rather than take the std of all φ at once, so
    between-example spread in difficulty does not inflate σ; μ stays per-example either way.

    target_conf: [n] φ of the target model; reference_conf_out: [K, n] with K ≥ 2.
    """
    target = _f64(target_conf)
    ref = _f64(reference_conf_out)
    if ref.ndim != 2 or ref.shape[1:] != target.shape:
        raise ValueError(f"reference_conf_out must be [K, n] with n = {target.shape}; got {ref.shape}")
    k = ref.shape[0]
    if k < 2:
        raise ValueError("a Gaussian fit needs K >= 2 reference models")
    mu = ref.mean(axis=0)
    if fixed_variance:
        sigma = np.full_like(mu, np.sqrt(((ref - mu) ** 2).sum() / (ref.shape[1] * (k - 1))))
    else:
        sigma = ref.std(axis=0, ddof=1)
    sigma = np.maximum(sigma, np.finfo(np.float64).tiny)
    return -norm.logsf(target, loc=mu, scale=sigma)


# ---------------------------------------------------------------------------------------- RMIA


RMIA_PAPER_A = 0.3
"""The offline a of Zarifzadeh et al.'s recipe (App. B.2.2; ML Privacy Meter's default, LeakPro's is
0.33), used when the reference models are too few to choose a on."""

RMIA_A_GRID = tuple(k / 20 for k in range(21))
"""The values of a tried when a is chosen on the reference models."""


def _log_marginal(log_reference: NDArray[np.float64], a: float | None,
                  out: NDArray[np.bool_] | None = None) -> NDArray[np.float64]:
    """log Pr(x), Pr(x) the mean over reference models of Pr(x|θ') (Zarifzadeh et al. eq. 5),
    over the references that did not train on x when `out` [K, n] says which, from their
    log Pr(x|θ') [K, n]. With OUT references only, the mean under-estimates Pr(x); the paper's
    linear fix (App. B.2.2) is Pr(x) ≈ ½((1 + a)·Pr_OUT(x) + (1 − a)), a tuned on reference models
    (a = 1: no fix).

    In logs so that neither end rounds away: where the mean is below ½, as a log-sum-exp
    (a probability of 1e-400 stays distinct from 1e-500); where it is above, as
    log1p(−c·mean(1 − Pr(x|θ'))) with 1 − Pr(x|θ') = −expm1(log Pr(x|θ')), so a confidence of
    1 − 1e-20 stays distinct from 1 − 1e-30."""
    weight = np.ones_like(log_reference) if out is None else out.astype(np.float64)
    counts = weight.sum(axis=0)
    if np.any(counts == 0):
        raise ValueError("every record needs a reference model that did not train on it")
    c = 1.0 if a is None else 0.5 * (1.0 + a)
    log_mean = logsumexp(log_reference, axis=0, b=weight) - np.log(counts)
    miss = (weight * -np.expm1(log_reference)).sum(axis=0) / counts
    high = miss < 0.5
    result = log_mean if c == 1.0 else np.logaddexp(np.log(c) + log_mean, np.log1p(-c))
    result[high] = np.log1p(-c * miss[high])
    return result


RMIA_SCORES = ("refined", "count")
"""RMIA's score: the paper's count with its ties broken by the mean log pairwise likelihood ratio
("refined", the default), or the count as is ("count")."""


def rmia_scores(
    target_prob: ArrayLike,
    reference_prob: ArrayLike,
    population_target_prob: ArrayLike,
    population_reference_prob: ArrayLike,
    gamma: float = 1.0,
    a: float | None = None,
    reference_out: ArrayLike | None = None,
    log_prob: bool = False,
    score: str = "refined",
) -> NDArray[np.float64]:
    """RMIA (Zarifzadeh et al. 2024): Score(x) = Pr_{z∼π}[LR(x, z) ≥ γ] (eq. 4) with the pairwise
    likelihood ratio LR(x, z) = (Pr(x|θ)/Pr(x)) / (Pr(z|θ)/Pr(z)) (eq. 3), its ties broken.

    Pr(·|θ) is the model's probability of the correct label; Pr(·) its mean over reference
    models (eq. 5), with the offline linear approximation when `a` is given (both for x and for
    the population z, since the same reference models are OUT for both). Comparing x against
    population samples z through the same reference models is what makes the test calibrated
    per example without training IN models.

    Vectorised: LR(x, z) ≥ γ ⟺ log r_z ≤ log r_x − log γ with r = Pr(·|θ)/Pr(·), so the count
    c(x) = m·Score(x) is a right-searchsorted count into the m sorted population log ratios —
    O((n + m) log m), no loop.

    Ties. The count takes m + 1 values, so with n candidates against m population records many
    candidates share a score: every record whose ratio beats all m ties at 1, and so on down. The
    TPR at a low FPR is then decided by whether a tied block fits under the FPR or not (the ROC
    is read conservatively, `_tpr_at`), not by the evidence. `score = "refined"` (the default)
    breaks them by the mean log pairwise likelihood ratio over the population,
    t(x) = mean_z log LR(x, z) = log r_x − mean_z log r_z (eq. 3 in logs, averaged over z ∼ π as
    eq. 4 averages its indicator), and returns (c(x) + ½ + arctan(t(x))/π) / (m + 1), in (0, 1).
    The added term lies in (0, 1), so a record with a higher count always scores higher: it is a
    strict refinement of eq. 4, ordering only records the count ties. Within one target model t
    orders them as r_x does (eq. 4 is increasing in r_x); across target models, whose candidates
    one ROC pools, t measures r_x against that model's own population, as the count does. The
    score is one float, so records whose t differ by less than about 1e-14 still tie (records a
    model is certain of beyond float64, with ratios 1 to within 1e-16).
    `score = "count"` returns eq. 4 itself, c(x)/m, as ML Privacy Meter and LeakPro compute it.

    target_prob: [n]; reference_prob: [K, n]; population_target_prob: [m];
    population_reference_prob: [K', m]; reference_out: [K, n] booleans, reference k did not train
    on x (Pr(x) is then the mean over those only; default: none trained on any x).
    log_prob: the four inputs are log Pr(·|θ) rather than Pr(·|θ). Give logs where they are at
    hand (from the logits, −softplus(−φ) with φ of `logit_confidence`): a noisy or overconfident
    model rounds Pr(·|θ) to exactly 0 or 1 on many records, which ties them all, while their logs
    keep them apart. Probabilities are clipped at the smallest positive float, so an underflowed
    0 cannot divide by zero.
    """
    if score not in RMIA_SCORES:
        raise ValueError(f"score must be one of {RMIA_SCORES}; got {score!r}")
    tiny = np.finfo(np.float64).tiny

    def logs(x: ArrayLike) -> NDArray[np.float64]:
        return _f64(x) if log_prob else np.log(np.maximum(_f64(x), tiny))

    lx, lz = logs(target_prob), logs(population_target_prob)
    ref_x, ref_z = logs(reference_prob), logs(population_reference_prob)
    if ref_x.ndim != 2 or ref_x.shape[1:] != lx.shape:
        raise ValueError(f"reference_prob must be [K, n] with n = {lx.shape}; got {ref_x.shape}")
    if ref_z.ndim != 2 or ref_z.shape[1:] != lz.shape:
        raise ValueError(f"population_reference_prob must be [K, m] with m = {lz.shape}; got {ref_z.shape}")
    out = None if reference_out is None else _np(reference_out).astype(bool)
    if out is not None and out.shape != ref_x.shape:
        raise ValueError(f"reference_out must have the shape of reference_prob {ref_x.shape}; got {out.shape}")
    if gamma <= 0:
        raise ValueError("gamma must be positive")
    if log_prob and not (np.all(lx <= 0) and np.all(lz <= 0) and np.all(ref_x <= 0) and np.all(ref_z <= 0)):
        raise ValueError("log probabilities must be <= 0 (is log_prob set on probabilities?)")
    ratio_x = lx - _log_marginal(ref_x, a, out)
    ratio_z = np.sort(lz - _log_marginal(ref_z, a))
    count = np.searchsorted(ratio_z, ratio_x - np.log(gamma), side="right")
    if score == "count":
        return count / ratio_z.size
    margin = ratio_x - ratio_z.mean()
    return (count + 0.5 + np.arctan(margin) / np.pi) / (ratio_z.size + 1)


@dataclass(frozen=True)
class PseudoTarget:
    """One reference model attacked as if it were the target, the other reference models as its
    references: the records it trained on are its members, records it did not train on its
    non-members, and `reference_out` says which of its references did not train on each record
    (the attacker trained them all, so it knows). Population records z are OUT of every model.

    prob: [n] its Pr(x|θ) on the records (or log Pr(x|θ), as `rmia_scores`' log_prob says);
    is_member: [n]; reference_prob, reference_out: [K, n]; population_prob: [m];
    population_reference_prob: [K, m].
    """

    prob: ArrayLike
    is_member: ArrayLike
    reference_prob: ArrayLike
    reference_out: ArrayLike
    population_prob: ArrayLike
    population_reference_prob: ArrayLike


@dataclass(frozen=True)
class RmiaA:
    """RMIA's offline a and how it was set: `how` in words, `criterion` the pseudo-targets'
    statistic at each a tried (empty unless a was chosen), and the members and non-members they
    held."""

    a: float
    how: str
    criterion: dict[float, float]
    members: int = 0
    non_members: int = 0


RMIA_A_CHOSEN = "chosen on reference models"
RMIA_A_PAPER = f"paper's value {RMIA_PAPER_A:g}"
RMIA_A_FPR_RANGE = (0.001, 0.1)
"""The false-positive rates a is chosen on (`choose_rmia_a`)."""


def low_fpr_tpr(scores: ArrayLike, is_member: ArrayLike, fpr_range: tuple[float, float] = RMIA_A_FPR_RANGE,
                points: int = 32) -> float:
    """Mean TPR over `points` FPRs log-spaced across `fpr_range`: the area under the ROC on a log
    FPR axis over that range (Carlini et al. 2022's log-log convention), divided by its width. The
    ROC is read linearly between its points, i.e. ties between scores broken at random in
    expectation, so a block of tied scores counts for what it is worth instead of all or nothing."""
    fpr, tpr, _ = roc_curve(_np(is_member).astype(bool), _f64(scores), drop_intermediate=False)
    return float(np.interp(np.geomspace(*fpr_range, points), fpr, tpr).mean())


RMIA_A_EVIDENCE = 2.0
"""How many standard errors the best a's criterion must beat the paper's a = 0.3 by on the
pseudo-targets before `choose_rmia_a` departs from 0.3."""


def choose_rmia_a(trials: Sequence[PseudoTarget], gamma: float = 1.0, grid: Sequence[float] = RMIA_A_GRID,
                  min_non_members: int = 100, log_prob: bool = False, score: str = "refined",
                  resamples: int = 200, seed: int = 0) -> RmiaA:
    """RMIA's offline a chosen on the reference models themselves, as Zarifzadeh et al. tune it
    (App. B.2.2: attack reference models with the others, keep the a that works best; ML Privacy
    Meter does the same on a paired model, by AUC). RMIA with each a of `grid` scores
    every pseudo-target's records; the scores of all pseudo-targets are pooled (each is a share of
    population records, so they share a scale) and the a whose TPR at low FPR is highest is the
    candidate (`low_fpr_tpr` over 0.1 %–10 %), ties broken by AUC and then by nearness to the
    paper's 0.3. Low FPR because that is what the attack is judged on (Carlini et al. 2022,
    §III-C); a range rather than one FPR because a few thousand pseudo-target non-members put only
    a few dozen false positives under 1 %, and the TPR there moves by one record at a time.

    The candidate replaces the paper's a only when the pseudo-targets show it better by more than
    `RMIA_A_EVIDENCE` standard errors of the difference in the criterion, a = candidate against
    a = 0.3 on the same records, estimated by resampling whole pseudo-targets (`resamples` draws,
    seeded; 0 takes the candidate as it is). The maximum over 21 values of a noisy criterion
    beats 0.3 by chance whenever the scores carry little membership signal (a strongly private
    run): a chosen on that noise is no better than 0.3 in expectation and worse about half the
    time, so without evidence (including no resample with both members and non-members) the
    paper's value stays.

    Falls back to the paper's a = 0.3 when the pseudo-targets hold no member or fewer than
    `min_non_members` non-members. `log_prob` and `score` are passed to `rmia_scores`.
    """
    truth = [_np(t.is_member).astype(bool) for t in trials]
    pooled = np.concatenate(truth) if trials else np.zeros(0, bool)
    members, non_members = int(pooled.sum()), int((~pooled).sum())
    if members == 0 or non_members < max(min_non_members, 1):
        return RmiaA(RMIA_PAPER_A, RMIA_A_PAPER, {}, members, non_members)
    scores, criterion, ranks = {}, {}, {}
    for a in sorted(set(map(float, grid)) | {RMIA_PAPER_A}):
        scores[a] = [rmia_scores(t.prob, t.reference_prob, t.population_prob, t.population_reference_prob,
                                 gamma=gamma, a=a, reference_out=t.reference_out, log_prob=log_prob, score=score)
                     for t in trials]
        pooled_scores = np.concatenate(scores[a])
        criterion[a] = low_fpr_tpr(pooled_scores, pooled)
        ranks[a] = (criterion[a], float(roc_auc_score(pooled, pooled_scores)), -abs(a - RMIA_PAPER_A))
    best = max(ranks, key=ranks.__getitem__)
    if best != RMIA_PAPER_A and resamples > 0:
        rng = np.random.default_rng(seed)
        gains = []
        for _ in range(resamples):
            pick = rng.integers(0, len(trials), len(trials))
            picked = np.concatenate([truth[i] for i in pick])
            if picked.all() or not picked.any():
                continue
            gains.append(low_fpr_tpr(np.concatenate([scores[best][i] for i in pick]), picked)
                         - low_fpr_tpr(np.concatenate([scores[RMIA_PAPER_A][i] for i in pick]), picked))
        if not gains or criterion[best] - criterion[RMIA_PAPER_A] <= RMIA_A_EVIDENCE * float(np.std(gains)):
            best = RMIA_PAPER_A
    return RmiaA(best, RMIA_A_CHOSEN, criterion, members, non_members)


# ------------------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class MembershipMetrics:
    """One attack's result: point estimates (from scikit-learn's ROC), percentile-bootstrap
    intervals, and a downsampled ROC for log-log plots. `as_dict()` is JSON-ready."""

    auc: float
    auc_ci: tuple[float, float] | None
    fprs: tuple[float, ...]
    tpr: tuple[float, ...]
    tpr_ci: tuple[tuple[float, float] | None, ...]
    balanced_accuracy: float
    balanced_accuracy_ci: tuple[float, float] | None
    members: int
    non_members: int
    roc_fpr: tuple[float, ...]
    roc_tpr: tuple[float, ...]
    confidence: float
    bootstrap: int

    def as_dict(self) -> dict[str, Any]:
        def ci(c: tuple[float, float] | None) -> list[float] | None:
            return None if c is None else [c[0], c[1]]

        out: dict[str, Any] = {"auc": self.auc, "auc_ci": ci(self.auc_ci)}
        for f, t, c in zip(self.fprs, self.tpr, self.tpr_ci):
            out[f"tpr@{f:g}"] = t
            out[f"tpr@{f:g}_ci"] = ci(c)
        out |= {
            "balanced_accuracy": self.balanced_accuracy,
            "balanced_accuracy_ci": ci(self.balanced_accuracy_ci),
            "members": self.members,
            "non_members": self.non_members,
            "confidence": self.confidence,
            "bootstrap": self.bootstrap,
            "roc": {"fpr": list(self.roc_fpr), "tpr": list(self.roc_tpr)},
        }
        return out


def _tpr_at(fpr: NDArray, tpr: NDArray, target: float) -> NDArray:
    """Largest TPR among ROC points with FPR ≤ target (along the last axis). Conservative: the
    ROC is a step function of the threshold, and interpolating between steps would report a TPR
    no single threshold achieves. The (0, 0) point always qualifies."""
    return np.where(fpr <= target, tpr, 0.0).max(axis=-1)


def _curves(member_counts: NDArray, non_member_counts: NDArray) -> tuple[NDArray, NDArray]:
    """ROC (fpr, tpr) at every distinct score as threshold ("≥ t" is member), from histogram
    counts over the sorted unique scores [B, U]; rows are bootstrap resamples. Prepends (0, 0)."""
    tp = np.cumsum(member_counts[..., ::-1], axis=-1)
    fp = np.cumsum(non_member_counts[..., ::-1], axis=-1)
    zero = np.zeros(tp.shape[:-1] + (1,))
    tpr = np.concatenate([zero, tp / tp[..., -1:]], axis=-1)
    fpr = np.concatenate([zero, fp / fp[..., -1:]], axis=-1)
    return fpr, tpr


def _statistics(fpr: NDArray, tpr: NDArray, fprs: Sequence[float]) -> NDArray:
    """[..., 2 + len(fprs)]: AUC (trapezoid over the step ROC = Mann–Whitney with ties ½, what
    roc_auc_score computes), balanced accuracy max_t ½(TPR + 1 − FPR), and TPR at each FPR."""
    auc = (np.diff(fpr, axis=-1) * (tpr[..., 1:] + tpr[..., :-1]) / 2).sum(axis=-1)
    bal = ((tpr + 1 - fpr) / 2).max(axis=-1)
    return np.stack([auc, bal] + [_tpr_at(fpr, tpr, f) for f in fprs], axis=-1)


def _bootstrap(
    codes_m: NDArray[np.int64], codes_n: NDArray[np.int64], levels: int, fprs: Sequence[float], draws: int, seed: int
) -> NDArray:
    """Statistics on `draws` resamples, members and non-members resampled separately (a
    stratified bootstrap: the class sizes are fixed by the experiment, not random). Each
    resample is a histogram over the U unique scores built with one bincount, so a chunk of
    resamples is one [chunk, U] array — no loop over resamples beyond memory-bounded chunks."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(draws, 4_000_000 // max(levels, 1)))
    out = []
    for start in range(0, draws, chunk):
        b = min(chunk, draws - start)
        offset = (np.arange(b) * levels)[:, None]

        def hist(codes: NDArray[np.int64]) -> NDArray:
            pick = codes[rng.integers(0, codes.size, size=(b, codes.size))] + offset
            return np.bincount(pick.ravel(), minlength=b * levels).reshape(b, levels).astype(np.float64)

        out.append(_statistics(*_curves(hist(codes_m), hist(codes_n)), fprs))
    return np.concatenate(out, axis=0)


def _downsample(fpr: NDArray, tpr: NDArray, non_members: int) -> tuple[NDArray, NDArray]:
    """At most ROC_POINTS points of the ROC for storage: for each FPR on a grid (half log-spaced
    from 1/non_members, for log-log plots; half linear), the last ROC point at or below it — the
    same conservative step reading as `_tpr_at`. Endpoints are kept."""
    if fpr.size <= ROC_POINTS:
        return fpr, tpr
    half = ROC_POINTS // 2 - 1
    grid = np.concatenate([np.geomspace(1.0 / max(non_members, 1), 1.0, half), np.linspace(0.0, 1.0, half)])
    idx = np.unique(np.concatenate([[0, fpr.size - 1], np.searchsorted(fpr, grid, side="right") - 1]))
    return fpr[idx], tpr[idx]


def membership_metrics(
    scores: ArrayLike,
    is_member: ArrayLike,
    fprs: Sequence[float] = (0.001, 0.01),
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> MembershipMetrics:
    """AUC, TPR at each FPR in `fprs`, best-threshold balanced accuracy, each with a percentile
    bootstrap interval at `confidence` (bootstrap = 0 gives none), and the ROC points.

    Point estimates and stored ROC come from scikit-learn (`roc_auc_score`, `roc_curve` with
    `drop_intermediate=False`, so the step function is exact). TPR at FPR reads the step ROC
    conservatively (`_tpr_at`), as Carlini et al. (2022, §III-C) report it. The percentile
    bootstrap resamples members and non-members separately; it is the common choice in the MIA
    literature and is checked by a null-calibration test (no-signal scores: the AUC interval
    covers 0.5, the TPR@1% interval covers 0.01).
    """
    s = _f64(scores).ravel()
    m = _np(is_member).astype(bool).ravel()
    if s.shape != m.shape:
        raise ValueError(f"scores {s.shape} and is_member {m.shape} differ in length")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    n_m, n_n = int(m.sum()), int((~m).sum())
    if n_m == 0 or n_n == 0:
        raise ValueError("need at least one member and one non-member")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    fprs = tuple(float(f) for f in fprs)

    fpr, tpr, _ = roc_curve(m, s, drop_intermediate=False)
    auc = float(roc_auc_score(m, s))
    tprs = tuple(float(_tpr_at(fpr, tpr, f)) for f in fprs)
    balanced = float(((tpr + 1 - fpr) / 2).max())

    cis: list[tuple[float, float] | None] = [None] * (2 + len(fprs))
    if bootstrap > 0:
        levels, codes = np.unique(s, return_inverse=True)
        stats = _bootstrap(codes[m], codes[~m], levels.size, fprs, bootstrap, seed)
        q = np.quantile(stats, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)
        cis = [(float(q[0, j]), float(q[1, j])) for j in range(stats.shape[1])]

    roc_f, roc_t = _downsample(fpr, tpr, n_n)
    return MembershipMetrics(
        auc=auc,
        auc_ci=cis[0],
        fprs=fprs,
        tpr=tprs,
        tpr_ci=tuple(cis[2:]),
        balanced_accuracy=balanced,
        balanced_accuracy_ci=cis[1],
        members=n_m,
        non_members=n_n,
        roc_fpr=tuple(float(v) for v in roc_f),
        roc_tpr=tuple(float(v) for v in roc_t),
        confidence=confidence,
        bootstrap=bootstrap,
    )
