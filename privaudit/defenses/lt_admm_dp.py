"""LT-ADMM-DP (seed 002, Ren et al. 2026): local-training ADMM with smooth-clipped noisy gradients.

Round k, every agent i at once (Algorithm 1):

* local training (eq. 5a), τ steps from φ⁰ = x_{i,k}:
  `φ^{t+1} = φ^t − (γ g_i(φ^t) + β(ρ|N_i| x_{i,k} − Σ_{j∈N_i} z_{ij,k}))`, then `x_{i,k+1} = φ^τ`;
  the consensus term is evaluated at x_{i,k} and z_{ij,k}, so it is the same in all τ steps;
* the gradient estimator (eqs. 6–7): a fresh batch B_i of |B_i| samples drawn uniformly without
  replacement at every local step (Alg. 1 line 6 sits inside the t loop; "uniform sampling without
  replacement", §III after eq. 6), its mean gradient g, smooth clipping of that *mean*
  `μ = ζ/(ζ + ‖g‖)`, and Gaussian noise: `g_i = μ g + e`, `e ~ N(0, σ_e² I)`;
* communication (Alg. 1 line 13): to each neighbour j, one directed `admm_bridge` message
  `z_{ij,k} − 2ρ x_{i,k+1}`. The printed line reads "transmit z_{ji,k} − 2ρ x_{j,k+1}", which agent
  i cannot compute (it does not know x_{j,k+1}); eq. 5b needs exactly the message written here from
  j's side, so the indices of line 13 are swapped and we send the reading consistent with eq. 5b;
* bridge update (eq. 5b), from the message received from j:
  `z_{ij,k+1} = ½ z_{ij,k} − ½ (z_{ji,k} − 2ρ x_{j,k+1})`.

The message of wire round k carries x_{i,k+1} (the state after that round's local training).
Eq. 5b reads the message each agent received (`delivers`): a neighbour j who lies sets z_{ij,k+1},
hence the consensus term of i's next local training.
All agents are batched: states are rows of an [N, P] tensor, the gradients of all agents come from
one `vmap` per local step, and the bridge variables are one [M, P] tensor with a row per directed
edge (i, j) (`edges`), so Σ_j z_{ij} is an `index_add` and eq. 5b a gather of the reversed edges.

Decisions where the paper is open:

* **Initialisation.** Alg. 1 line 1 says "initialize x_{i,0} = z_{ij,0}". We read it literally as
  z_{ij,0} = x_{i,0} for every neighbour j, with x_{i,0} the model's seeded initial point, the same
  for every agent (the paper gives no x_0). Any start with z_{ij,0} = z_{ji,0} (as here, since all
  x_{i,0} agree) gives z_{ij,1} = ρ x_{j,1} by eq. 5b, so the choice only changes the consensus
  term of round 0, β(ρ − 1)|N_i| x_0 instead of 0 for the alternative z_{ij,0} = ρ x_0.
* **Regulariser weight.** §VI's cost has a non-convex term ε Σ_ℓ [x]_ℓ²/(1 + [x]_ℓ²) whose weight
  the paper never gives; it is the model option `nonconvex_reg` (`logreg`, `binary = true`), and
  the shipped preset chooses 0.01.

What leaks: the messages carry the states in the clear up to a term a neighbour knows. Neighbour j
tracks z_{ij,k} itself (z_{ij,0} = x_0 is public, and eq. 5b updates it with j's own message
z_{ji,k} − 2ρ x_{j,k+1}), so it reads x_{i,k+1} = (z_{ij,k} − m_{ij,k}) / (2ρ) off every message
m_{ij,k}. An eavesdropper on all of i's links does the same for every z_{ij} and recovers
γ Σ_t g_i(φ^t) = x_{i,k} − x_{i,k+1} − τβ(ρ|N_i| x_{i,k} − Σ_j z_{ij,k}): a multi-step, FedAvg-like
update made of τ noisy clipped batch gradients.

The claim (Theorem 2, eq. 9), implemented literally with the natural log:
`ε_i = 2Kτζ²|B_i|²/(σ_e² m_i²) + (2ζ|B_i|/(σ_e m_i)) √(2Kτ log(1/δ_i))`, for the worst agent
(smallest m_i) and K the run's rounds. For the paper's setting (§VI: K 4000, τ 4, ζ 1, |B| 8,
σ_e 0.5, m_i 1000, δ 1e-4) this gives 25.56, while the paper states ε = 19.6; eq. 9 with log₁₀
gives 19.64, so the stated number matches a base-10 logarithm, which Lemma 1 (Mironov's
conversion) does not allow. Both numbers are shown; neither is adjusted.

Sound accounting. Each local step releases (inside φ, hence inside the message) the smooth-clipped
batch mean plus N(0, σ_e² I). Smooth clipping bounds the norm of its *output* below ζ for every
batch, but nothing bounds one sample's gradient (no per-sample clipping; the logistic gradient
grows with ‖a‖ along any direction orthogonal to the model), so replacing one sample can move the
clipped mean from near ζu to near −ζu: the ℓ2 sensitivity under replace-one is 2ζ (a supremum, not
attained). The map g ↦ ζg/(ζ + ‖g‖) is 1-Lipschitz, which does not help without a per-sample bound.
The paper uses the same Δ = 2ζ (Theorem 2 proof, step (i)). The batch is a uniform sample of |B_i|
out of m_i without replacement, so one step is `SampledWithoutReplacementDpEvent(m_i, |B_i|,
Gaussian(σ_e / 2ζ))`, composed over Kτ local steps (the messages and the states are
post-processing of these releases and of the other agents' messages). The sound ε is the tight
accountant for this sampling under replace-one (`privaudit.accounting.without_replacement_epsilon`:
the dominating pair of Zhu, Dong & Wang 2022, Prop. 30 and Cor. 32, as a PLD). In §VI's setting it
gives ε = 707.5 at δ = 1e-4. Datasets whose other records all equal the replacement reach ≈ 619.7
(the Poisson-subsampled PLD's figure at q = |B_i|/m_i; at least 607.1 with optimistic rounding at
interval 1e-3), so the sound ε is at most 1.17× the true one. The RDP accountant of Wang, Balle &
Kasiviswanathan 2019 (the paper's [25]), the only one dp_accounting offers for this sampling,
gives 112,606. The paper's per-step bound, (α, 2αζ²|B_i|²/(σ_e² m_i²))-RDP "for 1 < α ≪ σ_e² m_i/|B_i|",
is q² times the unsampled Gaussian's RDP; such small-q expansions need the noise to be large
relative to the sensitivity, while in §VI's setting σ_e/Δ = 0.5/2 = 0.25, and the stated condition
on α omits Δ. There the bound of [25] (as dp_accounting computes it) is ≈ 7.04 per step at α = 2,
against the paper's 1.0e-3. That gap, not the sensitivity, is where the claim and the sound ε part.
"""

from __future__ import annotations

import math

import dp_accounting
import torch
from pydantic import Field
from torch import Tensor

from privaudit.defenses.base import Defense, DefenseParams, register
from privaudit.accounting import (OUTSIDE_RANGE, WITHOUT_REPLACEMENT_METHOD, Claim, ClaimThreat, Neighbours,
                                  without_replacement_epsilon)
from privaudit.grads import batch_grads, smooth_clip
from privaudit.setup import Setup
from privaudit.wire import Kind, Wire

PAPER_EPS_STATED = 19.6
"""The ε_i that seed 002 §VI states for its setting (PAPER_SETTING)."""

PAPER_SETTING = {"rounds": 4000, "tau": 4, "zeta": 1.0, "batch_size": 8, "sigma_e": 0.5, "delta": 1e-4,
                 "samples": 1000}
"""The inputs of eq. 9 in seed 002 §VI (K, τ, ζ, |B_i|, σ_e, δ_i, m_i); eq. 9 depends on nothing else."""


def is_paper_setting(rounds: int, tau: int, zeta: float, batch_size: int, sigma_e: float, delta: float,
                     samples: int) -> bool:
    """Whether eq. 9's inputs are §VI's (`PAPER_SETTING`), where the paper states ε_i = 19.6."""
    given = {"rounds": rounds, "tau": tau, "zeta": zeta, "batch_size": batch_size, "sigma_e": sigma_e,
             "delta": delta, "samples": samples}
    return all(math.isclose(given[key], value) for key, value in PAPER_SETTING.items())


THREAT = ClaimThreat("any adversary", (
    "seed 002 §V: \"we prove that a malicious agent observing the results of\" agent i's local training x_{i,k} "
    "\"cannot distinguish\" adjacent minibatches; and (privaudit's reading) Theorem 2's per-step sensitivity 2ζ "
    "holds for the smooth-clipped mean at whatever point it is computed, so an agent that sets that point is covered"))
"""Who Theorem 2 is stated against: the paper's malicious agent, which the mechanism's clipping supports."""


class LTADMMDPParams(DefenseParams):
    gamma: float = Field(0.1, gt=0, description="local step size γ on the perturbed gradient")
    beta: float = Field(0.1, gt=0, description="local step size β on the consensus term")
    rho: float = Field(0.1, gt=0, description="ADMM penalty ρ")
    zeta: float = Field(1.0, gt=0, description="smooth clipping threshold ζ of the batch-mean gradient")
    tau: int = Field(4, ge=1, description="local training steps τ per round")
    batch_size: int = Field(8, ge=1, description="|B_i|: samples per local step, drawn without replacement")
    sigma_e: float = Field(0.5, gt=0, description="std σ_e of the Gaussian noise added to each clipped gradient")
    delta: float = Field(1e-4, gt=0, lt=1, description="δ_i at which ε is reported")


def theorem2_epsilon(rounds: int, tau: int, zeta: float, batch_size: int, sigma_e: float, samples: int,
                     delta: float) -> float:
    """Seed 002, Theorem 2 (eq. 9), exactly as printed, with the natural log:
    ε_i = 2Kτζ²|B_i|²/(σ_e² m_i²) + (2ζ|B_i|/(σ_e m_i)) √(2Kτ log(1/δ_i))."""
    steps = rounds * tau
    ratio = zeta * batch_size / (sigma_e * samples)
    return 2 * steps * ratio**2 + 2 * ratio * math.sqrt(2 * steps * math.log(1 / delta))


def theorem2_order(rounds: int, tau: int, zeta: float, batch_size: int, sigma_e: float, samples: int,
                   delta: float) -> float:
    """The Rényi order at which eq. 9 is the RDP-to-DP conversion: ε(α) = Kτρα + log(1/δ)/(α − 1)
    with ρ = 2ζ²|B|²/(σ_e² m_i²) per step is smallest at α = 1 + √(log(1/δ)/(Kτρ)), and eq. 9 is
    that minimum (Kτρ + 2√(Kτρ log(1/δ)))."""
    per_step = 2 * (zeta * batch_size / (sigma_e * samples)) ** 2
    return 1 + math.sqrt(math.log(1 / delta) / (rounds * tau * per_step))


def theorem2_range(rounds: int, tau: int, zeta: float, batch_size: int, sigma_e: float, samples: int,
                   delta: float) -> list[str]:
    """Theorem 2's range, where the run leaves it: its per-step RDP (proof, step (i), via the
    subsampling bound of its [25], Appendix C.7) holds for 1 < α ≪ σ_e² m_i/|B| only, and eq. 9 uses
    it at `theorem2_order`. Checked as α < σ_e² m_i/|B| (the paper's "≪" asks for more)."""
    order = theorem2_order(rounds, tau, zeta, batch_size, sigma_e, samples, delta)
    limit = sigma_e ** 2 * samples / batch_size
    if order < limit:
        return []
    return [f"eq. 9 evaluates the per-step RDP bound at order α = {order:.4g}, but Theorem 2's proof has it only "
            f"for 1 < α ≪ σ_e² m_i/|B| = {limit:.4g}"]


@register
class LTADMMDP(Defense):
    """`x` [N, P] holds the states x_{i,k}; `z` [M, P] the bridge variables, row e being z_{ij} for
    the directed edge `edges[e]` = (i, j), which is also the link of message e (from i to j).
    Each round every agent discloses its own noise draws ("noise", [τ, P]) and batch rows ("batch",
    [τ, B]), which only a curious-neighbour tap of that agent records."""

    name = "lt_admm_dp"
    title = "LT-ADMM-DP (local-training ADMM, smooth-clipped noisy gradients)"
    Params = LTADMMDPParams

    def __init__(self, params: LTADMMDPParams, setup: Setup) -> None:
        super().__init__(params, setup)
        setup.local.check_batch_size(params.batch_size)
        topology = setup.topology
        self.edges: list[tuple[int, int]] = [(i, j) for i in range(topology.n) for j in topology.neighbours(i)]
        position = {edge: e for e, edge in enumerate(self.edges)}
        self.src = torch.tensor([i for i, _ in self.edges])
        self.reverse = torch.tensor([position[(j, i)] for i, j in self.edges])
        self.degree = torch.bincount(self.src, minlength=topology.n).to(torch.float32)
        self.x = setup.model.initial().repeat(topology.n, 1)
        self.z = self.x[self.src].clone()

    @property
    def states(self) -> Tensor:
        return self.x

    delivers = True

    def step(self, t: int, wire: Wire) -> None:
        """Round k = t: local training (eq. 5a), one message per directed edge (Alg. 1 line 13,
        read as z_{ij,k} − 2ρ x_{i,k+1}), bridge update from the messages each agent received
        (eq. 5b): a neighbour who lies reaches it (`delivers`)."""
        p = self.params
        bridge_sum = torch.zeros_like(self.x).index_add_(0, self.src, self.z)
        consensus = p.beta * (p.rho * self.degree[:, None] * self.x - bridge_sum)
        phi, noises, batches = self.x, [], []
        for _ in range(p.tau):
            gradient, noise, rows = self.perturbed_gradients(phi)
            phi = phi - (p.gamma * gradient + consensus)
            noises.append(noise)
            batches.append(rows)
        messages = self.z - 2 * p.rho * phi[self.src]
        delivered = wire.send_each(t, Kind.ADMM_BRIDGE, self.edges, messages)
        received = messages if delivered is None else delivered.received(messages, self.edges)
        noise, rows = torch.stack(noises, dim=1), torch.stack(batches, dim=1)
        wire.disclose_each(t, "noise", noise)
        wire.disclose_each(t, "batch", rows)
        self.z = 0.5 * self.z - 0.5 * received[self.reverse]
        self.x = phi

    def perturbed_gradients(self, phi: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Every agent's g_i(φ_i) = μ g + e (eqs. 6–7) on a fresh batch drawn without replacement.

        Returns the perturbed gradients [N, P], the noise e [N, P] and the batch rows [N, B]."""
        p = self.params
        xb, yb, rows = self.setup.local.fixed_batches(p.batch_size, self.setup.generator)
        mean_gradient = batch_grads(self.setup.model, phi, xb, yb)
        noise = torch.randn(mean_gradient.shape, generator=self.setup.generator) * p.sigma_e
        return smooth_clip(mean_gradient, p.zeta) + noise, noise, rows

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        """Kτ local steps of the worst agent, each the Gaussian mechanism (ℓ2 sensitivity 2ζ of the
        smooth-clipped batch mean under replace-one) on a batch sampled without replacement."""
        p = self.params
        step = dp_accounting.SampledWithoutReplacementDpEvent(
            source_dataset_size=int(self.setup.local.sizes.min()),
            sample_size=p.batch_size,
            event=dp_accounting.GaussianDpEvent(p.sigma_e / (2 * p.zeta)),
        )
        return dp_accounting.SelfComposedDpEvent(step, rounds * p.tau)

    def paper_setting(self, rounds: int) -> bool:
        """Whether every input of eq. 9 equals seed 002 §VI's, for every agent: then the paper's
        stated ε = 19.6 is the number to compare with (N, the graph, γ, β, ρ do not enter eq. 9)."""
        p, paper = self.params, PAPER_SETTING
        sizes = self.setup.local.sizes
        return (
            rounds == paper["rounds"] and p.tau == paper["tau"] and p.batch_size == paper["batch_size"]
            and bool((sizes == paper["samples"]).all())
            and all(math.isclose(getattr(p, key), paper[key]) for key in ("zeta", "sigma_e", "delta"))
        )

    def claim(self, rounds: int) -> Claim:
        p = self.params
        samples = int(self.setup.local.sizes.min())
        steps = rounds * p.tau
        noise_multiplier = p.sigma_e / (2 * p.zeta)
        outside = theorem2_range(rounds, p.tau, p.zeta, p.batch_size, p.sigma_e, samples, p.delta)
        return Claim(
            findings=tuple((OUTSIDE_RANGE, text) for text in outside),
            neighbours=Neighbours("replace-one", "record", "seed 002 Definition 1: one datapoint of agent i's "
                                  "local dataset replaced"),
            threat=THREAT,
            defense=self.name,
            notion="(ε, δ)-DP",
            adjacency="one datapoint of agent i's local dataset (seed 002 §II-C, Definition 1; "
            "Theorem 2 bounds the sensitivity over adjacent minibatches)",
            eps_claimed=theorem2_epsilon(rounds, p.tau, p.zeta, p.batch_size, p.sigma_e, samples, p.delta),
            eps_stated=PAPER_EPS_STATED if self.paper_setting(rounds) else None,
            eps_sound=without_replacement_epsilon(self.mechanism(rounds), p.delta),
            delta=p.delta,
            horizon=rounds,
            equation=f"Theorem 2, eq. (9): ε_i = 2Kτζ²|B|²/(σ_e² m_i²) + (2ζ|B|/(σ_e m_i)) √(2Kτ log(1/δ)) "
            f"with K={rounds}, τ={p.tau}, ζ={p.zeta}, |B|={p.batch_size}, σ_e={p.sigma_e}, m_i={samples}, "
            f"δ={p.delta}",
            sound_method=f"{WITHOUT_REPLACEMENT_METHOD}, on {steps} = Kτ compositions of "
            f"SampledWithoutReplacementDpEvent(m_i={samples}, |B|={p.batch_size}, Gaussian(σ_e/2ζ = "
            f"{noise_multiplier:.4g})): each local step releases smooth-clip(batch-mean gradient) + "
            f"N(0, σ_e² I), whose ℓ2 sensitivity under replacing one sample is 2ζ (both outputs have norm "
            f"< ζ and no per-sample clipping bounds one sample's gradient); the messages are post-processing",
            assumptions=(
                f"worst agent: m_i = min_i |D_i| = {samples}",
                "log in eq. (9) is the natural log (Lemma 1, Mironov 2017); the paper's stated 19.6 "
                "is eq. (9) with log₁₀",
                "eps_stated is shown only when K, τ, ζ, |B|, σ_e, δ and every m_i equal seed 002 §VI's "
                "(4000, 4, 1, 8, 0.5, 1e-4, 1000)",
                f"eq. (9) rests on an RDP expansion valid for 1 < α ≪ σ_e² m_i/|B| = "
                f"{p.sigma_e**2 * samples / p.batch_size:.4g} (paper's condition, not checked by the formula)",
            ),
            statements=(
                "per local step: (α, 2αζ²|B|²/(σ_e² m_i²))-RDP for 1 < α ≪ σ_e² m_i/|B| "
                "(Theorem 2 proof, step (i), via [25] Appendix C.7)",
                "privacy is stated against a malicious agent observing the local training results x_{i,k} (§V)",
            ),
        )
