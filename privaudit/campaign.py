"""Campaigns: expand a campaign into cells, run each cell, store each result as it finishes.

A cell is one `[[defense]]` table at one seed. Its id is a hash of its normalised configuration
(data, run shape, validated hyperparameters, seed), so the same cell has the same id in every
run of every campaign that contains it, and a re-run skips the cells already in the results.
"""

from __future__ import annotations

import hashlib
import json
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from defenses import DEFENSES
from defenses.base import Defense, DefenseParams, Setup
from privaudit import __version__
from privaudit.config import Campaign, DataConfig, RunConfig, load_campaign, parse_campaign
from privaudit.data import load_dataset, partition
from privaudit.errors import ConfigError
from privaudit.flatmodel import FlatModel
from privaudit.models import build_model, model_task
from privaudit.results import ResultsStore
from privaudit.sampling import LocalData
from privaudit.sim import simulate
from privaudit.synthetic import SYNTHETIC, generate
from privaudit.topology import Topology

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


@dataclass(frozen=True)
class Cell:
    """One run of one defense configuration at one seed."""

    id: str
    index: int
    seed: int
    data: DataConfig
    run: RunConfig
    params: DefenseParams

    @property
    def label(self) -> str:
        return self.run.name

    @property
    def group(self) -> str:
        """The id of the cell's configuration without its seed: the seeds of one run share it."""
        config = {key: value for key, value in self.describe().items() if key != "seed"}
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        """The normalised configuration the id is computed from."""
        run = self.run.model_dump(mode="json", exclude=set(self.run.model_extra or {}))
        return {
            "data": self.data.model_dump(mode="json"),
            "run": run,
            "params": self.params.model_dump(mode="json"),
            "seed": self.seed,
        }


def expand(campaign: Campaign) -> list[Cell]:
    """Every (defense table, grid combination, seed) of the campaign, in file order, then grid
    order, then seed order."""
    cells = []
    for index, table in enumerate(campaign.defense):
        for run in table.variants():
            params = run.params()
            for seed in campaign.campaign.seeds:
                draft = Cell("", index, seed, campaign.data, run, params)
                digest = hashlib.sha256(json.dumps(draft.describe(), sort_keys=True).encode()).hexdigest()
                cells.append(Cell(digest[:16], index, seed, campaign.data, run, params))
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


def run_cell(cell: Cell, progress: bool = False) -> dict[str, Any]:
    """Train the cell's defense and return its results row."""
    defense = build_defense(cell)
    output = simulate(defense, cell.run.rounds, eval_every=cell.run.eval_every, progress=progress,
                      label=f"{cell.label} seed {cell.seed}")
    final = output.history[-1]
    return {
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


def headline(metrics: dict[str, float]) -> str:
    """The one number that says how training went: accuracy, else estimation error, else loss."""
    if "avg_acc" in metrics:
        return f"average-model accuracy {metrics['avg_acc']:.3f}"
    if "avg_error" in metrics:
        return f"average-model estimation error {metrics['avg_error']:.4g}"
    return f"average-model test loss {metrics['avg_loss']:.4g}"


def run_campaign(campaign: Campaign, text: str, out: str | Path, *, force: bool = False,
                 progress: bool = True, say: Callable[[str], None] = print) -> ResultsStore:
    """Run every unfinished cell of `campaign`, appending each row to `out/results.jsonl`.

    All cells are set up once before the first runs, so a bad field in the last defense table
    fails in seconds rather than after an hour; cells already in the results are skipped unless
    `force`.
    """
    store = ResultsStore(out)
    cells = expand(campaign)
    finished = set() if force else store.done()
    pending = [cell for cell in cells if cell.id not in finished]
    for cell in pending:
        build_defense(cell)
    store.write_campaign(text)
    if len(pending) < len(cells):
        say(f"{len(cells) - len(pending)} of {len(cells)} cells already finished in {store.path}; skipping them")
    for number, cell in enumerate(pending, 1):
        start = time.perf_counter()
        row = run_cell(cell, progress=progress)
        store.append(row)
        say(f"[{number}/{len(pending)}] {cell.label} seed {cell.seed}: {headline(row['metrics'])} "
            f"({time.perf_counter() - start:.1f} s)")
    return store
