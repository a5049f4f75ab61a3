"""The layers of DESIGN.md as import contracts: engine → defenses → attacks → campaign machinery →
reports / CLI, nothing importing upward, no import circle, and reports free of torch.

A broken contract fails with the import chain that breaks it, e.g.

    attacks import no campaign machinery, report or CLI: privaudit.attacks.audit.canary_audit:51 -> privaudit.campaign.cells
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.import_graph import PACKAGES, Contract, broken, external_imports, read_graph

ROOT = Path(__file__).resolve().parent.parent


def _package(name: str):
    return lambda module: module == name or module.startswith(name + ".")


api = _package("privaudit.campaign.api")
campaign_machinery = lambda module: _package("privaudit.campaign")(module) and not api(module)  # noqa: E731
cli = lambda module: _package("privaudit.cli")(module) or api(module)  # noqa: E731
"""The front ends on top of every layer: the command line and the Python API (`privaudit.campaign.api`,
in the campaign package, the top of the layers the project's import checker knows)."""
defenses, attacks, reports, campaigns = map(_package, ("privaudit.defenses", "privaudit.attacks", "privaudit.reports",
                                                     "privaudit.presets"))


def engine(module: str) -> bool:
    """The engine: every module of `privaudit` but the campaign machinery, the front ends and the
    package's own `__init__`, a facade that re-exports the public API lazily."""
    return (_package("privaudit")(module) and module != "privaudit" and not campaign_machinery(module)
            and not cli(module) and not _any(defenses, attacks, reports, campaigns)(module))


READ_BY_REPORTS = {"privaudit", "privaudit.store", "privaudit.files", "privaudit.errors", "privaudit.limits"}
"""What reports may use of the engine: the results store they read rows through, the guarded
reader of a results folder's other files, errors, and the limits that bound their own work on a
folder (how much of a position audit's graph and pairs to draw)."""


def _any(*layers):
    return lambda module: any(layer(module) for layer in layers)


CONTRACTS = [
    Contract("the engine imports no defense, attack, campaign machinery, report or CLI", engine,
             _any(defenses, attacks, campaign_machinery, reports, cli)),
    Contract("defenses import no attack, campaign machinery, report or CLI", defenses,
             _any(attacks, campaign_machinery, reports, cli)),
    Contract("attacks import no campaign machinery, report or CLI", attacks, _any(campaign_machinery, reports, cli)),
    Contract("the campaign machinery imports no report or CLI", campaign_machinery, _any(reports, cli)),
    Contract("reports read stored rows: no defense, attack, campaign machinery, CLI, nor engine beyond the results "
             "store", reports,
             _any(defenses, attacks, campaign_machinery, cli, lambda m: engine(m) and m not in READ_BY_REPORTS)),
    Contract("shipped campaigns are data: they import no project module", campaigns,
             lambda module: not campaigns(module)),
    Contract("attack families and the campaign machinery read a defense's view through the registries "
             "(privaudit.attacks.views), never its view module", _any(lambda m: attacks(m) and not _package("privaudit.attacks.views")(m),
                                                             campaign_machinery),
             lambda m: _package("privaudit.attacks.views")(m) and m not in ("privaudit.attacks.views", "privaudit.attacks.views.registry")),
    Contract("the pieces views are built from import no view", _any(_package("privaudit.attacks.extraction"),
                                                                     _package("privaudit.attacks.audit.channels"),
                                                                     _package("privaudit.attacks.coalition.dynamics")),
             _package("privaudit.attacks.views")),
]


def test_every_layer_contract_holds():
    assert broken(read_graph(ROOT), CONTRACTS) == []


def test_no_import_circle_among_the_projects_modules():
    assert read_graph(ROOT).cycles() == []


def test_reports_reach_torch_through_no_import_chain():
    graph = read_graph(ROOT)
    assert external_imports(graph, [m for m in graph.modules if reports(m)], "torch") == []


def test_rendering_a_report_loads_neither_torch_nor_the_engine():
    """The same, at run time: importing the report renderer leaves torch and the training engine
    out of the interpreter."""
    code = ("import sys, privaudit.reports.html, privaudit.reports.browser_check; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or m in "
            "('privaudit.sim', 'privaudit.models', 'privaudit.defenses', 'privaudit.attacks')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def _copy_with(tmp_path: Path, modules: dict[str, str]) -> Path:
    """A copy of the project's packages with extra modules (dotted name → source)."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name, source in modules.items():
        (tmp_path / Path(*name.split("."))).with_suffix(".py").write_text(source)
    return tmp_path


def test_a_wrong_import_breaks_its_contract_and_the_message_names_the_chain(tmp_path):
    root = _copy_with(tmp_path, {
        "privaudit.attacks.upward": "import math\n\ndef f():\n    from privaudit.campaign.config import Campaign\n",
        "privaudit.climbing": "from privaudit.defenses.dpsgd import DPSGD\n",
        "privaudit.reports.heavy": "from privaudit.sim import simulate\n",
    })
    found = broken(read_graph(root), CONTRACTS)
    assert "attacks import no campaign machinery, report or CLI: privaudit.attacks.upward:4 -> privaudit.campaign.config" in found
    assert any(line.endswith("privaudit.climbing:1 -> privaudit.defenses.dpsgd") for line in found)
    assert any(line.startswith("reports read stored rows") and "privaudit.reports.heavy:1 -> privaudit.sim" in line
               for line in found)
    torch_chains = external_imports(read_graph(root), ["privaudit.reports.heavy"], "torch")
    assert torch_chains and torch_chains[0].startswith("privaudit.reports.heavy:1 -> privaudit.sim:")
    assert torch_chains[0].endswith("-> torch")


def test_an_import_circle_is_found(tmp_path):
    root = _copy_with(tmp_path, {"privaudit.circle_a": "from privaudit import circle_b\n",
                                 "privaudit.circle_b": "import privaudit.circle_a\n"})
    assert ["privaudit.circle_a", "privaudit.circle_b"] in read_graph(root).cycles()
