"""The coalition's strongest extraction where every agent trains on one fixed record: fit the
records themselves to everything the coalition heard.

El Mrini, Cyffers & Bellet (ICML 2024) attack decentralized gradient descent with the
knowledge system of `privaudit.attacks.coalition.knowledge`, treating each agent's gradient as constant over the
window; the drift of the gradient is what that assumption costs, and on a line it grows with
every hop. Where each agent's update is the full gradient of one record (full-batch D-GD on one
record: B = 1 with one record per agent), the gradient is no unknown at all once the record is
known: g_k^t = ∇ℓ(x_k^t; d_k, y_k), a function of the agent's state. The unknowns are then the
records, a few numbers per agent against P equations per heard message, and the coalition
recovers them in two steps.

1. **Peel** the graph hop by hop. At round 0 every state is the public initial model x⁰, so a
   heard agent j gives g_j^0 = (Σ_i W_ji x⁰ − x_j^1)/η exactly, and the analytic attack reads
   its record off the first layer (least squares over the units: `_one_record`) and its label
   off the last (iDLG's sign rule). Its gradient at every round is then known, so its
   recurrence x_j^{t+1} = Σ_i W_ji x_i^t − η g_j^t, in which it has a single neighbour whose
   states are unknown, gives that neighbour's states at every round but the last; and so on,
   one hop and one round further each time. Each hop divides the float32 rounding of the
   messages by W_{j,next}, so the peel's estimates degrade geometrically with the distance
   (about 4× per hop on a line).
2. **Fit** all records at once (Gauss–Newton, from the peel): simulate the protocol in float64
   from x⁰ with the records as parameters (the coalition's own gradients as disclosed) and
   minimise ‖heard − simulated‖² over every heard state at every round of the window. The
   records enter P equations per heard message, so the fit averages the rounding that the peel
   amplifies; the Jacobian is exact (forward mode through the simulation) and each step is a
   column-scaled least squares (QR, not the normal equations, whose condition is the square).

The fit is accepted when it explains every heard message to `FIT_TOLERANCE` (relative rms):
float32 messages of a correct fit left 2e-7 to 4e-7 over 24 to 30 rounds, while a wrong
hypothesis (agents training on two records each, in the tests) leaves more than 1e-3. A ReLU model's
gradient jumps where a unit's pre-activation changes sign, so the fit may stall short of it; the
row then says so and the knowledge system's results stand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import grad, jacfwd

from privaudit.attacks.inversion.analytic import first_layer_problem
from privaudit.attacks.inversion.labels import extract_labels
from privaudit.attacks.views import DYNAMICS, dynamics
from privaudit.flatmodel import FlatModel
from privaudit.progress import Progress
from privaudit.wire import Kind, Transcript

FIT_TOLERANCE = 1e-4
"""Largest relative rms residual ‖heard − simulated‖/‖heard‖ at which the fitted records count as
the agents' records (float32 rounding alone left 2e-7 to 4e-7 over 24 to 30 rounds)."""

MAX_STEPS = 6
"""Gauss–Newton steps at most; the fit stops earlier once a step gains less than `MIN_GAIN`."""

MIN_GAIN = 0.05
"""Relative decrease of the residual below which another Gauss–Newton step is not taken."""

JACOBIAN_BYTES = 4 * 2**30
"""The exact Jacobian is held whole (records × heard values, float64); above this it is refused."""


@dataclass(frozen=True)
class RecordFit:
    """The records the coalition fitted, per agent outside it, and how well they explain what it
    heard: `residual` (relative rms, float64 simulation against the heard messages), `peel_residual`
    (the same for the peel's records, before the fit), `steps` taken. `gradients[k]` is agent k's
    gradient at round 0, at the public initial model, recomputed from its record."""

    records: dict[int, Tensor]
    labels: dict[int, int]
    gradients: dict[int, Tensor]
    residual: float
    peel_residual: float
    steps: int

    @property
    def accepted(self) -> bool:
        return self.residual <= FIT_TOLERANCE

    def summary(self) -> dict[str, float | int | bool]:
        return {"residual": self.residual, "peel_residual": self.peel_residual, "steps": self.steps,
                "tolerance": FIT_TOLERANCE, "accepted": self.accepted}


def fit_problem(transcript: Transcript, model: FlatModel, input_shape: tuple[int, ...], first: int) -> str:
    """Why the record fit cannot run on this transcript ("" when it can)."""
    public = transcript.public
    recurrence = DYNAMICS.get(public.defense)
    if recurrence is None or recurrence.batch_size is None:
        return ("the record fit needs noiseless D-PSGD, whose next state is a function of the states and of one "
                f"record per agent; '{public.defense}' adds what no record determines")
    if first != 0:
        return "the record fit starts from the public initial model, so the attacked round must be 0"
    problem = first_layer_problem(model, input_shape)
    return f"the record fit reads records off the first layer: {problem}" if problem else ""


def fit_progress(label: str, last: int) -> Progress:
    """A count of the rounds the fit replays through its exact Jacobian, `last` per Gauss–Newton
    step and at most `MAX_STEPS` steps (it stops sooner once a step gains little): the Jacobian
    is the fit's cost (one tangent per unknown value, against one for a plain replay), so the
    rate of these rounds is the fit's rate, and a line comes while one long step runs."""
    return Progress(label, MAX_STEPS * last, unit="rounds replayed", ceiling=True,
                    parts=(MAX_STEPS, "Gauss–Newton steps"))


def fit_records(transcript: Transcript, coalition: Iterable[int], model: FlatModel, input_shape: tuple[int, ...],
                num_classes: int, first: int, last: int, progress: Progress | None = None) -> RecordFit:
    """Peel, then fit, every record outside `coalition` from rounds 0..`last` (module docstring);
    ValueError naming why when the transcript, model or graph does not allow it. `progress`
    (`fit_progress`) counts the rounds each Gauss–Newton step replays."""
    problem = fit_problem(transcript, model, input_shape, first)
    if problem:
        raise ValueError(problem)
    members = sorted(set(coalition))
    protocol = _Protocol(transcript, members, model, input_shape, num_classes, last)
    records, labels = protocol.peel()
    outside = [k for k in range(protocol.n) if k not in members]
    unknown = torch.stack([records[k] for k in outside])
    size = unknown.numel() * protocol.observed.numel() * 8
    if size > JACOBIAN_BYTES:
        raise ValueError(f"the record fit's Jacobian would take {size / 2**30:.1f} GiB (limit "
                         f"{JACOBIAN_BYTES / 2**30:.0f} GiB): shorten the window or use a smaller model")
    peel_residual = protocol.residual(unknown, labels)
    best, best_residual, steps = unknown, peel_residual, 0
    while steps < MAX_STEPS:
        step = protocol.gauss_newton_step(best, labels, None if progress is None else progress.update)
        residual = protocol.residual(best + step, labels)
        steps += 1
        if residual >= best_residual:
            break
        gain = 1 - residual / best_residual
        best, best_residual = best + step, residual
        if gain < MIN_GAIN or best_residual < FIT_TOLERANCE * 1e-3:
            break
    fitted = {k: best[i] for i, k in enumerate(outside)}
    gradients = {k: protocol.gradient(protocol.x0, fitted[k], labels[k]) for k in outside}
    return RecordFit(fitted, labels, gradients, best_residual, peel_residual, steps)


class _Protocol:
    """D-PSGD as the coalition can replay it: W, η, x⁰, its members' disclosed gradients and every
    heard state, all in float64."""

    def __init__(self, transcript: Transcript, members: list[int], model: FlatModel, input_shape: tuple[int, ...],
                 num_classes: int, last: int) -> None:
        public = transcript.public
        self.members, self.model, self.shape, self.num_classes = members, model, input_shape, num_classes
        self.W = public.mixing
        self.n = len(self.W)
        _, _, self.lr = dynamics(public.defense).step(transcript, 0)  # D-PSGD's step size η
        self.last = last
        self.x0 = public.initial_model.double()
        self.neighbours = {k: [j for j in torch.nonzero(self.W[k]).flatten().tolist() if j != k]
                           for k in range(self.n)}
        self.heard = sorted(set(members) | {j for c in members for j in self.neighbours[c]})
        self.states = {k: [transcript.payload(Kind.MODEL, t, k, None).double() for t in range(last + 1)]
                       for k in self.heard}
        self.own = {c: [transcript.disclosed(c, t, "gradient").double() for t in range(last)] for c in members}
        self.observed = torch.stack([torch.stack(self.states[k][1:]) for k in self.heard], dim=1)

    def gradient(self, point: Tensor, record: Tensor, label: int) -> Tensor:
        """∇ℓ(point; record, label): the full gradient of an agent holding that one record."""
        x = record.view(1, -1).to(point.dtype)
        y = torch.tensor([label])
        return grad(lambda flat: self.model.loss(flat, x.view(1, *self.shape), y))(point)

    def peel(self) -> tuple[dict[int, Tensor], dict[int, int]]:
        """Records and labels of every agent outside the coalition, hop by hop (module docstring,
        step 1); ValueError when a hop is not determined (an agent with two unknown neighbours
        and no other way in) or an agent's first gradient does not read as one record."""
        states = {k: list(v) for k, v in self.states.items()}
        records: dict[int, Tensor] = {}
        labels: dict[int, int] = {}
        gradients: dict[int, list[Tensor]] = {c: self.own[c] for c in self.members}
        progress = True
        while progress:
            progress = False
            for j in sorted(states):
                if j in gradients or len(states[j]) < 2:
                    continue
                first = (self.W[j].sum() * self.x0 - states[j][1]) / self.lr
                records[j], labels[j] = self._one_record(first)
                gradients[j] = [self.gradient(states[j][t], records[j], labels[j]) for t in range(len(states[j]) - 1)]
                progress = True
            for k in sorted(gradients):
                missing = [j for j in self.neighbours[k] if j not in states]
                if len(missing) != 1:
                    continue
                j = missing[0]
                others = [i for i in [k, *self.neighbours[k]] if i != j]
                rounds = min(len(states[k]) - 1, len(gradients[k]), *(len(states[i]) for i in others))
                states[j] = [(states[k][t + 1] + self.lr * gradients[k][t]
                              - sum(self.W[k, i] * states[i][t] for i in others)) / self.W[k, j]
                             for t in range(rounds)]
                progress = True
        unreached = [k for k in range(self.n) if k not in self.members and k not in records]
        if unreached:
            raise ValueError(f"the peel does not reach agents {', '.join(map(str, unreached))} (each hop needs a "
                             "known agent with exactly one neighbour of unknown state, and one round per hop)")
        return records, labels

    def _one_record(self, gradient: Tensor) -> tuple[Tensor, int]:
        """The one record whose gradient this is: Σ_j b_j w_j / Σ_j b_j² over the first layer's
        units (w_j = ∂ℓ/∂W_j = b_j·d for B = 1, b_j = ∂ℓ/∂b_j: least squares over all units,
        which averages the rounding a single unit's ratio keeps), and the label by iDLG's rule."""
        weight = gradient[: self.model.numels[0]].view(self.model.shapes[0])
        bias = gradient[self.model.numels[0] : self.model.numels[0] + self.model.numels[1]]
        if not torch.isfinite(gradient).all() or float(bias @ bias) == 0.0:
            raise ValueError("an agent's first gradient has no first-layer bias signal to read a record from")
        labels = extract_labels(gradient, self.model, self.num_classes, 1)
        if labels is None:
            raise ValueError("the model's last layer does not give the label of a single record")
        return (bias @ weight) / (bias @ bias), int(labels[0])

    def simulate(self, records: Tensor, labels: dict[int, int], tick: Callable[[int], None] | None = None) -> Tensor:
        """Every heard agent's state at rounds 1..last [last, heard, P] of D-PSGD replayed in float64
        with these records (one row per agent outside the coalition, in agent order); `tick(1)`
        after each round."""
        outside = [k for k in range(self.n) if k not in self.members]
        row = {k: i for i, k in enumerate(outside)}
        state = self.x0.expand(self.n, -1)
        heard = []
        for t in range(self.last):
            step = torch.stack([self.own[k][t] if k in self.own else
                                self.gradient(state[k], records[row[k]], labels[k]) for k in range(self.n)])
            state = self.W @ state - self.lr * step
            heard.append(state[self.heard])
            if tick is not None:
                tick(1)
        return torch.stack(heard)

    def residual(self, records: Tensor, labels: dict[int, int]) -> float:
        return float((self.observed - self.simulate(records, labels)).norm() / self.observed.norm())

    def gauss_newton_step(self, records: Tensor, labels: dict[int, int],
                          tick: Callable[[int], None] | None = None) -> Tensor:
        """argmin_δ ‖heard − sim(r) − J δ‖ with J the exact Jacobian, columns scaled to unit norm;
        `tick(1)` after each round replayed (forward mode runs the replay's loop once, carrying
        every tangent)."""
        def replay(r: Tensor) -> tuple[Tensor, Tensor]:
            heard = self.simulate(r, labels, tick)
            return heard, heard

        jacobian, replayed = jacfwd(replay, has_aux=True)(records)
        jacobian = jacobian.reshape(-1, records.numel())
        scale = jacobian.norm(dim=0).clamp_min(1e-300)
        misfit = (self.observed - replayed).reshape(-1, 1)
        step = torch.linalg.lstsq(jacobian / scale, misfit).solution[:, 0] / scale
        return step.view_as(records)

