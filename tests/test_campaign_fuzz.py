"""The campaign parser, fuzzed (Hypothesis): random TOML documents built around the real field
names and choices, with random values, and random bytes, never give a traceback — only a parsed
campaign (whose cells expand) or a one-line ConfigError, exit code 2 through the CLI.

Documents mostly use real table and field names and plausible values, so that many get past the
first checks to the deep ones (grids, per-defense parameters, attack parameters, targets,
duplicates, limits); every value can also be any TOML value, inf and nan included. Audits are
fuzzed once more per kind (per mechanism for a mechanism audit) inside an otherwise valid campaign,
so that each audit's own checks are reached by construction rather than by chance."""

import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privaudit.attacks.audit.canaries import CANARY_KINDS
from privaudit.attacks.audit.mechanisms import MECHANISMS, NORMS
from privaudit.attacks.inversion import INVERSIONS
from privaudit.attacks.views import EXTRACTORS
from privaudit.defenses import DEFENSES
from privaudit.campaign.cells import expand_all
from privaudit.campaign.config import (AUDIT_KINDS, CANARY_METHODS, MEMBERSHIP_TARGETS, PROTOCOLS, AttackConfig,
                                       AuditConfig, CampaignInfo, DataConfig, MembershipConfig, RunConfig,
                                       load_campaign)
from privaudit.cli import main
from privaudit.data import DATASETS, PARTITIONS
from privaudit.errors import ConfigError, printable
from privaudit.models import MODELS
from privaudit.synthetic import SYNTHETIC
from privaudit.threats import THREATS
from privaudit.topology import MIXING_RULES, TOPOLOGIES

LABELS = ("a", "b", "dpsgd", "DP")
CHOICES = {
    "topology": list(TOPOLOGIES), "mixing": list(MIXING_RULES), "model": list(MODELS),
    "dataset": list(DATASETS + SYNTHETIC), "partition": list(PARTITIONS), "threat": list(THREATS),
    "mechanism": list(MECHANISMS), "adjacency": list(NORMS), "method": list(CANARY_METHODS),
    "protocol": list(PROTOCOLS), "canary": list(CANARY_KINDS), "target": list(MEMBERSHIP_TARGETS),
    "lira_variance": ["global", "per_example"], "scenario": sorted({s for _, s in EXTRACTORS}),
    "horizon": ["run", "infinite"], "on_overflow": ["clip", "raise"], "optimizer": ["lbfgs", "adam"],
    "dtype": ["float32", "float64"], "line_search": ["strong_wolfe"], "label": list(LABELS),
}
JUNK_KEYS = ["lrr", "seed", "Kind", ""]

small = st.one_of(st.integers(0, 12), st.sampled_from([0.5, 0.1, 1e-5, 0.95, 2.0]))
numbers = st.one_of(st.integers(-3, 300), st.integers(), st.sampled_from([10**6, 10**20, -(10**20), 2**63]),
                    st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1))
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
scalars = st.one_of(numbers, st.booleans(), text)
anything = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(text, inner, max_size=3)),
                        max_leaves=6)


def often(likely: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    """`likely` nine times in ten, else `rare`: most documents get past the first checks."""
    return st.sampled_from([likely] * 9 + [rare]).flatmap(lambda chosen: chosen)


def likely(key: str, kind: str) -> st.SearchStrategy:
    """A value field `key` could take, from its name and its declared type `kind` (as text)."""
    if key in CHOICES:
        return st.sampled_from(CHOICES[key])
    if key in ("defense", "channels"):
        return st.lists(st.sampled_from(LABELS + ("model", "cross_gradient")), max_size=2)
    if key == "links":
        return st.lists(st.lists(st.integers(0, 8), min_size=2, max_size=2), max_size=3)
    if "list[" in kind or "tuple[" in kind:
        return st.lists(st.one_of(st.integers(0, 40), st.sampled_from([0.01, 0.5, 1000])), min_size=1, max_size=3)
    if "bool" in kind:
        return st.booleans()
    if "dict[" in kind:
        return st.dictionaries(st.sampled_from(["width", "depth", "alpha"]), small, max_size=2)
    if "str" in kind or "Path" in kind:
        return text
    return small


def value(key: str, kind: str = "") -> st.SearchStrategy:
    """A value for field `key`: mostly one it could take, now and then anything."""
    return often(likely(key, kind), anything)


def _fields(model) -> dict[str, str]:
    """A pydantic model's or a dataclass's fields, each with its declared type as text."""
    if hasattr(model, "model_fields"):
        return {name: repr(field.annotation) for name, field in model.model_fields.items()}
    return {name: str(field.type) for name, field in getattr(model, "__dataclass_fields__", {}).items()}


def table(fields: dict[str, str], fixed: dict[str, st.SearchStrategy] | None = None) -> st.SearchStrategy[dict]:
    """A table with a few of `fields` (now and then a junk key), each with a `value`."""
    names = often(st.sampled_from(list(fields)), st.sampled_from(JUNK_KEYS))
    keys = st.lists(names, max_size=4, unique=True)
    return keys.flatmap(lambda chosen: st.fixed_dictionaries(
        {**{key: value(key, fields.get(key, "")) for key in chosen}, **(fixed or {})}))


def grid(fields: dict[str, str]) -> st.SearchStrategy[dict]:
    """A grid over one field (now and then a junk one), up to three values."""
    names = often(st.sampled_from(list(fields)), st.sampled_from(JUNK_KEYS))
    return names.flatmap(lambda key: st.fixed_dictionaries(
        {key: st.lists(value(key, fields.get(key, "")), max_size=3)}))


def defense_table() -> st.SearchStrategy[dict]:
    def of_kind(kind: str) -> st.SearchStrategy[dict]:
        fields = _fields(RunConfig) | _fields(getattr(DEFENSES.get(kind), "Params", RunConfig))
        extras = {"grid": grid({k: v for k, v in fields.items() if k not in ("grid", "data")}),
                  "data": table(_fields(DataConfig))}
        chosen = st.lists(st.sampled_from(list(extras)), max_size=1, unique=True)
        base = {k: v for k, v in fields.items() if k not in extras}
        return st.tuples(table(base, {"kind": st.just(kind)}), chosen.flatmap(
            lambda keys: st.fixed_dictionaries({key: extras[key] for key in keys}))).map(lambda pair: pair[0] | pair[1])

    return often(st.sampled_from(list(DEFENSES)), st.just("dpsdg")).flatmap(of_kind)


def attack_table() -> st.SearchStrategy[dict]:
    def of_kind(kind: str) -> st.SearchStrategy[dict]:
        fields = _fields(AttackConfig) | _fields(INVERSIONS.get(kind))
        return table(fields, {"kind": st.just(kind), "rounds": value("rounds", fields["rounds"])})

    return often(st.sampled_from(list(INVERSIONS)), st.just("dgl")).flatmap(of_kind)


def audit_of(kind: str, mechanism: str | None = None) -> st.SearchStrategy[dict]:
    """An audit table of `kind` (of `mechanism` for a mechanism audit: any one when None), with a
    few random fields and, for a mechanism, random parameters of its own."""
    fixed = {"kind": st.just(kind)}
    if kind != "mechanism":
        return table(_fields(AuditConfig), fixed)
    names = st.just(mechanism) if mechanism else st.sampled_from(list(MECHANISMS))
    return names.flatmap(lambda name: table(_fields(AuditConfig), fixed | {
        "mechanism": st.just(name), "params": table(_fields(MECHANISMS[name].Params))}))


def audit_table() -> st.SearchStrategy[dict]:
    return st.sampled_from(list(AUDIT_KINDS)).flatmap(audit_of)


documents = st.fixed_dictionaries(
    {"defense": st.lists(defense_table(), min_size=1, max_size=3)},
    optional={
        "campaign": table(_fields(CampaignInfo)),
        "data": table(_fields(DataConfig), {"dataset": value("dataset")}),
        "attack": st.lists(attack_table(), max_size=2),
        "membership": st.lists(table(_fields(MembershipConfig)), max_size=2),
        "audit": st.lists(audit_table(), max_size=2),
    },
).flatmap(lambda document: often(st.just(document), st.just(document | {"extra": 1})))

NEEDED = {"dpdl": {"noise_multiplier": 1.0}}
"""What a defense cannot run without (every other field has a default)."""

AUDITS = [(kind, None) for kind in AUDIT_KINDS if kind != "mechanism"] + [("mechanism", name) for name in MECHANISMS]
"""Every kind of audit, a mechanism audit once per mechanism: each is fuzzed on its own."""


def audited(kind: str, mechanism: str | None) -> st.SearchStrategy[dict]:
    """Random audit tables of one kind in a campaign that is valid without them (one or two
    defenses on their defaults, labelled as the audits' `defense` fields may name them): every
    document reaches that audit's own checks, which a random document seldom does (most fail at a
    defense first)."""
    defense = st.tuples(st.sampled_from(list(DEFENSES)), st.sampled_from(LABELS)).map(
        lambda pair: {"kind": pair[0], "label": pair[1]} | NEEDED.get(pair[0], {}))
    return st.fixed_dictionaries({"defense": st.lists(defense, min_size=1, max_size=2,
                                                      unique_by=lambda table: table["label"]),
                                  "audit": st.lists(audit_of(kind, mechanism), min_size=1, max_size=2)})


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def toml(value) -> str:
    """`value` written as TOML (inline tables and arrays: a document is one `key = value` line per
    top-level key)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(map(toml, value)) + "]"
    return "{" + ", ".join(f"{_key(key)} = {toml(item)}" for key, item in value.items()) + "}"


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key, ensure_ascii=False)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _parses_or_fails_in_one_line(path, capsys) -> None:
    """The property: a campaign whose cells expand, or one ConfigError line, exit 2 in the CLI."""
    try:
        expand_all(load_campaign(path))
    except ConfigError as error:
        assert str(error) and "\n" not in str(error)
        assert main(["claims", str(path)]) == 2
        err = capsys.readouterr().err
        named = str(error) if str(error).startswith(f"{path}: ") else f"{path}: {error}"
        assert err == f"privaudit: error: {printable(named)}\n"


def _write(folder, document: dict):
    path = folder / "campaign.toml"
    path.write_text("\n".join(f"{_key(key)} = {toml(item)}" for key, item in document.items()) + "\n")
    return path


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=documents)
def test_random_campaigns_parse_or_fail_in_one_line(folder, capsys, document):
    """A few hundred random documents; `test_random_audits_of_each_kind_parse_or_fail_in_one_line`
    reaches every audit's checks, and the slow test below draws a thousand."""
    _parses_or_fails_in_one_line(_write(folder, document), capsys)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=documents)
def test_a_thousand_random_campaigns_parse_or_fail_in_one_line(folder, capsys, document):
    _parses_or_fails_in_one_line(_write(folder, document), capsys)


@pytest.mark.parametrize("kind, mechanism", AUDITS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_audits_of_each_kind_parse_or_fail_in_one_line(folder, capsys, kind, mechanism, data):
    """Ten documents per kind (a valid lt_admm_round audit costs seconds: its check computes the
    mechanism's privacy-loss distribution); the slow test below draws a hundred."""
    _parses_or_fails_in_one_line(_write(folder, data.draw(audited(kind, mechanism))), capsys)


@pytest.mark.slow
@pytest.mark.parametrize("kind, mechanism", AUDITS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_hundred_random_audits_of_each_kind_parse_or_fail_in_one_line(folder, capsys, kind, mechanism, data):
    _parses_or_fails_in_one_line(_write(folder, data.draw(audited(kind, mechanism))), capsys)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=120), st.text(max_size=120).map(lambda text: text.encode("utf-8",
                                                                                                    "surrogatepass"))))
def test_random_bytes_parse_or_fail_in_one_line(folder, capsys, data):
    path = folder / "bytes.toml"
    path.write_bytes(data)
    _parses_or_fails_in_one_line(path, capsys)
