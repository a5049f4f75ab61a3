"""What a private algorithm runs on: the graph, the model, the data and its split, the random stream.

A set-up is engine-level: the simulator, the defenses and the audits all take one, and none of
them needs to know how it was built (a campaign cell, a test, an audit's neighbouring world).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from privaudit import devices
from privaudit.data import Dataset
from privaudit.flatmodel import FlatModel
from privaudit.sampling import LocalData
from privaudit.topology import Topology


@dataclass
class Setup:
    """Everything a defense runs on, built once per cell from the campaign and the seed."""

    topology: Topology
    model: FlatModel
    model_name: str
    data: Dataset
    local: LocalData
    generator: torch.Generator
    seed: int
    rate_sizes: Tensor | None = None
    """Local dataset sizes n_i that Poisson sampling rates q_i = B/n_i are computed from; None
    means the actual sizes. Add/remove DP analyses one fixed q per agent, so a neighbouring world
    with a record added (a canary audit) keeps the sizes of the world without it."""

    def to(self, device: torch.device) -> Setup:
        """This set-up with its model, data and shards on `device` and its random stream a
        generator there, seeded with the same seed (`privaudit.devices`); itself on the CPU."""
        if device.type == "cpu":
            return self
        return dataclasses.replace(
            self, model=self.model.to(device), data=self.data.to(device), local=self.local.to(device),
            generator=devices.generator(device, self.seed),
            rate_sizes=None if self.rate_sizes is None else self.rate_sizes.to(device))

    @property
    def device(self) -> torch.device:
        """The device this set-up's tensors are on (`to`)."""
        return self.data.x_train.device

    @property
    def sampling_sizes(self) -> Tensor:
        """The sizes sampling rates are computed from (`rate_sizes`, else the shards' sizes)."""
        return self.local.sizes if self.rate_sizes is None else self.rate_sizes
