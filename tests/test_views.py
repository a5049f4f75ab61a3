"""What attackers know of a defense lives in that defense's view module (issue 23).

* A defense written in a file outside privaudit, with its view (extractor, canary channel, noise)
  in the same file and installed only as an entry point, is listed by `privaudit list`, passes
  `privaudit check` and is canary-audited by `privaudit run`, with no edit inside privaudit.
* No module outside the view modules names a shipped defense's parameters by string: a parameter
  name appears as a string literal only where it is also a word of the suite's own (a claim's δ,
  a row's key), and no such literal ever indexes a defense's hyperparameters.
* Every registry the campaign reads is open, and a shipped entry cannot be replaced.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from privaudit.attacks import views
from privaudit.attacks.inversion import INVERSIONS, register_inversion
from privaudit.attacks.membership.methods import METHODS, MembershipMethod, register_method
from privaudit.defenses import DEFENSES
from privaudit.defenses.external import SHIPPED

ROOT = Path(__file__).resolve().parent.parent

THIRD_PARTY = "third_party_gossip"

CAMPAIGN = f"""
[campaign]
name = "third_party"
seeds = [0]

[data]
dataset = "digits"
max_train = 80

[[defense]]
kind = "{THIRD_PARTY}"
label = "gossip"
topology = "ring"
agents = 4
model = "logreg"
rounds = 3
eval_every = 3
lr = 0.1
batch_size = 4
clip = 1.0
epsilon = 1.0

[[audit]]
kind = "canary"
label = "canary"
defense = ["gossip"]
runs = 16
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a third-party defense module (the worked example under another name, its
    view at the bottom of the same file) and the metadata of a package that installs it as an
    entry point of `privaudit.defenses`; nothing of it is inside privaudit."""
    folder = tmp_path_factory.mktemp("site")
    source = (ROOT / "examples" / "laplace_gossip.py").read_text()
    (folder / f"{THIRD_PARTY}.py").write_text(source.replace('name = "laplace_gossip"', f'name = "{THIRD_PARTY}"'))
    info = folder / f"{THIRD_PARTY}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {THIRD_PARTY}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[privaudit.defenses]\n{THIRD_PARTY} = {THIRD_PARTY}:LaplaceGossip\n")
    (folder / "campaign.toml").write_text(CAMPAIGN)
    return folder


def _privaudit(folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *argv: str
               ) -> tuple[int, str, str]:
    """`privaudit ARGV` run in `folder` with it on the import path (where the defense's module and
    its distribution's entry point are), in this process: the exit status, stdout and stderr. The
    `third_party` fixture forgets the defense and its module afterwards."""
    from privaudit.cli import main

    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.chdir(folder)
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_installed_third_party_defense_is_listed_with_its_view(installed, third_party, monkeypatch, capsys):
    code, out, err = _privaudit(installed, monkeypatch, capsys, "list", "defenses", "--json")
    assert code == 0, err
    (entry,) = [kind for kind in json.loads(out)["defenses"]["kinds"] if kind["kind"] == THIRD_PARTY]
    assert entry["origin"] == f"{THIRD_PARTY}:LaplaceGossip"
    assert (entry["scenarios"], entry["membership"], entry["canary_audit"], entry["noise"]) == (
        ["state_difference"], True, "law", ["epsilon"])


def test_an_installed_third_party_defense_is_checked_and_canary_audited(installed, third_party, monkeypatch, capsys):
    code, out, err = _privaudit(installed, monkeypatch, capsys, "check", "campaign.toml")
    assert code == 0, err
    assert "passes every pre-flight check" in out and "canary audit" in out
    code, out, err = _privaudit(installed, monkeypatch, capsys, "run", "campaign.toml", "--out", "out")
    assert code == 0, err
    rows = [json.loads(line) for line in (installed / "out" / "results.jsonl").read_text().splitlines()]
    (training,) = [row for row in rows if row["type"] == "training"]
    assert training["defense"] == THIRD_PARTY and training["noise"]["parameters"] == {"epsilon": ["ε_0", False]}
    (audit,) = [row for row in rows if row["type"] == "audit"]
    assert audit["status"] == "ok", audit["status"]
    assert audit["relation"]["same"] is True  # the channel tests the claim's own relation: one record replaced
    assert audit["verdict"]["status"] in ("consistent", "inconclusive", "refuted")


# ---------------------------------------------------------------- parameter names stay in the views

GENERIC = {
    "delta": "the δ of every claim, bound and audit",
    "horizon": "every claim's horizon",
    "alpha": "the Dirichlet partition's concentration ([data] alpha)",
    "clip": "the ternary quantizer's overflow mode (on_overflow = \"clip\")",
    "noise": "the training row's noise declaration",
    "batch_size": "the inversion row's and table's number of images",
    "rho": "a position pair's Rényi slope ρ (its figures: the formula's, the exact loss's)",
}
"""Shipped defenses' parameter names that are also words of the suite's own, and what they name
there. They may appear as string literals, but never index a defense's hyperparameters."""

_HYPERPARAMETERS = ("hyper", "public()", "params")


def _outside_views() -> list[Path]:
    found = []
    for path in sorted((ROOT / "privaudit").rglob("*.py")):
        inside_view = path.parent == ROOT / "privaudit" / "attacks" / "views" and path.name not in ("registry.py",
                                                                                                   "__init__.py")
        if not inside_view and ROOT / "privaudit" / "defenses" not in path.parents:
            found.append(path)
    return found


def _parameter_names() -> set[str]:
    return {name for defense in SHIPPED for name in DEFENSES[defense].Params.model_fields}


def _literals(path: Path, names: set[str]) -> list[tuple[ast.Constant, str]]:
    """Every string literal of `path` that is a parameter name, with the source of the
    expression it indexes (a subscript's value, a `.get`'s object), "" where it indexes none."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    indexed: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in names:
            indexed[id(node.slice)] = ast.get_source_segment(source, node.value) or ""
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in names):
            indexed[id(node.args[0])] = ast.get_source_segment(source, node.func.value) or ""
    return [(node, indexed.get(id(node), "")) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]


def test_no_module_outside_the_views_names_a_defenses_parameters():
    names = _parameter_names()
    assert names >= set(GENERIC), "a generic word no shipped defense uses any more: drop it from GENERIC"
    found = []
    for path in _outside_views():
        for node, indexes in _literals(path, names):
            where = f"{path.relative_to(ROOT)}:{node.lineno} '{node.value}'"
            if node.value not in GENERIC:
                found.append(f"{where}: a defense's parameter named outside its view")
            elif any(word in indexes for word in _HYPERPARAMETERS):
                found.append(f"{where} indexes {indexes}: read it through the defense's view")
    assert found == []


def test_the_source_check_finds_a_parameter_read_by_string(tmp_path):
    """The check above can fail: a module reading a defense's σ or its batch size by key is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text('def noise(public):\n    return public.hyper["noise_multiplier"], public.hyper.get("batch_size")\n')
    literals = _literals(bad, _parameter_names())
    assert [(node.value, indexes) for node, indexes in literals] == [("noise_multiplier", "public.hyper"),
                                                                      ("batch_size", "public.hyper")]


# ---------------------------------------------------------------- open registries


def test_a_shipped_view_entry_cannot_be_replaced():
    shipped = views.EXTRACTORS["dpsgd", "state_difference"]
    with pytest.raises(ValueError, match="privaudit's own entry"):
        views.register_extractor(shipped.__class__(**{**shipped.__dict__, "needs": "nothing"}))
    with pytest.raises(ValueError, match="privaudit's own entry"):
        views.register_channel(type(views.CHANNELS["dpdl"])(*views.CHANNELS["dpdl"].extractors))
    assert views.EXTRACTORS["dpsgd", "state_difference"] is shipped


def test_an_inversion_registers_under_a_new_name_only(monkeypatch):
    monkeypatch.setattr("privaudit.attacks.inversion.base.INVERSIONS", dict(INVERSIONS))
    from privaudit.attacks.inversion import base

    with pytest.raises(ValueError, match="already registered"):
        register_inversion("dlg", base.INVERSIONS["ig"])
    with pytest.raises(ValueError, match="dataclass with a `title`"):
        register_inversion("mine", object)


def test_every_shipped_defense_has_a_view_whose_parts_are_its_own():
    """Each shipped defense has a view, and its channel and model view are built from extractors
    of that defense (the registries agree on who owns what)."""
    for defense in SHIPPED:
        assert views.described(defense)["scenarios"], defense
        channel = views.channel(defense)
        assert {e.defense for e in channel.extractors} == {defense}
        assert views.model_view(defense).defense == defense


def test_a_membership_method_registers_under_a_new_name_only(monkeypatch):
    monkeypatch.setattr("privaudit.attacks.membership.methods.METHODS", dict(METHODS))
    from privaudit.attacks.membership import methods

    with pytest.raises(ValueError, match="already registered"):
        register_method(MembershipMethod("loss", "mine", lambda outputs, settings: outputs.loss[0]))
    mine = register_method(MembershipMethod("mine", "mine", lambda outputs, settings: -outputs.loss[0]))
    assert list(methods.METHODS) == ["loss", "lira", "rmia", "mine"] and methods.METHODS["mine"] is mine
