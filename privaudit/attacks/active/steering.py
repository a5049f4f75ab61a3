"""The state override chosen for a canary audit (issue 39 item 3): a neighbour of the victim steers
it, every round, to a point where one record canary's per-sample gradient is as large and as
separated from the other records' as the model allows, so that a *record* canary is as visible in
the victim's release as the mechanism lets any record be.

At round t the liar hears the victim's state and sends it the message its defense's `Steering`
crafts (`privaudit.attacks.active.override`), so that the victim computes its release of round
t + lag at θ*_t = steered(base), base the victim's model as the liar holds it. For D-PSGD the
victim mixes to θ*_t, steps to x_v^{t+1} = θ*_t − η g_v^t and computes its gradient of round t + 1
at x_v^{t+1}, a point the attacker then hears. Every defense whose view registers a steering is
steered so, at every round its steering does not refuse (Muffliato's rounds that do not precede an
update pass unsteered); where the steering is off by what the liar cannot hear (Wang & Zhang's
Alg. 1 past round 0: the victim's own Laplace noise; the ternary quantizer past round 0: its
quantization error; LT-ADMM-DP: the victim's τ noisy local steps), the victim stands near θ*_t, not
at it. The audit's channel reads each release at the point the victim computed it (its extractor
reads that point from the transcript, never from the liar's intent) and projects it on the
canary's gradient direction there (the record-canary statistic of
`privaudit.attacks.audit.canary_audit`). The steered point (`steered`), for an MLP whose
first layer is fully connected on the raw input and whose second is the output layer:

* unit k (the first) fires only for the canary: its weight row along the unit direction u in
  which the canary's input x_c stands out of the attacker's public records (`CanaryDetector`), its
  bias between the canary's projection u·x_c and the largest projection of a public record below
  it, the canary's activation and that margin both `ACTIVATION`;
* every other first-layer unit is turned off for the canary: its row and bias lose, along u only,
  what would make it fire for x_c with less than `ACTIVATION` to spare (a record at the public
  records' mean projection on u sees no change);
* the output layer's column k sends the canary to another class with a logit gap of
  2·`LOGIT_GAP`: the canary is confidently misclassified, so its loss gradient does not vanish as
  the world with the canary learns it (the passive audit's weakness) — its length is about
  2·(`LOGIT_GAP`/`ACTIVATION`)·‖x_c‖, clipped at full length C by a defense that clips.

The canary's gradient then lies in unit k's first-layer row and bias, its output column and the
output bias; the victim's other records', whose unit k does not fire, share only the output bias.

What the victim's model becomes: every round, its own model with unit k rewritten as the canary's
detector, its output column set to misclassify the canary, and the other units' rows shifted along
u; the other records train the remaining units honestly, as the defense trains them, between two
steerings. The liar's own state follows the protocol; only its messages to the victim lie.

The bound stays sound whatever the liar does: the audit's threshold is chosen on held-out runs
only (a law's shift, stated for honest points, is not assumed at the steered one), and the lie is
part of the mechanism the audit measures. A claim whose theorem covers any adversary (DP-D-PSGD's
clipped, noised release is private at whatever point it is computed: adaptive composition covers
points chosen from what the adversary heard) is judged by the audit; one whose theorem assumes
honest agents meets a finding outside its threat model, never a refutation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from privaudit.attacks.active.override import override_message, steering, victim_model
from privaudit.attacks.active.threat import OverridePlan, override_refusal, plan_override
from privaudit.flatmodel import FlatModel
from privaudit.topology import Topology
from privaudit.wire import Kind, Malicious, PublicKnowledge, Tap

ACTIVATION = 4.0
"""The canary's pre-activation in its unit, and every margin of the steered first layer (public
records below unit k's threshold, the canary below every other unit's): about five standard
deviations of what one noisy DP-D-PSGD step (η = 0.5, σ = 1, C = 1, B = 10) moves a pre-activation
by for a record of norm 16, so the pattern survives the step between steering and release."""

LOGIT_GAP = 10.0
"""Half the logit gap by which the steered output layer misclassifies the canary (p_true ≈ e^{-20})."""

UNIT = 0
"""The first-layer unit turned into the canary's detector."""

_RIDGE = 1e-2
"""λ of the discriminant, relative to the public records' mean variance per feature: digits'
border pixels never vary, and a direction along them would rest on rounding."""

_SAME = 1e-6
"""Public projections within this share of the canary's gap to the mean count as the canary itself."""

_LEAST = 0.05
"""The least share of that gap between the canary and its unit's threshold: a public record nearer
than that fires the unit too, rather than the unit's weights growing without end."""


def steering_problem(model: FlatModel, features: int, num_classes: int) -> str | None:
    """Why `model` cannot be steered for a canary (one line), or None: it must be an MLP with one
    hidden layer, fully connected on the raw input, then the output layer."""
    shapes = [tuple(shape) for shape in model.shapes]
    if len(shapes) != 4 or len(shapes[0]) != 2 or shapes[0][1] != features or shapes[1] != (shapes[0][0],) \
            or shapes[2] != (num_classes, shapes[0][0]) or shapes[3] != (num_classes,):
        return (f"the canary steering sets an MLP's first layer and output layer: it needs one hidden layer fully "
                f"connected on the {features} input features, then the {num_classes}-class output (parameter "
                f"shapes {shapes})")
    return None


@dataclass(frozen=True)
class CanaryDetector:
    """Where the steered first layer places unit k: the direction u along which the canary stands
    out of the attacker's public records, u ∝ (Σ + λI)⁻¹(x_c − μ) (their mean μ and covariance Σ:
    Fisher's discriminant of one record against the data, so a natural record, which points where
    many records point, is still separated), the canary's projection s = u·x_c, the public
    records' mean projection m = u·μ, the threshold τ between s and the largest public projection
    below it, the canary's class and the class it is sent to, and its input x_c (flattened)."""

    record: Tensor
    direction: Tensor
    projection: float
    centre: float
    threshold: float
    label: int
    wrong: int

    @staticmethod
    def place(canary: Tensor, label: int, public: Tensor, num_classes: int) -> CanaryDetector:
        """The detector of the canary input `canary` [...] with class `label`, placed with the
        attacker's `public` inputs [N, ...] (a public record equal to the canary, as a natural
        canary drawn from them is, does not count as below it)."""
        flat = canary.reshape(-1).double()
        records = public.reshape(len(public), -1).double()
        mean = records.mean(0)
        spread = torch.cov(records.T).reshape(len(flat), len(flat))
        ridge = _RIDGE * float(spread.diagonal().sum()) / len(flat) + 1e-12
        direction = torch.linalg.solve(spread + ridge * torch.eye(len(flat), dtype=spread.dtype), flat - mean)
        if float(direction.norm()) == 0:
            raise ValueError("the canary's input is the public records' mean: no unit can be set to fire for it alone")
        direction = direction / direction.norm()
        projection, centre = float(direction @ flat), float(direction @ mean)
        gap = projection - centre
        projections = records @ direction
        below = projections[projections < projection - _SAME * gap]
        nearest = float(below.max()) if len(below) else centre
        threshold = min((projection + nearest) / 2, projection - _LEAST * gap)
        return CanaryDetector(flat, direction, projection, centre, threshold, int(label), (int(label) + 1) % num_classes)

    def steered(self, model: FlatModel, base: Tensor) -> Tensor:
        """`base` [..., P] (one model, or one per world) with unit k the canary's detector, the
        other units silent for the canary, and the output column k misclassifying it (module
        docstring); float64. A unit is silenced by moving its row along u and its bias so that
        only records beyond the public mean along u see the change, in proportion to how far."""
        (units, features), _, (classes, _), _ = model.shapes
        point = base.double().clone()
        rows = point[..., :units * features].unflatten(-1, (units, features))
        biases = point[..., units * features:units * (features + 1)]
        column = point[..., units * (features + 1):units * (features + 1) + classes * units].unflatten(-1, (classes, units))
        u = self.direction.to(point)
        gap = self.projection - self.centre
        excess = (rows @ self.record.to(point) + biases + ACTIVATION).clamp_min(0.0) / gap
        rows -= excess[..., None] * u
        biases += excess * self.centre
        scale = ACTIVATION / (self.projection - self.threshold)
        rows[..., UNIT, :] = scale * u
        biases[..., UNIT] = -scale * self.threshold
        column[..., :, UNIT] = 0.0
        column[..., self.wrong, UNIT] = LOGIT_GAP / ACTIVATION
        column[..., self.label, UNIT] = -LOGIT_GAP / ACTIVATION
        return point


@dataclass
class CanarySteering:
    """The liar's strategy (`privaudit.wire.Strategy`): at every round, the message to the victim
    that makes it mix to its own heard model steered for the canary (`CanaryDetector.steered`);
    nothing crafted for its other neighbours. It reads only what its tap heard: on an audit's
    worlds, one row per world, so each world's message is computed from that world's models."""

    plan: OverridePlan
    knowledge: PublicKnowledge
    model: FlatModel
    detector: CanaryDetector

    def craft(self, round: int, kind: Kind, sender: int, receivers: list[int], heard: Tap) -> Mapping[int, Tensor]:
        plan = self.plan
        if sender != plan.liar or kind != plan.steering.kind or plan.victim not in receivers \
                or plan.steering.refusal(self.knowledge.hyper, round) is not None:
            return {}
        goal = self.detector.steered(self.model, victim_model(heard, self.knowledge, round, plan.victim))
        return {plan.victim: override_message(heard, self.knowledge, round, plan.liar, plan.victim, goal)}

    def record(self) -> dict[str, object]:
        """What an audit row says of this lie (`privaudit.rows.ActiveAudit`): who lied to whom, whose
        hearing it pooled, the strategy and its assumptions, in words."""
        plan = self.plan
        return {"liar": plan.liar, "agents": list(plan.agents), "victim": plan.victim,
                "strategy": "state override at every steerable round to a point where the canary's per-sample "
                            "gradient is clipped at full length and separated from the other records' "
                            "(privaudit.attacks.active.steering)",
                "assumptions": list(self.assumptions())}

    def assumptions(self) -> tuple[str, ...]:
        """What the attacker assumed, in words, for the row: the trap override's hearing and rushing
        (`OverridePlan.assumptions`), with a lie at every round and the canary known."""
        plan = self.plan
        return (
            f"agent {plan.liar}, a neighbour of victim {plan.victim}, lies at every round its defense's steering "
            f"serves: it sends the victim the '{plan.steering.kind}' message that makes it compute its next release at "
            "its own model steered for the canary, and follows the protocol otherwise, its own state included",
            *plan.assumptions()[1:3],
            "it knows W, η, the architecture, the canary record, and public data of the task (the held-out split) to "
            "place the canary's unit",
        )


def steering_tap(knowledge: PublicKnowledge, topology: Topology, model: FlatModel, canary: Tensor, label: int,
                 public: Tensor, num_classes: int, *, victim: int, rounds: int, hears: Iterable[Kind],
                 liar: int | None = None, agents: Iterable[int] | None = None) -> Malicious:
    """The malicious tap of a steered canary audit of `victim` over `rounds` rounds of the defense
    `knowledge` describes: its coalition's hearing of the message kinds `hears` (what the audit's
    channel reads) and of the kind its steering crafts, and its strategy. ValueError (one line)
    where the override does not apply (`plan_override`: a defense without a steering, the liar,
    the agents' hearing), where no round of the run can be steered, or where the model cannot be."""
    defense = knowledge.defense
    refusal = override_refusal(defense)
    if refusal is not None:
        raise ValueError(refusal)
    steer = steering(defense)
    steerable = [t for t in range(rounds) if steer.refusal(knowledge.hyper, t) is None]
    if not steerable:
        raise ValueError(f"no round of the {rounds}-round run of '{defense}' can be steered: "
                         f"{steer.refusal(knowledge.hyper, 0)}")
    plan = plan_override(defense, topology, victim=victim, round=steerable[0], rounds=None, liar=liar, agents=agents,
                         hyper=knowledge.hyper)
    problem = steering_problem(model, canary.numel(), num_classes)
    if problem is not None:
        raise ValueError(problem)
    detector = CanaryDetector.place(canary, label, public, num_classes)
    strategy = CanarySteering(plan, knowledge, model, detector)
    return Malicious(plan.agents, [plan.liar], strategy, kinds={*hears, steer.kind}, speaks=[steer.kind])
