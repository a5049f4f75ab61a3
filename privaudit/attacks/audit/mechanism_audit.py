"""Empirical DP lower bounds for mechanisms: the smallest ε (or δ) that observed outputs force,
by the hypothesis-testing bounds of `privaudit.attacks.audit.bounds` (each at confidence C).

The test is chosen on a held-out split (`SELECT_FRACTION` of the samples) and its rates are
counted on the fresh rest, so only that one test meets the estimation samples: comparing many
thresholds (or pairs, or classifiers) on the held-out split needs no correction, because the
estimation samples are independent of the choice (Bichsel et al. 2021, DP-Sniper; Lu et al.
2022). A test is a threshold on a scalar score, either side: the mechanism's statistic (a
sufficient statistic for the pair, summed over releases), for finite statistics the log-
likelihood ratio of each outcome estimated on the held-out split (so the candidate sets are the
likelihood-ratio events, ordered as the held-out counts order them), or a logistic-regression
classifier fitted on the held-out split (DP-Sniper's learned test) when the mechanism has none.

`audit` runs the whole job: the neighbour search (each candidate pair scored on pilot samples,
the best re-estimated on fresh ones), T releases of the same input observed together, the exact
privacy curve of the chosen pair where the mechanism's law is known (PMF → PLD), the sound bound
over the adjacency, and a verdict on the mechanism's claim. Nothing here imports torch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from privaudit.attacks.audit.bounds import SELECT_FRACTION, Bound, Target, bound_test, choose_test
from privaudit.attacks.audit.mechanisms import (NORMS, ROUNDING_DECIMALS, Mechanism, MechanismClaim, Pair, Setting, Sound, build,
                                      privacy_curve)
from privaudit.attacks.audit.verdict import Verdict, decide
from privaudit.accounting import VACUOUS, Claim
from privaudit.errors import ConfigError
from privaudit.limits import MAX_SEED, require

TestKind = Literal["auto", "classifier"]

PILOT_FRACTION = 0.1
"""Pilot samples per candidate pair, as a share of the final samples (at least `_MIN_PILOT`)."""
_MIN_PILOT = 2_000
_CHUNK_VALUES = 1 << 22
_CLASSIFIER_ROWS = 200_000
_SAMPLED_VALUES = 1 << 25


# ---------------------------------------------------------------------------------------------
# Scores: what a test thresholds


Scorer = Callable[[np.ndarray], np.ndarray]


def _encode(features: list[np.ndarray]) -> list[np.ndarray]:
    """Rows of a finite statistic → one integer per row, the same code for the same row in every
    array: each column's values are numbered (1-D `np.unique`, far faster than rows with
    axis=0), then combined in mixed radix. Label-free, so it tells the test nothing."""
    joined = np.concatenate(features)
    codes, size = np.zeros(len(joined), dtype=np.int64), 1
    for column in joined.T:
        values, numbers = np.unique(column, return_inverse=True)
        codes += numbers.reshape(-1) * size
        size *= len(values)
    return np.split(codes, np.cumsum([len(f) for f in features])[:-1])


def _first_column(features: np.ndarray) -> np.ndarray:
    """A scalar statistic is its own score."""
    return features[:, 0]


def _likelihood_ratio_scorer(codes_x: np.ndarray, codes_xp: np.ndarray) -> Scorer:
    """Each outcome's log P̂(x′)/P̂(x) from held-out counts (½ added to each count, so outcomes
    seen under one input only get a large finite score); outcomes never seen score 0."""
    seen = np.union1d(codes_x, codes_xp)
    count_x = np.bincount(np.searchsorted(seen, codes_x), minlength=len(seen))
    count_xp = np.bincount(np.searchsorted(seen, codes_xp), minlength=len(seen))
    table = np.log((count_xp + 0.5) / len(codes_xp)) - np.log((count_x + 0.5) / len(codes_x))

    def score(codes: np.ndarray) -> np.ndarray:
        where = np.minimum(np.searchsorted(seen, codes), len(seen) - 1)
        return np.where(seen[where] == codes, table[where], 0.0)

    return score


def _classifier_scorer(features_x: np.ndarray, features_xp: np.ndarray, rng: np.random.Generator) -> Scorer:
    """DP-Sniper's learned test: logistic regression (standardised features) fitted on the
    held-out split to tell x′ from x; its decision value is the score."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = min(len(features_x), len(features_xp), _CLASSIFIER_ROWS)
    pick_x = rng.choice(len(features_x), rows, replace=False)
    pick_xp = rng.choice(len(features_xp), rows, replace=False)
    inputs = np.concatenate([features_x[pick_x], features_xp[pick_xp]])
    labels = np.concatenate([np.zeros(rows), np.ones(rows)])
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(inputs, labels)
    return model.decision_function


# ---------------------------------------------------------------------------------------------
# Observing a mechanism


def _has_statistic(mechanism: Mechanism) -> bool:
    return type(mechanism).statistic is not Mechanism.statistic


def method_for(mechanism: Mechanism, dim: int, test: TestKind) -> str:
    """Which test family an audit of `mechanism` uses: "likelihood ratio" on a finite statistic
    (or finite outputs in dimension 1), "threshold" on a scalar statistic (or the output in
    dimension 1), else — or when `test` asks for it — "classifier"."""
    if test == "classifier" or not (_has_statistic(mechanism) or dim == 1):
        return "classifier"
    return "likelihood ratio" if mechanism.finite else "threshold"


def _features(mechanism: Mechanism, outputs: np.ndarray, pair: Pair, method: str) -> np.ndarray:
    """What the test sees of each release: the mechanism's statistic, or for a classifier the
    output beside its distances to x and x′ (DP-Sniper's feature map, which holds the
    log-likelihood ratio of Laplace and Gaussian noise as a linear function); the distances are
    rounded for the reason `privaudit.attacks.audit.mechanisms.ROUNDING_DECIMALS` gives."""
    if method != "classifier" and _has_statistic(mechanism):
        return mechanism.statistic(outputs, pair)
    if method != "classifier":
        return outputs
    folded = np.concatenate([np.abs(outputs - pair.x), np.abs(outputs - pair.x_prime)], axis=1)
    return np.concatenate([outputs, np.round(folded, ROUNDING_DECIMALS)], axis=1)


def observe(mechanism: Mechanism, pair: Pair, n: int, releases: int, rng: np.random.Generator,
            method: str) -> tuple[np.ndarray, np.ndarray]:
    """Features [n, k] of n observations of M(x) and of M(x′), each observation being `releases`
    independent releases of the same input seen together (their per-release features summed:
    every statistic here is additive over independent releases, as a log-likelihood ratio is).
    Sampled in chunks of at most 2^22 values."""
    rows = max(1, _CHUNK_VALUES // (releases * len(pair.x)))
    parts: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for start in range(0, n, rows):
        count = min(rows, n - start)
        for source, kept in zip((pair.x, pair.x_prime), parts):
            outputs = mechanism.sample(source, count * releases, rng)
            features = _features(mechanism, outputs, pair, method)
            kept.append(features.reshape(count, releases, -1).sum(axis=1))
    return np.concatenate(parts[0]), np.concatenate(parts[1])


def lower_bounds(features_x: np.ndarray, features_xp: np.ndarray, method: str, targets: list[tuple[Target, float]],
                 confidence: float, rng: np.random.Generator,
                 select_fraction: float = SELECT_FRACTION) -> list[Bound]:
    """One bound per (target, at): its test chosen on the first `select_fraction` of each
    input's observations, its rates counted on the rest (module docstring)."""
    if method == "likelihood ratio":
        features_x, features_xp = _encode([features_x, features_xp])
    held_x = max(1, int(len(features_x) * select_fraction))
    held_xp = max(1, int(len(features_xp) * select_fraction))
    if held_x >= len(features_x) or held_xp >= len(features_xp):
        raise ConfigError("too few samples to hold out a split for choosing the test")
    if method == "likelihood ratio":
        scorer: Scorer = _likelihood_ratio_scorer(features_x[:held_x], features_xp[:held_xp])
    elif method == "classifier":
        scorer = _classifier_scorer(features_x[:held_x], features_xp[:held_xp], rng)
    else:
        scorer = _first_column
    selected = scorer(features_x[:held_x]), scorer(features_xp[:held_xp])
    fresh = scorer(features_x[held_x:]), scorer(features_xp[held_xp:])
    bounds = []
    for target, at in targets:
        orientation, threshold = choose_test(*selected, target, at, confidence)
        bounds.append(bound_test(*fresh, orientation, threshold, target, at, confidence, method))
    return bounds


def estimate(mechanism: Mechanism, pair: Pair, samples: int, releases: int, targets: list[tuple[Target, float]],
             confidence: float, rng: np.random.Generator, test: TestKind = "auto") -> list[Bound]:
    """The black-box estimator for one pair: `samples` observations of each input, each of
    `releases` releases; returns one `Bound` per (target, at)."""
    method = method_for(mechanism, len(pair.x), test)
    features = observe(mechanism, pair, samples, releases, rng, method)
    return lower_bounds(*features, method, targets, confidence, rng)


# ---------------------------------------------------------------------------------------------
# Verdicts


def judge(audited: MechanismClaim | None, title: str, pair: Pair, eps_bound: Bound, delta_bound: Bound) -> Verdict:
    """The verdict on the claim the mechanism states, by the one rule of `privaudit.attacks.audit.verdict`: the
    bound exceeds the claim when, at the claimed ε, the outputs force a δ above the claimed δ.

    A vacuous claim (δ ≥ 1 or ε = ∞: `privaudit.accounting.VACUOUS`) is consistent with every
    output, and the reason says first that it claims no privacy, as a campaign's verdict carries
    the finding beside it.

    Not evaluable when no claim is stated, when the statement cannot be compared with one
    release (then a stated reading is compared, and said to be a reading), or when the pair the
    search found lies outside the claim's adjacency (such a pair cannot refute it)."""
    confidence = f"{delta_bound.confidence:.0%} confidence"
    if audited is None:
        return Verdict("not evaluable", None, f"no DP claim is stated for the {title}; the bounds stand alone")
    statement = audited.statement
    distance = pair.distance(audited.norm)
    outside = (f"the most distinguishable pair found has ‖x − x′‖ = {distance:.4g} > 1 in the claim's norm, "
               "outside the claim's adjacency")

    def measured_at(eps: float, delta: float) -> tuple[bool, str]:
        exceeds = delta_bound.value > delta
        return exceeds, (f"at ε = {eps:.4g} the outputs force δ ≥ {delta_bound.value:.4g} ({confidence}), "
                         f"{'above' if exceeds else 'not above'} the claimed δ = {delta:.4g}")

    if audited.unevaluable is not None:
        reason = audited.unevaluable
        if audited.reading is not None and distance <= 1 + 1e-9:
            eps, delta, how = audited.reading
            exceeds, measured = measured_at(eps, delta)
            found = delta_bound.value > 0 or eps_bound.value > 0
            would = "refuted" if exceeds else "consistent" if found else "inconclusive"
            reason += f"; under the reading {how} it would be {would}: {measured}"
        elif audited.reading is not None:
            reason += f"; {outside}, so not even a reading can be compared"
        return Verdict("not evaluable", statement, reason)
    if distance > 1 + 1e-9:
        return Verdict("not evaluable", statement, outside)
    if not math.isclose(delta_bound.at, audited.eps):
        raise ValueError(f"the δ bound is at ε = {delta_bound.at}, the claim at ε = {audited.eps}")
    exceeds, measured = measured_at(audited.eps, audited.delta)
    ratio = None
    if audited.eps > 0:
        measured += (f"; ε_LB = {eps_bound.value:.4g} at δ = {eps_bound.at:.4g} against the claimed "
                     f"ε = {audited.eps:.4g}")
        ratio = eps_bound.value / audited.eps
    vacuous = [text for kind, text in audited.claim.analytic() if kind == VACUOUS]
    if vacuous and not audited.claim.outside():
        return Verdict("consistent", statement, f"a vacuous claim: {vacuous[0]}, so it claims no privacy and no output "
                       f"can refute it; {measured}")
    return decide(audited.claim, statement, exceeds=exceeds,
                  found=delta_bound.value > 0 or eps_bound.value > 0, measured=measured, ratio=ratio)


# ---------------------------------------------------------------------------------------------
# The audit


def default_samples(dim: int, releases: int) -> int:
    """10⁶ observations per input, fewer when each needs more than 32 values (dim × releases >
    32), but at least 10⁴."""
    return int(min(1_000_000, max(10_000, _SAMPLED_VALUES // (dim * releases))))


def _ratio(measured: float, reference: float | None) -> float | None:
    return measured / reference if reference is not None and 0 < reference < math.inf else None


def _safe(value: Any) -> Any:
    """JSON-safe: non-finite floats become the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(item) for item in value]
    return value


@dataclass(frozen=True)
class AuditReport:
    """Everything one audit measured, beside the claim, the exact curve and the sound bound."""

    mechanism: str
    title: str
    params: dict[str, Any]
    adjacency: str
    dim: int
    releases: int
    samples: int
    confidence: float
    delta: float
    seed: int
    eps_bound: Bound
    delta_bound: Bound
    pair: Pair
    candidates: list[dict[str, Any]]
    claim: MechanismClaim | None
    exact: dict[str, Any] | None
    sound: Sound
    verdict: Verdict
    primary: Target
    wall_s: float
    premise: dict[str, Any] | None = None
    """The record-level measurement where the claim's relation is a premise the code does not enforce
    for records (`_premise`), else None."""

    def tightness(self) -> dict[str, Any]:
        """The bound on the mechanism's primary quantity (δ at the claim's ε for flat (0, δ)
        curves, else ε at δ) over the sound value for the adjacency and over the exact value for
        the pair: 1 means the audit is tight, None that the reference is unknown, 0 or infinite."""
        of = self.primary
        measured = self.delta_bound.value if of == "delta" else self.eps_bound.value
        sound = self.sound.delta if of == "delta" else self.sound.eps
        exact = None if self.exact is None else self.exact[of]
        return {"of": of, "sound": _ratio(measured, sound), "exact": _ratio(measured, exact)}

    def as_dict(self) -> dict[str, Any]:
        claim = None
        if self.claim is not None:
            claim = {**self.claim.claim.as_dict(), "statement": self.claim.statement,
                     "audited_eps": self.claim.eps, "audited_delta": self.claim.delta,
                     "evaluable": self.claim.unevaluable is None}
        return _safe({
            "mechanism": self.mechanism, "params": self.params, "adjacency": self.adjacency, "dim": self.dim,
            "releases": self.releases, "samples": self.samples, "confidence": self.confidence,
            "delta": self.delta, "eps_lb": self.eps_bound.value, "delta_lb": self.delta_bound.value,
            "delta_lb_eps": self.delta_bound.at, "pair": self.pair.as_dict(), "claim": claim,
            "exact": self.exact, "sound": asdict(self.sound), "verdict": self.verdict.as_dict(),
            "tightness": self.tightness(), "tests": {"eps": self.eps_bound.as_dict(),
                                                     "delta": self.delta_bound.as_dict()},
            "candidates": self.candidates, "seed": self.seed, "wall_s": self.wall_s, "premise": self.premise,
        })


def check_size(dim: int, releases: int, samples: int | None, where: str = "") -> None:
    """ConfigError when the values one input's observations need (dim × releases × samples, the
    default samples when None) exceed the `samples` limit: refused before anything is drawn."""
    n = default_samples(dim, releases) if samples is None else samples
    require("samples", dim * releases * n, f"{where}dim × releases × samples = {dim:,} × {releases:,} × {n:,}")


def _check(dim: int, releases: int, samples: int | None, confidence: float, delta: float, seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"--seed must be in 0..{MAX_SEED}, got {seed}")
    if dim < 1:
        raise ConfigError(f"--dim must be >= 1, got {dim}")
    if releases < 1:
        raise ConfigError(f"--releases must be >= 1, got {releases}")
    if samples is not None and samples < 100:
        raise ConfigError(f"--samples must be >= 100, got {samples}")
    if not 0 < confidence < 1:
        raise ConfigError(f"--confidence must be in (0, 1), got {confidence}")
    if not 0 <= delta < 1:
        raise ConfigError(f"--delta must be in [0, 1), got {delta}")
    check_size(dim, releases, samples)


def search(mechanism: Mechanism, candidates: list[Pair], pilot: int, releases: int, target: tuple[Target, float],
           confidence: float, rng: np.random.Generator, test: TestKind = "auto") -> tuple[Pair, list[dict[str, Any]]]:
    """Neighbour search: every candidate's bound on `target` from its own `pilot` observations;
    the best pair (the first among equals: candidates come worst case first) is returned, with
    the table. The final bound is then estimated on fresh samples, so the choice costs nothing."""
    if len(candidates) == 1:
        return candidates[0], [{"label": candidates[0].label, "pilot_bound": None}]
    table, best, best_value = [], candidates[0], -1.0
    for pair in candidates:
        (bound,) = estimate(mechanism, pair, pilot, releases, [target], confidence, rng, test)
        table.append({"label": pair.label, "pilot_bound": bound.value})
        if bound.value > best_value:
            best, best_value = pair, bound.value
    return best, table


def audit(name: str, params: dict[str, Any] | None = None, *, adjacency: str = "l1", dim: int = 1,
          releases: int = 1, samples: int | None = None, confidence: float = 0.95, delta: float = 1e-5,
          seed: int = 0, test: TestKind = "auto", claim_eps: float | None = None,
          claim_delta: float | None = None) -> AuditReport:
    """Audit mechanism `name`: search the adjacency's candidate pairs, bound ε at `delta` and δ at
    the claim's ε (0 without one) at `confidence` from `samples` fresh observations per input
    (`default_samples` when None), and judge the claim: the mechanism's own (the paper's or the
    textbook's formula), or, with `claim_eps`, the (`claim_eps`, `claim_delta`)-DP you state for
    the adjacency and releases audited (`stated_claim`; the ε bound is then taken at your δ).
    ConfigError (one line) on bad input, finite extremes included: a parameter whose noise scale
    or privacy loss is not representable in floating point (ε = 1e300, σ = 1e-300) overflows
    somewhere in the claim, the accountant or the sampler, and is refused as the input it is."""
    if claim_eps is None and claim_delta is not None:
        raise ConfigError("--claim-delta needs --claim-eps: the claim you state is (ε, δ)-DP")
    if claim_eps is not None:
        if not (math.isfinite(claim_eps) and claim_eps >= 0):
            raise ConfigError(f"--claim-eps must be a finite number >= 0, got {claim_eps}")
        claim_delta = 0.0 if claim_delta is None else claim_delta
        if not 0 <= claim_delta < 1:
            raise ConfigError(f"--claim-delta must be in [0, 1), got {claim_delta}")
        delta = claim_delta
    stated = None if claim_eps is None else (claim_eps, claim_delta)
    try:
        return _audit(name, params, adjacency, dim, releases, samples, confidence, delta, seed, test, stated)
    except (OverflowError, ZeroDivisionError) as error:
        given = ", ".join(f"{key} = {value}" for key, value in (params or {}).items()) or "its defaults"
        raise ConfigError(f"mechanism '{name}' with {given}: its arithmetic overflows ({error}); choose parameters "
                          "whose noise scale and privacy loss are representable numbers") from None


def stated_claim(mechanism: Mechanism, setting: Setting, adjacency: str, eps: float, delta: float) -> MechanismClaim:
    """The (ε, δ)-DP claim a user states for `mechanism` on the command line, for the audited
    adjacency and number of releases, beside the mechanism's sound ε: what a reviewer tests when
    the paper's number is not the textbook formula the mechanism carries."""
    sound = mechanism.sound(setting, eps)
    notion = "ε-DP (pure)" if delta == 0 else "(ε, δ)-DP"
    record = Claim(
        defense=mechanism.name, notion=notion, adjacency=f"‖x − x′‖ ≤ 1 in {adjacency}, {setting.releases} release(s) "
        "seen together", eps_claimed=eps, eps_stated=eps, eps_sound=sound.eps, delta=delta, horizon=setting.releases,
        equation=f"the claim stated with --claim-eps {eps:g} --claim-delta {delta:g}", sound_method=sound.method)
    return MechanismClaim(record, f"the stated ({eps:g}, {delta:g})-DP", eps, delta, setting.norm)


def _audit(name: str, params: dict[str, Any] | None, adjacency: str, dim: int, releases: int, samples: int | None,
           confidence: float, delta: float, seed: int, test: TestKind,
           stated: tuple[float, float] | None = None) -> AuditReport:
    start = time.perf_counter()
    mechanism = build(name, params)
    if adjacency not in NORMS:
        raise ConfigError(f"unknown adjacency '{adjacency}' (choose from {', '.join(NORMS)})")
    _check(dim, releases, samples, confidence, delta, seed)
    samples = default_samples(dim, releases) if samples is None else samples
    setting = Setting(NORMS[adjacency], dim, releases, delta)
    audited = mechanism.claim(setting) if stated is None else stated_claim(mechanism, setting, adjacency, *stated)
    at_eps = audited.eps if audited is not None and audited.eps is not None else 0.0
    targets: list[tuple[Target, float]] = [("eps", delta), ("delta", at_eps)]
    pilot_rng, final_rng, premise_pilot_rng, premise_rng = np.random.default_rng(seed).spawn(4)
    primary = targets[0] if mechanism.primary == "eps" else targets[1]
    pilot = max(_MIN_PILOT, int(samples * PILOT_FRACTION))

    def measure(sampled: Mechanism, rngs: tuple[np.random.Generator, np.random.Generator]) -> tuple[
            Pair, list[dict[str, Any]], Bound, Bound]:
        candidates = sampled.candidates(setting.norm, dim)
        pair, table = search(sampled, candidates, pilot, releases, primary, confidence, rngs[0], test)
        return (pair, table, *estimate(sampled, pair, samples, releases, targets, confidence, rngs[1], test))

    pair, table, eps_bound, delta_bound = measure(mechanism, (pilot_rng, final_rng))
    record_level = mechanism.record_level()
    premise = None
    if record_level is not None and audited is not None and audited.claim.neighbours is not None:
        _, _, record_eps, record_delta = measure(record_level, (premise_pilot_rng, premise_rng))
        premise = _premise(audited, record_level.sound(setting, at_eps), record_eps, record_delta)
    law = mechanism.law(pair)
    exact = None
    if law is not None:
        curve = privacy_curve(law, releases)
        exact = {"eps": curve.epsilon(delta), "delta": curve.delta(at_eps), "at_delta": delta, "at_eps": at_eps,
                 "method": curve.method}
    return AuditReport(
        mechanism=name, title=mechanism.title, params=mechanism.params.model_dump(), adjacency=adjacency, dim=dim,
        releases=releases, samples=samples, confidence=confidence, delta=delta, seed=seed, eps_bound=eps_bound,
        delta_bound=delta_bound, pair=pair, candidates=table, claim=audited, exact=exact,
        sound=mechanism.sound(setting, at_eps), verdict=judge(audited, mechanism.title, pair, eps_bound, delta_bound),
        primary=mechanism.primary, wall_s=time.perf_counter() - start, premise=premise,
    )


def _premise(audited: MechanismClaim, sound: Sound, eps_bound: Bound, delta_bound: Bound) -> dict[str, Any]:
    """The record-level measurement of a claim whose relation the code does not enforce for records:
    the same audit with one record replaced, as a "premise not enforced" finding (never a verdict on
    the claim, whose relation it is not)."""
    neighbours = audited.claim.neighbours
    factor = neighbours.record_factor
    exceeds = delta_bound.value > audited.delta or (audited.eps is not None and eps_bound.value > audited.eps)
    premise = f" ({neighbours.premise})" if neighbours.premise else ""
    text = (f"at the record level (one record replaced, which the code's clipping lets move the release "
            f"{factor:g}× as far as the claim's relation{premise} allows), ε_LB = {eps_bound.value:.4g} at "
            f"δ = {eps_bound.at:.4g} ({eps_bound.confidence:.0%} confidence)" + (
                f" exceeds the stated ε = {audited.eps:.4g}: the premise is not enforced" if exceeds else
                f", not above the stated ε = {audited.eps:.4g}")
            + (f"; the record-level sound ε is {sound.eps:.4g}" if sound.eps is not None else ""))
    return {"kind": "premise not enforced", "text": text, "factor": factor, "eps_lb": eps_bound.value,
            "delta_lb": delta_bound.value, "delta_lb_eps": delta_bound.at, "eps_sound": sound.eps, "exceeds": exceeds}
