"""Cells: the units a campaign runs, their ids, and the set-up each one trains on.

A training cell is one run of a `[[defense]]` table (one grid combination) at one seed; an
attack cell is one `[[attack]]` table on one training cell at one attacked round; a membership
cell likewise for a `[[membership]]` table; an audit cell is one `[[audit]]` table at one seed
(a canary or reconstruction audit on one training cell). A cell's id is a hash of its normalised
configuration (data, run shape, validated hyperparameters, seed, and for a finding its table and round), so
the same cell has the same id in every run of every campaign that contains it, and a re-run
skips the cells already in the results. The cells of a defense written outside privaudit also
hash the source of its modules (`privaudit.defenses.external.plugin_code`), so editing them reruns
those cells (`input_changes` says so); a shipped defense's cells hash no code, and keep their ids.
A user's own data is pinned to its content when the cells are planned (`DataConfig.pinned`): its
source and SHA-256 are part of the data's dump, so an edited image folder gives new cells too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.func import grad, vmap

from privaudit import devices
from privaudit.defenses.base import Defense, DefenseParams
from privaudit.defenses.external import SHIPPED, checked_claim, plugin_code
from privaudit.accounting import Claim
from privaudit.campaign.config import AttackConfig, AuditConfig, Campaign, DataConfig, MembershipConfig, RunConfig
from privaudit.data import partition
from privaudit.errors import ConfigError, DataError
from privaudit.limits import require
from privaudit.flatmodel import FlatModel
from privaudit.models import CHECK_BATCH, MODELS, build_model, build_user_model, error_line, model_task
from privaudit.sampling import LocalData
from privaudit.setup import Setup
from privaudit.synthetic import SYNTHETIC, generate
from privaudit.topology import Topology


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
    code: tuple[tuple[str, str], ...] = ()
    """The modules of a defense written outside privaudit, with the digests of their source
    (`plugin_code`); empty for a shipped defense."""

    @property
    def label(self) -> str:
        return self.run.name

    @property
    def where(self) -> str:
        return f"defense[{self.index}] ({self.label}, seed {self.seed})"

    @property
    def group(self) -> str:
        """The id of the cell's configuration without its seed: the seeds of one run share it."""
        config = {key: value for key, value in self.describe().items() if key != "seed"}
        return _digest(config)

    def describe(self) -> dict[str, Any]:
        """The normalised configuration the id is computed from."""
        run = self.run.model_dump(mode="json", exclude=set(self.run.model_extra or {}) | {"data"})
        described = {
            "data": self.data.model_dump(mode="json"),
            "run": run,
            "params": self.params.model_dump(mode="json"),
            "seed": self.seed,
        }
        return described | ({"code": dict(self.code)} if self.code else {})


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
        at = self.table.held if self.round is None else f"round {self.round}"
        return f"membership[{self.index}] ({self.label} on {self.training.label}, seed {self.training.seed}, {at})"


@dataclass(frozen=True)
class AuditCell:
    """One `[[audit]]` table at one seed: a mechanism audit (no training cell), or a canary or
    reconstruction audit of one training cell (its configuration and seed; the audit trains its own
    runs)."""

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


def _distinct(cells: list[Any]) -> list[Any]:
    """`cells`, or a ConfigError naming two that are one cell (the same configuration: a table
    repeated, or grid values that normalise alike, such as 1 and 1.0). Refused rather than
    merged: the repeat is a mistake in the file, and the user should see it."""
    first: dict[str, Any] = {}
    for cell in cells:
        if cell.id in first:
            raise ConfigError(f"{cell.where}: the same cell as {first[cell.id].where} (a repeated table or grid "
                              "value); remove the repeat")
        first[cell.id] = cell
    return cells


def expand_audits(campaign: Campaign, cells: list[Cell]) -> list[AuditCell]:
    """Every (mechanism audit table, seed) and (canary or reconstruction audit table, training
    cell it targets), in file order."""
    found = []
    for index, table in enumerate(campaign.audit):
        targets = set(campaign.audit_targets(index))
        if table.kind == "mechanism":
            drafts = [AuditCell("", index, table, seed, None) for seed in campaign.campaign.seeds]
        else:
            drafts = [AuditCell("", index, table, cell.seed, cell) for cell in cells if cell.index in targets]
        found += [dataclasses.replace(draft, id=_digest(draft.describe())) for draft in drafts]
    return _distinct(found)


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
    return _distinct(found)


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
    return _distinct(found)


def expand(campaign: Campaign) -> list[Cell]:
    """Every (defense table, grid combination, seed) of the campaign, in file order, then grid
    order, then seed order."""
    cells = []
    for index, table in enumerate(campaign.defense):
        data = campaign.data_for(index).pinned()
        for run in table.variants():
            params = run.params()
            values = run.model_dump() | (run.model_extra or {})
            setting = {"topology": run.topology, "agents": run.agents} | {key: values[key] for key in table.grid}
            code = tuple(plugin_code(run.defense(), campaign.campaign.imports, _model_modules(run)).items())
            for seed in campaign.campaign.seeds:
                draft = Cell("", index, seed, data, run, params, code=code)
                cells.append(Cell(_digest(draft.describe()), index, seed, data, run, params,
                                  table.name, setting, code))
    return _distinct(cells)


def _model_modules(run: RunConfig) -> tuple[str, ...]:
    """The module of the factory a run's model comes from when it is not privaudit's (none for a
    shipped name or a torchvision architecture): its source is part of the cells' identity."""
    factory = run.model_factory()
    module = None if factory is None else getattr(factory, "__module__", None)
    return (module,) if isinstance(module, str) else ()


def input_changes(cells: list[Cell], rows: list[dict[str, Any]]) -> list[str]:
    """One line per plugin module whose source, or user dataset whose content, changed since
    finished cells used it: the finished training rows whose configuration is a cell's of `cells`
    in all but the code (`Cell.code`) and the data's content hash, and the finding rows on them,
    are computed again under the cells' new ids. Rows written before privaudit hashed a module's
    source record none, and are said apart."""
    current = {_digest(_unpinned(cell.describe())): cell for cell in cells
               if cell.code or _content(cell.describe())}
    stale: dict[str, tuple[str | None, ...]] = {}
    for row in rows:
        config = row.get("config")
        if row.get("type") != "training" or not isinstance(config, dict):
            continue
        cell = current.get(_digest(_unpinned(config)))
        if cell is not None and row.get("cell") != cell.id:
            stale[row["cell"]] = _changed(cell.describe(), config)
    counts: dict[str | None, int] = {}
    for row in rows:
        training = row.get("cell") if row.get("type") == "training" else row.get("training")
        for what in stale.get(training, ()):
            counts[what] = counts.get(what, 0) + 1
    return [(f"{what} changed since {count} finished cells: they run again" if what is not None
             else f"{count} finished cells of a plugin record no hash of its source (computed before privaudit "
                  "hashed it): they run again") for what, count in counts.items()]


def _changed(described: dict[str, Any], recorded: dict[str, Any]) -> tuple[str | None, ...]:
    """What differs between a cell's configuration and a row's, in words: the plugin modules
    edited ("plugin module m"; None when the row records no hash of them) and the dataset whose
    content changed ("data <source>")."""
    found: list[str | None] = []
    code, kept = described.get("code") or {}, recorded.get("code")
    if code and not isinstance(kept, dict):
        found.append(None)
    elif code or kept:
        modules = _edited(dict(code), kept)
        if modules:
            found.append(f"plugin module {', '.join(modules)}")
    content = _content(described)
    if content is not None and content != _content(recorded):
        found.append(f"data {content.get('source', '?')}")
    return tuple(found)


def _content(described: dict[str, Any]) -> dict[str, Any] | None:
    """The content record of a configuration's user dataset (`[data]`'s `content`), or None."""
    data = described.get("data")
    content = data.get("content") if isinstance(data, dict) else None
    return content if isinstance(content, dict) else None


def _edited(code: dict[str, str], recorded: dict[str, Any]) -> tuple[str, ...]:
    """The modules whose digest in `code` is not the one `recorded` (a row's), or that only one holds."""
    return tuple(sorted(name for name in {*code, *recorded} if code.get(name) != recorded.get(name)))


def _unpinned(described: dict[str, Any]) -> dict[str, Any]:
    """A training cell's configuration without what pins it to its inputs' contents: its code
    (`Cell.describe`) and its user dataset's content hash."""
    found = {key: value for key, value in described.items() if key != "code"}
    if isinstance(found.get("data"), dict):
        found["data"] = {key: value for key, value in found["data"].items() if key != "content"}
    return found


def expand_all(campaign: Campaign) -> tuple[list[Cell], list[AttackCell], list[MembershipCell], list[AuditCell]]:
    """Every cell of the campaign: training, attack, membership and audit cells, each kind
    refused when two are one (`_distinct`), so every command refuses the same campaigns."""
    cells = expand(campaign)
    return (cells, expand_attacks(campaign, cells), expand_membership(campaign, cells),
            expand_audits(campaign, cells))


def build_setup(cell: Cell) -> Setup:
    """Data, partition, topology, model and random stream of a cell; every failure is a
    ConfigError naming the cell (a dataset that cannot be loaded too: its `data_root` is the
    campaign's field, so the error names the cell, and the command the file)."""
    run, data_cfg = cell.run, cell.data
    where = cell.where
    try:
        if data_cfg.dataset in SYNTHETIC:
            data = generate(data_cfg.dataset, run.agents, samples_per_agent=data_cfg.samples_per_agent,
                            seed=cell.seed)
            shards = [np.flatnonzero(data.owners == agent) for agent in range(run.agents)]
        else:
            data = data_cfg.load()
            shards = partition(data.y_train.numpy(), run.agents, data_cfg.partition, seed=cell.seed,
                               alpha=data_cfg.alpha, min_size=data_cfg.min_size,
                               shards_per_agent=data_cfg.shards_per_agent)
        topology = Topology.build(run.topology, run.agents, run.mixing, seed=cell.seed, edge_prob=run.edge_prob)
        _check_model_size(cell, data.shape, data.num_classes)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cell.seed)
            module = _build_run_model(run, data.shape, data.num_classes)
        if model_task(module) != data.task:
            raise ValueError(f"model '{run.model}' is for {model_task(module)}, dataset '{data.name}' is a "
                             f"{data.task} problem")
        model = FlatModel(module)
        if run.model not in MODELS:
            _check_per_sample_gradients(run.model, model, data.x_train[:CHECK_BATCH], data.y_train[:CHECK_BATCH])
    except (TypeError, ValueError, DataError) as error:
        raise ConfigError(f"{where}: {error}") from None
    return Setup(
        topology=topology,
        model=model,
        model_name=run.model,
        data=data,
        local=LocalData(data.x_train, data.y_train, shards),
        generator=torch.Generator().manual_seed(cell.seed),
        seed=cell.seed,
    )


def _build_run_model(run: RunConfig, shape: tuple[int, ...], classes: int) -> torch.nn.Module:
    """The run's model: a shipped or torchvision one by name, or the one its factory builds
    (`privaudit.models.build_user_model`)."""
    factory = run.model_factory()
    if factory is None:
        return build_model(run.model, shape, classes, **run.model_options)
    return build_user_model(factory, run.model, shape, classes, **run.model_options)


def _check_per_sample_gradients(name: str, model: FlatModel, x: torch.Tensor, y: torch.Tensor) -> None:
    """ValueError naming the model when per-sample gradients (`torch.func.vmap` over `grad`, what
    every clipping defense and every inversion computes) cannot be taken of a model privaudit did
    not write: a forward pass that reads a tensor's value (`.item()`), branches on data or writes
    into its input works on a batch and fails only here, so it is refused at `check`, not
    mid-run. It is taken on the first two training records of `x`, `y` with vmap itself, whatever
    path `privaudit.grads` takes on this device (a large model on the CPU loops over samples, and
    would hide what fails on a GPU or in an inversion's replay)."""
    try:
        vmap(grad(model.sample_loss), in_dims=(None, 0, 0))(model.initial(), x[:2], y[:2])
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the model may be a user's: one line
        raise ValueError(f"model '{name}': per-sample gradients (torch.func.vmap over torch.func.grad) fail on it: "
                         f"{error_line(error)}") from None


def _check_model_size(cell: Cell, shape: tuple[int, ...], classes: int) -> None:
    """ConfigError when the agents' models (agents × parameters) are over the `parameters` limit,
    or the per-sample gradients of a batch (agents × batch × parameters × 4 bytes, what a clipping
    defense forms) over the `memory` limit: the model is built on the meta device first, which
    allocates nothing, so `model_options = { hidden = [100000000] }` is refused in a second
    instead of exhausting memory. A user's factory that cannot build or run on the meta device
    (its code reads a value: `.item()`, a tensor made from data) is built on the CPU instead, so
    its size is checked once it is allocated; an error of its own is then the CPU build's."""
    try:
        with torch.device("meta"):
            probe = _build_run_model(cell.run, shape, classes)
    except ValueError:
        if cell.run.model_factory() is None:
            raise
        with torch.random.fork_rng(devices=[]):
            probe = _build_run_model(cell.run, shape, classes)
    size = sum(parameter.numel() for parameter in probe.parameters())
    require("parameters", cell.run.agents * size,
            f"{cell.where}: agents × model parameters = {cell.run.agents:,} × {size:,}")
    batch = getattr(cell.params, "batch_size", None)
    if isinstance(batch, int):
        megabytes = math.ceil(cell.run.agents * batch * size * 4 / 2**20)
        require("memory", megabytes, f"{cell.where}: per-sample gradients of agents × batch × model parameters = "
                f"{cell.run.agents:,} × {batch:,} × {size:,} × 4 bytes = {megabytes:,} MB")


def build_defense(cell: Cell, device: torch.device | None = None) -> Defense:
    """The cell's defense on its set-up, moved to `device` (None: the CPU) with every tensor its
    constructor makes (`privaudit.devices`); a ConfigError naming the cell when it cannot be built
    (a defense written outside privaudit whose constructor raises anything is reported the same
    way: its code is not ours to trace)."""
    device = device or torch.device("cpu")
    try:
        setup = build_setup(cell).to(device)
        with devices.on(device):
            return cell.run.defense()(cell.params, setup)
    except ValueError as error:
        raise ConfigError(f"{cell.where}: {error}") from None
    except Exception as error:  # noqa: BLE001 - see the docstring
        if shipped(cell.run.kind):
            raise
        raise ConfigError(f"{cell.where}: building defense '{cell.run.kind}' failed: {type(error).__name__}: "
                          f"{error}") from None


def shipped(kind: str) -> bool:
    """Whether the defense `kind` ships with privaudit (else its code was written elsewhere)."""
    return kind in SHIPPED


def cell_claim(cell: Cell, defense: Defense) -> Claim:
    """The defense's claim for the cell's run, checked (`privaudit.defenses.external.checked_claim`); a
    parameter beyond what its accountant evaluates (noise_multiplier = 1e-300 overflows the RDP
    accountant), and a defense written elsewhere whose `claim` raises or returns no usable Claim,
    are a one-line ConfigError naming the cell, not a traceback or a claim of δ = 2 in the report."""
    try:
        return checked_claim(defense, cell.run.rounds)
    except (OverflowError, ZeroDivisionError, FloatingPointError) as error:
        raise ConfigError(f"{cell.where}: its claim cannot be computed ({error or type(error).__name__}): a parameter "
                          "is beyond what the accountant evaluates") from None
    except ValueError as error:
        raise ConfigError(f"{cell.where}: {error}") from None


def claims(campaign: Campaign) -> list[dict[str, Any]]:
    """The claim of every run of the campaign (one per table and grid combination, at the first
    seed: a claim depends on the run's parameters, not on its random draws), without training."""
    rows = []
    seen: set[tuple[int, str]] = set()
    for cell in expand_all(campaign)[0]:
        if (cell.index, cell.label) in seen:
            continue
        seen.add((cell.index, cell.label))
        rows.append({"label": cell.label, **cell_claim(cell, build_defense(cell)).as_dict()})
    return rows
