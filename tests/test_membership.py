"""Membership-inference scores and metrics (issue 5): pure functions on synthetic outputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from sklearn.metrics import roc_auc_score, roc_curve

from privaudit.attacks.membership.scores import (
    RMIA_A_CHOSEN,
    RMIA_A_PAPER,
    ROC_POINTS,
    PseudoTarget,
    _bootstrap,
    _curves,
    _log_marginal,
    _statistics,
    choose_rmia_a,
    lira_offline_scores,
    logit_confidence,
    loss_scores,
    low_fpr_tpr,
    membership_metrics,
    rmia_scores,
)


def labels(n: int) -> np.ndarray:
    return np.arange(2 * n) < n


# ------------------------------------------------------------------------------------ metrics


def test_null_calibration_across_seeds():
    """Issue 5 acceptance 3: no-signal scores → the AUC interval covers 0.5 and the TPR@1%
    interval covers 0.01 in at least 18 of 20 seeds (95 % intervals)."""
    n, auc_hits, tpr_hits = 1000, 0, 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        r = membership_metrics(rng.normal(size=2 * n), labels(n), seed=seed)
        auc_hits += r.auc_ci[0] <= 0.5 <= r.auc_ci[1]
        lo, hi = r.tpr_ci[1]
        tpr_hits += lo <= 0.01 <= hi
    assert auc_hits >= 18, auc_hits
    assert tpr_hits >= 18, tpr_hits


def test_separable_and_inverted():
    n = 2000
    s = np.concatenate([np.linspace(10, 11, n), np.linspace(0, 1, n)])
    r = membership_metrics(s, labels(n), bootstrap=50)
    assert r.auc == pytest.approx(1.0)
    assert r.tpr[0] == pytest.approx(1.0) and r.tpr[1] == pytest.approx(1.0)
    assert r.balanced_accuracy == pytest.approx(1.0)
    assert r.auc_ci[0] == pytest.approx(1.0)
    inv = membership_metrics(-s, labels(n), bootstrap=50)
    assert inv.auc == pytest.approx(0.0)
    assert inv.tpr[1] == pytest.approx(0.0)
    assert inv.balanced_accuracy == pytest.approx(0.5)


def test_tpr_at_fpr_is_conservative_step_reading():
    """Members 1..4 at scores 5,4,2,1; non-members at 3 and 0 (of 2): FPR jumps 0 → 0.5 at
    score 3, so TPR at FPR ≤ 0.4 is the TPR before that step (2 of 4), not an interpolation."""
    s = np.array([5, 4, 2, 1, 3, 0], dtype=float)
    m = np.array([1, 1, 1, 1, 0, 0], dtype=bool)
    r = membership_metrics(s, m, fprs=(0.4, 0.5), bootstrap=0)
    assert r.tpr == (0.5, 1.0)
    assert r.auc_ci is None and r.tpr_ci == (None, None)
    assert r.balanced_accuracy == pytest.approx((1.0 + 0.5) / 2)


def test_bootstrap_statistics_match_sklearn_on_the_sample_itself():
    """The vectorised ROC (used for every resample) equals scikit-learn's on unresampled data,
    ties included."""
    rng = np.random.default_rng(3)
    s = np.round(rng.normal(size=600) + 0.5 * labels(300), 1)  # many ties
    m = labels(300)
    levels, codes = np.unique(s, return_inverse=True)
    counts = [np.bincount(codes[sel], minlength=levels.size)[None].astype(float) for sel in (m, ~m)]
    stats = _statistics(*_curves(*counts), (0.01, 0.1))[0]
    fpr, tpr, _ = roc_curve(m, s)
    assert stats[0] == pytest.approx(roc_auc_score(m, s), abs=1e-12)
    assert stats[1] == pytest.approx(((tpr + 1 - fpr) / 2).max(), abs=1e-12)
    assert stats[3] == pytest.approx(tpr[fpr <= 0.1].max(), abs=1e-12)
    boot = _bootstrap(codes[m], codes[~m], levels.size, (0.01,), 64, seed=0)
    assert boot.shape == (64, 3) and boot[:, 0].std() > 0


def test_as_dict_is_json_with_the_promised_keys():
    rng = np.random.default_rng(0)
    n = 2000
    r = membership_metrics(rng.normal(size=2 * n) + labels(n), torch.tensor(labels(n)), bootstrap=20)
    d = json.loads(json.dumps(r.as_dict()))
    for key in ("auc", "auc_ci", "tpr@0.001", "tpr@0.001_ci", "tpr@0.01", "tpr@0.01_ci",
                "balanced_accuracy", "balanced_accuracy_ci", "members", "non_members", "roc"):
        assert key in d
    assert d["members"] == d["non_members"] == n
    fpr, tpr = np.array(d["roc"]["fpr"]), np.array(d["roc"]["tpr"])
    assert 2 < fpr.size <= ROC_POINTS
    assert fpr[0] == 0 and fpr[-1] == 1 and tpr[-1] == 1
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert 0.7 < d["auc"] < 0.8 and d["auc_ci"][0] < d["auc"] < d["auc_ci"][1]


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError):
        membership_metrics([1.0, 2.0], [True, True])
    with pytest.raises(ValueError):
        membership_metrics([1.0, np.nan], [True, False])


# ------------------------------------------------------------------------------------- scores


def test_loss_scores_rank_low_loss_as_member():
    r = membership_metrics(loss_scores(np.array([0.1, 0.2, 1.0, 2.0])), [1, 1, 0, 0], bootstrap=0)
    assert r.auc == 1.0


def test_logit_confidence_matches_float64_and_is_finite_when_confident():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 50, 5))
    y = rng.integers(0, 5, size=50)
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    p_y = np.take_along_axis(p, np.broadcast_to(y[:, None], (3, 50, 1)), -1)[..., 0]
    np.testing.assert_allclose(logit_confidence(logits, y), np.log(p_y) - np.log1p(-p_y), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(logit_confidence(torch.tensor(logits, dtype=torch.float32), torch.tensor(y)),
                               np.log(p_y) - np.log1p(-p_y), atol=1e-5)
    big = np.zeros((2, 5))
    big[:, 0] = 50.0
    phi = logit_confidence(big, np.array([0, 1]))
    assert np.all(np.isfinite(phi))
    np.testing.assert_allclose(phi, [50.0 - np.log(4.0), -np.log(np.exp(50.0) + 3.0)])


def _lira_world(n: int, k: int, shift: float, seed: int):
    """Per-example difficulty μ_i varies widely; reference OUT models scatter around μ_i with
    σ = 1; the target adds `shift` on members. A global threshold on φ (LOSS-like) is swamped
    by the difficulty spread; LiRA's per-example calibration is not."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(scale=4.0, size=2 * n)
    ref = mu + rng.normal(size=(k, 2 * n))
    target = mu + rng.normal(size=2 * n) + shift * labels(n)
    return target, ref


@pytest.mark.parametrize("k, fixed", [(16, False), (2, True)])
def test_lira_offline_beats_global_threshold(k, fixed):
    target, ref = _lira_world(1000, k, 2.0, seed=1)
    m = labels(1000)
    lira = membership_metrics(lira_offline_scores(target, ref, fixed_variance=fixed), m, bootstrap=0)
    baseline = membership_metrics(target, m, bootstrap=0)
    assert lira.auc > 0.85 and lira.auc > baseline.auc + 0.15
    assert lira.tpr[1] > baseline.tpr[1]


def test_lira_fixed_variance_pools_within_example_spread():
    """With K = 2, fixed_variance scores equal a per-example z-score with the pooled σ, and the
    per-example path (σ from 2 points) is what fixed variance is there to avoid."""
    target, ref = _lira_world(500, 2, 0.0, seed=2)
    sigma = np.sqrt(((ref - ref.mean(0)) ** 2).sum() / ref.shape[1])
    assert sigma == pytest.approx(1.0, rel=0.15)
    z = (target - ref.mean(0)) / sigma
    survival = np.array([0.5 * math.erfc(v / math.sqrt(2)) for v in z])
    np.testing.assert_allclose(lira_offline_scores(target, ref, fixed_variance=True), -np.log(survival), rtol=1e-9)
    assert np.all(np.isfinite(lira_offline_scores(target + 100, ref, fixed_variance=True)))
    with pytest.raises(ValueError):
        lira_offline_scores(target, ref[:1])


def _rmia_world(n: int, m: int, k: int, boost: float, seed: int):
    """Correct-class probabilities: per-example difficulty shared by all models, model noise on
    top, and `boost` added to the target's logit on members."""
    rng = np.random.default_rng(seed)
    difficulty_x = rng.normal(size=2 * n)
    difficulty_z = rng.normal(size=m)

    def model(d, extra=0.0):
        return 1 / (1 + np.exp(-(d + rng.normal(scale=0.5, size=d.shape) + extra)))

    target_x = model(difficulty_x, boost * labels(n))
    ref_x = np.stack([model(difficulty_x) for _ in range(k)])
    target_z = model(difficulty_z)
    ref_z = np.stack([model(difficulty_z) for _ in range(k)])
    return target_x, ref_x, target_z, ref_z


def test_rmia_null_scores_uniform():
    tx, rx, tz, rz = _rmia_world(1000, 2000, 4, boost=0.0, seed=0)
    s = rmia_scores(tx, rx, tz, rz, gamma=1.0)
    assert s.min() >= 0 and s.max() <= 1
    r = membership_metrics(s, labels(1000), bootstrap=200)
    assert r.auc_ci[0] <= 0.5 <= r.auc_ci[1]
    assert np.histogram(s, bins=5, range=(0, 1))[0].min() > 0.12 * s.size


def test_rmia_detects_boosted_members():
    tx, rx, tz, rz = _rmia_world(1000, 2000, 4, boost=3.0, seed=1)
    assert membership_metrics(rmia_scores(tx, rx, tz, rz), labels(1000), bootstrap=0).auc > 0.9
    offline = rmia_scores(tx, rx, tz, rz, a=0.3)
    assert membership_metrics(offline, labels(1000), bootstrap=0).auc > 0.9


def test_rmia_count_matches_pairwise_definition():
    """score = "count" equals eq. 4 evaluated by brute force over all (x, z) pairs, from
    probabilities or from their logs."""
    tx, rx, tz, rz = _rmia_world(20, 50, 3, boost=1.0, seed=4)
    for gamma, a in ((1.0, None), (2.0, 0.5)):
        def marginal(r):
            mean = r.mean(0)
            return mean if a is None else 0.5 * (1 + a) * mean + 0.5 * (1 - a)
        lr = (tx / marginal(rx))[:, None] / (tz / marginal(rz))[None, :]
        np.testing.assert_allclose(rmia_scores(tx, rx, tz, rz, gamma=gamma, a=a, score="count"), (lr >= gamma).mean(1))
        logs = [np.log(v) for v in (tx, rx, tz, rz)]
        np.testing.assert_allclose(rmia_scores(*logs, gamma=gamma, a=a, score="count", log_prob=True),
                                   (lr >= gamma).mean(1))
    with pytest.raises(ValueError, match="log probabilities must be <= 0"):
        rmia_scores(tx, rx, tz, rz, log_prob=True)
    with pytest.raises(ValueError, match="score must be one of"):
        rmia_scores(tx, rx, tz, rz, score="mean")


def test_rmia_refined_score_breaks_the_counts_ties_and_keeps_its_order():
    """With m = 20 population records the count takes 21 values for 2000 records; the refined
    score gives each record its own value, never reorders two records the count separates, and
    within a tied block orders them by the ratio Pr(x|θ)/Pr(x), as eq. 4 does between blocks."""
    tx, rx, tz, rz = _rmia_world(1000, 20, 4, boost=1.0, seed=6)
    for a in (None, 0.3):
        count = rmia_scores(tx, rx, tz, rz, a=a, score="count")
        refined = rmia_scores(tx, rx, tz, rz, a=a)
        assert len(np.unique(count)) <= 21 and len(np.unique(refined)) == refined.size
        assert 0 < refined.min() and refined.max() < 1
        separated = count[:, None] > count[None, :]
        assert np.all((refined[:, None] > refined[None, :])[separated])
        mean = rx.mean(0)
        ratio = tx / (mean if a is None else 0.65 * mean + 0.35)
        np.testing.assert_array_equal(np.argsort(refined), np.argsort(ratio))


def test_rmia_tpr_at_low_fpr_is_not_decided_by_a_tied_block():
    """No signal, m = 20: the count ties about 1/21 of the non-members at its top value, so no
    threshold has an FPR between 0 and 5 % and the TPR read at 1 % FPR is 0. The refined score
    reads the chance value 0.01 (its interval covers it)."""
    tx, rx, tz, rz = _rmia_world(2000, 20, 4, boost=0.0, seed=8)
    count = membership_metrics(rmia_scores(tx, rx, tz, rz, score="count"), labels(2000), bootstrap=0)
    assert count.tpr[1] == 0.0
    refined = membership_metrics(rmia_scores(tx, rx, tz, rz), labels(2000), bootstrap=200)
    low, high = refined.tpr_ci[1]
    assert low <= 0.01 <= high and refined.tpr[1] > 0


def test_rmia_keeps_apart_records_whose_probabilities_round_to_1_or_0():
    """Models confident to float64's end: log Pr(·|θ) about −900, which exp rounds to 0, or about
    −1e-20, which exp rounds to exactly 1. From probabilities every record ties. From their logs
    (log_prob) each record of the first kind has its own score, and those of the second kind are
    told apart by the count (their ratios differ by about 1e-20, below what the added tie-break
    term resolves); the log marginal is exact at both ends."""
    rng = np.random.default_rng(9)
    far = [-rng.uniform(800, 1000, shape) for shape in (400, (4, 400), 100, (4, 100))]
    near = [-(10.0 ** rng.uniform(-30, -18, shape)) for shape in (400, (4, 400), 100, (4, 100))]
    for logs in (far, near):
        assert len(np.unique(rmia_scores(*[np.exp(v) for v in logs], a=0.3))) == 1
    assert len(np.unique(rmia_scores(*far, a=0.3, log_prob=True))) == 400
    count = rmia_scores(*near, a=0.3, log_prob=True, score="count")
    assert len(np.unique(count)) > 50
    assert len(np.unique(rmia_scores(*near, a=0.3, log_prob=True))) == len(np.unique(count))
    eps = 10.0 ** rng.uniform(-30, -18, (4, 50))
    np.testing.assert_allclose(_log_marginal(-eps, 0.3), -0.65 * eps.mean(0), rtol=1e-9)
    np.testing.assert_allclose(_log_marginal(-eps, None), -eps.mean(0), rtol=1e-9)
    low = -rng.uniform(800, 1000, (4, 50))
    np.testing.assert_allclose(_log_marginal(low, None), logsumexp(low, axis=0) - np.log(4), rtol=1e-12)
    np.testing.assert_allclose(_log_marginal(low, 0.3), np.log(0.35), rtol=1e-12)


def test_rmia_averages_over_the_references_out_of_each_record():
    """reference_out: Pr(x) is the mean over the references that did not train on x (all of them
    by default, so an all-True mask changes nothing)."""
    tx, rx, tz, rz = _rmia_world(20, 50, 4, boost=1.0, seed=5)
    out = np.random.default_rng(0).random(rx.shape) < 0.6
    out[0] = True
    for a in (None, 0.3):
        np.testing.assert_array_equal(rmia_scores(tx, rx, tz, rz, a=a, reference_out=np.ones_like(out)),
                                      rmia_scores(tx, rx, tz, rz, a=a))
        mean = (rx * out).sum(0) / out.sum(0)
        marginal = mean if a is None else 0.65 * mean + 0.35
        mz = rz.mean(0) if a is None else 0.65 * rz.mean(0) + 0.35
        lr = (tx / marginal)[:, None] / (tz / mz)[None, :]
        np.testing.assert_allclose(rmia_scores(tx, rx, tz, rz, a=a, reference_out=out, score="count"),
                                   (lr >= 1).mean(1))
    with pytest.raises(ValueError, match="reference model that did not train"):
        rmia_scores(tx, rx, tz, rz, reference_out=np.zeros_like(out))


def test_low_fpr_tpr_breaks_ties_at_random():
    """All scores tied: the ROC is the chance diagonal, so the mean TPR over the FPR range is the
    mean of the FPRs; a perfect score gives 1."""
    m = labels(500)
    grid = np.geomspace(0.001, 0.1, 32)
    assert low_fpr_tpr(np.zeros(1000), m) == pytest.approx(grid.mean())
    assert low_fpr_tpr(m.astype(float), m) == pytest.approx(1.0)


def _offline_world(n: int, k: int, boost: float, noise: float, seed: int):
    """`_rmia_world` with the reference models' own training data: candidates (n members of the
    target, n records out of every model), m = 2n population records and a pool of 2n records,
    each reference model training on a random half of the pool (its logit raised by `boost` there,
    as the target's on its members). Returns the membership truth, the real attack's inputs, and
    every reference model as a pseudo-target against the others."""
    rng = np.random.default_rng(seed)
    pool = 2 * n

    def model(difficulty, trained):
        return 1 / (1 + np.exp(-(difficulty + rng.normal(scale=noise, size=difficulty.shape) + boost * trained)))

    d_x, d_z, d_pool = rng.normal(size=2 * n), rng.normal(size=2 * n), rng.normal(size=pool)
    trained = np.stack([rng.permutation(pool) < pool // 2 for _ in range(k)])
    real = (model(d_x, labels(n)), np.stack([model(d_x, 0) for _ in range(k)]), model(d_z, 0),
            np.stack([model(d_z, 0) for _ in range(k)]))
    on_pool = np.stack([model(d_pool, trained[j]) for j in range(k)])
    trials = []
    for j in range(k):
        others = np.arange(k) != j
        out = ~trained[others]
        keep = out.any(axis=0)
        trials.append(PseudoTarget(on_pool[j, keep], trained[j, keep], on_pool[others][:, keep], out[:, keep],
                                   real[3][j], real[3][others]))
    return labels(n), real, trials


@pytest.mark.parametrize("boost, noise", [(1.0, 0.3), (1.5, 0.7)])
def test_rmia_a_chosen_on_reference_models_finds_at_least_the_papers_tpr(boost, noise):
    """Issue 16 acceptance on synthetic beds: RMIA with a chosen on the reference models reaches at
    least the TPR at 1 % FPR of a = 0.3 on the same run, and far more than without the offline
    correction (a = 1). In the first bed the best a is above 0.3, in the second below it."""
    truth, real, trials = _offline_world(2000, 8, boost, noise, seed=0)
    chosen = choose_rmia_a(trials)
    assert chosen.how == RMIA_A_CHOSEN and chosen.a != 0.3
    assert chosen.members > 4000 and chosen.non_members > 4000 and set(chosen.criterion) >= {0.0, 0.3, 1.0}
    tpr = {a: membership_metrics(rmia_scores(*real, a=a), truth, bootstrap=0).tpr[1] for a in (chosen.a, 0.3, None)}
    assert tpr[chosen.a] >= tpr[0.3]
    assert tpr[chosen.a] > 1.5 * tpr[None]


def test_rmia_a_stays_the_papers_without_evidence_for_another():
    """No membership signal at all: some a beats 0.3 on the pseudo-targets by chance, but not by
    two standard errors of the difference, so a stays 0.3 (chosen on the reference models)."""
    _, _, trials = _offline_world(500, 8, 0.0, 0.5, seed=2)
    chosen = choose_rmia_a(trials)
    assert max(chosen.criterion.values()) > chosen.criterion[0.3]
    assert (chosen.a, chosen.how) == (0.3, RMIA_A_CHOSEN)
    assert choose_rmia_a(trials, resamples=0).a != 0.3


def test_rmia_a_falls_back_to_the_papers_value():
    _, _, trials = _offline_world(100, 4, 1.0, 0.3, seed=1)
    assert choose_rmia_a([]).a == 0.3 and choose_rmia_a([]).how == RMIA_A_PAPER == "paper's value 0.3"
    few = [PseudoTarget(t.prob[:20], t.is_member[:20], t.reference_prob[:, :20], t.reference_out[:, :20],
                        t.population_prob, t.population_reference_prob) for t in trials]
    assert choose_rmia_a(few).how == RMIA_A_PAPER
    assert choose_rmia_a(trials).how == RMIA_A_CHOSEN
