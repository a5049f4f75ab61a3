"""A defense defined outside privaudit whose noise cancels in the average, with a claim that holds
against one attacker and not another, and a view that says what a curious neighbour knows.
Nothing in privaudit imports this module; `examples/pairwise_gossip.toml` audits it.

The algorithm (pairwise-cancelling noise, as in correlated-noise gossip). Each round agent i takes
a local step u_i = x_i − η g_i (per-sample ℓ2 clipping to C, the mean over B records). Every pair
of neighbours i < j draws one n_ij ~ N(0, (σΔ)² I), Δ = 2ηC/B, from randomness the two share;
agent i sends m_ij = u_i + n_ij to j and agent j sends m_ji = u_j + n_ji with n_ji = −n_ij. Then
x_i ← w_ii u_i + Σ_j w_ij m_ji. W is symmetric, so the noise cancels in the average:
Σ_i x_i = Σ_i u_i.

The claim, a plausible paper's: one record replaced moves u_i by at most Δ in ℓ2, each message
carries Gaussian noise of standard deviation σΔ, so each message is (ε, δ)-DP by the Gaussian
mechanism, ε = √(2 ln(1.25/δ))/σ (Dwork & Roth 2014, Thm A.1): 0.48 at σ = 10, δ = 10⁻⁵; an
attacker hearing one message of agent i per round learns at most Tε over T rounds. It holds for
an eavesdropper on one direction of one link (it hears m_ij alone). It is false for a global
listener: m_ij + m_ji = u_i + u_j exactly, and on a triangle (i, a, b)
u_i = ((m_ia + m_ai) + (m_ib + m_bi) − (m_ab + m_ba)) / 2, noise-free. So no accountant bounds
what the code releases, and the sound ε is ∞. (An eavesdropper hearing both directions of one
link learns u_i + u_j, noise-free too; the campaign's eavesdropper hears one direction.)

A curious neighbour j knows more than it hears: it drew n_ij with i, so m_ij − n_ij = u_i. Its
view says so: the extractor "own_noise" declares `knows=("noise_from_{victim}",)`, a value the
defense discloses to j alone (`Wire.disclose_each`), and privaudit lets only a tap observing as
one agent read it. The law-free canary audit of that neighbour then uses it; without it, the
neighbour would be audited as an eavesdropper on its link, and its "not refuted" would say
nothing about what it knows.

Its view, at the bottom, three extractors and no law, each reading the victim's released update
û_i^t and returning (x̂ − û_i^t)/η at x̂ = x_0 at round 0 (exact), and at x̂ = û_i^{t−1} after
it (an estimate: the victim's state is not on the wire): "message" one message m_ij, "own_noise"
m_ij − n_ij, "pair_sums" the triangle above.
"""

import math

import dp_accounting
import torch
from pydantic import Field
from torch import Tensor

from privaudit.attacks.extraction import Extractor, Target, heard, initial_model, own, public_params, span
from privaudit.attacks.views import Noise, register_batch_size, register_extractor, register_noise
from privaudit.accounting import Claim, Neighbours
from privaudit.defenses.base import Defense, DefenseParams
from privaudit.grads import clip_l2, per_sample_grads_agents
from privaudit.setup import Setup
from privaudit.topology import Topology
from privaudit.wire import Kind, Transcript, Wire

MESSAGE = Kind.NOISY_STATE
"""The kind each m_ij travels as (one directed message per link)."""


class PairwiseGossipParams(DefenseParams):
    lr: float = Field(0.5, gt=0, description="step size η")
    batch_size: int = Field(8, ge=1, description="B: distinct records per agent per round")
    clip: float = Field(1.0, gt=0, description="C: per-sample ℓ2 clip norm")
    sigma: float = Field(10.0, gt=0, description="σ: the pairwise noise's standard deviation over Δ")
    delta: float = Field(1e-5, gt=0, lt=1, description="δ of the claim")


def per_message_epsilon(params: PairwiseGossipParams) -> float:
    """The paper's ε of one message: the Gaussian mechanism of noise multiplier σ (Dwork & Roth
    2014, Thm A.1), √(2 ln(1.25/δ))/σ."""
    return math.sqrt(2 * math.log(1.25 / params.delta)) / params.sigma


class PairwiseGossip(Defense):
    name = "pairwise_gossip"
    title = "Pairwise gossip (noise that cancels in the average)"
    Params = PairwiseGossipParams

    def __init__(self, params: PairwiseGossipParams, setup: Setup) -> None:
        super().__init__(params, setup)
        setup.local.check_batch_size(params.batch_size)
        topology = setup.topology
        self.x = setup.model.initial().repeat(topology.n, 1)
        pairs = topology.edges
        self.links = [*pairs, *[(j, i) for i, j in pairs]]
        """Directed links: (i, j) for every pair i < j, then (j, i): row r + |pairs| carries −n of row r."""
        device = self.x.device
        self.senders = torch.tensor([i for i, _ in self.links], device=device)
        self.receivers = torch.tensor([j for _, j in self.links], device=device)
        self.incoming = topology.weights(self.receivers, self.senders).to(self.x.dtype)
        self.own_weight = torch.diagonal(topology.mixing(self.x.dtype, device)).repeat(topology.copies)

    @property
    def states(self) -> Tensor:
        return self.x

    def step(self, t: int, wire: Wire) -> None:
        p, setup = self.params, self.setup
        xb, yb, rows = setup.local.fixed_batches(p.batch_size, setup.generator)
        wire.disclose_each(t, "batch", rows)  # scores an inversion; no attacker is handed it
        g = clip_l2(per_sample_grads_agents(setup.model, self.x, xb, yb), p.clip).mean(dim=1)
        u = self.x - p.lr * g
        pair = torch.randn((len(self.links) // 2, self.x.shape[1]), generator=setup.generator)
        noise = torch.cat([pair, -pair]) * (p.sigma * 2 * p.lr * p.clip / p.batch_size)
        messages = u[self.senders] + noise
        wire.send_each(t, MESSAGE, self.links, messages)
        self._disclose(t, wire, noise)
        self.x = (self.own_weight[:, None] * u).index_add(0, self.receivers, self.incoming[:, None] * messages)

    def _disclose(self, t: int, wire: Wire, noise: Tensor) -> None:
        """What each agent knows of the pairwise noise: as "noise_from_k", the n_kj agent k of its
        network added to its message to it (zeros where k sends it nothing). Named by k in one
        network, so an audit's worlds name it alike."""
        size = self.setup.topology.network_size
        for k in range(size):
            def rows(k: int = k) -> Tensor:
                found = torch.zeros_like(self.x)
                sent = self.senders % size == k
                return found.index_copy(0, self.receivers[sent], noise[sent])
            wire.disclose_each(t, f"noise_from_{k}", rows)

    def mechanism(self, rounds: int) -> dp_accounting.DpEvent:
        """What the code releases about an agent's data: its messages of a round sum, over a
        triangle, to u_i without noise (module docstring), so nothing bounds it."""
        return dp_accounting.NonPrivateDpEvent()

    def claim(self, rounds: int) -> Claim:
        p = self.params
        return Claim(defense=self.name, notion="(ε, δ)-DP", adjacency="one record of an agent replaced",
                     eps_claimed=rounds * per_message_epsilon(p), eps_stated=None, eps_sound=math.inf,
                     delta=p.delta, horizon=rounds,
                     equation="Gaussian mechanism per message, ε = √(2 ln(1.25/δ))/σ (Dwork & Roth Thm A.1), "
                              "T messages of the victim heard",
                     sound_method="none: a global listener sums the messages of a triangle and removes the noise "
                                  "(NonPrivateDpEvent)",
                     assumptions=("an attacker hears one message of each agent per round",
                                  "the pairwise noise is secret from the attacker"),
                     neighbours=Neighbours("replace-one"))


def _message(transcript: Transcript, victim: int, round: int) -> Tensor:
    """m_ij, the victim's message to the lowest-numbered agent j it was heard sending to."""
    sent = transcript.find(MESSAGE, sender=victim)
    if not sent:
        raise KeyError(f"the {transcript.threat_model} transcript holds no message of agent {victim}")
    return heard(transcript, MESSAGE, round, victim, min(m.receiver for m in sent))


def _own_noise(transcript: Transcript, victim: int, round: int) -> Tensor:
    """m_ij − n_ij = u_i, j the observing agent, which knows n_ij."""
    return (heard(transcript, MESSAGE, round, victim, transcript.observer)
            - own(transcript, f"noise_from_{victim}", round))


def _pair_sums(transcript: Transcript, victim: int, round: int) -> Tensor:
    """u_i = ((m_ia + m_ai) + (m_ib + m_bi) − (m_ab + m_ba)) / 2 over the first triangle (i, a, b)."""
    W = transcript.public.mixing
    a, b = _triangles(victim, lambda i, j: bool(W[i, j] != 0), range(len(W)))[0]

    def both(i: int, j: int) -> Tensor:
        return heard(transcript, MESSAGE, round, i, j) + heard(transcript, MESSAGE, round, j, i)

    return (both(victim, a) + both(victim, b) - both(a, b)) / 2


def _triangles(victim: int, linked, agents) -> list[tuple[int, int]]:
    around = [j for j in agents if j != victim and linked(victim, j)]
    return [(a, b) for a in around for b in around if a < b and linked(a, b)]


def _target(release):
    """An extractor returning (x̂ − û^t)/η from `release`, the attacker's û^t (module docstring)."""
    def extract(transcript: Transcript, victim: int, round: int) -> Target:
        p = public_params(transcript.public.hyper, PairwiseGossipParams)
        point = initial_model(transcript) if round == 0 else release(transcript, victim, round - 1)
        kind = ("noisy_gradient" if release is _message else "gradient") if round == 0 else "gradient_estimate"
        return Target((point - release(transcript, victim, round)) / p.lr, point.float(), victim, round, kind=kind)

    extract.__doc__ = release.__doc__
    return extract


def _one_link(victim: int, topology: Topology):
    return [((victim, j),) for j in topology.neighbours(victim)]


def _triangle_links(victim: int, topology: Topology):
    return [((victim, a), (a, victim), (victim, b), (b, victim), (a, b), (b, a))
            for a, b in _triangles(victim, topology.has_edge, range(topology.n))]


register_extractor(Extractor("pairwise_gossip", "message", _target(_message), frozenset({MESSAGE}),
                             "one message of the victim to a neighbour", _one_link, span(-1, 0)))
register_extractor(Extractor("pairwise_gossip", "own_noise", _target(_own_noise), frozenset({MESSAGE}),
                             "a curious neighbour: the victim's message to it and the noise the two share",
                             _one_link, span(-1, 0), knows=("noise_from_{victim}",)))
register_extractor(Extractor("pairwise_gossip", "pair_sums", _target(_pair_sums), frozenset({MESSAGE}),
                             "both directions of the three links of a triangle through the victim",
                             _triangle_links, span(-1, 0)))
register_batch_size("pairwise_gossip", lambda hyper: public_params(hyper, PairwiseGossipParams).batch_size)
register_noise(Noise("pairwise_gossip", {"sigma": ("σ", True)}))
