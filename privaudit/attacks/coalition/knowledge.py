"""A coalition of curious agents solving for the updates of agents it is not connected to
(El Mrini, Cyffers & Bellet, "Privacy Attacks in Decentralized Learning", ICML 2024).

Honest-but-curious agents C follow the protocol and pool what they hear: their own states and
gradients, and every message their neighbours broadcast. Each message is a linear function of
the initial states, of every agent's gradients and, for randomised messages, of draws nobody in
C hears. Written over a window of rounds t0..t0+L this is the paper's knowledge system:

    K z = y,     z = [unknown gradients; unknown states at t0; unheard draws],

one equation per heard message (per parameter coordinate: K is shared by all P coordinates),
built here by carrying every agent's state as a linear form through the defense's recurrence

    x^{t+1} = A_t x^t + B_t m^t − s_t g^t          (`Dynamics`),

where m^t is what agents broadcast (their state, or a random draw around it). The system is
solved twice. Without any assumption, every agent's gradient at every round is its own unknown:
what that determines is exact up to the float32 rounding of the payloads (amplified by 1/s_t) —
in D-PSGD, the coalition's neighbours at the first round of the window. With the paper's
similarity assumption, agent k's gradient is one unknown g_k over the window: far more agents are
determined, but the gradient moves by about s_t·‖∇²f‖·‖g‖ per round, and that drift is the error
the assumption costs, amplified for agents far from the coalition (each hop weakens their trace
in what the coalition hears). Where every agent trains on one fixed record, `privaudit.attacks.coalition.record_fit`
needs no assumption: it fits the records themselves to the messages, and `recover` ranks what it
finds between the two. The coalition's own gradients are known (its members disclose them
to themselves).

Which agents are exposed, and how (`EXPOSURES`), is computed, not guessed: z_m is determined by
the heard messages exactly when the unit vector e_m lies in the row space of K, i.e. when the
minimum-norm least-squares solution's component m does not move along K's null space.
Identifiability depends on the graph, the coalition, the window and the defense's recurrence,
never on the data. Everything is computed in float64.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from privaudit.attacks.coalition.dynamics import Dynamics
from privaudit.attacks.extraction import Target
from privaudit.attacks.views import dynamics
from privaudit.topology import Topology
from privaudit.wire import Disclosure, Kind, Message, PublicKnowledge, Transcript

IDENTIFIABLE_TOL = 1e-6
"""An unknown counts as determined when its null-space component is below this (unit scale)."""


def heard_agents(topology: Topology, coalition: Iterable[int]) -> list[int]:
    """The coalition and every agent whose broadcasts reach it, sorted."""
    members = set(coalition)
    return sorted(members | {j for c in members for j in topology.neighbours(c)})


@dataclass(frozen=True)
class Unknown:
    """One block row of z: what it is (`gradient`, `state` at t0, or an unheard `draw`), whose, when."""

    what: str
    agent: int
    round: int


@dataclass
class KnowledgeSystem:
    """K z = y over one window, with the unknowns' names."""

    unknowns: list[Unknown]
    matrix: np.ndarray
    observations: np.ndarray

    def solve(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(z: the minimum-norm least-squares solution [M, P], determined: whether each unknown is
        fixed by the equations [M], relative residual ‖Kz − y‖/‖y‖: how far the messages are from
        the system's model of them)."""
        u, s, vt = np.linalg.svd(self.matrix, full_matrices=False)
        keep = s > s[0] * max(self.matrix.shape) * np.finfo(np.float64).eps * 16 if len(s) else s > 0
        u, s, vt = u[:, keep], s[keep], vt[keep]
        z = vt.T @ ((u.T @ self.observations) / s[:, None])
        leftover = 1.0 - (vt ** 2).sum(axis=0)
        residual = np.linalg.norm(self.matrix @ z - self.observations) / max(np.linalg.norm(self.observations), 1e-300)
        return z, np.sqrt(np.clip(leftover, 0.0, None)) < IDENTIFIABLE_TOL, float(residual)


class _Builder:
    """Carries every agent's state as (coefficients over the unknowns, constant) through the
    recurrence and collects one equation per heard message."""

    def __init__(self, n: int, unknowns: list[Unknown], points: int) -> None:
        self.index = {(u.what, u.agent, u.round): m for m, u in enumerate(unknowns)}
        self.coef = np.zeros((n, len(unknowns)))
        self.const = np.zeros((n, points))
        self.rows: list[np.ndarray] = []
        self.values: list[np.ndarray] = []

    def unit(self, what: str, agent: int, round: int) -> np.ndarray:
        row = np.zeros(len(self.index))
        row[self.index[what, agent, round]] = 1.0
        return row

    def equation(self, agent: int, value: np.ndarray) -> None:
        """State of `agent` (its current form) = `value`."""
        self.rows.append(self.coef[agent].copy())
        self.values.append(value - self.const[agent])


def knowledge_system(transcript: Transcript, coalition: Iterable[int], first: int, last: int,
                     constant: bool = True) -> KnowledgeSystem:
    """The coalition's equations over rounds `first`..`last` (messages of both ends included),
    with one gradient unknown per agent over the window (`constant`, the paper's assumption) or
    one per agent and round (no assumption): KeyError naming a message the transcript lacks,
    ValueError for a defense not modelled."""
    model = dynamics(transcript.public.defense)
    members = sorted(set(coalition))
    W = transcript.public.mixing
    n = len(W)
    topology_neighbours = {c: [j for j in torch.nonzero(W[c]).flatten().tolist() if j != c] for c in members}
    heard = sorted(set(members) | {j for c in members for j in topology_neighbours[c]})
    others = [k for k in range(n) if k not in members]
    unknowns = [Unknown("gradient", k, t) for k in others for t in ([first] if constant else range(first, last))]
    start_known = heard if model.exact else members
    if first > 0:
        unknowns += [Unknown("state", k, first) for k in range(n) if k not in start_known]
    if not model.exact:
        unknowns += [Unknown("draw", k, t) for t in range(first, last) for k in range(n) if k not in heard]
    points = transcript.public.initial_model.numel()
    build = _Builder(n, unknowns, points)
    x0 = transcript.public.initial_model.double().numpy()
    for k in range(n):
        if first == 0:
            build.const[k] = x0
        elif k in start_known:
            build.const[k] = _state(transcript, model, k, first)
        else:
            build.coef[k] = build.unit("state", k, first)
    for t in range(first, last + 1):
        for k in (heard if model.exact else members):
            if first == 0 or t > first or k not in start_known:
                build.equation(k, _state(transcript, model, k, t))
        if not model.exact:
            for k in heard:
                if k not in members:
                    build.equation(k, _payload(transcript, model.kind, t, k))
        if t == last:
            break
        A, B, s = model.step(transcript, t)
        A, B = A.numpy(), None if B is None else B.numpy()
        coef, const = A @ build.coef, A @ build.const
        if B is not None:
            message_coef = np.stack([np.zeros(len(unknowns)) if k in heard else build.unit("draw", k, t)
                                     for k in range(n)])
            message_const = np.stack([_payload(transcript, model.kind, t, k) if k in heard else np.zeros(points)
                                      for k in range(n)])
            coef, const = coef + B @ message_coef, const + B @ message_const
        for k in range(n):
            if k in members:
                const[k] -= s * _disclosed(transcript, k, t, "gradient")
            else:
                coef[k] -= s * build.unit("gradient", k, first if constant else t)
        build.coef, build.const = coef, const
    return KnowledgeSystem(unknowns, np.stack(build.rows), np.stack(build.values))


def _payload(transcript: Transcript, kind: Kind, t: int, agent: int) -> np.ndarray:
    return transcript.payload(kind, t, agent, None).double().numpy()


def _disclosed(transcript: Transcript, agent: int, t: int, name: str) -> np.ndarray:
    return transcript.disclosed(agent, t, name).double().numpy()


def _state(transcript: Transcript, model: Dynamics, agent: int, t: int) -> np.ndarray:
    """A heard state: the broadcast itself for exact messages, else a member's own disclosed state."""
    if model.exact:
        return _payload(transcript, model.kind, t, agent)
    return _disclosed(transcript, agent, t, "state")


EXPOSURES = ("exact", "fitted", "assumed", "hidden")
"""How an agent's update at the attacked round is determined by what the coalition heard: by the
messages alone (`exact`: only the payloads' rounding errs), by the messages once every agent is
taken to train on one fixed record (`fitted`: the records fitted to every heard message,
`privaudit.attacks.coalition.record_fit`; the fit's residual tests the hypothesis), only under the constant-gradient
assumption (`assumed`: the gradient's drift over the window errs, amplified with the distance), or
not at all (`hidden`)."""


@dataclass(frozen=True)
class Recovered:
    """What the coalition learns of one agent outside it: its exposure (one of `EXPOSURES`) and,
    unless hidden, its update at the attacked round as a `Target`."""

    agent: int
    exposure: str
    target: Target | None


def _determined(transcript: Transcript, coalition: list[int], first: int, last: int,
                constant: bool) -> dict[int, Target]:
    """The agents whose round-`first` gradient and point the system determines, with them."""
    system = knowledge_system(transcript, coalition, first, last, constant)
    z, determined, _ = system.solve()
    at = {(u.what, u.agent, u.round): m for m, u in enumerate(system.unknowns)}
    found = {}
    for k in range(len(transcript.public.W)):
        gradient = at.get(("gradient", k, first))
        if gradient is None or not determined[gradient]:
            continue
        state = at.get(("state", k, first))
        if state is None:
            point = (transcript.public.initial_model.double() if first == 0 else
                     torch.from_numpy(_state(transcript, dynamics(transcript.public.defense), k, first)))
        elif determined[state]:
            point = torch.from_numpy(z[state])
        else:
            continue
        found[k] = Target(torch.from_numpy(z[gradient]), point.float(), k, first, kind="gradient_estimate")
    return found


def recover(transcript: Transcript, coalition: Iterable[int], first: int, last: int,
            fitted: dict[int, Target] | None = None) -> list[Recovered]:
    """Every agent outside the coalition with its exposure and, unless hidden, its update at round
    `first` and the point it was computed at: from the assumption-free system where that
    determines it, else from the records fitted to the messages (`fitted`, from
    `privaudit.attacks.coalition.record_fit`, where its fit was accepted), else from the constant-gradient system."""
    members = sorted(set(coalition))
    exact = _determined(transcript, members, first, last, constant=False)
    assumed = _determined(transcript, members, first, last, constant=True)
    fitted = fitted or {}
    found = []
    for k in range(len(transcript.public.W)):
        if k in members:
            continue
        if k in exact:
            found.append(Recovered(k, "exact", exact[k]))
        elif k in fitted:
            found.append(Recovered(k, "fitted", fitted[k]))
        elif k in assumed:
            found.append(Recovered(k, "assumed", assumed[k]))
        else:
            found.append(Recovered(k, "hidden", None))
    return found


def exposure(topology: Topology, coalition: Iterable[int], defense: str, window: int) -> dict[int, str]:
    """Which agents outside the coalition a window of `window` rounds from round 0 exposes, from
    the knowledge system's structure alone (no run needed): a transcript of zeros stands in, with
    the defense's default hyperparameters (exposure does not depend on their values)."""
    model = dynamics(defense)
    members = sorted(set(coalition))
    heard = heard_agents(topology, members)
    public = PublicKnowledge(defense, topology.name, topology.W, "none", (1,), 1, torch.zeros(1), hyper={})
    messages = [Message(t, k, None, model.kind, torch.zeros(1)) for t in range(window + 1) for k in heard]
    disclosures = [Disclosure(t, c, name, torch.zeros(1)) for t in range(window + 1) for c in members
                   for name in ("gradient", "state")]
    transcript = Transcript("coalition", None, messages, disclosures, public)
    return {r.agent: r.exposure for r in recover(transcript, members, 0, window)}

