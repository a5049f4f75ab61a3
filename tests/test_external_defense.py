"""A defense defined outside privaudit (examples/laplace_gossip.py), named by import path or entry
point, through `privaudit claims` and `privaudit run`; the one-line errors of a wrong path."""

import json
import pickle
import sys
from pathlib import Path

import pytest

from privaudit.attacks import extraction as extract
from privaudit.attacks import views
from privaudit.attacks.views import EXTRACTORS, MODEL_VIEWS, register_extractor
from privaudit.defenses import DEFENSES
from privaudit.campaign.cells import build_defense, expand
from privaudit.campaign.config import parse_campaign
from privaudit.defenses.external import load_attribute
from privaudit.cli import main
from tests.import_graph import PACKAGES, Contract, broken, read_graph
from tests.test_layers import ROOT

EXAMPLE = ROOT / "examples" / "laplace_gossip.toml"
PATH = "examples.laplace_gossip:LaplaceGossip"


@pytest.fixture(autouse=True)
def registries():
    """Every test starts with the example not imported and leaves the registries as it found them
    (other tests compare the registries with the shipped defenses)."""
    saved = [(registry, dict(registry)) for registry in (DEFENSES, EXTRACTORS, MODEL_VIEWS, views.CHANNELS,
                                                         views.DYNAMICS, views.NOISE, views.BATCH_SIZES)]
    _forget_examples()
    yield
    _forget_examples()
    for registry, content in saved:
        registry.clear()
        registry.update(content)


def _forget_examples():
    for module in [m for m in sys.modules if m.split(".")[0] in ("examples", "here_defense")]:
        del sys.modules[module]


def _table(kind: str, **fields) -> dict:
    return {"kind": kind, "agents": 4, "rounds": 3, "eval_every": 3, "batch_size": 1} | fields


def _parse(*tables: dict):
    """A campaign of `tables`, listing the modules they import and allowing their code."""
    modules = sorted({t["kind"].partition(":")[0] for t in tables if ":" in t["kind"]})
    return parse_campaign({"campaign": {"imports": modules}, "defense": list(tables)}, allow_code=True)


def _error(capsys, tmp_path, kind: str) -> str:
    path = tmp_path / "c.toml"
    imports = f'[campaign]\nimports = ["{kind.partition(":")[0]}"]\n' if ":" in kind else ""
    path.write_text(f'{imports}[[defense]]\nkind = "{kind}"\n')
    code = main(["claims", str(path), "--allow-code"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith(f"privaudit: error: {path}: defense[0].kind: ")
    return err.split("defense[0].kind: ", 1)[1]


def test_the_package_imports_no_example():
    """examples/ is third-party code: no module of privaudit's packages imports it, so the tests
    below reach the example only through the campaign's import path."""
    contract = Contract("privaudit's packages import no example", lambda m: m.split(".")[0] in PACKAGES,
                        lambda m: m.split(".")[0] == "examples")
    graph = read_graph(ROOT, (*PACKAGES, "examples"))
    assert "examples.laplace_gossip" in graph.modules
    assert broken(graph, [contract]) == [] and graph.cycles() == []
    assert "laplace_gossip" not in DEFENSES and "examples.laplace_gossip" not in sys.modules


def test_claims_of_the_example(capsys):
    assert main(["claims", str(EXAMPLE), "--json", "--allow-code"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["defense"], row["eps_claimed"], row["eps_sound"], row["delta"]) for row in rows] == [
        ("laplace_gossip", 6.0, pytest.approx(6.0), 0.0), ("laplace_gossip", 6e6, pytest.approx(6e6), 0.0)]
    assert rows[0]["notion"] == "ε-DP (pure, Laplace)" and "replace one record" in rows[0]["adjacency"]


FEWER_TRIALS = {"runs = 100\n": "runs = 16\n", "rounds = [2]\n": "rounds = [2]\nbound_trials = 2\n"}
"""The example with its canary audit at 16 training runs per world rather than 100, and 2 trials of
the reconstruction game its leaking inversion plays rather than 20: the same tables, attacks and
audits through the same code, in about a fifth of the time (the trial counts change only the
ε lower bound and the game's bound, which no assertion reads)."""


def _run_example(campaign: Path, out: Path) -> None:
    """`privaudit run` of `campaign` (the example or an edit of it), then what the example must give:
    six rows of the example's defense, its inversion leaking at ε₀ = 10⁶ only and both canary
    audits played on the same relation, and the report naming it."""
    assert main(["run", str(campaign), "--out", str(out), "--quiet", "--allow-code"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    training = [row for row in rows if row["type"] == "training"]
    attacks = {row["training"]: row for row in rows if row["type"] == "inversion"}
    assert [row["defense"] for row in rows] == ["laplace_gossip"] * 6
    audits = [row for row in rows if row["type"] == "audit"]
    assert [(row["status"], row["relation"]["same"]) for row in audits] == [("ok", True)] * 2
    assert {row["config"]["run"]["kind"] for row in training} == {"laplace_gossip"}
    assert "Laplace gossip" in (out / "report.html").read_text()
    weak, strong = (attacks[row["cell"]] for row in training)
    assert weak["status"] == strong["status"] == "ok" and weak["target_kind"] == "gradient_estimate"
    assert weak["metrics"]["psnr"] < weak["baseline"]["psnr"] + 3 < strong["metrics"]["psnr"] - 5


def test_run_trains_and_attacks_the_example(tmp_path):
    """The example's campaign with `FEWER_TRIALS`; the file as written runs in
    `test_the_example_as_written_trains_and_attacks` (`make test-slow`)."""
    text = EXAMPLE.read_text()
    for written, fewer in FEWER_TRIALS.items():
        assert text.count(written) == 1, written
        text = text.replace(written, fewer)
    campaign = tmp_path / "laplace_gossip.toml"
    campaign.write_text(text)
    _run_example(campaign, tmp_path / "out")


@pytest.mark.slow
def test_the_example_as_written_trains_and_attacks(tmp_path):
    """The example file itself (82 s on 2 idle cores). Every assertion is `_run_example`'s, which
    `test_run_trains_and_attacks_the_example` makes on the same tables with fewer canary runs and
    reconstruction-game trials, numbers none of them reads."""
    _run_example(EXAMPLE, tmp_path / "out")


def test_a_path_an_entry_point_and_a_name_give_the_same_cells(tmp_path, monkeypatch):
    """Whatever names the class, the table's kind is its name, so the cell ids are one; the
    entry point is found only when the name is not registered yet."""
    by_path = [cell.id for cell in expand(_parse(_table(PATH)))]
    by_name = [cell.id for cell in expand(_parse(_table("laplace_gossip")))]
    DEFENSES.pop("laplace_gossip")
    _install(tmp_path, monkeypatch, f"laplace_gossip = {PATH}\nmisnamed = {PATH}\n")
    by_entry_point = [cell.id for cell in expand(_parse(_table("laplace_gossip")))]
    assert by_path == by_name == by_entry_point
    DEFENSES.pop("laplace_gossip")
    with pytest.raises(Exception, match="entry point 'misnamed' of group privaudit.defenses loads a defense named "
                                        "'laplace_gossip': the entry point's name must be the class's name"):
        _parse(_table("misnamed"))
    assert "laplace_gossip" not in DEFENSES


def _install(tmp_path, monkeypatch, entry_points: str) -> None:
    """A distribution on sys.path whose entry points in privaudit.defenses are `entry_points`."""
    info = tmp_path / "site" / "mydefenses-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mydefenses\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[privaudit.defenses]\n{entry_points}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


def test_a_worker_that_never_imported_the_defense_imports_it_from_the_path():
    """A worker process unpickles cells whose defense it has not registered: the table carries
    the path the driver found the class at, and building the defense imports it from there (its
    extractor with it)."""
    cell = expand(_parse(_table(PATH)))[0]
    shipped = pickle.dumps(cell)
    DEFENSES.pop("laplace_gossip")
    EXTRACTORS.pop(("laplace_gossip", "state_difference"))
    _forget_examples()
    defense = build_defense(pickle.loads(shipped))
    assert type(defense).__module__ == "examples.laplace_gossip" and DEFENSES["laplace_gossip"] is type(defense)
    assert ("laplace_gossip", "state_difference") in EXTRACTORS and "laplace_gossip" in MODEL_VIEWS


def test_unknown_names_and_wrong_paths_are_one_line_errors(tmp_path, capsys, monkeypatch):
    modules = tmp_path / "mods"
    modules.mkdir()
    (modules / "broken_defense.py").write_text("raise RuntimeError('boom')\n")
    (modules / "needs_dependency.py").write_text("import not_installed_dependency\n")
    (modules / "taken_name.py").write_text("from examples.laplace_gossip import LaplaceGossip\n\n"
                                           "class Taken(LaplaceGossip):\n    name = 'dpsgd'\n")
    monkeypatch.syspath_prepend(str(modules))
    assert _error(capsys, tmp_path, "nope").startswith("unknown defense 'nope' (choose from dpdl, ")
    assert _error(capsys, tmp_path, "no_such_package.module:Defense") == (
        "cannot import module 'no_such_package.module' (No module named 'no_such_package')")
    assert _error(capsys, tmp_path, "examples.laplace_gossip:Nope") == (
        "module 'examples.laplace_gossip' has no attribute 'Nope'")
    assert _error(capsys, tmp_path, "examples.laplace_gossip:state_difference") == (
        "'examples.laplace_gossip:state_difference' is not a Defense subclass (it is a function)")
    assert _error(capsys, tmp_path, "examples.laplace_gossip:LaplaceGossipParams") == (
        "'examples.laplace_gossip:LaplaceGossipParams' is not a Defense subclass (it is a class that does not "
        "derive from privaudit.defenses.base.Defense)")
    assert _error(capsys, tmp_path, "privaudit.defenses.base:Defense") == (
        "'privaudit.defenses.base:Defense' is abstract: implement claim, mechanism, states, step")
    assert _error(capsys, tmp_path, "examples.laplace_gossip:") == (
        "'examples.laplace_gossip:' is not an import path 'package.module:Class'")
    assert _error(capsys, tmp_path, "broken_defense:D") == (
        "importing module 'broken_defense' failed: RuntimeError: boom")
    assert _error(capsys, tmp_path, "needs_dependency:D") == (
        "importing module 'needs_dependency' failed: ModuleNotFoundError: No module named "
        "'not_installed_dependency'")
    assert _error(capsys, tmp_path, "taken_name:Taken") == (
        "'taken_name:Taken' is named 'dpsgd', which privaudit.defenses.dpsgd:DPSGD already is: give it another name")


def test_a_module_in_the_current_directory_is_found_off_sys_path(tmp_path, monkeypatch):
    """A console script's sys.path lacks the current directory; a module there is found all the
    same, as `python -m` would find it."""
    (tmp_path / "here_defense.py").write_text("from examples.laplace_gossip import LaplaceGossip\n\n"
                                              "class Here(LaplaceGossip):\n    name = 'here'\n")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.chdir(tmp_path)
    assert _parse(_table("here_defense:Here")).defense[0].kind == "here"
    assert str(tmp_path) in sys.path


def test_a_shipped_extractor_cannot_be_replaced():
    shipped = EXTRACTORS["dpsgd", "state_difference"]
    with pytest.raises(ValueError, match=r"\('dpsgd', 'state_difference'\) is privaudit's own entry"):
        register_extractor(extract.Extractor("dpsgd", "state_difference", len, shipped.kinds, "", shipped.links,
                                             shipped.rounds))
    assert register_extractor(shipped) is shipped


def test_a_package_another_distribution_shadows_is_named_where_it_was_found(tmp_path, monkeypatch):
    """A top-level package of the user's name installed by someone else (Opacus ships `examples`)
    is found first; the error says where, so the user sees why their module is missing."""
    shadow = tmp_path / "site" / "shadowing"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(ValueError) as error:
        load_attribute("shadowing.mine:Defense")
    sys.modules.pop("shadowing", None)
    message = str(error.value)
    assert "\n" not in message and "package 'shadowing' was found at" in message and str(shadow) in message
