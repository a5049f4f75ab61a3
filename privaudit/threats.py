"""Threat models by name: the tap an `[[attack]]` table's `threat` stands for, or the release a
released-model threat receives.

* `global_listener` hears every message on every link.
* `eavesdropper` hears chosen links, undirected (`links`: both directions) or directed
  (`directed_links`: i → j only, what i sends to j and i's broadcasts), or both; when neither is
  given, every link of the victim (the strongest eavesdropper that still hears no other agent's
  private exchanges).
* `curious_neighbour` is one agent, honest but curious (default: the victim's lowest-numbered
  neighbour); it hears what reaches it and knows its own private values, which the extractors that
  declare them in `Extractor.knows` read (no other threat model can feed those).
* `coalition` is one or several such agents pooling what they hear (`agents`), attacking every
  other agent at once (El Mrini et al. 2024; `privaudit/attacks/coalition/knowledge.py`, and `privaudit/attacks/coalition/record_fit.py`
  where every agent trains on one fixed record).
* `malicious` is one agent, or a coalition, that follows the protocol except in what it sends: the
  colluding agents (`agents`) pool what they hear, and one of them (`liar`, default the first of
  `agents` that neighbours the victim) replaces the model it sends the victim by one it computes
  from what they heard (`privaudit.wire.Malicious`; Pasquini, Raynal & Troncoso, S&P 2023). Only an
  active attack speaks through it (`[[attack]] kind = "trap_weights"`), on the defenses whose step
  mixes what the wire delivers; the row says what it assumed.
* `released_model` hears nothing of the training: it receives the final model of one agent
  (`observer`, default the victim) once the run ends, as a deployed or published model is handed
  over. `[[audit]]` canary tables: white-box (the parameters) for a gradient canary, black-box (the
  model's loss on the canary, against the initial model's) for a record or outlier canary; `[[membership]]` tables: each
  victim's records against that final model (default: each victim's own).
* `released_average` hears nothing of the training either: it receives the average of every
  agent's final model. `[[audit]]` canary tables, scored as `released_model`, and `[[membership]]`
  tables.

Taps record only the rounds and message kinds an extractor reads, so a 1000-round run keeps a
handful of messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torch import Tensor

from privaudit.topology import Topology
from privaudit.wire import Coalition, CuriousNeighbour, Eavesdropper, GlobalListener, Kind, Tap

TRANSCRIPT_THREATS = ("global_listener", "eavesdropper", "curious_neighbour", "coalition")
"""The threat models that hear messages: a tap on the wire records their transcript."""
RELEASED_THREATS = ("released_model", "released_average")
"""The threat models that hear no message and receive final models only (`Release`)."""
ACTIVE_THREATS = ("malicious",)
"""The threat models that also speak: an active attack builds their tap with its strategy
(`privaudit.attacks.active.threat.malicious_tap`), never `build_tap`."""
THREATS = TRANSCRIPT_THREATS + ACTIVE_THREATS + RELEASED_THREATS


@dataclass(frozen=True)
class Release:
    """What a released-model threat receives: the mean of the final models of `agents` (one agent
    for `released_model`, every agent for `released_average`), and nothing of the transcript. It
    reads the defense's final states after the run, as whoever is handed the deployed model does;
    on the batched worlds (`privaudit.worlds`) each world's own."""

    threat: str
    agents: tuple[int, ...]

    def model(self, states: Tensor, network: int) -> Tensor:
        """Each world's released model [copies, P] from the final states [copies × `network`, P]."""
        worlds = states.reshape(-1, network, states.shape[-1])
        return worlds[:, list(self.agents)].mean(dim=1)

    def words(self) -> str:
        """What the attacker receives, in words."""
        if self.threat == "released_average":
            return "the average of every agent's final model, nothing of the transcript"
        return f"the final model of agent {self.agents[0]}, nothing of the transcript"


def build_release(threat: str, victim: int, topology: Topology, *, observer: int | None = None) -> Release:
    """The release `threat` receives (`RELEASED_THREATS`); `observer` is the agent whose final model
    `released_model` receives (default the victim). ValueError (one line) for an agent the topology
    lacks or an observer `released_average` does not take."""
    if not 0 <= victim < topology.n:
        raise ValueError(f"victim {victim} is not an agent (0..{topology.n - 1})")
    if threat == "released_model":
        agent = victim if observer is None else observer
        if not 0 <= agent < topology.n:
            raise ValueError(f"observer {agent} is not an agent (0..{topology.n - 1})")
        return Release(threat, (agent,))
    if threat == "released_average":
        if observer is not None:
            raise ValueError("released_average receives the average of every agent's model: it takes no observer")
        return Release(threat, tuple(range(topology.n)))
    raise ValueError(f"'{threat}' is not a released-model threat (choose from {', '.join(RELEASED_THREATS)})")


def build_tap(threat: str, victim: int, topology: Topology, *, rounds: Iterable[int] | None = None,
              kinds: Iterable[Kind] | None = None, observer: int | None = None,
              links: Iterable[tuple[int, int]] | None = None, agents: Iterable[int] | None = None,
              directed_links: Iterable[tuple[int, int]] | None = None) -> Tap:
    """The tap of `threat` against `victim`; ValueError (one line) for agents or links the
    topology does not have. `directed_links` (i, j) are heard from i to j only."""
    if not 0 <= victim < topology.n:
        raise ValueError(f"victim {victim} is not an agent (0..{topology.n - 1})")
    if threat in ACTIVE_THREATS:
        raise ValueError(f"the {threat} threat speaks through an active attack's strategy ([[attack]] kind = "
                         "\"trap_weights\"): it has no passive tap")
    if threat in RELEASED_THREATS:
        raise ValueError(f"the {threat} threat hears no message, only final models once training ends: it has no "
                         "transcript to read (it serves [[audit]] canary and [[membership]] tables only)")
    if threat == "global_listener":
        tap: Tap = GlobalListener(rounds, kinds)
    elif threat == "eavesdropper":
        if links is None and directed_links is None:
            links = [(victim, j) for j in topology.neighbours(victim)]
        tap = Eavesdropper(links or (), rounds, kinds, directed=directed_links or ())
    elif threat == "curious_neighbour":
        agent = observer if observer is not None else min(topology.neighbours(victim))
        if agent == victim:
            raise ValueError(f"the curious neighbour must be another agent than the victim {victim}")
        tap = CuriousNeighbour(agent, rounds, kinds)
    elif threat == "coalition":
        tap = Coalition(agents if agents is not None else [victim], rounds, kinds)
    else:
        raise ValueError(f"unknown threat model '{threat}' (choose from {', '.join(THREATS)})")
    tap.check(topology)
    return tap
