"""The public Python API (`privaudit.campaign.api`, re-exported lazily by the package): the example script
audits a third-party defense end to end from Python, and the API keeps the CLI's guards."""

import runpy
import sys
from pathlib import Path

import pytest

import privaudit
from privaudit.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_the_python_example_audits_a_defense_end_to_end(tmp_path, monkeypatch, capsys, third_party):
    """The script run as `python examples/api_audit.py OUT` runs it, in this process: its change to
    `sys.path` and the defense it imports are put back afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", ["examples/api_audit.py", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as ended:
        runpy.run_path(str(ROOT / "examples" / "api_audit.py"), run_name="__main__")
    printed = capsys.readouterr()
    assert ended.value.code == 0, printed.err
    assert "Laplace gossip: " in printed.out and (tmp_path / "out" / "report.html").exists()
    assert "against a stated (0.5, 1e-5)-DP: refuted" in printed.out


def test_the_package_names_its_api_and_loads_it_on_first_use():
    assert {"load_campaign", "run", "results", "audit", "Defense", "Claim", "register_extractor"} <= set(dir(privaudit))
    assert privaudit.Defense.__module__ == "privaudit.defenses.base" and callable(privaudit.run)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        privaudit.nope  # noqa: B018


def test_the_api_keeps_the_command_lines_guards(tmp_path):
    raw = {"defense": [{"kind": "examples.laplace_gossip:LaplaceGossip"}]}
    with pytest.raises(ConfigError, match="list it in \\[campaign\\] imports"):
        privaudit.load_campaign(raw)
    listed = raw | {"campaign": {"imports": ["examples.laplace_gossip"]}}
    with pytest.raises(ConfigError, match="allow_code=True") as refused:  # the Python caller's consent, not a flag
        privaudit.load_campaign(listed)
    assert "--allow-code" not in str(refused.value)
    with pytest.raises(ConfigError, match="claim is"):
        privaudit.audit("laplace", claim=(1.0,))
    results = privaudit.run(privaudit.load_campaign({"defense": [{"kind": "dpsgd", "agents": 3, "rounds": 1,
                                                                  "eval_every": 1, "model": "logreg",
                                                                  "batch_size": 4}],
                                                     "data": {"dataset": "digits", "max_train": 60}}),
                            tmp_path / "o")
    assert [verdict.status for verdict in results.verdicts] == ["no privacy"] and not results.failing("refuted")
    assert results.rows[0]["schema"] == 1


def test_a_run_from_python_takes_the_command_lines_threads_and_gives_the_callers_back(monkeypatch):
    import torch

    from privaudit.threads import limited

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    with limited(None) as count:
        inside = torch.get_num_threads()
    assert inside == 1 and count == "1 thread" and torch.get_num_threads() == before
