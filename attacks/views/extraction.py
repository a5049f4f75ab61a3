"""From intercepted messages to what an inversion attack needs: a target gradient and the model
point at which it was computed.

Each extractor reads only a transcript (the messages its threat model heard plus the public
knowledge: W, the defense's public hyperparameters, the architecture, x_0); it never touches a
defense's state. Every one computes in float64, so the only error left beyond what the
equation says is the float32 rounding of the intercepted payloads; a transcript that lacks a
message raises `Transcript.payload`'s KeyError naming the kind, sender and round.

What each message kind gives away (the findings, derived in each extractor's docstring):

* D-PSGD / DP-D-PSGD (`model`): the local gradient, exactly (with DP-D-PSGD's noise in it).
* DPDL `cross_gradient` g̈^{ji}: a clipped (noisy) batch gradient of i at x^j, exactly.
* DPDL `momentum`: the paper's difference ṽ^i_t − ṽ^i_{t−1} is not a gradient of i, but the
  aggregate g̃^i_t is recovered exactly from the neighbours' momenta, and with the cross-gradients
  sent to i the self-gradient term is isolated: exactly ĝ^{ii} in the ND variant, a positive
  multiple of it plus i's own self-noise otherwise.
* Ternary (`quantized_state`): an unbiased gradient estimate whose error is two quantization
  draws divided by ε^k λ^k; the point is known exactly only at k = 0.
* LT-ADMM-DP (`admm_bridge`): the state x_{i,k+1} from any one link, and the τ-step update
  γ Σ_t g_i(φ^t) (with its known per-step drift) from all of i's links.
* Wang & Zhang Alg. 1 (`noisy_state`): a gradient estimate whose error is two Laplace draws over
  α_k; Alg. 2 (`model`): the noisy gradient g + n, exactly.

`EXTRACTORS` maps (defense, scenario) to an `Extractor`, which says which messages it needs and
checks, before a run, whether a tap hears them. `MODEL_VIEWS` does the same, by defense, for the
victim's model as intercepted, which membership inference attacks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from defenses.ternary import schedule as ternary_schedule
from defenses.tvss import Schedule
from privaudit.grads import clip_l1, clip_l2, smooth_clip
from privaudit.topology import Topology
from privaudit.wire import Kind, Tap, Transcript

KINDS: dict[str, str] = {
    "gradient": "the victim's mean batch gradient at `point`, computed as the defense computes it "
                "(per-sample clipped where it clips), exactly",
    "noisy_gradient": "that gradient plus the defense's own DP noise, exactly as released",
    "gradient_estimate": "an estimate of the victim's gradient whose error is the defense's noise "
                         "(see the extractor); `point` may itself be an estimate",
    "scaled_noisy_gradient": "s · gradient + Gaussian noise, s > 0 unknown: its direction estimates "
                             "the gradient's (DPDL's noisy self-gradient)",
    "calibrated_gradient": "DPDL's g̃^i_t: neighbours' cross-gradients of THEIR data at x^i mixed with "
                           "the victim's scaled self-gradient",
    "momentum_difference": "DPDL's ṽ^i_t − ṽ^i_{t−1} (the paper's MM target), a mixture, not a gradient",
    "multi_step_update": "γ Σ_t g(φ^t) over `steps` local steps of size `step_size` from `point`, each "
                         "step also shifted by `drift` (FedAvg-like)",
}
"""What `Target.gradient` is, by `Target.kind`."""


@dataclass(frozen=True)
class Clipping:
    """How a defense bounded a gradient before it crossed the wire. The rule and the bound are
    public hyperparameters, so an attack can apply the same map to its dummy gradients rather
    than match a rescaled gradient to an unclipped one:

    * `per_sample_l2` / `per_sample_l1`: the mean of per-sample gradients, each clipped to ℓ2 /
      ℓ1 norm `bound` (DPDL eq. 9 and DP-D-PSGD; Wang & Zhang, our ℓ1 decision);
    * `smooth_mean`: the batch mean g mapped to g ζ/(ζ + ‖g‖₂), ζ = `bound` (LT-ADMM-DP eq. 6).
    """

    rule: str
    bound: float

    def apply(self, per_sample: Tensor) -> Tensor:
        """Per-sample gradients [..., B, P] → the released (noise-free) gradient [..., P]."""
        if self.rule == "per_sample_l2":
            return clip_l2(per_sample, self.bound).mean(-2)
        if self.rule == "per_sample_l1":
            return clip_l1(per_sample, self.bound).mean(-2)
        if self.rule == "smooth_mean":
            return smooth_clip(per_sample.mean(-2), self.bound)
        raise ValueError(f"unknown clipping rule '{self.rule}' (choose from per_sample_l2, per_sample_l1, smooth_mean)")


@dataclass(frozen=True)
class Target:
    """A gradient of the victim's loss on its private batch, at `point`, at round `round`.

    `kind` names what `gradient` really is (a key of `KINDS`). A multi-step target (`steps` > 1)
    is an update made of `steps` local steps of size `step_size` starting at `point`, each of
    them also moving by the known `drift`: φ^{t+1} = φ^t − step_size · g(φ^t) − drift.
    `clipping`, when set, is how each g was bounded from the per-sample gradients.
    """

    gradient: Tensor
    point: Tensor
    victim: int
    round: int
    kind: str = "gradient"
    steps: int = 1
    step_size: float | None = None
    drift: Tensor | None = None
    clipping: Clipping | None = None


def _expect(transcript: Transcript, extractor: str, *defenses: str) -> None:
    if transcript.public.defense not in defenses:
        raise ValueError(f"{extractor} reads transcripts of {', '.join(defenses)}, not of "
                         f"'{transcript.public.defense}'")


def _param(transcript: Transcript, name: str):
    hyper = transcript.public.hyper
    if name not in hyper:
        raise KeyError(f"public knowledge of '{transcript.public.defense}' has no hyperparameter '{name}'")
    return hyper[name]


def _heard(transcript: Transcript, kind: Kind, round: int, sender: int, receiver: int | None = -1) -> Tensor:
    """The payload in float64; a KeyError that names the link when a directed message is missing."""
    if receiver is None or receiver == -1 or transcript.find(kind, round=round, sender=sender, receiver=receiver):
        return transcript.payload(kind, round, sender, receiver).double()
    raise KeyError(f"{transcript.threat_model} transcript lacks the '{Kind(kind)}' message from agent {sender} "
                   f"to agent {receiver} at round {round}")


def _W(transcript: Transcript) -> Tensor:
    return transcript.public.mixing


def _neighbours(W: Tensor, i: int) -> list[int]:
    """N_i without i: the agents j ≠ i with w_ij ≠ 0."""
    return [j for j in torch.nonzero(W[i]).flatten().tolist() if j != i]


def _mixed(transcript: Transcript, kind: Kind, round: int, i: int) -> Tensor:
    """Σ_{j ∈ N_i ∪ {i}} w_ij · (j's broadcast of `kind` at `round`)."""
    W = _W(transcript)
    total = W[i, i] * _heard(transcript, kind, round, i, None)
    for j in _neighbours(W, i):
        total = total + W[i, j] * _heard(transcript, kind, round, j, None)
    return total


def _l2(transcript: Transcript) -> Clipping:
    """Per-sample ℓ2 clipping at the defense's public `clip` (DPDL, DP-D-PSGD)."""
    return Clipping("per_sample_l2", float(_param(transcript, "clip")))


def _x0(transcript: Transcript) -> Tensor:
    return transcript.public.initial_model.double()


# ---------------------------------------------------------------- D-PSGD, DP-D-PSGD


def dpsgd_state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """D-PSGD's update `x_i^{t+1} = Σ_j w_ij x_j^t − η g_i^t` solved for the gradient:
    `g_i^t = (Σ_j w_ij x_j^t − x_i^{t+1}) / η`, computed at the point `x_i^t`.

    Exact: for DP-D-PSGD the result is the released noisy gradient (clipped sum + N(0, σ²C²I))/B
    (`noisy_gradient`). Needs the victim's broadcasts at rounds t and t+1 and every neighbour's at
    round t: a global listener, an eavesdropper on all of the victim's links, or a curious
    neighbour whose own neighbours include all of the victim's.
    """
    _expect(transcript, "dpsgd_state_difference", "dpsgd", "dp_dpsgd")
    eta = float(_param(transcript, "lr"))
    mixed = _mixed(transcript, Kind.MODEL, round, victim)
    following = _heard(transcript, Kind.MODEL, round + 1, victim, None)
    return Target(
        gradient=(mixed - following) / eta,
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind="gradient" if transcript.public.defense == "dpsgd" else "noisy_gradient",
        clipping=None if transcript.public.defense == "dpsgd" else _l2(transcript),
    )


# ---------------------------------------------------------------- DPDL


def dpdl_cross_gradient(transcript: Transcript, victim: int, round: int, receiver: int | None = None) -> Target:
    """DPDL's CG scenario (seed 000 §VI-D): the cross-gradient the victim i sends to neighbour j,
    `g̈^{ji}_t = (1/B)(Σ_b clip_C(∇F_i(x^j_{t−1}; ζ_b)) + z^{ji}_t)` (eqs. 8–10), is a clipped mean
    gradient of i's batch plus N(0, σ²C²I)/B, at j's model x^j_{t−1}, which j broadcast in the same
    round (Alg. 1 line 3). Target = the payload, point = j's `model` broadcast; exact (ND variant:
    no noise, kind `gradient`).

    `receiver` = j; None takes the lowest j whose message (and model) the transcript holds.
    Sufficient: an eavesdropper on link (i, j), the curious neighbour j, a global listener.
    """
    _expect(transcript, "dpdl_cross_gradient", "dpdl")
    if receiver is None:
        heard = sorted(m.receiver for m in transcript.find(Kind.CROSS_GRADIENT, round=round, sender=victim)
                       if transcript.find(Kind.MODEL, round=round, sender=m.receiver, receiver=None))
        if not heard:
            raise KeyError(f"{transcript.threat_model} transcript has no '{Kind.CROSS_GRADIENT}' message from "
                           f"agent {victim} at round {round} together with its receiver's '{Kind.MODEL}' broadcast")
        receiver = heard[0]
    return Target(
        gradient=_heard(transcript, Kind.CROSS_GRADIENT, round, victim, receiver),
        point=transcript.payload(Kind.MODEL, round, receiver, None),
        victim=victim,
        round=round,
        kind="noisy_gradient" if _param(transcript, "noise") else "gradient",
        clipping=_l2(transcript),
    )


def dpdl_momentum_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """DPDL's MM scenario (seed 000 §VI-D): the difference of two consecutive momentum broadcasts
    ṽ^i_t − ṽ^i_{t−1}, at the point x^i_{t−1} (the victim's `model` broadcast of round t).

    What it equals (eqs. 19, 21): ṽ^i_t = β v^i_{t−1} + g̃^i_t with v^i_{t−1} = Σ_j w_ij ṽ^j_{t−1},
    so ṽ^i_t − ṽ^i_{t−1} = g̃^i_t + (β Σ_{j∈N_i} w_ij ṽ^j_{t−1} − ṽ^i_{t−1}), and
    g̃^i_t = Σ_{j≠i} g̈^{ij}_t/(√w_ij N) + (1/(√w_ii N) + α Σ_{j∈N_i} w_ij c^{ij}_t) ĝ^{ii}_t
    + z^{ii}_t/(B √w_ii N): the neighbours' noisy cross-gradients (of THEIR data at x^i), the
    victim's clipped self-gradient scaled by data-dependent weights, its self-noise, plus a
    momentum residue. Not a gradient of the victim's batch; `dpdl_momentum_gradient` removes the
    residue exactly. Needs only the victim's broadcasts at t−1 and t: any tap on one of its links.
    """
    _expect(transcript, "dpdl_momentum_difference", "dpdl")
    if round < 1:
        raise ValueError(f"the momentum difference needs rounds t−1 and t: round {round} has no predecessor "
                         "(use dpdl_momentum_gradient, ṽ^i_0 = g̃^i_0)")
    return Target(
        gradient=_heard(transcript, Kind.MOMENTUM, round, victim, None)
        - _heard(transcript, Kind.MOMENTUM, round - 1, victim, None),
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind="momentum_difference",
    )


def _calibrated(transcript: Transcript, victim: int, round: int) -> Tensor:
    """g̃^i_t = ṽ^i_t − β Σ_{j∈N_i} w_ij ṽ^j_{t−1} (eqs. 19, 21; v_0 = 0)."""
    current = _heard(transcript, Kind.MOMENTUM, round, victim, None)
    if round == 0:
        return current
    return current - float(_param(transcript, "beta")) * _mixed(transcript, Kind.MOMENTUM, round - 1, victim)


def dpdl_momentum_gradient(transcript: Transcript, victim: int, round: int) -> Target:
    """The better MM estimate: eq. 19 with eq. 21 solved for the aggregate,
    g̃^i_t = ṽ^i_t − β Σ_{j∈N_i} w_ij ṽ^j_{t−1} (g̃^i_0 = ṽ^i_0, since v_0 = 0), exact, at x^i_{t−1}.

    g̃^i_t is still a mixture (see `dpdl_momentum_difference`); `dpdl_self_gradient` isolates the
    victim's part. Needs the momenta of the victim at t and of all of N_i at t−1 (and the victim's
    model at t): a global listener, an eavesdropper on all of the victim's links, or a curious
    neighbour adjacent to all of the victim's neighbours.
    """
    _expect(transcript, "dpdl_momentum_gradient", "dpdl")
    return Target(
        gradient=_calibrated(transcript, victim, round),
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind="calibrated_gradient",
    )


def dpdl_self_gradient(transcript: Transcript, victim: int, round: int) -> Target:
    """The victim's self-gradient, isolated from its momentum: subtracting from g̃^i_t (exact, see
    `dpdl_momentum_gradient`) the cross-gradients g̈^{ij}_t its neighbours sent it (eq. 17) leaves

        R = g̃^i_t − Σ_{j≠i} g̈^{ij}_t / (√w_ij N) = s ĝ^{ii}_t + z^{ii}_t / (B √w_ii N),
        s = 1/(√w_ii N) + α Σ_{j∈N_i} w_ij c^{ij}_t,  c^{ij} = 1/(1 + e^{cos(g̈^{ij}, ĝ^{ii})}),

    with ĝ^{ii} the clipped self-gradient WITHOUT noise (eq. 14) at x^i_{t−1}.

    * ND variant (no noise): R = s ĝ^{ii}, s > 0, so the direction u = R/‖R‖ is exact; every c is
      then computable as DPDL computes it (cosines are scale-free: c^{ij} from the intercepted
      g̈^{ij} and u, c^{ii} = 1/(1 + e) because g̈^{ii} = ĝ^{ii}), hence s, and ĝ^{ii} = R/s
      exactly (kind `gradient`).
    * Noisy: c^{ii} needs cos(ĝ^{ii} + z^{ii}/B, ĝ^{ii}), and g̈^{ii} never crosses the wire, so
      s is not recoverable; returned is R itself (kind `scaled_noisy_gradient`), a positive
      multiple of ĝ^{ii} — s lies in [1/(√w_ii N) + α/(1+e), 1/(√w_ii N) + α e/(1+e)] since every
      c is in [1/(1+e), e/(1+e)] and the w_ij of N_i sum to 1 — plus N(0, (σC/(B √w_ii N))² I),
      the victim's own self-noise only.

    Needs everything `dpdl_momentum_gradient` needs plus every cross-gradient sent to the victim
    at round t: a global listener or an eavesdropper on all of the victim's links.
    """
    _expect(transcript, "dpdl_self_gradient", "dpdl")
    W, n = _W(transcript), transcript.public.agents
    residual = _calibrated(transcript, victim, round)
    received = {j: _heard(transcript, Kind.CROSS_GRADIENT, round, j, victim) for j in _neighbours(W, victim)}
    for j, gradient in received.items():
        residual = residual - gradient / (math.sqrt(W[victim, j]) * n)
    point = transcript.payload(Kind.MODEL, round, victim, None)
    if _param(transcript, "noise"):
        return Target(residual, point, victim, round, kind="scaled_noisy_gradient", clipping=_l2(transcript))
    direction = residual / residual.norm().clamp_min(1e-300)

    def calibration(gradient: Tensor) -> float:
        cosine = float(gradient @ direction / gradient.norm().clamp_min(1e-30))
        return 1.0 / (1.0 + math.exp(cosine))

    weight = float(W[victim, victim]) * calibration(direction)
    weight += sum(float(W[victim, j]) * calibration(gradient) for j, gradient in received.items())
    scale = 1.0 / (math.sqrt(W[victim, victim]) * n) + float(_param(transcript, "alpha")) * weight
    return Target(residual / scale, point, victim, round, kind="gradient", clipping=_l2(transcript))


# ---------------------------------------------------------------- Ternary quantization


def ternary_state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """The state difference under ternary quantization (seed 004, eq. 3):
    x_i^{k+1} = x_i^k + ε^k Σ_j w_ij (Q_j^k − Q_i^k) − ε^k λ^k g_i^k, where only the Q's are heard.

    Write Q_i^k = x_i^k + ν_i^k (ν the quantization error; E[ν | x] = 0 while r ≥ ‖x‖_∞). Putting
    the heard Q's in place of the unknown states gives

        ĝ_i^k = (x̂_i^k − Q_i^{k+1} + ε^k Σ_j w_ij (Q_j^k − Q_i^k)) / (ε^k λ^k),
        x̂_i^0 = x_0 (public), x̂_i^k = Q_i^k for k ≥ 1,
        ĝ_i^k − g_i^k = (ν_i^k [k ≥ 1] − ν_i^{k+1}) / (ε^k λ^k),

    an unbiased estimate (each draw has E[ν | x] = 0) whose error has per-coordinate variance
    (r|x_c| − x_c², summed over the two uncorrelated draws) / (ε^k λ^k)² — it grows with r and as
    the schedules decay; with saturated coordinates (|x_c| > r) ν is biased. When r ≫ ‖x‖_∞ most
    Q's are 0 and the estimate is mostly x̂ − 0 over ε^k λ^k, or 0: nothing of g is left. The point is x_0 at
    k = 0 (exact) and the unbiased but ternary Q_i^k afterwards. Nothing better is identifiable:
    from x_0 and the heard couplings the attacker knows x_i^{k+1} + Σ_{l≤k} ε^l λ^l g_i^l exactly,
    so the weighted SUM of past gradients is known up to the single draw ν_i^{k+1} (a bounded
    error that does not accumulate), but each round's gradient only up to two draws over ε^k λ^k.

    Needs Q of the victim at k and k+1 and of all its neighbours at k: a global listener, an
    eavesdropper on all of the victim's links, or a curious neighbour adjacent to all of them.
    """
    _expect(transcript, "ternary_state_difference", "ternary")
    lam = ternary_schedule(float(_param(transcript, "a1")), float(_param(transcript, "a3")),
                           float(_param(transcript, "delta1")), round)
    eps = ternary_schedule(float(_param(transcript, "a2")), float(_param(transcript, "a3")),
                           float(_param(transcript, "delta2")), round)
    W = _W(transcript)
    own = _heard(transcript, Kind.QUANTIZED_STATE, round, victim, None)
    coupling = torch.zeros_like(own)
    for j in _neighbours(W, victim):
        coupling += W[victim, j] * (_heard(transcript, Kind.QUANTIZED_STATE, round, j, None) - own)
    following = _heard(transcript, Kind.QUANTIZED_STATE, round + 1, victim, None)
    point = _x0(transcript) if round == 0 else own
    return Target(
        gradient=(point - following + eps * coupling) / (eps * lam),
        point=point.float(),
        victim=victim,
        round=round,
        kind="gradient_estimate",
    )


# ---------------------------------------------------------------- LT-ADMM-DP


def _bridges(transcript: Transcript, victim: int, neighbour: int, round: int) -> list[Tensor]:
    """z_{ij,0..round} for i = victim, j = neighbour: z_{ij,0} = x_0 (the defense's documented
    initialisation), z_{ij,l+1} = ½ z_{ij,l} − ½ m_{ji,l} (eq. 5b), from j's messages to i."""
    bridges = [_x0(transcript)]
    for k in range(round):
        bridges.append(0.5 * bridges[-1] - 0.5 * _heard(transcript, Kind.ADMM_BRIDGE, k, neighbour, victim))
    return bridges


def lt_admm_state(transcript: Transcript, victim: int, round: int, neighbour: int | None = None) -> Tensor:
    """x_{i,k+1} (k = `round`), read off the victim's message to `neighbour` j:
    m_{ij,k} = z_{ij,k} − 2ρ x_{i,k+1} (Alg. 1 line 13), so x_{i,k+1} = (z_{ij,k} − m_{ij,k}) / 2ρ with
    z_{ij,k} tracked from x_0 and j's messages m_{ji,0..k−1} (`_bridges`). Exact.

    `neighbour` None takes the lowest j whose messages to the victim at round k the transcript holds.
    Needs both directions of link (i, j) at rounds 0..k: the curious neighbour j, an eavesdropper on
    (i, j), or a global listener.
    """
    _expect(transcript, "lt_admm_state", "lt_admm_dp")
    if neighbour is None:
        heard = sorted(m.receiver for m in transcript.find(Kind.ADMM_BRIDGE, round=round, sender=victim))
        if not heard:
            raise KeyError(f"{transcript.threat_model} transcript has no '{Kind.ADMM_BRIDGE}' message from "
                           f"agent {victim} at round {round}")
        neighbour = heard[0]
    rho = float(_param(transcript, "rho"))
    bridge = _bridges(transcript, victim, neighbour, round)[-1]
    return (bridge - _heard(transcript, Kind.ADMM_BRIDGE, round, victim, neighbour)) / (2 * rho)


def lt_admm_bridge_update(transcript: Transcript, victim: int, round: int) -> Target:
    """The τ-step update of LT-ADMM-DP (seed 002, eq. 5a) at round k = `round`: local training
    φ^{t+1} = φ^t − (γ g_i(φ^t) + c), c = β(ρ|N_i| x_{i,k} − Σ_j z_{ij,k}), φ^0 = x_{i,k},
    x_{i,k+1} = φ^τ, summed over the τ steps:

        γ Σ_t g_i(φ^t) = x_{i,k} − x_{i,k+1} − τ c,  g_i(φ) = smooth_clip_ζ(batch mean) + N(0, σ_e² I),

    with x_{i,k}, x_{i,k+1} from `lt_admm_state` and every z_{ij,k} tracked from x_0. Exact; a
    multi-step target (steps τ, step size γ, point x_{i,k}, drift c) made of τ noisy smooth-clipped
    batch gradients at unknown intermediate points. A single neighbour gets the states but not
    c (the other z_{ij}), hence the update only up to τ c.

    Precision. The algebra is exact and computed in float64 from the payloads as heard, so a
    float64 run is recovered to ≈ 1e-14 (relative; the point stays in float64). From float32
    payloads, on a noiseless digits MLP (‖x‖ ≈ 9 moved by ≈ 0.1 a round), the update is 4–8e-6
    away from γ Σ_t g_i(φ^t): ≈ 3e-6 is the defense's own float32 arithmetic (its state
    difference is that far before anything is sent), the rest the rounding of each message
    m = z − 2ρx, over 2ρ. Every reading of the messages goes through one rounded m per state:
    averaging all links, or tracking z in float32 as the agents do, moved the error by < 5%.
    Neither part limits an inversion: iDLG gets the same images from the exact update as from
    the heard one (tests/test_lt_admm_exact.py).

    Needs both directions of every link of the victim at rounds 0..k: a global listener or an
    eavesdropper on all of the victim's links.
    """
    _expect(transcript, "lt_admm_bridge_update", "lt_admm_dp")
    W = _W(transcript)
    neighbours = _neighbours(W, victim)
    rho, beta = float(_param(transcript, "rho")), float(_param(transcript, "beta"))
    tau, gamma = int(_param(transcript, "tau")), float(_param(transcript, "gamma"))
    bridges = {j: _bridges(transcript, victim, j, round) for j in neighbours}
    first = neighbours[0]

    def state(k: int) -> Tensor:  # x_{i,k}
        if k == 0:
            return _x0(transcript)
        return (bridges[first][k - 1] - _heard(transcript, Kind.ADMM_BRIDGE, k - 1, victim, first)) / (2 * rho)

    before, after = state(round), state(round + 1)
    drift = beta * (rho * len(neighbours) * before - sum(bridges[j][round] for j in neighbours))
    return Target(
        gradient=before - after - tau * drift,
        point=before,
        victim=victim,
        round=round,
        kind="multi_step_update",
        steps=tau,
        step_size=gamma,
        drift=drift,
        clipping=Clipping("smooth_mean", float(_param(transcript, "zeta"))),
    )


# ---------------------------------------------------------------- Wang & Zhang (time-varying samples)


def _tvss_schedule(transcript: Transcript) -> Schedule:
    names = ("a1", "a2", "a3", "alpha", "beta", "gamma", "eta", "sigma_scale")
    return Schedule(*(float(_param(transcript, name)) for name in names))


def tvss_noisy_state(transcript: Transcript, victim: int, round: int) -> Target:
    """Wang & Zhang Alg. 1 (seed 003, eq. 3): x_{i,k+1} = (1−β_k) x_{i,k} + β_k Σ_{j∈N_i} a_ij y_{j,k}
    − α_k g_i^k, where only the noisy states y = x + n are heard (N_i includes i).

    The mixed term is heard exactly; putting y in place of the unknown states gives

        ĝ_i^k = ((1−β_k) x̂_{i,k} + β_k Σ_j a_ij y_{j,k} − y_{i,k+1}) / α_k,
        x̂_{i,0} = x_0 (public), x̂_{i,k} = y_{i,k} for k ≥ 1,
        ĝ_i^k − g_i^k = ((1−β_k) n_{i,k} [k ≥ 1] − n_{i,k+1}) / α_k,

    unbiased, with Laplace error of variance 2((1−β_k)² σ_k² [k ≥ 1] + σ_{k+1}²)/α_k² per
    coordinate — the noise of two rounds over the (decaying) step α_k. The point is x_0 at k = 0,
    else the Laplace-noised y_{i,k}. As for the ternary extractor, the linear system y_{i,1..K}
    in g_i^{0..K−1} is square, so no other unbiased linear estimate exists; y_{i,0} − x_0 even
    reveals n_{i,0}, which enters nothing else. Schedules from `defenses.tvss.Schedule`.

    Needs y of the victim at k and k+1 and of all its neighbours at k: a global listener, an
    eavesdropper on all of the victim's links, or a curious neighbour adjacent to all of them.
    """
    _expect(transcript, "tvss_noisy_state", "tvss_output")
    schedule = _tvss_schedule(transcript)
    alpha, beta = float(schedule.step(round)), float(schedule.weight(round))
    mixed = _mixed(transcript, Kind.NOISY_STATE, round, victim)
    point = _x0(transcript) if round == 0 else _heard(transcript, Kind.NOISY_STATE, round, victim, None)
    following = _heard(transcript, Kind.NOISY_STATE, round + 1, victim, None)
    return Target(
        gradient=((1 - beta) * point + beta * mixed - following) / alpha,
        point=point.float(),
        victim=victim,
        round=round,
        kind="gradient_estimate",
        clipping=Clipping("per_sample_l1", float(_param(transcript, "clip"))),
    )


def tvss_state_difference(transcript: Transcript, victim: int, round: int) -> Target:
    """Wang & Zhang Alg. 2 (seed 003, §4): x_{i,k+1} = (1−β_k) x_{i,k} + β_k Σ_{j∈N_i} a_ij x_{j,k}
    − α_k (g_i^k + n_{i,k}) with the raw states broadcast, solved for the released noisy gradient:
    g_i^k + n_{i,k} = ((1−β_k) x_{i,k} + β_k Σ_j a_ij x_{j,k} − x_{i,k+1}) / α_k, exact, at x_{i,k}.

    Needs the victim's states at k and k+1 and all its neighbours' at k: a global listener, an
    eavesdropper on all of the victim's links, or a curious neighbour adjacent to all of them.
    """
    _expect(transcript, "tvss_state_difference", "tvss_gradient")
    schedule = _tvss_schedule(transcript)
    alpha, beta = float(schedule.step(round)), float(schedule.weight(round))
    own = _heard(transcript, Kind.MODEL, round, victim, None)
    mixed = _mixed(transcript, Kind.MODEL, round, victim)
    following = _heard(transcript, Kind.MODEL, round + 1, victim, None)
    return Target(
        gradient=((1 - beta) * own + beta * mixed - following) / alpha,
        point=transcript.payload(Kind.MODEL, round, victim, None),
        victim=victim,
        round=round,
        kind="noisy_gradient",
        clipping=Clipping("per_sample_l1", float(_param(transcript, "clip"))),
    )


# ---------------------------------------------------------------- registry

Link = tuple[int, int | None]
"""(sender, receiver) of a message a tap must hear; receiver None for a broadcast."""


def _broadcasts(agents: list[int]) -> tuple[Link, ...]:
    return tuple((a, None) for a in agents)


def _victim_and_neighbours(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [_broadcasts([victim, *topology.neighbours(victim)])]


def _victim_only(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [_broadcasts([victim])]


def _one_cross_link(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [((victim, j), (j, None)) for j in topology.neighbours(victim)]


def _cross_to_victim(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    neighbours = topology.neighbours(victim)
    return [_broadcasts([victim, *neighbours]) + tuple((j, victim) for j in neighbours)]


def _all_bridge_links(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [tuple(link for j in topology.neighbours(victim) for link in ((victim, j), (j, victim)))]


def _one_link_both_ways(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [((victim, j), (j, victim)) for j in topology.neighbours(victim)]


def _span(first: int, last: int) -> Callable[[int], range]:
    return lambda t: range(t + first, t + last + 1)


@dataclass(frozen=True)
class Extractor:
    """One (defense, scenario): the function, the message kinds and rounds it reads, and the
    links it must hear (`links(victim, topology)`: alternatives, any one of which suffices).
    `needs` says the same in words, for reports and error messages."""

    defense: str
    scenario: str
    extract: Callable[..., Target | Tensor]
    kinds: frozenset[Kind]
    needs: str
    links: Callable[[int, Topology], list[tuple[Link, ...]]]
    rounds: Callable[[int], range]

    def missing(self, tap: Tap, victim: int, topology: Topology, round: int | None = None) -> str | None:
        """Why `tap` cannot feed this extractor for `victim` (at `round`, when given); None if it can."""
        if tap.kinds is not None and not self.kinds <= tap.kinds:
            return f"it does not record {', '.join(sorted(self.kinds - tap.kinds))}"
        if round is not None:
            needed = [t for t in self.rounds(round) if t >= 0]
            absent = [t for t in needed if not tap.wants_round(t)]
            if absent:
                return f"it does not record round(s) {absent}"
        unheard = [[link for link in alternative if not tap.hears(*link, topology)]
                   for alternative in self.links(victim, topology)]
        if all(unheard):
            sender, receiver = min(unheard, key=len)[0]
            return f"it does not hear agent {sender}'s " + (
                "broadcasts" if receiver is None else f"messages to agent {receiver}")
        return None

    def check(self, tap: Tap, victim: int, topology: Topology, round: int | None = None) -> None:
        """ValueError (one line) when `tap` cannot feed this extractor."""
        why = self.missing(tap, victim, topology, round)
        if why is not None:
            where = f" observing agent {tap.observer}" if tap.observer is not None else ""
            raise ValueError(f"({self.defense}, {self.scenario}) against agent {victim}: the "
                             f"{tap.threat_model} tap{where} cannot supply it, {why}; needs {self.needs}")


_ALL_NEIGHBOURS = ("a global listener, an eavesdropper on all of the victim's links, or a curious "
                   "neighbour adjacent to all of the victim's neighbours")

EXTRACTORS: dict[tuple[str, str], Extractor] = {
    (e.defense, e.scenario): e for e in (
        *(Extractor(name, "state_difference", dpsgd_state_difference, frozenset({Kind.MODEL}),
                    f"model broadcasts of the victim (t, t+1) and its neighbours (t): {_ALL_NEIGHBOURS}",
                    _victim_and_neighbours, _span(0, 1)) for name in ("dpsgd", "dp_dpsgd")),
        Extractor("dpdl", "cross_gradient", dpdl_cross_gradient, frozenset({Kind.CROSS_GRADIENT, Kind.MODEL}),
                  "one cross-gradient from the victim to a neighbour j and j's model broadcast (t): an "
                  "eavesdropper on link (victim, j), the curious neighbour j, or a global listener",
                  _one_cross_link, _span(0, 0)),
        Extractor("dpdl", "momentum", dpdl_momentum_difference, frozenset({Kind.MOMENTUM, Kind.MODEL}),
                  "the victim's momentum (t−1, t) and model (t) broadcasts: any tap on one of its links",
                  _victim_only, _span(-1, 0)),
        Extractor("dpdl", "momentum_gradient", dpdl_momentum_gradient, frozenset({Kind.MOMENTUM, Kind.MODEL}),
                  f"momentum broadcasts of the victim (t) and its neighbours (t−1): {_ALL_NEIGHBOURS}",
                  _victim_and_neighbours, _span(-1, 0)),
        Extractor("dpdl", "self_gradient", dpdl_self_gradient,
                  frozenset({Kind.MOMENTUM, Kind.MODEL, Kind.CROSS_GRADIENT}),
                  "momentum_gradient's messages plus every cross-gradient sent to the victim (t): a "
                  "global listener or an eavesdropper on all of the victim's links",
                  _cross_to_victim, _span(-1, 0)),
        Extractor("ternary", "state_difference", ternary_state_difference, frozenset({Kind.QUANTIZED_STATE}),
                  f"quantized states of the victim (k, k+1) and its neighbours (k): {_ALL_NEIGHBOURS}",
                  _victim_and_neighbours, _span(0, 1)),
        Extractor("lt_admm_dp", "bridge", lt_admm_bridge_update, frozenset({Kind.ADMM_BRIDGE}),
                  "both directions of every link of the victim at rounds 0..k: a global listener or an "
                  "eavesdropper on all of the victim's links",
                  _all_bridge_links, lambda k: range(0, k + 1)),
        Extractor("tvss_output", "noisy_state", tvss_noisy_state, frozenset({Kind.NOISY_STATE}),
                  f"noisy states of the victim (k, k+1) and its neighbours (k): {_ALL_NEIGHBOURS}",
                  _victim_and_neighbours, _span(0, 1)),
        Extractor("tvss_gradient", "state_difference", tvss_state_difference, frozenset({Kind.MODEL}),
                  f"model broadcasts of the victim (k, k+1) and its neighbours (k): {_ALL_NEIGHBOURS}",
                  _victim_and_neighbours, _span(0, 1)),
    )
}
"""Every shipped defense's extraction scenarios, by (defense name, scenario)."""


def extractor(defense: str, scenario: str) -> Extractor:
    """The registry entry, or a one-line ValueError naming what exists."""
    if (defense, scenario) in EXTRACTORS:
        return EXTRACTORS[defense, scenario]
    known = sorted(s for d, s in EXTRACTORS if d == defense)
    if not known:
        defenses = ", ".join(sorted({d for d, _ in EXTRACTORS}))
        raise ValueError(f"no extractor for defense '{defense}' (known: {defenses})")
    raise ValueError(f"defense '{defense}' has no extraction scenario '{scenario}' (known: {', '.join(known)})")


# ---------------------------------------------------------------- intercepted models


def _broadcast_model(kind: Kind) -> Callable[[Transcript, int, int], Tensor]:
    def read(transcript: Transcript, victim: int, round: int) -> Tensor:
        return transcript.payload(kind, round, victim, None).float()

    read.__doc__ = f"The victim's '{kind}' broadcast at `round`, as sent."
    return read


def _lt_admm_model(transcript: Transcript, victim: int, round: int) -> Tensor:
    """x_{i,k+1} read off one of the victim's links at round k (`lt_admm_state`, exact)."""
    return lt_admm_state(transcript, victim, round).float()


_MODEL_NEEDS = "the victim's {} broadcast at the round: any tap on one of its links"

MODEL_VIEWS: dict[str, Extractor] = {
    e.defense: e for e in (
        *(Extractor(name, "model", _broadcast_model(Kind.MODEL), frozenset({Kind.MODEL}),
                    _MODEL_NEEDS.format("model"), _victim_only, _span(0, 0))
          for name in ("dpsgd", "dp_dpsgd", "dpdl", "tvss_gradient")),
        Extractor("tvss_output", "model", _broadcast_model(Kind.NOISY_STATE), frozenset({Kind.NOISY_STATE}),
                  _MODEL_NEEDS.format("noisy state (its model plus Laplace noise)"), _victim_only, _span(0, 0)),
        Extractor("ternary", "model", _broadcast_model(Kind.QUANTIZED_STATE), frozenset({Kind.QUANTIZED_STATE}),
                  _MODEL_NEEDS.format("quantized state (one ternary draw of its model)"), _victim_only,
                  _span(0, 0)),
        Extractor("lt_admm_dp", "model", _lt_admm_model, frozenset({Kind.ADMM_BRIDGE}),
                  "both directions of one link of the victim at rounds 0..k: the curious neighbour on it, "
                  "an eavesdropper on it, or a global listener", _one_link_both_ways, lambda k: range(0, k + 1)),
    )
}
"""What an attacker holds of agent i's model at round t, by defense: the model as it crossed the
wire (with the defense's noise or quantization when it sends a perturbed model), or, for
LT-ADMM-DP, which never sends a model, the state x_{i,t+1} its bridge messages give away exactly.
Membership inference (the campaign layer's membership findings) attacks these."""


# ---------------------------------------------------------------- defenses defined outside privaudit

_SHIPPED = frozenset(EXTRACTORS) | frozenset(MODEL_VIEWS)


def register_extractor(extractor: Extractor) -> Extractor:
    """Make a defense defined outside privaudit (`defenses.external`) readable by attacks: the
    extractor joins `EXTRACTORS` under (its defense's name, its scenario). Call it at the top level
    of the defense's module, so that importing the module registers it in every process. A shipped
    entry is never replaced (ValueError); registering a key again (the module imported anew)
    replaces the earlier entry."""
    return _register(EXTRACTORS, (extractor.defense, extractor.scenario), extractor)


def register_model_view(view: Extractor) -> Extractor:
    """Likewise for `MODEL_VIEWS`: what an attacker holds of the victim's model, which membership
    inference attacks (`view.extract(transcript, victim, round)` returns the model)."""
    return _register(MODEL_VIEWS, view.defense, view)


def _register(registry: dict, key: object, entry: Extractor) -> Extractor:
    if key in _SHIPPED and registry[key] is not entry:
        raise ValueError(f"{key} is privaudit's own entry and cannot be replaced")
    registry[key] = entry
    return entry
