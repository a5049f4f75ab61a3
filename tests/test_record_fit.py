"""The record fit (privaudit/attacks/coalition/record_fit.py): a curious end of a line recovers every agent's record
and gradient from float32 D-PSGD messages, and refuses what its hypothesis does not cover."""

import numpy as np
import pytest
import torch
from torch.func import grad

from privaudit.attacks.coalition.record_fit import FIT_TOLERANCE, fit_records
from privaudit.flatmodel import FlatModel
from privaudit.models import build_mlp
from privaudit.topology import Topology
from privaudit.wire import Disclosure, Kind, Message, PublicKnowledge, Transcript

SHAPE = (1, 4, 4)


def _run(n: int, rounds: int, lr: float, records_per_agent: int = 1, activation: str = "sigmoid"):
    """D-PSGD in float32 on a line of n agents, each with `records_per_agent` records (full batch):
    what agent 0 hears, and every agent's true records and round-0 gradient."""
    torch.manual_seed(0)
    topology = Topology.build("line", n)
    model = FlatModel(build_mlp(SHAPE, 3, hidden=(8,), activation=activation))
    W = torch.tensor(np.asarray(topology.W), dtype=torch.float32)
    x = torch.rand(n, records_per_agent, *SHAPE)
    y = torch.arange(n * records_per_agent).view(n, records_per_agent) % 3
    x0 = model.initial()
    states, messages, disclosures, first = x0.repeat(n, 1), [], [], None
    for t in range(rounds + 1):
        messages += [Message(t, k, None, Kind.MODEL, states[k].clone()) for k in (0, 1)]
        if t == rounds:
            break
        gradients = torch.stack([grad(model.loss)(states[k], x[k], y[k]) for k in range(n)])
        first = gradients.double() if first is None else first
        disclosures.append(Disclosure(t, 0, "gradient", gradients[0].clone()))
        states = W @ states - lr * gradients
    public = PublicKnowledge("dpsgd", "line", topology.W, "mlp", SHAPE, 3, x0, hyper={"lr": lr})
    return Transcript("coalition", None, messages, disclosures, public), model, x, y, first


def test_the_end_of_a_line_recovers_every_record_to_float32_rounding():
    """The peel's far agents are off by the rounding amplified hop by hop; the fit over every
    heard message brings every gradient below 1e-4 (acceptance 1 of issue 16, in small)."""
    transcript, model, x, y, first = _run(6, 12, 0.2)
    fit = fit_records(transcript, [0], model, SHAPE, 3, 0, 12)
    assert fit.accepted and fit.residual < 1e-6 and fit.residual <= fit.peel_residual
    for k in range(1, 6):
        assert fit.labels[k] == int(y[k, 0])
        assert (fit.records[k] - x[k, 0].flatten()).norm() < 1e-4 * x[k, 0].norm()
        error = (fit.gradients[k] - first[k]).norm() / first[k].norm()
        assert error < 1e-4, (k, float(error))


def test_two_records_per_agent_are_not_one_record():
    """An agent training on a batch of two breaks the hypothesis: the fit cannot explain the
    messages and says so through its residual, far above the tolerance."""
    transcript, model, *_ = _run(5, 10, 0.2, records_per_agent=2)
    fit = fit_records(transcript, [0], model, SHAPE, 3, 0, 10)
    assert not fit.accepted and fit.residual > 10 * FIT_TOLERANCE


def test_what_the_fit_does_not_cover_is_refused_with_a_reason():
    transcript, model, *_ = _run(4, 6, 0.2)
    with pytest.raises(ValueError, match="attacked round must be 0"):
        fit_records(transcript, [0], model, SHAPE, 3, 1, 6)
    with pytest.raises(ValueError, match="does not reach agents 3"):
        fit_records(transcript, [0], model, SHAPE, 3, 0, 2)
