"""What every attacker's view is made of: the target an inversion attack needs (a gradient and the
model point at which it was computed), the extractors that read one from a transcript, and the
helpers they share.

Each extractor reads only a transcript (the messages its threat model heard plus the public
knowledge: W, the defense's public hyperparameters, the architecture, x_0; for a curious agent,
also the agent's own values it declares in `Extractor.knows`, such as the noise it shares with
the victim); it never touches a defense's state. Every one computes in float64, so the only error
left beyond what the equation says is the float32 rounding of the intercepted payloads; a
transcript that lacks a message raises `Transcript.payload`'s KeyError naming the kind, sender
and round.

The extractors themselves live in each defense's view module (`privaudit/attacks/views/<defense>.py`), which
says what each message kind gives away; an `Extractor` says which messages it needs and checks,
before a run, whether a tap hears them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor

from privaudit.defenses.base import DefenseParams
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

    def to(self, device: torch.device) -> Target:
        """This target with its tensors on `device` (an extractor reads the transcript, which the
        wire keeps on the CPU; the attack runs where the model is: `privaudit.devices`)."""
        if self.gradient.device == device and self.point.device == device:
            return self
        return dataclasses.replace(self, gradient=self.gradient.to(device), point=self.point.to(device),
                                   drift=None if self.drift is None else self.drift.to(device))


def expect(transcript: Transcript, extractor: str, *defenses: str) -> None:
    """ValueError unless the transcript is of one of `defenses` (an extractor read on another
    defense's messages would compute nonsense silently)."""
    if transcript.public.defense not in defenses:
        raise ValueError(f"{extractor} reads transcripts of {', '.join(defenses)}, not of "
                         f"'{transcript.public.defense}'")


def heard(transcript: Transcript, kind: Kind, round: int, sender: int, receiver: int | None = -1) -> Tensor:
    """The payload in float64; a KeyError that names the link when a directed message is missing."""
    if receiver is None or receiver == -1 or transcript.find(kind, round=round, sender=sender, receiver=receiver):
        return transcript.payload(kind, round, sender, receiver).double()
    raise KeyError(f"{transcript.threat_model} transcript lacks the '{Kind(kind)}' message from agent {sender} "
                   f"to agent {receiver} at round {round}")


def neighbours(W: Tensor, i: int) -> list[int]:
    """N_i without i: the agents j ≠ i with w_ij ≠ 0."""
    return [j for j in torch.nonzero(W[i]).flatten().tolist() if j != i]


def mixed(transcript: Transcript, kind: Kind, round: int, i: int) -> Tensor:
    """Σ_{j ∈ N_i ∪ {i}} w_ij · (what i received from j of `kind` at `round`): j's broadcast, or the
    message j sent to i alone where the tap heard one (a liar's crafted message, `privaudit.wire.Malicious`)."""
    W = transcript.public.mixing
    total = W[i, i] * heard(transcript, kind, round, i, None)
    for j in neighbours(W, i):
        total = total + W[i, j] * received(transcript, kind, round, j, i)
    return total


def received(transcript: Transcript, kind: Kind, round: int, sender: int, receiver: int) -> Tensor:
    """What `receiver` got from `sender` of `kind` at `round`, in float64: the message sent to it
    alone where the tap heard one (a liar's crafted message, `privaudit.wire.Malicious`), else the
    sender's broadcast."""
    alone = transcript.find(kind, round=round, sender=sender, receiver=receiver)
    return heard(transcript, kind, round, sender, receiver if alone else None)


def initial_model(transcript: Transcript) -> Tensor:
    """x_0, public, in float64."""
    return transcript.public.initial_model.double()


P = TypeVar("P", bound=DefenseParams)


def public_params(hyper: Mapping[str, Any], params: type[P]) -> P:
    """The defense's public hyperparameters as its typed `Params` (what `Defense.public` published),
    so a view reads `p.clip`, not a string key."""
    return params.model_validate(dict(hyper))


Link = tuple[int, int | None]
"""(sender, receiver) of a message a tap must hear; receiver None for a broadcast."""


def broadcasts(agents: list[int]) -> tuple[Link, ...]:
    return tuple((a, None) for a in agents)


def victim_and_neighbours(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [broadcasts([victim, *topology.neighbours(victim)])]


def victim_only(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [broadcasts([victim])]


def one_cross_link(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [((victim, j), (j, None)) for j in topology.neighbours(victim)]


def cross_to_victim(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    around = topology.neighbours(victim)
    return [broadcasts([victim, *around]) + tuple((j, victim) for j in around)]


def all_bridge_links(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [tuple(link for j in topology.neighbours(victim) for link in ((victim, j), (j, victim)))]


def one_link_both_ways(victim: int, topology: Topology) -> list[tuple[Link, ...]]:
    return [((victim, j), (j, victim)) for j in topology.neighbours(victim)]


def own(transcript: Transcript, name: str, round: int) -> Tensor:
    """The observing agent's own value `name` at `round` (what it disclosed to itself, `Wire.disclose`),
    in float64: what an extractor that `knows` it reads; KeyError naming it when the tap did not
    record it, or observes no agent."""
    if transcript.observer is None:
        raise KeyError(f"the {transcript.threat_model} transcript observes no agent: it holds no agent's own '{name}'")
    return transcript.disclosed(transcript.observer, round, name).double()


def span(first: int, last: int) -> Callable[[int], range]:
    return lambda t: range(t + first, t + last + 1)


@dataclass(frozen=True)
class Extractor:
    """One (defense, scenario): the function, the message kinds and rounds it reads, and the
    links it must hear (`links(victim, topology)`: alternatives, any one of which suffices).
    `needs` says the same in words, for reports and error messages.

    `knows`: what the attacker must know besides what it hears, the observing agent's own
    private values (`Wire.disclose` names; "{victim}" stands for the victim, as in
    "noise_from_{victim}"), which the extractor reads with `own`. Only a tap observing as one agent
    (a curious neighbour) records them, so such an extractor is usable by that tap alone, and
    every audit of that agent reads it."""

    defense: str
    scenario: str
    extract: Callable[..., Target | Tensor]
    kinds: frozenset[Kind]
    needs: str
    links: Callable[[int, Topology], list[tuple[Link, ...]]]
    rounds: Callable[[int], range]
    knows: tuple[str, ...] = ()

    def known(self, victim: int) -> tuple[str, ...]:
        """The names of the observing agent's own values this extractor reads against `victim`."""
        return tuple(name.format(victim=victim) for name in self.knows)

    def missing(self, tap: Tap, victim: int, topology: Topology, round: int | None = None) -> str | None:
        """Why `tap` cannot feed this extractor for `victim` (at `round`, when given); None if it can."""
        if tap.kinds is not None and not self.kinds <= tap.kinds:
            return f"it does not record {', '.join(sorted(self.kinds - tap.kinds))}"
        if round is not None:
            needed = [t for t in self.rounds(round) if t >= 0]
            absent = [t for t in needed if not tap.wants_round(t)]
            if absent:
                return f"it does not record round(s) {absent}"
        unknown = self._unknown(tap, victim, round)
        if unknown:
            return unknown
        alternatives = self.links(victim, topology)
        if not alternatives:
            return f"the {topology.name} topology has none of the links it reads around agent {victim}"
        unheard = [[link for link in alternative if not tap.hears(*link, topology)] for alternative in alternatives]
        if all(unheard):
            sender, receiver = min(unheard, key=len)[0]
            return f"it does not hear agent {sender}'s " + (
                "broadcasts" if receiver is None else f"messages to agent {receiver}")
        return None

    def _unknown(self, tap: Tap, victim: int, round: int | None) -> str | None:
        """Why `tap` does not know the values `knows` names, or None: it must observe as one agent
        and record each of them at the rounds read."""
        names = self.known(victim)
        if not names:
            return None
        if tap.observer is None:
            return f"it observes no agent's own values and would need the observing agent's {', '.join(names)}"
        rounds = ([t for t in self.rounds(round) if t >= 0] if round is not None
                  else [min(tap.rounds)] if tap.rounds else [0])
        unknown = [name for name in names if not all(tap.wants_disclosure(t, tap.observer, name) for t in rounds)]
        if unknown:
            return f"it does not record agent {tap.observer}'s own {', '.join(unknown)}"
        return None

    def check(self, tap: Tap, victim: int, topology: Topology, round: int | None = None) -> None:
        """ValueError (one line) when `tap` cannot feed this extractor."""
        why = self.missing(tap, victim, topology, round)
        if why is not None:
            where = f" observing agent {tap.observer}" if tap.observer is not None else ""
            raise ValueError(f"({self.defense}, {self.scenario}) against agent {victim}: the "
                             f"{tap.threat_model} tap{where} cannot supply it, {why}; needs {self.needs}")


ALL_NEIGHBOURS = ("a global listener, an eavesdropper on all of the victim's links, or a curious "
                  "neighbour adjacent to all of the victim's neighbours")
"""Who hears a victim's broadcast and all of its neighbours', in words (for `Extractor.needs`)."""

MODEL_NEEDS = "the victim's {} broadcast at the round: any tap on one of its links"


@dataclass(frozen=True)
class Steering:
    """How a participant who lies sets the point at which its victim computes a release, for one
    defense: the state override of Pasquini, Raynal & Troncoso (S&P 2023), the defense's own rule
    solved for the liar's message.

    At override round t the liar replaces its `kind` message to the victim by `craft(transcript, t,
    liar, victim, goal)`, computed from what its tap heard up to then (rushing: round t's honest
    messages included), so that the victim computes its release of round t + `lag` at `goal`, or at
    a point the attacker then hears; the extraction scenario `scenario` of the same defense reads
    that release, and the liar must hear what it reads (`plan_override` checks it with that
    extractor's links: `craft` reads nothing beyond them). `base(transcript, t, victim)` is the
    victim's model as the liar holds it at t, from which a goal is built; `refusal(hyper, t)` why
    an override at round t cannot steer (a round whose release holds no gradient), or None;
    `rule` the equation solved, in words, for `privaudit list` and the rows; `records(hyper)` how
    many of the victim's records the release read at the steered point sums, where that is more
    than the defense's registered batch size (a release of several local steps), or None."""

    defense: str
    kind: Kind
    craft: Callable[[Transcript, int, int, int, Tensor], Tensor]
    base: Callable[[Transcript, int, int], Tensor]
    lag: int
    scenario: str
    rule: str
    refusal: Callable[[Mapping[str, Any], int], str | None] = lambda hyper, round: None
    records: Callable[[Mapping[str, Any]], int] | None = None


def steer_mixing(kind: Kind) -> Callable[[Transcript, int, int, int, Tensor], Tensor]:
    """The craft of a defense whose agents mix their neighbours' `kind` broadcasts by a row of W:
    x_v ← Σ_j w_vj m_{j→v} (then step), solved for the liar a's message so the victim mixes to θ*:

        m_{a→v} = (θ* − w_vv x_v − Σ_{j ∈ N_v, j ≠ a} w_vj x_j) / w_va,

    from the round's broadcasts of the victim and its other neighbours (heard before the liar sends).
    ValueError when the liar does not weigh in the victim's average."""

    def craft(transcript: Transcript, round: int, liar: int, victim: int, goal: Tensor) -> Tensor:
        W = transcript.public.mixing
        if float(W[victim, liar]) == 0.0 or liar == victim:
            raise ValueError(f"agent {liar} does not weigh in agent {victim}'s average (w = 0): it cannot steer it")
        others = goal.double() - W[victim, victim] * heard(transcript, kind, round, victim, None)
        for j in neighbours(W, victim):
            if j != liar:
                others = others - W[victim, j] * heard(transcript, kind, round, j, None)
        return others / W[victim, liar]

    craft.__doc__ = f"The liar's '{kind}' broadcast to the victim that makes it mix to the goal (`steer_mixing`)."
    return craft


def heard_model(kind: Kind) -> Callable[[Transcript, int, int], Tensor]:
    """A `Steering.base`: the victim's `kind` broadcast at the override round, in float64."""

    def base(transcript: Transcript, round: int, victim: int) -> Tensor:
        return heard(transcript, kind, round, victim, None)

    base.__doc__ = f"The victim's '{kind}' broadcast at the override round, in float64."
    return base


def broadcast_model(kind: Kind) -> Callable[[Transcript, int, int], Tensor]:
    """A model view that reads the victim's broadcast of `kind` at the round, as sent."""
    def read(transcript: Transcript, victim: int, round: int) -> Tensor:
        return transcript.payload(kind, round, victim, None).float()

    read.__doc__ = f"The victim's '{kind}' broadcast at `round`, as sent."
    return read
