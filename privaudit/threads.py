"""The CPU thread policy of a privaudit process, chosen once at start-up, before torch is imported.

privaudit's tensors are small (a LeNet on one 32×32 image, an MLP on 8×8 digits, per-sample
gradients of a few thousand weights), so an operation lasts microseconds and torch's intra-op
threads mostly wait for each other. OpenMP's waiting threads spin by default: on a 2-core machine
shared with other busy processes, a spinning thread holds a core another process wants while the
thread it waits for is descheduled. Milliseconds per DLG evaluation (`bench/inversion.py`, two
cores):

    threads  waiting    idle   one busy loop   two busy processes
    1        -          3.3    3.4-4.5         4.3
    2        spinning   4.3    13.7            91.5
    2        sleeping   8.2    5.1             4.5

So the policy is:

* one intra-op thread unless `--threads N` (or `OMP_NUM_THREADS`) asks for more: the fastest for
  these models, steady whatever else runs, and the same numbers on every machine (a reduction
  split over a different number of threads can change the last bits). Parallelism comes from
  `--workers`, whose processes run one thread each. `--threads 0` leaves torch's own default
  (one thread per core).
* `OMP_WAIT_POLICY=PASSIVE` unless the user set one, for those who ask for more threads: waiting
  threads sleep instead of spinning, slower on an idle machine but never many times slower on a
  busy one (set `OMP_WAIT_POLICY=ACTIVE` for the other trade). libgomp reads it once, when torch
  is first imported, so it is set before that or not at all.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

DEFAULT_THREADS = 1
WAIT_POLICY = "PASSIVE"


def choose(threads: int | None) -> int | None:
    """The intra-op thread count: `threads` when given (0: torch's default, None returned), else
    OMP_NUM_THREADS when set to a number, else `DEFAULT_THREADS`."""
    if threads is not None:
        return threads or None
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_THREADS


def apply(threads: int | None = None) -> str:
    """Set this process's thread policy (see the module docstring); return it in words.

    Before torch is imported, it goes into the environment (OMP_WAIT_POLICY, OMP_NUM_THREADS),
    which torch and the worker processes started later read; once torch is imported, only the
    thread count can still change, through `torch.set_num_threads`, and the wait policy is the
    one torch found (the environment's, which the description shows)."""
    chosen = choose(threads)
    loaded = "torch" in sys.modules
    if not loaded:
        if not os.environ.get("OMP_WAIT_POLICY", "").strip():
            os.environ["OMP_WAIT_POLICY"] = WAIT_POLICY
        if chosen is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = str(chosen)
    elif chosen is not None:
        import torch

        torch.set_num_threads(chosen)
    return f"{_count(chosen)}, OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY') or 'unset'}"


def _count(chosen: int | None) -> str:
    return "torch's default threads" if chosen is None else f"{chosen} thread{'s' * (chosen > 1)}"


@contextlib.contextmanager
def limited(threads: int | None = None) -> Iterator[str]:
    """The thread count of `apply` for the duration of a block, torch's own restored after it: a
    Python caller of `privaudit.run` gets the command line's speed (one thread: 17.5 s against
    41.6 s at torch's default of two on a 2-core machine, a new user's audit, 2026-11-26) without
    its process's setting changed for good. The wait policy cannot change once torch is imported."""
    import torch

    before = torch.get_num_threads()
    chosen = choose(threads)
    if chosen is not None:
        torch.set_num_threads(chosen)
    try:
        yield _count(chosen)
    finally:
        torch.set_num_threads(before)
