"""The results rows' schema: one typed, versioned record per row type, shared by the writer and the reader.

A results folder outlives the code that wrote it and can be edited by hand, so a report must not
trust a row because it parses as JSON: an integer of 400 digits, "nan" as text, a list where a
number belongs, a missing `rounds` or a null claim each crashed it. Every row therefore carries
the version of this schema it was written under (`SCHEMA_KEY`, not the package's version: a
release that changes no row keeps it), the campaign checks each row against it before appending
(`checked`, so writer and reader cannot drift), and the one reader (`privaudit.store`) checks
each line against it, keeping the rows that hold and naming, line by line, the ones it skipped and
why.

The models declare what the report reads, with the types it formats (the fields each section
indexes without a default, and every number it prints); other keys pass through untouched, so a
row may carry more than the report shows. Numbers are `Number`: an int or a float, never a bool
or text, within a float's range; inf and nan are numbers (the row's `nonfinite` list restores
them), except where a field says finite. Version history:

* 1 — the rows as written since the schema was introduced; a row without `SCHEMA_KEY` (written
  before) is read as version 1, whose layout it has. Optional fields added since (`model_note`,
  `config.data.content`, `device`, a membership row's `released` and `by_victim`, a position
  pair's `released`) keep the version: a reader of 1 passes them through and reads every row it
  read before. So does an inversion row's `active` (issue 39: an active attack's record, with the
  passive attack on the same run beside it), absent from every passive attack's row, and the
  claim's threat model (issue 39: a training row's `claim.threat`, beside its `neighbours`, and a
  verdict's `threat`, naming the adversary the judged claim is stated against), absent from rows
  written before it and from claims of no privacy; and a canary audit row's `active` (issue 39
  item 3: who steered the victim and what it assumed), absent from every passive audit's row.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, TypeAdapter, ValidationError,
                      model_validator)

SCHEMA = 1
SCHEMA_KEY = "schema"


def _a(value: Any) -> str:
    """'a str', 'an int', 'null': what a JSON value is, for an error."""
    name = "null" if value is None else type(value).__name__
    return name if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _number(value: Any) -> float:
    """An int or a float (a bool or a string is not a number), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{_a(value)} where a number belongs")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"an integer of {len(str(abs(value)))} digits, beyond any number a report shows") from None


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{_a(value)} where a whole number belongs")
    if abs(value) > 2**63:
        raise ValueError(f"an integer of {len(str(abs(value)))} digits, beyond any count")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{_a(value)} where text belongs")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{value} where a finite number belongs")
    return value


Number = Annotated[float, BeforeValidator(_number)]
Finite = Annotated[float, BeforeValidator(lambda value: _finite(_number(value)))]
Whole = Annotated[int, BeforeValidator(_whole)]
Text = Annotated[str, BeforeValidator(_text)]
NonFinite = Literal["inf", "-inf", "nan"]
"""How a mechanism audit's record writes an infinite or undefined value (as text, not restored)."""


class _Record(BaseModel):
    """A part of a row: the fields the report reads, typed; any other key passes."""

    model_config = ConfigDict(extra="allow")


class Finding(_Record):
    kind: Text
    text: Text


class ThreatRecord(_Record):
    """The adversary a claim's theorem is stated against (`privaudit.accounting.ClaimThreat`): its
    kind and where that reading comes from."""

    kind: Literal["honest-but-curious", "eavesdropper", "any adversary"]
    source: Text


class ClaimRecord(_Record):
    notion: Text | None = None
    adjacency: Text | None = None
    eps_claimed: Number | None = None
    eps_stated: Number | None = None
    eps_sound: Number | None = None
    delta: Number | None = None
    delta_sound: Number | None = None
    horizon: Whole | Text | None = None
    equation: Text | None = None
    sound_method: Text | None = None
    assumptions: list[Text] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    threat: ThreatRecord | None = None


class RunShape(_Record):
    rounds: Whole
    topology: Text
    agents: Whole


class DataContent(_Record):
    """A user's own data as a cell read it (`privaudit.data.Content`): where it came from, in words,
    and the SHA-256 of what was read (the image folder's files, the .npz file, a loader's arrays)."""

    source: Text
    sha256: Annotated[str, BeforeValidator(_text), Field(pattern="^[0-9a-f]{64}$")]


class DataRecord(_Record):
    """A training cell's `[data]` table as it ran (its other fields pass through); `content` only
    for a user's own data."""

    dataset: Text | None = None
    content: DataContent | None = None


class TrainingConfig(_Record):
    run: RunShape
    params: dict[str, Any] = Field(default_factory=dict)
    data: DataRecord = Field(default_factory=DataRecord)


class _Row(_Record):
    cell: Text
    label: Text | None = None
    seed: Whole | None = None
    status: Text | None = None
    wall_s: Number | None = None
    group: Text | None = None
    training: Text | None = None
    defense: Text | None = None
    defense_label: Text | None = None
    threat: Text | None = None
    device: Text | None = None
    """The device the row's work ran on ("cpu", "cuda:0": `privaudit.devices.name`): a CUDA device
    draws its own random numbers, so the same seed gives other, equally valid numbers there. Rows
    written before every row named it have none."""


class NoiseDeclaration(_Record):
    """Which hyperparameters are a run's noise (`privaudit.attacks.views.noise`): name → [label, whether
    more means more privacy], a switch that turns noise off, and companions that move with it."""

    parameters: dict[str, tuple[Text, StrictBool]]
    switch: Text | None = None
    companions: list[Text] = Field(default_factory=list)


def _evaluation(value: Any) -> Any:
    """A history entry: a dict of numbers that has its round."""
    if not isinstance(value, dict):
        raise ValueError(f"{_a(value)} where an evaluation (a dict of numbers) belongs")
    if "round" not in value:
        raise ValueError("an evaluation without its round")
    return value


class TrainingRow(_Row):
    label: Text
    title: Text
    seed: Whole
    config: TrainingConfig
    metrics: dict[str, Number | None]
    claim: ClaimRecord | None
    history: list[Annotated[dict[str, Number], BeforeValidator(_evaluation)]]
    messages: dict[str, Whole]
    noise: NoiseDeclaration | None = None
    model_note: Text | None = None
    """How the model differs from what its name says (BatchNorm replaced by GroupNorm, ...), or None."""


class Metrics(_Record):
    mse: Number | None = None
    psnr: Number | None = None
    ssim: Number | None = None
    lpips: Number | None = None
    label_acc: Number | None = None


class LpipsBackbone(_Record):
    """The weights file LPIPS was computed with (`privaudit.weights.Backbone.record`): `published`
    says whether its SHA-256 is torchvision's published one; only then is the value the published
    metric."""

    published: StrictBool
    sha256: Text
    file: Text


class Leak(_Record):
    leak: StrictBool
    confidence: Number


class TracePoint(_Record):
    iteration: Whole
    mse: Number | None = None
    psnr: Number | None = None


class ActiveSide(_Record):
    """One side of an active attack's trial (`privaudit.campaign.active_findings`): the lied run's
    attack, or the passive one on the same run; each record's PSNR and SSIM (−inf / nan for a
    record left unpaired) and how many reached the record's `threshold_db`."""

    label: Text
    status: Text | None = None
    metrics: Metrics | None = None
    psnr: list[Number] = Field(default_factory=list)
    ssim: list[Number] = Field(default_factory=list)
    recovered: Whole
    leak: Leak | None = None
    baseline: Metrics | None = None


class ActiveRecord(_Record):
    """What an active attack assumed (in words), who lied (`liar`, one of the colluding `agents`) to
    which victim at which override `round`, a summary of what it sent (numbers, not the tensor), and
    both sides of its trial: `active` and `passive` (the same agents listening, the same seed)."""

    kind: Text
    assumptions: list[Text]
    liar: Whole
    agents: list[Whole]
    victim: Whole
    round: Whole
    recovery_round: Whole
    threshold_db: Number
    records: Whole
    sent: dict[str, Number | Text]
    active: ActiveSide
    passive: ActiveSide


class InversionRow(_Row):
    attack: Text | None = None
    attack_title: Text | None = None
    scenario: Text | None = None
    victim: Whole | None = None
    round: Whole | None = None
    iterations: Whole | None = None
    metrics: Metrics = Field(default_factory=Metrics)
    lpips_status: Text | None = None
    lpips_backbone: LpipsBackbone | None = None
    baseline: Metrics | None = None
    leak: Leak | None = None
    trace: list[TracePoint] = Field(default_factory=list)
    setting: dict[str, Any] = Field(default_factory=dict)
    artifacts: dict[str, Text] = Field(default_factory=dict)
    warnings: list[Text] = Field(default_factory=list)
    reconstruction_audit: AuditRow | None = Field(None, description=(
        "the reconstruction game a leak on a run with a DP claim played, an audit row of its own "
        "(`privaudit.campaign.inversion_findings.leak_bound`); absent when the inversion did not leak"))
    active: ActiveRecord | None = Field(None, description=(
        "an active attack's record, with the passive attack on the same run beside it "
        "(`privaudit.campaign.active_findings`); absent from a passive attack's row"))


class CoalitionAgent(_Record):
    agent: Whole
    relative_error: Number | None = None
    metrics: Metrics | None = None
    baseline: Metrics | None = None


class CoalitionRow(_Row):
    agents: list[CoalitionAgent]
    coalition: list[Whole] = Field(default_factory=list)
    window: Whole | None = None


class Roc(_Record):
    fpr: list[Number]
    tpr: list[Number]

    @model_validator(mode="after")
    def _paired(self) -> Roc:
        if not self.fpr or len(self.fpr) != len(self.tpr):
            raise ValueError(f"an ROC of {len(self.fpr)} false- and {len(self.tpr)} true-positive rates")
        return self


Interval = tuple[Number, Number]


class MethodMetrics(_Record):
    """One membership method's scores: `auc`, `balanced_accuracy`, `tpr@<fpr>` (a TPR at that
    false-positive rate), each with its bootstrap interval `<name>_ci`, the ROC and the counts."""

    auc: Number | None = None
    balanced_accuracy: Number | None = None
    confidence: Number | None = None
    members: Whole | None = None
    non_members: Whole | None = None
    roc: Roc | None = None

    @model_validator(mode="after")
    def _rates_and_intervals(self) -> MethodMetrics:
        for key, value in (self.model_extra or {}).items():
            if key.endswith("_ci"):
                _checked(_INTERVAL, key, value)
            elif key.startswith("tpr@"):
                rate = key.removeprefix("tpr@")
                try:
                    valid = 0 < float(rate) <= 1
                except ValueError:
                    valid = False
                if not valid:
                    raise ValueError(f"'{key}' names no false-positive rate in (0, 1]")
                _checked(_RATE, key, value)
        return self


def _checked(adapter: TypeAdapter, key: str, value: Any) -> None:
    """`value` checked by `adapter`; a ValueError naming `key` (a key pydantic's location lacks)."""
    try:
        adapter.validate_python(value)
    except ValidationError as error:
        raise ValueError(f"{key}: {error.errors()[0]['msg'].removeprefix('Value error, ')}") from None


_INTERVAL = TypeAdapter(Interval | None)
_RATE = TypeAdapter(Number | None)


class ReleaseRecord(_Record):
    """What a membership attacker on a final model received for one victim
    (`privaudit.threats.Release`): the threat ("released_model", "released_average"; the average
    of `target = "average"` is "released_average"), the agents whose final models were averaged
    (one for `released_model`) and the release in words."""

    victim: Whole
    threat: Text
    agents: list[Whole] = Field(min_length=1)
    words: Text


class VictimMembership(_Record):
    """One victim's own membership metrics in a row that pools several: its members and the
    non-members dealt to it, against its own model, per method (as `MethodMetrics`, without ROC)."""

    victim: Whole
    metrics: dict[str, MethodMetrics | None]


class MembershipRow(_Row):
    round: Whole | None = None
    metrics: dict[str, MethodMetrics | None]
    rmia_a: Number | None = None
    victims: list[Whole] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)
    released: list[ReleaseRecord] | None = Field(None, description=(
        "on a final model (round null): what the attacker received per victim; absent in rows written before "
        "issue 38 and on intercepted models"))
    by_victim: list[VictimMembership] | None = Field(None, description=(
        "with several victims: each one's metrics beside the pooled `metrics`; absent for one victim (the pooled "
        "metrics are its own) and in rows written before issue 38"))


class Verdict(_Record):
    status: Text
    reason: Text | None = None
    statement: Text | None = None
    conditions: list[Text] = Field(default_factory=list)
    threat: Text | None = Field(None, description=(
        "the judged claim's threat model in words (`privaudit.accounting.ClaimThreat.words`); absent in rows "
        "written before issue 39 and where the claim states none"))


class CurvePoint(_Record):
    samples: Number | None = None


class Tightness(_Record):
    of: Literal["eps", "delta"]
    sound: Number | NonFinite | None = None
    exact: Number | NonFinite | None = None


class Exact(_Record):
    eps: Number | NonFinite | None = None
    delta: Number | NonFinite | None = None
    at_delta: Number | NonFinite | None = None
    at_eps: Number | NonFinite | None = None
    method: Text | None = None


class PairFigure(_Record):
    """One of the pairwise network accountant's figures for a pair (`privaudit.network_accounting`);
    `rho` its Rényi curve's slope (D_α ≤ α ρ), where rows since issue 38 give it."""
    epsilon: Number | NonFinite | None = None
    rho: Number | NonFinite | None = None
    method: Text | None = None
    assumptions: list[Text] = Field(default_factory=list)


class PairFigures(_Record):
    claimed: PairFigure | None = None
    linear: PairFigure | None = None
    central: PairFigure | None = None
    reason: Text | None = None


class FormulaFinding(_Record):
    """What a pair of Muffliato's averaging says of its formula as computed
    (`privaudit.attacks.audit.position.formula_finding`): below the exact loss of the view it bounds
    or not, the audit's ε_LB above its ε or not, in words."""
    below: StrictBool
    audit_above: StrictBool
    text: Text


class ReleasedTest(_Record):
    """The counted test of a released-model bound: its rates and their upper bounds on `samples`
    fresh runs per side."""
    fpr: Number
    fnr: Number
    fpr_upper: Number
    fnr_upper: Number
    samples: Whole


class ReleasedPair(_Record):
    """A position pair's released-model bound (`privaudit.attacks.audit.position.released_bound`,
    rows since issue 38): what agent `agent` forces from its own final model alone, with the
    transcript's δ and confidence; `ratio` its ε_LB over the transcript's (None where that is 0);
    `test` None where the victim does not reach the agent (ε = 0 exactly, unscored)."""
    agent: Whole
    eps_lb: Number
    ratio: Number | None = None
    separation: Number | None = None
    test: ReleasedTest | None = None
    unreached: Text | None = None


class PositionPair(_Record):
    """One attacker of a position audit (`privaudit.attacks.audit.position`): its agents, its graph distance
    from the victim, its bound and estimate, the pairwise figures and the pair's verdict."""
    victim: Whole | None = None
    attacker: list[Whole] = Field(min_length=1)
    distance: Whole
    eps_lb: Number
    eps_estimate: Number | None = None
    unreached: Text | None = None
    eps_pair_claimed: Number | NonFinite | None = None
    eps_pair_linear: Number | NonFinite | None = None
    pairwise: PairFigures | None = None
    verdict: Verdict | None = None
    formula_finding: FormulaFinding | None = None
    released: ReleasedPair | None = None


class PositionGraph(_Record):
    """The graph a position audit ran on, for the report to draw: its agents and undirected edges."""
    agents: Whole
    edges: list[tuple[Whole, Whole]] = Field(default_factory=list)


class StatisticChoice(_Record):
    """Which statistic a whole-run canary audit counted its bound with
    (`privaudit.attacks.audit.canary_statistics.whole_run_bound`): its name ("sum", "round t"), how many
    candidates were compared, how many tests the union bound spans (1: none) and the confidence
    each was bounded at, in words under `method`."""
    chosen: Text
    candidates: Whole
    union: Whole
    confidence_each: Number
    method: Text


class ActiveAudit(_Record):
    """Who steered the victim of an active canary audit (`liar`, one of the colluding `agents`),
    how, and what it assumed, in words (`privaudit.attacks.active.steering`)."""

    liar: Whole
    agents: list[Whole]
    victim: Whole
    strategy: Text
    assumptions: list[Text]


class AuditRow(_Row):
    kind: Text | None = None
    confidence: Number | None = None
    samples: Whole | None = None
    eps_lb: Number | NonFinite | None = None
    delta_lb: Number | NonFinite | None = None
    eps_claimed: Number | NonFinite | None = None
    eps_stated: Number | NonFinite | None = None
    eps_sound: Number | NonFinite | None = None
    delta: Number | NonFinite | None = None
    delta_sound: Number | NonFinite | None = None
    delta_lb_eps: Number | NonFinite | None = None
    eps_estimate: Number | None = None
    verdict: Verdict | None = None
    curve: list[CurvePoint] | None = None
    findings: list[Finding] = Field(default_factory=list)
    tightness: Tightness | None = None
    exact: Exact | None = None
    pairs: list[PositionPair] | None = None
    graph: PositionGraph | None = None
    statistic_choice: StatisticChoice | None = None
    active: ActiveAudit | None = Field(None, description=(
        "an active canary audit's liar, strategy and assumptions (`privaudit.attacks.audit.canary_audit.Game.active`); "
        "absent from a passive audit's row"))


InversionRow.model_rebuild()

MODELS: dict[str, type[_Row]] = {
    "training": TrainingRow,
    "inversion": InversionRow,
    "coalition": CoalitionRow,
    "membership": MembershipRow,
    "audit": AuditRow,
}
"""Each row type's model; a row without `type` is a training row, as rows were before they carried one."""


def problem(row: dict[str, Any]) -> str | None:
    """Why `row` is not a row of this schema, in one phrase naming the field, or None."""
    version = row.get(SCHEMA_KEY, 1)
    if not (isinstance(version, int) and not isinstance(version, bool)) or version < 1:
        return f"row{_of(row)}: its {SCHEMA_KEY} {version!r} is not a schema version"
    if version > SCHEMA:
        return (f"row{_of(row)}: written under row schema {version}, newer than this privaudit reads ({SCHEMA}): "
                "upgrade privaudit")
    kind = row.get("type", "training")
    if not isinstance(kind, str) or kind not in MODELS:
        return f"unknown row type {kind!r}"
    try:
        MODELS[kind].model_validate(row)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"] if not _alternative(part)) or "the row"
        message = first["msg"].removeprefix("Value error, ")
        return f"{kind} row{_of(row)}: {where}: {message}"
    return None


def _alternative(part: Any) -> bool:
    """Whether a part of pydantic's error location names a member of a union (`int`,
    `function-before[...]`, `literal['inf']`) rather than a key of the row."""
    return isinstance(part, str) and ("[" in part or part in ("int", "float", "str", "bool", "none", "list", "dict",
                                                              "tuple"))


def _of(row: dict[str, Any]) -> str:
    cell = row.get("cell")
    return f" of cell {cell}" if isinstance(cell, str) else ""


def checked(row: dict[str, Any]) -> dict[str, Any]:
    """`row` stamped with this schema's version, once it holds; a row the campaign itself built
    that does not is a bug of privaudit, raised (not written where a report would skip it)."""
    stamped = {**row, SCHEMA_KEY: SCHEMA}
    found = problem(stamped)
    if found:
        raise RuntimeError(f"privaudit built a row its own schema refuses ({found})")
    return stamped
