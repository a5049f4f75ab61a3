"""Limits on the work one command may ask for, checked before anything is expanded or allocated.

A typo (`rounds = 99999999999999999999`, a grid of a million combinations, `--dim 10000000`)
should fail in a second with one line, not run for hours or exhaust memory. Each limit is generous
for real campaigns and can be raised for one command with its environment variable, which the
error names:

    PRIVAUDIT_MAX_CELLS=50000 privaudit run big_sweep.toml

The limits are read when a value is checked (not at import), so a test or a driver can set them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from privaudit.errors import ConfigError


MAX_SEED = 2**32 - 1
"""Seeds are 32-bit: numpy, torch and the seeds derived from a cell's seed all accept them. A
range, not a limit on work: it cannot be raised."""

MAX_NESTING = 32
"""Tables and arrays a campaign may nest inside one another (`[[defense]]`'s table is 2 deep, an
audit's coalition of attackers 4, a grid of model options 6). A range, not a limit on work: a
document nested thousands deep (`model_options.a.a.…`, `[z.z.….z]`) reaches Python's recursion
limit in the TOML parser and in validation, and 50,000 levels made the parser take 3.4 GB, so it
cannot be raised."""


@dataclass(frozen=True)
class Limit:
    """One bound: its environment variable, its default and what it counts."""

    variable: str
    default: int
    counts: str


LIMITS = {
    "cells": Limit("PRIVAUDIT_MAX_CELLS", 10_000, "cells in one campaign (grid combinations × seeds, and the "
                   "attack, membership and audit cells on them)"),
    "rounds": Limit("PRIVAUDIT_MAX_ROUNDS", 1_000_000, "rounds of one training run"),
    "agents": Limit("PRIVAUDIT_MAX_AGENTS", 1_000, "agents of one training run"),
    "runs": Limit("PRIVAUDIT_MAX_RUNS", 100_000, "repetitions in one cell (training runs, reference models, "
                  "canaries, bootstrap resamples, attack restarts)"),
    "parameters": Limit("PRIVAUDIT_MAX_PARAMETERS", 250_000_000, "model parameters over the agents of one run "
                        "(agents × parameters of the model)"),
    "records": Limit("PRIVAUDIT_MAX_RECORDS", 10_000_000, "records of one run (a synthetic problem's agents × "
                     "samples per agent: 4 × 10⁷ took 37 s and 6.5 GB to generate; an attack's batch)"),
    "data_mb": Limit("PRIVAUDIT_MAX_DATA_MB", 4096, "megabytes of a user's own data read for one dataset (an "
                     "image folder's files, an .npz archive's arrays uncompressed, the arrays a loader returns), "
                     "checked before its images are decoded or its arrays loaded"),
    "layers": Limit("PRIVAUDIT_MAX_LAYERS", 1_000, "hidden layers of one model (an MLP's `hidden`: 10⁴ layers "
                    "made check take 26 s, 10⁵ over a minute)"),
    "evaluations": Limit("PRIVAUDIT_MAX_EVALUATIONS", 1_000_000, "loss evaluations (or iterations) of one "
                         "inversion attack (each a few milliseconds: 10⁶ are about an hour)"),
    "pairs": Limit("PRIVAUDIT_MAX_PAIRS", 1_000, "victim–attacker pairs of one position audit (each solves a "
                   "least-squares model of the run at check and again at run time: every victim of a complete "
                   "graph of 40 agents, 1,560 pairs, kept check busy 9 minutes)"),
    "position_work": Limit("PRIVAUDIT_MAX_POSITION_WORK", 100_000, "millions of multiply-adds of one position "
                           "audit's least-squares models (over its victims and attackers, states × updates × the "
                           "smaller of the two: 29,000 took 8 s on 2 cores; a ring of 4 over 3,000 rounds asks "
                           "972,000 per attacker), solved at check and again at run time"),
    "samples": Limit("PRIVAUDIT_MAX_SAMPLES", 100_000_000, "values a mechanism audit samples per input "
                     "(dim × releases × samples)"),
    "memory": Limit("PRIVAUDIT_MAX_MEMORY_MB", 8192, "megabytes of the largest tensor one run forms (agents × "
                    "batch × model parameters × 4 bytes: a clipping defense's per-sample gradients; an MLP of 60 "
                    "layers of 1000 under DP-D-PSGD at batch 32 asked for 32.6 GB) or one inversion attack keeps "
                    "(its L-BFGS pairs, history_size × restarts × batch × image: 100,000 restarts asked for 24 GB)"),
    "workers": Limit("PRIVAUDIT_MAX_WORKERS", len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else os.cpu_count() or 1, "local worker processes (this machine's cores: each worker runs "
                     "one thread, and more than the cores only share them; 12 workers on 2 cores ran 4× slower "
                     "than one and used 8.2 GB)"),
    "compositions": Limit("PRIVAUDIT_MAX_COMPOSITIONS", 10_000_000, "events a claim's accountant composes (rounds "
                          "× steps per round; 10⁷ take a PLD 1.7 s and 0.3 GB, 10⁸ 10 s and 1.7 GB)"),
    "steps": Limit("PRIVAUDIT_MAX_STEPS", 10_000, "steps one mechanism composes or schedules (LT-ADMM-DP's "
                   "local steps τ, the Wang & Zhang iteration k; the accountants' arrays grow with them: "
                   "τ = 1e9 asked for 16 GB)"),
    "drawn_agents": Limit("PRIVAUDIT_MAX_DRAWN_AGENTS", 100, "agents of a position audit's graph the report draws "
                          "(the layout's time and memory grow with their square: 1,000 agents took 18 s, 10,000 ran "
                          "out of memory at 5.6 GB); a larger graph is named, not drawn"),
    "shown_pairs": Limit("PRIVAUDIT_MAX_SHOWN_PAIRS", 2_000, "pairs of one position audit the report plots and "
                         "lists (victims = \"all\" on 1,000 agents holds 999,000; 999 pairs took 9 s to plot): the "
                         "strongest at each distance, then the strongest of the rest; the page says how many it "
                         "leaves to the rows"),
}


MIN_FPR = 1e-9
"""The smallest false-positive rate a membership table may ask for: a TPR at rate r needs 1/r
non-members (`privaudit.reports.membership.needed_non_members`), and 10⁹ is past the `records` limit."""


def limit(name: str) -> int:
    """The current bound `name`: its environment variable when set, else its default; a
    ConfigError when the variable is not a whole number >= 1."""
    entry = LIMITS[name]
    text = os.environ.get(entry.variable, "").strip()
    if not text:
        return entry.default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        shown = text if len(text) <= 40 else f"{text[:40]}… ({len(text):,} characters)"
        raise ConfigError(f"{entry.variable}: expected a whole number >= 1, got {shown!r}")
    return value


def exceeded(name: str, value: int) -> str | None:
    """The one-line reason `value` is over the bound `name` (saying how to raise it), or None."""
    bound = limit(name)
    if value <= bound:
        return None
    entry = LIMITS[name]
    return (f"{value:,} exceeds the limit of {bound:,} {entry.counts}; set {entry.variable}={value} to run it "
            "anyway")


def within(name: str):
    """A pydantic after-validator: the value itself, or a ValueError when it is over the bound."""

    def check(value: int | None) -> int | None:
        reason = None if value is None else exceeded(name, value)
        if reason:
            raise ValueError(reason)
        return value

    return check


def require(name: str, value: int, what: str) -> None:
    """ConfigError `what: <reason>` when `value` is over the bound `name`."""
    reason = exceeded(name, value)
    if reason:
        raise ConfigError(f"{what}: {reason}")
