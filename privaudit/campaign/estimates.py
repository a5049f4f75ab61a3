"""How long each cell of a campaign will take: the estimate `privaudit check` prints before a run.

The costs are measured on this machine, now, on the campaign's own work wherever that is cheap:

* **A round and an evaluation of each training configuration** (`time_defense`): its defense is
  built on its own world, one round is run to warm up, then rounds are timed until `MIN_ROUNDS`
  and `MIN_SECONDS` are both reached (or the run's rounds are used up), and one evaluation of the
  agents' models. Seeds share a configuration's timing. A training cell costs rounds × a round +
  evaluations × an evaluation; a membership table on it, its reference runs (each the rounds the
  attacked view needs and two evaluations); a canary audit, 2 × runs × rounds rounds (a position
  audit the same per victim; repeated:
  its worlds run batched: on the demo's DPDL audit, 2026-11-26, 0.97 ms per world-round against
  0.9–1.2 ms for a round alone), or one run's rounds (one run). The first warm-up round of the process
  pays torch's one-time imports for its function transforms (1–1.6 s here): a run pays them
  once too, and the total counts them once.
* **Each job's set-up**: the seconds the check of its job took (`plan_jobs`' `checked`: building
  the defense, its claim's accountant, a canary audit's game), which running the job spends again,
  go to its first cell; and the planning of the whole campaign, which a run repeats before it
  starts, to the total.
* **A loss evaluation of each inversion attack** (`time_inversion`): the attack runs on a target
  made from the model's gradient at the initial model on records of its own world, stopped by its
  observer after `TIMED_EVALUATIONS`, and the evaluations after the first are timed. Times its
  budget (`privaudit.campaign.inversion_budget.evaluation_budget`) this is a ceiling: an attack
  stops sooner once it matches. A closed-form attack is timed whole on that target.
* **A mechanism audit** costs its sampled values (samples and its curve's sizes, × dim × releases)
  at `SECONDS_PER_VALUE`, a constant: measured, not timed now, because each audit's fixed part
  (its claim and exact privacy curve, PLD accountants: 0.85 s for LT-ADMM-DP's round, 0.01 s for
  Wang & Zhang's) costs as much to time as to run, and is not counted.

Not counted anywhere: scoring (membership scores and bootstraps, reconstruction metrics), and
coalition and reconstruction-game cells, whose work is not modelled (their lines say so). The
estimate is for one process: with several workers a run takes less.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.func import grad

from privaudit.attacks.audit.mechanism_audit import default_samples
from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion.base import Inversion, Observer
from privaudit.defenses.base import Defense
from privaudit.campaign.cells import AttackCell, AuditCell, Cell, MembershipCell, build_defense
from privaudit.campaign.inversion_budget import evaluation_budget
from privaudit.campaign.jobs import ActiveJob, AuditJob, Job, attack_batch_size
from privaudit.campaign.membership_findings import last_round_needed
from privaudit.errors import ConfigError
from privaudit.progress import Progress
from privaudit.sim import evaluate
from privaudit.wire import Wire

MIN_ROUNDS = 2
"""Rounds timed at least per training configuration, after the warm-up round."""

MIN_SECONDS = 0.03
"""Seconds of rounds timed at least per configuration (more rounds when each takes a millisecond,
so the timer's and the scheduler's noise averages out; capped at `MAX_ROUNDS`)."""

MAX_ROUNDS = 20

TIMED_EVALUATIONS = 6
"""Loss evaluations an inversion runs for its timing (the first is not counted: it may set up)."""

SECONDS_PER_VALUE = 3e-7
"""A mechanism audit's seconds per sampled value: measured 2026-11-26 on the 2 shared cores of
this project's machine (load 2.5) with the demo's four mechanism audits at 2·10⁴, 2·10⁵ and 10⁶
samples: 1.3e-7 (Wang & Zhang) to 6.5e-7 (the ternary quantizer) seconds per value, beyond each
audit's fixed part."""


@dataclass(frozen=True)
class Rates:
    """What one round and one evaluation of a training configuration took, and its warm-up round."""

    round_s: float
    evaluation_s: float
    warm_s: float
    """The warm-up round's seconds."""


@dataclass(frozen=True)
class CellTime:
    """One cell's estimate: `seconds` (None: no estimate, `how` says why), what it is made of in
    words, and whether it is a ceiling (an attack that may stop sooner)."""

    what: str
    seconds: float | None
    how: str
    ceiling: bool = False

    def line(self) -> str:
        if self.seconds is None:
            return f"  {self.what}: no estimate ({self.how})"
        most = "at most " if self.ceiling else ""
        return f"  {self.what}: {most}about {duration(self.seconds)}, an estimate from {self.how}"


def duration(seconds: float) -> str:
    """Seconds in the unit a person reads them in: 0.04 s, 3.2 s, 40 s, 12 min, 3.5 h."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2g} ms"


def _rounds(count: int) -> str:
    """`count` rounds in words: "1 round", "30 rounds"."""
    return f"{count:,} round{'' if count == 1 else 's'}"


def time_defense(cell: Cell, defense: Defense) -> Rates:
    """Time rounds and one evaluation of `defense`, `cell`'s defense built on its world (module
    docstring); it is left some rounds in."""
    wire = Wire(defense.setup.topology, [])
    start = time.perf_counter()
    defense.step(0, wire)
    warm = time.perf_counter() - start
    timed, start = 0, time.perf_counter()
    while timed + 1 < cell.run.rounds and timed < MAX_ROUNDS and (
            timed < MIN_ROUNDS or time.perf_counter() - start < MIN_SECONDS):
        defense.step(timed + 1, wire)
        timed += 1
    round_s = (time.perf_counter() - start) / timed if timed else warm
    start = time.perf_counter()
    evaluate(defense.setup.model, defense.setup.data, defense.states, timed + 1)
    return Rates(round_s, time.perf_counter() - start, warm)


def evaluations(rounds: int, every: int) -> int:
    """How many evaluations `privaudit.sim.simulate` makes: at round 0, every `every` rounds and
    at the end."""
    return 1 + rounds // every + (rounds % every != 0)


def _stop_after(count: int, stamps: list[float]) -> Observer:
    """An observer noting when each loss evaluation ends and stopping the attack after `count`."""

    def observe(evaluations: int, images: torch.Tensor, objective: torch.Tensor) -> bool:
        stamps.append(time.perf_counter())
        return evaluations >= count

    return observe


def time_inversion(cell: AttackCell, defense: Defense) -> CellTime:
    """An inversion cell's ceiling: its budget of loss evaluations at the cost of one, timed on a
    target of its own model and world (`defense`, its training cell's; module docstring)."""
    what = f"{cell.label} on {cell.training.label} seed {cell.training.seed} round {cell.round}"
    attack: Inversion = cell.attack.attack()
    setup, data = defense.setup, defense.setup.data
    size = attack_batch_size(cell, defense)
    point = setup.model.initial().double()
    x, y = data.x_train[:size].double(), data.y_train[:size]
    target = Target(grad(setup.model.loss)(point, x, y), point, cell.attack.victim, 0)
    stamps: list[float] = []
    start = time.perf_counter()
    result = attack.run(target, setup.model, input_shape=data.shape, num_classes=data.num_classes, batch_size=size,
                        normalisation=data.normalisation, seed=setup.seed,
                        observer=_stop_after(TIMED_EVALUATIONS, stamps))
    if not stamps:
        if result.images is None:
            return CellTime(what, None, f"it did not run on a target of the initial model: {result.status}")
        return CellTime(what, time.perf_counter() - start, "its closed form, timed now on a target of the initial "
                        "model")
    budget = evaluation_budget(attack)
    if budget is None:
        return CellTime(what, None, f"'{cell.attack.kind}' fixes no budget of loss evaluations in advance")
    if len(stamps) < 2:
        return CellTime(what, None, "it stopped after one loss evaluation on a target of the initial model")
    each = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    return CellTime(what, budget * each, f"a budget of {budget:,} loss evaluations at {_ms(each)} each, timed now",
                    ceiling=True)


class Estimator:
    """Costs the pending cells of a campaign's jobs, timing each training configuration once;
    `checked`: each job's check time by its first cell (`plan_jobs`)."""

    def __init__(self, checked: dict[str, float]) -> None:
        self.checked = checked
        self.rates: dict[str, Rates] = {}
        self.last: tuple[str, Defense] | None = None
        """The configuration last timed and its defense (one kept, not all: a campaign's defenses
        may be large), for the inversions of that training cell."""
        self.warm_up_s = 0.0
        """The first warm-up round's excess over a round: torch's one-time imports."""

    def rate(self, cell: Cell) -> Rates:
        """The costs of `cell`'s configuration, timed on its first call."""
        if cell.group not in self.rates:
            defense = build_defense(cell)
            self.rates[cell.group] = rates = time_defense(cell, defense)
            self.last = cell.group, defense
            if len(self.rates) == 1:
                self.warm_up_s = max(rates.warm_s - rates.round_s, 0.0)
        return self.rates[cell.group]

    def defense(self, cell: Cell) -> Defense:
        """`cell`'s defense: the one last timed when it is of `cell`'s configuration."""
        if self.last is not None and self.last[0] == cell.group:
            return self.last[1]
        return build_defense(cell)

    def set_up(self, job: Job, found: CellTime) -> CellTime:
        """`found` with the set-up of `job` (its check's time) added."""
        seconds = self.checked.get(job.cells[0], 0.0)
        if found.seconds is None or seconds < 0.005:
            return found
        return CellTime(found.what, found.seconds + seconds,
                        f"{found.how}, and {duration(seconds)} of set-up (as long as its check took)", found.ceiling)

    def job(self, job: Job) -> list[CellTime]:
        """Every pending cell of `job`, in the order a run announces them."""
        if isinstance(job, AuditJob):
            return [self.set_up(job, self.audit(job.cell))]
        if isinstance(job, ActiveJob):
            return [self.set_up(job, self.active(job.cell))]
        cell = job.cell
        rate = self.rate(cell)
        count = evaluations(cell.run.rounds, cell.run.eval_every)
        training = (f"{_rounds(cell.run.rounds)} at {_ms(rate.round_s)} and {count:,} evaluations at "
                    f"{_ms(rate.evaluation_s)}, timed now")
        what = f"{cell.label} seed {cell.seed}" + ("" if job.train else " (trained again for its findings)")
        found = [self.set_up(job, CellTime(what, cell.run.rounds * rate.round_s + count * rate.evaluation_s,
                                           training))]
        for attack in job.attacks:
            found.append(CellTime(f"{attack.label} on {cell.label} seed {cell.seed} round {attack.round}", None,
                                  "a coalition's knowledge system and record fit are not modelled")
                         if attack.attack.threat == "coalition" else
                         time_inversion(attack, self.defense(cell)))
        for group in job.memberships:
            found += self.membership(list(group), rate)
        return found

    def active(self, attack: AttackCell) -> CellTime:
        """An active cell's two runs (lied and honest) up to the read-out; the inversion, closed
        form, is not counted."""
        cell, rounds = attack.training, attack.round + 3
        rate = self.rate(cell)
        return CellTime(f"{attack.label} on {cell.label} seed {cell.seed} round {attack.round}",
                        2 * rounds * rate.round_s, f"2 runs of {_rounds(rounds)} at {_ms(rate.round_s)}, timed now; "
                        "the closed-form inversion not counted")

    def membership(self, cells: list[MembershipCell], rate: Rates) -> list[CellTime]:
        """The reference runs of one table on one training cell, shared by its cells."""
        first, training = cells[0], cells[0].training
        needed = last_round_needed(first.table, training.run.kind, training.run.rounds)
        references = first.table.references
        seconds = references * (needed * rate.round_s + 2 * rate.evaluation_s)
        how = (f"{references} reference runs of {_rounds(needed)} at {_ms(rate.round_s)}"
               + (f", shared by {len(cells)} cells" if len(cells) > 1 else "") + ", timed now; scoring not counted")
        return [CellTime(f"{cell.label} on {training.label} seed {training.seed} "
                         + (cell.table.held if cell.round is None else f"round {cell.round}"),
                         seconds / len(cells), how) for cell in cells]

    def audit(self, cell: AuditCell) -> CellTime:
        """A mechanism audit's sampling, or a canary or position audit's training runs (module docstring)."""
        table, training = cell.table, cell.training
        what = f"{cell.label}{'' if training is None else f' on {training.label}'} seed {cell.seed}"
        if table.kind == "mechanism":
            samples = table.samples or default_samples(table.dim, table.releases)
            values = (samples + sum(set(table.curve))) * table.dim * table.releases
            return CellTime(what, values * SECONDS_PER_VALUE,
                            f"{values:,} sampled values at {SECONDS_PER_VALUE:.1g} s each, measured on this project's "
                            "machine; its claim's and privacy curve's accountants not counted")
        if table.kind not in ("canary", "position"):
            return CellTime(what, None, f"a {table.kind} audit's trials are not modelled")
        rate = self.rate(training)
        victims = (training.run.agents if table.victims == "all" else len(table.victims or [0])) \
            if table.kind == "position" else 1
        runs = 2 * table.runs * victims if table.kind == "position" or table.method == "repeated" else 1
        rounds = runs * training.run.rounds
        what_runs = f"{runs:,} runs of {_rounds(training.run.rounds)}" if runs > 1 else \
            f"one run of {_rounds(training.run.rounds)}"
        return CellTime(what, rounds * rate.round_s, f"{what_runs} at {_ms(rate.round_s)}, timed now")


@dataclass(frozen=True)
class Estimate:
    """Every pending cell's estimate, the planning a run repeats before it starts and the one-time
    warm-up, in seconds."""

    cells: list[CellTime]
    planning_s: float
    warm_up_s: float

    def total_line(self) -> str:
        """The sum, said as an estimate with what it is made of."""
        known = [t.seconds for t in self.cells if t.seconds is not None]
        missing = len(self.cells) - len(known)
        ceilings = sum(t.ceiling for t in self.cells)
        total = sum(known) + self.planning_s + self.warm_up_s
        return (f"a run would take about {duration(total)}, an estimate from the {len(known)} cells above"
                + (f" ({ceilings} at their ceiling)" if ceilings else "")
                + f", {duration(self.planning_s)} of planning (the checks, timed now) and "
                f"{duration(self.warm_up_s)} of torch's one-time warm-up (timed now), in one process"
                + (f"; {missing} cell{'s' if missing > 1 else ''} without an estimate not counted" if missing else ""))


def estimate(jobs: list[Job], checked: dict[str, float], planning_s: float, progress: bool = False) -> Estimate:
    """The estimate of every pending cell of `jobs`; a cell whose timing fails has no estimate and
    says why, so the estimate never fails a check that passed, except for memory: a timing that
    could not allocate what it needs means the run could not either, and check refuses it. With
    `progress`, the jobs timed are counted on stderr (`privaudit.progress`), as a run counts its work."""
    estimator, found = Estimator(checked), []
    counter = Progress("timing jobs", len(jobs), unit="jobs") if progress else None
    try:
        for job in jobs:
            found += _timed(estimator, job)
            if counter is not None:
                counter.update(1)
    finally:
        if counter is not None:
            counter.close()
    return Estimate(found, planning_s, estimator.warm_up_s)


def _timed(estimator: Estimator, job: Job) -> list[CellTime]:
    """`job`'s cells' estimates (`Estimator.job`), or the reason each has none (`estimate`)."""
    try:
        return estimator.job(job)
    except MemoryError:
        raise ConfigError(f"cell {job.cells[0]}: timing its cells ran out of memory: the run would too") from None
    except Exception as error:  # noqa: BLE001 - an estimate is advice: it must not fail the check
        if "allocate" in str(error):
            raise ConfigError(f"cell {job.cells[0]}: timing its cells failed to allocate memory, so would the run: "
                              f"{str(error).splitlines()[0][:300]}") from None
        return [CellTime(f"cell {cell}", None, f"timing failed: {type(error).__name__}: {error}")
                for cell in job.cells]

