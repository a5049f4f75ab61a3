"""The membership inference attacks a membership cell runs, behind one interface, in an open
registry: LOSS (Yeom et al. 2018), offline LiRA (Carlini et al. 2022) and RMIA (Zarifzadeh et al.
2024), each a function of the per-record outputs of the target model and of the reference models
(`MembershipOutputs`), computed once per victim position and shared by every method.

A method defined outside privaudit registers itself the same way (`register_method`); every
membership cell then runs it beside the others, and its metrics join the row under its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privaudit.attacks.membership.scores import lira_offline_scores, loss_scores, rmia_scores


@dataclass(frozen=True)
class MembershipOutputs:
    """What one victim position's models say about its candidates: rows are models (row 0 the
    target, then the reference models), columns the candidates (for `population_log_prob`, the
    population records RMIA compares against). `loss` the cross-entropy, `confidence` the
    logit-scaled confidence φ, `log_prob` log Pr(correct class)."""

    loss: NDArray[np.float64]
    confidence: NDArray[np.float64]
    log_prob: NDArray[np.float64]
    population_log_prob: NDArray[np.float64]


@dataclass(frozen=True)
class MembershipSettings:
    """The table's settings every method may read: LiRA's variance ("global" or per record),
    RMIA's γ, its offline a (chosen before scoring) and its score ("refined" or "count")."""

    lira_variance: str
    rmia_gamma: float
    rmia_a: float
    rmia_score: str


@dataclass(frozen=True)
class MembershipMethod:
    """One attack: its name in rows and reports, and its scores (higher: more likely a member)."""

    name: str
    title: str
    score: Callable[[MembershipOutputs, MembershipSettings], NDArray[np.float64]]


METHODS: dict[str, MembershipMethod] = {}
"""The membership attacks every cell runs, by name, in report order."""


def register_method(method: MembershipMethod) -> MembershipMethod:
    """Run `method` in every membership cell; ValueError when its name is taken by another."""
    if METHODS.get(method.name, method) is not method:
        raise ValueError(f"membership method '{method.name}' is already registered")
    METHODS[method.name] = method
    return method


def _loss(outputs: MembershipOutputs, settings: MembershipSettings) -> NDArray[np.float64]:
    return loss_scores(outputs.loss[0])


def _lira(outputs: MembershipOutputs, settings: MembershipSettings) -> NDArray[np.float64]:
    return lira_offline_scores(outputs.confidence[0], outputs.confidence[1:],
                               fixed_variance=settings.lira_variance == "global")


def _rmia(outputs: MembershipOutputs, settings: MembershipSettings) -> NDArray[np.float64]:
    return rmia_scores(outputs.log_prob[0], outputs.log_prob[1:], outputs.population_log_prob[0],
                       outputs.population_log_prob[1:], gamma=settings.rmia_gamma, a=settings.rmia_a,
                       log_prob=True, score=settings.rmia_score)


register_method(MembershipMethod("loss", "LOSS (Yeom et al. 2018)", _loss))
register_method(MembershipMethod("lira", "offline LiRA (Carlini et al. 2022)", _lira))
register_method(MembershipMethod("rmia", "RMIA (Zarifzadeh et al. 2024)", _rmia))
