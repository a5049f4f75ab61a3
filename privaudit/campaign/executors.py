"""Executors: where a campaign's jobs run — one after another in this process, in a pool of
local processes, or as Ray tasks — each yielding a job's results as soon as the job finishes.

An executor knows nothing of campaigns: a job is any picklable value and `work(job, out)` a
top-level function (`privaudit.campaign.jobs.run_job`) that yields its results. The results come
back to the caller, which alone appends rows to results.jsonl; a worker writes a cell's
artifacts under `out` itself (each file atomically), so `out` must be reachable from every
worker — on a Ray cluster, a shared filesystem. Jobs seed their own generators from their
cells' seeds, so where a job runs does not change its numbers.
"""

from __future__ import annotations

import functools
import itertools
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from privaudit.errors import ConfigError, PrivauditError
from privaudit.limits import exceeded

BACKENDS = ("local", "ray")

Work = Callable[[Any, Path], Iterable[Any]]


class Executor(ABC):
    """Runs jobs, `workers` at a time, yielding every result of a job when it is ready.

    `run` is a generator: closing it (the caller stopped, or Ctrl-C) stops the workers."""

    workers: int = 1
    in_process: bool = False
    """Whether jobs run in the caller's process (so they may draw their own progress bars)."""

    @abstractmethod
    def run(self, work: Work, jobs: Sequence[Any], out: Path) -> Iterator[Any]: ...


class InProcess(Executor):
    """One job after another in this process, each result yielded the moment it is ready."""

    in_process = True

    def run(self, work: Work, jobs: Sequence[Any], out: Path) -> Iterator[Any]:
        for job in jobs:
            yield from work(job, out)


def _worker_setup(driver: int) -> None:
    """Worker set-up: one torch thread (the workers are the parallelism); no SIGINT (Ctrl-C
    reaches the driver, which terminates the workers); a thread lock for tqdm, whose default
    cross-process lock would be reported leaked when a terminated worker cannot release it; and
    a watch on the driver."""
    import torch
    from tqdm import tqdm

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    tqdm.set_lock(threading.RLock())
    threading.Thread(target=_exit_without, args=(driver,), daemon=True).start()


def _exit_without(driver: int) -> None:
    """End this worker within a second of the driver's death (a SIGKILL gives the driver no
    chance to terminate it): the jobs still queued for it have nobody to report to."""
    while True:
        time.sleep(1)
        try:
            os.kill(driver, 0)
        except ProcessLookupError:
            os._exit(1)


def _module_of(work: Work) -> str:
    """The module that defines `work` (or the function a `functools.partial` wraps)."""
    return getattr(work, "func", work).__module__


def _collect(job: Any, work: Work, out: Path) -> list[Any]:
    """A job's results as a list: what crosses back from a worker process."""
    return list(work(job, out))


class ProcessPool(Executor):
    """`workers` local processes; results arrive in the order jobs finish.

    Workers are forked from a "forkserver" process, which has imported the module of `work`
    (torch with it) once but run nothing: each worker starts in a fraction of a second instead
    of importing torch again, and inherits no torch threads or state from the driver."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def run(self, work: Work, jobs: Sequence[Any], out: Path) -> Iterator[Any]:
        if not jobs:
            return
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([_module_of(work)])
        pool = context.Pool(min(self.workers, len(jobs)), initializer=_worker_setup,
                            initargs=(os.getpid(),))
        try:
            for results in pool.imap_unordered(functools.partial(_collect, work=work, out=out), jobs):
                yield from results
            pool.close()
            pool.join()
        finally:
            pool.terminate()
            pool.join()


def _ray_task(job: Any, work: Work, out: Path) -> list[Any]:
    """A job in a Ray worker, on one torch thread."""
    import torch

    torch.set_num_threads(1)
    return list(work(job, out))


class RayExecutor(Executor):
    """Jobs as Ray tasks, at most `workers` in flight. Without `address`, a local Ray instance
    with `workers` CPUs is started and shut down afterwards; with one, the running cluster there
    is joined (and left running)."""

    def __init__(self, workers: int, address: str | None = None) -> None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError("ray is not installed: pip install 'privaudit[ray]'") from None
        if address:
            _check_listening(address)
        self.workers = workers
        self.address = address

    def run(self, work: Work, jobs: Sequence[Any], out: Path) -> Iterator[Any]:
        import ray
        from ray.exceptions import RayTaskError

        if not jobs:
            return
        started = not ray.is_initialized()
        if started:
            try:
                ray.init(address=self.address or "local", num_cpus=None if self.address else self.workers,
                         include_dashboard=False, logging_level=logging.ERROR)
            except ConnectionError as error:
                raise ConfigError(f"--ray-address {self.address}: {str(error).splitlines()[0]}") from None
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        waiting = iter(jobs)
        in_flight = [task.remote(job, work, out) for job in itertools.islice(waiting, self.workers)]
        try:
            while in_flight:
                (ready,), in_flight = ray.wait(in_flight, num_returns=1)
                try:
                    results = ray.get(ready)
                except RayTaskError as error:
                    raise (error.cause if isinstance(error.cause, PrivauditError) else error) from None
                in_flight += [task.remote(job, work, out) for job in itertools.islice(waiting, 1)]
                yield from results
        finally:
            if started:
                ray.shutdown()
            else:
                for ref in in_flight:
                    ray.cancel(ref, force=True)


def _check_listening(address: str) -> None:
    """Fail in seconds when nothing listens at a `host:port` address (ray.init would retry for
    minutes); other forms ("auto") are left to Ray."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as error:
        reason = error.strerror or error
        raise ConfigError(f"--ray-address {address}: no Ray cluster answers there ({reason})") from None


def make_executor(backend: str = "local", workers: int = 1, address: str | None = None) -> Executor:
    """The executor the `run` command's flags name; ConfigError naming the bad flag."""
    if backend not in BACKENDS:
        raise ConfigError(f"--backend: unknown backend '{backend}' (choose from {', '.join(BACKENDS)})")
    if workers < 1:
        raise ConfigError(f"--workers: must be at least 1, got {workers}")
    if address is None:
        reason = exceeded("workers", workers)
        if reason:
            raise ConfigError(f"--workers: {reason}")
    if backend == "ray":
        return RayExecutor(workers, address)
    if address is not None:
        raise ConfigError("--ray-address: only the ray backend has one")
    return InProcess() if workers == 1 else ProcessPool(workers)
