"""Executors: a killed campaign resumes where it stopped without recomputing a finished cell, and
where the cells run (this process, local worker processes, Ray) changes no number."""

import contextlib
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privaudit.campaign.config import read_campaign
from privaudit.campaign.executors import InProcess, ProcessPool
from privaudit.campaign.run import run_campaign
from privaudit.cli import main

TINY = """
[campaign]
name = "tiny"
seeds = [0, 1, 2]

[data]
dataset = "digits"
max_train = 120
test_fraction = 0.5

[[defense]]
kind = "dpsgd"
label = "D-PSGD"
model = "logreg"
agents = 4
rounds = 20
eval_every = 10
batch_size = 2
grid = { lr = [0.1, 0.5] }

[[attack]]
kind = "dlg"
rounds = [1]
evaluations = 20

[[membership]]
label = "MIA"
threat = "curious_neighbour"
rounds = [19]
references = 2
non_members = 20
bootstrap = 20
"""
CELLS = 18  # 2 learning rates × 3 seeds × (training, inversion, membership)


def _numbers(value):
    """A row without its wall-clock fields: what must not depend on where or when it ran."""
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()
                if not key.endswith("wall_s") and key != "seconds_per_run"}
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    return value


def _rows(out: Path) -> list[dict]:
    """Every complete line of results.jsonl, in file order."""
    lines = (out / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def _by_cell(out: Path) -> list[dict]:
    rows = _rows(out)
    for row in rows:
        for path in row.get("artifacts", {}).values():
            assert (out / path).is_file(), path
    return sorted((_numbers(row) for row in rows), key=lambda row: row["cell"])


@pytest.fixture(scope="module")
def campaign_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("campaign") / "tiny.toml"
    path.write_text(TINY)
    return path


def _run(campaign_file: Path, out: Path, executor) -> list[dict]:
    campaign, text = read_campaign(campaign_file)
    run_campaign(campaign, text, out, progress=False, say=lambda line: None, executor=executor)
    return _by_cell(out)


@pytest.fixture(scope="module")
def reference(campaign_file, tmp_path_factory) -> list[dict]:
    """The rows of an uninterrupted run, one cell after another in this process."""
    rows = _run(campaign_file, tmp_path_factory.mktemp("reference"), InProcess())
    assert len(rows) == CELLS and len({row["cell"] for row in rows}) == CELLS
    assert {row["type"] for row in rows} == {"training", "inversion", "membership"}
    return rows


def _group_ends(group: int, within: float) -> bool:
    """Whether every process of a process group has ended within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_killed_run_resumes_without_recomputing_finished_cells(campaign_file, reference, tmp_path, capsys,
                                                                 workers):
    """SIGKILL of the driver alone (its workers get no signal and must end by themselves), once
    the first row is written; the re-run keeps those rows byte for byte and computes the rest."""
    out = tmp_path / "out"
    results = out / "results.jsonl"
    command = [sys.executable, "-m", "privaudit.cli", "run", str(campaign_file), "--out", str(out), "--quiet",
               "--workers", str(workers)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while process.poll() is None and not (results.exists() and b"\n" in results.read_bytes()):
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        assert _group_ends(process.pid, within=10), "worker processes outlived their killed driver"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    before = results.read_bytes()
    finished = len(_rows(out))
    assert 1 <= finished < CELLS, "the kill must land after the first row and before the last"

    assert main(["run", str(campaign_file), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"{finished} of {CELLS} cells already finished in {results}; skipping them" in printed
    assert f"[{CELLS - finished}/{CELLS - finished}]" in printed
    assert results.read_bytes().startswith(before), "the rows written before the kill are kept as they were"
    cells = [row["cell"] for row in _rows(out)]
    assert len(cells) == len(set(cells)) == CELLS
    assert _by_cell(out) == reference


def test_two_local_worker_processes_give_the_same_rows(campaign_file, reference, tmp_path):
    assert _run(campaign_file, tmp_path, ProcessPool(2)) == reference


@pytest.mark.slow
def test_ray_with_two_workers_gives_the_same_rows(campaign_file, reference, tmp_path):
    pytest.importorskip("ray")
    from privaudit.campaign.executors import RayExecutor

    assert _run(campaign_file, tmp_path, RayExecutor(2)) == reference


@pytest.mark.slow
def test_the_demo_campaign_on_ray_gives_the_numbers_it_gives_locally(tmp_path):
    """Issue 7's acceptance: the embedded demo (training, inversion, membership, mechanism and
    canary audits) on a local Ray instance with 2 workers, row for row against this process."""
    pytest.importorskip("ray")
    from privaudit.campaign.executors import RayExecutor

    campaign, text = read_campaign(None)
    rows = []
    for name, executor in (("local", InProcess()), ("ray", RayExecutor(2))):
        run_campaign(campaign, text, tmp_path / name, progress=False, say=lambda line: None, executor=executor)
        rows.append(_by_cell(tmp_path / name))
    assert {row["type"] for row in rows[0]} == {"training", "inversion", "membership", "audit"}
    assert rows[1] == rows[0]


def _nap(seconds: float, out: Path):
    """A job for the pool test: sleep, then say which process ran it."""
    time.sleep(seconds)
    yield os.getpid()


def test_stopping_a_pool_terminates_its_workers(tmp_path):
    """What Ctrl-C does: the driver stops consuming results, and the worker still busy with a
    long job is terminated rather than left running."""
    results = ProcessPool(2).run(_nap, [0.0, 600.0], tmp_path)
    next(results)
    workers = multiprocessing.active_children()
    assert len(workers) >= 2
    started = time.perf_counter()
    results.close()
    assert time.perf_counter() - started < 10
    assert not any(worker.is_alive() for worker in workers)


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--backend", "dask"], "--backend: unknown backend 'dask' (choose from local, ray)"),
        (["--workers", "0"], "--workers: must be at least 1, got 0"),
        (["--workers", "two"], "--workers: expected a whole number, got 'two'"),
        (["--ray-address", "10.0.0.1:6379"], "--ray-address: only the ray backend has one"),
    ],
)
def test_bad_executor_flags_give_one_line_and_exit_2(campaign_file, tmp_path, capsys, flags, expected):
    code = main(["run", str(campaign_file), "--out", str(tmp_path), "--quiet", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == f"privaudit: error: {expected}"
    assert not (tmp_path / "results.jsonl").exists()


def test_ray_backend_without_ray_says_how_to_install_it(campaign_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    code = main(["run", str(campaign_file), "--out", str(tmp_path), "--backend", "ray"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "privaudit: error: ray is not installed: pip install 'privaudit[ray]'"


def test_a_ray_address_where_nothing_listens_fails_at_once(campaign_file, tmp_path, capsys):
    pytest.importorskip("ray")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["run", str(campaign_file), "--out", str(tmp_path), "--backend", "ray", "--ray-address",
                 f"127.0.0.1:{port}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"privaudit: error: --ray-address 127.0.0.1:{port}: no Ray cluster answers")
