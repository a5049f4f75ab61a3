"""Where an audit's worlds run: the device, chosen once per process.

A canary audit simulates thousands of independent training runs as one tensor program
(`privaudit/worlds.py`); on a CUDA device the same program runs those worlds in parallel, so an
audit that needs 64,000 runs per side is a matter of seconds. The choice is made once, here, and
the simulation is written for whichever device it is given: the set-up is moved there
(`Setup.to`), every tensor the engine makes follows it (`on`), and only scores come back.

`PRIVAUDIT_DEVICE` picks it: `cpu`, `cuda` or `cuda:N`; unset, the first CUDA device when torch
sees one, else the CPU. Draws on a CUDA device come from its own generator, so the same seed
gives different (equally valid) runs on a CPU and on a GPU: an audit row names the device it ran on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from privaudit.errors import ConfigError

VARIABLE = "PRIVAUDIT_DEVICE"


def audit_device() -> torch.device:
    """The device canary-audit worlds run on (`PRIVAUDIT_DEVICE`, else CUDA when available, else
    the CPU); a ConfigError naming the variable when it names no usable device."""
    text = os.environ.get(VARIABLE, "").strip()
    if not text:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ConfigError(f"{VARIABLE}={text!r} names no device (use cpu, cuda or cuda:N)") from None
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"{VARIABLE}={text!r}: only cpu and cuda devices are supported")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise ConfigError(f"{VARIABLE}={text!r}, but torch sees {count} CUDA device(s)")
    return device


@contextlib.contextmanager
def on(device: torch.device) -> Iterator[None]:
    """Tensors made without a device inside the block are made on `device` (torch's device
    context); on the CPU nothing changes."""
    if device.type == "cpu":
        yield
        return
    with torch.device(device):
        yield


def generator(device: torch.device, seed: int) -> torch.Generator:
    """A random stream on `device` seeded with `seed`."""
    return torch.Generator(device=device).manual_seed(seed)
