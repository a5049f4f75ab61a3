"""privaudit from Python: load a campaign, run it, read its verdicts, audit a mechanism.

The command line is one front end; this module is the other, for a notebook or a script, and it
calls the same pieces (`privaudit run` is `run` plus the terminal table). It sits on top of the
layers, beside the CLI (in the campaign package, whose only module that reads reports it is);
the package re-exports it (`privaudit.run`, `privaudit.load_campaign`, …)
lazily, so importing `privaudit` stays cheap.

    import privaudit
    campaign = privaudit.load_campaign("examples/laplace_gossip.toml", allow_code=True)
    results = privaudit.run(campaign, "results/laplace")
    for verdict in results.verdicts:
        print(verdict.subject, verdict.status, verdict.eps_lb)
    assert not results.failing("refuted")

A defense of your own is a `privaudit.Defense` subclass with its `Params`, `claim` and view
(`examples/laplace_gossip.py`); a campaign names it by import path, which runs its module's code,
so `allow_code=True` is the same consent as the CLI's `--allow-code`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.campaign.config import Campaign, load_campaign as _load_file, parse_campaign
from privaudit.campaign.executors import make_executor
from privaudit.campaign.run import run_campaign
from privaudit.errors import ConfigError
from privaudit.store import ResultsStore
from privaudit.threads import limited
from reports.html import render_report
from reports.summary import summary


@dataclass(frozen=True)
class Verdict:
    """One verdict of the report (`reports.verdicts`): its subject, status (`refuted`,
    `understated`, `consistent`, …), the claimed and sound ε as the report prints them (over
    seeds), the strongest empirical lower bound (a rigorous bound, with the confidence its audit
    states) and the ε estimate of its audit (an estimate, never a bound), and its analytic findings."""

    subject: str
    kind: str
    status: str
    sentence: str
    eps_claimed: str
    eps_sound: str
    eps_lb: float | None
    delta_lb: float | None
    eps_estimate: float | None
    bound: str | None
    findings: tuple[str, ...]

    @classmethod
    def of(cls, record: dict[str, Any]) -> Verdict:
        return cls(record["subject"], record["kind"], record["status"], record["sentence"], record["eps_claimed"],
                   record["eps_sound"], record["eps_lb"], record["delta_lb"], record["eps_estimate"], record["bound"],
                   tuple(record["findings"]))


@dataclass(frozen=True)
class Results:
    """A results folder read back: its rows (`privaudit.rows` checked), its report and verdicts."""

    directory: Path
    report: Path
    rows: tuple[dict[str, Any], ...]
    verdicts: tuple[Verdict, ...]

    def failing(self, *statuses: str) -> list[Verdict]:
        """The verdicts whose status is one of `statuses`, or that carry one as a finding (a refuted
        claim also below the sound accountant fails "understated" too): the privacy gate's test."""
        return [verdict for verdict in self.verdicts
                if verdict.status in statuses or set(verdict.findings) & set(statuses)]


def load_campaign(source: str | Path | dict[str, Any], *, allow_code: bool = False) -> Campaign:
    """A validated campaign from a TOML file or from the dict such a file parses to; ConfigError
    (one line) on the first bad field. `allow_code`: the consent to import the modules the campaign
    lists in `[campaign] imports`."""
    try:
        if isinstance(source, dict):
            return parse_campaign(source, allow_code=allow_code)
        return _load_file(source, allow_code=allow_code)
    except ConfigError as error:
        raise ConfigError(_in_python(str(error))) from None


def _in_python(message: str) -> str:
    """An error worded for the command line, worded for a Python caller: its consent to run a
    campaign's code is the `allow_code=True` keyword, not the `--allow-code` flag."""
    return message.replace("--allow-code", "allow_code=True")


def run(campaign: Campaign | str | Path, out: str | Path, *, allow_code: bool = False, force: bool = False,
        workers: int = 1, progress: bool = False, threads: int | None = None) -> Results:
    """Run every cell of `campaign` (a campaign file, or one from `load_campaign`) not yet in
    `out` (all with `force`) on `workers` local processes, render the report, and return the
    results read back. A campaign file's text is kept beside the rows, as the CLI keeps it.
    `threads`: torch's threads while it runs, as the CLI's `--threads` (default one, or
    OMP_NUM_THREADS; `privaudit.threads`), the caller's own count restored after."""
    if isinstance(campaign, (str, Path)):
        text = Path(campaign).read_text(encoding="utf-8")
        campaign = load_campaign(campaign, allow_code=allow_code)
    elif isinstance(campaign, Campaign):
        text = "# a campaign built in Python (privaudit.campaign.api): no campaign file\n"
    else:
        raise ConfigError("run takes a campaign file or a campaign from privaudit.load_campaign")
    with limited(threads):
        run_campaign(campaign, text, out, force=force, progress=progress, executor=make_executor("local", workers),
                     say=print if progress else _silent)
    return results(out)


def results(directory: str | Path) -> Results:
    """The results folder `directory` read back, its report rendered."""
    report = render_report(directory)
    found = summary(directory)
    return Results(Path(directory), report, tuple(ResultsStore(directory).rows()),
                   tuple(Verdict.of(record) for record in found["verdicts"]))


def audit(mechanism: str, params: dict[str, Any] | None = None, *, claim: Iterable[float] | None = None,
          **options: Any) -> Any:
    """The black-box audit of `mechanism` (`privaudit audit`): with `claim = (ε, δ)`, of the claim
    you state rather than the mechanism's own formula. Options as the command's (adjacency, dim,
    releases, samples, confidence, delta, seed). Returns the audit's report; `.as_dict()` is the
    command's JSON."""
    from attacks.audit.mechanism_audit import audit as mechanism_audit

    stated = tuple(claim) if claim is not None else None
    if stated is not None and len(stated) != 2:
        raise ConfigError("claim is (ε, δ)")
    return mechanism_audit(mechanism, params, claim_eps=None if stated is None else stated[0],
                           claim_delta=None if stated is None else stated[1], **options)


def _silent(_: str) -> None:
    """Say nothing (a script reads the returned results)."""
