"""A defense written outside privaudit (issue 36, items 3 and 4): a claim that states no
neighbouring relation is audited under a stated default and no row says it claims no privacy;
errors a plugin author meets name the registration that fixes them; the plugin's source is part
of its cells' identity, so editing it reruns them, and the run says so."""

import json
import sys
from types import SimpleNamespace

import pytest

from privaudit.accounting import Claim
from privaudit.attacks.views import BATCH_SIZES, EXTRACTORS, MODEL_VIEWS
from privaudit.campaign.audit_findings import canary_relation, reconstruction_relation
from privaudit.campaign.cells import expand_all
from privaudit.campaign.config import load_campaign
from privaudit.cli import main
from privaudit.defenses import DEFENSES
from tests.helpers import one_line_error
from tests.test_layers import ROOT

PLUGIN = '''"""A tiny noisy gossip, its claim stating no neighbouring relation."""
import dp_accounting
import torch
from pydantic import Field

from privaudit.accounting import Claim
from privaudit.attacks.extraction import Extractor, Target, broadcasts, heard, initial_model, public_params, span
from privaudit.attacks.views import register_extractor
from privaudit.defenses.base import Defense, DefenseParams
from privaudit.grads import clip_l2, per_sample_grads_agents
from privaudit.wire import Kind


class Params(DefenseParams):
    lr: float = Field(0.5, gt=0)
    batch_size: int = Field(4, ge=1)
    sigma: float = Field(4.0, gt=0)


class Gossip(Defense):
    name = "NAME"
    title = "Tiny noisy gossip"
    Params = Params

    def __init__(self, params, setup):
        super().__init__(params, setup)
        self.x = setup.model.initial().repeat(setup.topology.n, 1)

    @property
    def states(self):
        return self.x

    def step(self, t, wire):
        p = self.params
        xb, yb, _ = self.setup.local.fixed_batches(p.batch_size, self.setup.generator)
        g = clip_l2(per_sample_grads_agents(self.setup.model, self.x, xb, yb), 1.0).mean(dim=1)
        noise = torch.randn(self.x.shape, generator=self.setup.generator) * (p.sigma * 2 * p.lr / p.batch_size)
        y = self.x - p.lr * g + noise
        wire.broadcast_each(t, Kind.NOISY_STATE, y)
        self.x = self.W @ y

    def mechanism(self, rounds):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(self.params.sigma), rounds)

    def claim(self, rounds):
        accountant = dp_accounting.rdp.RdpAccountant()
        accountant.compose(self.mechanism(rounds))
        eps = accountant.get_epsilon(1e-5)
        return Claim(defense=self.name, notion="(ε, δ)-DP", adjacency="one record", eps_claimed=eps,
                     eps_stated=None, eps_sound=eps, delta=1e-5, horizon=rounds, equation="Gaussian per round",
                     sound_method="RDP accountant")


def _noisy_step(transcript, victim, round):
    p = public_params(transcript.public.hyper, Params)
    W = transcript.public.mixing
    point = initial_model(transcript) if round == 0 else sum(
        W[victim, j] * heard(transcript, Kind.NOISY_STATE, round - 1, j, None)
        for j in torch.nonzero(W[victim]).flatten().tolist())
    return Target((point - heard(transcript, Kind.NOISY_STATE, round, victim, None)) / p.lr, point.float(), victim,
                  round, kind="noisy_gradient")


register_extractor(Extractor("NAME", "noisy", _noisy_step, frozenset({Kind.NOISY_STATE}),
                             "every broadcast", lambda victim, topology: [broadcasts(range(topology.n))],
                             span(-1, 0)))
'''


@pytest.fixture(autouse=True)
def registries():
    """Each test leaves the registries and sys.modules as it found them (other tests compare the
    registries with the shipped defenses)."""
    saved = [(registry, dict(registry)) for registry in (DEFENSES, EXTRACTORS, MODEL_VIEWS, BATCH_SIZES)]
    modules = set(sys.modules)
    yield
    for name in set(sys.modules) - modules:
        del sys.modules[name]
    for registry, content in saved:
        registry.clear()
        registry.update(content)


def _plugin(tmp_path, monkeypatch, module: str) -> None:
    """The plugin module `module` (its defense named as the module) in `tmp_path`, on sys.path."""
    (tmp_path / f"{module}.py").write_text(PLUGIN.replace("NAME", module))
    monkeypatch.syspath_prepend(str(tmp_path))


def _campaign(tmp_path, module: str, tables: str = "") -> str:
    path = tmp_path / "c.toml"
    path.write_text(f'[campaign]\nname = "plugin"\nimports = ["{module}"]\n[data]\ndataset = "digits"\n'
                    f'max_train = 60\n[[defense]]\nkind = "{module}:Gossip"\nagents = 3\nrounds = 2\n'
                    f'eval_every = 2\nmodel = "logreg"\n{tables}')
    return str(path)


def _rows(out) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


CANARY = '[[audit]]\nkind = "canary"\nthreat = "global_listener"\nruns = 8\n'


def test_a_claim_without_a_relation_gets_the_stated_default_and_no_row_says_it_claims_no_privacy(
        tmp_path, monkeypatch, capsys):
    _plugin(tmp_path, monkeypatch, "plugin_unstated")
    path, out = _campaign(tmp_path, "plugin_unstated", CANARY), tmp_path / "out"
    assert main(["claims", path, "--allow-code"]) == 0
    said = capsys.readouterr().out
    assert "assumption: the claim states no neighbouring relation: privaudit audits it under its default, " \
           "replace-one of one record; state yours in the Claim: neighbours=Neighbours(" in said
    assert main(["check", path, "--allow-code", "--out", str(out)]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "neighbouring relation" in line]
    assert warned == ["privaudit: warning: defense 'plugin_unstated': the claim states no neighbouring relation: "
                      "privaudit audits it under its default, replace-one of one record; state yours in the Claim: "
                      "neighbours=Neighbours('replace-one') or Neighbours('add/remove') "
                      "(privaudit.accounting.Neighbours)"]
    assert main(["run", path, "--allow-code", "--out", str(out), "--quiet"]) == 0
    audit = next(row for row in _rows(out) if row["type"] == "audit")
    assert audit["status"] == "ok" and audit["eps_claimed"] > 0
    assert audit["relation"]["claimed"] == "replace-one, one record (privaudit's default: the claim states no relation)"
    assert audit["relation"]["same"] is True
    assert "claims no privacy" not in (out / "results.jsonl").read_text()


def test_a_relation_row_never_says_no_privacy_of_a_claim_with_an_epsilon():
    """Defense in depth, for a claim that reaches an audit without `checked_claim`'s default."""
    stated = Claim(defense="d", notion="(ε, δ)-DP", adjacency="one record", eps_claimed=0.48, eps_stated=None,
                   eps_sound=None, delta=1e-5, horizon=3, equation="", sound_method="")
    nothing = Claim.no_privacy("d", 3, "", "no noise")
    channel = SimpleNamespace(adjacency="replace-one", unit="record", unaudited=None)
    for relation in (canary_relation(SimpleNamespace(channel=channel, claim=stated)), reconstruction_relation(stated)):
        assert relation["why"] == "the claim states no neighbouring relation"
    for relation in (canary_relation(SimpleNamespace(channel=channel, claim=nothing)),
                     reconstruction_relation(nothing)):
        assert relation["why"] == "the defense claims no privacy"


def test_an_inversion_of_a_plugin_without_a_batch_size_names_register_batch_size(tmp_path, monkeypatch, capsys):
    _plugin(tmp_path, monkeypatch, "plugin_batch")
    attack = '[[attack]]\nkind = "idlg"\nscenario = "noisy"\nthreat = "global_listener"\nrounds = [1]\n'
    err = one_line_error(capsys, ["check", _campaign(tmp_path, "plugin_batch", attack), "--allow-code",
                                  "--out", str(tmp_path / "out")])
    assert "give batch_size: defense 'plugin_batch' has no public batch size" in err
    assert "register_batch_size('plugin_batch'" in err


def test_editing_a_plugin_module_reruns_its_cells_and_says_so(tmp_path, monkeypatch, capsys):
    _plugin(tmp_path, monkeypatch, "plugin_edited")
    path, out = _campaign(tmp_path, "plugin_edited"), tmp_path / "out"
    run = ["run", path, "--allow-code", "--out", str(out), "--quiet"]
    assert main(run) == 0
    first = _rows(out)
    assert [row["type"] for row in first] == ["training"]
    capsys.readouterr()

    assert main(run) == 0
    said = capsys.readouterr().out
    assert "1 of 1 cells already finished" in said and "changed since" not in said
    assert len(_rows(out)) == 1

    source = tmp_path / "plugin_edited.py"
    source.write_text(source.read_text().replace("Tiny noisy gossip", "Tiny noisy gossip, edited"))
    assert main(["check", path, "--allow-code", "--out", str(out)]) == 0
    checked = capsys.readouterr()
    line = "plugin module plugin_edited changed since 1 finished cells: they run again"
    assert f"privaudit: warning: {line}" in checked.err and "a run would compute all 1" in checked.out
    assert main(run) == 0
    said = capsys.readouterr().out
    assert line in said.splitlines()
    second = _rows(out)
    assert len(second) == 2 and second[1]["cell"] != second[0]["cell"] and second[1]["title"] == \
        "Tiny noisy gossip, edited"
    assert set(second[0]["config"]["code"]) == {"plugin_edited"} != second[1]["config"]["code"] != second[0][
        "config"]["code"]


def test_shipped_defenses_keep_their_cell_ids():
    """The demo's cells hash no code: their ids are the stored demo rows' (tests/data/demo_rows.json)."""
    stored = json.loads((ROOT / "tests" / "data" / "demo_rows.json").read_text())
    cells = [cell for kind in expand_all(load_campaign(ROOT / "privaudit" / "presets" / "demo.toml")) for cell in kind]
    assert {cell.id for cell in cells} == {row["cell"] for row in stored["rows"]}
    assert all("code" not in cell.describe() for cell in cells if hasattr(cell, "code"))


def test_the_extending_page_names_everything_a_plugin_imports_and_every_registration():
    """docs/extending.md covers every privaudit name the three examples import and every register_*."""
    import ast
    import re

    from privaudit.attacks.views import registry

    page = (ROOT / "docs" / "extending.md").read_text()
    needed = {alias.name for example in ("share_gossip", "laplace_gossip", "pairwise_gossip")
              for node in ast.walk(ast.parse((ROOT / "examples" / f"{example}.py").read_text()))
              if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("privaudit")
              for alias in node.names}
    needed |= {name for name in vars(registry) if name.startswith("register_")}
    assert {"Clipping", "register_batch_size", "register_unmodelled"} <= needed
    assert sorted(name for name in needed if not re.search(rf"\b{name}\b", page)) == []


def test_an_inversion_of_a_plugin_that_discloses_no_batch_is_a_failed_row_saying_why(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    campaign = tmp_path / "c.toml"
    campaign.write_text('[campaign]\nimports = ["examples.share_gossip"]\n[data]\ndataset = "digits"\nmax_train = 80\n'
                        '[[defense]]\nkind = "examples.share_gossip:ShareGossip"\nagents = 4\ntopology = "complete"\n'
                        'model = "logreg"\nrounds = 2\nbatch_size = 1\n[[attack]]\nkind = "idlg"\nscenario = "exact"\n'
                        'rounds = [0]\nevaluations = 10\nbatch_size = 1\n')
    assert main(["run", str(campaign), "--out", str(tmp_path / "o"), "--quiet", "--allow-code"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    [inversion] = [row for row in rows if row["type"] == "inversion"]
    assert inversion["status"].startswith("failed: the defense disclosed no batch of agent 0 at round 0")
