"""Coalition findings: what a coalition of curious agents recovers of every other agent
(`privaudit.attacks.coalition.knowledge`), each recovered update inverted by the table's attack and scored against
that agent's batch, written as one results row per attacked round with a figure of the graph
coloured by exposure.

As for single-victim inversions, the ground truth (every agent's batch rows and gradient at the
attacked round, recorded by a `Witnesses` tap) meets the attacker's output only after the attack,
in `privaudit.metrics` and `privaudit.leak` (the noise floor and the leak decision); the
recovered update's relative error is measured against the gradient the agent really used at that
round. A defense whose messages the coalition attack does not model
gives a failed row saying why, and the campaign goes on.
"""

from __future__ import annotations

import io
import time
from typing import Any

import torch

from privaudit.attacks.coalition.knowledge import recover
from privaudit.attacks.coalition.record_fit import fit_problem, fit_progress, fit_records
from privaudit.attacks.extraction import Target
from privaudit.attacks.views import DYNAMICS, dynamics
from privaudit.defenses.base import Defense
from privaudit import __version__, devices
from privaudit.campaign.cells import AttackCell
from privaudit.campaign.inversion_budget import counting, inversion_progress
from privaudit.campaign.inversion_findings import attack_batch_size, attack_identity, save_images
from privaudit.errors import ConfigError
from privaudit.leak import decide, noise_floor
from privaudit.metrics import score_reconstruction
from privaudit.store import ResultsStore
from privaudit.setup import Setup
from privaudit.topology import Topology
from privaudit.wire import Coalition, Tap, Transcript, Witnesses


def window(cell: AttackCell, topology: Topology) -> int:
    """Rounds heard after the attacked round: the table's, else N (information crosses at most
    one link per round, so N rounds reach every agent of a connected graph)."""
    return cell.attack.window or topology.n


def plan_coalition(cell: AttackCell, defense: Defense) -> tuple[Tap, Tap]:
    """The coalition's tap over the attacked round and its window, and the witnesses' tap; a
    ConfigError naming the cell for agents or rounds the run does not have."""
    run = cell.training.run
    topology = defense.setup.topology
    last = cell.round + window(cell, topology)
    if last >= run.rounds:
        raise ConfigError(f"{cell.where}: the coalition reads rounds {cell.round}..{last}, but '{run.name}' runs "
                          f"{run.rounds} rounds (0..{run.rounds - 1}); lower window or raise rounds")
    agents = cell.attack.agents or []
    kinds = [DYNAMICS[run.kind].kind] if run.kind in DYNAMICS else []
    tap = Coalition(agents, rounds=range(cell.round, last + 1), kinds=kinds)
    try:
        tap.check(topology)
    except ValueError as error:
        raise ConfigError(f"{cell.where}: {error}") from None
    attack_batch_size(cell, defense)
    others = [k for k in range(topology.n) if k not in set(agents)]
    return tap, Witnesses(others if kinds else [], rounds=[cell.round])


def _graph_png(topology: Topology, members: list[int], exposure: dict[int, str]) -> bytes:
    """The graph with the coalition in red, exactly exposed agents in dark orange, agents exposed
    through fitted records in orange, under the constant-gradient assumption in light orange,
    hidden ones in grey."""
    import matplotlib
    import networkx as nx

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shade = {"exact": "#d35400", "fitted": "#e67e22", "assumed": "#f8c471", "hidden": "#bdc3c7"}
    colours = ["#c0392b" if k in members else shade[exposure[k]] for k in range(topology.n)]
    figure, axis = plt.subplots(figsize=(4.5, 3.2))
    layout = nx.kamada_kawai_layout(topology.graph)
    nx.draw_networkx(topology.graph, layout, ax=axis, node_color=colours, node_size=260, font_size=8)
    axis.set_title("coalition (red); exposed exactly (dark orange), fitted (orange), under the assumption "
                   "(light); hidden (grey)",
                   fontsize=7)
    axis.axis("off")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _truth(witnesses: Transcript, agent: int, round: int, name: str) -> torch.Tensor | None:
    try:
        return witnesses.disclosed(agent, round, name)
    except KeyError:
        return None


def _fitted(transcript: Transcript, members: list[int], setup: Setup, first: int, last: int,
            fields: dict[str, Any], label: str | None = None) -> dict[int, Target]:
    """The updates the record fit recovers where its hypothesis holds (one fixed record per agent:
    B = 1 and one training record each) and the fit explains the messages; what it did, or why it
    did not run, goes into `fields["record_fit"]`. With a `label`, the fit's progress is counted
    on stderr under it (`privaudit.attacks.coalition.record_fit.fit_progress`). The fit replays
    the run in float64 from the transcript, which the wire keeps on the CPU, so it runs there (with
    a CPU copy of the model when the run was on another device)."""
    data = setup.data
    model = setup.model if setup.device.type == "cpu" else setup.model.to(torch.device("cpu"))
    problem = fit_problem(transcript, model, data.shape, first)
    if not problem and DYNAMICS[transcript.public.defense].batch_size(transcript.public) != 1:
        problem = "the record fit needs B = 1 (each agent's update the gradient of one record)"
    if not problem and set(setup.local.sizes.tolist()) != {1}:
        problem = "the record fit needs one training record per agent (each agent's update the gradient of that record)"
    if problem:
        fields["record_fit"] = {"status": f"not run: {problem}"}
        return {}
    started = time.perf_counter()
    counter = None if label is None else fit_progress(label, last)
    try:
        fit = fit_records(transcript, members, model, data.shape, data.num_classes, first, last, counter)
    except (KeyError, ValueError) as error:
        fields["record_fit"] = {"status": f"failed: {error.args[0]}", "wall_s": time.perf_counter() - started}
        return {}
    finally:
        if counter is not None:
            counter.close()
    fields["record_fit"] = {"status": "accepted" if fit.accepted else "rejected: the fitted records do not explain "
                            "the messages (residual above the tolerance)", **fit.summary(),
                            "wall_s": time.perf_counter() - started}
    if not fit.accepted:
        return {}
    point = transcript.public.initial_model.float()
    return {k: Target(fit.gradients[k].float(), point, k, first, kind="gradient_estimate") for k in fit.gradients}


def coalition_findings(cell: AttackCell, defense: Defense, transcript: Transcript, witnesses: Transcript,
                       store: ResultsStore, progress: bool = False) -> dict[str, Any]:
    """Solve the coalition's knowledge system, invert every exposed agent's update and score it;
    the row fields (status, per-agent results, the exposure figure). With `progress`, the record
    fit and each inversion are counted on stderr as they run."""
    started = time.perf_counter()
    where = f"{cell.label} on {cell.training.label} seed {cell.training.seed} round {cell.round}"
    setup, data = defense.setup, defense.setup.data
    members = sorted(cell.attack.agents or [])
    last = cell.round + window(cell, setup.topology)
    fields: dict[str, Any] = {"coalition": members, "window": last - cell.round, "agents": [], "exposed": 0}
    try:
        fields["recovers"] = dynamics(cell.training.run.kind).recovers
        fitted = _fitted(transcript, members, setup, cell.round, last, fields,
                         f"record fit of {where}" if progress else None)
        found = recover(transcript, members, cell.round, last, fitted)
    except (KeyError, ValueError) as error:
        reason = error.args[0] if error.args else str(error)
        return fields | {"status": f"failed: {reason}", "wall_s": time.perf_counter() - started, "artifacts": {}}
    batch_size = attack_batch_size(cell, defense)
    neighbours = {j for c in members for j in setup.topology.neighbours(c)}
    agents = []
    for item in found:
        rows = _truth(witnesses, item.agent, cell.round, "batch")
        gradient = _truth(witnesses, item.agent, cell.round, "gradient")
        entry: dict[str, Any] = {"agent": item.agent, "exposure": item.exposure,
                                 "role": "neighbour" if item.agent in neighbours else "beyond",
                                 "relative_error": None, "metrics": None, "baseline": None, "floor": None,
                                 "leak": None, "status": "hidden", "artifacts": {}}
        if item.target is not None and rows is not None and len(rows.reshape(-1)):
            rows = rows.reshape(-1).long()
            if gradient is not None:
                true = gradient.double()
                entry["relative_error"] = float((item.target.gradient - true).norm() / true.norm().clamp_min(1e-300))
            attack = cell.attack.attack()
            counter = inversion_progress(f"{where}, agent {item.agent}", attack) if progress else None
            try:
                with devices.on(setup.device):
                    result = attack.run(item.target.to(setup.device), setup.model, input_shape=data.shape,
                                        num_classes=data.num_classes, batch_size=batch_size,
                                        normalisation=data.normalisation, seed=setup.seed,
                                        observer=None if counter is None else counting(None, counter))
            finally:
                if counter is not None:
                    counter.close()
            original = data.x_train[rows].cpu()
            entry["status"] = result.status
            floor = noise_floor(data, rows, setup.seed, size=batch_size)
            entry["baseline"], entry["floor"] = floor.summary(), floor.record()
            if result.images is not None:
                images = result.images.float().cpu()
                scores = score_reconstruction(images, original, data.normalisation,
                                              labels=None if result.labels is None else result.labels.cpu(),
                                              true_labels=data.y_train[rows].cpu())
                summary = scores.summary()
                entry["metrics"] = {key: summary[key] for key in ("mse", "psnr", "ssim", "label_acc")}
                entry["leak"] = decide(images, scores, floor, data.normalisation).record()
                entry["artifacts"] = save_images(store, f"{cell.id}/agent{item.agent}", original, images,
                                                 scores.pairs, data.normalisation)
        agents.append(entry)
    exposure = {entry["agent"]: entry["exposure"] for entry in agents}
    figure = store.write_artifact(cell.id, "exposure.png", _graph_png(setup.topology, members, exposure))
    return fields | {"status": "ok", "agents": agents, "exposed": sum(e != "hidden" for e in exposure.values()),
                     "exact": sum(e == "exact" for e in exposure.values()),
                     "fitted": sum(e == "fitted" for e in exposure.values()),
                     "wall_s": time.perf_counter() - started, "artifacts": {"graph": figure}}


def coalition_row(cell: AttackCell, found: dict[str, Any]) -> dict[str, Any]:
    """A coalition cell's results row: its identity and what `found` says it found."""
    return {
        "type": "coalition",
        **attack_identity(cell),
        "threat": "coalition",
        "round": cell.round,
        "seed": cell.training.seed,
        **found,
        "config": cell.describe(),
        "version": __version__,
    }


def coalition_headline(row: dict[str, Any]) -> str:
    """How a coalition cell ended, in one line."""
    if row["status"] != "ok":
        return row["status"]
    scored = [a for a in row["agents"] if a["metrics"] and a["metrics"]["psnr"] is not None]
    best = max((a["metrics"]["psnr"] for a in scored), default=None)
    fitted = f", {row['fitted']} through fitted records" if row.get("fitted") else ""
    text = f"{row['exposed']} of {len(row['agents'])} agents exposed ({row.get('exact', 0)} exactly{fitted})"
    decided = [a["leak"] for a in scored if a.get("leak")]
    leaks = "" if not decided else \
        f", {sum(d['leak'] for d in decided)} leaking at {decided[0]['confidence'] * 100:.3g} % confidence"
    return text + ("" if best is None else f", best PSNR {best:.1f} dB") + leaks
