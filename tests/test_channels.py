"""Canary channels: what the attacker reads of each defense equals what the canary put in, and the
per-round likelihood ratio is the ratio of the two worlds' densities."""

import math

import pytest
import torch
from scipy.stats import binom, laplace, norm

from privaudit.attacks.audit.canary_audit import make_game, world
from privaudit.attacks.audit.channels import RoundLaw, log_likelihood_ratio
from privaudit.attacks.views import CHANNELS
from privaudit.defenses import DEFENSES
from privaudit.sim import simulate
from privaudit.worlds import Replicated, one_world


@pytest.mark.parametrize("family, density", [("gaussian", norm.pdf), ("laplace", laplace.pdf)])
@pytest.mark.parametrize("adjacency", ["add/remove", "replace-one"])
@pytest.mark.parametrize("draws", [1, 3])
def test_the_round_ratio_is_the_ratio_of_the_two_mixtures(family, density, adjacency, draws):
    law = RoundLaw(0.3, draws, family)
    y = torch.tensor([[-1.3, 0.4], [0.2, 2.5], [3.0, -0.7]], dtype=torch.float64)
    shift = torch.tensor([[0.8, 1.5]], dtype=torch.float64).expand(3, 2)
    weights = [binom.pmf(k, draws, 0.3) for k in range(draws + 1)]

    def mixture(row, sign):
        return sum(w * math.prod(density(v - sign * k * s) for v, s in zip(row, shift[0].tolist()))
                   for k, w in enumerate(weights))

    for row, value in zip(y.tolist(), log_likelihood_ratio(y, shift, law, adjacency).tolist()):
        without = mixture(row, -1) if adjacency == "replace-one" else math.prod(density(v) for v in row)
        assert value == pytest.approx(math.log(mixture(row, 1) / without), rel=1e-9, abs=1e-12)


def test_without_noise_the_statistic_is_the_weighted_projection():
    y = torch.tensor([[0.5, 2.0]], dtype=torch.float64)
    shift = torch.tensor([[3.0, 0.1]], dtype=torch.float64)
    assert float(log_likelihood_ratio(y, shift, RoundLaw(0.5, family=None), "add/remove")[0]) == pytest.approx(1.7)


def _readings(kind: str, data: dict, table: dict, rounds: int):
    """Every observable round's projections on the canary and their shifts, in one world with the
    canary and one without (each a copy of the network), read from a global listener."""
    from privaudit.campaign.cells import build_setup, expand
    from privaudit.campaign.config import parse_campaign

    campaign = parse_campaign({"data": data, "defense": [{"kind": kind, "rounds": rounds, **table}]})
    cell = expand(campaign)[0]
    game = make_game(build_setup(cell), kind, cell.params, rounds)
    found = {}
    for present in (True, False):
        setup = world(game, torch.tensor([present]), seed=3, copies=2)
        defense = DEFENSES[kind](game.params, setup)
        tap = Replicated(game.tap, game.setup.topology, 2)
        output = simulate(defense, rounds, eval_every=rounds, taps=[tap])
        worlds = [one_world(output.transcripts[0], w) for w in range(2)]
        transcript = worlds[0]
        rows = []
        for t in range(CHANNELS[kind].last_observable(rounds) + 1):
            for reading in _each_world(kind, worlds, game, t):
                projected, lengths = game.canaries.projections(game.setup.model, reading.points, reading.vectors)
                lengths = CHANNELS[kind].clipped(transcript.public.hyper, lengths)
                rows.append((projected[:, 0], reading.gain * lengths[:, 0]))
        found[present] = rows
    return game, found


def _each_world(kind, worlds, game, t):
    """The channel's readings of round t, each world's victim read from its own transcript, rows in world order."""
    from privaudit.attacks.audit.channels import Reading

    per_world = [CHANNELS[kind].read(w, [game.victim], t, list(game.scenarios), game.records) for w in worlds]
    return [Reading(*(torch.cat([getattr(readings[k], name) for readings in per_world])
                      for name in ("vectors", "points", "gain"))) for k in range(len(per_world[0]))]


def _is_multiple(values, unit, tolerance):
    ratio = values / unit
    return bool(((ratio - ratio.round()).abs() < tolerance).all()), ratio.round()


def test_undefended_dpsgd_reads_the_canary_exactly():
    game, found = _readings("dpsgd", {"dataset": "digits", "max_train": 120},
                            {"topology": "ring", "agents": 3, "model": "logreg", "batch_size": 10, "lr": 0.5}, 6)
    for present, rows in found.items():
        for values, shift in rows:
            exact, counts = _is_multiple(values, shift, 1e-3)
            assert exact and set(counts.tolist()) <= ({0.0, 1.0} if present else {0.0})
    assert any(float(values.abs().max()) > 0 for values, _ in found[True])


def test_dpdl_without_noise_reads_the_canary_in_every_channel():
    """The ND variant: each cross-gradient and the self-gradient show the canary's clipped length
    over B when it is in the batch, the anti-canary's negative otherwise (replace-one), nothing of
    the other records (the direction is quiet)."""
    game, found = _readings("dpdl", {"dataset": "digits", "max_train": 120},
                            {"topology": "ring", "agents": 3, "model": "logreg", "batch_size": 8, "noise": False,
                             "clip": 2.0}, 4)
    assert game.scenarios == ("cross_gradient", "self_gradient")
    for present, rows in found.items():
        for values, shift in rows:
            exact, counts = _is_multiple(values, shift, 1e-3)
            assert exact and set(counts.tolist()) <= ({0.0, 1.0} if present else {0.0, -1.0})


def test_lt_admm_reads_the_steps_that_held_the_canary():
    """Near-zero noise: the round's projection is k smooth-clipped canary steps, k in 0..τ."""
    game, found = _readings("lt_admm_dp", {"dataset": "digits", "max_train": 120},
                            {"topology": "ring", "agents": 3, "model": "logreg", "tau": 2, "batch_size": 8,
                             "sigma_e": 1e-6}, 4)
    for present, rows in found.items():
        for values, shift in rows:
            exact, counts = _is_multiple(values, shift, 1e-2)
            assert exact and set(counts.tolist()) <= ({0.0, 1.0, 2.0} if present else {0.0, -1.0, -2.0})


def test_tvss_gradient_reads_the_released_noisy_gradient_with_the_canary_in_it():
    """Alg. 2 on a regression task, where no coordinate is quiet: the reading (in units of σ_k) is
    the released g + n the victim disclosed, and its canary coordinate moved by C/(2γ_k) exactly
    when the canary's row was in the batch."""
    from privaudit.campaign.cells import build_setup, expand
    from privaudit.campaign.config import parse_campaign
    from privaudit.wire import GroundTruth

    campaign = parse_campaign({"data": {"dataset": "estimation_wz", "samples_per_agent": 6},
                               "defense": [{"kind": "tvss_gradient", "topology": "ring", "agents": 3,
                                            "model": "linear_estimator", "rounds": 4}]})
    cell = expand(campaign)[0]
    game = make_game(build_setup(cell), "tvss_gradient", cell.params, 4)
    setup = world(game, torch.tensor([True]), seed=1)
    truth = GroundTruth(game.victim, names=("batch", "gradient", "noise"))
    output = simulate(DEFENSES["tvss_gradient"](game.params, setup), 4, eval_every=4,
                      taps=[Replicated(game.tap, game.setup.topology, 1), truth])
    transcript, disclosed = one_world(output.transcripts[0], 0), output.transcripts[1]
    channel, canary_row = CHANNELS["tvss_gradient"], len(setup.local.x) - 1
    coordinate = int(game.canaries.u[0].argmax())
    schedule = channel.schedule(transcript.public.hyper)
    sampled = 0
    for t in range(channel.last_observable(4) + 1):
        reading = channel.read(transcript, [game.victim], t, list(game.scenarios), game.records)[0]
        values = {d.name: d.value for d in disclosed.disclosures if d.round == t}
        released = (values["gradient"] + values["noise"]).double()
        scale = float(schedule.scale(t))
        assert torch.allclose(reading.vectors[0] * scale, released, atol=1e-4)
        batch = channel.batch(transcript.public.hyper, t, game.records)
        assert float(reading.gain[0]) == pytest.approx(1 / (batch * scale))
        if canary_row in values["batch"].tolist():
            own = [r for r in values["batch"].tolist() if r != canary_row]
            others = (per_sample_clipped(setup, game, own, t, transcript).sum(0) / batch)[coordinate]
            assert float(values["gradient"][coordinate]) == pytest.approx(float(others) + 0.1 / batch, abs=1e-5)
            sampled += 1
    assert sampled > 0


def per_sample_clipped(setup, game, rows, t, transcript):
    """The victim's other records' ℓ1-clipped gradients at its state of round t."""
    from privaudit.grads import clip_l1, per_sample_grads

    point = transcript.payload("model", t, game.victim, None)
    grads = per_sample_grads(setup.model, point, setup.local.x[rows], setup.local.y[rows])
    return clip_l1(grads, float(transcript.public.hyper["clip"]))


def test_every_defense_has_a_channel():
    assert set(CHANNELS) == set(DEFENSES)
