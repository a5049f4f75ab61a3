"""The state override (Pasquini, Raynal & Troncoso, "On the (in)security of peer-to-peer
decentralized machine learning", IEEE S&P 2023): a neighbour a of the victim v chooses the point at
which the victim computes its next release. Each defense's view states how (`Steering`, registered
with `privaudit.attacks.views.register_steering`): for D-PSGD, whose averaging
x_v^{t+1} = Σ_j w_vj m_{j→v}^t − η g_v^t leaves the liar's message free, that row solved for it,

    m_{a→v} = (θ* − w_vv x_v^t − Σ_{j ∈ N_v, j ≠ a} w_vj x_j^t) / w_va

(`privaudit.attacks.extraction.steer_mixing`), so that v mixes to θ* exactly. The liar needs every
term it subtracts, heard before it sends (a rushing participant; `privaudit.attacks.active.threat`
checks it hears them). Here: the steering of a defense, and the liar's message read from what its
tap recorded so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from privaudit.attacks import views
from privaudit.attacks.extraction import Steering
from privaudit.attacks.views import STEERINGS
from privaudit.defenses.base import DEFENSES
from privaudit.wire import PublicKnowledge, Tap, Transcript


def steering(defense: str) -> Steering | None:
    """`defense`'s steering where its view states one and its step mixes what the wire delivers."""
    found = STEERINGS.get(defense)
    if found is None or defense not in DEFENSES or not DEFENSES[defense].delivering():
        return None
    return found


def steered_records(defense: str, hyper: Mapping[str, Any]) -> int | None:
    """How many of the victim's records the release read at `defense`'s steered point sums, the
    number its traps are placed for: its steering's `records` where it states them (a release of
    several local steps), else the records one local step averages (`views.batch_size`); None
    where neither is public."""
    found = STEERINGS.get(defense)
    if found is not None and found.records is not None:
        return found.records(hyper)
    return views.batch_size(defense, hyper)


def steered_defenses() -> tuple[str, ...]:
    """The registered defenses a liar can steer."""
    return tuple(name for name in STEERINGS if steering(name) is not None)


def _record(heard: Tap | Transcript, public: PublicKnowledge) -> Transcript:
    """What the liar's tap recorded so far, as a transcript (a transcript already is one)."""
    return heard if isinstance(heard, Transcript) else heard.transcript(public)


def victim_model(heard: Tap | Transcript, public: PublicKnowledge, round: int, victim: int) -> Tensor:
    """The victim's model as the liar holds it at `round` (its steering's `base`), float64."""
    return STEERINGS[public.defense].base(_record(heard, public), round, victim).double()


def override_message(heard: Tap | Transcript, public: PublicKnowledge, round: int, liar: int, victim: int,
                     goal: Tensor) -> Tensor:
    """The liar's message that makes the victim compute its release of round + lag at `goal`, from
    the messages `heard` recorded (the defense's `Steering.craft`); float64."""
    return STEERINGS[public.defense].craft(_record(heard, public), round, liar, victim, goal).double()
