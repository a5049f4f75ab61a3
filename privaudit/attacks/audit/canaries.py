"""The canaries an auditor plants in the victim's data, and the directions it listens in.

A canary audit compares runs on the victim's data without and with a record, the canary; the
stronger the canary, the closer the empirical bound comes to the mechanism's true ε. Three kinds:

* `gradient` — the white-box gradient canary of Nasr et al. 2023 (§4, "Dirac canary" gradients):
  a record whose loss is linear in the parameters, ℓ(θ) = ±‖g‖⟨θ, u⟩, so its gradient is ±‖g‖ u at
  every point. The defense samples, clips and noises it exactly as any record (`PlantedModel`).
  A claim proved by bounding each record's clipped contribution (DP-SGD's analysis and those
  built like it) covers every loss, so this record is a neighbour the claim speaks for: the
  worst case such a proof allows. u is chosen where the victim's real records' gradients are
  quietest (`quiet_directions`), so what the attacker projects onto u is the canary and the noise.
* `record` — a crafted input: orthogonal to every input of the victim and long, with a fixed label,
  so its gradient is clipped at full length and, for a linear model, orthogonal to every other
  record's gradient at every point. A record of the task itself, for claims whose unit is one.
* `outlier` — a random ±`scale` pattern (normalised units) with a fixed label, the canary of
  Jagielski et al. 2020 and this suite's first audits, kept for comparison.
* `natural` — a real record of the task, drawn from the held-out split (no agent trains on it),
  with its own label: the weakest canary and the one a black-box audit of a deployed model would
  plant (Annamalai & De Cristofaro 2024 audit with such records); its anti-record, under
  replace-one, is another held-out record.

Under replace-one adjacency the world without the canary holds an anti-canary in its place (the
opposite gradient, or the negated input), so the two worlds differ by the most one replacement
can move; under add/remove it holds nothing. One `Canaries` value holds k canaries (k = 1 for
repeated runs, many for the one-run audit): `direction` gives, at any model points, the unit
vectors along which each moves a released gradient, `length` their gradient lengths there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor
from torch.func import grad, vmap

from privaudit.flatmodel import FlatModel
from privaudit.grads import chunk_rows, per_sample_grads, per_sample_grads_agents
from privaudit.limits import limit, require
from privaudit.sampling import LocalData
from privaudit.setup import Setup

CanaryKind = Literal["gradient", "record", "outlier", "natural"]
CANARY_KINDS: tuple[str, ...] = ("gradient", "record", "outlier", "natural")

_PROBE_ROWS = 4096
"""At most this many probed gradients (records × probe points) go into the search for quiet directions."""
_MARK_SCALE = 4.0
_DIRECTION_BYTES = 28
"""Bytes per canary per parameter while quiet directions are found (`_complement`): the float64 draws,
their projection's temporary and QR's factor (3 × 8), and the float32 directions kept (4)."""


def _keys(x: Tensor) -> Tensor:
    """What identifies a planted input: its first and last entries. Planted inputs are random
    normal patterns (`_marks`), so a real record shares both exactly with probability 0, and two
    entries compare far faster than a whole input in the per-sample hot path."""
    flat = x.flatten(1)
    return torch.stack([flat[:, 0], flat[:, -1]], dim=-1)


class PlantedModel(FlatModel):
    """`base` with planted records: a record whose input is `inputs[k]` (`_keys`) has the loss
    ⟨θ, gradients[k]⟩ (gradient `gradients[k]` at every θ); every other record keeps the base
    loss, and the penalty, if any, is added as before. A batch's loss stays the mean of its
    records' losses, so per-sample and batch gradients both see a planted gradient as one
    record's."""

    def __init__(self, base: FlatModel, inputs: Tensor, gradients: Tensor) -> None:
        self.__dict__.update(base.__dict__)
        self.planted_keys = _keys(inputs)
        self.planted_gradients = gradients

    def to(self, device: torch.device) -> PlantedModel:
        moved = super().to(device)
        moved.planted_keys = self.planted_keys.to(device)
        moved.planted_gradients = self.planted_gradients.to(device)
        return moved

    def loss(self, flat: Tensor, x: Tensor, y: Tensor) -> Tensor:
        output = self.output(flat, x)
        if len(x) == 1:  # one record (per-sample gradients, the hot path): its loss is the batch's
            per_record = self._loss(output, y).reshape(1)
        else:
            per_record = vmap(lambda o, t: self._loss(o[None], t[None]))(output, y)
        match = (_keys(x)[:, None] == self.planted_keys[None]).all(-1).to(flat.dtype)
        planted = match @ (self.planted_gradients.to(flat.dtype) @ flat)
        value = torch.where(match.sum(-1) > 0, planted, per_record).mean()
        if self._penalty is not None:
            value = value + self._penalty(self.unflatten(flat))
        return value

    def clipped_sums(self, flats: Tensor, x: Tensor, y: Tensor, mask: Tensor, bound: float) -> Tensor | None:
        """The base model's closed-form clipped sums over the records that are not planted, plus
        each planted record's gradient (`sample_grads`) clipped: a planted record is one sample
        like any other, with its own gradient."""
        keys = _keys(x.flatten(0, 1))
        planted = (keys[:, None] == self.planted_keys[None]).all(-1).any(-1).reshape(x.shape[:2])
        planted = planted.repeat(len(mask) // len(planted), 1) & (mask > 0)
        base = super().clipped_sums(flats, x, y, mask * ~planted, bound)
        if base is None:
            return None
        agents, slots = torch.nonzero(planted, as_tuple=True)
        if len(agents) == 0:
            return base
        rows = agents % len(x)
        gradients = self.sample_grads(flats[agents], x[rows, slots], y[rows, slots])
        norms = torch.linalg.vector_norm(gradients, dim=-1, keepdim=True)
        return base.index_add_(0, agents, gradients * torch.clamp(bound / (norms + 1e-12), max=1.0))

    def sample_grads(self, points: Tensor, x: Tensor, y: Tensor) -> Tensor:
        """Each sample's gradient (`FlatModel.sample_grads`): a planted record's is its planted
        gradient (plus the penalty's), every other record's the base model's. In closed form where
        the base model has one; else by autograd through `loss`."""
        if self._sample_gradients is None:
            return super().sample_grads(points, x, y)
        base = super().sample_grads(points, x, y)
        match = (_keys(x)[:, None] == self.planted_keys[None]).all(-1)
        rows = torch.nonzero(match.any(-1)).flatten()
        if len(rows) == 0:
            return base
        planted = match[rows].to(points.dtype) @ self.planted_gradients.to(points.dtype)
        if self._penalty is not None:
            planted = planted + vmap(grad(lambda flat: self._penalty(self.unflatten(flat))))(points[rows])
        return base.index_copy(0, rows, planted)


@dataclass(frozen=True)
class Canaries:
    """k canaries: the records of the world with each (`x` [k, ...], `y` [k]), the anti-canaries
    that take their place without them under replace-one (`anti_x`, `anti_y`), and for gradient
    canaries their unit directions `u` [k, P] and length `norm` (the planted gradients are
    ±norm·u_k)."""

    kind: str
    x: Tensor
    y: Tensor
    anti_x: Tensor
    anti_y: Tensor
    norm: float = float("nan")
    u: Tensor | None = None

    def __len__(self) -> int:
        return len(self.x)

    def to(self, device: torch.device) -> Canaries:
        """The same canaries with their tensors on `device`."""
        return dataclasses.replace(self, x=self.x.to(device), y=self.y.to(device), anti_x=self.anti_x.to(device),
                                   anti_y=self.anti_y.to(device), u=None if self.u is None else self.u.to(device))

    def model(self, base: FlatModel) -> FlatModel:
        """The model every world trains: `base`, with the planted gradients of gradient canaries
        (the same model in both worlds; only the data differ)."""
        if self.u is None:
            return base
        gradients = torch.cat([self.norm * self.u, -self.norm * self.u])
        return PlantedModel(base, torch.cat([self.x, self.anti_x]), gradients)

    def _gradients(self, model: FlatModel, points: Tensor, chosen: slice = slice(None)) -> Tensor:
        """The `chosen` canary records' gradients at each point: [R, k, P]."""
        x, y = self.x[chosen], self.y[chosen]
        count, k = len(points), len(x)
        return per_sample_grads_agents(model, points.float(), x[None].expand(count, k, *x.shape[1:]),
                                       y[None].expand(count, k)).to(points.dtype)

    def projections(self, model: FlatModel, points: Tensor, vectors: Tensor) -> tuple[Tensor, Tensor]:
        """Each released vector [R, P] projected on the unit direction along which each canary moves
        it at its point (u for gradient canaries, else the record's own gradient there), and each
        canary's gradient length there: ([R, k], [R, k]).

        A record canary's direction is a gradient as long as the model, per point and canary: 200
        of them on a ResNet-18 are 18 GB in float64, which killed a one-run audit on the CPU. They
        are formed for as many canaries at a time as `chunk_rows` lets fit in the memory limit,
        and only their projections and lengths are kept."""
        if self.u is not None:
            directions = self.u.to(points.dtype)[None].expand(len(points), -1, -1)
            lengths = torch.full((len(points), len(self)), self.norm, dtype=points.dtype, device=points.device)
            return torch.einsum("rp,rkp->rk", vectors, directions), lengths
        step = max(1, chunk_rows(model.dim, points.element_size()) // max(len(points), 1))
        values, lengths = [], []
        for start in range(0, len(self), step):
            grads = self._gradients(model, points, slice(start, start + step))
            norms = torch.linalg.vector_norm(grads, dim=-1, keepdim=True)
            values.append(torch.einsum("rp,rkp->rk", vectors, grads / norms.clamp_min(1e-30)))
            lengths.append(norms[..., 0])
        return torch.cat(values, dim=1), torch.cat(lengths, dim=1)


def _probe_points(setup: Setup, count: int, seed: int) -> Tensor:
    """x₀ and `count` − 1 points around it, at the scale of x₀'s own entries."""
    start = setup.model.initial()
    generator = torch.Generator().manual_seed(seed)
    scale = float(start.abs().mean().clamp_min(1e-3))
    noise = torch.randn((count - 1, len(start)), generator=generator) * scale
    return torch.cat([start[None], start[None] + noise])


def probe_rows(parameters: int) -> int:
    """The most probed gradients the search for quiet directions may stack: `_PROBE_ROWS`, fewer
    where their float32 and float64 copies (12 bytes an entry) would pass the `memory` limit. The
    MLP of a 64-image 32 × 32 RGB folder (394,634 parameters) asked for 19 GB at 4,096 rows (its
    process reached 22 GB); a ResNet-18 (11 M parameters) keeps about 60. Fewer rows leave the
    directions quiet for fewer of the victim's gradients: the audit's bound stays valid (any
    direction gives one), only its power may drop."""
    fitting = limit("memory") * 2**20 // (12 * max(parameters, 1))
    if fitting < 1:
        require("memory", math.ceil(12 * parameters / 2**20),
                f"one probed gradient of the canary's quiet directions ({parameters:,} parameters × 12 bytes)")
    return int(min(_PROBE_ROWS, fitting))


def victim_gradients(setup: Setup, victim: int, seed: int) -> Tensor:
    """The victim's per-sample gradients at probe points around x₀, stacked [rows, P]: enough
    points for twice P rows when `probe_rows` allows (a model's gradients move with the point, and
    the quiet directions must be quiet wherever training goes), at least 4 where it allows."""
    most = probe_rows(setup.model.dim)
    x, y = setup.local.shard(victim)
    x, y = x[:max(1, most // 4)], y[:max(1, most // 4)]
    count = max(1, min(max(4, math.ceil(2 * setup.model.dim / len(x))), most // len(x)))
    points = _probe_points(setup, count, seed)
    return torch.cat([per_sample_grads(setup.model, point, x, y) for point in points]).double()


_RIDGE = 1e-14
"""The Gram matrix's ridge λ, relative to its trace (the sum of the rows' squared singular values;
`_project_out`): it keeps the Cholesky factor finite when rows are dependent (a record's gradients
at several probe points of a linear model, a record held twice). A projection then leaves a
direction of the span only where its singular value is below √λ, at most 1e-7 of the trace's
root, which moves no row by more than that: the full SVD this replaced likewise counted a direction
as part of the span only above 1e-9 of the largest singular value."""

_PASSES = 2
"""Projections per vector (`_project_out`): one leaves rounding of order cond(rows)²·1e-16 along
the span, a second removes it ("twice is enough", Kahan; Giraud et al. 2005)."""

_CACHED = 16
"""Quiet directions kept in memory (`_QUIET`): one a canary audit, so a campaign's check and its run
in one process build each once."""

_QUIET: OrderedDict[tuple, Tensor] = OrderedDict()
"""Quiet directions by the content of what determines them (`quiet_directions`), most recent last."""


def _project_out(rows: Tensor, vectors: Tensor) -> Tensor:
    """`vectors` [c, d] minus their orthogonal projection on the span of `rows` [n, d], n < d:
    v − Rᵀ(RRᵀ + λI)⁻¹Rv through the Cholesky factor of the n×n Gram matrix (n²d + n³/3 flops, against
    the full SVD's ≈ 4n²d + 22n³: 184 s for a 9,610-parameter MLP's 4,032 rows, issue 36), applied
    `_PASSES` times. Orthogonal to every row to rounding, as the complement of the SVD's span was."""
    gram = rows @ rows.T
    gram.diagonal().add_(_RIDGE * float(gram.diagonal().sum()))
    factor = torch.linalg.cholesky(gram)
    for _ in range(_PASSES):
        vectors = vectors - torch.cholesky_solve(rows @ vectors.T, factor).T @ rows
    return vectors


def _complement(rows: Tensor, count: int, generator: torch.Generator) -> Tensor:
    """`count` unit vectors orthogonal to every row of `rows` [n, d] where the rows leave room
    (random in the orthogonal complement, orthonormal while `count` fits in it), else the least
    singular directions; [count, d] float64.

    Fewer rows than dimensions always leave room: random vectors are projected out of the rows'
    span (`_project_out`) — uniform on the complement's sphere, the same law the full SVD gave,
    at a fraction of its cost. As many rows as dimensions or more (a model of at most
    `_PROBE_ROWS` parameters): the SVD of the rows decides whether any room is left."""
    width = rows.shape[1]
    if len(rows) < width:
        vectors = _project_out(rows, torch.randn((count, width), generator=generator, dtype=torch.float64))
        if count <= width - len(rows):
            vectors = torch.linalg.qr(vectors.T).Q.T
        return vectors / torch.linalg.vector_norm(vectors, dim=1, keepdim=True)
    _, singular, vh = torch.linalg.svd(rows, full_matrices=False)
    rank = int((singular > singular.max() * 1e-9).sum()) if len(singular) and singular.max() > 0 else 0
    if rank == width:
        vectors = vh[-count:] if count <= width else vh[-1:].expand(count, -1)
    else:
        span = vh[:rank]
        vectors = torch.randn((count, width), generator=generator, dtype=torch.float64)
        vectors = vectors - (vectors @ span.T) @ span
        if count <= width - rank:
            vectors = torch.linalg.qr(vectors.T).Q.T
    return vectors / torch.linalg.vector_norm(vectors, dim=1, keepdim=True)


def _content(rows: Tensor, *more: object) -> tuple:
    """What determines a set of quiet directions: a digest of the probed gradients' bytes (they hold
    the model, the victim's records and the probe points) and the other arguments."""
    return (hashlib.blake2b(rows.contiguous().numpy().tobytes(), digest_size=20).hexdigest(), tuple(rows.shape),
            *more)


def quiet_directions(setup: Setup, victim: int, count: int, seed: int, coordinate: bool = False) -> Tensor:
    """`count` unit directions along which the victim's own records' gradients are as small as
    they can be: orthogonal to all of them at the probe points when they leave room (for a linear
    model then at every point: its gradients lie in a span fixed by the inputs), else the least
    singular directions. `coordinate` asks for basis vectors e_c (ℓ1 mechanisms: a one-coordinate
    gradient has the same ℓ1 and ℓ2 length, and per-coordinate noise is then one draw): the
    `count` coordinates with the least gradient energy. [count, P].

    Kept by content (`_content`): `privaudit check` builds every audit's game and the run builds
    it again, and in one process the second finds the first's directions."""
    if not coordinate:
        require("memory", math.ceil(_DIRECTION_BYTES * count * setup.model.dim / 2**20),
                f"{count} gradient canaries' directions ({count:,} × {setup.model.dim:,} parameters × "
                f"{_DIRECTION_BYTES} bytes while they are found); fewer canaries, or record or outlier canaries "
                "(canary = \"record\" | \"outlier\"), whose size does not grow with the model")
    grads = victim_gradients(setup, victim, seed)
    key = _content(grads, count, seed, coordinate)
    if key in _QUIET:
        _QUIET.move_to_end(key)
        return _QUIET[key].clone()
    if coordinate:
        chosen = grads.square().sum(0).argsort()[:count]
        found = torch.eye(grads.shape[1])[chosen]
    else:
        found = _complement(grads, count, torch.Generator().manual_seed(seed + 1)).float()
    _QUIET[key] = found
    while len(_QUIET) > _CACHED:
        _QUIET.popitem(last=False)
    return found.clone()


def _marks(setup: Setup, count: int, seed: int) -> Tensor:
    """`count` inputs no real record has (random patterns of `_MARK_SCALE` standard deviations):
    they only identify planted records, whose base loss is never used."""
    generator = torch.Generator().manual_seed(seed + 2)
    return torch.randn((count, *setup.data.shape), generator=generator).to(setup.data.x_train.dtype) * _MARK_SCALE


def gradient_canaries(setup: Setup, victim: int, count: int, norm: float, seed: int,
                      coordinate: bool = False) -> Canaries:
    """`count` gradient canaries of length `norm` along `quiet_directions`."""
    marks = _marks(setup, 2 * count, seed)
    labels = setup.data.y_train[:1].expand(count, *setup.data.y_train.shape[1:]).clone()
    u = quiet_directions(setup, victim, count, seed, coordinate)
    return Canaries("gradient", marks[:count], labels, marks[count:], labels, float(norm), u)


def record_canaries(setup: Setup, victim: int, count: int, label: int | None, scale: float, seed: int) -> Canaries:
    """`count` crafted records: inputs orthogonal to every input of the victim where they leave
    room, each of norm `scale`·√dim in normalised units, labelled `label` (None: random labels);
    each anti-record is the negated input with the same label."""
    x, _ = setup.local.shard(victim)
    flat = x.reshape(len(x), -1).double()
    generator = torch.Generator().manual_seed(seed + 3)
    inputs = _complement(flat, count, generator) * scale * flat.shape[1] ** 0.5
    records = inputs.reshape(count, *setup.data.shape).to(setup.data.x_train.dtype)
    labels = _labels(setup, count, label, generator)
    return Canaries("record", records, labels, -records, labels)


def outlier_canaries(setup: Setup, count: int, label: int | None, scale: float, seed: int) -> Canaries:
    """`count` random ±`scale` patterns (every pixel `scale` standard deviations off the mean),
    labelled `label` (None: random labels): nearly orthogonal to every real input, hence their
    gradients are too, and their loss stays high because no real record pulls the model towards
    them. Each anti-record is the negated pattern."""
    generator = torch.Generator().manual_seed(seed)
    shape = (count, *setup.data.shape)
    signs = torch.randint(0, 2, shape, generator=generator).to(setup.data.x_train.dtype) * 2 - 1
    labels = _labels(setup, count, label, generator)
    return Canaries("outlier", signs * scale, labels, -signs * scale, labels)


def natural_canaries(setup: Setup, count: int, seed: int) -> Canaries:
    """`count` held-out records of the task with their labels, drawn by `seed`, and as many others
    as their anti-records; ValueError (one line) when the held-out split holds fewer than 2·count."""
    data = setup.data
    held = len(data.y_test)
    if 2 * count > held:
        raise ValueError(f"{count} natural canaries need {2 * count} held-out records (each with another as its "
                         f"replace-one anti-record); the held-out split has {held}")
    order = torch.randperm(held, generator=torch.Generator().manual_seed(seed + 5))[: 2 * count].to(data.x_test.device)
    chosen, anti = order[:count], order[count:]
    return Canaries("natural", data.x_test[chosen].to(data.x_train.dtype), data.y_test[chosen].to(data.y_train.dtype),
                    data.x_test[anti].to(data.x_train.dtype), data.y_test[anti].to(data.y_train.dtype))


def _labels(setup: Setup, count: int, label: int | None, generator: torch.Generator) -> Tensor:
    dtype = setup.data.y_train.dtype
    if label is not None:
        return torch.full((count,), label, dtype=dtype)
    return torch.randint(0, setup.data.num_classes, (count,), generator=generator).to(dtype)


def with_records(setup: Setup, agent: int, x: Tensor, y: Tensor, replace: int = 0) -> Setup:
    """`setup` with the records x [k, ...], y [k] in `agent`'s shard: appended (new rows of the
    pool that no other agent holds), or in place of its first `replace` records. Sampling rates
    stay those of the sizes before (add/remove analyses one fixed rate q = B/|D_i|)."""
    local = setup.local
    pool = len(local.x)
    shards = [local.index[i, : int(local.sizes[i])].numpy() for i in range(local.n_agents)]
    shards[agent] = np.concatenate([shards[agent][replace:], np.arange(pool, pool + len(x))])
    return dataclasses.replace(setup, local=LocalData(torch.cat([local.x, x]), torch.cat([local.y, y]), shards),
                               rate_sizes=setup.sampling_sizes)
