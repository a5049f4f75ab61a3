"""Canary audits of a running defense: how much one record of the victim's data moves what the
attacker hears, turned into an ε lower bound, with the numbers kept apart.

The game (Jagielski et al. 2020; Nasr et al. 2021, 2023): runs of the defense on the victim's data
without and with a canary (`privaudit.attacks.audit.canaries`), each with its own draw of the defense's randomness
(batches, noise). The attacker hears what its threat model allows, rebuilds the victim's released
gradients round by round with the suite's extractors, projects them on the canary's direction and
sums, over the rounds it heard, the log-likelihood ratio of the mechanism the defense really runs
(`privaudit.attacks.audit.channels`). The two samples of that score are a hypothesis test between neighbouring
datasets.

Many worlds cheaply: the runs of one side are simulated `worlds` at a time as one run on `worlds`
disjoint copies of the network (`privaudit.worlds`), the defense's own code unchanged; the
attacker's tap keeps each message once, stacked over the worlds, and the channel reads every
world in one pass (checked against worlds read alone: `Listener`); it reads each round as it comes
and its tap forgets what it has read, so long runs keep little in memory. Where torch sees a CUDA
device the worlds run there (`privaudit.devices`; tens of thousands per simulation), only the
scores coming back.

Three kinds of number, never confused:

* **rigorous**: ε_LB at δ from the test "canary in when the score exceeds t", its FPR and FNR
  bounded by Clopper–Pearson at √confidence each (`privaudit.attacks.audit.bounds.bound_test`), so the bound holds
  at the stated confidence. The threshold must not be chosen on the runs it is counted on: when the
  mechanism's law is known in advance (a gradient canary in a noisy channel) t is chosen on scores
  *simulated from that law*, and every run counts (`protocol = "model"`); otherwise on a held-out
  quarter of the runs (`protocol = "held-out"`, `choose_threshold`). A whole run is never weaker
  than its strongest release: the statistic counted is chosen among the rounds' sum and each round
  alone (`whole_run_candidates`) on the held-out quarter only, which needs no union bound; with a
  law, the sum's law-threshold test on every run is made beside that choice and the larger bound
  kept, each at confidence 1 − (1 − C)/2 (a union bound, stated in the record's `whole_run`;
  `privaudit.attacks.audit.canary_statistics.whole_run_bound`).
* **estimate**: a Gaussian-DP estimate of ε from the two score samples (`privaudit.attacks.audit.estimates`), named
  as an estimate, calibrated to 0 on null audits, never capped: it measures the runs, so it
  exceeds the sound ε when the runs leak more than the claimed mechanism allows.
* **claim**: the defense's claimed ε and sound ε, beside them.

`one_run_game` is the one-training-run variant (Steinke, Nasr & Jagielski 2023; Mahloujifar, Melis &
Chaudhuri 2024): many canaries, each in the victim's data with probability ½, the same score per
canary, and ε_LB from the count of right guesses among the highest and lowest scored
(`privaudit.attacks.audit.one_run`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.func import vmap

from privaudit.attacks import views
from privaudit.attacks.active.steering import steering_tap
from privaudit.attacks.audit.canaries import (CANARY_KINDS, Canaries, gradient_canaries, natural_canaries,
                                             outlier_canaries, record_canaries, with_records)
from privaudit.attacks.audit.canary_statistics import (MODEL_SAMPLES, Candidates, held_out_split,
                                                      simulated_scores, whole_run_bound)
from privaudit.attacks.audit.channels import (Channel, PairChannel, ProjectionChannel, Reading, RoundLaw,
                                              log_likelihood_ratio)
from privaudit.attacks.audit.estimates import gdp_estimate
from privaudit.attacks.audit.one_run import one_run_eps, one_run_gdp_eps, one_run_gdp_mu
from privaudit.defenses import DEFENSES
from privaudit.defenses.base import DefenseParams
from privaudit.defenses.external import checked_claim
from privaudit import devices
from privaudit.accounting import Claim
from privaudit.errors import ConfigError
from privaudit.progress import Progress
from privaudit.setup import Setup
from privaudit.sim import public_knowledge, simulate
from privaudit.threats import ACTIVE_THREATS, RELEASED_THREATS, Release, build_release, build_tap
from privaudit.wire import PublicKnowledge, Tap, Transcript
from privaudit.worlds import Replicated, one_world, replicate

DEFAULT_DELTA = 1e-5
"""δ of the bound for a defense that states none (undefended D-PSGD)."""

STATE_BYTES = 16 * 2**20
"""What one simulation's per-round values may take: worlds per simulation are as many as fit (at
most `MAX_WORLDS`), one world counting a model-sized row per agent and per directed link (the
cross-gradients of DPDL, the bridges of LT-ADMM), a model without closed-form gradients
`AUTOGRAD_FACTOR` times that (its per-sample gradients are formed). Measured at the end of issue
25's work, one thread, load 0.2: DP-D-PSGD (`bench/canary.py`'s set-up) 804 runs/s at 128 worlds,
859 at 256, 865 at 403 (chosen here), 822 at 1024, 784 at 2048; the demo's DPDL canary audit (200
runs per side, set-up included) 7.6 s at 16 worlds, 8.3 at 32, 9.3 at 64 (chosen here), 8.9 at 128:
for DPDL this model overcounts what fits."""

MAX_WORLDS = 1024
AUTOGRAD_FACTOR = 16

DEVICE_STATE_BYTES = 2 * 2**30
"""`STATE_BYTES` on a CUDA device: a GPU runs a simulation's worlds in parallel, and has the
memory for tens of thousands of small ones (at most `MAX_DEVICE_WORLDS`)."""

MAX_DEVICE_WORLDS = 65536

_MIN_RUNS = 8

CPU = torch.device("cpu")


@dataclass(frozen=True)
class Game:
    """What every run of one audit shares: the set-up of one world without the canaries (its model
    already carrying any planted gradient), the defense to run, the victim, the threat model's tap
    (for one network), the channel scenarios it hears, and the canaries."""

    setup: Setup
    kind: str
    params: DefenseParams
    rounds: int
    victim: int
    threat: str
    tap: Tap | None
    """The threat model's tap; None for a released-model threat, which hears no message."""
    scenarios: tuple[str, ...]
    canaries: Canaries
    records: int
    """The victim's records in either world (replace-one: its data and one slot per canary;
    add/remove: its data, whose size sets the sampling rate in both worlds)."""
    claim: Claim
    """The defense's claim for this run, with its sound ε (computed once: accountants take seconds)."""
    law_free: LawFree | None = None
    """Set when the attacker scores with the law-free projection statistic (`STATISTICS`)."""
    release: Release | None = None
    """Set for a released-model threat: the attacker scores the final model it receives
    (`FinalModel`), and the channel only says the canary pair (adjacency, canary length)."""
    active: dict[str, Any] | None = None
    """Set for the malicious threat: who lies, whose hearing it pools, and what it assumed, in
    words (the tap's strategy steers the victim for the canary: `privaudit.attacks.active.steering`)."""

    @property
    def channel(self) -> Channel:
        if self.law_free is not None:
            return self.law_free.channel(self.kind)
        return views.channel(self.kind)

    @property
    def statistic(self) -> str:
        if self.release is not None:
            return "final model"
        return "projection" if self.law_free is not None else "law"

    @property
    def statistic_method(self) -> str:
        """How a run is scored, in words."""
        if self.release is not None:
            return RELEASED_STATISTICS["parameters" if self.canaries.kind == "gradient" else "loss"]
        return STATISTICS[self.statistic]

    def to(self, device: torch.device) -> Game:
        """This game with its set-up and canaries on `device` (what the attacker reads them with)."""
        return dataclasses.replace(self, setup=self.setup.to(device), canaries=self.canaries.to(device))


STATISTICS = {
    "law": "the per-round log-likelihood ratio of the defense's view's law, summed over rounds",
    "projection": "law-free: each heard round's projection of the victim's extracted release on the canary's "
                  "direction, weighted as the held-out runs estimate (difference of the two sides' means over the "
                  "pooled variance, per round and channel) and summed",
}
"""How an attacker scores a run: with the law the defense's view states (the stronger where it is
right), or law-free, from the defense's extractors and the runs alone (any defense with a view)."""

RELEASED_STATISTICS = {
    "parameters": "last iterate, white-box: minus the released model's projection on the gradient canary's "
                  "direction (each time the canary is sampled, a step moves the model against it)",
    "loss": "last iterate, black-box: how far training lowered the canary record's loss, from the public "
            "initial model's to the released model's",
}
"""How a released-model attacker scores the final model it receives (`FinalModel`): its parameters
for a gradient canary (no input stands for a planted gradient), its loss on the canary (against
the public initial model's) for a record or outlier canary."""


@dataclass(frozen=True)
class LawFree:
    """What a law-free game needs beyond the defense's extractors: the relation its canary pair
    tests, whether the canary lies along one coordinate, and the gradient canary's length. Plain
    data, so a game crosses to worker processes, which rebuild the channel from the registries."""

    adjacency: str
    coordinate: bool
    norm: float

    def channel(self, kind: str) -> Channel:
        return _projection_channel(kind, self.adjacency, self.coordinate, self.norm)


@functools.cache
def _projection_channel(kind: str, adjacency: str, coordinate: bool, norm: float) -> Channel:
    """The law-free channel of `kind`'s extractors; with none (a released-model game's only: a game
    that reads messages refuses such a defense first, `_law_free`), the canary pair alone."""
    extractors = [views.EXTRACTORS[kind, scenario] for scenario in views.scenarios(kind)]
    if not extractors:
        return PairChannel(kind, adjacency, coordinate, norm)
    return ProjectionChannel(kind, extractors, adjacency, coordinate, norm)


def _law_free(kind: str, claim: Claim, canary_norm: float | None, public: dict[str, Any]) -> LawFree:
    """The law-free set-up of `kind` (`_relation`), for an attacker that reads its messages: one
    line when its view registers no extractor to read them with."""
    if not views.scenarios(kind):
        raise ConfigError(f"defense '{kind}' has no extractor: its view registers none, so no attacker reading of its "
                          "messages exists to audit (privaudit.attacks.views.register_extractor)")
    return _relation(kind, claim, canary_norm, public)


def _relation(kind: str, claim: Claim, canary_norm: float | None, public: dict[str, Any]) -> LawFree:
    """The canary pair of `kind` without a law: the claim's relation (else its view channel's, else
    replace-one), the view channel's coordinate choice and canary length where it has one. A
    released-model game needs no more: it reads final states, which every defense has."""
    shipped = views.CHANNELS.get(kind)
    adjacency = (claim.neighbours.change if claim.neighbours is not None
                 else shipped.adjacency if shipped is not None else "replace-one")
    norm = canary_norm if canary_norm is not None else shipped.canary_norm(public) if shipped is not None else 1.0
    return LawFree(adjacency, bool(shipped is not None and shipped.coordinate), float(norm))


def make_game(setup: Setup, kind: str, params: DefenseParams, rounds: int, *, victim: int = 0,
              threat: str = "global_listener", observer: int | None = None,
              links: list[tuple[int, int]] | None = None, canary: str = "gradient", canary_label: int = 0,
              canary_scale: float = 2.0, count: int = 1, scenarios: list[str] | None = None,
              statistic: str = "auto", canary_norm: float | None = None,
              directed_links: list[tuple[int, int]] | None = None, claim: Claim | None = None,
              liar: int | None = None, agents: list[int] | None = None) -> Game:
    """The game of one defense configuration on `setup` (its canaries fixed by the set-up's
    seed), with `count` canaries, scored by `statistic` ("law", "projection", or "auto": the law
    where the defense's view states one, else law-free); every problem is a one-line ConfigError.
    `threat = "malicious"`: agent `liar` of the colluding `agents` steers the victim for the one
    record canary every round (`privaudit.attacks.active.steering`), the canary scored as passive.
    `claim`: the configuration's claim when the caller has it (a position audit's games of each
    victim share one: it does not depend on the victim, and an accountant takes seconds)."""
    if statistic not in (*STATISTICS, "auto"):
        raise ConfigError(f"unknown statistic '{statistic}' (choose from auto, {', '.join(STATISTICS)})")
    if statistic == "law" and kind not in views.CHANNELS:
        raise ConfigError(f"defense '{kind}' states no law for its canary channel (its view registers none): use "
                          "statistic = 'projection'")
    try:
        defense = DEFENSES[kind](params, setup)
        claim = checked_claim(defense, rounds) if claim is None else claim
    except ValueError as error:
        raise ConfigError(f"canary audit: {error}") from None
    public = defense.public()
    if canary not in CANARY_KINDS:
        raise ConfigError(f"unknown canary '{canary}' (choose from {', '.join(CANARY_KINDS)})")
    if threat not in ACTIVE_THREATS and (liar is not None or agents is not None):
        raise ConfigError("only the malicious threat has a liar and agents")
    if threat in ACTIVE_THREATS and canary == "gradient":
        raise ConfigError("the malicious threat steers the victim for a record canary (record, outlier, natural): a "
                          "planted gradient is as large and separated at every point and needs no steering")
    if threat in ACTIVE_THREATS and count != 1:
        raise ConfigError(f"the malicious threat steers the victim for one canary (a repeated audit), not {count}")
    if threat in RELEASED_THREATS:
        return _released_game(setup, kind, params, rounds, claim, public, victim=victim, threat=threat,
                              observer=observer, canary=canary, canary_label=canary_label, canary_scale=canary_scale,
                              count=count, statistic=statistic, canary_norm=canary_norm, scenarios=scenarios)
    law_free = None
    if statistic == "projection" or (statistic == "auto" and kind not in views.CHANNELS):
        law_free = _law_free(kind, claim, canary_norm, public)
    channel = law_free.channel(kind) if law_free is not None else views.channel(kind)
    if rounds < channel.reads(0).stop:
        raise ConfigError(f"a canary audit of '{kind}' needs rounds >= {channel.reads(0).stop}, got {rounds}")
    if canary != "gradient" and not 0 <= canary_label < setup.data.num_classes:
        raise ConfigError(f"canary_label {canary_label} is not a class (0..{setup.data.num_classes - 1})")
    if canary != "gradient" and channel.coordinate and law_free is None:
        raise ConfigError(f"'{kind}''s law is stated along one coordinate (its noise is per coordinate): "
                          "use canary = 'gradient', or statistic = 'projection' for a record canary")
    made = None
    kinds = {k for e in channel.extractors for k in e.kinds}
    try:
        if threat in ACTIVE_THREATS:
            made = _canaries(setup, victim, canary, count, canary_label, canary_scale, channel.canary_norm(public),
                             channel.coordinate)
            tap = steering_tap(public_knowledge(defense), setup.topology, setup.model, made.x[0], int(made.y[0]),
                               setup.data.x_test, setup.data.num_classes, victim=victim, rounds=rounds,
                               hears=kinds, liar=liar, agents=agents)
        else:
            tap = build_tap(threat, victim, setup.topology, kinds=kinds,
                            observer=observer, links=links, directed_links=directed_links)
        heard = channel.heard(tap, victim, setup.topology)
    except ValueError as error:
        raise ConfigError(f"canary audit: {error}") from None
    if scenarios is not None:
        unknown = sorted(set(scenarios) - set(channel.scenarios))
        if unknown:
            raise ConfigError(f"'{kind}' has no canary channel '{unknown[0]}' (known: {', '.join(channel.scenarios)})")
        missing = sorted(set(scenarios) - set(heard))
        if missing:
            why = next(e for e in channel.extractors if e.scenario == missing[0]).missing(tap, victim, setup.topology)
            raise ConfigError(f"the {threat} tap cannot feed '{kind}''s '{missing[0]}' channel: {why}")
        heard = [s for s in heard if s in scenarios]
    if made is None:
        made = _canaries(setup, victim, canary, count, canary_label, canary_scale, channel.canary_norm(public),
                         channel.coordinate)
    planted = dataclasses.replace(setup, model=made.model(setup.model))
    records = int(setup.local.sizes[victim]) + (count if channel.adjacency == "replace-one" else 0)
    return Game(planted, kind, params, rounds, victim, threat, tap, tuple(heard), made, records, claim, law_free,
                active=_active(tap))


def _active(tap: Tap) -> dict[str, Any] | None:
    """What the record says of a malicious tap's lie (`Game.active`); None for a tap that only listens."""
    speaker = tap.speaker()
    return None if speaker is None else speaker.strategy.record()


def _canaries(setup: Setup, victim: int, canary: str, count: int, label: int, scale: float, norm: float,
              coordinate: bool) -> Canaries:
    """`count` canaries of kind `canary` for `victim` (`privaudit.attacks.audit.canaries`)."""
    if canary == "gradient":
        return gradient_canaries(setup, victim, count, norm, setup.seed, coordinate)
    if canary == "record":
        return record_canaries(setup, victim, count, label if count == 1 else None, scale, setup.seed)
    if canary == "natural":
        try:
            return natural_canaries(setup, count, setup.seed)
        except ValueError as error:
            raise ConfigError(f"canary audit: {error}") from None
    return outlier_canaries(setup, count, label if count == 1 else None, scale, setup.seed)


def _released_game(setup: Setup, kind: str, params: DefenseParams, rounds: int, claim: Claim,
                   public: dict[str, Any], *, victim: int, threat: str, observer: int | None, canary: str,
                   canary_label: int, canary_scale: float, count: int, statistic: str, canary_norm: float | None,
                   scenarios: list[str] | None) -> Game:
    """The game of a released-model threat (`privaudit.threats.Release`): the same canaries and
    neighbouring worlds as a transcript audit of `kind` (the view's channel, or the law-free one,
    fixes the relation and the gradient canary's length), the attacker receiving only the final
    model(s) of the release (`FinalModel`). Every problem is a one-line ConfigError."""
    if statistic != "auto":
        raise ConfigError(f"{threat} scores the final model itself: statistic must be 'auto', got '{statistic}'")
    if scenarios is not None:
        raise ConfigError(f"{threat} hears no channel: it scores the final model (remove channels)")
    try:
        release = build_release(threat, victim, setup.topology, observer=observer)
    except ValueError as error:
        raise ConfigError(f"canary audit: {error}") from None
    if kind in views.CHANNELS:
        law_free, channel = None, views.channel(kind)
        norm = canary_norm if canary_norm is not None else channel.canary_norm(public)
    else:
        law_free = _relation(kind, claim, canary_norm, public)
        channel, norm = law_free.channel(kind), law_free.norm
    if canary != "gradient" and not 0 <= canary_label < setup.data.num_classes:
        raise ConfigError(f"canary_label {canary_label} is not a class (0..{setup.data.num_classes - 1})")
    made = _canaries(setup, victim, canary, count, canary_label, canary_scale, norm, channel.coordinate)
    planted = dataclasses.replace(setup, model=made.model(setup.model))
    records = int(setup.local.sizes[victim]) + (count if channel.adjacency == "replace-one" else 0)
    return Game(planted, kind, params, rounds, victim, threat, None, (), made, records, claim, law_free, release)


def world(game: Game, present: Tensor, seed: int, copies: int = 1) -> Setup:
    """`copies` worlds of the game, their randomness seeded by `seed`. Each canary k has a slot in
    the victim's data: it holds the canary where `present[k]`, else its anti-canary (replace-one:
    the slot's two records are the neighbours) or nothing (add/remove)."""
    canaries = game.canaries
    if game.channel.adjacency == "replace-one":
        x = torch.where(_along(present, canaries.x), canaries.x, canaries.anti_x)
        y = torch.where(_along(present, canaries.y), canaries.y, canaries.anti_y)
        setup = with_records(game.setup, game.victim, x, y)
    else:
        setup = with_records(game.setup, game.victim, canaries.x[present], canaries.y[present])
    setup = dataclasses.replace(setup, generator=torch.Generator().manual_seed(seed), seed=seed)
    return replicate(setup, copies)


def _along(mask: Tensor, values: Tensor) -> Tensor:
    """`mask` [k] shaped to broadcast against `values` [k, ...]."""
    return mask.reshape(-1, *[1] * (values.dim() - 1))


@dataclass
class Listener:
    """The attacker of one simulation: after each round it reads every round it can now observe
    (`Channel.reads`), scores each world's victim against each canary, and lets its tap forget
    what no later round needs. Its tap (`Replicated`) keeps each message once, stacked over the
    worlds, so the channel reads every world in one pass; that reading is checked, every round,
    against the first and last worlds read alone, and where it differs (an extractor whose
    arithmetic does not broadcast over the worlds) the listener reads world by world from then
    on. `laws` keeps, per observed round, the law and world 0's shifts (public quantities, the
    same in every world for a gradient canary)."""

    game: Game
    tap: Replicated
    copies: int
    totals: Tensor = field(init=False)
    laws: list[tuple[RoundLaw, Tensor]] = field(default_factory=list)
    features: list[Tensor] = field(default_factory=list)
    """Per observed round, each world's projections on the first canary, one column per channel
    (what the law-free statistic weighs)."""
    rounds: list[Tensor] = field(default_factory=list)
    """Per observed round, each world's log-likelihood ratio of that round alone for the first
    canary: the round's own test, one candidate of the whole-run statistic (`whole_run_candidates`)."""
    heard: list[int] = field(default_factory=list)
    """The rounds observed, in the order of `features`, `rounds` and `laws`."""
    next: int = 0
    stacked: bool = True
    """Whether the channel's stacked reading has matched its world-by-world reading so far."""
    check: bool = True
    """Whether to check the stacked reading against worlds read alone (the first simulation of
    each side does; later ones read as it ended: stacked, unchecked, or world by world)."""

    def __post_init__(self) -> None:
        self.totals = torch.zeros((self.copies, len(self.game.canaries)), dtype=torch.float64)

    def after_round(self, t: int, public: PublicKnowledge) -> None:
        if public.initial_model.device != self.totals.device:
            public = dataclasses.replace(public, initial_model=public.initial_model.to(self.totals.device))
        channel = self.game.channel
        last = channel.last_observable(self.game.rounds)
        while self.next <= last and channel.reads(self.next).stop - 1 <= t:
            self.observe(self.next, public)
            self.next += 1
        if self.next <= last:
            self.tap.forget(channel.reads(self.next).start)

    def observe(self, round: int, public: PublicKnowledge) -> None:
        game, channel = self.game, self.game.channel
        readings = self.read(self.tap.transcript(public), round)
        model = game.setup.model
        values, shifts = [], []
        for reading in readings:
            projected, lengths = game.canaries.projections(model, reading.points, reading.vectors)
            values.append(projected)
            shifts.append(reading.gain[:, None] * channel.clipped(public.hyper, lengths))
        if not values:
            return
        y, shift = torch.stack(values, -1), torch.stack(shifts, -1)
        self.features.append(y[:, 0, :])
        law = channel.law(public, round, game.records)
        self.laws.append((law, shift[0, 0]))
        flat = log_likelihood_ratio(y.reshape(-1, y.shape[-1]), shift.reshape(-1, y.shape[-1]), law, channel.adjacency)
        per_canary = flat.reshape(self.totals.shape)
        self.totals += per_canary
        self.rounds.append(per_canary[:, 0])
        self.heard.append(round)

    def read(self, transcript: Transcript, round: int) -> list[Reading]:
        """The channel's readings of every world at `round`, rows in world order."""
        game = self.game

        def alone(world: int) -> list[Reading]:
            return game.channel.read(one_world(transcript, world), [game.victim], round, list(game.scenarios),
                                     game.records)

        if self.stacked:
            stacked = self._stacked(transcript, round)
            if stacked is not None and not self.check:
                return stacked
            checked = {world: alone(world) for world in sorted({0, self.copies - 1})}
            if stacked is not None and all(_agree(stacked, readings, world) for world, readings in checked.items()):
                return stacked
            self.stacked = False
        worlds = [alone(world) for world in range(self.copies)]
        return [Reading(*(torch.cat([getattr(readings[k], name) for readings in worlds])
                          for name in ("vectors", "points", "gain")))
                for k in range(len(worlds[0]))]

    def _stacked(self, transcript: Transcript, round: int) -> list[Reading] | None:
        """The channel read once on the stacked transcript, each reading's victim axis unfolded
        into the worlds; None when the extractor cannot read stacked payloads."""
        game, copies = self.game, self.copies

        def unfolded(values: Tensor, width: int) -> Tensor:
            """[1, copies, width] or (a value the same in every world) [1, width] as [copies, width]."""
            rows = values.reshape(-1, width)
            if len(rows) not in (1, copies):
                raise ValueError(f"a stacked reading with {len(rows)} rows for {copies} worlds")
            return rows.expand(copies, width)

        try:
            readings = game.channel.read(transcript, [game.victim], round, list(game.scenarios), game.records)
            return [Reading(unfolded(reading.vectors, reading.vectors.shape[-1]),
                            unfolded(reading.points, reading.points.shape[-1]), unfolded(reading.gain, 1)[:, 0])
                    for reading in readings]
        except (RuntimeError, ValueError, IndexError, TypeError, KeyError):
            return None


def _agree(stacked: list[Reading], alone: list[Reading], world: int) -> bool:
    """Whether world `world`'s rows of the stacked readings equal that world's readings alone."""
    if len(stacked) != len(alone):
        return False
    return all(torch.allclose(getattr(s, name)[world], getattr(a, name)[0].to(getattr(s, name).dtype),
                              rtol=1e-5, atol=1e-7)
               for s, a in zip(stacked, alone) for name in ("vectors", "points", "gain"))


@dataclass
class FinalModel:
    """The attacker of a released-model threat: it hears nothing while the worlds train, and once
    they end scores each world's released model (`privaudit.threats.Release`) against each canary
    (`score`). It fills the fields a `Listener` fills, with no round heard and no law: a final
    model is one observation, whose law no view states, so its threshold is chosen on held-out runs."""

    game: Game
    copies: int
    totals: Tensor = field(init=False)
    laws: list[tuple[RoundLaw, Tensor]] = field(default_factory=list)
    features: list[Tensor] = field(default_factory=list)
    rounds: list[Tensor] = field(default_factory=list)
    heard: list[int] = field(default_factory=list)
    stacked: bool = True

    def score(self, states: Tensor) -> None:
        """Each world's score of each canary from the final states [copies × N, P]: minus the
        released model's projection on a gradient canary's direction u (the planted gradient is
        +‖g‖u, so each step that samples the canary moves the model by −η‖g‖u along it, and the
        score grows with the canary's presence; its anti-canary moves it the other way), or, for a
        record canary, how far training lowered its loss: the public initial model's loss on it
        minus the released model's. Training on a record lowers its loss; the initial loss, which
        the attacker computes from x₀ (public knowledge), takes away what each canary brings to
        the run — constant across runs in a repeated audit, but in a one-run audit the canaries
        differ, and their own starting losses would swamp what training did to them."""
        game = self.game
        released = game.release.model(states, game.setup.topology.network_size).double()
        canaries = game.canaries
        if canaries.u is not None:
            self.totals = -(released @ canaries.u.to(released).T)
        else:
            model = game.setup.model
            start = _losses(model, model.initial()[None].to(released), canaries.x, canaries.y).double()
            self.totals = start - _losses(model, released, canaries.x, canaries.y).double()


def _losses(model: Any, points: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """The data loss of each record (x [k, ...], y [k]) at each model point [W, P]: [W, k]."""
    def record(point: Tensor, one_x: Tensor, one_y: Tensor) -> Tensor:
        return model.data_loss(model.output(point, one_x[None]), one_y[None])

    return vmap(vmap(record, in_dims=(None, 0, 0)), in_dims=(0, None, None))(points.to(x.dtype), x, y)


def play(game: Game, present: Tensor, seed: int, copies: int, reading: str = "check",
         device: torch.device = CPU) -> Listener | FinalModel:
    """One simulation of `copies` worlds (canaries where `present`) on `device` and its attacker,
    who has scored every world when it returns (its tensors on `device`). `reading`: "check"
    (stacked, checked each round against worlds read alone), "stacked" (stacked, as a checked
    simulation of the same game ended), or "alone" (world by world, as one ended)."""
    setup = world(game, present, seed, copies).to(device)
    if game.release is not None:
        with devices.on(device):
            defense = DEFENSES[game.kind](game.params, setup)
            simulate(defense, game.rounds, evaluation=False)
            final = FinalModel(game if device.type == "cpu" else game.to(device), copies)
            final.score(defense.states.detach())
        return final
    with devices.on(device):
        defense = DEFENSES[game.kind](game.params, setup)
        tap = Replicated(game.tap, game.setup.topology, copies)
        listener = Listener(game if device.type == "cpu" else game.to(device), tap, copies,
                            stacked=reading != "alone", check=reading == "check")
        simulate(defense, game.rounds, taps=[tap], after_round=listener.after_round, evaluation=False)
    return listener


def worlds_per_run(game: Game, device: torch.device = CPU) -> int:
    """How many worlds one simulation holds, chosen by memory (`STATE_BYTES`, on a CUDA device
    `DEVICE_STATE_BYTES`)."""
    model, network = game.setup.model, game.setup.topology
    rows = network.n + 2 * len(network.edges)
    per_world = rows * model.dim * 4 * (1 if model.closed_form else AUTOGRAD_FACTOR)
    budget, most = (STATE_BYTES, MAX_WORLDS) if device.type == "cpu" else (DEVICE_STATE_BYTES, MAX_DEVICE_WORLDS)
    return int(max(1, min(most, budget // per_world)))


class Scored(NamedTuple):
    """What one simulation (`_scores_of`) or one side of an audit (`scores`) scored, as numpy
    arrays (tensors returned from worker processes would each hold a file descriptor): the scores
    of the first canary summed over the rounds [runs], the laws they were scored with, the
    per-round features [runs, F] (projections, one column per round and channel), each round's own
    log-likelihood ratio [runs, R], the rounds observed (R of them), and how later simulations of
    the game should read (`play`)."""

    values: np.ndarray
    laws: list
    features: np.ndarray
    rounds: np.ndarray
    heard: list[int]
    reading: str


def _scores_of(game: Game, present: Tensor, seed: int, copies: int, reading: str = "check",
               device: torch.device = CPU) -> Scored:
    """One simulation's `Scored` (`play`)."""
    listener = play(game, present, seed, copies, reading, device)

    def columns(parts: list[Tensor]) -> np.ndarray:
        return (torch.cat(parts, dim=1).cpu() if parts else torch.zeros((copies, 0), dtype=torch.float64)).numpy()

    return Scored(listener.totals[:, 0].cpu().numpy(), [(law, shift.cpu().numpy()) for law, shift in listener.laws],
                  columns(listener.features), columns([scores[:, None] for scores in listener.rounds]),
                  list(listener.heard), "stacked" if listener.stacked else "alone")


@dataclass(frozen=True)
class Simulations:
    """How one side's `runs` runs split into simulations of many worlds: the device they run on,
    the worker processes that may share them (one on a GPU, which runs the worlds in parallel),
    simulation c's seed (from (seed, side, c), so the two sides of an audit never share a draw,
    even when both leave the canary out) and its number of worlds, and the canary mask."""

    device: torch.device
    workers: int
    seeds: list[int]
    sizes: list[int]
    present: Tensor

    def pool(self, simulations: int) -> ProcessPoolExecutor:
        """Worker processes for `simulations` of them, one torch thread each, forked from a server
        that has imported this module (torch and privaudit with it) once, as
        `privaudit.campaign.executors.ProcessPool`'s server does: a worker started bare imports them
        again (a spreading check of tests/test_canary.py: 6.9 s against 2.2 s)."""
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return ProcessPoolExecutor(min(self.workers, simulations), mp_context=context,
                                   initializer=torch.set_num_threads, initargs=(1,))


def simulations(game: Game, runs: int, include: bool, seed: int, side: int, worlds: int | None, workers: int,
                device: torch.device | None) -> Simulations:
    """The plan of `runs` runs of one side (`Simulations`); `worlds` per simulation (None: the
    memory model's, `worlds_per_run`), `device` None: `privaudit.devices.work_device()`."""
    device = device or devices.work_device()
    per = worlds or worlds_per_run(game, device)
    chunks = math.ceil(runs / per)
    return Simulations(device, workers if device.type == "cpu" else 1,
                       [int(s) for s in np.random.SeedSequence([seed, side]).generate_state(chunks)],
                       [min(per, runs - chunk * per) for chunk in range(chunks)],
                       torch.full((len(game.canaries),), include))


def scores(game: Game, runs: int, include: bool, seed: int, side: int, worlds: int | None = None,
           workers: int = 1, device: torch.device | None = None, progress: Progress | None = None) -> Scored:
    """`runs` independent scores of one world (canary present when `include`), `worlds` runs per
    simulation, the simulations spread over `workers` processes; simulation c is seeded by (seed,
    side, c), so the two sides of an audit never share a draw, even when both leave the canary out
    (the null audit), and where a simulation runs does not change its numbers. The first
    simulation checks the attacker's stacked reading (`Listener`), the others read as it ended.
    The simulations run on `device` (None: `privaudit.devices.work_device()`); on a CUDA device
    in this process, whatever `workers` says (one GPU runs the worlds in parallel). Returns every
    run's `Scored` (the laws, the rounds heard and the reading are the first simulation's)."""
    plan = simulations(game, runs, include, seed, side, worlds, workers, device)
    seeds, sizes, present = plan.seeds, plan.sizes, plan.present
    first = _scores_of(game, present, seeds[0], sizes[0], "check", plan.device)
    tick = progress.update if progress is not None else (lambda count: None)
    tick(sizes[0])
    rest = []
    if plan.workers > 1 and len(seeds) > 2:
        with plan.pool(len(seeds) - 1) as pool:
            for found in pool.map(_scores_of, itertools.repeat(game), itertools.repeat(present), seeds[1:], sizes[1:],
                                  itertools.repeat(first.reading)):
                rest.append(found)
                tick(len(found.values))
    else:
        for chunk_seed, size in zip(seeds[1:], sizes[1:]):
            rest.append(_scores_of(game, present, chunk_seed, size, first.reading, plan.device))
            tick(size)
    found = [first, *rest]
    widths = {(part.features.shape[1], part.rounds.shape[1]) for part in found}
    if len(widths) > 1:
        raise ValueError(f"the attacker read a different number of rounds and channels in different runs ({widths}): "
                         "an extractor failed in some runs only")
    laws = [(law, torch.from_numpy(shift)) for law, shift in first.laws]
    return Scored(np.concatenate([part.values for part in found]), laws,
                  np.concatenate([part.features for part in found]), np.concatenate([part.rounds for part in found]),
                  first.heard, first.reading)


def _summary(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "max": float(values.max())}


def audit_delta(claim: Claim, delta: float | None) -> float:
    """δ of the bound: the one asked for, else the claim's (0 for a pure-ε claim), else `DEFAULT_DELTA`."""
    if delta is not None:
        return delta
    return claim.delta if claim.delta is not None else DEFAULT_DELTA


def audit_game(game: Game, *, runs: int = 200, confidence: float = 0.95, delta: float | None = None,
               seed: int = 0, null: bool = False, worlds: int | None = None, workers: int = 1,
               protocol: str = "auto", progress: Progress | None = None) -> dict[str, Any]:
    """`runs` runs per world, ε_LB at δ (`audit_delta`) with `confidence` and, when 0 < δ < 1, the
    GDP estimate (`privaudit.attacks.audit.estimates`), beside the defense's claimed and sound ε. `null` runs the
    canary-free world on both sides (the attacker still scores against the canary): a calibration
    whose ε_LB must be 0 but for a (1 − confidence) chance, and its estimate 0 but for a
    `privaudit.attacks.audit.estimates.NULL_RATE` chance. `protocol`: "model" (threshold from the law),
    "held-out", or "auto" (the model when the canary is a gradient canary and the channel has a
    noise law). `progress` counts the 2 × `runs` runs as they are scored. Returns a JSON-ready record."""
    if runs < _MIN_RUNS:
        raise ConfigError(f"runs must be >= {_MIN_RUNS} per world (a quarter chooses the test), got {runs}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    claim = game.claim
    delta = audit_delta(claim, delta)
    if not 0 <= delta < 1:
        raise ConfigError(f"delta must lie in [0, 1), got {delta}")
    device = devices.work_device()
    start = time.perf_counter()
    without = scores(game, runs, False, seed, side=0, worlds=worlds, workers=workers, device=device,
                     progress=progress)
    within = scores(game, runs, not null, seed, side=1, worlds=worlds, workers=workers, device=device,
                    progress=progress)
    wall = time.perf_counter() - start
    if game.release is not None and protocol == "model":
        raise ConfigError(f"{game.threat}: no law of the final model is stated to fix the threshold from; use held-out")
    candidates = whole_run_candidates(game, without, within)
    compared = (cross_fitted_candidates(without, within)
                if game.law_free is not None and game.release is None and len(candidates) > 1 else None)
    scores_out, scores_in = candidates["sum"]
    if not all(np.isfinite(side).all() for pair in candidates.values() for side in pair):
        raise ValueError("the attacker's scores are not finite (diverged training?)")
    laws = without.laws
    noisy = bool(laws) and laws[0][0].family is not None
    chosen = protocol if protocol != "auto" else ("model" if noisy and game.canaries.kind == "gradient" else "held-out")
    if chosen == "model" and game.active is not None:
        raise ConfigError("a steered canary audit chooses its threshold on held-out runs: the law's shift is stated for "
                          "the canary at honest points, not at the point the liar steers the victim to")
    if chosen == "model" and not noisy:
        why = "is scored law-free" if game.law_free is not None else "adds no noise"
        raise ConfigError(f"'{game.kind}' {why}: its threshold cannot be chosen from a law (use held-out)")
    model = simulated_scores(laws, game.channel.adjacency, MODEL_SAMPLES, seed) if chosen == "model" else None
    fit_in = game.release is not None
    eps_bound = whole_run_bound(candidates, "eps", delta, confidence, model, compared, fit_in)
    delta_bound = (whole_run_bound(candidates, "delta", claim.eps_claimed, confidence, model, compared, fit_in)
                   if claim.eps_claimed == 0 else None)
    estimates = {"gdp": gdp_estimate(scores_out, scores_in, delta).as_dict()} if 0 < delta < 1 else {}
    headline = estimates.get("gdp")
    record = {
        "defense": game.kind,
        "params": game.params.model_dump(),
        "rounds": game.rounds,
        "agents": game.setup.topology.n,
        "topology": game.setup.topology.name,
        "model": game.setup.model_name,
        "victim": game.victim,
        "victim_records": game.records,
        "threat": game.threat,
        "channels": list(game.scenarios),
        "canary": game.canaries.kind,
        "adjacency": game.channel.adjacency,
        "pair": game.channel.pair if game.canaries.kind == "gradient" else
        f"the {game.canaries.kind} record added or (replace-one) its negation in its place",
        "null": null,
        "runs_per_side": runs,
        "protocol": chosen,
        "statistic": game.statistic,
        "statistic_method": game.statistic_method,
        "delta": delta,
        "confidence": confidence,
        "eps_lb": eps_bound["value"],
        "delta_lb": None if delta_bound is None else delta_bound["value"],
        "delta_lb_eps": None if delta_bound is None else claim.eps_claimed,
        "eps_sound": claim.eps_sound,
        "eps_claimed": claim.eps_claimed,
        "eps_estimate": None if headline is None else headline["eps_estimate"],
        "estimate_method": None if headline is None else headline["method"],
        "estimates": estimates,
        "unaudited": game.channel.unaudited,
        "test": {key: eps_bound[key] for key in ("orientation", "threshold", "fpr", "fnr", "fpr_upper", "fnr_upper",
                                                 "samples")},
        "whole_run": whole_run_choice(eps_bound, chosen),
        "scores": {"without": _summary(scores_out), "with": _summary(scores_in)},
        "wall_s": wall,
        "device": devices.name(device),
        "runs_per_second": 2 * runs / wall,
        "worlds_per_simulation": worlds or worlds_per_run(game, device),
    }
    return released_record(game, {**record, "active": game.active} if game.active is not None else record)


def released_record(game: Game, record: dict[str, Any]) -> dict[str, Any]:
    """An audit record of a released-model game with what the attacker received (`released`: the
    threat, the agents whose final models it averages, in words) and, for a repeated audit, how its
    one statistic was counted; a transcript game's record unchanged."""
    if game.release is None:
        return record
    found = {**record, "channels": [], "released": {"threat": game.threat, "agents": list(game.release.agents),
                                                     "sees": game.release.words(), "scope": "last iterate"}}
    if "whole_run" in record:
        found["whole_run"] = {**record["whole_run"], "method": "the released model's score (one observation per run), "
                              "threshold chosen on a held-out quarter of the runs (normal laws fitted to both sides where the "
                              "scores with the canary pass a normality test there) and counted on the rest"}
    return found


def whole_run_candidates(game: Game, without: Scored, within: Scored) -> Candidates:
    """The statistics a whole-run audit chooses among (`privaudit.attacks.audit.canary_statistics.whole_run_bound`):
    "sum", the game's statistic over every round heard (the law's log-likelihood ratios summed, or
    the law-free discriminant, `projection_terms` summed), then, when more than one round is heard,
    each round's own score ("round t": that round's log-likelihood ratio, or its channels' share of
    the discriminant). A round alone is the test an audit of that release would make, so a choice
    that can fall on it is never weaker than the strongest release but for the choice's noise. A
    released-model game has one statistic, the final model's score (`FinalModel`)."""
    if game.release is not None:
        return {"sum": (without.values, within.values)}
    if game.law_free is not None:
        return _by_round(*projection_terms(without.features, within.features), without)
    candidates: Candidates = {"sum": (without.values, within.values)}
    if len(without.heard) > 1:
        candidates.update({f"round {t}": (without.rounds[:, k], within.rounds[:, k])
                           for k, t in enumerate(without.heard)})
    return candidates


def _by_round(terms_out: np.ndarray, terms_in: np.ndarray, without: Scored) -> Candidates:
    """The law-free candidates from the discriminant's terms [runs, F]: their sum, and each round's
    columns (its channels, as many as its shift has) summed."""
    edges = np.cumsum([0] + [len(shift) for _, shift in without.laws])
    candidates: Candidates = {"sum": (terms_out.sum(axis=1), terms_in.sum(axis=1))}
    if len(without.heard) > 1:
        candidates.update({f"round {t}": (terms_out[:, a:b].sum(axis=1), terms_in[:, a:b].sum(axis=1))
                           for t, a, b in zip(without.heard, edges[:-1], edges[1:])})
    return candidates


def cross_fitted_candidates(without: Scored, within: Scored) -> Candidates | None:
    """The law-free candidates' held-out rows for comparing them (`chosen_bound`'s `compared`; the
    other rows are left as they are and never read), None when a half of the held-out split would
    hold fewer than 2 runs. Each half of the held-out split is weighed with the discriminant fitted
    on the other half, and each candidate's rows of one half standardised by that half's own
    canary-free mean and deviation (an affine map, which changes no threshold test on them, so that
    the two halves' different weights do not blur a candidate into a mixture of two scales).
    Weighed with their own weights, the held-out rows flatter the sum (fitted to their noise in
    every round) over a round alone: measured on a 30-round audit whose signal is in round 0, 128
    runs per side, the sum predicted 2.50 in-sample against round 0's 1.99, and counted 1.37
    against round 0's 1.73 on the fresh runs. Fitted on half the runs, the sum's weights are
    noisier than the counted runs' (fitted on all held-out runs), so the comparison leans the other
    way: on 16 rounds of the same defense the choice fell on round 0 (1.89) where the sum would have
    counted 2.41. Leave-one-out weights leaned the same way (measured) and blur the tails a bound
    is read from."""
    held_out, held_in = held_out_split(len(without.features), len(within.features))
    half_out, half_in = held_out // 2, held_in // 2
    if min(half_out, half_in) < 2:
        return None
    halves = ((slice(0, half_out), slice(0, half_in)), (slice(half_out, held_out), slice(half_in, held_in)))
    parts = []
    for (own_out, own_in), (other_out, other_in) in (halves, halves[::-1]):
        centre, weights = _discriminant(without.features[other_out], within.features[other_in])
        found = _by_round((without.features[own_out] - centre) * weights,
                          (within.features[own_in] - centre) * weights, without)
        parts.append({name: _standardised(out, into) for name, (out, into) in found.items()})
    return {name: (np.concatenate([part[name][0] for part in parts]), np.concatenate([part[name][1] for part in parts]))
            for name in parts[0]}


def _standardised(out: np.ndarray, into: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both samples standardised by the canary-free sample's mean and deviation."""
    centre, spread = out.mean(), max(float(out.std(ddof=1)), 1e-300)
    return (out - centre) / spread, (into - centre) / spread


def whole_run_choice(bound: dict[str, Any], protocol: str) -> dict[str, Any]:
    """What the row says of the whole-run statistic behind `bound` (`whole_run_bound`'s record):
    the statistic counted, the number of candidates, the union bound, in words."""
    if bound["union"] > 1:
        how = (f"the summed statistic with the law's threshold on every run, and the best of {bound['candidates']} "
               f"statistics (the sum and each round alone) chosen with its threshold on a held-out quarter and "
               f"counted on the rest; the larger bound is reported, each test at confidence "
               f"{bound['confidence_each']:.4g} (union bound over the {bound['union']} tests)")
    elif bound["candidates"] > 1:
        how = (f"the best of {bound['candidates']} statistics (the sum and each round alone), chosen with its "
               "threshold on a held-out quarter of the runs and counted on the rest: no union bound needed")
    else:
        how = ("one round heard: its statistic, threshold "
               + ("from the law, every run counted" if protocol == "model" else "chosen on a held-out quarter"))
    return {"chosen": bound["chosen"], "candidates": bound["candidates"], "union": bound["union"],
            "confidence_each": bound["confidence_each"], "method": how}


def projection_terms(features_out: np.ndarray, features_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each run's terms w_f (y_f − μ_out,f) of the law-free score Σ_f w_f (y_f − μ_out,f), one column
    per round and channel f heard: a linear discriminant with diagonal covariance, μ_out, μ_in and
    the pooled variance v estimated on the held-out runs alone (the first `SELECT_FRACTION` of each
    side, the split the threshold is chosen on) and w = (μ_in − μ_out)/v (`_discriminant`). Where
    every round shifts the projection alike their sum is the sum of the rounds' standardised
    projections; a round the canary does not move gets weight ≈ 0. The fresh runs, on which the
    bound is counted, never touch w."""
    held_out, held_in = held_out_split(len(features_out), len(features_in))
    centre, weights = _discriminant(features_out[:held_out], features_in[:held_in])
    return (features_out - centre) * weights, (features_in - centre) * weights


def _discriminant(out: np.ndarray, into: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(μ_out, w = (μ_in − μ_out)/v) from runs without (`out`) and with (`into`) the canary, v the
    pooled per-feature variance (floored, so a feature constant in every run gets a finite weight)."""
    centre = out.mean(axis=0)
    spread = (out.var(axis=0, ddof=1) + into.var(axis=0, ddof=1)) / 2
    floor = 1e-12 * max(float(spread.max(initial=0.0)), 1e-300)
    return centre, (into.mean(axis=0) - centre) / np.maximum(spread, floor)


def ratio(record: dict[str, Any]) -> float | None:
    """ε_LB / ε_sound, None where the defense has no sound ε."""
    sound = record["eps_sound"]
    return None if sound is None or not math.isfinite(sound) or sound == 0 else record["eps_lb"] / sound


# ---------------------------------------------------------------------------------------------
# One training run (Steinke, Nasr & Jagielski 2023; Mahloujifar, Melis & Chaudhuri 2024)


def one_run_game(game: Game, *, guesses: int = 20, confidence: float = 0.95, delta: float | None = None,
                 seed: int = 0) -> dict[str, Any]:
    """Steinke et al. 2023's audit in ONE training run: each of the game's canaries is put in the
    victim's data with probability ½ (else its anti-canary, or nothing under add/remove); the
    attacker scores each from the transcript, guesses "in" for the `guesses` highest scores and
    "out" for the `guesses` lowest (k₊ = k₋ fixed in advance, so no correction is needed). The
    count of right guesses gives ε_LB by Steinke et al.'s (ε, δ) analysis (rigorous for any
    mechanism), and μ_LB by Mahloujifar et al.'s f-DP analysis with Gaussian trade-off curves
    (rigorous: no μ-GDP mechanism below it gives that count), beside the ε that μ_LB means if the
    mechanism's curve is Gaussian (`privaudit.attacks.audit.one_run`). Returns a JSON-ready record like
    `audit_game`'s. The run plays on `privaudit.devices.work_device()`; the canaries' coins are
    drawn on the CPU, so every device audits the same draw of them."""
    count = len(game.canaries)
    if not (1 <= guesses and 2 * guesses <= count):
        raise ConfigError(f"guesses must satisfy 1 <= guesses and 2 * guesses <= canaries ({count}), got {guesses}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    claim = game.claim
    delta = audit_delta(claim, delta)
    start = time.perf_counter()
    included = torch.rand(count, generator=torch.Generator().manual_seed(seed + 1)) < 0.5
    run_seed = int(np.random.SeedSequence([seed, 2]).generate_state(1)[0])
    device = devices.work_device()
    scored = play(game, included, run_seed, 1, device=device).totals[0].cpu()
    order = torch.argsort(scored)
    correct = int((~included[order[:guesses]]).sum() + included[order[-guesses:]].sum())
    record = {
        "defense": game.kind,
        "params": game.params.model_dump(),
        "rounds": game.rounds,
        "victim": game.victim,
        "threat": game.threat,
        "channels": list(game.scenarios),
        "canary": game.canaries.kind,
        "adjacency": game.channel.adjacency,
        "statistic": game.statistic,
        "statistic_method": game.statistic_method,
        "canaries": count,
        "included": int(included.sum()),
        "guesses": 2 * guesses,
        "correct": correct,
        "delta": delta,
        "confidence": confidence,
        "eps_lb": one_run_eps(correct, 2 * guesses, count, delta, confidence),
        "fdp": {"mu_lb": one_run_gdp_mu(correct, 2 * guesses, count, confidence),
                "eps_if_gaussian": one_run_gdp_eps(correct, 2 * guesses, count, delta, confidence) if delta > 0 else None,
                "method": "Mahloujifar, Melis & Chaudhuri 2024, Gaussian trade-off curves: μ_LB holds for any mechanism; "
                          "eps_if_gaussian, the ε of μ_LB-GDP, is a lower bound only for a mechanism whose privacy "
                          "curve is Gaussian, and for any other mechanism neither a bound nor an estimate (it can "
                          "exceed the true ε)"},
        "eps_sound": claim.eps_sound,
        "eps_claimed": claim.eps_claimed,
        "wall_s": time.perf_counter() - start,
        "device": devices.name(device),
    }
    return released_record(game, record)
