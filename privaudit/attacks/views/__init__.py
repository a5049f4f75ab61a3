"""What attackers know of each defense, one module per defense, and the registries they fill. A view
is built from `privaudit.attacks.extraction`'s pieces (the target an inversion needs, `Extractor`, the helpers
every view shares).

    registry     the registries and their `register_*` functions and lookups
    dpsgd        D-PSGD and DP-D-PSGD
    muffliato    Muffliato-GD (Cyffers et al. 2022)
    dpdl         DPDL (seed 000)
    lt_admm_dp   LT-ADMM-DP (seed 002)
    tvss         Wang & Zhang's Algorithms 1 and 2 (seed 003)
    ternary      Wang & Başar's ternary quantization (seed 004)

Importing the package registers the shipped views. A defense defined outside privaudit registers
its own view the same way, from its own file (`examples/laplace_gossip.py`).
"""

# The shipped views, in the order `privaudit list` shows their defenses.
from privaudit.attacks.views import dpsgd  # isort: skip
from privaudit.attacks.views import muffliato  # isort: skip
from privaudit.attacks.views import dpdl  # isort: skip
from privaudit.attacks.views import ternary  # isort: skip
from privaudit.attacks.views import lt_admm_dp  # isort: skip
from privaudit.attacks.views import tvss  # isort: skip
from privaudit.attacks.views.registry import (BATCH_SIZES, CHANNELS, DYNAMICS, EXTRACTORS, MODEL_VIEWS, NOISE, STEERINGS,
                                    UNMODELLED, Noise, batch_size, channel, described, dynamics, extractor, model_view,
                                    noise, register_batch_size, register_channel, register_dynamics,
                                    register_extractor, register_model_view, register_noise, register_steering,
                                    register_unmodelled, scenarios, seal_shipped)

seal_shipped()

__all__ = [
    "BATCH_SIZES", "CHANNELS", "DYNAMICS", "EXTRACTORS", "MODEL_VIEWS", "NOISE", "STEERINGS", "UNMODELLED", "Noise",
    "batch_size", "channel", "described", "dynamics", "extractor", "model_view", "noise", "scenarios",
    "register_batch_size", "register_channel", "register_dynamics", "register_extractor", "register_model_view",
    "register_noise", "register_steering", "register_unmodelled",
    "dpdl", "dpsgd", "lt_admm_dp", "muffliato", "ternary", "tvss",
]
