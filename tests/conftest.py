"""Shared fixtures. The suite runs its audits on the CPU wherever it runs (`PRIVAUDIT_DEVICE`),
so its numbers are the same on a machine with a GPU; `tests/test_devices.py` runs them on CUDA
where torch sees one.

Each pytest process takes privaudit's own thread policy before torch is imported
(`privaudit.threads.apply`: one intra-op thread, waiting OpenMP threads asleep), as the command line
does: at torch's default of one spinning thread per core, the two processes of `make test` on two
cores made a 300 × 900 SVD take 7.8 s instead of 0.06 s."""

import os
from typing import Any

import pytest

from privaudit import threads

threads.apply()

from privaudit.campaign.cells import build_defense, expand  # noqa: E402
from tests.helpers import small_campaign  # noqa: E402

os.environ.setdefault("PRIVAUDIT_DEVICE", "cpu")


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module, as privaudit runs (`privaudit.threads`), whatever count a test
    before it left (an in-process `--threads 2`): these files' tensors are small, and OpenMP's waiting
    threads on a busy two-core machine made them several times slower (tests/test_position_audit.py:
    100 s against 16 s). A module asks for it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def defense_of():
    """Build the defense of the first cell of a one-table campaign."""

    def build(table: dict[str, Any], seed: int = 0, **data: Any):
        return build_defense(expand(small_campaign([table], seeds=(seed,), **data))[0])

    return build


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    """A finished tiny run's results folder (DP-D-PSGD without noise on 4 agents, 2 rounds), with
    its campaign file `c.toml` beside it; one per test module, which may change its copy."""
    from privaudit.cli import main

    out = tmp_path_factory.mktemp("results") / "out"
    campaign = out.parent / "c.toml"
    campaign.write_text('[campaign]\nname = "tiny"\n[data]\ndataset = "digits"\nmax_train = 200\n'
                        '[[defense]]\nkind = "dpsgd"\nagents = 4\nrounds = 2\neval_every = 2\nbatch_size = 8\n')
    assert main(["run", str(campaign), "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture
def third_party():
    """Defenses loaded by a test leave no trace: the view registries and the imported example
    modules (and the tests' own plugin modules `mute_gossip`, `released_user_defense` and
    `third_party_gossip`) are restored afterwards, since other tests check that nothing imported
    the examples."""
    import sys

    from privaudit.attacks import views
    from privaudit.defenses import DEFENSES

    registries = [DEFENSES, views.EXTRACTORS, views.MODEL_VIEWS, views.CHANNELS, views.DYNAMICS, views.NOISE,
                  views.BATCH_SIZES]
    saved = [dict(registry) for registry in registries]
    modules = set(sys.modules)
    yield
    for registry, before in zip(registries, saved):
        registry.clear()
        registry.update(before)
    for name in set(sys.modules) - modules:
        if name.split(".")[0] in ("examples", "mute_gossip", "released_user_defense", "third_party_gossip"):
            del sys.modules[name]
