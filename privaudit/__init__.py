"""privaudit: audit what an eavesdropper learns from private decentralized learning.

The public Python API (`privaudit.campaign.api`), re-exported here lazily so that importing the package
loads nothing heavy (the CLI sets torch's thread policy before torch is first imported):

    privaudit.load_campaign, privaudit.run, privaudit.results, privaudit.audit,
    privaudit.Results, privaudit.Verdict                       (privaudit.campaign.api)
    privaudit.Defense, privaudit.DefenseParams, privaudit.register   (a defense of your own)
    privaudit.Claim, privaudit.Neighbours                      (what it claims)
    privaudit.Kind, privaudit.Extractor, privaudit.register_extractor, privaudit.register_model_view,
    privaudit.register_channel, privaudit.register_noise       (its view: what an attacker rebuilds)
    privaudit.Steering, privaudit.register_steering            (how a neighbour who lies steers it)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    **dict.fromkeys(("load_campaign", "run", "results", "audit", "Results", "Verdict"), "privaudit.campaign.api"),
    **dict.fromkeys(("Defense", "DefenseParams", "register"), "privaudit.defenses.base"),
    **dict.fromkeys(("Claim", "Neighbours"), "privaudit.accounting"),
    "Kind": "privaudit.wire",
    **dict.fromkeys(("Extractor", "Steering"), "privaudit.attacks.extraction"),
    **dict.fromkeys(("register_extractor", "register_model_view", "register_channel", "register_noise",
                     "register_steering"),
                    "privaudit.attacks.views"),
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'privaudit' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
