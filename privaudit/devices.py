"""Where privaudit's tensor work runs: the device, chosen once per process.

Every piece of work that trains or attacks runs there: training cells (the defense and its
evaluations), inversions (every optimiser), coalition attacks, membership attacks and their
reference models, and canary, position and reconstruction audits, whose thousands of simulated
training runs are one tensor program (`privaudit/worlds.py`) that a CUDA device runs in parallel.
The choice is made once, here, and the code is written for whichever device it is given: a set-up
is moved there (`Setup.to`), every tensor the engine makes follows it (`on`, or `device=` taken
from an input), random streams are generators there (`generator`), and only scores, metrics and
artifacts come back to the CPU. What the wire records (transcripts) is kept on the CPU, so a long
run's recordings never fill a device's memory; an attack moves what it reads to the device.

`PRIVAUDIT_DEVICE` picks it: `cpu`, `cuda` or `cuda:N`; unset, the first CUDA device when torch
sees one, else the CPU. Draws on a CUDA device come from its own generator, so the same seed
gives different (equally valid) runs on a CPU and on a GPU: every results row names the device it
ran on (`name`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from privaudit.errors import ConfigError

VARIABLE = "PRIVAUDIT_DEVICE"


def work_device() -> torch.device:
    """The device all of privaudit's tensor work runs on (`PRIVAUDIT_DEVICE`, else CUDA when
    available, else the CPU); a ConfigError naming the variable when it names no usable device."""
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


def name(device: torch.device) -> str:
    """How a results row names `device`: "cpu", or a CUDA device with its index ("cuda:0"), so
    rows of a machine with several cards say which one ran them."""
    if device.type != "cuda":
        return device.type
    return f"cuda:{torch.cuda.current_device() if device.index is None else device.index}"
