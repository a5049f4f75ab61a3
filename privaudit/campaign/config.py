"""Campaign files: TOML, validated with pydantic, every error reported on one line by field path.

A campaign names the data, the seeds, `[[defense]]` tables and `[[attack]]` tables. A defense
table holds the run's shape (topology, agents, mixing, model, rounds) and the defense's own
hyperparameters, which its `Params` model validates, and may vary any of them over a `grid` (one
run per combination):

    grid = { topology = ["ring", "complete"], agents = [10, 20] }

A typo in any field is caught before anything runs:

    defense[0].topology: unknown topology 'rng' (choose from ring, line, ...)
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import re
import sys
import tomllib
import unicodedata
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, SerializerFunctionWrapHandler,
                      TypeAdapter, ValidationError, ValidationInfo, field_validator, model_serializer, model_validator)

from privaudit.attacks.active.threat import override_refusal
from privaudit.attacks.active.trial import ACTIVE_ATTACKS
from privaudit.attacks.audit.canaries import CANARY_KINDS
from privaudit.attacks.audit.mechanism_audit import check_size
from privaudit.attacks.audit.mechanisms import MECHANISMS, NORMS
from privaudit.attacks.inversion import INVERSIONS
from privaudit.attacks.membership.scores import RMIA_SCORES
from privaudit.attacks.views import CHANNELS, DYNAMICS, EXTRACTORS, MODEL_VIEWS, STEERINGS
from privaudit.defenses import DEFENSES
from privaudit.defenses.base import Defense, DefenseParams
from privaudit.defenses.external import (NO_CONSENT, Consent, load_attribute, load_entry_point, load_path, origin,
                                         resolve)
from privaudit.campaign.document import NotACampaignValue, plain, strictly, too_deep, toml_text
from privaudit.data import DATASETS, PARTITIONS, USER_DATA, Content, Dataset, data_content, is_loader, load_dataset
from privaudit.errors import UNSAFE, ConfigError, DataError, PrivauditError, escaped, unsafe_character
from privaudit.files import CAMPAIGN_BYTES, read_regular
from privaudit.limits import MAX_NESTING, MAX_SEED, MIN_FPR, exceeded, within
from privaudit.models import MODELS, TORCHVISION, check_torchvision
from privaudit.synthetic import SYNTHETIC
from privaudit.threats import ACTIVE_THREATS, RELEASED_THREATS, THREATS
from privaudit.topology import MIXING_RULES, TOPOLOGIES


def _choice(value: str, options, what: str) -> str:
    if value not in options:
        raise ValueError(f"unknown {what} '{value}' (choose from {', '.join(options)})")
    return value


def _first_repeat(values: list[Any]) -> Any | None:
    """The first value that appears twice in `values`, or None. Values are compared as JSON with
    whole floats read as integers (8 and 8.0 validate to the same agents), so lists and tables
    count too."""
    seen: set[str] = set()
    for value in values:
        key = json.dumps(_canonical(value), sort_keys=True, default=str)
        if key in seen:
            return value
        seen.add(key)
    return None


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    return value


class _Kinds:
    """Several registries read as one set of names, in order (every attack kind an `[[attack]]`
    table may name: the inversions, then the active attacks), read when a value is checked."""

    def __init__(self, *registries: dict[str, Any]) -> None:
        self.registries = registries

    def __contains__(self, name: object) -> bool:
        return any(name in registry for registry in self.registries)

    def __iter__(self):
        return iter([name for registry in self.registries for name in registry])

    def __getitem__(self, name: str) -> Any:
        return next(registry[name] for registry in self.registries if name in registry)


ATTACK_KINDS = _Kinds(INVERSIONS, ACTIVE_ATTACKS)
"""Every kind an `[[attack]]` table may name: a passive inversion or an active attack."""


def one_of(options, what: str) -> Any:
    """A string field that must be one of `options` (`unknown <what> 'x' (choose from …)`); a
    registry dict is read when a value is checked, so later registrations count."""
    return Annotated[str, AfterValidator(lambda value: _choice(value, options, what))]


_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MAX_LABEL = 200
"""Characters a label may hold. A label is a table's name, read at a glance in the run's table (which
shows 44 of them), a figure's legend (120) and the report's headings (all): a long descriptive one
is about 60, and 200 leaves room for any a reader would type. A label of 300,000 characters
passed before, and the report's figures took minutes and gigabytes on it (issue 35). A grid
variant's label (`label (key=value, …)`) is built from the table's and may be longer."""
_GRID_VARIANT = "grid variant"
"""The validation context under which `RunConfig.variants` builds a grid variant's label."""


def _printable(value: str | None, allowed: str = "") -> str | None:
    """A text the suite prints (a label, a description) without a character that a terminal or a
    page would not show as itself (`privaudit.errors.UNSAFE`: controls, bidi overrides, zero-width
    and unassigned characters): an escape sequence in a label would reach the terminal raw and
    could rewrite what it shows, a bidi override would reorder it, a zero-width space would make
    two labels that print alike name different tables."""
    found = None if value is None else unsafe_character(value, allowed)
    if found is not None:
        name = unicodedata.name(found, "")
        raise ValueError(f"contains the {UNSAFE[unicodedata.category(found)]} '{escaped(found)}'"
                         f"{f' ({name})' if name else ''}: labels and descriptions are printed text")
    return value


def _label(value: str | None, info: ValidationInfo) -> str | None:
    """A label as tables are named and matched: printed text (`_printable`), not blank (it names
    the table in place of its kind, and `defense = ["…"]` refers to it), at most `MAX_LABEL`
    characters, in Unicode's composed form (NFC), so a label typed as "é" and one typed as "e" and
    a combining accent, which print alike, are one label."""
    if value is None:
        return None
    if not value.strip():
        raise ValueError(f"{value!r} is blank: a label names the table; remove it to name the table by its kind")
    value = unicodedata.normalize("NFC", _printable(value))
    if len(value) > MAX_LABEL and not (info.context or {}).get(_GRID_VARIANT):
        raise ValueError(f"is {len(value):,} characters long; a label is a name of at most {MAX_LABEL} characters")
    return value


Label = Annotated[str | None, AfterValidator(_label), Field(description=(
    f"the table's name in the report and in other tables' defense = [...] (default: one made from its kind): "
    f"printed text of at most {MAX_LABEL} characters, without control or invisible characters"))]
"""A table's label: printed text, one line, at most `MAX_LABEL` characters, in NFC."""
LabelReference = Annotated[str, AfterValidator(lambda value: unicodedata.normalize("NFC", value))]
"""A label as another table's `defense = [...]` names it, in NFC like the labels it is matched with."""


class CampaignInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "campaign"
    description: Annotated[str, AfterValidator(lambda value: _printable(value, "\n\t"))] = ""
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] = Field(default_factory=lambda: [0], min_length=1)
    imports: list[str] = Field(default_factory=list, description="the modules this campaign's defenses and "
                               "models are imported from (kind = 'module:Class', model = 'module:factory'): their "
                               "code runs, so the campaign says so and the command needs --allow-code")

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        """The name is the default results folder (`results/<name>`): one plain folder name, so a
        campaign file cannot make a run write outside `results/` ("/tmp/x", "../../x") or carry a
        NUL into a path."""
        if not _FOLDER_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a plain folder name (it names the default results folder "
                             "results/<name>): use letters, digits, '.', '_' and '-', starting with a letter or "
                             "digit, at most 100 characters")
        return value

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int]) -> list[int]:
        """A repeated seed would train and store the same cells twice under one id: it is a typo
        (`[0, 0]` for `[0, 1]`), so it is refused rather than silently dropped."""
        repeated = _first_repeat(value)
        if repeated is not None:
            raise ValueError(f"seed {repeated} appears twice (each seed runs every table once; remove the repeat)")
        return value


class _StableDump(BaseModel):
    """A table whose dump its cell id hashes (and its rows store): the fields added after tables
    were first stored (`LATER`, name → default) are left out of the dump while at their default,
    so the tables written before them keep their ids and their results; what the table records
    beyond its fields (`_recorded`) is added."""

    LATER: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _without_later_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped = handler(self)
        for name, default in self.LATER.items():
            if name in dumped and getattr(self, name, None) == default:
                dumped.pop(name)
        return dumped | self._recorded()

    def _recorded(self) -> dict[str, Any]:
        """What the dump holds beyond the fields: nothing, unless a table says otherwise."""
        return {}


def _dataset(value: str, info: ValidationInfo) -> str:
    """A dataset's name: a shipped one, a synthetic problem, `folder` or `npz` (read from
    `path`), or a loader's import path `package.module:function`, imported only with the consent
    the validation was given (as a defense's: it runs the module's code) and checked to be
    callable."""
    if value in DATASETS + SYNTHETIC + USER_DATA:
        return value
    if not is_loader(value):
        raise ValueError(f"unknown dataset '{value}' (choose from {', '.join(DATASETS + SYNTHETIC + USER_DATA)}, or "
                         "a loader 'package.module:function')")
    consent = (info.context or {}).get("consent", NO_CONSENT)
    if not callable(load_path(value, consent, f"dataset '{value}'")):
        raise ValueError(f"dataset '{value}' is not a function (a loader returns x_train, y_train[, x_test, y_test])")
    return value


def _size(value: int | tuple[int, int] | None) -> tuple[int, int] | None:
    """`size = 32` as (32, 32); every side at least 1."""
    pair = (value, value) if isinstance(value, int) else value
    if pair is not None and min(pair) < 1:
        raise ValueError(f"an image's sides are at least 1 pixel, got {list(pair)}")
    return pair


class DataConfig(_StableDump):
    """Which dataset, where it lives, and how it is split across agents.

    A user's own data (`dataset = "folder"` or `"npz"` with `path`, or a loader's import path) is
    pinned to its content when its cells are planned (`pinned`): the source and a SHA-256 of what
    was read join the table's dump, so they are part of the cells' ids and rows, and a changed
    folder gives new cells."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    LATER: ClassVar[dict[str, Any]] = {"path": None, "size": None}
    dataset: Annotated[str, AfterValidator(_dataset)] = Field("digits", description=(
        "a shipped dataset, a synthetic problem, folder (an image folder, one sub-folder per class), npz (an .npz "
        "of x_train, y_train[, x_test, y_test]) or a loader 'package.module:function' ([campaign] imports, "
        "--allow-code)"))
    path: Path | None = Field(None, description="dataset = folder: the image folder; dataset = npz: the .npz file "
                              "(relative to the current directory)")
    size: Annotated[int | tuple[int, int] | None, AfterValidator(_size)] = Field(
        None, description="dataset = folder: resize every image to [height, width] (or size × size); default: all "
        "images must have one size")
    data_root: Path | None = None
    download: bool = False
    test_fraction: float = Field(0.2, gt=0, lt=1)
    max_train: int | None = Field(None, ge=1)
    samples_per_agent: Annotated[int | None, AfterValidator(within("records"))] = Field(
        None, ge=1, description="synthetic problems: samples drawn per agent")
    partition: one_of(PARTITIONS, "partition") = "iid"
    alpha: float = Field(0.5, gt=0, description="Dirichlet concentration (partition = dirichlet)")
    min_size: int = Field(8, ge=1, description="smallest local dataset (partition = dirichlet)")
    shards_per_agent: int = Field(2, ge=1, description="label shards per agent (partition = shards)")
    _content: Content | None = PrivateAttr(None)


    @model_validator(mode="after")
    def _synthetic_data_are_not_partitioned(self) -> DataConfig:
        if self.dataset in SYNTHETIC and self.model_fields_set & {"partition", "alpha", "shards_per_agent"}:
            raise ValueError(f"dataset '{self.dataset}' is generated per agent: remove partition, alpha "
                             "and shards_per_agent (set samples_per_agent instead)")
        if self.dataset not in SYNTHETIC and self.samples_per_agent is not None:
            raise ValueError(f"samples_per_agent applies to synthetic datasets ({', '.join(SYNTHETIC)}) only")
        if self.dataset in USER_DATA and self.path is None:
            raise ValueError(f"dataset '{self.dataset}' needs path = the "
                             f"{'image folder' if self.dataset == 'folder' else '.npz file'} to read")
        if self.dataset not in USER_DATA and self.path is not None:
            raise ValueError(f"path applies to dataset 'folder' or 'npz' only (dataset '{self.dataset}' "
                             f"{'reads data_root' if self.dataset in DATASETS else 'reads no file'})")
        if self.dataset != "folder" and self.size is not None:
            raise ValueError("size applies to dataset 'folder' only (the size its images are resized to)")
        return self

    @property
    def user_data(self) -> bool:
        """Whether the data are the user's own (an image folder, an .npz, a loader)."""
        return self.dataset in USER_DATA or is_loader(self.dataset)

    def pinned(self) -> DataConfig:
        """This table with its user data's content read now (`privaudit.data.Content`), which its
        dump then holds; itself for a shipped or synthetic dataset, whose ids stay as they were."""
        if not self.user_data:
            return self
        copy = self.model_copy()
        copy._content = data_content(self.dataset, path=self.path, size=self.size, loader=self._loader())
        return copy

    def load(self) -> Dataset:
        """The dataset this table names (not a synthetic problem: those are drawn per agent), split
        and capped; DataError when a pinned user's data have changed since they were pinned, so a
        row never pairs one content's id with another's results."""
        data = load_dataset(self.dataset, data_root=self.data_root, download=self.download,
                            test_fraction=self.test_fraction, max_train=self.max_train, path=self.path,
                            size=self.size, loader=self._loader())
        if self._content is not None and data.content != self._content:
            raise DataError(f"dataset '{self.dataset}' changed since the campaign was planned (sha256 "
                            f"{self._content.sha256[:16]}…, now {data.content.sha256[:16] if data.content else '?'}…): "
                            "run the command again")
        return data

    def _loader(self) -> Callable[[], Any] | None:
        """The loader function a loader's import path names (validated, so consented to)."""
        return load_attribute(self.dataset) if is_loader(self.dataset) else None

    def _recorded(self) -> dict[str, Any]:
        return {} if self._content is None else {"content": self._content.as_dict()}



def _defense_name(kind: str, info: ValidationInfo) -> str:
    """The defense's registered name; a module named by path is imported only with the consent the
    validation was given (`parse_campaign`'s context)."""
    return resolve(kind, (info.context or {}).get("consent", NO_CONSENT)).name


MODEL_ENTRY_POINTS = "privaudit.models"
"""The entry-point group installed packages list their model factories in."""


def model_factory(name: str, consent: Consent = NO_CONSENT) -> Any | None:
    """The factory a model name stands for when it is not privaudit's (a shipped name or
    `torchvision:<architecture>`, which give None): an import path `package.module:factory`, whose
    module is imported only with `consent` (the same opt-in as a defense's: `[campaign] imports`
    and `--allow-code`), or the name of an entry point in the group `privaudit.models` of an
    installed package; ValueError, one line, naming what is wrong. Callable or not, it is the
    model builder's to check (`privaudit.models.build_user_model`)."""
    if name in MODELS or name.startswith(TORCHVISION):
        return None
    if ":" in name:
        return load_path(name, consent, f"model '{name}'")
    found = load_entry_point(MODEL_ENTRY_POINTS, name)
    if found is None:
        raise ValueError(f"unknown model '{name}' (choose from {', '.join(MODELS)}; or torchvision:<architecture>, "
                         f"an import path 'package.module:factory', or an entry point of group {MODEL_ENTRY_POINTS})")
    return found


def _model_name(name: str, info: ValidationInfo) -> str:
    """A model the run can build: a shipped name, one of torchvision's classification
    architectures, or a factory found by `model_factory` with the consent the validation was given
    (`parse_campaign`'s context); the factory itself is checked when the model is built."""
    if name.startswith(TORCHVISION):
        return check_torchvision(name)
    model_factory(name, (info.context or {}).get("consent", NO_CONSENT))
    return name


class RunConfig(BaseModel):
    """One `[[defense]]` table: the run's shape; every other key is a hyperparameter of `kind`.

    `kind` is a defense's name, an import path `package.module:Class` or an installed entry
    point's name (`privaudit.defenses.external`); once validated it is the defense's name, and the table
    remembers where the class was imported from, so a worker process that has not imported it
    yet finds it (`defense`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: Annotated[str, AfterValidator(_defense_name)]
    _origin: str = PrivateAttr("")
    _consent: Consent = PrivateAttr(NO_CONSENT)
    label: Label = None
    topology: one_of(TOPOLOGIES, "topology") = "ring"
    agents: Annotated[int, AfterValidator(within("agents"))] = Field(8, ge=2)
    mixing: one_of(MIXING_RULES, "mixing rule") = "metropolis"
    edge_prob: float = Field(0.5, gt=0, le=1, description="edge probability (topology = erdos_renyi)")
    model: Annotated[str, AfterValidator(_model_name), Field(description=(
        "a shipped model (Models, below), 'torchvision:NAME' for a torchvision classification architecture (no "
        "weights; BatchNorm replaced by GroupNorm), an import path 'package.module:factory' (listed in [campaign] "
        "imports, with --allow-code) or an installed entry point of group privaudit.models"))] = "mlp"
    model_options: dict[str, Any] = Field(default_factory=dict)
    rounds: Annotated[int, AfterValidator(within("rounds"))] = Field(100, ge=1)
    eval_every: int = Field(10, ge=1)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    data: dict[str, Any] | None = Field(None, description="this table's own data: a whole [data] table when it "
                                        "names a dataset, else keys over the campaign's (a campaign can audit each "
                                        "algorithm on its own data)")





    @field_validator("grid")
    @classmethod
    def _grid(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in value.items():
            if key in ("kind", "label", "grid", "data"):
                raise ValueError(f"'{key}' cannot vary in a grid")
            if not values:
                raise ValueError(f"grid '{key}' has no values")
            repeated = _first_repeat(values)
            if repeated is not None:
                raise ValueError(f"grid '{key}' repeats the value {repeated!r} (each value is one run; remove "
                                 "the repeat)")
        return value

    @property
    def combinations(self) -> int:
        """How many runs the grid makes, counted without making them."""
        return math.prod(len(values) for values in self.grid.values())

    @property
    def name(self) -> str:
        return self.label or self.kind

    def variants(self) -> list[RunConfig]:
        """The table once per combination of its `grid` values (itself when it has no grid),
        each labelled with the values it takes, e.g. `DPDL (topology=ring, agents=10)`."""
        if not self.grid:
            return [self]
        base = self.model_dump(exclude={"grid"}) | (self.model_extra or {})
        keys = list(self.grid)
        variants = []
        for values in itertools.product(*(self.grid[key] for key in keys)):
            combo = dict(zip(keys, values))
            suffix = ", ".join(f"{key}={value}" for key, value in combo.items())
            variants.append(strictly(RunConfig, base | combo | {"label": f"{self.name} ({suffix})"},
                                     context={_GRID_VARIANT: True, "consent": self._consent}))
        return variants

    @model_validator(mode="after")
    def _remember_origin(self, info: ValidationInfo) -> RunConfig:
        """Where the defense class was found, and the consent the table was validated with, which
        its grid's variants are validated with too (a grid may vary `model` over factories)."""
        self._origin = origin(DEFENSES[self.kind])
        self._consent = (info.context or {}).get("consent", NO_CONSENT)
        return self

    def defense(self) -> type[Defense]:
        """The defense class, imported from where the table found it when this process has not
        registered it (a worker process; the table was validated with the consent to import it),
        ValueError when it cannot be."""
        return DEFENSES.get(self.kind) or resolve(self._origin, Consent((self._origin.partition(":")[0],), True))

    def model_factory(self) -> Any | None:
        """The factory of a model the table names by import path or entry point (None for a shipped
        name or a torchvision architecture), imported where this process has not imported it yet
        (a worker process; the table was validated with the consent to import it)."""
        module = self.model.partition(":")[0].strip()
        return model_factory(self.model, Consent((module,), True) if ":" in self.model else NO_CONSENT)

    def params(self) -> DefenseParams:
        """The defense's hyperparameters, validated by its own `Params` model (strictly, as every
        campaign value: `privaudit.campaign.document`)."""
        return strictly(self.defense().Params, self.model_extra or {})


LINKS_HELP = "eavesdropper: undirected links heard, both directions of each ([[0, 1]]: 0 ↔ 1)"
DIRECTED_LINKS_HELP = ("eavesdropper: directed links heard, [i, j] meaning i → j: what i sends to j and i's "
                       "broadcasts, not what j sends; may be given with links")


class _HearsLinks(_StableDump):
    """A table with an eavesdropper's `links` and `directed_links` (added later: `LATER`)."""

    LATER: ClassVar[dict[str, Any]] = {"directed_links": None}

    def misplaced_links(self) -> tuple[str, str] | None:
        """(field, why) when a threat other than the eavesdropper is given links."""
        for name in ("links", "directed_links"):
            if self.threat != "eavesdropper" and getattr(self, name) is not None:
                return name, "only the eavesdropper threat has links"
        return None


class ThreatConfig(_HearsLinks):
    """What an attack table shares: the defense tables it targets, the threat model that listens,
    the victim, and the label."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    label: Label = None
    defense: list[LabelReference] | None = None
    threat: one_of(THREATS, "threat model") = "global_listener"
    observer: int | None = Field(None, ge=0, description="curious_neighbour: the attacking agent")
    links: list[tuple[int, int]] | None = Field(None, description=LINKS_HELP)
    directed_links: list[tuple[int, int]] | None = Field(None, description=DIRECTED_LINKS_HELP)
    agents: list[int] | None = Field(None, min_length=1, description="coalition: the curious agents; malicious: "
                                     "the colluding agents whose hearing is pooled (default: the liar alone)")
    victim: int = Field(0, ge=0)

    def misplaced(self) -> tuple[str, str] | None:
        """(field, why) when a field is set that the chosen threat or target does not use."""
        if self.threat in ACTIVE_THREATS and not isinstance(self, AttackConfig):
            return "threat", (f"the {self.threat} threat speaks through an active attack: it applies to [[attack]] "
                              "tables only")
        if self.threat in RELEASED_THREATS and isinstance(self, AttackConfig):
            return "threat", (f"{self.threat} hears no transcript, only final models: an inversion reads messages "
                              "([[audit]] canary and [[membership]] tables only)")
        if self.threat not in ("curious_neighbour", "released_model") and self.observer is not None:
            return "observer", "only the curious_neighbour threat has one"
        if (wrong := self.misplaced_links()) is not None:
            return wrong
        if self.threat not in ("coalition", *ACTIVE_THREATS) and self.agents is not None:
            return "agents", "only the coalition and malicious threats have agents"
        if self.threat in ACTIVE_THREATS and self.agents is not None and \
                (len(set(self.agents)) != len(self.agents) or min(self.agents) < 0):
            return "agents", f"must be distinct agents, got {self.agents}"
        if self.threat == "coalition" and not isinstance(self, AttackConfig):
            return "threat", "the coalition threat applies to [[attack]] tables only"
        if self.threat == "coalition" and self.agents is None:
            return "agents", "required when threat = 'coalition' (the curious agents)"
        if self.threat == "coalition" and (len(set(self.agents)) != len(self.agents) or min(self.agents) < 0):
            return "agents", f"must be distinct agents, got {self.agents}"
        if self.threat == "coalition" and "victim" in self.model_fields_set:
            return "victim", "a coalition attacks every agent outside it; remove victim"
        return None


def _distinct_rounds(value: list[int]) -> list[int]:
    if any(r < 0 for r in value) or len(set(value)) != len(value):
        raise ValueError(f"rounds must be distinct and >= 0, got {value}")
    return value


class AttackConfig(ThreatConfig):
    """One `[[attack]]` table: a gradient inversion on a victim's messages at chosen rounds.

    It attacks every run of the defense tables it names (`defense`, by label; all tables with
    the scenario when omitted), at every seed: one cell per (run, seed, round), all cells of one
    (run, seed) sharing one training run. Every key not listed here is a parameter of the
    attack (`privaudit.attacks.inversion.INVERSIONS[kind]`'s fields).

    An active kind (`privaudit.attacks.active.trial.ACTIVE_ATTACKS`: "trap_weights") lies: with
    threat = "malicious", agent `liar` of the colluding `agents` overrides the victim's state at
    each of `rounds` (one cell each), on the tables of the defenses it applies to (all of them when
    `defense` is omitted). Its cell runs the training run twice up to the read-out, once with the
    lie and once honestly on the same seed, and scores both (`privaudit.campaign.active_findings`).
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: one_of(ATTACK_KINDS, "attack")
    scenario: str | None = Field(None, description="extraction scenario (default: the defense's first)")
    rounds: Annotated[list[int], AfterValidator(_distinct_rounds)] = Field(min_length=1)
    batch_size: Annotated[int | None, AfterValidator(within("records"))] = Field(
        None, ge=1, description="images to reconstruct, at most the records each attacked agent holds (default: the "
        "defense's public batch_size)")
    trace_every: int = Field(0, ge=0, description="record the reconstruction's MSE every k attack "
                             "evaluations (0: off); scoring only, the attack never sees it")
    window: int | None = Field(None, ge=1, description="coalition: rounds heard after the attacked "
                               "round (default: the number of agents)")
    bound_trials: Annotated[int, AfterValidator(within("runs"))] = Field(
        20, ge=0, description="trials of the reconstruction game played when this inversion leaks on a run with a DP "
        "claim, whose bound enters the run's verdict (0: none; `privaudit.campaign.inversion_findings.leak_bound`)")
    liar: int | None = Field(None, ge=0, description="malicious: the agent that sends the victim crafted models "
                             "(default: the first of agents that neighbours the victim)")

    LATER: ClassVar[dict[str, Any]] = {**_HearsLinks.LATER, "bound_trials": 20, "liar": None}

    @property
    def active(self) -> bool:
        """Whether the attack lies (an active kind) rather than only listens."""
        return self.kind in ACTIVE_ATTACKS

    def misplaced(self) -> tuple[str, str] | None:
        if self.active and self.threat not in ACTIVE_THREATS:
            return "threat", f"the {self.kind} attack lies: it needs threat = 'malicious'"
        if not self.active and self.threat in ACTIVE_THREATS:
            return "kind", (f"the {self.threat} threat speaks through an active attack (kind = "
                            f"{', '.join(map(repr, ACTIVE_ATTACKS))}), not '{self.kind}'")
        if self.threat not in ACTIVE_THREATS and self.liar is not None:
            return "liar", "only the malicious threat has a liar"
        if self.active and "bound_trials" in self.model_fields_set:
            return "bound_trials", "an active attack plays no reconstruction game (docs/limits.md)"
        if self.active and self.scenario is not None:
            return "scenario", (f"the {self.kind} attack reads the release its defense's steering names "
                                "(privaudit list): give no scenario")
        if self.threat != "coalition" and self.window is not None:
            return "window", "only the coalition threat has a window"
        if self.threat == "coalition" and "bound_trials" in self.model_fields_set:
            return "bound_trials", "a coalition attack plays no reconstruction game"
        if self.threat == "coalition" and self.scenario not in (None, "coalition"):
            return "scenario", "a coalition attack has its own scenario, 'coalition'"
        return super().misplaced()

    @property
    def name(self) -> str:
        return self.label or self.kind

    def attack(self) -> Any:
        """The attack object, its parameters checked against its fields' names and types
        (ValidationError naming the field)."""
        cls = ATTACK_KINDS[self.kind]
        params = dict(self.model_extra or {})
        allowed = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ValueError(f"unknown parameter '{unknown[0]}' for attack '{self.kind}' "
                             f"(allowed: {', '.join(allowed)})")
        return strictly(_adapter(cls), params)


@functools.cache
def _adapter(cls: type) -> TypeAdapter:
    """The validator of an attack's dataclass, built once per class."""
    return TypeAdapter(cls)


MEMBERSHIP_TARGETS = ("intercepted", "average")


def _false_positive_rates(value: list[float]) -> list[float]:
    """Rates strictly between 0 and 1 (a TPR at FPR 0 or 1 says nothing: 0 and 1 are the ROC's
    ends), distinct as the row names them (`tpr@<rate>`, six significant digits), so no two
    overwrite one key."""
    wrong = next((rate for rate in value if not 0 < rate < 1), None)
    if wrong is not None:
        raise ValueError(f"false-positive rates lie strictly between 0 and 1, got {wrong}")
    tiny = next((rate for rate in value if rate < MIN_FPR), None)
    if tiny is not None:
        raise ValueError(f"the false-positive rate {tiny} is below {MIN_FPR:g}: reading a TPR there takes more than "
                         f"{1 / MIN_FPR:,.0f} non-members, more records than a run may hold")
    repeated = _first_repeat([f"{rate:g}" for rate in value])
    if repeated is not None:
        raise ValueError(f"the false-positive rate {repeated} appears twice (rows name each as tpr@{repeated}, to six "
                         "significant digits)")
    return value


class MembershipConfig(ThreatConfig):
    """One `[[membership]]` table: membership inference (LOSS, offline LiRA, RMIA) against a
    victim agent's records, on every run of the defense tables it names, at every seed.

    `target = "intercepted"`: the victim's model as the threat model hears it at each of `rounds`
    (the defense's model view, `privaudit.attacks.views.MODEL_VIEWS`); `"average"`: the final average model, the run's output.
    A released-model threat (`privaudit.threats.RELEASED_THREATS`) hears no message and decides the
    model itself, so it takes no `rounds` and leaves `target` out: `released_model` holds the final
    model of agent `observer` (default: each victim's own), `released_average` the final average
    model, as `target = "average"` does (the one target it may also name).
    `victims` pools several agents into one finding: each one's records are members against its
    own model, and the non-members are dealt out among them, so the ROC has more members than one
    small local dataset gives.
    The attacker's data come from the held-out split, shuffled by the seed, in three disjoint
    parts: `non_members` (default: as many as the victims have records), `rmia_samples` population
    records for RMIA's pairwise test, and the rest (at most `reference_pool`) to train
    `references` reference models, each a run of the same defense on that data.
    """

    target: one_of(MEMBERSHIP_TARGETS, "membership target") = "intercepted"
    observer: int | None = Field(None, ge=0, description="curious_neighbour: the attacking agent; released_model: "
                                 "the agent whose final model is released (default: each victim's own)")
    victims: list[int] | None = Field(None, min_length=1, description="pool several victims: each one's "
                                      "records are members against its own model (default: [victim])")
    rounds: Annotated[list[int], AfterValidator(_distinct_rounds)] | None = Field(
        None, min_length=1, description="intercepted: the rounds whose model is attacked")
    references: Annotated[int, AfterValidator(within("runs"))] = Field(
        8, ge=2, description="reference models (LiRA's Gaussian fit needs 2)")
    non_members: int | None = Field(None, ge=1)
    rmia_samples: int = Field(200, ge=1, description="population records z of RMIA's pairwise test")
    reference_pool: int | None = Field(None, ge=1, description="held-out records reference models "
                                       "train on (default: all not used otherwise)")
    lira_variance: one_of(("global", "per_example"), "LiRA variance") = "global"
    rmia_gamma: float = Field(1.0, gt=0)
    rmia_a: float | None = Field(None, ge=0, le=1, description="RMIA's offline linear approximation "
                                 "(App. B.2.2); None: chosen on the reference models (each attacked with the "
                                 "others), the paper's 0.3 with fewer than 4 of them or without evidence for "
                                 "another")
    rmia_score: one_of(RMIA_SCORES, "RMIA score") = Field(
        "refined", description="'refined': the paper's count with its ties broken by the mean log pairwise "
        "likelihood ratio; 'count': the count as is (eq. 4)")
    fprs: Annotated[list[float], AfterValidator(_false_positive_rates)] = Field(
        default_factory=lambda: [0.001, 0.01], description="false-positive rates the TPR is reported at, each in "
        "(0, 1)")
    bootstrap: Annotated[int, AfterValidator(within("runs"))] = Field(1000, ge=0)
    confidence: float = Field(0.95, gt=0, lt=1)

    @property
    def attacked(self) -> list[int]:
        """The victims whose records are the members."""
        return self.victims or [self.victim]

    @property
    def final(self) -> bool:
        """Whether the attacker holds a final model (a released-model threat, or the final average
        model), not a model intercepted at `rounds`."""
        return self.threat in RELEASED_THREATS or self.target == "average"

    @property
    def held(self) -> str:
        """The final model the attacker holds, in words (for messages naming a cell)."""
        return "released final model" if self.threat == "released_model" else "final average model"

    def misplaced(self) -> tuple[str, str] | None:
        if self.victims is not None and (len(set(self.victims)) != len(self.victims) or min(self.victims) < 0):
            return "victims", f"must be distinct agents, got {self.victims}"
        if self.victims is not None and "victim" in self.model_fields_set:
            return "victim", "give victim or victims, not both"
        if (wrong := self._misplaced_release()) is not None:
            return wrong
        if self.threat in RELEASED_THREATS:
            return super().misplaced()
        if self.target == "intercepted" and self.rounds is None:
            return "rounds", "required when target = 'intercepted' (the rounds whose model is attacked)"
        if self.target == "average" and self.rounds is not None:
            return "rounds", "the 'average' target is the final average model; remove rounds"
        return super().misplaced()

    def _misplaced_release(self) -> tuple[str, str] | None:
        """(field, why) when a released-model threat is given what it does not take: it holds a
        final model, so no round and no intercepted target; `released_average` no observer and no
        other target than the average it holds."""
        if self.threat not in RELEASED_THREATS:
            return None
        if self.rounds is not None:
            return "rounds", f"{self.threat} holds a final model, once training ends; remove rounds"
        if "target" in self.model_fields_set and self.target != "average":
            return "target", f"{self.threat} holds a final model, not one intercepted; remove target"
        if self.threat == "released_model" and "target" in self.model_fields_set:
            return "target", ("released_model holds one agent's final model, not the average (threat = "
                              "'released_average'); remove target")
        if self.threat == "released_average" and self.observer is not None:
            return "observer", "released_average receives the average of every agent's final model: it has no observer"
        return None

    @property
    def name(self) -> str:
        return self.label or f"membership ({self.threat if self.threat in RELEASED_THREATS else self.target})"


AUDIT_KINDS = ("mechanism", "canary", "reconstruction", "position")
_MECHANISM_FIELDS = ("mechanism", "params", "adjacency", "dim", "releases", "samples", "curve")
_RUN_FIELDS = ("defense", "victim", "threat", "observer", "links", "directed_links")
"""What every audit of a defense run has: the run, the victim and who listens."""
_CANARY_ONLY = ("method", "runs", "canaries", "guesses", "canary", "channels", "protocol", "canary_label",
                "canary_scale", "statistic", "canary_norm")
_CANARY_FIELDS = _RUN_FIELDS + _CANARY_ONLY
_RECONSTRUCTION_FIELDS = ("attack", "scenario", "round", "threshold_db", "trials", "pool")
_POSITION_ONLY = ("attackers", "victims", "released")
_UNUSED = {"mechanism": _CANARY_FIELDS + _RECONSTRUCTION_FIELDS + _POSITION_ONLY,
           "canary": _MECHANISM_FIELDS + _RECONSTRUCTION_FIELDS + _POSITION_ONLY,
           "reconstruction": _MECHANISM_FIELDS + _CANARY_ONLY + _POSITION_ONLY,
           "position": _MECHANISM_FIELDS + _RECONSTRUCTION_FIELDS + ("threat", "observer", "links", "directed_links",
                                                                     "method", "canaries", "guesses", "channels",
                                                                     "protocol", "statistic", "canary_norm")}
MAX_POOL = 10_000
"""Candidates a reconstruction audit's prior may hold (κ compares every pair of them)."""
MAX_THRESHOLD_DB = 200.0
"""The highest PSNR threshold of a reconstruction audit (the lowest is above 0). PSNR on [0, 1]
pixels is at least 0 dB (an MSE is at most 1), so a threshold at or below 0 makes every guess a
success and bounds nothing (and −4,000 dB overflowed computing κ); a reconstruction equal to its
target up to float32 rounding (pixels near 1 are 6·10⁻⁸ apart) already scores about 140 dB, so a
threshold above 200 dB asks for nothing a float32 attack can show."""
CANARY_METHODS = ("repeated", "one_run")
PROTOCOLS = ("auto", "model", "held-out")
STATISTICS = ("auto", "law", "projection")


class AuditConfig(_HearsLinks):
    """One `[[audit]]` table: an empirical DP lower bound set beside a claim (`privaudit/attacks/audit/mechanism_audit.py`).

    `kind = "mechanism"`: a mechanism sampled in isolation (`mechanism`, one of
    `privaudit.attacks.audit.mechanisms.MECHANISMS`, with its `params`), neighbours searched under `adjacency` at
    `dim`, `releases` releases seen together, `samples` observations per input, and the bound
    re-estimated at each size in `curve` for the tightness-against-samples figure; one cell per seed.
    `kind = "canary"`: each run of the named defense tables (`defense`, by label; every table a
    canary audit supports when omitted), scored from what `threat` hears (`privaudit/attacks/audit/canary_audit.py`; the
    eavesdropper's `links` and `directed_links` and the curious neighbour's `observer` as for attacks), through the
    defense's canary `channels` that tap hears (all by default; `privaudit/attacks/audit/channels.py`); one cell
    per run and seed. `canary` is the kind planted (`privaudit/attacks/audit/canaries.py`): "gradient" (white-box
    gradient canaries, the strongest), "record" (a crafted input), "outlier" or "natural" (a held-out
    record of the task, the weakest). `method =
    "repeated"` trains it `runs` times per world, with and without the canary at `victim`;
    `"one_run"` trains it once with `canaries` canaries, each in the victim's data with probability
    ½, and guesses the `guesses` highest and lowest scored (Steinke, Nasr & Jagielski 2023).
    `protocol` picks how the test's threshold is chosen without touching the runs it is counted
    on: "model" (from the mechanism's law), "held-out" (on a quarter of the runs) or "auto".
    `statistic` picks how a run is scored: "law" (the likelihood ratio of the law the defense's
    view states), "projection" (law-free: the projections of what the extractors rebuild on the
    canary's direction, weighted on held-out runs; any defense whose view has an extractor) or
    "auto" (the law where the view states one); `canary_norm` is the law-free gradient canary's
    length (default: the view channel's, else 1).
    `kind = "reconstruction"`: the informed-adversary reconstruction game on each run of the named
    defense tables (`privaudit/attacks/audit/reconstruction_game.py`; one cell per run and seed): in each of
    `trials` trials the victim's local data is exactly one record z drawn uniformly from a pool of
    `pool` held-out records (every other agent's data as the run has them; DP bounds how well one
    record of the dataset can be rebuilt, so the victim holds only z), the defense runs with a fresh
    seed, `threat` hears it, the `scenario` extractor reads the target at `round`, the inversion
    `attack` rebuilds one image, and the trial succeeds when its PSNR against z is at least
    `threshold_db`. ε_LB = log((p_LB − δ)/κ) (`privaudit/attacks/audit/reconstruction_bounds.py`), κ the
    prior's baseline for that threshold.
    `kind = "position"`: privacy by the attacker's position in the graph (`privaudit/attacks/audit/position.py`;
    one cell per run and seed): `runs` runs per world with and without one gradient canary at
    `victim` (or at each of `victims`, "all" for every agent, one audit each), each of `attackers` (an agent: a curious agent hearing only what it receives; a list
    of agents: a coalition pooling it; default every other agent alone) scored from the states it
    receives, all from the same runs; per pair ε_LB beside the graph distance and the pairwise
    network accountant's figures (`privaudit/network_accounting.py`). Defenses whose states follow a
    public linear recurrence only. `released = true` also scores, from the same runs, each
    single-agent attacker's own final model (the last iterate, nothing of the transcript: the
    `released_model` threat) and sets its ε_LB beside the transcript's.
    `delta` is the δ of ε_LB (default: the claim's δ — 0 for a pure-ε claim — else 1e-5; a
    reconstruction audit of an add/remove claim takes the δ that claim implies for replacing one
    record).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: one_of(AUDIT_KINDS, "audit kind")
    label: Label = None
    confidence: float = Field(0.95, gt=0, lt=1)
    delta: float | None = Field(None, ge=0, lt=1)
    mechanism: one_of(MECHANISMS, "mechanism") | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    adjacency: one_of(NORMS, "adjacency") = "l1"
    dim: int = Field(1, ge=1)
    releases: int = Field(1, ge=1)
    samples: int | None = Field(None, ge=100, description="observations per input (default: the audit's)")
    curve: list[Annotated[int, Field(ge=100)]] = Field(default_factory=list)
    defense: list[LabelReference] | None = None
    method: one_of(CANARY_METHODS, "canary method") = "repeated"
    runs: Annotated[int, AfterValidator(within("runs"))] = Field(100, ge=8, description="repeated: training "
                                                                  "runs per world")
    canaries: Annotated[int, AfterValidator(within("runs"))] = Field(200, ge=2, description="one_run: canaries "
                                                                     "in the one training run")
    guesses: int = Field(20, ge=1, description="one_run: guesses per side (highest and lowest scores)")
    victim: int = Field(0, ge=0)
    threat: one_of(THREATS, "threat model") = "global_listener"
    observer: int | None = Field(None, ge=0, description="curious_neighbour: the attacking agent; released_model: "
                                 "the agent whose final model is released (default the victim)")
    links: list[tuple[int, int]] | None = Field(None, description=LINKS_HELP)
    directed_links: list[tuple[int, int]] | None = Field(None, description=DIRECTED_LINKS_HELP)
    agents: list[int] | None = Field(None, min_length=1, description="malicious canary audit: the colluding agents "
                                     "whose hearing is pooled (default: the liar alone)")
    liar: int | None = Field(None, ge=0, description="malicious canary audit: the agent that steers the victim "
                             "(default: the victim's lowest-numbered neighbour)")
    canary: one_of(CANARY_KINDS, "canary") = "gradient"
    channels: list[str] | None = Field(None, min_length=1, description="the defense's canary channels to "
                                       "listen to (default: every one the threat model hears)")
    protocol: one_of(PROTOCOLS, "protocol") = "auto"
    canary_label: int = Field(0, ge=0)
    canary_scale: float = Field(2.0, gt=0)
    statistic: one_of(STATISTICS, "statistic") = "auto"
    canary_norm: float | None = Field(None, gt=0, description="law-free: the gradient canary's length (default: "
                                      "the view's, else 1)")
    attack: one_of(INVERSIONS, "attack") = Field("idlg", description="reconstruction: the inversion attack, one "
                                                 "guess per trial")
    scenario: str | None = Field(None, description="reconstruction: the defense's extraction scenario (default: "
                                 "its first)")
    round: int = Field(0, ge=0, description="reconstruction: the attacked round")
    threshold_db: float = Field(30.0, gt=0, le=MAX_THRESHOLD_DB, description="reconstruction: a trial succeeds when "
                                "the reconstruction's PSNR against the target is at least this many dB, in (0, "
                                f"{MAX_THRESHOLD_DB:g}]")
    trials: Annotated[int, AfterValidator(within("runs"))] = Field(
        20, ge=1, description="reconstruction: independent trials (a fresh target and seed each)")
    pool: int = Field(1000, ge=1, le=MAX_POOL, description="reconstruction: candidate records of the prior, drawn "
                      "from the held-out split (at most as many as it has)")
    victims: list[Annotated[int, Field(ge=0)]] | Literal["all"] | None = Field(
        None, min_length=1, description="position: several victims, each audited against every attacker that does not "
        "hold it (\"all\": every agent); default [victim]")
    attackers: list[Annotated[int, Field(ge=0)] | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]] \
        | None = Field(None, min_length=1, description="position: the attacking agents, each an agent (a curious "
                       "agent) or a list of agents (a coalition); default every other agent alone")
    released: bool = Field(False, description="position: also score each single-agent attacker's own final model "
                           "(the last iterate, nothing of the transcript: the released_model threat) from the same "
                           "runs, its ε_LB beside the transcript's (no coalition: it holds several models)")

    LATER: ClassVar[dict[str, Any]] = {"directed_links": None, "statistic": "auto", "canary_norm": None,
                                       "attack": "idlg", "scenario": None, "round": 0, "threshold_db": 30.0,
                                       "trials": 20, "pool": 1000, "attackers": None, "victims": None,
                                       "released": False, "agents": None, "liar": None}

    def misplaced(self) -> tuple[str, str] | None:
        """(field, why) when a field is set that the audit's kind does not use."""
        if self.kind == "mechanism" and self.mechanism is None:
            return "mechanism", "required when kind = 'mechanism'"
        if self.threat == "coalition":
            return "threat", "the coalition threat applies to [[attack]] tables only"
        if (wrong := self._misplaced_lie()) is not None:
            return wrong
        if self.kind != "mechanism" and (wrong := self._misplaced_release()) is not None:
            return wrong
        if self.kind != "mechanism" and self.threat not in ("curious_neighbour", "released_model") \
                and self.observer is not None:
            return "observer", "only the curious_neighbour threat has one"
        if self.kind != "mechanism" and (wrong := self.misplaced_links()) is not None:
            return wrong
        if self.kind == "canary" and self.method == "one_run" and self.protocol != "auto":
            return "protocol", "a one-run audit chooses no threshold"
        if self.kind == "canary":
            unused = ("canaries", "guesses") if self.method == "repeated" else ("runs",)
            for name in unused:
                if name in self.model_fields_set:
                    return name, f"not a field of a {self.method} canary audit"
            if self.method == "one_run" and 2 * self.guesses > self.canaries:
                return "guesses", f"2 × guesses must be at most canaries ({self.canaries}), got {self.guesses}"
            for name in ("canary_label", "canary_scale"):
                if self.canary == "natural" and name in self.model_fields_set:
                    return name, "natural canaries are held-out records, with their own inputs and labels"
        for name in _UNUSED[self.kind]:
            if name in self.model_fields_set:
                return name, f"not a field of a {self.kind} audit"
        if self.kind == "position" and self.victims is not None and "victim" in self.model_fields_set:
            return "victims", "give victim or victims, not both"
        if self.kind == "position" and self.released and self.attackers is not None \
                and all(isinstance(attacker, list) and len(set(attacker)) > 1 for attacker in self.attackers):
            return "released", ("every attacker is a coalition, and the released model is one agent's final model: "
                                "name single agents among the attackers")
        return None

    def _misplaced_lie(self) -> tuple[str, str] | None:
        """(field, why) when the malicious threat meets what it cannot serve: it steers the victim
        for one record canary of a repeated canary audit (`privaudit.attacks.active.steering`), its
        threshold chosen on held-out runs; `agents` and `liar` belong to it alone."""
        if self.threat not in ACTIVE_THREATS:
            for name in ("agents", "liar"):
                if getattr(self, name) is not None:
                    return name, "only the malicious threat has one"
            return None
        if self.kind != "canary":
            return "threat", (f"the {self.threat} threat applies to [[attack]] tables and [[audit]] canary tables, "
                              f"not a {self.kind} audit")
        if self.method != "repeated":
            return "method", f"the {self.threat} threat steers the victim for one canary: method = 'repeated'"
        if self.canary == "gradient":
            return "canary", (f"the {self.threat} threat steers the victim for a record canary (record, outlier, "
                              "natural): a planted gradient needs no steering")
        if self.protocol == "model":
            return "protocol", (f"the {self.threat} threat's threshold is chosen on held-out runs: the law is stated for "
                                "the canary at honest points, not at the steered one")
        if self.agents is not None and (len(set(self.agents)) != len(self.agents) or min(self.agents) < 0):
            return "agents", f"must be distinct agents, got {self.agents}"
        return None

    def _misplaced_release(self) -> tuple[str, str] | None:
        """(field, why) when a released-model threat meets what it cannot serve: it hears no message,
        so only a canary audit scores what it receives (the final model), with no channel, no law
        and no transcript statistic."""
        if self.threat not in RELEASED_THREATS:
            return None
        if self.kind != "canary":
            return "threat", (f"{self.threat} hears no transcript, only final models: a {self.kind} audit reads "
                              "messages (canary audits only)")
        if self.threat == "released_average" and self.observer is not None:
            return "observer", "released_average receives the average of every agent's final model: it has no observer"
        if self.channels is not None:
            return "channels", f"{self.threat} hears no channel: it scores the final model"
        if self.statistic != "auto":
            return "statistic", f"{self.threat} scores the final model itself; leave statistic to auto"
        if self.protocol == "model":
            return "protocol", (f"{self.threat}: no law of the final model is stated to fix the threshold from; "
                                "use held-out (or auto)")
        return None

    @property
    def name(self) -> str:
        return self.label or (f"{self.mechanism} audit" if self.kind == "mechanism" else f"{self.kind} audit")

    def pairs(self, agents: int) -> tuple[int, int]:
        """A position audit's victims and attackers on a run of `agents` agents (at most: an
        attacker holding a victim is not paired with it)."""
        victims = agents if self.victims == "all" else len(self.victims or [self.victim])
        return victims, len(self.attackers) if self.attackers is not None else agents - 1


class Campaign(BaseModel):
    model_config = ConfigDict(extra="forbid")
    campaign: CampaignInfo = Field(default_factory=CampaignInfo)
    data: DataConfig = Field(default_factory=DataConfig)
    defense: list[RunConfig] = Field(min_length=1)
    attack: list[AttackConfig] = Field(default_factory=list)
    membership: list[MembershipConfig] = Field(default_factory=list)
    audit: list[AuditConfig] = Field(default_factory=list)
    _text: str = PrivateAttr("")
    _consent: Consent = PrivateAttr(NO_CONSENT)

    @property
    def text(self) -> str:
        """The campaign file's text, or, for a campaign given as a dict, the TOML it is equivalent
        to (`privaudit.campaign.document.toml_text`): what a results folder keeps as campaign.toml."""
        return self._text

    def data_for(self, index: int) -> DataConfig:
        """The data of defense table `index`: the campaign's [data], or the table's own `data` — a
        whole data table when it names a `dataset`, else keys over the campaign's."""
        table = self.defense[index]
        if table.data is None:
            return self.data
        context = {"consent": self._consent}
        if "dataset" in table.data:
            return strictly(DataConfig, table.data, context)
        return strictly(DataConfig, self.data.model_dump(exclude_unset=True) | table.data, context)

    def warnings(self) -> list[str]:
        """What the file leaves to a default that shapes every result: a `[[defense]]` table that
        does not give `agents` runs on `RunConfig`'s default, which nothing else would say."""
        default = RunConfig.model_fields["agents"].default
        return [f"defense[{index}] ({table.name}): agents not given; the default {default} is used"
                for index, table in enumerate(self.defense)
                if "agents" not in table.model_fields_set and "agents" not in table.grid]

    def cell_count(self) -> int:
        """The cells `privaudit.campaign.cells` expands this campaign into, counted from the table
        sizes alone, so a campaign too large to run is refused before anything is expanded."""
        seeds = len(self.campaign.seeds)
        training = [table.combinations * seeds for table in self.defense]
        total = sum(training)
        for index, table in enumerate(self.attack):
            total += sum(training[k] for k, _ in self.targets(index)) * len(table.rounds)
        for index, table in enumerate(self.membership):
            total += sum(training[k] for k in self.membership_targets(index)) * len(table.rounds or [None])
        for index, table in enumerate(self.audit):
            total += seeds if table.kind == "mechanism" else sum(training[k] for k in self.audit_targets(index))
        return total

    def targets(self, index: int) -> list[tuple[int, str]]:
        """The defense tables attack `index` applies to, with the scenario on each."""
        table = self.attack[index]
        chosen = _named(self.defense, table.defense)
        if table.threat == "coalition":
            return [(k, "coalition") for k, d in chosen if table.defense is not None or d.kind in DYNAMICS]
        if table.active:
            return self._lying(chosen, table)
        return self._extracting(chosen, table.scenario, table.defense is not None)

    @staticmethod
    def _extracting(chosen: list[tuple[int, RunConfig]], scenario: str | None,
                    named: bool) -> list[tuple[int, str]]:
        """The chosen defense tables with an extractor for `scenario` (default: each one's first),
        with the scenario on each; a table named by label without it is an error, as is none left."""
        found = []
        for k, d in chosen:
            known = [s for kind, s in EXTRACTORS if kind == d.kind]
            picked = scenario or (known[0] if known else None)
            if picked in known:
                found.append((k, picked))
            elif named:
                raise ValueError(f"defense '{d.name}' ({d.kind}) has no scenario '{scenario}' "
                                 f"(known: {', '.join(known) or 'none'})")
        if not found:
            raise ValueError(f"no defense table has the scenario '{scenario}'")
        return found

    @staticmethod
    def _lying(chosen: list[tuple[int, RunConfig]], table: AttackConfig) -> list[tuple[int, str]]:
        """The chosen defense tables an active attack applies to, with the scenario it reads; a
        table named by label that it does not apply to is an error (the attack's own refusal), as
        is none left."""
        attack = ACTIVE_ATTACKS[table.kind]
        for _, d in chosen:
            refusal = attack.refusal(d.kind)
            if refusal is not None and table.defense is not None:
                raise ValueError(f"defense '{d.name}': {refusal}")
        found = [(k, STEERINGS[d.kind].scenario) for k, d in chosen if attack.refusal(d.kind) is None]
        if not found:
            raise ValueError(f"no defense table runs a defense the {table.kind} attack applies to "
                             f"({', '.join(attack.applies_to())})")
        return found

    def membership_targets(self, index: int) -> list[int]:
        """The defense tables membership table `index` applies to."""
        table = self.membership[index]
        chosen = _named(self.defense, table.defense)
        if not table.final:
            chosen = _supporting(chosen, MODEL_VIEWS, table.defense is not None, "sends no model an attacker can read",
                                 "sends a model an attacker can read")
        return [k for k, _ in chosen]

    def audit_targets(self, index: int) -> list[int]:
        """The defense tables canary, reconstruction or position audit `index` runs on (none for a
        mechanism audit); a released-model canary audit's, every table it names (it reads final states,
        which every defense has); a reconstruction audit's, those whose view has its scenario's extractor; a
        position audit's, those whose states follow an exact public recurrence (their view's
        dynamics) and whose view states a canary channel."""
        table = self.audit[index]
        if table.kind == "mechanism":
            return []
        if table.kind == "reconstruction":
            return [k for k, _ in self._extracting(_named(self.defense, table.defense), table.scenario,
                                                   table.defense is not None)]
        if table.threat in RELEASED_THREATS:
            return [k for k, _ in _named(self.defense, table.defense)]
        if table.kind == "position":
            kinds = {kind for kind, model in DYNAMICS.items() if model.exact and kind in CHANNELS}
            lacks, has = ("follows no exact public state recurrence with a canary channel",
                          "follows an exact public state recurrence with a canary channel")
        elif table.threat in ACTIVE_THREATS:
            kinds = {kind for kind, _ in EXTRACTORS if override_refusal(kind) is None}
            lacks, has = ("is not a defense the active canary audit steers",
                          "is a defense the active canary audit steers")
        elif table.statistic == "law":
            kinds, lacks, has = CHANNELS, "states no law for a canary channel", "states a canary channel's law"
        else:
            kinds, lacks, has = {kind for kind, _ in EXTRACTORS}, "has no extractor to audit", "has an extractor"
        chosen = _supporting(_named(self.defense, table.defense), kinds, table.defense is not None, lacks, has)
        return [k for k, _ in chosen]


def _supporting(chosen: list[tuple[int, RunConfig]], kinds, named: bool, lacks: str,
                has: str) -> list[tuple[int, RunConfig]]:
    """The chosen defense tables whose kind is one of `kinds`. A table the attack names by label
    that is not one is an error (`defense 'X' (kind) <lacks>`), as is none being left; tables
    chosen by default are just skipped."""
    known = ", ".join(sorted(kinds))
    unsupported = [d for _, d in chosen if d.kind not in kinds]
    if unsupported and named:
        raise ValueError(f"defense '{unsupported[0].name}' ({unsupported[0].kind}) {lacks} (known: {known})")
    supported = [(k, d) for k, d in chosen if d.kind in kinds]
    if not supported:
        raise ValueError(f"no defense table {has} (known: {known})")
    return supported


def _named(defenses: list[RunConfig], labels: list[str] | None) -> list[tuple[int, RunConfig]]:
    """The defense tables with the given labels (all when None); ValueError for unknown labels."""
    chosen = [(k, d) for k, d in enumerate(defenses) if labels is None or d.name in labels]
    if labels is not None:
        missing = sorted(set(labels) - {d.name for _, d in chosen})
        if missing:
            known = ", ".join(d.name for d in defenses)
            raise ValueError(f"no defense table labelled '{missing[0]}' (labels: {known})")
    return chosen


def _path(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "campaign"


def _table_fields(loc: tuple[Any, ...]) -> list[str] | None:
    """The fields a campaign table allows, for an unknown key at `loc` (`("audit", 0, "run")`,
    `("campaign", "nme")`), or None where the location is not directly in one of them."""
    tables = {"campaign": CampaignInfo, "data": DataConfig, "attack": AttackConfig, "membership": MembershipConfig,
              "audit": AuditConfig}
    model = tables.get(loc[0]) if loc else None
    direct = len(loc) == 3 and isinstance(loc[1], int) or len(loc) == 2 and not isinstance(loc[1], int)
    return list(model.model_fields) if model is not None and direct else None


def _one_line(error: ValidationError, prefix: tuple[Any, ...] = (), fields: list[str] | None = None) -> str:
    """The first error of `error` as `field.path: what is wrong`, counting the others."""
    errors = error.errors()
    first = errors[0]
    if first["type"] == "extra_forbidden":
        fields = fields or _table_fields(prefix + tuple(first["loc"]))
        what = "unknown field" + (f" (allowed: {', '.join(fields)})" if fields else "")
    elif first["type"] == "missing":
        what = "required field is missing"
    elif first["type"] == "value_error":
        what = str(first["ctx"]["error"])
    else:
        what = f"{first['msg']} (got {_shown(first.get('input'))})"
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    return f"{_path(prefix + tuple(first['loc']))}: {what}{more}"


_SHOWN = 60


def _shown(value: Any) -> str:
    """A bad value as the error quotes it: its repr, cut short so the error stays one line."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def parse_campaign(raw: dict[str, Any], source: str = "campaign", *, allow_code: bool = False,
                   text: str | None = None) -> Campaign:
    """Validate a parsed TOML document (or the dict a Python caller passes); ConfigError with one
    line on the first bad field. What it holds is checked first (`privaudit.campaign.document`:
    TOML's values only, nested at most `MAX_NESTING` deep, inf and nan refused everywhere, untyped
    tables included, since no field means anything by them), then it is validated strictly (no
    boolean or text for a number). Its size is checked against the limits (`privaudit.limits`)
    before any table is expanded. A defense imported by path runs its module's code, so it is
    imported only when the campaign lists that module in `[campaign] imports` and `allow_code`
    says the user agreed: the consent goes with the validation to the one place a module is
    imported (`privaudit.defenses.external.resolve`), whatever containers the input came in. `text` is the
    file's text, kept with the campaign (`Campaign.text`; default: the TOML of the document,
    `privaudit.campaign.document.toml_text`)."""
    try:
        document = plain(raw)
    except NotACampaignValue as error:
        raise ConfigError(f"{source}: {_path(error.loc)}: {error.why}") from None
    try:
        consent = _consent(document, allow_code)
        campaign = strictly(Campaign, document, context={"consent": consent})
    except ValidationError as error:
        raise ConfigError(f"{source}: {_one_line(error)}") from None
    campaign._consent = consent
    seeds = len(campaign.campaign.seeds)
    for index, table in enumerate(campaign.defense):
        try:
            campaign.data_for(index)
        except ValidationError as error:
            raise ConfigError(f"{source}: {_one_line(error, ('defense', index, 'data'), list(DataConfig.model_fields))}"
                              ) from None
        allowed = list(DEFENSES[table.kind].Params.model_fields) + list(RunConfig.model_fields)
        unknown = set(table.grid) - set(allowed)
        if unknown:
            raise ConfigError(f"{source}: defense[{index}].grid.{sorted(unknown)[0]}: unknown field "
                              f"(allowed: {', '.join(allowed)})")
        too_many = exceeded("cells", table.combinations * seeds)
        if too_many:
            raise ConfigError(f"{source}: defense[{index}].grid: {table.combinations:,} combinations × {seeds} "
                              f"seed(s) = {too_many}")
        try:
            for run in table.variants():
                run.params()
        except ValidationError as error:
            where = error.errors()[0]["loc"][:1]
            prefix = ("defense", index, "grid") if where and where[0] in table.grid else ("defense", index)
            raise ConfigError(f"{source}: {_one_line(error, prefix, allowed)}") from None
    for index, table in enumerate(campaign.attack):
        try:
            table.attack()
            campaign.targets(index)
        except ValidationError as error:
            raise ConfigError(f"{source}: {_one_line(error, ('attack', index))}") from None
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{source}: attack[{index}]: {error}") from None
    for what, tables in (("attack", campaign.attack), ("membership", campaign.membership), ("audit", campaign.audit)):
        for index, table in enumerate(tables):
            wrong = table.misplaced()
            if wrong:
                raise ConfigError(f"{source}: {what}[{index}].{wrong[0]}: {wrong[1]}")
    for index in range(len(campaign.membership)):
        try:
            campaign.membership_targets(index)
        except ValueError as error:
            raise ConfigError(f"{source}: membership[{index}]: {error}") from None
    for index, table in enumerate(campaign.audit):
        if table.kind == "mechanism":
            params = MECHANISMS[table.mechanism].Params
            try:
                strictly(params, table.params)
            except ValidationError as error:
                raise ConfigError(f"{source}: {_one_line(error, ('audit', index, 'params'), list(params.model_fields))}"
                                  ) from None
            for samples in [table.samples, *table.curve]:
                check_size(table.dim, table.releases, samples, f"{source}: audit[{index}]: ")
        try:
            campaign.audit_targets(index)
        except ValueError as error:
            raise ConfigError(f"{source}: audit[{index}]: {error}") from None
        if table.kind == "position":
            _check_pairs(campaign, index, source)
    too_many = exceeded("cells", campaign.cell_count())
    if too_many:
        raise ConfigError(f"{source}: the campaign's cells: {too_many}")
    campaign._text = text if text is not None else toml_text(document, KEPT_HEADER)
    return campaign


KEPT_HEADER = ("A campaign given to privaudit from Python, kept as the campaign file it is equivalent to\n"
               "(privaudit run of this file runs the same cells).")


def _check_pairs(campaign: Campaign, index: int, source: str) -> None:
    """ConfigError when position audit `index` pairs more victims with attackers on one of its
    runs (each value of a grid's agents) than the `pairs` limit, before anything is built: each pair
    is a least-squares model of the run, solved when the audit is checked and again when it runs
    (every victim of a complete graph of 40 agents kept `check` busy 9 minutes; of 150, 22,350
    pairs, for hours)."""
    table = campaign.audit[index]
    for target in campaign.audit_targets(index):
        defense = campaign.defense[target]
        for agents in defense.grid.get("agents", [defense.agents]):
            victims, attackers = table.pairs(agents)
            too_many = exceeded("pairs", victims * attackers)
            if too_many:
                raise ConfigError(f"{source}: audit[{index}]: {victims:,} victim(s) × {attackers:,} attacker(s) on "
                                  f"'{defense.name}' ({agents:,} agents) = {too_many}")


BOM = "\ufeff"
"""A byte-order mark: editors on Windows (Notepad among them) write one at the start of a UTF-8
file. It carries no content and no byte order in UTF-8, so a campaign file's is dropped, as
Python's 'utf-8-sig' codec does, rather than failing as "Invalid statement" on line 1."""


def _read_text(path: Path) -> str:
    """A campaign file's text (TOML is UTF-8; a leading byte-order mark is dropped: `BOM`);
    ConfigError naming the file when it cannot be read or is not UTF-8."""
    try:
        data = read_regular(path, CAMPAIGN_BYTES, "campaign file")
    except FileNotFoundError:
        raise ConfigError(f"campaign file not found: {path}") from None
    except PrivauditError as error:
        raise ConfigError(str(error)) from None
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte {data[error.start]:#04x} on line {line}); TOML files are "
                          "UTF-8") from None


def _parse_text(text: str, source: str, allow_code: bool = False) -> Campaign:
    """Parse and validate a campaign's TOML text, its nesting bounded before the parser runs
    (`privaudit.campaign.document.too_deep`). Besides its own decode errors, the parser lets one
    ValueError through: Python's refusal to read an integer of more digits than
    `sys.get_int_max_str_digits()`, which no TOML integer (64-bit, 19 digits) has."""
    line = too_deep(text)
    if line is not None:
        raise ConfigError(f"{source}: line {line}: tables and arrays nested too deeply (more than {MAX_NESTING} "
                          "levels; each part of a dotted key or table header, and each bracket, is one)")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: invalid TOML: {error}") from None
    except ValueError:
        raise ConfigError(f"{source}: invalid TOML: an integer of more than {sys.get_int_max_str_digits():,} digits "
                          "(TOML integers are 64-bit: at most 19 digits)") from None
    return parse_campaign(raw, source=source, allow_code=allow_code, text=text)


def _consent(raw: dict[str, Any], allow_code: bool) -> Consent:
    """The consent to import code that validating `raw` carries: the modules its validated
    `[campaign]` table lists, and `allow_code`. An invalid `[campaign]` table grants nothing (its
    own error is reported when the campaign is validated)."""
    try:
        info = strictly(CampaignInfo, raw.get("campaign", {}))
    except (ValidationError, AttributeError):
        return NO_CONSENT
    return Consent(tuple(info.imports), allow_code)


def load_campaign(path: str | Path, *, allow_code: bool = False) -> Campaign:
    """Read and validate a campaign file (`allow_code`: `parse_campaign`)."""
    return _parse_text(_read_text(Path(path)), str(path), allow_code)


DEMO = "demo.toml"


def embedded_campaign_text(name: str = DEMO) -> str:
    """A campaign shipped in the `campaigns` package (the default one is demo.toml)."""
    return (resources.files("privaudit.presets") / name).read_text()


def read_campaign(path: str | Path | None, *, allow_code: bool = False) -> tuple[Campaign, str]:
    """The campaign at `path`, or the embedded default when None, with its source text
    (`allow_code`: `parse_campaign`)."""
    text = embedded_campaign_text() if path is None else _read_text(Path(path))
    return _parse_text(text, f"privaudit/presets/{DEMO}" if path is None else str(path), allow_code), text
