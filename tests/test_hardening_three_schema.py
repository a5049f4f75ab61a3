"""Issue 35 (hardening, round three), the campaign schema and the work a campaign can ask for: each
test reproduces one hostile input of the probe and checks the one-line error (exit 2) or the
bounded outcome, in a second or two, with no traceback."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privaudit
from privaudit.campaign.config import load_campaign, parse_campaign
from privaudit.campaign.document import NotACampaignValue, plain, too_deep
from privaudit.errors import ConfigError
from privaudit.limits import MAX_NESTING
from privaudit.synthetic import check_size
from tests.helpers import one_line_error

DPSGD = ('[data]\ndataset = "digits"\nmax_train = 200\n'
         '[[defense]]\nkind = "dpsgd"\nagents = 4\nrounds = 2\nbatch_size = 8\n')


def _check_error(tmp_path, capsys, text: str, command: str = "check") -> str:
    """The one-line error of `privaudit <command>` on a campaign file holding `text`; it names the file."""
    path = tmp_path / "c.toml"
    path.write_text(text)
    err = one_line_error(capsys, [command, str(path)])
    assert f"{path}: " in err
    return err


def _refused(raw: dict, match: str) -> str:
    with pytest.raises(ConfigError) as error:
        parse_campaign(raw, source="c.toml")
    assert "\n" not in str(error.value) and match in str(error.value), str(error.value)
    return str(error.value)


def _campaign(*, defense: dict | None = None, **tables) -> dict:
    """A small campaign dict on digits: one dpsgd table (with `defense`'s keys) and `tables`."""
    return {"data": {"dataset": "digits", "max_train": 200},
            "defense": [{"kind": "dpsgd", "agents": 4, "rounds": 2, "batch_size": 8} | (defense or {})], **tables}


# 12. Nesting through dotted keys and table headers, bounded before the parser runs


@pytest.mark.parametrize("text", [
    DPSGD + "model_options." + ".".join(["a"] * 1000) + " = 1\n",
    "[" + ".".join(["z"] * 1000) + "]\nx = 1\n" + DPSGD,
    "[" + ".".join(["z"] * 50_000) + "]\nx = 1\n" + DPSGD,
    DPSGD + "model_options = " + "{a = " * 40 + "1" + "}" * 40 + "\n",
    DPSGD + "model_options = {" + ".".join(["b"] * 20) + " = {" + ".".join(["c"] * 20) + " = 1}}\n",
])
@pytest.mark.parametrize("command", ["check", "claims"])
def test_deep_dotted_keys_and_headers_are_one_line_before_parsing(tmp_path, capsys, text, command):
    started = time.perf_counter()
    err = _check_error(tmp_path, capsys, text, command)
    assert "nested too deeply" in err and f"more than {MAX_NESTING} levels" in err
    assert time.perf_counter() - started < 5


def test_a_document_at_the_bound_parses(tmp_path):
    """Nesting up to the bound is a campaign's business: the error, if any, is not about depth."""
    inside = "{" + ".".join(["a"] * (MAX_NESTING - 3)) + " = 1}"
    text = f'[[defense]]\nkind = "dpsgd"\nmodel_options = {inside}\n'
    assert too_deep(text) is None
    raw = tomllib.loads(text)
    assert plain(raw) == raw


_key = st.sampled_from(["a", "b.c", '"q.[{#"', "'l]'", "d-e"])
_scalar = st.sampled_from(['1', '1.5', '-0.5e3', '"x.y[z]#"', "'[{'", '"""m\n[.]"""', "'''\n{a.b}'''", "true"])


@st.composite
def _toml(draw, depth: int = 0) -> str:
    """A TOML value: a scalar, an array or an inline table, each key a dotted one at times."""
    kind = draw(st.sampled_from(["scalar", "array", "table"] if depth < 6 else ["scalar"]))
    if kind == "scalar":
        return draw(_scalar)
    items = draw(st.lists(_toml(depth + 1), max_size=3))
    if kind == "array":
        return "[" + ", ".join(items) + "]"
    return "{" + ", ".join(f"{draw(_key)}{i} = {item}" for i, item in enumerate(items)) + "}"


def _depth(value, level: int = 0) -> int:
    """The level of the deepest table or array of a parsed document (the document's own is 0)."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if children is None else max([level, *(_depth(child, level + 1) for child in children)])


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header=st.lists(_key, min_size=1, max_size=3), array=st.booleans(), key=st.lists(_key, min_size=1, max_size=3),
       value=_toml(), comment=st.sampled_from(["", " # [[{{.", "\n# ]]]"]))
def test_the_text_scan_and_the_walk_count_as_the_parser_nests(header, array, key, value, comment):
    """With the bound lowered to 3, so that random documents cross it often: on valid TOML the scan
    refuses exactly what the parser nests deeper, but for an array of tables' own level, which it
    does not count (the walk of the parsed document does); the walk refuses exactly that."""
    brackets = "[[{}]]" if array else "[{}]"
    text = f"{brackets.format('.'.join(header))}{comment}\n{'.'.join(key)} = {value}{comment}\n"
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("privaudit.campaign.document.MAX_NESTING", 3)
        scanned = too_deep(text) is not None
        try:
            plain(document)
            walked = False
        except NotACampaignValue:
            walked = True
    assert walked == (_depth(document) > 3)
    assert scanned == (_depth(document) - array > 3)


# 12. and 23. The same bound on any dict the Python API is given


def _deep(levels: int) -> dict:
    inner: dict = {"x": 1}
    for _ in range(levels):
        inner = {"a": inner}
    return inner


def test_a_self_referencing_or_deep_campaign_dict_is_one_config_error():
    loop: dict = {"kind": "dpsgd"}
    loop["model_options"] = loop
    _refused({"defense": [loop]}, "defense[0].model_options: contains itself")
    _refused({"defense": [{"kind": "dpsgd", "model_options": _deep(5000)}]}, "nested too deeply")
    _refused(_deep(5000), "nested too deeply")
    shared: list = []
    for _ in range(40):
        shared = [shared, shared]
    started = time.perf_counter()
    _refused({"defense": [{"kind": "dpsgd", "model_options": {"x": shared}}]}, "nested too deeply")
    assert time.perf_counter() - started < 2
    for raw in (_campaign(defense={"model_options": _deep(5000)}), {"campaign": {"name": "x"}, "defense": loop}):
        with pytest.raises(ConfigError):
            privaudit.load_campaign(raw)


def test_what_a_campaign_dict_may_hold_is_what_toml_holds():
    import datetime

    _refused(_campaign(defense={"lr": datetime.date(2020, 1, 1)}), "defense[0].lr: a date or time")
    _refused(_campaign(defense={"lr": {1, 2}}), "defense[0].lr: not a campaign value: a set")
    _refused(_campaign(defense={"model_options": {1: 2}}), "a table's keys are text, got 1")
    table = MappingProxyType({"kind": "dpsgd", "agents": 4, "lr": 0.5})
    assert parse_campaign({"defense": [table]}).defense[0].params().lr == 0.5
    assert parse_campaign({"defense": ({"kind": "dpsgd", "agents": 4},)}).defense[0].agents == 4


# 13. An attack's batch_size: bounded, and checked against the victim's records at check


@pytest.mark.parametrize("size", [10**6, 10**7])
def test_an_attack_batch_larger_than_the_victims_records_is_refused_at_check(tmp_path, capsys, size):
    err = _check_error(tmp_path, capsys, DPSGD + f'[[attack]]\nkind = "dlg"\nrounds = [0]\nbatch_size = {size}\n')
    assert f"attack[0] (dlg on dpsgd, seed 0, round 0): batch_size {size:,} exceeds the records of the attacked " \
           "agent (50)" in err


def test_an_attack_batch_beyond_the_records_limit_is_refused_by_the_schema():
    _refused(_campaign(attack=[{"kind": "dlg", "rounds": [0], "batch_size": 10**11}]),
             "attack[0].batch_size: 100,000,000,000 exceeds the limit of 10,000,000 records")


def test_a_coalition_attack_batch_is_checked_against_the_agents_it_attacks(tmp_path, capsys):
    text = (DPSGD.replace("agents = 4", "agents = 4\ntopology = \"complete\"") +
            '[[attack]]\nkind = "dlg"\nthreat = "coalition"\nagents = [0]\nrounds = [0]\nwindow = 1\nbatch_size = 51\n')
    assert "batch_size 51 exceeds the records of the attacked agent (50)" in _check_error(tmp_path, capsys, text)


# 14. Synthetic data: the total records and their memory, before anything is drawn


@pytest.mark.parametrize("agents", [4, 100])
def test_synthetic_records_over_all_agents_are_bounded_before_drawing(agents):
    started = time.perf_counter()
    with pytest.raises(ValueError, match=rf"'logistic' for {agents} agents × 10,000,000 samples per agent: "
                                         rf"{agents * 10**7:,} exceeds the limit of 10,000,000 records"):
        check_size("logistic", agents, 10**7)
    assert time.perf_counter() - started < 0.5


def test_a_synthetic_campaign_over_the_records_limit_fails_check_at_once(tmp_path, capsys, monkeypatch):
    """Each agent within the limit, the run over it: refused before a record is drawn."""
    monkeypatch.setenv("PRIVAUDIT_MAX_RECORDS", "1000")
    text = '[data]\ndataset = "logistic"\nsamples_per_agent = 500\n[[defense]]\nkind = "dpsgd"\nagents = 4\n' \
           'model = "logreg"\nrounds = 2\nbatch_size = 8\nmodel_options = { binary = true }\n'
    err = _check_error(tmp_path, capsys, text)
    assert "'logistic' for 4 agents × 500 samples per agent: 2,000 exceeds the limit of 1,000 records" in err
    assert "PRIVAUDIT_MAX_RECORDS=2000" in err


def test_synthetic_records_are_bounded_by_memory(monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", "1")
    with pytest.raises(ValueError, match=r"generating 'estimation_wz' takes 20,000 records × 150 bytes = 3 MB: 3 "
                                         r"exceeds the limit of 1 megabytes"):
        check_size("estimation_wz", 4, 5000)


# 16. Layers, a position audit's pairs and an inversion's evaluations


def test_a_model_of_a_hundred_thousand_layers_is_refused_at_once(tmp_path, capsys):
    text = DPSGD + 'model = "mlp"\nmodel_options = { hidden = [' + ", ".join(["4"] * 100_000) + "] }\n"
    started = time.perf_counter()
    err = _check_error(tmp_path, capsys, text)
    assert "defense[0] (dpsgd, seed 0): hidden: 100,000 exceeds the limit of 1,000 hidden layers" in err
    assert "PRIVAUDIT_MAX_LAYERS=100000" in err
    assert time.perf_counter() - started < 10


def test_every_victim_of_a_large_complete_graph_is_refused_before_any_check(tmp_path, capsys):
    text = ('[data]\ndataset = "digits"\n[[defense]]\nkind = "dp_dpsgd"\ntopology = "complete"\nagents = 150\n'
            'model = "logreg"\nrounds = 20\nbatch_size = 2\n[[audit]]\nkind = "position"\nvictims = "all"\nruns = 16\n')
    started = time.perf_counter()
    err = _check_error(tmp_path, capsys, text)
    assert ("audit[0]: 150 victim(s) × 149 attacker(s) on 'dp_dpsgd' (150 agents) = 22,350 exceeds the limit of "
            "1,000 victim–attacker pairs") in err
    assert time.perf_counter() - started < 5


def test_position_pairs_count_each_grid_value_of_agents_and_the_attackers_given(monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_MAX_PAIRS", "20")
    position = {"kind": "position", "victims": "all", "runs": 16}
    parse_campaign(_campaign(defense={"kind": "dp_dpsgd", "grid": {"agents": [4, 5]}}, audit=[position]))
    _refused(_campaign(defense={"kind": "dp_dpsgd", "grid": {"agents": [4, 6]}}, audit=[position]),
             "audit[0]: 6 victim(s) × 5 attacker(s) on 'dp_dpsgd' (6 agents) = 30 exceeds the limit of 20")
    parse_campaign(_campaign(defense={"kind": "dp_dpsgd", "agents": 8}, audit=[position | {"attackers": [1, 2]}]))


@pytest.mark.parametrize("attack, field", [("dlg", "evaluations"), ("idlg", "evaluations"), ("ig", "iterations"),
                                          ("batch", "evaluations")])
def test_an_inversions_evaluations_are_bounded(attack, field):
    _refused(_campaign(attack=[{"kind": attack, "rounds": [0], field: 10**12}]),
             f"attack[0].{field}: 1,000,000,000,000 exceeds the limit of 1,000,000 loss evaluations")


# 17. and 18. Rates and thresholds in their ranges


@pytest.mark.parametrize("fprs, match", [
    ([0.0, 1.5, -1], "false-positive rates lie strictly between 0 and 1, got 0.0"),
    ([0.01, 1], "false-positive rates lie strictly between 0 and 1, got 1.0"),
    ([0.01, 0.01], "the false-positive rate 0.01 appears twice"),
    ([0.001, 0.0010000001], "the false-positive rate 0.001 appears twice (rows name each as tpr@0.001"),
])
def test_false_positive_rates_are_distinct_rates(fprs, match):
    _refused(_campaign(membership=[{"target": "average", "fprs": fprs}]), f"membership[0].fprs: {match}")


def test_false_positive_rates_in_range_pass():
    campaign = parse_campaign(_campaign(membership=[{"target": "average", "fprs": [0.5, 0.001, 0.25]}]))
    assert campaign.membership[0].fprs == [0.5, 0.001, 0.25]


@pytest.mark.parametrize("threshold", [-4000, 0, 200.5, 1e300])
def test_a_reconstruction_threshold_outside_its_range_is_refused(threshold):
    _refused(_campaign(audit=[{"kind": "reconstruction", "threshold_db": threshold}]), "audit[0].threshold_db")


def test_a_reconstruction_threshold_in_range_passes():
    for threshold in (0.5, 30, 200):
        assert parse_campaign(_campaign(audit=[{"kind": "reconstruction", "threshold_db": threshold}])) is not None


# 20. Integers TOML cannot hold


def test_an_integer_of_thousands_of_digits_is_one_line_naming_the_file(tmp_path, capsys):
    err = _check_error(tmp_path, capsys, DPSGD.replace("rounds = 2", "rounds = " + "1" * 5000))
    assert "invalid TOML: an integer of more than 4,300 digits" in err and "set_int_max_str_digits" not in err


@pytest.mark.parametrize("value", ["0x" + "f" * 5000, "0x" + "f" * 16, "0o" + "7" * 30, "99999999999999999999"])
def test_an_integer_beyond_64_bits_is_one_line_naming_the_field(tmp_path, capsys, value):
    err = _check_error(tmp_path, capsys, DPSGD.replace("rounds = 2", f"rounds = {value}"))
    assert "defense[0].rounds: an integer beyond TOML's 64-bit range" in err and "set_int_max_str_digits" not in err


# 23. data_root naming a user the machine does not have


def test_a_data_root_with_an_unknown_user_is_one_line(tmp_path, capsys):
    text = '[data]\ndataset = "mnist"\ndata_root = "~nonexistentuser-privaudit/x"\n[[defense]]\nkind = "dpsgd"\n'
    assert "data_root '~nonexistentuser-privaudit/x' starts with a '~' this machine cannot expand" in \
        _check_error(tmp_path, capsys, text)


# 26. Numbers are strict: no boolean or text for a number


@pytest.mark.parametrize("raw, where", [
    (_campaign(defense={"lr": True}), "defense[0].lr: Input should be a valid number (got True)"),
    (_campaign(defense={"lr": "0.5"}), "defense[0].lr: Input should be a valid number (got '0.5')"),
    (_campaign(defense={"agents": 8.0}), "defense[0].agents: Input should be a valid integer"),
    (_campaign(defense={"rounds": True}), "defense[0].rounds: Input should be a valid integer"),
    (_campaign(defense={"grid": {"lr": [1, True]}}), "defense[0].grid.lr: Input should be a valid number (got True)"),
    (_campaign(defense={"grid": {"agents": [4, True]}}), "defense[0].grid.agents: Input should be a valid integer"),
    (_campaign(defense={"data": {"max_train": "200"}}), "defense[0].data.max_train: Input should be a valid integer"),
    (_campaign() | {"campaign": {"seeds": [True]}}, "campaign.seeds[0]: Input should be a valid integer (got True)"),
    (_campaign() | {"data": {"dataset": "digits", "download": 1}}, "data.download: Input should be a valid boolean"),
    (_campaign(attack=[{"kind": "dlg", "rounds": [True]}]), "attack[0].rounds[0]: Input should be a valid integer"),
    (_campaign(attack=[{"kind": "dlg", "rounds": [0], "lr": True}]), "attack[0].lr: Input should be a valid number"),
    (_campaign(attack=[{"kind": "ig", "rounds": [0], "milestones": ["0.5"]}]), "attack[0].milestones"),
    (_campaign(membership=[{"target": "average", "fprs": [True]}]), "membership[0].fprs[0]: Input should be a valid"),
    (_campaign(audit=[{"kind": "mechanism", "mechanism": "ternary", "params": {"r": True}}]),
     "audit[0].params.r: Input should be a valid"),
])
def test_a_boolean_or_text_for_a_number_is_refused(raw, where):
    _refused(raw, where)


def test_an_integer_for_a_float_still_reads_as_the_float():
    campaign = parse_campaign(_campaign(defense={"lr": 1, "grid": {"batch_size": [4, 8]}},
                                        attack=[{"kind": "ig", "rounds": [0], "lr": 1, "milestones": [0.5]}]))
    assert [run.params().lr for run in campaign.defense[0].variants()] == [1.0, 1.0]
    attack = campaign.attack[0].attack()
    assert isinstance(attack.lr, float) and attack.lr == 1.0 and attack.milestones == (0.5,)


def test_every_shipped_campaign_still_validates():
    """The examples' campaigns import their code, which no test imports in-process before
    test_external_defense looks; its tests validate and run them."""
    shipped = sorted((Path(__file__).resolve().parent.parent / "privaudit" / "presets").glob("*.toml"))
    assert len(shipped) >= 10
    for path in shipped:
        load_campaign(path)


# 28. A byte-order mark, and the claims command naming the file


def test_a_campaign_with_a_byte_order_mark_reads_as_without(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xef\xbb\xbf" + DPSGD.encode())
    assert load_campaign(path).defense[0].agents == 4


def test_claims_names_the_file_in_a_cells_error(tmp_path, capsys):
    text = '[[defense]]\nkind = "dp_dpsgd"\nagents = 4\nnoise_multiplier = 1e-300\n'
    err = _check_error(tmp_path, capsys, text, "claims")
    assert "c.toml: defense[0] (dp_dpsgd, seed 0): its claim cannot be computed" in err


def test_a_position_audits_victims_share_one_claim(monkeypatch):
    """The claim does not depend on the victim: computed once per run, not once per victim (on a
    complete graph of 16 agents it was 90 % of check's time)."""
    import privaudit.attacks.audit.canary_audit as canary_audit
    from privaudit.campaign.audit_findings import check_audit
    from privaudit.campaign.cells import expand_all

    computed = []
    claim = canary_audit.checked_claim
    monkeypatch.setattr(canary_audit, "checked_claim", lambda *args: computed.append(1) or claim(*args))
    campaign = parse_campaign({"data": {"dataset": "logistic", "samples_per_agent": 50},
                               "defense": [{"kind": "dp_dpsgd", "agents": 4, "rounds": 2, "batch_size": 8,
                                            "topology": "complete", "model": "logreg", "noise_multiplier": 5.0,
                                            "model_options": {"binary": True}}],
                               "audit": [{"kind": "position", "victims": "all", "runs": 16}]})
    check_audit(expand_all(campaign)[3][0])
    assert len(computed) == 1
