"""Campaigns: expand a campaign into cells, run each cell, store each result as it finishes.

A training cell is one run of a `[[defense]]` table (one grid combination) at one seed; an
attack cell is one `[[attack]]` table on one training cell at one attacked round. A cell's id is
a hash of its normalised configuration (data, run shape, validated hyperparameters, seed, and
for an attack its table and round), so the same cell has the same id in every run of every
campaign that contains it, and a re-run skips the cells already in the results.

The work is cut into jobs (a training cell with the finding cells that ride on its run), each a
picklable value that `run_job` runs wherever an executor puts it (`privaudit.executors`: this
process, local worker processes, Ray); the driver alone appends the rows they return.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from attacks.extract import EXTRACTORS
from attacks.inversion import INVERSIONS
from defenses import DEFENSES
from defenses.base import Defense, DefenseParams, Setup
from privaudit import __version__
from privaudit.audit_findings import audit_headline, audit_row
from privaudit.config import (AttackConfig, AuditConfig, Campaign, DataConfig, MembershipConfig, RunConfig,
                              load_campaign, parse_campaign)
from privaudit.data import load_dataset, partition
from privaudit.errors import ConfigError
from privaudit.executors import Executor, InProcess
from privaudit.findings import attack_taps, invert, last_round_read
from privaudit.membership_findings import (METHODS, AttackerData, attacker_data, failed, infer, last_round_needed,
                                            membership_tap, reference_models, target_models)
from privaudit.flatmodel import FlatModel
from privaudit.models import build_model, model_task
from privaudit.results import ResultsStore
from privaudit.sampling import LocalData
from privaudit.sim import RunOutput, simulate
from privaudit.synthetic import SYNTHETIC, generate
from privaudit.topology import Topology
from privaudit.wire import GroundTruth, Tap, Transcript

DEMO = "demo.toml"


def embedded_campaign_text(name: str = DEMO) -> str:
    """A campaign shipped in the `campaigns` package (the default one is demo.toml)."""
    return (resources.files("campaigns") / name).read_text()


def read_campaign(path: str | Path | None) -> tuple[Campaign, str]:
    """The campaign at `path`, or the embedded default when None, with its source text."""
    if path is None:
        text = embedded_campaign_text()
        return parse_campaign(tomllib.loads(text), source=f"campaigns/{DEMO}"), text
    return load_campaign(path), Path(path).read_text()


def _digest(describe: dict[str, Any]) -> str:
    """A cell id: the hash of its normalised configuration."""
    return hashlib.sha256(json.dumps(describe, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Cell:
    """One run of one defense configuration at one seed."""

    id: str
    index: int
    seed: int
    data: DataConfig
    run: RunConfig
    params: DefenseParams
    table_label: str = ""
    setting: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        return self.run.name

    @property
    def group(self) -> str:
        """The id of the cell's configuration without its seed: the seeds of one run share it."""
        config = {key: value for key, value in self.describe().items() if key != "seed"}
        return _digest(config)

    def describe(self) -> dict[str, Any]:
        """The normalised configuration the id is computed from."""
        run = self.run.model_dump(mode="json", exclude=set(self.run.model_extra or {}))
        return {
            "data": self.data.model_dump(mode="json"),
            "run": run,
            "params": self.params.model_dump(mode="json"),
            "seed": self.seed,
        }


@dataclass(frozen=True)
class FindingCell:
    """An attack on one training cell: its id, its table's index, the training cell it attacks;
    subclasses add the table and what they attack."""

    id: str
    index: int
    training: Cell

    def describe(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def group(self) -> str:
        """The id without the training seed: the seeds of one attack setting share it."""
        return _digest(self.describe() | {"training": self.training.group})


@dataclass(frozen=True)
class AttackCell(FindingCell):
    """One `[[attack]]` table on one training cell at one attacked round."""

    attack: AttackConfig
    scenario: str
    round: int

    @property
    def label(self) -> str:
        return self.attack.name

    def describe(self) -> dict[str, Any]:
        return {
            "training": self.training.describe(),
            "attack": self.attack.model_dump(mode="json"),
            "scenario": self.scenario,
            "round": self.round,
        }

    @property
    def where(self) -> str:
        return f"attack[{self.index}] ({self.label} on {self.training.label}, seed {self.training.seed}, round {self.round})"


@dataclass(frozen=True)
class MembershipCell(FindingCell):
    """One `[[membership]]` table on one training cell at one attacked round (None: the final
    average model)."""

    table: MembershipConfig
    round: int | None

    @property
    def label(self) -> str:
        return self.table.name

    def describe(self) -> dict[str, Any]:
        return {
            "training": self.training.describe(),
            "membership": self.table.model_dump(mode="json"),
            "round": self.round,
        }

    @property
    def where(self) -> str:
        at = "final average model" if self.round is None else f"round {self.round}"
        return f"membership[{self.index}] ({self.label} on {self.training.label}, seed {self.training.seed}, {at})"


@dataclass(frozen=True)
class AuditCell:
    """One `[[audit]]` table at one seed: a mechanism audit (no training cell), or a canary audit
    of one training cell (its configuration and seed; the audit trains its own runs)."""

    id: str
    index: int
    table: AuditConfig
    seed: int
    training: Cell | None

    @property
    def label(self) -> str:
        return self.table.name

    def describe(self) -> dict[str, Any]:
        return {"audit": self.table.model_dump(mode="json"), "seed": self.seed,
                "training": None if self.training is None else self.training.describe()}

    @property
    def group(self) -> str:
        """The id without the seed: the seeds of one audit setting share it."""
        training = None if self.training is None else self.training.group
        return _digest({"audit": self.table.model_dump(mode="json"), "training": training})

    @property
    def where(self) -> str:
        on = "" if self.training is None else f" on {self.training.label}"
        return f"audit[{self.index}] ({self.label}{on}, seed {self.seed})"


def expand_audits(campaign: Campaign, cells: list[Cell]) -> list[AuditCell]:
    """Every (mechanism audit table, seed) and (canary audit table, training cell it targets), in
    file order."""
    found = []
    for index, table in enumerate(campaign.audit):
        targets = set(campaign.audit_targets(index))
        if table.kind == "mechanism":
            drafts = [AuditCell("", index, table, seed, None) for seed in campaign.campaign.seeds]
        else:
            drafts = [AuditCell("", index, table, cell.seed, cell) for cell in cells if cell.index in targets]
        found += [dataclasses.replace(draft, id=_digest(draft.describe())) for draft in drafts]
    return found


def expand_membership(campaign: Campaign, cells: list[Cell]) -> list[MembershipCell]:
    """Every (membership table, training cell it targets, round), in file order."""
    found = []
    for index, table in enumerate(campaign.membership):
        targets = set(campaign.membership_targets(index))
        for cell in cells:
            if cell.index in targets:
                for round in table.rounds or [None]:
                    draft = MembershipCell("", index, cell, table, round)
                    found.append(dataclasses.replace(draft, id=_digest(draft.describe())))
    return found


def expand_attacks(campaign: Campaign, cells: list[Cell]) -> list[AttackCell]:
    """Every (attack table, training cell it targets, round), in file order."""
    found = []
    for index, table in enumerate(campaign.attack):
        scenarios = dict(campaign.targets(index))
        for cell in cells:
            if cell.index not in scenarios:
                continue
            for round in table.rounds:
                draft = AttackCell("", index, cell, table, scenarios[cell.index], round)
                found.append(dataclasses.replace(draft, id=_digest(draft.describe())))
    return found


def expand(campaign: Campaign) -> list[Cell]:
    """Every (defense table, grid combination, seed) of the campaign, in file order, then grid
    order, then seed order."""
    cells = []
    for index, table in enumerate(campaign.defense):
        for run in table.variants():
            params = run.params()
            values = run.model_dump() | (run.model_extra or {})
            setting = {"topology": run.topology, "agents": run.agents} | {key: values[key] for key in table.grid}
            for seed in campaign.campaign.seeds:
                draft = Cell("", index, seed, campaign.data, run, params)
                cells.append(Cell(_digest(draft.describe()), index, seed, campaign.data, run, params,
                                  table.name, setting))
    return cells


def build_setup(cell: Cell) -> Setup:
    """Data, partition, topology, model and random stream of a cell; every failure is a
    ConfigError naming the cell."""
    run, data_cfg = cell.run, cell.data
    where = f"defense[{cell.index}] ({cell.label}, seed {cell.seed})"
    try:
        if data_cfg.dataset in SYNTHETIC:
            data = generate(data_cfg.dataset, run.agents, samples_per_agent=data_cfg.samples_per_agent,
                            seed=cell.seed)
            shards = [np.flatnonzero(data.owners == agent) for agent in range(run.agents)]
        else:
            data = load_dataset(data_cfg.dataset, data_root=data_cfg.data_root, download=data_cfg.download,
                                test_fraction=data_cfg.test_fraction, max_train=data_cfg.max_train)
            shards = partition(data.y_train.numpy(), run.agents, data_cfg.partition, seed=cell.seed,
                               alpha=data_cfg.alpha, min_size=data_cfg.min_size,
                               shards_per_agent=data_cfg.shards_per_agent)
        topology = Topology.build(run.topology, run.agents, run.mixing, seed=cell.seed, edge_prob=run.edge_prob)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cell.seed)
            module = build_model(run.model, data.shape, data.num_classes, **run.model_options)
        if model_task(module) != data.task:
            raise ValueError(f"model '{run.model}' is for {model_task(module)}, dataset '{data.name}' is a "
                             f"{data.task} problem")
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    return Setup(
        topology=topology,
        model=FlatModel(module),
        model_name=run.model,
        data=data,
        local=LocalData(data.x_train, data.y_train, shards),
        generator=torch.Generator().manual_seed(cell.seed),
        seed=cell.seed,
    )


def build_defense(cell: Cell) -> Defense:
    try:
        return DEFENSES[cell.run.kind](cell.params, build_setup(cell))
    except ValueError as error:
        raise ConfigError(f"defense[{cell.index}] ({cell.label}, seed {cell.seed}): {error}") from None


def run_cell(cell: Cell, progress: bool = False, taps: list[Tap] | None = None,
             defense: Defense | None = None) -> tuple[dict[str, Any], RunOutput]:
    """Train the cell's defense (built here unless given) with `taps` listening; return its
    results row and the run's output (the taps' transcripts among it)."""
    defense = defense or build_defense(cell)
    output = simulate(defense, cell.run.rounds, eval_every=cell.run.eval_every, progress=progress,
                      label=f"{cell.label} seed {cell.seed}", taps=taps or [])
    final = output.history[-1]
    return {
        "type": "training",
        "cell": cell.id,
        "group": cell.group,
        "defense": cell.run.kind,
        "label": cell.label,
        "title": type(defense).title,
        "seed": cell.seed,
        "config": cell.describe(),
        "metrics": {key: value for key, value in final.items() if key != "round"},
        "claim": defense.claim(cell.run.rounds).as_dict(),
        "history": output.history,
        "messages": output.messages_sent,
        "wall_s": output.wall_s,
        "version": __version__,
    }, output


def attack_batch_size(cell: AttackCell, defense: Defense) -> int:
    """The number of images to reconstruct: the table's, else the defense's public batch size."""
    size = cell.attack.batch_size or defense.public().get("batch_size")
    if not isinstance(size, int):
        raise ConfigError(f"{cell.where}: give batch_size: defense '{cell.training.run.kind}' has no "
                          "public batch size")
    return size


def plan_attack(cell: AttackCell, defense: Defense) -> tuple[Tap, GroundTruth]:
    """The taps of an attack cell, every problem a ConfigError naming the cell."""
    run = cell.training.run
    last = last_round_read(run.kind, cell.scenario, cell.round)
    if last >= run.rounds:
        raise ConfigError(f"{cell.where}: the '{cell.scenario}' extractor reads round {last}, but "
                          f"'{run.name}' runs {run.rounds} rounds (0..{run.rounds - 1})")
    attack_batch_size(cell, defense)
    try:
        return attack_taps(cell.attack, run.kind, cell.scenario, cell.round, defense.setup.topology)
    except ValueError as error:
        raise ConfigError(f"{cell.where}: {error}") from None


def attack_row(cell: AttackCell, defense: Defense, transcript: Transcript, truth: Transcript,
               store: ResultsStore) -> dict[str, Any]:
    """Run one attack cell on the transcripts of its training run; its results row."""
    found = invert(cell.id, cell.attack, cell.scenario, cell.round, defense.setup, transcript, truth,
                   attack_batch_size(cell, defense), store)
    run = cell.training.run
    training = cell.training
    return {
        "type": "inversion",
        "cell": cell.id,
        "group": cell.group,
        "training": training.id,
        "label": cell.label,
        "attack": cell.attack.kind,
        "attack_title": INVERSIONS[cell.attack.kind].title,
        "defense": run.kind,
        "defense_label": run.name,
        "defense_table": training.table_label,
        "setting": training.setting,
        "scenario": cell.scenario,
        "scenario_needs": EXTRACTORS[run.kind, cell.scenario].needs,
        "threat": cell.attack.threat,
        "victim": cell.attack.victim,
        "round": cell.round,
        "seed": training.seed,
        **found,
        "config": cell.describe(),
        "version": __version__,
    }


def claims(campaign: Campaign) -> list[dict[str, Any]]:
    """The claim of every run of the campaign (one per table and grid combination, at the first
    seed: a claim depends on the run's parameters, not on its random draws), without training."""
    rows = []
    seen: set[tuple[int, str]] = set()
    for cell in expand(campaign):
        if (cell.index, cell.label) in seen:
            continue
        seen.add((cell.index, cell.label))
        rows.append({"label": cell.label, **build_defense(cell).claim(cell.run.rounds).as_dict()})
    return rows


def inversion_headline(row: dict[str, Any]) -> str:
    """How an attack cell ended, in one line."""
    if row["metrics"]["psnr"] is None:
        return row["status"]
    text = f"PSNR {row['metrics']['psnr']:.1f} dB (noise floor {row['baseline']['psnr']:.1f} dB)"
    return text if row["status"] == "ok" else f"{text}, {row['status']}"


def headline(metrics: dict[str, float]) -> str:
    """The one number that says how training went: accuracy, else estimation error, else loss."""
    if "avg_acc" in metrics:
        return f"average-model accuracy {metrics['avg_acc']:.3f}"
    if "avg_error" in metrics:
        return f"average-model estimation error {metrics['avg_error']:.4g}"
    return f"average-model test loss {metrics['avg_loss']:.4g}"


def plan_membership(cells: list[MembershipCell], defense: Defense) -> tuple[Tap | None, AttackerData]:
    """The tap and the attacker's data of the membership cells of one table on one training cell
    (they share both, and the reference models); every problem a ConfigError naming the cell."""
    first = cells[0]
    run = first.training.run
    needed = last_round_needed(first.table, run.kind, run.rounds)
    if needed > run.rounds:
        raise ConfigError(f"{first.where}: the model view reads round {needed - 1}, but '{run.name}' runs "
                          f"{run.rounds} rounds (0..{run.rounds - 1})")
    try:
        return membership_tap(first.table, run.kind, defense.setup), attacker_data(first.table, defense.setup)
    except ValueError as error:
        raise ConfigError(f"{first.where}: {error}") from None


def membership_rows(cells: list[MembershipCell], defense: Defense, transcript: Transcript | None,
                    final_states: Tensor, data: AttackerData, store: ResultsStore) -> Iterator[dict[str, Any]]:
    """Train the reference models of one table on one training cell once, then score every
    attacked round, yielding each cell's results row as soon as it is scored."""
    first, training = cells[0], cells[0].training
    run = training.run
    references, seeds, reference_wall = reference_models(first.table, run.kind, training.params, defense.setup,
                                                         data, run.rounds)
    for cell in cells:
        started = time.perf_counter()
        try:
            targets = target_models(cell.table, run.kind, cell.round, transcript, final_states)
            mine = {victim: references[cell.round, victim] for victim in cell.table.attacked}
            found = infer(cell.id, cell.table, defense.setup.model, targets, mine, data, store)
        except (KeyError, ValueError) as error:
            found = failed(error.args[0] if error.args else str(error))
        yield {
            "type": "membership",
            "cell": cell.id,
            "group": cell.group,
            "training": training.id,
            "label": cell.label,
            "defense": run.kind,
            "defense_label": run.name,
            "defense_table": training.table_label,
            "setting": training.setting,
            "target": cell.table.target,
            "threat": cell.table.threat if cell.round is not None else "output",
            "victims": cell.table.attacked,
            "round": cell.round,
            "seed": training.seed,
            "references": len(seeds),
            "reference_seeds": seeds,
            "reference_wall_s": reference_wall,
            "data": data.sizes(),
            **found,
            "wall_s": time.perf_counter() - started + reference_wall / len(cells),
            "config": cell.describe(),
            "version": __version__,
        }


def membership_headline(row: dict[str, Any]) -> str:
    """How a membership cell ended, in one line: AUC and TPR at 1 % FPR of each method."""
    if row["status"] != "ok":
        return row["status"]
    parts = []
    for name in METHODS:
        metrics = row["metrics"][name]
        low = metrics.get("tpr@0.01")
        parts.append(f"{name.upper()} AUC {metrics['auc']:.3f}" + (f", TPR@1% {low:.3f}" if low is not None else ""))
    return "; ".join(parts)


@dataclass(frozen=True)
class Finished:
    """One results row of a job and the line that announces it (without the `[k/n]` counter,
    which only the driver knows)."""

    row: dict[str, Any]
    message: str


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

    def check(self) -> None:
        """Build the defense and plan every finding, so a bad field fails before anything runs."""
        defense = build_defense(self.cell)
        for attack in self.attacks:
            plan_attack(attack, defense)
        for group in self.memberships:
            plan_membership(list(group), defense)


def run_training_job(job: TrainingJob, store: ResultsStore, progress: bool = False) -> Iterator[Finished]:
    """Train the job's cell with its findings' taps listening, then score each finding, yielding
    every row as soon as it is ready."""
    cell = job.cell
    start = time.perf_counter()
    defense = build_defense(cell)
    planned = [(attack, *plan_attack(attack, defense)) for attack in job.attacks]
    groups = [(list(group), *plan_membership(list(group), defense)) for group in job.memberships]
    taps = [tap for _, tap, truth in planned for tap in (tap, truth)] + [tap for _, tap, _ in groups if tap]
    row, output = run_cell(cell, progress=progress, defense=defense, taps=taps)
    if job.train:
        yield Finished(row, f"{cell.label} seed {cell.seed}: {headline(row['metrics'])} "
                            f"({time.perf_counter() - start:.1f} s)")
    transcripts = iter(output.transcripts)
    for attack, _, _ in planned:
        start = time.perf_counter()
        attack_result = attack_row(attack, defense, next(transcripts), next(transcripts), store)
        yield Finished(attack_result, f"{attack.label} on {cell.label} seed {cell.seed} round {attack.round}: "
                                      f"{inversion_headline(attack_result)} ({time.perf_counter() - start:.1f} s)")
    for group, tap, data in groups:
        transcript = next(transcripts) if tap else None
        for member_row in membership_rows(group, defense, transcript, output.final_states, data, store):
            at = "final average" if member_row["round"] is None else f"round {member_row['round']}"
            yield Finished(member_row, f"{member_row['label']} on {cell.label} seed {cell.seed} {at}: "
                                       f"{membership_headline(member_row)} ({member_row['wall_s']:.1f} s)")


@dataclass(frozen=True)
class AuditJob:
    """One audit cell: it needs no training cell's run (a canary audit trains its own)."""

    cell: AuditCell

    @property
    def cells(self) -> list[str]:
        return [self.cell.id]

    def check(self) -> None:
        """A canary audit's game is built, so a victim or threat its run cannot serve fails now."""
        if self.cell.training is not None:
            from attacks.canary import game_for_cell

            table = self.cell.table
            try:
                game_for_cell(self.cell.training, victim=table.victim, threat=table.threat,
                              canary_label=table.canary_label, canary_scale=table.canary_scale)
            except ConfigError as error:
                raise ConfigError(f"{self.cell.where}: {error}") from None


def run_audit_job(job: AuditJob, store: ResultsStore, progress: bool = False) -> Iterator[Finished]:
    """The audit's row (`privaudit.audit_findings.audit_row`)."""
    cell = job.cell
    row = audit_row(cell)
    on = "" if cell.training is None else f" on {cell.training.label}"
    yield Finished(row, f"{cell.label}{on} seed {cell.seed}: {audit_headline(row)} ({row['wall_s']:.1f} s)")


Job = TrainingJob | AuditJob
"""Every kind of job; a standalone cell kind (one that needs no training cell) is a new job type
with `cells` and `check`, its run function in `RUNNERS`, and its jobs added by `plan_jobs`."""

RUNNERS: dict[type, Callable[[Any, ResultsStore, bool], Iterator[Finished]]] = {
    TrainingJob: run_training_job,
    AuditJob: run_audit_job,
}


def run_job(job: Job, out: str | Path, progress: bool = False) -> Iterator[Finished]:
    """Run one job against the results directory `out`, yielding its rows as they are ready.
    Executors call this in workers: the job's type picks its run function here and only here.
    It writes artifacts under `out` (each file atomically) but never results.jsonl: the driver
    appends the rows, so that file has one writer."""
    return RUNNERS[type(job)](job, ResultsStore(out), progress)


def plan_jobs(campaign: Campaign, finished: set[str]) -> tuple[list[Job], int]:
    """The jobs that produce the rows missing from `finished`, each checked (so a bad field in
    the last table fails in seconds rather than after an hour), and the campaign's cell count."""
    cells = expand(campaign)
    attacks = expand_attacks(campaign, cells)
    memberships = expand_membership(campaign, cells)
    pending_attacks: dict[str, list[AttackCell]] = {}
    for attack in attacks:
        if attack.id not in finished:
            pending_attacks.setdefault(attack.training.id, []).append(attack)
    pending_membership: dict[str, dict[int, list[MembershipCell]]] = {}
    for member in memberships:
        if member.id not in finished:
            pending_membership.setdefault(member.training.id, {}).setdefault(member.index, []).append(member)
    jobs = [TrainingJob(cell, cell.id not in finished, tuple(pending_attacks.get(cell.id, ())),
                        tuple(tuple(group) for group in pending_membership.get(cell.id, {}).values()))
            for cell in cells]
    audits = expand_audits(campaign, cells)
    jobs = [job for job in jobs if job.cells] + [AuditJob(audit) for audit in audits if audit.id not in finished]
    for job in jobs:
        job.check()
    return jobs, len(cells) + len(attacks) + len(memberships) + len(audits)


def run_campaign(campaign: Campaign, text: str, out: str | Path, *, force: bool = False,
                 progress: bool = True, say: Callable[[str], None] = print,
                 executor: Executor | None = None) -> ResultsStore:
    """Run every unfinished cell of `campaign` on `executor` (default: one after another in
    this process), appending each row to `out/results.jsonl` as it arrives.

    All jobs are checked before the first runs; cells already in the results are skipped unless
    `force`. The attack and membership cells of one training cell share its run: it is trained
    once with all their taps listening (again, with the same seed and so the same messages, when
    only attacks are left). The membership cells of one table on one training cell share their
    reference models. With `progress`, a bar counts the cells (and, in this process, a bar
    counts each training run's rounds).
    """
    executor = executor or InProcess()
    store = ResultsStore(out)
    jobs, total = plan_jobs(campaign, set() if force else store.done())
    store.write_campaign(text)
    left = sum(len(job.cells) for job in jobs)
    if left < total:
        say(f"{total - left} of {total} cells already finished in {store.path}; skipping them")
    work = functools.partial(run_job, progress=progress and executor.in_process)
    bar = tqdm(total=left, desc="cells", unit="cell", disable=None if progress and left else True)
    with bar, contextlib.closing(executor.run(work, jobs, store.directory)) as finished:
        for number, done in enumerate(finished, start=1):
            store.append(done.row)
            bar.update()
            with tqdm.external_write_mode():
                say(f"[{number}/{left}] {done.message}")
    return store
