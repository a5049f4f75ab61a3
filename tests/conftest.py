"""Shared fixtures."""

from typing import Any

import pytest

from privaudit.campaign.cells import build_defense, expand
from tests.helpers import small_campaign


@pytest.fixture
def defense_of():
    """Build the defense of the first cell of a one-table campaign."""

    def build(table: dict[str, Any], seed: int = 0, **data: Any):
        return build_defense(expand(small_campaign([table], seeds=(seed,), **data))[0])

    return build
