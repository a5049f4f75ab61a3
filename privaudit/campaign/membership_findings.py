"""Membership findings: from the model an attacker holds of a victim agent to LOSS, LiRA and RMIA
scores of candidate records, scored against the truth and written as one results row.

The attacker's side, in order:

1. **Its data** (`attacker_data`): records from the held-out split, which no agent trains on,
   shuffled by the seed and cut into three disjoint parts: non-members to test alongside the
   victims' records, population records z for RMIA's pairwise test, and a pool to train
   reference models on. The victims' records are the members; each candidate is tested against
   one victim's model (its own victim's for a member; non-members are dealt out in turn, at least
   one to each victim). The attacker sees the candidates
   (members and non-members mixed) without their labels; `is_member` reaches only
   `privaudit.attacks.membership.scores.membership_metrics`.
2. **Reference models** (`reference_models`): K runs of the same defense, with the same public
   hyperparameters, topology, x_0 and local dataset sizes, on shards drawn from the pool, each
   with its own seed. Every candidate is OUT of every reference (the offline setting of LiRA and
   RMIA). From each run the attacker takes the same view as from the target: the victim
   position's model as it crossed the wire at the attacked rounds (`MODEL_VIEWS`, so a defense
   that sends a noisy or quantized model is matched by noisy or quantized references), or the
   final model it holds: the same `privaudit.threats.Release` of the run's final states, the
   victim position's own (or the observer's) for `released_model`, the average for
   `released_average` and `target = "average"` alike.
3. **Scores** (`score_candidates`): the per-record loss, logit-scaled confidence and log
   correct-class probability of the target and of each reference model, turned into LOSS, offline
   LiRA and RMIA scores (`privaudit.attacks.membership.scores`; RMIA's count with its ties broken unless the table
   sets `rmia_score = "count"`). RMIA's offline a is the campaign's `rmia_a` when it sets
   one; otherwise it is chosen on the reference models (`rmia_a`): each in turn attacked as a
   pseudo-target with the others as its references, on pool records whose membership the attacker
   knows because it trained them, keeping the paper's 0.3 when the references are too few or show
   no a better beyond their own noise.

The metrics are the pooled ROC's over every victim's candidates; with several victims, each
victim's own (its members and the non-members dealt to it, against its own model) come beside
them (`victim_metrics`), so a report shows membership per agent.

Anything that goes wrong on the attacker's side (a model the tap did not hear, a model whose
outputs are not finite) becomes a failed finding with its reason.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from privaudit.attacks.membership.methods import METHODS, MembershipOutputs, MembershipSettings
from privaudit.attacks.membership.scores import (
    RMIA_A_PAPER,
    RMIA_PAPER_A,
    MembershipMetrics,
    PseudoTarget,
    RmiaA,
    choose_rmia_a,
    logit_confidence,
    membership_metrics,
)
from privaudit.attacks.views import MODEL_VIEWS
from privaudit.defenses import DEFENSES
from privaudit.defenses.base import Defense, DefenseParams
from privaudit import __version__, devices
from privaudit.campaign.cells import MembershipCell
from privaudit.campaign.config import MembershipConfig
from privaudit.errors import ConfigError
from privaudit.flatmodel import FlatModel
from privaudit.progress import Progress
from privaudit.store import ResultsStore
from privaudit.sampling import LocalData
from privaudit.setup import Setup
from privaudit.sim import Diverged, simulate
from privaudit.threats import RELEASED_THREATS, Release, build_release, build_tap
from privaudit.topology import Topology
from privaudit.wire import Eavesdropper, Tap, Transcript

REFERENCE_SEED_STRIDE = 1_000_003
"""Reference model k of a cell with seed s runs with seed s + (k + 1)·stride, far from any
campaign seed, so no reference repeats the target's random draws."""

RMIA_A_MIN_REFERENCES = 4
"""Fewest reference models to choose RMIA's a on: a pseudo-target and three references of its own,
each OUT of only part of its records (the pool is shared); below that a is the paper's 0.3."""

RMIA_A_SET = "set by the campaign"

_CHUNK = 1024


@dataclass(frozen=True)
class AttackerData:
    """One membership cell's records: candidates (the victims' records, then non-members), the
    victim each candidate is tested against (`owners`), the population z and the reference pool;
    `is_member` is for scoring only. Member rows index the training split, the other rows the
    held-out split. `releases`: the final model each victim's candidates are tested against, as the
    attacker receives it (`releases`; empty for an intercepted target)."""

    candidates_x: Tensor
    candidates_y: Tensor
    owners: np.ndarray
    is_member: np.ndarray
    member_rows: np.ndarray
    non_member_rows: np.ndarray
    population_rows: np.ndarray
    pool_rows: np.ndarray
    population_x: Tensor
    population_y: Tensor
    pool_x: Tensor
    pool_y: Tensor
    releases: dict[int, Release]

    def sizes(self) -> dict[str, int]:
        return {"members": int(self.is_member.sum()), "non_members": int((~self.is_member).sum()),
                "rmia_population": len(self.population_y), "reference_pool": len(self.pool_y)}


def attacker_data(table: MembershipConfig, setup: Setup) -> AttackerData:
    """Split the held-out records for `table` against `table.victim`; ValueError (one line)
    when there are too few, or for an observer the topology lacks."""
    data = setup.data
    if data.task != "classification":
        raise ValueError(f"membership inference needs a classification dataset; '{data.name}' is a {data.task} problem")
    for victim in table.attacked:
        if not 0 <= victim < setup.local.n_agents:
            raise ValueError(f"victim {victim} is not an agent (0..{setup.local.n_agents - 1})")
    shards = [setup.local.index[v, : int(setup.local.sizes[v])].cpu().numpy() for v in table.attacked]
    members = np.concatenate(shards)
    held_out = len(data.y_test)
    wanted_out = table.non_members or len(members)
    left = held_out - wanted_out - table.rmia_samples
    largest = int(setup.local.sizes.max())
    released = releases(table, setup.topology)
    victims = table.attacked
    if wanted_out < len(victims):
        raise ValueError(f"non_members = {wanted_out} leaves some of the {len(victims)} victims without a "
                         "non-member to be tested against; raise non_members")
    if left < largest:
        raise ValueError(f"the held-out split has {held_out} records: {wanted_out} non-members and "
                         f"{table.rmia_samples} RMIA population records leave {max(left, 0)} to train reference "
                         f"models, fewer than the largest local dataset ({largest}); lower non_members or "
                         "rmia_samples, or raise data.test_fraction")
    order = np.random.default_rng(setup.seed).permutation(held_out)
    out_rows = order[:wanted_out]
    z_rows = order[wanted_out: wanted_out + table.rmia_samples]
    pool_rows = order[wanted_out + table.rmia_samples:][: table.reference_pool or None]
    if len(pool_rows) < largest:
        raise ValueError(f"reference_pool = {len(pool_rows)} is smaller than the largest local dataset ({largest})")
    victims = np.asarray(victims)
    return AttackerData(
        candidates_x=torch.cat([data.x_train[members], data.x_test[out_rows]]),
        candidates_y=torch.cat([data.y_train[members], data.y_test[out_rows]]),
        owners=np.concatenate([np.repeat(victims, [len(shard) for shard in shards]),
                               victims[np.arange(len(out_rows)) % len(victims)]]),
        is_member=np.concatenate([np.ones(len(members), bool), np.zeros(len(out_rows), bool)]),
        member_rows=members,
        non_member_rows=out_rows,
        population_rows=z_rows,
        pool_rows=pool_rows,
        population_x=data.x_test[z_rows],
        population_y=data.y_test[z_rows],
        pool_x=data.x_test[pool_rows],
        pool_y=data.y_test[pool_rows],
        releases=released,
    )


def view_rounds(table: MembershipConfig, defense: str) -> list[int]:
    """Every round whose messages the view of `table.rounds` reads."""
    view = MODEL_VIEWS[defense]
    return sorted({t for r in table.rounds or () for t in view.rounds(r) if t >= 0})


def releases(table: MembershipConfig, topology: Topology) -> dict[int, Release]:
    """The final model each victim's records are tested against, as the `Release` of the run's
    final states that the attacker receives: `released_model`'s (the observer's final model,
    default the victim's own), else the average (`released_average`, and `target = "average"`,
    the same model); none for an intercepted target. ValueError (one line) for an observer the
    topology lacks."""
    if not table.final:
        return {}
    threat = table.threat if table.threat in RELEASED_THREATS else "released_average"
    observer = table.observer if threat == "released_model" else None
    return {victim: build_release(threat, victim, topology, observer=observer) for victim in table.attacked}


def released_model(release: Release, final_states: Tensor) -> Tensor:
    """The model [P] `release` gives of one run's final states [N, P]."""
    return release.model(final_states, len(final_states))[0]


def membership_tap(table: MembershipConfig, defense: str, setup: Setup) -> Tap | None:
    """The threat model's tap for an intercepted target, checked to hear the view at every
    attacked round (ValueError naming what is missing); None for a final model, which no tap hears."""
    if table.final:
        return None
    view = MODEL_VIEWS[defense]
    topology = setup.topology
    tap = build_tap(table.threat, table.attacked[0], topology, rounds=view_rounds(table, defense),
                    kinds=view.kinds, observer=table.observer, links=table.links,
                    directed_links=table.directed_links)
    for victim in table.attacked:
        for round in table.rounds:
            view.check(tap, victim, topology, round)
    return tap


def last_round_needed(table: MembershipConfig, defense: str, rounds: int) -> int:
    """How many rounds a reference run needs: up to the last round the view reads, or all."""
    if table.final:
        return rounds
    return max(view_rounds(table, defense)) + 1


def _reference_setup(setup: Setup, data: AttackerData, seed: int) -> Setup:
    """The target's setup with every agent's shard drawn from the pool (same sizes; without
    replacement across agents when the pool holds them all, else within each agent only), on the
    target's device with its random stream there (`privaudit.devices`)."""
    rng = np.random.default_rng(seed)
    sizes = setup.local.sizes.tolist()
    pool = len(data.pool_y)
    if sum(sizes) <= pool:
        cuts = np.cumsum([0] + sizes)
        order = rng.permutation(pool)
        shards = [order[cuts[i]: cuts[i + 1]] for i in range(len(sizes))]
    else:
        shards = [rng.choice(pool, size=size, replace=False) for size in sizes]
    dataset = dataclasses.replace(setup.data, x_train=data.pool_x, y_train=data.pool_y)
    return dataclasses.replace(setup, data=dataset, local=LocalData(data.pool_x, data.pool_y, shards),
                               generator=devices.generator(setup.device, seed), seed=seed)


@dataclass(frozen=True)
class References:
    """The reference runs of one membership table on one training cell: the attacked view of each,
    [K, P] per (attacked round, victim) (round None: the final model the victim's release gives,
    `releases`), their seeds, the pool rows each agent of each run trained on (`shards[k][i]`, indices
    into the attacker's pool) and the wall time."""

    views: dict[tuple[int | None, int], Tensor]
    seeds: list[int]
    shards: list[list[np.ndarray]]
    wall_s: float


def reference_models(table: MembershipConfig, defense: str, params: DefenseParams, setup: Setup,
                     data: AttackerData, rounds: int, progress: Progress | None = None) -> References:
    """Train `table.references` reference runs and take the attacked view of each; `progress`
    counts their rounds (`reference_progress`). They train on the device of `setup`."""
    started = time.perf_counter()
    tick = None if progress is None else (lambda round, public: progress.update(1))
    view = MODEL_VIEWS.get(defense)
    needed = last_round_needed(table, defense, rounds)
    seeds = [setup.seed + (k + 1) * REFERENCE_SEED_STRIDE for k in range(table.references)]
    found: dict[tuple[int | None, int], list[Tensor]] = {}
    shards = []
    for seed in seeds:
        reference_setup = _reference_setup(setup, data, seed)
        local = reference_setup.local
        shards.append([local.index[i, : int(local.sizes[i])].cpu().numpy() for i in range(local.n_agents)])
        taps = []
        if not table.final:
            links = [(v, j) for v in table.attacked for j in setup.topology.neighbours(v)]
            taps = [Eavesdropper(links, rounds=view_rounds(table, defense), kinds=view.kinds)]
        with devices.on(setup.device):
            reference = DEFENSES[defense](params, reference_setup)
            output = simulate(reference, needed, eval_every=needed, taps=taps, after_round=tick)
        for victim in table.attacked:
            if table.final:
                found.setdefault((None, victim), []).append(released_model(data.releases[victim], output.final_states))
                continue
            for round in table.rounds:
                found.setdefault((round, victim), []).append(view.extract(output.transcripts[0], victim, round))
    return References({key: torch.stack(models) for key, models in found.items()}, seeds, shards,
                      time.perf_counter() - started)


@torch.no_grad()
def _outputs(model: FlatModel, params: Tensor, x: Tensor, y: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-record loss, logit-scaled confidence φ and log correct-class probability of every model
    in `params` [M, P] on (x, y): three [M, n] float64 arrays. The log probability is
    log σ(φ) = −softplus(−φ), exact at both ends where exp(−loss) rounds to 1 or underflows to 0
    (as the models of a noisy run often do), so RMIA does not tie those records. The loss is its
    negative, softplus(−φ): the cross-entropy log(1 + Σ_{j≠y} e^{z_j − z_y}) itself, but kept
    where logsumexp_j z_j − z_y rounds to exactly 0 (a margin above about 37 in float64), so LOSS
    does not tie the records a model is most sure of either."""
    losses, confidences, log_probabilities = [], [], []
    for theta in params:
        logits = torch.cat([model.output(theta, x[k: k + _CHUNK]) for k in range(0, len(x), _CHUNK)]).double()
        phi = logit_confidence(logits, y)
        confidences.append(phi)
        losses.append(np.logaddexp(0.0, -phi))
        log_probabilities.append(-losses[-1])
    return np.stack(losses), np.stack(confidences), np.stack(log_probabilities)


def _pseudo_targets(victim: int, shards: list[list[np.ndarray]], pool_log_prob: np.ndarray,
                    z_log_prob: np.ndarray) -> list[PseudoTarget]:
    """Each reference model at `victim`'s position attacked with the others as its references:
    its members are the pool records its victim trained on, its non-members the pool records none
    of its agents trained on (records of its other agents are neither, as for the target), each
    record against the references that did not train on it; records that every other reference
    trained on are left out. pool_log_prob, z_log_prob: [K, pool] and [K, m] log probabilities of
    the reference models."""
    k, pool = pool_log_prob.shape
    trained = np.zeros((k, pool), bool)
    for j, agents in enumerate(shards):
        trained[j, np.concatenate(agents)] = True
    trials = []
    for j in range(k):
        others = np.arange(k) != j
        member = np.zeros(pool, bool)
        member[shards[j][victim]] = True
        out = ~trained[others]
        keep = (member | ~trained[j]) & out.any(axis=0)
        trials.append(PseudoTarget(pool_log_prob[j, keep], member[keep], pool_log_prob[others][:, keep],
                                   out[:, keep], z_log_prob[j], z_log_prob[others]))
    return trials


def rmia_a(table: MembershipConfig, trials: list[PseudoTarget]) -> RmiaA:
    """RMIA's offline a: the campaign's when it sets one, else chosen on the reference models'
    pseudo-targets (`privaudit.attacks.membership.scores.choose_rmia_a`), the paper's 0.3 with too few of them."""
    if table.rmia_a is not None:
        return RmiaA(table.rmia_a, RMIA_A_SET, {})
    if table.references < RMIA_A_MIN_REFERENCES:
        return RmiaA(RMIA_PAPER_A, RMIA_A_PAPER, {})
    return choose_rmia_a(trials, gamma=table.rmia_gamma, log_prob=True, score=table.rmia_score)


def score_candidates(table: MembershipConfig, model: FlatModel, targets: dict[int, Tensor],
                     references: dict[int, Tensor], shards: list[list[np.ndarray]],
                     data: AttackerData) -> tuple[dict[str, np.ndarray], RmiaA]:
    """LOSS, offline LiRA and RMIA scores of the candidates (higher: more likely a member), each
    candidate against its victim's target model and that victim position's reference models, and
    the RMIA a they were scored with; ValueError when a model's outputs are not finite. The models
    run where the attacker's data are (an intercepted view comes from the CPU transcript)."""
    device = data.candidates_x.device
    scores = {name: np.empty(len(data.owners)) for name in METHODS}
    outputs: dict[int, tuple[np.ndarray, MembershipOutputs]] = {}
    trials = []
    for victim, target in targets.items():
        mine = np.flatnonzero(data.owners == victim)
        params = torch.cat([target[None].float(), references[victim].float()]).to(device)
        loss, phi, log_prob = _outputs(model, params, data.candidates_x[mine], data.candidates_y[mine])
        _, _, z_log_prob = _outputs(model, params, data.population_x, data.population_y)
        for name, values in (("loss", loss), ("confidence", phi), ("population log probability", z_log_prob)):
            bad = ~np.isfinite(values).all(axis=1)
            if bad.any():
                which = (f"the target model of victim {victim}" if bad[0]
                         else f"reference model {int(np.argmax(bad[1:]))} of victim {victim}")
                raise ValueError(f"{which} gives a non-finite {name} on some records (diverged training?)")
        outputs[victim] = (mine, MembershipOutputs(loss, phi, log_prob, z_log_prob))
        if table.rmia_a is None and table.references >= RMIA_A_MIN_REFERENCES:
            _, _, pool_log_prob = _outputs(model, references[victim].float().to(device), data.pool_x, data.pool_y)
            if not np.isfinite(pool_log_prob).all():
                raise ValueError(f"a reference model of victim {victim} gives a non-finite log probability on its pool")
            trials += _pseudo_targets(victim, shards, pool_log_prob, z_log_prob[1:])
    chosen = rmia_a(table, trials)
    settings = MembershipSettings(table.lira_variance, table.rmia_gamma, chosen.a, table.rmia_score)
    for mine, found in outputs.values():
        for name, method in METHODS.items():
            scores[name][mine] = method.score(found, settings)
    return scores, chosen


def victim_metrics(table: MembershipConfig, scores: dict[str, np.ndarray], data: AttackerData) -> list[dict[str, Any]]:
    """Each victim's own metrics per method: its members and the non-members dealt to it, each
    scored against its own model (the candidates whose `owners` entry it is), with the table's
    FPRs, bootstrap and confidence; as the pooled metrics, without the ROC points. The pooled
    metrics are computed apart, on every candidate, and stay what they were."""
    found = []
    for victim in table.attacked:
        mine = data.owners == victim
        metrics = {}
        for k, name in enumerate(METHODS):
            result = membership_metrics(scores[name][mine], data.is_member[mine], fprs=table.fprs,
                                        bootstrap=table.bootstrap, confidence=table.confidence, seed=k).as_dict()
            metrics[name] = {key: value for key, value in result.items() if key != "roc"}
        found.append({"victim": victim, "metrics": metrics})
    return found


def _save_scores(store: ResultsStore, cell: str, scores: dict[str, np.ndarray], data: AttackerData) -> str:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, is_member=data.is_member, owners=data.owners, member_rows=data.member_rows,
                        non_member_rows=data.non_member_rows, **scores)
    return store.write_artifact(cell, "scores.npz", buffer.getvalue())


def target_models(table: MembershipConfig, defense: str, round: int | None, transcript: Transcript | None,
                  final_states: Tensor, data: AttackerData) -> dict[int, Tensor]:
    """The model the attacker holds of each victim: the intercepted view at `round`, or the
    final model its release gives (`AttackerData.releases`)."""
    if round is None:
        return {victim: released_model(release, final_states) for victim, release in data.releases.items()}
    return {victim: MODEL_VIEWS[defense].extract(transcript, victim, round) for victim in table.attacked}


def infer(cell_id: str, table: MembershipConfig, model: FlatModel, targets: dict[int, Tensor],
          references: dict[int, Tensor], shards: list[list[np.ndarray]], data: AttackerData,
          store: ResultsStore) -> dict[str, Any]:
    """Score one membership finding; its row fields (status, metrics per method, RMIA's a and how
    it was set, artifacts)."""
    started = time.perf_counter()
    scores, chosen = score_candidates(table, model, targets, references, shards, data)
    metrics: dict[str, MembershipMetrics] = {
        name: membership_metrics(scores[name], data.is_member, fprs=table.fprs, bootstrap=table.bootstrap,
                                 confidence=table.confidence, seed=k)
        for k, name in enumerate(METHODS)
    }
    per_victim = {"by_victim": victim_metrics(table, scores, data)} if len(table.attacked) > 1 else {}
    return {
        "status": "ok",
        "metrics": {name: result.as_dict() for name, result in metrics.items()},
        **per_victim,
        "rmia_a": chosen.a,
        "rmia_a_from": chosen.how,
        "artifacts": {"scores": _save_scores(store, cell_id, scores, data)},
        "score_wall_s": time.perf_counter() - started,
    }


def failed(reason: str) -> dict[str, Any]:
    """The row fields of a finding the attacker could not complete."""
    return {"status": f"failed: {reason}", "metrics": {name: None for name in METHODS}, "artifacts": {}}


def plan_membership(cells: list[MembershipCell], defense: Defense) -> tuple[Tap | None, AttackerData]:
    """The tap and the attacker's data of the membership cells of one table on one training cell
    (they share both, and the reference models); every problem a ConfigError naming the cell."""
    first = cells[0]
    run = first.training.run
    needed = last_round_needed(first.table, run.kind, run.rounds)
    if needed > run.rounds:
        raise ConfigError(f"{first.where}: the model view reads round {needed - 1}, but '{run.name}' runs "
                          f"{run.rounds} rounds (0..{run.rounds - 1})")
    try:
        return membership_tap(first.table, run.kind, defense.setup), attacker_data(first.table, defense.setup)
    except ValueError as error:
        raise ConfigError(f"{first.where}: {error}") from None


def reference_progress(cells: list[MembershipCell]) -> Progress:
    """A count of the rounds the reference runs of one table on one training cell train, by
    reference model: K runs of as many rounds each, so a line says the models done, the rounds
    done, the rate and the time left, and lines keep coming while one long run trains."""
    first, training = cells[0], cells[0].training
    needed = last_round_needed(first.table, training.run.kind, training.run.rounds)
    references = first.table.references
    return Progress(f"{first.label} on {training.label} seed {training.seed}", references * needed, unit="rounds",
                    parts=(references, "reference models"))


def membership_rows(cells: list[MembershipCell], defense: Defense, transcript: Transcript | None,
                    final_states: Tensor, data: AttackerData, store: ResultsStore,
                    progress: bool = False) -> Iterator[dict[str, Any]]:
    """Train the reference models of one table on one training cell once, then score every
    attacked round, yielding each cell's results row as soon as it is scored. With `progress`,
    the reference runs are counted on stderr as they train (`reference_progress`)."""
    first, training = cells[0], cells[0].training
    run = training.run
    counter = reference_progress(cells) if progress else None
    try:
        references = reference_models(first.table, run.kind, training.params, defense.setup, data, run.rounds,
                                      counter)
    except Diverged as diverged:
        yield from unrun_rows(cells, data, f"a reference model {diverged}")
        return
    finally:
        if counter is not None:
            counter.close()
    for cell in cells:
        started = time.perf_counter()
        try:
            targets = target_models(cell.table, run.kind, cell.round, transcript, final_states, data)
            mine = {victim: references.views[cell.round, victim] for victim in cell.table.attacked}
            found = infer(cell.id, cell.table, defense.setup.model, targets, mine, references.shards, data, store)
        except (KeyError, ValueError) as error:
            found = failed(error.args[0] if error.args else str(error))
        yield membership_row(cell, data, references.seeds, references.wall_s, found,
                             time.perf_counter() - started + references.wall_s / len(cells))


def unrun_rows(cells: list[MembershipCell], data: AttackerData, reason: str) -> Iterator[dict[str, Any]]:
    """The rows of membership cells that could not run (their training run or a reference model
    diverged), each failed with `reason`."""
    for cell in cells:
        yield membership_row(cell, data, [], 0.0, failed(reason), 0.0)


def membership_row(cell: MembershipCell, data: AttackerData, seeds: list[int], reference_wall: float,
                   found: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """A membership cell's results row: its identity, its references and what `found` says. A row
    on a final model says what the attacker received (`released`: per victim, the release's threat,
    agents and words); its `threat` is the released threat, or "output" for `target = "average"`
    under a listening threat, which hears nothing there."""
    training = cell.training
    run = training.run
    table = cell.table
    released = table.threat in RELEASED_THREATS
    held = {"released": [{"victim": victim, "threat": release.threat, "agents": list(release.agents),
                          "words": release.words()} for victim, release in data.releases.items()]
            } if cell.round is None else {}
    return {
        "type": "membership",
        "cell": cell.id,
        "group": cell.group,
        "training": training.id,
        "label": cell.label,
        "defense": run.kind,
        "defense_label": run.name,
        "defense_table": training.table_label,
        "setting": training.setting,
        "target": "released" if released else table.target,
        "threat": table.threat if released or cell.round is not None else "output",
        "victims": table.attacked,
        "round": cell.round,
        "seed": training.seed,
        "references": len(seeds),
        "reference_seeds": seeds,
        "reference_wall_s": reference_wall,
        "data": data.sizes(),
        **held,
        **found,
        "wall_s": wall_s,
        "config": cell.describe(),
        "version": __version__,
    }


def membership_headline(row: dict[str, Any]) -> str:
    """How a membership cell ended, in one line: AUC and TPR at 1 % FPR of each method."""
    if row["status"] != "ok":
        return row["status"]
    parts = []
    for name in METHODS:
        metrics = row["metrics"][name]
        low = metrics.get("tpr@0.01")
        parts.append(f"{name.upper()} AUC {metrics['auc']:.3f}" + (f", TPR@1% {low:.3f}" if low is not None else ""))
    return "; ".join(parts)
