"""Active findings: an `[[attack]]` table of an active kind (`kind = "trap_weights"`, threat =
"malicious") on one training cell at one override round, written as an inversion row like every
other (PSNR, SSIM, the leak test, the images) with an `active` record beside it: what the attacker
assumed, who lied to whom at which round, a summary of what it sent, the PSNR and SSIM of each
record, and the passive attack's result on the same run (the same agents, honest, the same seed:
`privaudit.attacks.active.trial`).

The lie changes the run, so the cell does not ride on its training cell's run as a passive attack
does: it trains the cell's configuration twice, with the lie and without, each up to the round
that releases the trapped gradient (the first rounds of the training cell's run: later rounds do
not change them). Everything the plan assumes is checked at `check`, each failure one line naming
the cell (the refusals of `privaudit.attacks.active.threat.plan_override` and of the trapped
linear layer); a run that diverges is a failed row.
"""

from __future__ import annotations

import time
from typing import Any

from privaudit import devices
from privaudit.attacks.active.override import steered_records
from privaudit.attacks.active.threat import OverridePlan, plan_override
from privaudit.attacks.active.trial import Side, Trial
from privaudit.attacks.inversion.analytic import trap_layer_problem
from privaudit.campaign.cells import AttackCell, build_defense
from privaudit.campaign.inversion_findings import attack_cell_row, not_run, save_images
from privaudit.defenses.base import Defense
from privaudit.errors import ConfigError
from privaudit.sim import Diverged
from privaudit.store import ResultsStore

RECOVERED_DB = 40.0
"""A record counts as recovered at this PSNR or more (issue 39's acceptance 1): far above any
noise floor of digits, the level at which the image is the record."""
ACTIVE_LABEL = "active (malicious neighbour sent crafted messages)"
PASSIVE_LABEL = "passive (the same agents listening)"


def _liar(cell: AttackCell, defense: Defense) -> int | None:
    """The table's liar, else the first of its agents that neighbours the victim (None: the
    plan's default, the victim's lowest-numbered neighbour)."""
    table = cell.attack
    if table.liar is not None:
        return table.liar
    neighbours = set(defense.setup.topology.neighbours(table.victim)) if table.victim < defense.setup.topology.n \
        else set()
    return next((agent for agent in table.agents or () if agent in neighbours), None)


def plan_active(cell: AttackCell, defense: Defense) -> tuple[OverridePlan, int]:
    """The override plan of an active cell on its training cell's `defense` and the number of
    records it reads; a one-line ConfigError naming the cell where an assumption fails: a defense
    it does not apply to, agents that do not hear every neighbour of the victim, a run too short, a
    model without a linear layer to trap (`trap_layer_problem`), too little public data to place
    the traps, or a defense with no fixed public batch size."""
    table, run = cell.attack, cell.training.run
    try:
        plan = plan_override(run.kind, defense.setup.topology, victim=table.victim, round=cell.round,
                             rounds=run.rounds, liar=_liar(cell, defense), agents=table.agents, hyper=defense.public())
    except ValueError as error:
        raise ConfigError(f"{cell.where}: {error}") from None
    setup = defense.setup
    problem = trap_layer_problem(setup.model, setup.data.shape)
    if problem:
        raise ConfigError(f"{cell.where}: {problem}")
    size = table.batch_size or steered_records(run.kind, defense.public())
    if not isinstance(size, int):
        raise ConfigError(f"{cell.where}: defense '{run.kind}' has no public batch size to place the traps for")
    if len(setup.data.x_test) < 2 * size:
        raise ConfigError(f"{cell.where}: trap weights place each unit's threshold with the held-out split: "
                          f"{len(setup.data.x_test)} records cannot place one that fires for 1 in {size}")
    return plan, size


def check_active(cell: AttackCell) -> None:
    """`plan_active` on a freshly built defense of the cell's configuration (at `check`)."""
    plan_active(cell, build_defense(cell.training))


def active_row(cell: AttackCell, store: ResultsStore) -> dict[str, Any]:
    """Run the cell's lie and its honest twin and return its inversion row with `active`."""
    started = time.perf_counter()
    device = devices.work_device()
    defense = build_defense(cell.training, device)
    plan, size = plan_active(cell, defense)
    attack = cell.attack.attack()
    try:
        with devices.on(device):
            trial = attack.run(lambda: build_defense(cell.training, device), victim=plan.victim, round=plan.round,
                               liar=plan.liar, agents=plan.agents, batch_size=size)
    except Diverged as diverged:
        return attack_cell_row(cell, not_run(size, f"failed: training run {diverged}", time.perf_counter() - started))
    found = _side_fields(cell, trial, trial.active, defense, store)
    found["wall_s"] = time.perf_counter() - started
    return attack_cell_row(cell, found | {"active": active_record(trial, cell.attack.kind)})


def _side_fields(cell: AttackCell, trial: Trial, side: Side, defense: Defense, store: ResultsStore) -> dict[str, Any]:
    """The row fields of the active side, as `privaudit.campaign.inversion_findings.invert` writes them."""
    data, result = defense.setup.data, side.reconstruction
    original = data.x_train[trial.rows.cpu()].cpu()
    fields: dict[str, Any] = {"batch_size": len(trial.rows), "truth_size": trial.records, "trace": [],
                              "baseline": None if side.floor is None else side.floor.summary(),
                              "floor": None if side.floor is None else side.floor.record(), "leak": side.leak,
                              "target_kind": "gradient", "status": result.status, "stopped_by": result.stopped_by,
                              "iterations": result.iterations, "label_source": result.label_source}
    if side.scores is None:
        return fields | {"metrics": {key: None for key in ("mse", "psnr", "ssim", "lpips", "label_acc")},
                         "lpips_status": "not scored: no reconstruction",
                         "artifacts": save_images(store, cell.id, original, None, None, data.normalisation)}
    summary = side.scores.summary()
    images = result.images.float().cpu()
    return fields | {
        "metrics": {key: summary[key] for key in ("mse", "psnr", "ssim", "lpips", "label_acc")},
        "lpips_status": summary["lpips_status"], "lpips_backbone": summary["lpips_backbone"],
        "artifacts": save_images(store, cell.id, original, images, side.scores.pairs, data.normalisation),
    }


def _side_record(side: Side, label: str) -> dict[str, Any]:
    """One side's result for the `active` record: its batch scores, each record's PSNR and SSIM,
    how many it recovered, and its leak decision."""
    metrics = None if side.scores is None else {key: side.scores.summary()[key] for key in ("mse", "psnr", "ssim")}
    return {"label": label, "status": side.reconstruction.status, "metrics": metrics, "psnr": list(side.psnr),
            "ssim": list(side.ssim), "recovered": side.recovered(RECOVERED_DB), "leak": side.leak,
            "baseline": None if side.floor is None else side.floor.summary()}


def sent_summary(trial: Trial) -> dict[str, Any]:
    """What the liar sent, in numbers rather than the tensor: to whom, when, which kind, its norm,
    the norm of the point it made the victim mix to, and how far the message lies from that point
    (the other neighbours' terms it cancels)."""
    plan, message, goal = trial.plan, trial.message.double(), trial.goal.double()
    return {"to": plan.victim, "round": plan.round, "kind": str(plan.steering.kind), "parameters": int(message.numel()),
            "message_norm": float(message.norm()), "goal_norm": float(goal.norm()),
            "message_to_goal": float((message - goal).norm()),
            "what": (f"the message that sets agent {plan.victim}'s next point to its own model as the liar holds it, "
                     f"with {trial.trap}: {plan.steering.rule}")}


def active_record(trial: Trial, kind: str) -> dict[str, Any]:
    """The row's `active` record (`privaudit.rows.ActiveRecord`)."""
    plan = trial.plan
    return {"kind": kind, "assumptions": list(plan.assumptions()), "liar": plan.liar, "agents": list(plan.agents),
            "victim": plan.victim, "round": plan.round, "recovery_round": plan.recovery_round,
            "threshold_db": RECOVERED_DB, "records": trial.records, "sent": sent_summary(trial),
            "active": _side_record(trial.active, ACTIVE_LABEL), "passive": _side_record(trial.passive, PASSIVE_LABEL)}


def active_headline(row: dict[str, Any]) -> str:
    """How an active cell ended, in one line: each side's records recovered."""
    record = row.get("active")
    if not record:
        return row["status"]
    sides = [record["active"], record["passive"]]
    active, passive = (f"{side['recovered']} of {record['records']} records ≥ {record['threshold_db']:g} dB"
                       for side in sides)
    return f"active: {active}; passive on the same run: {passive}"
