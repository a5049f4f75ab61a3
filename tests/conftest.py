"""Shared helpers: small campaigns built from dicts, the way a user's TOML would be."""

from typing import Any

import pytest

from privaudit.campaign import build_defense, expand
from privaudit.config import parse_campaign


def small_campaign(defenses: list[dict[str, Any]], seeds=(0,), **data: Any):
    """A validated campaign on digits with the given `[[defense]]` tables."""
    raw = {
        "campaign": {"name": "test", "seeds": list(seeds)},
        "data": {"dataset": "digits", **data},
        "defense": defenses,
    }
    return parse_campaign(raw)


@pytest.fixture
def defense_of():
    """Build the defense of the first cell of a one-table campaign."""

    def build(table: dict[str, Any], seed: int = 0, **data: Any):
        return build_defense(expand(small_campaign([table], seeds=(seed,), **data))[0])

    return build
