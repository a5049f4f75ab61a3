"""`privaudit check`: every check `privaudit run` makes before it trains, and what it would run.

Reading the file validates it and its limits (`privaudit.campaign.config`); `plan_jobs` then
builds every job's defense and plans every finding (`TrainingJob.check`, `AuditJob.check`), so a
campaign that passes here fails at run time only for what no check can see before training (a
run that diverges, a dataset folder that disappears). Nothing is written; the results directory
is only read, to say which cells a run would skip.

It also says how long each cell a run would compute will take (`privaudit.campaign.estimates`):
nothing is trained for it but a few timed rounds of each defense on its own world.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from privaudit.campaign.audit_findings import audit_reach
from privaudit.campaign.cells import expand_all, input_changes
from privaudit.campaign.config import Campaign
from privaudit.campaign.estimates import Estimate, estimate
from privaudit.campaign.jobs import ActiveJob, AuditJob, TrainingJob, plan_jobs
from privaudit.data import downloads_refused
from privaudit.store import ResultsStore

KINDS = ("training", "attack", "membership", "audit")


@dataclass(frozen=True)
class Preflight:
    """What a checked campaign holds and what a run of it on `out` would compute."""

    name: str
    out: Path
    cells: dict[str, int]
    """Cells per kind (`KINDS`)."""
    pending: dict[str, int]
    """Of those, the cells a run would compute (the rest are in the results already)."""
    defenses: list[str]
    attacks: list[str]
    warnings: list[str]
    estimate: Estimate
    """How long each cell a run would compute will take (`privaudit.campaign.estimates`)."""
    reach: list[str]
    """What each canary audit a run would compute can show at its size (`audit_reach`)."""

    def summary(self) -> str:
        """One paragraph: cells per kind, defenses, attacks, what would run."""
        counts = ", ".join(f"{self.cells[kind]} {kind}" for kind in KINDS if self.cells[kind])
        total, left = sum(self.cells.values()), sum(self.pending.values())
        if left == total:
            would = f"a run would compute all {total} (none in {self.out} yet)"
        elif left == 0:
            would = f"all {total} are already in {self.out}: a run would compute none (--force recomputes them)"
        else:
            would = (f"{total - left} are already in {self.out}; a run would compute the other {left} ("
                     + ", ".join(f"{self.pending[kind]} {kind}" for kind in KINDS if self.pending[kind]) + ")")
        attacks = f" Attacks and audits: {'; '.join(self.attacks)}." if self.attacks else " No attack or audit tables."
        return (f"campaign '{self.name}' passes every pre-flight check: {total} cells ({counts}). "
                f"Defenses: {'; '.join(self.defenses)}.{attacks} Of the {total} cells, {would}.")

    def reach_lines(self) -> list[str]:
        """What each canary audit a run would compute can show at its size, one line each."""
        if not self.reach:
            return []
        return (["what each canary audit can show at its size (bounds from its runs and confidence; docs/audits.md):"]
                + [f"  {line}" for line in self.reach])

    def estimate_lines(self) -> list[str]:
        """How long each cell a run would compute will take, one line each, and the total; none
        when a run would compute nothing."""
        if not self.estimate.cells:
            return []
        return (["time of each cell a run would compute, an estimate (costs timed on this machine now):"]
                + [found.line() for found in self.estimate.cells] + [self.estimate.total_line()])


def _pending(jobs: list[TrainingJob | AuditJob | ActiveJob]) -> dict[str, int]:
    pending = dict.fromkeys(KINDS, 0)
    for job in jobs:
        if isinstance(job, AuditJob):
            pending["audit"] += 1
            continue
        if isinstance(job, ActiveJob):
            pending["attack"] += 1
            continue
        pending["training"] += job.train
        pending["attack"] += len(job.attacks)
        pending["membership"] += sum(len(group) for group in job.memberships)
    return pending


def preflight(campaign: Campaign, out: str | Path, force: bool = False, progress: bool = False) -> Preflight:
    """Check `campaign` as `privaudit run --out out [--force]` would before training (ConfigError
    in one line on the first problem) and say what it would run; with `progress`, the checks and
    timings are counted on stderr as a run counts its work."""
    out = Path(out)
    store = ResultsStore(out)
    store.check_layout()
    rows = [] if force else store.read().rows
    finished = {row["cell"] for row in rows}
    warnings: list[str] = []
    checked: dict[str, float] = {}
    started = time.perf_counter()
    with downloads_refused():
        jobs, _ = plan_jobs(campaign, finished, warnings, checked, progress)
        timed = estimate(jobs, checked, time.perf_counter() - started, progress)
    cells, attacks, memberships, audits = expand_all(campaign)
    defenses = [f"{table.name} ({table.kind}" + (f", {table.combinations} runs" if table.combinations > 1 else "")
                + ")" for table in campaign.defense]
    findings = [f"{table.name} ({table.kind} inversion, {table.threat})" for table in campaign.attack]
    findings += [f"{table.name} (membership, {table.target})" for table in campaign.membership]
    findings += [f"{table.name} ({table.kind} audit)" for table in campaign.audit]
    return Preflight(campaign.campaign.name, out,
                     dict(zip(KINDS, (len(cells), len(attacks), len(memberships), len(audits)))),
                     _pending(jobs), defenses, findings,
                     campaign.warnings() + input_changes(cells, rows) + warnings, timed,
                     [line for job in jobs if isinstance(job, AuditJob) and (line := audit_reach(job.cell))])
