"""Mechanisms as samplers with known parameters, for the empirical DP audit (`privaudit/attacks/audit/mechanism_audit.py`).

A mechanism M takes an input vector x ∈ R^dim and releases one random output per call; the audit
draws M(x) and M(x′) many times for a neighbouring pair and bounds how well any test can tell
them apart. Each mechanism here says, beside its vectorised sampler:

* `statistic`: a per-release summary of the output that the audit thresholds (a sufficient
  statistic for the pair where one is known — the log-likelihood ratio of a location family, the
  level counts of a quantizer); summaries of T releases add up, because releases are independent.
  `finite` says the summary takes finitely many values (the audit then estimates the
  likelihood-ratio event on it). Without a statistic the audit thresholds the output itself in
  dimension 1 and learns a classifier (DP-Sniper) otherwise.
* `candidates`: neighbouring pairs at distance ≤ 1 under the ℓ1, ℓ2 or ℓ∞ adjacency, boundary
  pairs first (the worst case where it is known), which the neighbour search scores.
* `law`: the exact law of one release of M(x) against M(x′) as independent factors (finite PMFs,
  Laplace, Gaussian or Gaussian-mixture shifts), whose privacy curve `privacy_curve` builds by
  PMF → PLD with dp_accounting; the ground truth for tightness.
* `claim`: the claim its paper or textbook makes (`privaudit.accounting.Claim`), with the ε and δ
  it asserts for this audit's adjacency and horizon, or why it cannot be evaluated.
* `sound`: a sound (ε, δ) over every pair of the adjacency, from `worst_case_delta`, a closed form
  or a dp_accounting accountant.

Inputs are in the unit of the mechanism's sensitivity: "‖x − x′‖_p ≤ 1" is the adjacency of
the claim (one record replaced, for the defenses' releases). Registered mechanisms (`MECHANISMS`):

    laplace              Laplace(1/ε) noise per coordinate (Dwork & Roth 2014, Thm 3.6)
    gaussian             N(0, σ²) noise per coordinate (Dwork & Roth 2014, Thm A.1)
    rr                   randomized response on bits, each kept w.p. e^ε/(1 + e^ε) (Warner 1965)
    onebit               1-bit stochastic quantizer: ±r, P(+r) = (x + r)/(2r); no paper claims DP for it
    ternary              seed 004's ternary quantizer (Definition 2; Theorem 3, Remarks 6 and 10)
    dpdl_cross_gradient  seed 000's cross-gradient (Σ clip(g) + N(0, σ²C²))/B, one record replaced
    lt_admm_round        seed 002's round: τ smooth-clipped noisy steps on batches drawn from m_i
    tvss_state           seed 003 Alg. 1's first noisy state x_{i,1} + Lap(σ_1)
    tvss_gradient        seed 003 Alg. 2's noisy gradient g_i^k + Lap(σ_k)

The package's submodules, each importing only those above it:

    adjacency   `Pair`, `Setting`, the adjacency norms (`NORMS`) and their ℓ1/ℓ2 reach
    laws        the exact laws' factors and `privacy_curve`
    claims      `MechanismClaim`, `Sound` and the sound bounds' shared forms
    base        the `Mechanism` interface and its registry (`MECHANISMS`, `register`, `build`)
    location    pairs, statistics and laws shared by the location mechanisms
    textbook    laplace, gaussian, rr
    quantizer_mechanisms  onebit, ternary
    defense_releases      dpdl_cross_gradient, lt_admm_round, tvss_state, tvss_gradient

Importing the package imports the last three, which registers every mechanism. The public names
are re-exported here: import them from `privaudit.attacks.audit.mechanisms`.

Nothing here imports torch at module level (the ternary sampler and the defenses' formulas are
imported where used), so the audit statistics load without it.
"""

from privaudit.attacks.audit.mechanisms.adjacency import NORMS, Pair, Setting, l1_reach, l2_reach, norm_name
from privaudit.attacks.audit.mechanisms.base import MECHANISMS, Mechanism, MechanismParams, build, register
from privaudit.attacks.audit.mechanisms.claims import MechanismClaim, Sound
from privaudit.attacks.audit.mechanisms.laws import (Factor, GaussianFactor, GaussianMixtureFactor, LaplaceFactor, PmfFactor,
                                           PrivacyCurve, privacy_curve)
from privaudit.attacks.audit.mechanisms.location import ROUNDING_DECIMALS

# These three register the mechanisms, in this order: the order `MECHANISMS` lists them (and
# `privaudit audit` offers them in its errors), so keep it.
from privaudit.attacks.audit.mechanisms.textbook import (Gaussian, GaussianParams, Laplace, LaplaceParams, RandomizedResponse,
                                               ResponseParams)
from privaudit.attacks.audit.mechanisms.quantizer_mechanisms import OneBit, OneBitParams, Ternary, TernaryParams
from privaudit.attacks.audit.mechanisms.defense_releases import (AdmmRound, CrossGradient, CrossGradientParams, GradientParams,
                                                       NoisyGradient, NoisyState, RoundParams, StateParams)

__all__ = [
    "MECHANISMS", "NORMS", "ROUNDING_DECIMALS",
    "Pair", "Setting", "l1_reach", "l2_reach", "norm_name",
    "Mechanism", "MechanismParams", "build", "register",
    "MechanismClaim", "Sound",
    "Factor", "PmfFactor", "LaplaceFactor", "GaussianFactor", "GaussianMixtureFactor", "PrivacyCurve", "privacy_curve",
    "Laplace", "LaplaceParams", "Gaussian", "GaussianParams", "RandomizedResponse", "ResponseParams",
    "OneBit", "OneBitParams", "Ternary", "TernaryParams",
    "CrossGradient", "CrossGradientParams", "AdmmRound", "RoundParams",
    "NoisyState", "StateParams", "NoisyGradient", "GradientParams",
]
