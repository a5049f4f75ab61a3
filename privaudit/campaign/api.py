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

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from privaudit.campaign.config import Campaign, load_campaign as _load_file, parse_campaign
from privaudit.campaign.executors import make_executor
from privaudit.campaign.run import run_campaign
from privaudit.errors import ConfigError, printable
from privaudit.store import ResultsStore
from privaudit.threads import limited
from privaudit.reports.html import render_report
from privaudit.reports.summary import summary
from privaudit.reports.verdicts import MEANINGS


@dataclass(frozen=True)
class Verdict:
    """One verdict of the report (`privaudit.reports.verdicts`): its subject, status (`refuted`,
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
    """A results folder read back: its rows (`privaudit.rows` checked), its report and verdicts,
    and `unreadable`: the line saying which lines of its results could not be read (None when all
    were). A gate written in Python fails on it too, as `--fail-on` does: a verdict may be there."""

    directory: Path
    report: Path
    rows: tuple[dict[str, Any], ...]
    verdicts: tuple[Verdict, ...]
    unreadable: str | None = None

    def failing(self, *statuses: str) -> list[Verdict]:
        """The verdicts whose status is one of `statuses`, or that carry one as a finding (a refuted
        claim also below the sound accountant fails "understated" too): the privacy gate's test.
        ConfigError for no status or one no verdict has (a typo would otherwise pass every run,
        as `--fail-on` refuses one)."""
        if not statuses:
            raise ConfigError(f"failing: name the statuses that fail ({', '.join(MEANINGS)})")
        unknown = next((status for status in statuses if not isinstance(status, str) or status not in MEANINGS), None)
        if unknown is not None:
            raise ConfigError(f"failing: unknown verdict status {unknown!r} (choose from {', '.join(MEANINGS)})"[:300])
        return [verdict for verdict in self.verdicts
                if verdict.status in statuses or set(verdict.findings) & set(statuses)]


def load_campaign(source: str | Path | Mapping[str, Any], *, allow_code: bool = False) -> Campaign:
    """A validated campaign from a TOML file or from the dict such a file parses to (copied as
    plain data first: `privaudit.campaign.document.plain`); ConfigError (one line) on the first bad
    field. `allow_code`: the consent to import the modules the campaign lists in
    `[campaign] imports`."""
    try:
        _switch("allow_code", allow_code)
        if isinstance(source, Mapping):
            return parse_campaign(source, allow_code=allow_code)
        if not isinstance(source, (str, Path)):
            raise ConfigError(f"load_campaign takes a campaign file's path or a campaign dict, got a "
                              f"{type(source).__name__}")
        return _load_file(_path("the campaign file", source), allow_code=allow_code)
    except ConfigError as error:
        raise ConfigError(_in_python(str(error))) from None


def _in_python(message: str) -> str:
    """An error worded for the command line, worded for a Python caller: its consent to run a
    campaign's code is the `allow_code=True` keyword, not the `--allow-code` flag."""
    return message.replace("--allow-code", "allow_code=True")


def run(campaign: Campaign | str | Path, out: str | Path | None = None, *, allow_code: bool = False,
        force: bool = False, workers: int = 1, progress: bool = False, threads: int | None = None) -> Results:
    """Run every cell of `campaign` (a campaign file, or one from `load_campaign`) not yet in
    `out` (all with `force`) on `workers` local processes, render the report, and return the
    results read back. `out` defaults to `results/<campaign name>`, as the command line's (an
    empty string too). The campaign's text is kept beside the rows, as the CLI keeps it: the file's
    own, or the TOML of a campaign given as a dict (`Campaign.text`). `threads`: torch's threads
    while it runs, as the CLI's `--threads` (default one, or OMP_NUM_THREADS; `privaudit.threads`),
    the caller's own count restored after."""
    _whole("workers", workers, 1)
    if threads is not None:
        _whole("threads", threads, 0)
    for name, value in (("allow_code", allow_code), ("force", force), ("progress", progress)):
        _switch(name, value)
    if isinstance(campaign, (str, Path)):
        campaign = load_campaign(campaign, allow_code=allow_code)
    elif not isinstance(campaign, Campaign):
        raise ConfigError("run takes a campaign file or a campaign from privaudit.load_campaign")
    folder = _path("out", out) if out else Path("results") / campaign.campaign.name
    with limited(threads):
        run_campaign(campaign, campaign.text, folder, force=force, progress=progress,
                     executor=make_executor("local", workers), say=print if progress else _silent)
    return results(folder)


def _whole(name: str, value: Any, least: int) -> None:
    """ConfigError unless `value` is a whole number (not a bool) of at least `least`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{name}: expected a whole number >= {least}, got {value!r}")


def _switch(name: str, value: Any) -> None:
    """ConfigError unless `value` is True or False: `allow_code="false"` is truthy text, and a
    consent to run code is given by True alone."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name}: expected True or False, got {value!r}"[:200])


def _path(name: str, value: Any) -> Path:
    """`value` as a path; ConfigError unless it is a str or Path without a NUL character."""
    if not isinstance(value, (str, Path)):
        raise ConfigError(f"{name}: a path, got a {type(value).__name__}")
    if "\0" in str(value):
        raise ConfigError(f"{name}: a path holding a NUL character: {printable(str(value))}")
    return Path(value)


def results(directory: str | Path) -> Results:
    """The results folder `directory` read back, its report rendered."""
    directory = _path("results folder", directory)
    report = render_report(directory)
    found = summary(directory)
    return Results(Path(directory), report, tuple(ResultsStore(directory).rows()),
                   tuple(Verdict.of(record) for record in found["verdicts"]), found["unreadable"])


class _AuditOptions(BaseModel):
    """The options of `audit`, as strict as the command line's: whole numbers are whole, numbers
    are not text or booleans."""

    model_config = ConfigDict(extra="forbid", strict=True)
    adjacency: str = "l1"
    dim: int = Field(1, ge=1)
    releases: int = Field(1, ge=1)
    samples: int | None = Field(None, ge=100)
    confidence: float = Field(0.95, gt=0, lt=1)
    delta: float = Field(1e-5, ge=0, lt=1)
    seed: int = Field(0, ge=0)


def audit(mechanism: str, params: dict[str, Any] | None = None, *, claim: Iterable[float] | None = None,
          **options: Any) -> Any:
    """The black-box audit of `mechanism` (`privaudit audit`): with `claim = (ε, δ)`, of the claim
    you state rather than the mechanism's own formula. Options as the command's (adjacency, dim,
    releases, samples, confidence, delta, seed); ConfigError (one line) naming a bad one. Returns
    the audit's report; `.as_dict()` is the command's JSON."""
    from privaudit.attacks.audit.mechanism_audit import audit as mechanism_audit

    try:
        checked = _AuditOptions.model_validate(options)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"audit option {where}: {first['msg']} (got {first.get('input')!r})"[:300]) from None
    stated = _stated(claim)
    return mechanism_audit(mechanism, params, claim_eps=None if stated is None else stated[0],
                           claim_delta=None if stated is None else stated[1], **checked.model_dump())


def _stated(claim: Iterable[float] | None) -> tuple[float, float] | None:
    """The claim (ε, δ) a caller states, as two finite numbers; ConfigError otherwise."""
    if claim is None:
        return None
    stated = tuple(claim) if isinstance(claim, Iterable) and not isinstance(claim, (str, bytes)) else ()
    if len(stated) != 2 or not all(isinstance(value, (int, float)) and not isinstance(value, bool)
                                   and math.isfinite(value) for value in stated):
        raise ConfigError(f"claim is (ε, δ): two finite numbers, got {claim!r}"[:200])
    return float(stated[0]), float(stated[1])


def _silent(_: str) -> None:
    """Say nothing (a script reads the returned results)."""
