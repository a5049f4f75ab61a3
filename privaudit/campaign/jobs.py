"""Jobs: the picklable units an executor runs, each yielding the rows of the cells it finishes.

A training job is a training cell with the finding cells that ride on its run (it is trained
once with all their taps listening); an audit job is one audit cell, which needs no training
cell's run. `run_job` runs either wherever an executor puts it; the driver alone appends the
rows it yields (`privaudit.campaign.run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.attacks.views import noise
from privaudit.defenses.base import Defense
from privaudit.defenses.external import relation_warning, threat_warning
from privaudit.models import model_note
from privaudit import __version__, devices
from privaudit.campaign.active_findings import active_headline, active_row, check_active
from privaudit.campaign.audit_findings import audit_headline, audit_row, check_audit
from privaudit.campaign.cells import (AttackCell, AuditCell, Cell, MembershipCell, build_defense, cell_claim,
                                     expand_all, shipped)
from privaudit.campaign.coalition_findings import coalition_findings, coalition_headline, coalition_row, plan_coalition
from privaudit.campaign.config import Campaign
from privaudit.campaign.inversion_findings import (
    attack_batch_size,
    attack_unheard,
    attack_cell_row,
    attack_row,
    inversion_headline,
    not_run,
    plan_attack,
)
from privaudit.campaign.membership_findings import (
    AttackerData,
    membership_headline,
    membership_rows,
    plan_membership,
    unrun_rows,
)
from privaudit.progress import Progress
from privaudit.store import ResultsStore
from privaudit.errors import ConfigError
from privaudit.sim import BrokenContract, Diverged, RunOutput, simulate
from privaudit.wire import Tap


def run_cell(cell: Cell, progress: bool = False, taps: list[Tap] | None = None,
             defense: Defense | None = None) -> tuple[dict[str, Any], RunOutput]:
    """Train the cell's defense (built here unless given) with `taps` listening; return its
    results row and the run's output (the taps' transcripts among it). `Diverged` when the run
    stops being finite. With `progress`, its rounds are counted on stderr (`privaudit.progress`:
    a bar on a terminal, a plain line every interval in a log). It trains on the defense's device
    (built here: `privaudit.devices.work_device()`)."""
    defense = defense or build_defense(cell, devices.work_device())
    counter = Progress(f"{cell.label} seed {cell.seed}", cell.run.rounds, unit="rounds") if progress else None
    try:
        with devices.on(defense.setup.device):
            output = simulate(defense, cell.run.rounds, eval_every=cell.run.eval_every, taps=taps or [],
                              after_round=None if counter is None else (lambda round, public: counter.update(1)))
    finally:
        if counter is not None:
            counter.close()
    final = output.history[-1]
    return training_row(cell, defense, {key: value for key, value in final.items() if key != "round"},
                        output.history, output.messages_sent, output.wall_s, cell_claim(cell, defense).as_dict()), output


def training_row(cell: Cell, defense: Defense, metrics: dict[str, float], history: list[dict[str, float]],
                 messages: dict[str, int], wall_s: float, claim: dict[str, Any] | None) -> dict[str, Any]:
    """A training cell's results row, with its claim (`cell_claim`; None for a failed run whose
    claim cannot be computed)."""
    return {
        "type": "training",
        "cell": cell.id,
        "group": cell.group,
        "defense": cell.run.kind,
        "label": cell.label,
        "title": type(defense).title,
        "seed": cell.seed,
        "config": cell.describe(),
        "metrics": metrics,
        "claim": claim,
        "noise": None if noise(cell.run.kind) is None else noise(cell.run.kind).as_dict(),
        "history": history,
        "messages": messages,
        "wall_s": wall_s,
        "device": devices.name(defense.setup.device),
        "version": __version__,
    } | _model_note(defense)


def _model_note(defense: Defense) -> dict[str, str]:
    """The row's `model_note` when the model changed on the way (`privaudit.models.model_note`:
    BatchNorm replaced by GroupNorm, ...), so the row says what was trained; nothing otherwise."""
    note = model_note(defense.setup.model.module)
    return {"model_note": note} if note else {}


def headline(metrics: dict[str, float]) -> str:
    """The one number that says how training went: accuracy, else estimation error, else loss."""
    if "avg_acc" in metrics:
        return f"average-model accuracy {metrics['avg_acc']:.3f}"
    if "avg_error" in metrics:
        return f"average-model estimation error {metrics['avg_error']:.4g}"
    return f"average-model test loss {metrics['avg_loss']:.4g}"


@dataclass(frozen=True)
class Finished:
    """One results row of a job and the line that announces it (without the `[k/n]` counter,
    which only the driver knows)."""

    row: dict[str, Any]
    message: str


def _plan(attack: AttackCell, defense: Defense) -> tuple[Tap, Tap]:
    """The taps of an attack cell: a coalition's, else a single victim's (`plan_attack`)."""
    if attack.attack.threat == "coalition":
        return plan_coalition(attack, defense)
    return plan_attack(attack, defense)


@dataclass(frozen=True)
class TrainingJob:
    """One training cell and the pending finding cells that ride on its run: it is trained once
    with all their taps listening, and its own row is written only when `train` (it is not
    finished yet). It holds its cells, not the campaign, so a worker needs nothing else."""

    cell: Cell
    train: bool
    attacks: tuple[AttackCell, ...] = ()
    memberships: tuple[tuple[MembershipCell, ...], ...] = ()

    @property
    def cells(self) -> list[str]:
        """The ids of the cells whose rows this job yields."""
        return (([self.cell.id] if self.train else []) + [attack.id for attack in self.attacks]
                + [member.id for group in self.memberships for member in group])

    def check(self) -> list[str]:
        """Build the defense, compute its claim and plan every finding, so a bad field (or a claim
        its accountant cannot evaluate) fails before anything runs. A defense written elsewhere
        whose claim fails is a warning: its run gives failed rows and the campaign goes on."""
        defense = build_defense(self.cell)
        warnings = []
        try:
            claim = cell_claim(self.cell, defense)
        except ConfigError as error:
            if shipped(self.cell.run.kind):
                raise
            warnings.append(f"{error} (its cells will be failed rows)")
        else:
            warnings += filter(None, [relation_warning(claim), threat_warning(claim)])
        note = model_note(defense.setup.model.module)
        if note:
            warnings.append(f"{self.cell.label}: model {self.cell.run.model!r} is trained as changed: {note}")
        for attack in self.attacks:
            _plan(attack, defense)
            unheard = None if attack.attack.threat == "coalition" else attack_unheard(attack, defense)
            if unheard is not None:
                warnings.append(unheard)
        for group in self.memberships:
            plan_membership(list(group), defense)
        return warnings


def run_training_job(job: TrainingJob, store: ResultsStore, progress: bool = False) -> Iterator[Finished]:
    """Train the job's cell with its findings' taps listening, then score each finding, yielding
    every row as soon as it is ready. All of it runs on `privaudit.devices.work_device()`: the
    set-up is moved there once, and each finding works where the defense's set-up is."""
    cell = job.cell
    start = time.perf_counter()
    defense = build_defense(cell, devices.work_device())
    planned = [(attack, *_plan(attack, defense)) for attack in job.attacks]
    groups = [(list(group), *plan_membership(list(group), defense)) for group in job.memberships]
    taps = [tap for _, tap, truth in planned for tap in (tap, truth)] + [tap for _, tap, _ in groups if tap]
    try:
        row, output = run_cell(cell, progress=progress, defense=defense, taps=taps)
    except Diverged as diverged:
        yield from _failed(job, defense, [data for _, _, data in groups], f"training run {diverged}", str(diverged),
                           diverged.history, time.perf_counter() - start)
        return
    except Exception as error:  # noqa: BLE001 - a defense written elsewhere fails its own cells, not the campaign
        if shipped(cell.run.kind):
            raise
        what = str(error) if isinstance(error, (BrokenContract, ConfigError)) else f"{type(error).__name__}: {error}"
        reason = f"defense '{cell.run.kind}' failed at run time: {what}"
        yield from _failed(job, defense, [data for _, _, data in groups], reason, reason, [],
                           time.perf_counter() - start)
        return
    if job.train:
        yield Finished(row, f"{cell.label} seed {cell.seed}: {headline(row['metrics'])} "
                            f"({time.perf_counter() - start:.1f} s)")
    transcripts = iter(output.transcripts)
    where = {"device": devices.name(defense.setup.device)}
    for attack, _, _ in planned:
        start = time.perf_counter()
        if attack.attack.threat == "coalition":
            attack_result = coalition_row(attack, coalition_findings(attack, defense, next(transcripts),
                                                                     next(transcripts), store, progress))
            said = coalition_headline(attack_result)
        else:
            attack_result = attack_row(attack, defense, next(transcripts), next(transcripts), store, progress)
            said = inversion_headline(attack_result)
        yield Finished(attack_result | where, f"{attack.label} on {cell.label} seed {cell.seed} round {attack.round}: "
                                      f"{said} ({time.perf_counter() - start:.1f} s)")
    for group, tap, data in groups:
        transcript = next(transcripts) if tap else None
        for member_row in membership_rows(group, defense, transcript, output.final_states, data, store, progress):
            at = group[0].table.held if member_row["round"] is None else f"round {member_row['round']}"
            yield Finished(member_row | where, f"{member_row['label']} on {cell.label} seed {cell.seed} {at}: "
                                       f"{membership_headline(member_row)} ({member_row['wall_s']:.1f} s)")


def _failed(job: TrainingJob, defense: Defense, data: list[AttackerData], reason: str, status: str,
            history: list[dict[str, float]], wall_s: float) -> Iterator[Finished]:
    """The rows of a job whose training run failed (it diverged, or a defense written elsewhere
    raised or broke the engine's contract): the training cell failed with `status` (its row keeps
    the evaluations before, and its claim where the claim can still be computed), and every
    finding cell riding on the run failed with `reason`; the campaign goes on."""
    cell = job.cell
    where = {"device": devices.name(defense.setup.device)}
    if job.train:
        try:
            claim = cell_claim(cell, defense).as_dict()
        except ConfigError:
            claim = None
        row = training_row(cell, defense, {}, history, {}, wall_s, claim) | {"status": f"failed: {status}"}
        yield Finished(row, f"{cell.label} seed {cell.seed}: {row['status']}")
    for attack in job.attacks:
        found = not_run(attack_batch_size(attack, defense), f"failed: {reason}")
        row = (coalition_row(attack, found | {"agents": [], "exposed": 0}) if attack.attack.threat == "coalition"
               else attack_cell_row(attack, found))
        yield Finished(row | where, f"{attack.label} on {cell.label} seed {cell.seed} round {attack.round}: "
                                   f"failed: {reason}")
    for group, attacker in zip(job.memberships, data):
        for member_row in unrun_rows(list(group), attacker, reason):
            yield Finished(member_row | where, f"{member_row['label']} on {cell.label} seed {cell.seed}: "
                                               f"{member_row['status']}")


@dataclass(frozen=True)
class AuditJob:
    """One audit cell: it needs no training cell's run (a canary audit trains its own)."""

    cell: AuditCell

    @property
    def cells(self) -> list[str]:
        return [self.cell.id]

    def check(self) -> list[str]:
        """A canary audit's game is built, so a victim or threat its run cannot serve fails now;
        for a defense written elsewhere whose code fails (its claim), a warning: the audit's row
        will be a failed row and the campaign goes on."""
        try:
            check_audit(self.cell)
        except ConfigError as error:
            training = self.cell.training
            if training is None or shipped(training.run.kind):
                raise
            return [f"{error} (its row will be a failed row)"]
        return []


@dataclass(frozen=True)
class ActiveJob:
    """One cell of an active attack table: the lie changes the run, so it trains its own runs (the
    lied one and its honest twin, `privaudit.campaign.active_findings`) instead of riding on its
    training cell's."""

    cell: AttackCell

    @property
    def cells(self) -> list[str]:
        return [self.cell.id]

    def check(self) -> list[str]:
        """Every assumption of the attack's plan, each failure a one-line ConfigError."""
        check_active(self.cell)
        return []


def run_active_job(job: ActiveJob, store: ResultsStore, progress: bool = False) -> Iterator[Finished]:
    """The active cell's inversion row with its passive twin (`active_row`)."""
    cell = job.cell
    row = active_row(cell, store)
    yield Finished(row | {"device": devices.name(devices.work_device())},
                   f"{cell.label} on {cell.training.label} seed {cell.training.seed} round {cell.round}: "
                   f"{active_headline(row)} ({row['wall_s']:.1f} s)")


def run_audit_job(job: AuditJob, store: ResultsStore, progress: bool = False) -> Iterator[Finished]:
    """The audit's row (`privaudit.campaign.audit_findings.audit_row`)."""
    cell = job.cell
    row = audit_row(cell, progress)
    on = "" if cell.training is None else f" on {cell.training.label}"
    yield Finished(row, f"{cell.label}{on} seed {cell.seed}: {audit_headline(row)} ({row['wall_s']:.1f} s)")


Job = TrainingJob | AuditJob | ActiveJob
"""Every kind of job; a standalone cell kind (one that needs no training cell) is a new job type
with `cells` and `check`, its run function in `RUNNERS`, and its jobs added by `plan_jobs`."""

RUNNERS: dict[type, Callable[[Any, ResultsStore, bool], Iterator[Finished]]] = {
    TrainingJob: run_training_job,
    AuditJob: run_audit_job,
    ActiveJob: run_active_job,
}


def run_job(job: Job, out: str | Path, progress: bool = False) -> Iterator[Finished]:
    """Run one job against the results directory `out`, yielding its rows as they are ready.
    Executors call this in workers: the job's type picks its run function here and only here.
    It writes artifacts under `out` (each file atomically) but never results.jsonl: the driver
    appends the rows, so that file has one writer."""
    return RUNNERS[type(job)](job, ResultsStore(out), progress)


def plan_jobs(campaign: Campaign, finished: set[str], warnings: list[str] | None = None,
              checked: dict[str, float] | None = None, progress: bool = False) -> tuple[list[Job], int]:
    """The jobs that produce the rows missing from `finished`, each checked (so a bad field in
    the last table fails in seconds rather than after an hour; what a check only warns of is
    appended to `warnings`, and the seconds it took to `checked`, by the job's first cell: its
    set-up, claims and games, which running the job builds again), and the campaign's cell count.
    With `progress`, the checks are counted on stderr (`privaudit.progress`): `privaudit check`'s
    games may take a while on a large model."""
    cells, attacks, memberships, audits = expand_all(campaign)
    pending_attacks: dict[str, list[AttackCell]] = {}
    for attack in attacks:
        if attack.id not in finished and not attack.attack.active:
            pending_attacks.setdefault(attack.training.id, []).append(attack)
    pending_membership: dict[str, dict[int, list[MembershipCell]]] = {}
    for member in memberships:
        if member.id not in finished:
            pending_membership.setdefault(member.training.id, {}).setdefault(member.index, []).append(member)
    jobs = [TrainingJob(cell, cell.id not in finished, tuple(pending_attacks.get(cell.id, ())),
                        tuple(tuple(group) for group in pending_membership.get(cell.id, {}).values()))
            for cell in cells]
    jobs = [job for job in jobs if job.cells] + [AuditJob(audit) for audit in audits if audit.id not in finished]
    jobs += [ActiveJob(attack) for attack in attacks if attack.attack.active and attack.id not in finished]
    counter = Progress("checking jobs", len(jobs), unit="jobs") if progress else None
    for job in jobs:
        started = time.perf_counter()
        found = job.check()
        if checked is not None:
            checked[job.cells[0]] = time.perf_counter() - started
        if warnings is not None:
            warnings.extend([line for line in found if line not in warnings])
        if counter is not None:
            counter.update(1)
    if counter is not None:
        counter.close()
    return jobs, len(cells) + len(attacks) + len(memberships) + len(audits)
