"""Running a campaign: plan its jobs, hand them to an executor, append each row as it arrives.

The driver — this module, in the process the user started — is the only writer of
results.jsonl; the jobs (`privaudit.campaign.jobs`) run wherever the executor puts them
(`privaudit.campaign.executors`: this process, local worker processes, Ray) and write only their
artifacts.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from privaudit.campaign.cells import expand, input_changes
from privaudit.campaign.config import Campaign
from privaudit.campaign.executors import Executor, InProcess
from privaudit.campaign.jobs import Job, plan_jobs, run_job
from privaudit.errors import printable
from privaudit.store import ResultsStore


def run_campaign(campaign: Campaign, text: str, out: str | Path, *, force: bool = False,
                 progress: bool = True, say: Callable[[str], None] = print,
                 executor: Executor | None = None) -> ResultsStore:
    """Run every unfinished cell of `campaign` on `executor` (default: one after another in
    this process), appending each row to `out/results.jsonl` as it arrives.

    The results folder is locked for the whole run (`ResultsStore.lock`): a second run on it at
    the same time is refused with a one-line error rather than computing every cell again, and a
folder not laid out as a run leaves it (a planted link, a folder where the report goes:
`ResultsStore.check_layout`) before anything runs. All
    jobs are checked before the first runs; cells already in the results are skipped unless
    `force`, and lines of the results that cannot be read are named. The attack and membership
    cells of one training cell share its run: it is trained once with all their taps listening
    (again, with the same seed and so the same messages, when only attacks are left). The
    membership cells of one table on one training cell share their reference models. With
    `progress`, a bar counts the cells (and, in this process, a bar counts each training run's
    rounds). Each finished cell's line is `printable`: it may quote a failure's message, which a
    defense's own code wrote.
    """
    executor = executor or InProcess()
    store = ResultsStore(out)
    with store.lock():
        store.check_layout()
        reading = store.read()
        if reading.skipped:
            say(f"warning: {reading.summary()}; their cells run again")
        if not force:
            for line in input_changes(expand(campaign), reading.rows):
                say(line)
        warnings: list[str] = []
        jobs, total = plan_jobs(campaign, set() if force else {row["cell"] for row in reading.rows}, warnings)
        for warning in warnings:
            say(f"warning: {warning}")
        kept = store.write_campaign(text)
        if kept is not None:
            say(f"warning: {store.directory} held another campaign's file; it is kept as {kept} beside its rows")
        _run_jobs(jobs, total, store, executor, progress, say)
    return store


def _run_jobs(jobs: list[Job], total: int, store: ResultsStore, executor: Executor, progress: bool,
              say: Callable[[str], None]) -> None:
    """Hand the jobs to the executor and append each row as it arrives."""
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
                say(f"[{number}/{left}] {printable(done.message)}")
