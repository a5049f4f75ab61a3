"""Inversion findings: from what a threat model heard during a training run to a scored
reconstruction, written as one results row with its images (one row per `[[attack]]` cell).

The order is the design's one-way flow: the threat model's transcript goes to the extractor
(`privaudit.attacks.extraction`), the target it yields goes to the attack (`privaudit.attacks.inversion.gradient_matching`), and only
then does the ground truth — the victim's batch rows, recorded by a `GroundTruth` tap that no
attack ever sees — meet the reconstruction in `privaudit.metrics`, and a test against the noise
floor (unrelated training images scored against the same originals) decides whether it leaks
(`privaudit.leak`). Anything that goes wrong on the attacker's side (a message the tap did not
hear, a target the attack cannot use, a diverging optimisation) becomes a failed finding with its
reason, never an exception that would stop the campaign.

A reconstruction that leaks on a run with a DP claim is not itself evidence against the claim's ε,
and the row does not read one from it: the reconstruction bound of
`privaudit.attacks.audit.reconstruction_bounds`, P[success] ≤ e^ε κ + δ (ReRo), holds for one
record z drawn from a prior independent of the rest of the dataset, rebuilt at a place of the
dataset fixed in advance. The run's victim holds many records of the training split, and the target
is whichever of them its batch sampler drew: an attack that rebuilds the sampled record is an
attack on all of the victim's records at once, which DP bounds only n times more loosely (n the
victim's records, by a union over them: publishing one of n records drawn at random is
(0, 1/n)-DP for replacing one record, yet rebuilds "the sampled record" every time, far above
κ + 1/n), and no prior exists whose κ a record of a fixed partition could be divided by. Reading
the bound off the run would invent leakage, and one run is one observation in any case. What the
leak does instead is trigger the game the bound is proved for (`leak_bound`): `bound_trials`
trials of `privaudit.attacks.audit.reconstruction_game` on the same run
configuration, attack (with the table's parameters), scenario, round, threat and victim, each
trial the victim holding one record drawn from a held-out pool, the success "PSNR ≥ 30 dB" (the
reconstruction audit's default) with its prior baseline κ, and the bound and verdict of a
`[[audit]] kind = "reconstruction"` table (`privaudit.campaign.audit_findings.played_reconstruction`).
The row keeps it as `reconstruction_audit`, a reconstruction audit row the report links to the run
like any other (`privaudit.reports.verdicts`). An inversion that does not leak plays nothing.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from privaudit.attacks.extraction import Target
from privaudit.attacks.inversion import Reconstruction
from privaudit.attacks.inversion.gradient_matching import working_megabytes
from privaudit.attacks import views
from privaudit.attacks.audit.reconstruction_game import make_reconstruction_game
from privaudit.attacks.audit.verdict import Verdict
from privaudit.attacks.views import EXTRACTORS
from privaudit.defenses.base import Defense
from privaudit import __version__, devices
from privaudit.campaign.audit_findings import played_reconstruction, replace_one_claim
from privaudit.campaign.cells import AttackCell, build_setup, shipped
from privaudit.campaign.config import ATTACK_KINDS, AttackConfig
from privaudit.campaign.inversion_budget import counting, inversion_progress
from privaudit.data import Normalisation
from privaudit.errors import ConfigError
from privaudit.limits import require
from privaudit.leak import decide, noise_floor
from privaudit.metrics import pixel_errors, score_reconstruction
from privaudit.progress import Progress
from privaudit.store import ResultsStore
from privaudit.setup import Setup
from privaudit.threats import build_tap
from privaudit.topology import Topology
from privaudit.wire import GroundTruth, Tap, Transcript

_NOTHING = {"mse": None, "psnr": None, "ssim": None}


def attack_taps(attack: AttackConfig, defense: str, scenario: str, round: int,
                topology: Topology) -> tuple[Tap, GroundTruth]:
    """The threat model's tap, limited to the rounds and kinds the extractor reads, and the
    ground-truth tap of the victim's batch at `round`: ValueError (one line) for agents or links
    the topology does not have. A tap that cannot hear what the extractor needs is returned all
    the same (`unheard` says why): that attack is a row saying it is not possible for this
    attacker, not an error."""
    extractor = EXTRACTORS[defense, scenario]
    rounds = [t for t in extractor.rounds(round) if t >= 0]
    tap = build_tap(attack.threat, attack.victim, topology, rounds=rounds, kinds=extractor.kinds,
                    observer=attack.observer, links=attack.links, directed_links=attack.directed_links)
    truth = GroundTruth(attack.victim, rounds=[round])
    truth.check(topology)
    return tap, truth


def unheard(attack: AttackConfig, defense: str, scenario: str, round: int, tap: Tap,
            topology: Topology) -> str | None:
    """Why `tap` cannot hear what the extractor needs for this attack, or None when it can."""
    extractor = EXTRACTORS[defense, scenario]
    why = extractor.missing(tap, attack.victim, topology, round)
    if why is None:
        return None
    where = f" observing agent {tap.observer}" if tap.observer is not None else ""
    return (f"not possible for this attacker: the {tap.threat_model} tap{where} cannot feed the attack ({why}); "
            f"needs {extractor.needs}")


def attack_unheard(cell: AttackCell, defense: Defense) -> str | None:
    """`unheard` of an attack cell on its training cell's `defense`, named by the cell, so
    `privaudit check` says before any training which attacks will be rows saying they were not
    possible (the run writes those rows, it does not fail)."""
    run, topology = cell.training.run, defense.setup.topology
    try:
        tap, _ = attack_taps(cell.attack, run.kind, cell.scenario, cell.round, topology)
    except ValueError:
        return None
    why = unheard(cell.attack, run.kind, cell.scenario, cell.round, tap, topology)
    return None if why is None else f"{cell.where}: {why}"


def last_round_read(defense: str, scenario: str, round: int) -> int:
    """The last round whose messages the extractor reads for an attack at `round`."""
    return max(EXTRACTORS[defense, scenario].rounds(round))


def _batch_rows(truth: Transcript, victim: int, round: int) -> Tensor | None:
    """The rows of the victim's batch at `round`, as the defense disclosed them (the ground truth a
    reconstruction is scored against); None when it disclosed no single batch there."""
    found = [d.value for d in truth.disclosures if d.name == "batch" and d.round == round and d.agent == victim]
    return found[0].reshape(-1).long() if len(found) == 1 else None


def _tracer(trace: list[dict[str, float]], every: int, original: Tensor,
            normalisation: Normalisation) -> Callable[[int, Tensor, Tensor], bool] | None:
    """An observer recording the MSE and PSNR of the best restart's iterate every `every`
    evaluations: measurement only, it never stops the attack."""
    if every <= 0:
        return None

    def observe(evaluations: int, images: Tensor, objective: Tensor) -> bool:
        if evaluations % every == 0 and torch.isfinite(objective).any():
            best = int(torch.nan_to_num(objective.double(), nan=math.inf).argmin())
            with torch.device("cpu"):  # scored on the CPU, whichever device the attack runs on
                mse, psnr = pixel_errors(images[best].float().cpu(), original, normalisation)
            trace.append({"iteration": evaluations, "mse": mse, "psnr": psnr})
        return False

    return observe


def _strip(pixels: Tensor) -> np.ndarray:
    """A batch of [0, 1] images [B, C, H, W] side by side with a 1-pixel white gap, as an
    [H, W', 3] (colour) or [H, W'] (grey) array."""
    gap = torch.ones(pixels.shape[1], pixels.shape[2], 1, dtype=pixels.dtype)
    parts = []
    for k, image in enumerate(pixels):
        parts += [gap] if k else []
        parts.append(image)
    strip = torch.cat(parts, dim=2).clamp(0, 1)
    return strip[0].numpy() if strip.shape[0] == 1 else strip.permute(1, 2, 0).numpy()


def _png(array: np.ndarray) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    plt.imsave(buffer, array, format="png", cmap="gray" if array.ndim == 2 else None, vmin=0.0, vmax=1.0)
    return buffer.getvalue()


def save_images(store: ResultsStore, cell: str, original: Tensor, reconstruction: Tensor | None,
                 pairs: tuple[int, ...] | None, normalisation: Normalisation) -> dict[str, str]:
    """The originals and the reconstructions (reordered to face their paired originals) as PNG
    strips, and both as [0, 1] tensors; paths relative to the results directory."""
    pixels = normalisation.denormalise(original.double()).clamp(0, 1).float()
    saved = {"original": store.write_artifact(cell, "original.png", _png(_strip(pixels)))}
    tensors: dict[str, Any] = {"original": pixels, "reconstruction": None, "pairs": pairs}
    if reconstruction is not None:
        rec = normalisation.denormalise(reconstruction.double()).clamp(0, 1).float()
        order = [p for p in pairs if p >= 0] + [k for k in range(len(rec)) if k not in pairs]
        rec = rec[torch.as_tensor(order)]
        saved["reconstruction"] = store.write_artifact(cell, "reconstruction.png", _png(_strip(rec)))
        tensors["reconstruction"] = rec
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    saved["tensors"] = store.write_artifact(cell, "images.pt", buffer.getvalue())
    return saved


def invert(cell_id: str, attack: AttackConfig, scenario: str, round: int, setup: Setup,
           transcript: Transcript, truth: Transcript, batch_size: int, store: ResultsStore,
           progress: Progress | None = None) -> dict[str, Any]:
    """Run one inversion finding and return its row fields (status, metrics, trace, artifacts,
    the noise floor as `baseline`, the mean of each score over the draws, and `floor`, every draw,
    and the leak decision `leak`: `privaudit.leak`); the caller adds the cell's identity.
    `progress` counts the attack's loss evaluations (`privaudit.campaign.inversion_budget`). The
    attack runs on the set-up's device (the target moved there from the CPU transcript); the
    reconstruction comes back to the CPU to be scored and saved."""
    started = time.perf_counter()
    data = setup.data
    rows = _batch_rows(truth, attack.victim, round)
    if rows is None:
        return not_run(batch_size, f"failed: the defense disclosed no batch of agent {attack.victim} at round {round} "
                       "(`wire.disclose_each(t, \"batch\", rows)` in its step), so no reconstruction can be scored",
                       time.perf_counter() - started)
    original, true_labels = data.x_train[rows].cpu(), data.y_train[rows].cpu()
    trace: list[dict[str, float]] = []
    if len(rows) == 0:
        return not_run(batch_size, f"failed: the victim's batch at round {round} was empty (Poisson sampling): "
                       "nothing to reconstruct", time.perf_counter() - started)
    floor = noise_floor(data, rows, setup.seed, size=batch_size)
    fields: dict[str, Any] = {"batch_size": batch_size, "truth_size": len(rows), "trace": trace,
                              "baseline": floor.summary(), "floor": floor.record(), "leak": None}
    try:
        target: Target = EXTRACTORS[transcript.public.defense, scenario].extract(transcript, attack.victim, round)
    except (KeyError, ValueError) as error:
        reason = error.args[0] if error.args else str(error)
        return fields | _failed(f"failed: extraction: {reason}", "not run", 0, time.perf_counter() - started,
                                store, cell_id, original, data.normalisation)
    fields["target_kind"] = target.kind
    observer = _tracer(trace, attack.trace_every, original, data.normalisation)
    with devices.on(setup.device):
        result: Reconstruction = attack.attack().run(
            target.to(setup.device), setup.model, input_shape=data.shape, num_classes=data.num_classes,
            batch_size=batch_size, normalisation=data.normalisation, seed=setup.seed,
            observer=observer if progress is None else counting(observer, progress),
        )
    if result.images is None:
        return fields | _failed(result.status, result.stopped_by, result.iterations, result.wall_s, store,
                                cell_id, original, data.normalisation)
    images, labels = result.images.float().cpu(), None if result.labels is None else result.labels.cpu()
    scores = score_reconstruction(images, original, data.normalisation, labels=labels, true_labels=true_labels)
    summary = scores.summary()
    return fields | {
        "status": result.status,
        "stopped_by": result.stopped_by,
        "iterations": result.iterations,
        "wall_s": result.wall_s,
        "label_source": result.label_source,
        "metrics": {key: summary[key] for key in ("mse", "psnr", "ssim", "lpips", "label_acc")},
        "lpips_status": summary["lpips_status"],
        "lpips_backbone": summary["lpips_backbone"],
        "leak": decide(images, scores, floor, data.normalisation).record(),
        "artifacts": save_images(store, cell_id, original, images, scores.pairs, data.normalisation),
    }


def not_run(batch_size: int, status: str, wall_s: float = 0.0) -> dict[str, Any]:
    """The row fields of an attack that had nothing to run on (no victim batch, no finite run)."""
    return {"batch_size": batch_size, "truth_size": 0, "trace": [], "baseline": _NOTHING, "floor": None,
            "leak": None, "status": status,
            "stopped_by": "not run", "iterations": 0, "wall_s": wall_s,
            "metrics": _NOTHING | {"lpips": None, "label_acc": None},
            "lpips_status": "not scored: no reconstruction", "artifacts": {}}


def _failed(status: str, stopped_by: str, iterations: int, wall_s: float, store: ResultsStore, cell_id: str,
            original: Tensor, normalisation: Normalisation) -> dict[str, Any]:
    return {
        "status": status,
        "stopped_by": stopped_by,
        "iterations": iterations,
        "wall_s": wall_s,
        "metrics": {key: None for key in ("mse", "psnr", "ssim", "lpips", "label_acc")},
        "lpips_status": "not scored: no reconstruction",
        "artifacts": save_images(store, cell_id, original, None, None, normalisation),
    }


def attack_batch_size(cell: AttackCell, defense: Defense) -> int:
    """The number of images to reconstruct: the table's, else the defense's public batch size; a
    ConfigError when it is more than an attacked agent holds (the victim, or each agent outside a
    coalition): no batch of its has that many records, and 10⁷ images of a DLG attack asked for 5 GB
    after training."""
    size = cell.attack.batch_size or views.batch_size(defense.name, defense.public())
    if not isinstance(size, int):
        kind = cell.training.run.kind
        raise ConfigError(f"{cell.where}: give batch_size: defense '{kind}' has no public batch size (set batch_size "
                          f"in the attack table, or have its view say how to read it: privaudit.attacks.views."
                          f"register_batch_size('{kind}', lambda hyper: hyper['batch_size']))")
    held = _fewest_records(cell, defense)
    if held is not None and size > held:
        raise ConfigError(f"{cell.where}: batch_size {size:,} exceeds the records of the attacked agent ({held:,}): "
                          "an agent's batch is drawn from its own records")
    data, parameters = defense.setup.data, defense.setup.model.dim
    megabytes = working_megabytes(cell.attack.attack(), size, data.shape, data.num_classes, parameters)
    require("memory", megabytes, f"{cell.where}: the attack's working memory (restarts × history_size × batch, "
            f"and restarts × {parameters:,} model parameters) = {megabytes:,} MB")
    return size


def _fewest_records(cell: AttackCell, defense: Defense) -> int | None:
    """The fewest records an agent the attack targets holds (None when its victim names no agent:
    the tap's check says so)."""
    sizes = defense.setup.local.sizes
    if cell.attack.threat == "coalition":
        attacked = [k for k in range(len(sizes)) if k not in set(cell.attack.agents or [])]
    else:
        attacked = [cell.attack.victim] if cell.attack.victim < len(sizes) else []
    return min((int(sizes[k]) for k in attacked), default=None)


def batch_warnings(cell: AttackCell, defense: Defense) -> list[str]:
    """A warning when the table's batch_size is not the defense's public one: the attack then
    rebuilds another number of images than each message was computed on."""
    size, public = cell.attack.batch_size, views.batch_size(defense.name, defense.public())
    if size is None or not isinstance(public, int) or size == public:
        return []
    return [(f"batch_size {size} differs from the defense's public batch size {public}: the attack rebuilds "
             f"{size} image(s) from messages computed on batches of {public}")]


def plan_attack(cell: AttackCell, defense: Defense) -> tuple[Tap, GroundTruth]:
    """The taps of an attack cell, every problem a ConfigError naming the cell. A threat model that
    cannot hear what the attack needs is no problem here: its tap records nothing, and
    `attack_row` writes the row that says what was missing."""
    run = cell.training.run
    last = last_round_read(run.kind, cell.scenario, cell.round)
    if last >= run.rounds:
        raise ConfigError(f"{cell.where}: the '{cell.scenario}' extractor reads round {last}, but "
                          f"'{run.name}' runs {run.rounds} rounds (0..{run.rounds - 1})")
    attack_batch_size(cell, defense)
    topology = defense.setup.topology
    try:
        tap, truth = attack_taps(cell.attack, run.kind, cell.scenario, cell.round, topology)
    except ValueError as error:
        raise ConfigError(f"{cell.where}: {error}") from None
    if unheard(cell.attack, run.kind, cell.scenario, cell.round, tap, topology) is not None:
        tap.rounds, truth.rounds = frozenset(), frozenset()
    return tap, truth


def attack_row(cell: AttackCell, defense: Defense, transcript: Transcript, truth: Transcript,
               store: ResultsStore, progress: bool = False) -> dict[str, Any]:
    """Run one attack cell on the transcripts of its training run; its results row (a row saying
    the attack is not possible for this attacker when its threat model could not hear enough).
    With `progress`, the attack's loss evaluations are counted on stderr as it runs."""
    run, topology = cell.training.run, defense.setup.topology
    tap, _ = attack_taps(cell.attack, run.kind, cell.scenario, cell.round, topology)
    why = unheard(cell.attack, run.kind, cell.scenario, cell.round, tap, topology)
    if why is not None:
        return attack_cell_row(cell, not_run(attack_batch_size(cell, defense), why))
    counter = inversion_progress(f"{cell.label} on {cell.training.label} seed {cell.training.seed} round "
                                 f"{cell.round}", cell.attack.attack()) if progress else None
    try:
        found = invert(cell.id, cell.attack, cell.scenario, cell.round, defense.setup, transcript, truth,
                       attack_batch_size(cell, defense), store, counter)
    finally:
        if counter is not None:
            counter.close()
    leaked = (found.get("leak") or {}).get("leak") is True
    bound = leak_bound(cell) if leaked and cell.attack.bound_trials > 0 else None
    return attack_cell_row(cell, found | {"warnings": batch_warnings(cell, defense)}
                           | ({"reconstruction_audit": bound} if bound is not None else {}))


LEAK_BOUND_THRESHOLD_DB = 30.0
"""The success of a leak's reconstruction game: PSNR ≥ 30 dB against the target, the default of a
reconstruction audit table (fixed before any trial, so the trials cannot choose it)."""
LEAK_BOUND_CONFIDENCE = 0.95
"""The confidence of a leak's reconstruction bound, a reconstruction audit table's default."""


def leak_bound(cell: AttackCell) -> dict[str, Any] | None:
    """The reconstruction audit a leaking inversion triggers (module docstring): an audit row of
    kind "reconstruction" with the game's bound (its κ, trials, successes and Clopper–Pearson
    confidence) and its verdict on the run's claim, by the rule of an `[[audit]]` table; None when
    the run claims no DP (nothing to bound). A claim the game cannot judge (one that bounds no
    replacement of one record) still gets the bound, with a verdict saying why it cannot judge; a
    game that cannot be built or played on this run is a failed row with its reason, never an
    exception that stops the campaign."""
    started = time.perf_counter()
    training, attack = cell.training, cell.attack
    try:
        game = make_reconstruction_game(
            build_setup(training), training.run.kind, training.params, training.run.rounds, scenario=cell.scenario,
            round=cell.round, attack=attack.kind, threshold_db=LEAK_BOUND_THRESHOLD_DB, victim=attack.victim,
            threat=attack.threat, observer=attack.observer, links=attack.links, directed_links=attack.directed_links,
            inversion=attack.attack())
        if replace_one_claim(game.claim) is None:
            return None
        found = played_reconstruction(game, training, trials=attack.bound_trials, confidence=LEAK_BOUND_CONFIDENCE,
                                      delta=None) | {"status": "ok"}
    except Exception as error:  # noqa: BLE001 - as an audit row: a value error, or a defense written elsewhere
        if not (isinstance(error, (ConfigError, ValueError, FloatingPointError)) or not shipped(training.run.kind)):
            raise
        reason = str(error) if isinstance(error, (ConfigError, ValueError, FloatingPointError)) else \
            f"defense '{training.run.kind}' failed at run time: {type(error).__name__}: {error}"
        found = {**_UNPLAYED, "verdict": Verdict("not evaluable", None, f"the game failed: {reason}").as_dict(),
                 "status": f"failed: {reason}"}
    return {"type": "audit", "cell": f"{cell.id}/reconstruction", "group": f"{cell.group}/reconstruction",
            "training": training.id, "label": f"{cell.label} leaked: reconstruction game", "kind": "reconstruction",
            "method": None, "seed": training.seed, "subject": training.label, "defense": training.run.kind,
            "defense_label": training.label, "samples": None, "confidence": LEAK_BOUND_CONFIDENCE, "delta": None,
            **found, "device": devices.name(devices.work_device()), "wall_s": time.perf_counter() - started,
            "version": __version__}


_UNPLAYED = {"eps_lb": None, "delta_lb": None, "delta_lb_eps": None, "eps_claimed": None, "eps_stated": None,
             "eps_sound": None, "delta_sound": None, "eps_estimate": None, "estimate_method": None, "exact": None,
             "tightness": None, "curve": [], "attack": None, "findings": [], "detail": None}
"""The bound's fields of a leak's reconstruction game that failed."""


def attack_identity(cell: AttackCell) -> dict[str, Any]:
    """The fields naming an attack cell in its row (inversion and coalition rows alike): the cell,
    its group, the training cell and defense run it attacked, and the attack."""
    run, training = cell.training.run, cell.training
    return {
        "cell": cell.id,
        "group": cell.group,
        "training": training.id,
        "label": cell.label,
        "attack": cell.attack.kind,
        "attack_title": ATTACK_KINDS[cell.attack.kind].title,
        "defense": run.kind,
        "defense_label": run.name,
        "defense_table": training.table_label,
        "setting": training.setting,
    }


def attack_cell_row(cell: AttackCell, found: dict[str, Any]) -> dict[str, Any]:
    """An attack cell's results row: its identity and what `found` says it found."""
    run = cell.training.run
    training = cell.training
    return {
        "type": "inversion",
        **attack_identity(cell),
        "scenario": cell.scenario,
        "scenario_needs": EXTRACTORS[run.kind, cell.scenario].needs,
        "threat": cell.attack.threat,
        "victim": cell.attack.victim,
        "round": cell.round,
        "seed": training.seed,
        "warnings": [],
        **found,
        "config": cell.describe(),
        "version": __version__,
    }


def inversion_headline(row: dict[str, Any]) -> str:
    """How an attack cell ended, in one line."""
    if row["metrics"]["psnr"] is None:
        return row["status"]
    text = f"PSNR {row['metrics']['psnr']:.1f} dB (noise floor {row['baseline']['psnr']:.1f} dB)"
    if row.get("leak") is not None:
        text += ", " + leak_words(row["leak"])
    return text if row["status"] == "ok" else f"{text}, {row['status']}"


def leak_words(leak: dict[str, Any]) -> str:
    """A stored leak decision in a few words."""
    level = f"{leak['confidence'] * 100:.3g} %"
    return f"leak at {level} confidence" if leak["leak"] else f"no leak detected (test at {level})"
