"""The synthetic problems of the seed papers, generated per agent.

Seed 002 trains a binary logistic regression, seeds 003 and 004 solve distributed linear
estimation problems. Their data are not a pool split among agents but drawn agent by agent (seed
004 gives each sensor its own measurement matrix), so each generator returns the agent of every
training sample in `Dataset.owners`, and the parameter the network should find in
`Dataset.truth`. Constants the papers state are used as stated; the ones they leave open are
chosen here and named in each generator's docstring.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from privaudit.data import Dataset, Normalisation
from privaudit.limits import exceeded

SYNTHETIC: tuple[str, ...] = ("logistic", "estimation_wz", "estimation_wb")
DEFAULT_SAMPLES = {"logistic": 1000, "estimation_wz": 2000, "estimation_wb": 100}
TEST_SAMPLES = 2000
_IDENTITY = Normalisation(mean=(0.0,), std=(1.0,))
RECORD_BYTES = {"logistic": 90, "estimation_wz": 150, "estimation_wb": 120}
"""Peak memory per generated training record, measured (2 × 10⁶ records, with the per-agent shards
a run's set-up takes): the draws in float64, their float32 tensors and the owners."""

# Seed 003 §V: the regressors' covariance R_{u,i}, the same for every sensor.
WZ_COVARIANCE = np.array([
    [2, 1, 0, 1, 0, 0],
    [1, 2, 0, 1, 0, 0],
    [0, 0, 2, 0, 0, 0],
    [1, 1, 0, 2, 0, 0],
    [0, 0, 0, 0, 2, 0],
    [0, 0, 0, 0, 0, 2],
], dtype=np.float64)
WZ_TRUTH = np.full(6, 0.5)
WZ_NOISE_STD = 0.1
WB_THETA = np.array([1.0, -1.0])


def generate(name: str, n_agents: int, *, samples_per_agent: int | None = None, seed: int = 0) -> Dataset:
    """Draw problem `name` for `n_agents` agents with `samples_per_agent` samples each."""
    if name not in SYNTHETIC:
        raise ValueError(f"unknown synthetic problem '{name}' (choose from {', '.join(SYNTHETIC)})")
    m = DEFAULT_SAMPLES[name] if samples_per_agent is None else samples_per_agent
    if m < 1:
        raise ValueError(f"samples_per_agent must be >= 1, got {m}")
    check_size(name, n_agents, m)
    rng = np.random.default_rng(seed)
    return {"logistic": _logistic, "estimation_wz": _estimation_wz, "estimation_wb": _estimation_wb}[name](
        n_agents, m, rng
    )


def check_size(name: str, n_agents: int, samples_per_agent: int) -> None:
    """ValueError when drawing `name` for `n_agents` agents would generate more records in all
    than the `records` limit, or take more memory than the `memory` limit, before anything is
    drawn: the per-agent limit alone let 4 agents × 10⁷ records take 37 s and 6.5 GB, and 100
    agents ask for 44.7 GiB."""
    records = n_agents * samples_per_agent
    megabytes = math.ceil(records * RECORD_BYTES[name] / 2**20)
    for what, reason in ((f"'{name}' for {n_agents:,} agents × {samples_per_agent:,} samples per agent",
                          exceeded("records", records)),
                         (f"generating '{name}' takes {records:,} records × {RECORD_BYTES[name]} bytes = "
                          f"{megabytes:,} MB", exceeded("memory", megabytes))):
        if reason:
            raise ValueError(f"{what}: {reason}")


def _owners(n_agents: int, m: int) -> np.ndarray:
    return np.repeat(np.arange(n_agents), m)


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.tensor(array, dtype=torch.float32)


def _logistic(n_agents: int, m: int, rng: np.random.Generator) -> Dataset:
    """Seed 002 §VI: features a ∈ R⁵, labels b ∈ {−1, 1}, m_i samples per agent. The paper does
    not say how its data were drawn; here a ~ N(0, I₅) and b = +1 with probability σ(aᵀx★) for a
    fixed x★ ~ N(0, 4 I₅) (well separated but not separable), the same x★ for every agent.
    Labels are stored as {0, 1}. No `truth`: the regularised problem's minimiser is not x★."""
    truth = rng.normal(0.0, 2.0, size=5)

    def draw(count: int) -> tuple[np.ndarray, np.ndarray]:
        features = rng.normal(size=(count, 5))
        probability = 1.0 / (1.0 + np.exp(-features @ truth))
        return features, (rng.random(count) < probability).astype(np.int64)

    x_train, y_train = draw(n_agents * m)
    x_test, y_test = draw(TEST_SAMPLES)
    return Dataset(
        name="logistic", x_train=_tensor(x_train), y_train=torch.from_numpy(y_train),
        x_test=_tensor(x_test), y_test=torch.from_numpy(y_test), num_classes=2,
        normalisation=_IDENTITY, class_names=("b = -1", "b = +1"), task="classification",
        owners=_owners(n_agents, m),
    )


def _estimation_wz(n_agents: int, m: int, rng: np.random.Generator) -> Dataset:
    """Seed 003 §V: scalar measurements d = uᵀx* + ν with u ~ N(0, R_u), x* = ½·1 (d = 6).
    The measurement noise's σ_ν is not stated: 0.1 here. Each sample is stored as a 1×6
    regressor matrix and a 1-vector, for `linear_estimator`."""

    def draw(count: int) -> tuple[np.ndarray, np.ndarray]:
        regressors = rng.multivariate_normal(np.zeros(6), WZ_COVARIANCE, size=count)
        measurements = regressors @ WZ_TRUTH + rng.normal(0.0, WZ_NOISE_STD, size=count)
        return regressors[:, None, :], measurements[:, None]

    x_train, y_train = draw(n_agents * m)
    x_test, y_test = draw(TEST_SAMPLES)
    return Dataset(
        name="estimation_wz", x_train=_tensor(x_train), y_train=_tensor(y_train),
        x_test=_tensor(x_test), y_test=_tensor(y_test), num_classes=1, normalisation=_IDENTITY,
        class_names=(), task="regression", truth=_tensor(WZ_TRUTH), owners=_owners(n_agents, m),
    )


def _estimation_wb(n_agents: int, m: int, rng: np.random.Generator) -> Dataset:
    """Seed 004 §VII-A: sensor i measures z_ij = M_i θ + w_ij, M_i ∈ R^{3×2}, w_ij ~ U[0, 1]³,
    n_i = 100. The paper gives neither M_i nor θ: M_i ~ N(0, 1) entries per agent, θ = (1, −1).
    Because w has mean ½, the empirical-risk minimiser is not θ; `truth` is that minimiser
    (the point the algorithm converges to, computed in closed form), not θ."""
    matrices = rng.normal(size=(n_agents, 3, 2))
    regressors = np.repeat(matrices, m, axis=0)
    measurements = regressors @ WB_THETA + rng.random((n_agents * m, 3))
    gram = np.einsum("nsd,nse->de", regressors, regressors)
    minimiser = np.linalg.solve(gram, np.einsum("nsd,ns->d", regressors, measurements))
    test_owner = rng.integers(0, n_agents, size=TEST_SAMPLES)
    test_x = matrices[test_owner]
    test_y = test_x @ WB_THETA + rng.random((TEST_SAMPLES, 3))
    return Dataset(
        name="estimation_wb", x_train=_tensor(regressors), y_train=_tensor(measurements),
        x_test=_tensor(test_x), y_test=_tensor(test_y), num_classes=3, normalisation=_IDENTITY,
        class_names=(), task="regression", truth=_tensor(minimiser), owners=_owners(n_agents, m),
    )
