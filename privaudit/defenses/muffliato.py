"""Muffliato-GD (Cyffers, Even, Bellet & Massoulié, "Muffliato: Peer-to-Peer Privacy
Amplification for Decentralized Optimization and Averaging", NeurIPS 2022, arXiv 2206.05091):
every agent takes a local step on its noisy gradient, then the agents run K gossip steps x ← W x.

What we could read of the paper: its abstract and introduction (pairwise network DP, "local noise
injection with (simple or randomized) gossip averaging", and "a differentially private
decentralized optimization algorithm that alternates between local gradient descent steps and
gossip averaging"), and its authors' code (github.com/totilas/muffliato: `private.py` adds
Gaussian noise to each node's *full local* gradient, clips the noisy gradient, steps, then runs
`gossip_vector`, Chebyshev-accelerated gossip with T_mix steps, on a fresh Erdős–Rényi graph each
iteration). The theorems' text we could not read: the pairwise formula below is taken from that
code and from a later paper's code (`privaudit.network_accounting`, `_SGD_SOURCE`).

The algorithm run here, one communication round per gossip step (`rounds` counts rounds):

    round t:  broadcast x^t (Kind.MODEL);  x^{t+1} = W x^t − s_t g̃(x^t),  s_t = η if t ≡ 0 (mod K), else 0

with g̃ DP-D-PSGD's noisy gradient (`privaudit.defenses.dpsgd.DPDPSGD.local_gradients`): Poisson sampling at
rate q_i = B/|D_i|, per-sample ℓ2 clipping to C, N(0, σ²C² I) on the clipped sum, divided by B.
An update every K-th round, K gossip steps between updates. Decisions where the paper and its code
leave us a choice:

* **Sampling.** Muffliato-GD, as its name and its authors' code say, steps on each agent's full
  local gradient. Poisson sampling at rate B/|D_i| covers it: B = |D_i| (equal shards) takes every
  record (q = 1), the paper's GD; a smaller B is the stochastic variant, accounted with its rate.
* **Clipping.** The authors' code adds noise of scale σ·0.5 to the unclipped gradient ("max
  sensibility = .5 for normalized features") and then clips the noisy gradient; here each sample's
  gradient is clipped to C before the noise, as in DP-SGD, so the sensitivity C is enforced and the
  noise multiplier is σ.
* **Gossip.** Plain synchronous gossip x ← W x, whose pairwise loss the authors' code evaluates
  (`muffliato.py`, `simulation`) and `privaudit.network_accounting` implements; their experiments
  accelerate it (Chebyshev polynomials, `acceleratedsimulation`, `gossip_vector`).
* **Where the gradient is taken.** The authors' code iterates θ^{k+1} = Gossip_K(θ^k − η g̃(θ^k)):
  the fresh noisy update is mixed K times before the next local step. Here the local step is taken
  at the state the agent broadcast at the update round and applied after that round's gossip step
  (x^{t+1} = W x^t − η g̃(x^t), as D-PSGD does): the update is mixed K − 1 times before the next
  local step, which sits one gossip step earlier than θ^{k+1}. Both schedules broadcast the same
  linear recurrence (each message W times the agent's previous one, minus s_t g̃^t; our round 0
  sends the public x^0, which the authors' schedule does not, then both send x^0 − η g̃(x^0)), so
  the noise every message carries, and with it every linear-Gaussian figure of
  `privaudit.network_accounting`, is that of the authors' schedule; only the points at
  which the gradients are computed differ, which moves the noise-free part of the messages. In
  exchange, with K = 1 this defense is DP-D-PSGD, number for number (`tests/test_muffliato.py`),
  and every attack that reads a broadcast as the point of a gradient stays exact.

Muffliato's averaging (the setting of its pairwise averaging bound): K ≥ `rounds` leaves one noisy
update, at round 0, from the public x^0: x^1 = x^0 − η g̃(x^0), each agent's private value (its
clipped gradient sum over B at x^0, a point both worlds share) with Gaussian noise added once, then
rounds − 1 gossip steps x ← W x, each state broadcast and heard (x^1 = the noisy values, W x^1, …,
W^{rounds−2} x^1). With B = |D_i| (q = 1: every record in the sum) the noisy value moves by at most
ηC/B between the worlds under N(0, (ησC/B)²) noise: Δ/σ = 1/σ in the averaging formula's terms
(`averaging`, `pairwise_claim`). With q < 1 the value is subsampled as well, and the averaging
figures, which do not count it, are the q = 1 figures.

The claim. The paper's guarantee is pairwise network DP, one Rényi curve per pair of agents: no
defense-level `Claim` holds it. The defense-level claim is the local DP of each agent's noisy
updates, the composition such papers' proofs rest on (the RDP accountant on ⌈T/K⌉ Poisson-subsampled
Gaussians, worst agent); the pairwise claim is `Muffliato.pairwise_claim`, audited pair by pair
(`privaudit.attacks.audit.position`). Sound ε: the PLD accountant on the same event (the messages and the
states are post-processing of the noisy updates).
"""

from __future__ import annotations

import torch
from pydantic import Field

from privaudit.accounting import ClaimThreat
from privaudit.defenses.base import register
from privaudit.defenses.dpsgd import DPDPSGD, DPDPSGDParams
from privaudit.network_accounting import PairLoss, muffliato_averaging_claim, muffliato_gd_claim
from privaudit.wire import Kind, Wire


PROVENANCE = ("Provenance: the formulas were read only in code, never in the theorems' text: the averaging bound in "
              "the authors' code (github.com/totilas/muffliato), the bound for gradient descent with one gossip step "
              "per update, as the 'corrected' version of the revised paper's Theorem 11, in the code of a later paper "
              "(Bellet et al. 2026, arXiv 2510.17480); no verdict built on them is stronger than that reading")
"""Where the pairwise claim comes from, said wherever it is used (`privaudit.network_accounting`)."""


class MuffliatoParams(DPDPSGDParams):
    """Muffliato-GD's inputs: DP-D-PSGD's and K; B = |D_i| is the paper's full local gradient, and
    its authors' code takes K = ⌈ln(n max(1/4, σ²)/σ²)/√λ_W⌉ (`T_mix`, for accelerated gossip)."""

    gossip_steps: int = Field(1, ge=1, description="K: gossip steps (communication rounds) per noisy local update")


def averaging(params: MuffliatoParams, rounds: int) -> bool:
    """Whether a run of `rounds` rounds is Muffliato's averaging: one noisy value per agent (the
    update of round 0), then rounds − 1 gossip steps, each heard (K ≥ rounds; module docstring)."""
    return params.gossip_steps >= rounds


@register
class Muffliato(DPDPSGD):
    name = "muffliato"
    title = "Muffliato-GD (local noise, then K gossip steps)"
    Params = MuffliatoParams

    def updates_at(self, t: int) -> bool:
        """Whether round t takes a noisy local step (every K-th round, from round 0)."""
        return t % self.params.gossip_steps == 0

    def updates(self, rounds: int) -> int:
        """The noisy local updates of a run of `rounds` rounds: ⌈rounds / K⌉."""
        return -(-rounds // self.params.gossip_steps)

    def averaging(self, rounds: int) -> bool:
        """Whether a run of `rounds` rounds is Muffliato's averaging (`averaging`)."""
        return averaging(self.params, rounds)

    delivers = True

    def step(self, t: int, wire: Wire) -> None:
        """An update round is DP-D-PSGD's round; a gossip round broadcasts and mixes what the wire
        delivered (a neighbour who lies reaches it, as on an update round), and its agents' applied
        update, none, is disclosed as zeros (what a coalition member knows)."""
        if self.updates_at(t):
            super().step(t, wire)
            return
        delivered = wire.broadcast_each(t, Kind.MODEL, self.x)
        wire.disclose_each(t, "gradient", lambda: torch.zeros_like(self.x))
        self.x = self.gossip(self.x, delivered)

    def claim_threat(self) -> ClaimThreat:
        """The local DP claimed here holds against any adversary (the DP-D-PSGD release); the
        paper's pairwise network DP, a statement beside it, is not covered by that reading."""
        return ClaimThreat("any adversary", (
            "privaudit's reading of the mechanism (the paper's theorems were not read, see the module docstring): "
            "the local DP of each per-sample clipped, noised update holds whatever model it is computed at; the "
            "pairwise network DP of the statements rests on the other agents' noise and gossip, which an agent "
            "that lies does not follow, so it is not covered by this reading"))

    def claim_words(self, rounds: int, q: float) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """The local DP of each agent's ⌈rounds / K⌉ noisy updates, which Muffliato's pairwise bounds
        refine (`DPDPSGD.claim` composes them), and the pairwise guarantee the paper states instead."""
        p = self.params
        equation = (f"local DP of each agent's noisy updates: RDP of the Poisson-subsampled Gaussian (q={q:.4g}, "
                    f"σ={p.noise_multiplier}) composed over the ⌈{rounds}/{p.gossip_steps}⌉ = {self.updates(rounds)} "
                    f"updates of {rounds} rounds (Mironov 2017), the composition Muffliato's pairwise bounds refine")
        assumptions = ("the paper's guarantee is pairwise network DP, one curve per pair of agents: this is the "
                       "local DP its pairwise bounds refine, not a figure the paper states",
                       "per-sample clipping to C before the noise (the authors' code clips the noisy gradient); "
                       "plain gossip (their experiments accelerate it); the local step at the broadcast state, "
                       "one gossip step before theirs (module docstring)")
        statements = (f"pairwise network DP (Cyffers et al. 2022): one Rényi curve ε_{{u→v}}(α) per pair of agents "
                      f"(Muffliato.pairwise_claim; audited pair by pair by the position audit). {PROVENANCE}",)
        return equation, assumptions, statements

    def pairwise_claim(self, victim: int, attacker: int, rounds: int, delta: float | None = None) -> PairLoss:
        """Muffliato's claimed ε_{u→v} for the messages `attacker` receives in a run of `rounds`
        rounds: its neighbours' states x^1..x^{rounds−1} (x^0 is public), rounds − 1 gossip steps
        carrying the updates made before them (`privaudit.network_accounting.muffliato_gd_claim`,
        at this run's W, K and σ, δ the defense's unless given). Its provenance bounds what it can
        support (`PROVENANCE`); for K > 1 it is privaudit's extension of the K = 1 formula. A run that
        is Muffliato's averaging (`averaging`) gets the averaging formula instead, as its authors' code
        computes it (`muffliato_averaging_claim`: Δ/σ = 1/σ, the rounds − 1 states heard)."""
        p = self.params
        delta = p.delta if delta is None else delta
        if self.averaging(rounds):
            return muffliato_averaging_claim(self.setup.topology.network.W, victim, attacker, rounds - 1,
                                             p.noise_multiplier, delta)
        return muffliato_gd_claim(self.setup.topology.network.W, victim, attacker, rounds - 1, p.gossip_steps,
                                  p.noise_multiplier, delta)
