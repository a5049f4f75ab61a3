"""Shared fixtures. The suite runs its audits on the CPU wherever it runs (`PRIVAUDIT_DEVICE`),
so its numbers are the same on a machine with a GPU; `tests/test_devices.py` runs them on CUDA
where torch sees one."""

import os
from typing import Any

import pytest

from privaudit.campaign.cells import build_defense, expand
from tests.helpers import small_campaign

os.environ.setdefault("PRIVAUDIT_DEVICE", "cpu")


@pytest.fixture
def defense_of():
    """Build the defense of the first cell of a one-table campaign."""

    def build(table: dict[str, Any], seed: int = 0, **data: Any):
        return build_defense(expand(small_campaign([table], seeds=(seed,), **data))[0])

    return build
