"""Issue 36 items 1 and 2: `privaudit check` is fast and says what each audit can show.

The canary's quiet directions of a ~10k-parameter model are built without a full SVD and are
orthogonal to the victim's gradients; the set-up is built once between check and run; check says
each canary audit's certifiable ε, runs needed and sampling rate, and names every attack its
attacker cannot hear, in one grammatical line."""

import pytest
import torch

from privaudit.attacks.audit import canaries
from privaudit.attacks.audit.bounds import perfect_test_eps
from privaudit.campaign import audit_findings
from privaudit.campaign.audit_findings import runs_needed
from privaudit.campaign.cells import build_setup, expand, expand_audits
from privaudit.campaign.config import parse_campaign
from privaudit.campaign.preflight import preflight
from privaudit.campaign.run import run_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError

DP = {"kind": "dp_dpsgd", "label": "DP", "agents": 4, "topology": "complete", "model": "logreg", "rounds": 4,
      "eval_every": 4, "batch_size": 10, "lr": 0.5, "clip": 1.0, "noise_multiplier": 1.0}
LT_ADMM = {"kind": "lt_admm_dp", "label": "LT", "topology": "ring", "agents": 4, "model": "logreg",
           "model_options": {"binary": True}, "rounds": 2, "eval_every": 2, "tau": 1, "batch_size": 2,
           "sigma_e": 0.5}


def _svd_complement(rows: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """The method before issue 36: random vectors with the rows' SVD span projected out."""
    _, singular, vh = torch.linalg.svd(rows, full_matrices=False)
    span = vh[: int((singular > singular.max() * 1e-9).sum())]
    vectors = torch.randn((count, rows.shape[1]), generator=generator, dtype=torch.float64)
    vectors = vectors - (vectors @ span.T) @ span
    vectors = torch.linalg.qr(vectors.T).Q.T
    return vectors / torch.linalg.vector_norm(vectors, dim=1, keepdim=True)


def _worst(rows: torch.Tensor, u: torch.Tensor) -> float:
    """The largest |⟨row, u_k⟩| / ‖row‖ over rows and directions."""
    return float(((rows @ u.T).abs() / torch.linalg.vector_norm(rows, dim=1, keepdim=True)).max())


def _no_svd(*args, **kwargs):
    raise AssertionError("a full SVD of the gradient rows")


@pytest.mark.slow
def test_quiet_directions_of_a_10k_parameter_mlp_need_no_svd_and_are_orthogonal_to_its_gradients(monkeypatch):
    """At the scale of issue 36 (about 12 s on one core: 4,032 rows of 9,610 parameters projected out). In
    `make test`, `test_the_projection_draws_the_directions_the_svd_drew_and_handles_dependent_rows`
    checks the same projection draws no SVD and stays orthogonal, and
    `test_the_probed_gradients_fit_the_memory_limit_and_their_directions_stay_quiet` its directions
    on this MLP's gradients."""
    campaign = parse_campaign({"campaign": {"name": "t"}, "data": {"dataset": "digits"},
                               "defense": [DP | {"model": "mlp", "agents": 5}]})
    setup = build_setup(expand(campaign)[0])
    assert 9_000 < setup.model.dim < 11_000
    rows = canaries.victim_gradients(setup, 0, 0)
    assert len(rows) < rows.shape[1]

    monkeypatch.setattr(torch.linalg, "svd", _no_svd)
    u = canaries._complement(rows, 2, torch.Generator().manual_seed(1))
    assert torch.allclose(u @ u.T, torch.eye(2, dtype=u.dtype), atol=1e-9)
    assert _worst(rows, u) < 1e-6


def test_the_projection_draws_the_directions_the_svd_drew_and_handles_dependent_rows(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(300, 900, generator=generator, dtype=torch.float64)
    rows[:, :50] *= 1e3
    with monkeypatch.context() as patched:
        patched.setattr(torch.linalg, "svd", _no_svd)
        new = canaries._complement(rows, 3, torch.Generator().manual_seed(5))
    old = _svd_complement(rows, 3, torch.Generator().manual_seed(5))
    assert (new - old).abs().max() < 1e-8
    assert _worst(rows, new) < 1e-6
    dependent = torch.cat([rows[:100], rows[:100] * 2, rows[:100] + rows[100:200]])
    monkeypatch.setattr(torch.linalg, "svd", _no_svd)
    u = canaries._complement(dependent, 3, torch.Generator().manual_seed(5))
    assert _worst(dependent, u) < 1e-6
    assert torch.allclose(torch.linalg.vector_norm(u, dim=1), torch.ones(3, dtype=u.dtype))


def _tiny(tmp_path, audits: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(f"""
[campaign]
name = "tiny"
[data]
dataset = "digits"
max_train = 100
[[defense]]
kind = "dp_dpsgd"
label = "DP"
agents = 4
topology = "complete"
model = "logreg"
rounds = 4
eval_every = 4
batch_size = 10
lr = 0.5
clip = 1.0
noise_multiplier = 1.0
{audits}""")
    return str(path)


def test_check_says_each_canary_audits_certifiable_eps_sampling_rate_and_runs_needed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_PROGRESS_SECONDS", "0")
    path = _tiny(tmp_path, '[[audit]]\nkind = "canary"\nlabel = "small"\nruns = 8\nprotocol = "model"\n'
                           '[[audit]]\nkind = "canary"\nlabel = "large"\nruns = 4000\nprotocol = "model"\n')
    assert main(["check", path, "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    small = next(line for line in captured.out.splitlines() if line.strip().startswith("small on DP"))
    large = next(line for line in captured.out.splitlines() if line.strip().startswith("large on DP"))
    assert f"an error-free test would reach ε ≥ {perfect_test_eps(8, 0.95, 1e-5):.3g} at most" in small
    assert "the audit cannot refute the claim" in small and "cannot refute" not in large
    assert "one record among the victim's 25: a batch of 10 holds it with probability 0.4 a local step" in small
    needed = int(small.split("needs at least ")[1].split(" runs")[0].replace(",", ""))
    claim = float(small.split("claimed ε = ")[1].split(" ")[0])
    assert perfect_test_eps(needed, 0.95, 1e-5) > claim - 0.01 and perfect_test_eps(needed - 1, 0.95, 1e-5) < claim
    assert needed == runs_needed(perfect_test_eps(needed - 1, 0.95, 1e-5), 0.95, 1e-5, "model", 10**5)
    assert runs_needed(perfect_test_eps(10**5, 0.95, 1e-5), 0.95, 1e-5, "model", 10**5) is None
    assert "checking jobs:" in captured.err


def test_an_attack_its_attacker_cannot_hear_is_said_at_check_in_one_line(tmp_path, capsys):
    campaign = parse_campaign({"campaign": {"name": "t"}, "data": {"dataset": "logistic", "samples_per_agent": 8},
                               "defense": [LT_ADMM],
                               "attack": [{"kind": "dlg", "scenario": "bridge", "rounds": [0], "threat": "eavesdropper",
                                           "directed_links": [[0, 1], [0, 3]]}]})
    found = preflight(campaign, tmp_path)
    [said] = [warning for warning in found.warnings if "not possible for this attacker" in warning]
    assert "\n" not in said and "tap it does" not in said
    assert ("the eavesdropper tap cannot feed the attack (it does not hear agent 1's messages to agent 0)"
            in said)


def test_the_canary_set_up_is_built_once_between_check_and_run(tmp_path, monkeypatch):
    calls = []
    complement = canaries._complement

    def counted(*args, **kwargs):
        calls.append(1)
        return complement(*args, **kwargs)

    monkeypatch.setattr(canaries, "_complement", counted)
    monkeypatch.setattr(canaries, "_QUIET", type(canaries._QUIET)())
    campaign = parse_campaign({"campaign": {"name": "t"}, "data": {"max_train": 100}, "defense": [DP],
                               "audit": [{"kind": "canary", "label": "canary", "runs": 8}]})
    preflight(campaign, tmp_path)
    store = run_campaign(campaign, "# t", tmp_path, progress=False, say=lambda _: None)
    assert [row["status"] for row in store.rows() if row["type"] == "audit"] == ["ok"]
    assert len(calls) == 1
    [cell] = expand_audits(campaign, expand(campaign))
    assert audit_findings.audit_reach(cell) is not None


def test_the_probed_gradients_fit_the_memory_limit_and_their_directions_stay_quiet(monkeypatch):
    """An MLP on 3 × 32 × 32 images (394,634 parameters) stacked 4,096 probed gradients, 19 GB:
    the rows are capped to the `memory` limit (at 2 MB, 18 rows of the digits MLP's 9,610
    parameters), and the directions are still orthogonal to the rows kept."""
    assert canaries.probe_rows(394_634) == 8192 * 2**20 // (12 * 394_634) < 4096
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", "2")
    campaign = parse_campaign({"campaign": {"name": "t"}, "data": {"dataset": "digits"},
                               "defense": [DP | {"model": "mlp", "agents": 5}]})
    setup = build_setup(expand(campaign)[0])
    rows = canaries.victim_gradients(setup, 0, 0)
    assert 1 <= len(rows) <= 2 * 2**20 // (12 * setup.model.dim) < 4096
    u = canaries.quiet_directions(setup, 0, 2, 0)
    assert _worst(rows, u.double()) < 1e-5
    monkeypatch.setenv("PRIVAUDIT_MAX_MEMORY_MB", "1")
    with pytest.raises(ConfigError, match="PRIVAUDIT_MAX_MEMORY_MB"):
        canaries.probe_rows(10**8)
