"""The informed-adversary reconstruction game played on a decentralized algorithm, trial by trial.

Balle, Cherubin & Hayes (2022) bound what an (ε, δ)-DP release lets any attack rebuild of one
record (`privaudit.attacks.audit.reconstruction_bounds`, (ReRo)); read backwards, a reconstruction attack's
success rate forces ε up. The bound holds for the game it is stated for, which this module plays
exactly:

* **The dataset differs in one record, and the victim holds only it.** All other agents keep the
  data the training set-up gives them (D₋, fixed), and the victim's local dataset is exactly one
  record z, drawn uniformly from a known candidate pool P in every trial. DP bounds how well one
  record *of the dataset* can be rebuilt from the release: were the victim to hold other records
  too, its gradient would mix them with z and the attack's target would not be z. With one record
  and B = 1, every fixed-size batch of the victim is z (a defense sampling fixed-size batches
  refuses a larger B). A Poisson-sampled defense keeps the run's rate q = B/|D_i|, a parameter of
  the mechanism its claim is for: z is then in the victim's batch with probability q each round,
  and the game plays the run's own mechanism, so its claim is the run's.
* **The defense runs with its own randomness**, a fresh seed per trial, and the attacker hears
  what its threat model allows (`privaudit.threats.build_tap`), limited to the rounds and
  messages the defense's extractor reads (`privaudit.attacks.views.EXTRACTORS[kind, scenario]`) at the
  attacked round. The run stops after the last round the extractor reads: what the attacker
  hears is a prefix of the whole run's messages, a post-processing of the release the claim
  covers.
* **One guess per trial.** The inversion (`privaudit.attacks.inversion.INVERSIONS[attack]`, e.g. iDLG)
  rebuilds one image from the extracted target; the trial succeeds when its PSNR against z is at
  least τ dB, on [0, 1] pixels exactly as inversion rows are scored (`privaudit.metrics`: both
  images denormalised, the reconstruction clipped). A trial whose run diverges or whose attack
  returns nothing is a failure: that only lowers the success rate, so the bound stays sound.
* **The baseline** κ of "PSNR ≥ τ" under the uniform prior on P is bracketed by
  `psnr_kappa` on the pool's [0, 1] pixels; the upper value is the κ the bound divides by.

Trials are independent: each draws its own z and its own seeds from (set-up seed, trial index).
The pool is the held-out split (records no agent trains on), drawn without replacement by the
set-up's seed. Nothing here knows about campaigns; `privaudit.campaign.audit_findings` builds a
game from a campaign cell.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from privaudit import devices
from privaudit.attacks.audit.canaries import with_records
from privaudit.attacks.audit.reconstruction_bounds import ReconstructionBound, psnr_kappa, reconstruction_bound
from privaudit.attacks.inversion import INVERSIONS
from privaudit.attacks.views import EXTRACTORS
from privaudit.defenses import DEFENSES
from privaudit.defenses.base import DefenseParams
from privaudit.defenses.external import checked_claim
from privaudit.accounting import Claim
from privaudit.errors import ConfigError
from privaudit.metrics import pixel_errors
from privaudit.setup import Setup
from privaudit.sim import Diverged, simulate
from privaudit.threats import build_tap
from privaudit.wire import Tap


@dataclass(frozen=True)
class ReconstructionGame:
    """One game: the set-up whose other agents' data are D₋, the defense and its parameters, the
    attacked `round` and the `scenario` extracted there, the threat model's `tap` (a template: each
    trial listens with a fresh copy), the inversion `attack` and the success threshold, the
    candidate pool (normalised inputs and labels, indices into the held-out split) and the claim
    of the run (`holding`: its sampling rates kept). `inversion` is the attack object that guesses
    (default: `attack` with its default parameters): an inversion table's own parameters, so the
    game plays the attack that was run, not a weaker or stronger one."""

    setup: Setup
    kind: str
    params: DefenseParams
    rounds: int
    victim: int
    scenario: str
    round: int
    threat: str
    tap_options: dict[str, Any]
    attack: str
    threshold_db: float
    pool_x: Tensor
    pool_y: Tensor
    pool_rows: np.ndarray
    claim: Claim
    inversion: Any = None

    @property
    def simulated(self) -> int:
        """Rounds each trial runs: up to the last one the extractor reads."""
        return max(EXTRACTORS[self.kind, self.scenario].rounds(self.round)) + 1

    def tap(self) -> Tap:
        extractor = EXTRACTORS[self.kind, self.scenario]
        return build_tap(self.threat, self.victim, self.setup.topology,
                         rounds=[t for t in extractor.rounds(self.round) if t >= 0], kinds=extractor.kinds,
                         **self.tap_options)


def make_reconstruction_game(setup: Setup, kind: str, params: DefenseParams, rounds: int, *, scenario: str,
                             round: int = 0, attack: str = "idlg", threshold_db: float = 30.0, pool: int = 1000,
                             victim: int = 0, threat: str = "global_listener", observer: int | None = None,
                             links: list[tuple[int, int]] | None = None,
                             directed_links: list[tuple[int, int]] | None = None,
                             inversion: Any = None) -> ReconstructionGame:
    """The game of one defense configuration on `setup` (`rounds` is the whole run's length, which
    the claim is for; `inversion`: the configured attack object, `ReconstructionGame`); every problem — a scenario the defense lacks, a round past the run, a tap
    that cannot hear what the extractor needs, data that are not images — is a one-line ConfigError."""
    if (kind, scenario) not in EXTRACTORS:
        known = ", ".join(s for k, s in EXTRACTORS if k == kind) or "none"
        raise ConfigError(f"defense '{kind}' has no scenario '{scenario}' (known: {known})")
    if attack not in INVERSIONS:
        raise ConfigError(f"unknown attack '{attack}' (choose from {', '.join(INVERSIONS)})")
    extractor = EXTRACTORS[kind, scenario]
    last = max(extractor.rounds(round))
    if last >= rounds:
        raise ConfigError(f"the '{scenario}' extractor reads round {last}, but the run has {rounds} rounds "
                          f"(0..{rounds - 1})")
    data = setup.data
    if len(data.shape) != 3:
        raise ConfigError(f"a reconstruction audit scores images; dataset '{data.name}' has inputs of shape "
                          f"{tuple(data.shape)}")
    if len(data.x_test) < 1:
        raise ConfigError(f"dataset '{data.name}' has no held-out records to draw the candidate pool from")
    options = {"observer": observer, "links": links, "directed_links": directed_links}
    try:
        tap = build_tap(threat, victim, setup.topology, rounds=[t for t in extractor.rounds(round) if t >= 0],
                        kinds=extractor.kinds, **options)
    except ValueError as error:
        raise ConfigError(f"reconstruction audit: {error}") from None
    why = extractor.missing(tap, victim, setup.topology, round)
    if why is not None:
        raise ConfigError(f"reconstruction audit: the {threat} tap {why}; the '{scenario}' extractor needs "
                          f"{extractor.needs}")
    rows = np.sort(np.random.default_rng(setup.seed).choice(len(data.x_test), min(pool, len(data.x_test)),
                                                            replace=False))
    index = torch.as_tensor(rows)
    pool_x, pool_y = data.x_test[index], data.y_test[index]
    try:
        claim = checked_claim(DEFENSES[kind](params, holding(setup, victim, pool_x[:1], pool_y[:1], setup.seed)), rounds)
    except ValueError as error:
        raise ConfigError(f"reconstruction audit: {error}") from None
    return ReconstructionGame(setup, kind, params, rounds, victim, scenario, round, threat, options, attack,
                              float(threshold_db), pool_x, pool_y, rows, claim, inversion)


def holding(setup: Setup, victim: int, x: Tensor, y: Tensor, seed: int) -> Setup:
    """`setup` with the victim's local data replaced by exactly the records x, y, and the random
    stream seeded by `seed`. Poisson sampling rates stay those of the run's own sizes
    (`privaudit.attacks.audit.canaries.with_records`): the rate q = B/|D_i| is a parameter of the mechanism
    its claim is computed for, so the game plays the mechanism of the run audited and its claim is
    that run's."""
    replaced = with_records(setup, victim, x, y, replace=int(setup.local.sizes[victim]))
    return dataclasses.replace(replaced, generator=torch.Generator().manual_seed(seed), seed=seed)


def pool_pixels(game: ReconstructionGame) -> Tensor:
    """The candidates as the metrics see them: [0, 1] pixels (`Normalisation.denormalise`, its
    float rounding clipped off)."""
    return game.setup.data.normalisation.denormalise(game.pool_x.double()).clamp(0.0, 1.0)


@dataclass(frozen=True)
class Trial:
    """One trial: the candidate drawn (its place in the pool and its row of the held-out split),
    the defense's and the attack's seed, the reconstruction's PSNR against it (None when there was
    none), whether that is a success, and the attack's status."""

    index: int
    candidate: int
    record: int
    seed: int
    psnr: float | None
    success: bool
    status: str

    def as_dict(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["psnr"] = None if self.psnr is None or not math.isfinite(self.psnr) else self.psnr
        record["exact"] = self.psnr is not None and math.isinf(self.psnr)
        return record


def _seeds(seed: int, index: int) -> tuple[int, int]:
    """(candidate draw, defense and attack seed) of trial `index`, independent across trials."""
    words = np.random.SeedSequence([seed, index]).generate_state(2)
    return int(words[0]), int(words[1] & 0x7FFFFFFF)


def play_trial(game: ReconstructionGame, index: int, device: torch.device = torch.device("cpu")) -> Trial:
    """Trial `index`: draw z from the pool, run the defense with the victim holding only z, let
    the tap listen, extract the target at the attacked round, invert it, score against z. The
    run and the attack are on `device` (`privaudit.devices`: the trial's set-up moved there, its
    random stream a generator there); the reconstruction is scored on the CPU."""
    draw, seed = _seeds(game.setup.seed, index)
    candidate = int(np.random.default_rng(draw).integers(len(game.pool_x)))
    z, label = game.pool_x[candidate: candidate + 1], game.pool_y[candidate: candidate + 1]
    setup = holding(game.setup, game.victim, z, label, seed).to(device)
    with devices.on(device):
        defense = DEFENSES[game.kind](game.params, setup)
    tap = game.tap()
    record = int(game.pool_rows[candidate])

    def failed(status: str) -> Trial:
        return Trial(index, candidate, record, seed, None, False, status)

    try:
        with devices.on(device):
            output = simulate(defense, game.simulated, eval_every=game.simulated, taps=[tap])
    except Diverged as diverged:
        return failed(f"failed: training run {diverged}")
    try:
        target = EXTRACTORS[game.kind, game.scenario].extract(output.transcripts[0], game.victim, game.round)
    except (KeyError, ValueError) as error:
        return failed(f"failed: extraction: {error.args[0] if error.args else error}")
    data = setup.data
    inversion = game.inversion if game.inversion is not None else INVERSIONS[game.attack]()
    with devices.on(device):
        result = inversion.run(target.to(device), setup.model, input_shape=data.shape, num_classes=data.num_classes,
                               batch_size=1, normalisation=data.normalisation, seed=seed)
    if result.images is None:
        return failed(result.status)
    _, psnr = pixel_errors(result.images.float().cpu(), z.cpu(), data.normalisation)
    return Trial(index, candidate, record, seed, psnr, psnr >= game.threshold_db, result.status)


def play(game: ReconstructionGame, *, trials: int, confidence: float, delta: float) -> dict[str, Any]:
    """`trials` independent trials and the bound they force: the `ReconstructionBound` fields,
    the pool's size, the κ bracket, every trial, the wall time and the device the trials ran on
    (`privaudit.devices.work_device()`)."""
    started = time.perf_counter()
    device = devices.work_device()
    kappa_lower, kappa = psnr_kappa(pool_pixels(game), game.threshold_db)
    played = [play_trial(game, index, device) for index in range(trials)]
    criterion = f"PSNR >= {game.threshold_db:g} dB against the target, one guess per trial"
    bound: ReconstructionBound = reconstruction_bound(sum(t.success for t in played), trials, kappa, delta,
                                                      confidence, kappa_lower=kappa_lower, criterion=criterion)
    scored = [t.psnr for t in played if t.psnr is not None]
    median = float(np.median(scored)) if scored else None
    return bound.as_dict() | {
        "pool": len(game.pool_x),
        "attack": game.attack,
        "scenario": game.scenario,
        "round": game.round,
        "threshold_db": game.threshold_db,
        "median_psnr": median if median is not None and math.isfinite(median) else None,
        "exact": sum(t.psnr is not None and math.isinf(t.psnr) for t in played),
        "trial_records": [t.as_dict() for t in played],
        "psnr": [None if t.psnr is None or not math.isfinite(t.psnr) else t.psnr for t in played],
        "wall_s": time.perf_counter() - started,
        "device": devices.name(device),
    }
