"""One run with the lie beside the same run without it: the active attack and the passive one on
the same records, each scored like every inversion (Hungarian-paired PSNR and SSIM per record,
and the leak test against the noise floor: `privaudit.metrics`, `privaudit.leak`).

The passive side is the same agents, honest but curious, on the same configuration and seed: the
batches (and DP-D-PSGD's noise) are drawn from the run's own random stream whatever the states,
so the victim computes its gradient of the recovery round on the very records the liar trapped,
at its honest model instead. It is read with the same analytic inversion on the same state
difference, the suite's strongest passive batch attack on an MLP's release (exact for every record
that happens to be alone in two units of the first layer; no optimisation). For a CNN both sides
read the head's first linear layer and rebuild the images from those features alike
(`privaudit.attacks.active.recovery.through_features`); a passive gradient-matching attack on the
whole gradient (`privaudit.attacks.inversion.gradient_matching`) is not run beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from privaudit.attacks.active.recovery import TOLERANCE, recover
from privaudit.attacks.active.override import steered_defenses, steered_records
from privaudit.attacks.active.threat import OverridePlan, TrapOverride, malicious_tap, override_refusal, plan_override
from privaudit.attacks.active.trap import trap_kind
from privaudit.attacks.inversion.base import Reconstruction
from privaudit.data import Dataset
from privaudit.defenses.base import Defense
from privaudit.leak import Floor, decide, noise_floor
from privaudit.metrics import Scores, score_reconstruction
from privaudit.sim import public_knowledge, simulate
from privaudit.wire import Coalition, GroundTruth, Transcript


@dataclass(frozen=True)
class Side:
    """One attack's outcome on the victim's batch: its reconstruction, the PSNR and SSIM of each
    record (in the batch's order; −inf / nan for a record left unpaired), the leak decision, and the
    scores and noise floor it was decided on (None when nothing was reconstructed), which a
    campaign row keeps."""

    reconstruction: Reconstruction
    psnr: tuple[float, ...]
    ssim: tuple[float, ...]
    leak: dict[str, Any] | None
    scores: Scores | None = None
    floor: Floor | None = None

    def recovered(self, threshold_db: float) -> int:
        """Records rebuilt at `threshold_db` or more."""
        return sum(value >= threshold_db for value in self.psnr)


@dataclass(frozen=True)
class Trial:
    """The active side and the passive side of one seed, with the plan, what the liar sent, and the
    rows of the victim's batch both sides attacked."""

    plan: OverridePlan
    active: Side
    passive: Side
    records: int
    goal: Tensor
    message: Tensor
    rows: Tensor
    trap: str
    """What the goal's trapped layer holds, in words (`trap_kind`)."""


def override_trial(build: Callable[[], Defense], *, victim: int, round: int, liar: int | None = None,
                   agents: Iterable[int] | None = None, tolerance: float = TOLERANCE,
                   batch_size: int | None = None) -> Trial:
    """Run `build()`'s defense with the trap-weight override of `victim` at `round`, and a second
    `build()` honestly, each up to the last round the plan reads; invert the victim's batch of the
    recovery round on both and score them against it. `batch_size`: the records the traps are
    placed for and the inversion rebuilds (default: the defense's public batch size; a defense whose
    schedule changes it every round, Wang & Zhang's γ_k, needs it given)."""
    defense = build()
    setup = defense.setup
    plan = plan_override(defense.name, setup.topology, victim=victim, round=round, rounds=None, liar=liar,
                         agents=agents, hyper=defense.public())
    rounds = max(plan.rounds_heard) + 1
    batch_size = batch_size or steered_records(defense.name, defense.public())
    if batch_size is None:
        raise ValueError(f"defense '{defense.name}' has no public batch size to place the traps for: give one")
    strategy = TrapOverride(plan, public_knowledge(defense), setup.model, setup.data.x_test, batch_size, setup.seed)
    heard, rows = _run(defense, malicious_tap(plan, strategy), plan, rounds)
    honest, honest_rows = _run(build(), Coalition(plan.agents, rounds=plan.rounds_heard, kinds=plan.kinds_heard),
                               plan, rounds)
    if not torch.equal(rows, honest_rows):
        raise RuntimeError("the honest run drew another batch than the lied one: the sides are not comparable")
    sides = [_scored(recover(transcript, victim, plan.recovery_round, setup.model, setup.data, batch_size,
                             setup.seed, tolerance), rows, setup.data, setup.seed, batch_size)
             for transcript in (heard, honest)]
    return Trial(plan, sides[0], sides[1], len(rows), strategy.goal, strategy.message, rows,
                 trap_kind(setup.model, strategy.goal))


def _run(defense: Defense, tap: Coalition, plan: OverridePlan, rounds: int) -> tuple[Transcript, Tensor]:
    """The tap's transcript of a run and the victim's batch rows at the recovery round."""
    truth = GroundTruth(plan.victim, rounds=[plan.recovery_round])
    output = simulate(defense, rounds, taps=[tap, truth], evaluation=False)
    (rows,) = [d.value for d in truth.disclosures if d.name == "batch"]
    return output.transcripts[0], rows.reshape(-1).long()


def _scored(reconstruction: Reconstruction, rows: Tensor, data: Dataset, seed: int, batch_size: int) -> Side:
    """The reconstruction scored against the records `rows`, like every inversion row."""
    if reconstruction.images is None or len(rows) == 0:
        nothing = tuple(float("nan") for _ in range(len(rows)))
        return Side(reconstruction, tuple(-float("inf") for _ in range(len(rows))), nothing, None)
    original, images = data.x_train[rows].cpu(), reconstruction.images.float().cpu()
    scores = score_reconstruction(images, original, data.normalisation)
    psnr, ssim = [-float("inf")] * len(rows), [float("nan")] * len(rows)
    paired = [k for k, pick in enumerate(scores.pairs) if pick >= 0]
    for slot, record in enumerate(paired):
        psnr[record], ssim[record] = scores.per_image["psnr"][slot], scores.per_image["ssim"][slot]
    floor = noise_floor(data, rows, seed, size=batch_size)
    return Side(reconstruction, tuple(psnr), tuple(ssim), decide(images, scores, floor, data.normalisation).record(),
                scores, floor)


@dataclass(frozen=True)
class TrapWeights:
    """Trap-weight state override: a malicious neighbour sets the victim's next model to trap
    weights and reads its batch off the release that follows (`override_trial`), beside the same
    agents listening honestly to the same run. `tolerance`: how close two trap units' ratios must
    be to count as one record (`privaudit.attacks.active.recovery.TOLERANCE`)."""

    title: ClassVar[str] = "Trap-weight state override (malicious neighbour)"
    tolerance: float = TOLERANCE

    def __post_init__(self) -> None:
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must lie in (0, 1), got {self.tolerance}")

    @staticmethod
    def refusal(defense: str) -> str | None:
        """Why it does not apply to `defense` (one line), or None."""
        return override_refusal(defense)

    @staticmethod
    def applies_to() -> tuple[str, ...]:
        """The registered defenses it applies to: those whose view states how a liar steers them
        and whose step mixes what the wire delivers (`Defense.delivers`)."""
        return steered_defenses()

    def run(self, build: Callable[[], Defense], *, victim: int, round: int, liar: int | None = None,
            agents: Iterable[int] | None = None, batch_size: int | None = None) -> Trial:
        """`override_trial` with this attack's tolerance."""
        return override_trial(build, victim=victim, round=round, liar=liar, agents=agents, tolerance=self.tolerance,
                              batch_size=batch_size)


ACTIVE_ATTACKS: dict[str, type[TrapWeights]] = {"trap_weights": TrapWeights}
"""The active attacks by the name an `[[attack]]` table's `kind` gives them (threat = "malicious")."""
