"""The registries of what attackers know, one entry per defense, filled by the defenses' view modules.

A view module (`privaudit/attacks/views/<defense>.py`, or a file of your own beside a defense defined outside
privaudit) calls, at its top level:

    register_extractor(Extractor(...))     a scenario for gradient inversion (and canary channels); its
                                           `knows`: what a curious agent knows besides what it hears
    register_model_view(Extractor(...))    the victim's model as intercepted (membership inference)
    register_channel(channel)              the canary audit's reading of one round
    register_dynamics(Dynamics(...))       the state recurrence the coalition attack solves
    register_unmodelled(defense, why)      or why the coalition attack does not model it
    register_noise(Noise(...))             the hyperparameters that set its noise (privacy–utility)
    register_batch_size(defense, read)     how many records one local step averages (inversion)
    register_steering(Steering(...))       how a neighbour who lies sets the victim's next point (active attacks)

Each returns what it was given. A key privaudit ships is never replaced (ValueError); a key
registered again from outside replaces the earlier entry (its module imported anew). Lookups
(`extractor`, `model_view`, `channel`, `dynamics`, `noise`) give one-line errors naming what
exists; `described` summarises one defense's view for `privaudit list`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from privaudit.attacks.audit.channels import Channel
from privaudit.attacks.coalition.dynamics import Dynamics
from privaudit.attacks.extraction import Extractor, Steering

EXTRACTORS: dict[tuple[str, str], Extractor] = {}
"""Extraction scenarios, by (defense name, scenario)."""

MODEL_VIEWS: dict[str, Extractor] = {}
"""What an attacker holds of agent i's model at round t, by defense: the model as it crossed the
wire (with the defense's noise or quantization when it sends a perturbed model), or what its
messages give away of it. Membership inference attacks these."""

CHANNELS: dict[str, Channel] = {}
"""The canary audit's channel, by defense."""

DYNAMICS: dict[str, Dynamics] = {}
"""The state recurrence the coalition attack models, by defense."""

UNMODELLED: dict[str, str] = {}
"""Why the coalition attack does not run on a defense (a failed row says this)."""


@dataclass(frozen=True)
class Noise:
    """The hyperparameters that set a defense's noise, as its `Params` names them: name → (axis
    label, whether a larger value means more noise); `switch` a boolean that turns the noise off
    (DPDL's ND variant); `companions` hyperparameters that matter only through the noise (the T at
    which DPDL's σ is set). The privacy–utility section finds sweeps over them."""

    defense: str
    parameters: dict[str, tuple[str, bool]]
    switch: str | None = None
    companions: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        """The form a training row stores (`privaudit.reports.privacy_utility` reads it)."""
        return {"parameters": {name: [label, more] for name, (label, more) in self.parameters.items()},
                "switch": self.switch, "companions": list(self.companions)}


NOISE: dict[str, Noise] = {}
"""Noise parameters, by defense."""

BATCH_SIZES: dict[str, Callable[[Mapping[str, Any]], int]] = {}
"""How many records one local step of a defense averages, read off its public hyperparameters: the
number of images an inversion rebuilds per step when its table gives none."""

STEERINGS: dict[str, Steering] = {}
"""How a participant who lies steers the victim's next point, by defense (`privaudit.attacks.active`)."""

_SHIPPED: set[tuple[str, object]] = set()
Entry = TypeVar("Entry")


def _register(registry: dict, key: object, entry: Entry) -> Entry:
    if (id(registry), key) in _SHIPPED and registry[key] is not entry:
        raise ValueError(f"{key} is privaudit's own entry and cannot be replaced: register yours under your "
                         "defense's own name (its class's `name`) or a scenario of your own")
    registry[key] = entry
    return entry


def register_extractor(extractor: Extractor) -> Extractor:
    """Make a defense's messages readable by inversion (and by its canary channel) under (its
    defense's name, its scenario)."""
    return _register(EXTRACTORS, (extractor.defense, extractor.scenario), extractor)


def register_model_view(view: Extractor) -> Extractor:
    """What an attacker holds of the victim's model (`view.extract(transcript, victim, round)`
    returns the model), which membership inference attacks."""
    return _register(MODEL_VIEWS, view.defense, view)


def register_channel(channel: Channel) -> Channel:
    """The canary audit's channel for `channel.defense`."""
    return _register(CHANNELS, channel.defense, channel)


def register_dynamics(model: Dynamics) -> Dynamics:
    """The recurrence the coalition attack solves for `model.defense`."""
    return _register(DYNAMICS, model.defense, model)


def register_unmodelled(defense: str, why: str) -> str:
    """Why the coalition attack does not model `defense`, for its failed rows."""
    return _register(UNMODELLED, defense, why)


def register_noise(noise: Noise) -> Noise:
    """The hyperparameters that set `noise.defense`'s noise."""
    return _register(NOISE, noise.defense, noise)


def register_batch_size(defense: str, read: Callable[[Mapping[str, Any]], int]) -> Callable[[Mapping[str, Any]], int]:
    """How many records one local step of `defense` averages, from its public hyperparameters."""
    return _register(BATCH_SIZES, defense, read)


def register_steering(steering: Steering) -> Steering:
    """How a neighbour who lies sets the point at which `steering.defense`'s victim computes a
    release (its step must also mix what the wire delivers: `Defense.delivers`)."""
    return _register(STEERINGS, steering.defense, steering)


def seal_shipped() -> None:
    """Mark every entry registered so far as privaudit's own (called once the shipped views are in)."""
    for registry in (EXTRACTORS, MODEL_VIEWS, CHANNELS, DYNAMICS, UNMODELLED, NOISE, BATCH_SIZES, STEERINGS):
        _SHIPPED.update((id(registry), key) for key in registry)


def extractor(defense: str, scenario: str) -> Extractor:
    """The registry entry, or a one-line ValueError naming what exists."""
    if (defense, scenario) in EXTRACTORS:
        return EXTRACTORS[defense, scenario]
    known = scenarios(defense)
    if not known:
        defenses = ", ".join(sorted({d for d, _ in EXTRACTORS}))
        raise ValueError(f"no extractor for defense '{defense}' (known: {defenses}): its view registers one with "
                         "privaudit.register_extractor(Extractor(...))")
    raise ValueError(f"defense '{defense}' has no extraction scenario '{scenario}' (known: {', '.join(known)}; a view "
                     "adds one with privaudit.register_extractor(Extractor(...)))")


def scenarios(defense: str) -> list[str]:
    """The extraction scenarios registered for `defense`, in registration order."""
    return [s for d, s in EXTRACTORS if d == defense]


def model_view(defense: str) -> Extractor:
    """The defense's model view, or a one-line ValueError."""
    if defense not in MODEL_VIEWS:
        raise ValueError(f"defense '{defense}' sends no model an attacker can read (known: "
                         f"{', '.join(sorted(MODEL_VIEWS))}): its view states one with "
                         "privaudit.register_model_view(Extractor(...))")
    return MODEL_VIEWS[defense]


def channel(defense: str) -> Channel:
    """The defense's canary channel, or a one-line ValueError."""
    if defense not in CHANNELS:
        raise ValueError(f"no canary audit for defense '{defense}' (known: {', '.join(sorted(CHANNELS))}): its view "
                         "states its noise law with privaudit.register_channel(a Channel subclass)")
    return CHANNELS[defense]


def dynamics(defense: str) -> Dynamics:
    """The defense's recurrence, or a one-line ValueError saying why there is none."""
    if defense in DYNAMICS:
        return DYNAMICS[defense]
    if defense in UNMODELLED:
        raise ValueError(UNMODELLED[defense])
    raise ValueError(f"no coalition model for defense '{defense}' (modelled: {', '.join(sorted(DYNAMICS))}): its view "
                     "states its recurrence with privaudit.attacks.views.register_dynamics(Dynamics(...)), or why "
                     "there is none with register_unmodelled")


def noise(defense: str) -> Noise | None:
    """The defense's noise parameters, None when its view names none."""
    return NOISE.get(defense)


def batch_size(defense: str, hyper: Mapping[str, Any]) -> int | None:
    """The records one local step of `defense` averages, None when its view does not say (a
    schedule that changes it every round, or no view)."""
    read = BATCH_SIZES.get(defense)
    return None if read is None else read(hyper)


def described(defense: str) -> dict[str, Any]:
    """What the attacks know of `defense`, for `privaudit list`: its canary audit scored with its
    view's law ("law"), law-free from its extractors alone ("law-free"), or none (None); how a liar
    steers it, in words (its `Steering.rule`), or None."""
    audit = "law" if defense in CHANNELS else "law-free" if scenarios(defense) else None
    steering = STEERINGS.get(defense)
    return {"scenarios": scenarios(defense), "membership": defense in MODEL_VIEWS,
            "canary_audit": audit, "coalition": defense in DYNAMICS, "steering": steering is not None,
            "steering_rule": None if steering is None else steering.rule}
