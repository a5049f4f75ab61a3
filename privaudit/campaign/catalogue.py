"""What a campaign can name, read off the registries its validation uses: `privaudit list`.

Every entry comes from the registry `privaudit.campaign.config` checks a campaign against — a
defense's pydantic `Params`, an inversion attack's dataclass fields, a mechanism's `Params`, the
extractors' `needs`, the canary channels, the threat models, topologies, models and datasets — and
every parameter's type, bounds and default from the JSON schema pydantic validates it with, so the
listing cannot drift from what `privaudit run` accepts. `catalogue` gives plain data (what
`--json` prints); `catalogue_text` the same for a terminal; `catalogue_markdown` the same as a
Markdown page (`--format markdown`), which over every category is docs/reference.md.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable
import re
from typing import Any

from pydantic import BaseModel, TypeAdapter

from privaudit.attacks.audit.canaries import CANARY_KINDS
from privaudit.attacks.audit.mechanisms import MECHANISMS
from privaudit.attacks.active.trial import ACTIVE_ATTACKS
from privaudit.attacks.inversion import INVERSIONS
from privaudit.attacks.membership.methods import METHODS
from privaudit.attacks.views import CHANNELS, DYNAMICS, EXTRACTORS, MODEL_VIEWS, described, noise
from privaudit.defenses import DEFENSES
from privaudit.defenses.external import SHIPPED, load_installed, origin
from privaudit import threats
from privaudit.campaign.config import (AUDIT_KINDS, MEMBERSHIP_TARGETS, AttackConfig, AuditConfig, DataConfig, MembershipConfig,
                                       RunConfig)
from privaudit.data import DATASETS, PARTITIONS
from privaudit.errors import UsageError
from privaudit.models import MODELS
from privaudit.synthetic import SYNTHETIC
from privaudit.threats import THREATS
from privaudit.topology import MIXING_RULES, TOPOLOGIES, build_graph

CATEGORIES = ("defenses", "attacks", "scenarios", "threats", "topologies", "models", "datasets")
"""What `privaudit list KIND` narrows to."""

_MAX_AGENTS_PROBED = 64
_BOUNDS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
_JSON_TYPES = {"integer": "int", "number": "float", "string": "str", "boolean": "bool", "null": "None",
               "object": "table"}


def _summary(doc: str | None) -> str:
    """A docstring's first paragraph on one line."""
    return " ".join(inspect.cleandoc(doc or "").split("\n\n")[0].split())


def type_text(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> str:
    """A JSON-schema type in a campaign author's words: `int ≥ 1`, `float > 0 | None`,
    `"lbfgs" | "adam"`, `list[int]`."""
    defs = defs or {}
    if "$ref" in schema:
        return type_text(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "anyOf" in schema:
        return " | ".join(type_text(part, defs) for part in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if kind == "array":
        if "prefixItems" in schema:
            text = f"({', '.join(type_text(item, defs) for item in schema['prefixItems'])})"
        else:
            text = f"list[{type_text(schema.get('items') or {}, defs) or 'any'}]"
    else:
        text = _JSON_TYPES.get(kind, "any") if kind else ""
    bounds = [f"{sign} {schema[key]}" for key, sign in _BOUNDS if key in schema]
    return " ".join([text, *bounds]).strip()


def _default(cls: type, name: str) -> tuple[bool, Any]:
    """(required, default) of field `name` of a pydantic model or a dataclass, calling a default
    factory (a list default is `[]`, not "required")."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        field = cls.model_fields[name]
        return (True, None) if field.is_required() else (False, field.get_default(call_default_factory=True))
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    if field.default is not dataclasses.MISSING:
        return False, field.default
    if field.default_factory is not dataclasses.MISSING:
        return False, field.default_factory()
    return True, None


def parameters(cls: type) -> list[dict[str, Any]]:
    """The fields of a pydantic model or a pydantic-validated dataclass: name, type (with its
    bounds), whether required, default and description."""
    schema = TypeAdapter(cls).json_schema()
    found = []
    for name, field in schema.get("properties", {}).items():
        required, default = _default(cls, name)
        if isinstance(default, tuple):
            default = list(default)
        found.append({"name": name, "type": type_text(field, schema.get("$defs")), "required": required,
                      "default": default, "description": field.get("description", "")})
    return found


def _table(cls: type[BaseModel], skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [field for field in parameters(cls) if field["name"] not in skip]


def defenses() -> dict[str, Any]:
    """Every `[[defense]]` table's run-shape fields, and each registered defense with its own
    hyperparameters and what can attack it."""
    unloadable = load_installed()
    kinds = []
    for name, cls in DEFENSES.items():
        declared = noise(name)
        kinds.append({
            "kind": name, "title": cls.title, "description": _summary(cls.Params.__doc__),
            "origin": "privaudit" if name in SHIPPED else origin(cls),
            "params": parameters(cls.Params), **described(name),
            "noise": list(declared.parameters) if declared else [],
        })
    found = {"table": _table(RunConfig, ("kind",)), "kinds": kinds}
    return {**found, "unloadable": unloadable} if unloadable else found


def attacks() -> dict[str, Any]:
    """Inversion attacks (`[[attack]]`), membership inference (`[[membership]]`) and audits
    (`[[audit]]`): each table's fields and what its `kind` can name."""
    inversion = [{"kind": name, "title": cls.title, "description": _summary(cls.__doc__), "params": parameters(cls)}
                 for name, cls in INVERSIONS.items()]
    active = [{"kind": name, "title": cls.title, "description": _summary(cls.__doc__), "params": parameters(cls),
               "threat": "malicious", "defenses": list(cls.applies_to())} for name, cls in ACTIVE_ATTACKS.items()]
    mechanisms = [{"name": name, "title": cls.title, "defense": cls.defense, "params": parameters(cls.Params)}
                  for name, cls in MECHANISMS.items()]
    channels = [{"defense": name, "scenarios": list(channel.scenarios), "adjacency": str(channel.adjacency)}
                for name, channel in CHANNELS.items()]
    return {
        "inversion": {"table": _table(AttackConfig, ("kind",)), "kinds": inversion, "active": active},
        "membership": {"table": _table(MembershipConfig), "methods": list(METHODS), "targets": list(MEMBERSHIP_TARGETS),
                       "models": [{"defense": name, "needs": view.needs} for name, view in MODEL_VIEWS.items()]},
        "audits": {"table": _table(AuditConfig), "mechanisms": mechanisms, "canaries": list(CANARY_KINDS),
                   "channels": channels},
    }


def scenarios() -> list[dict[str, Any]]:
    """Every (defense, scenario) an `[[attack]]` can invert, with the messages it needs heard."""
    return [{"defense": defense, "scenario": scenario, "kinds": sorted(str(kind) for kind in extractor.kinds),
             "needs": extractor.needs} for (defense, scenario), extractor in EXTRACTORS.items()]


def _bullets(doc: str | None) -> dict[str, str]:
    """"* `name` text" items of a docstring, by name."""
    found = re.findall(r"^\* `(\w+)` (.*?)(?=^\* |^\s*$)", inspect.cleandoc(doc or "") + "\n\n", re.M | re.S)
    return {name: " ".join(text.split()) for name, text in found}


def threat_models() -> list[dict[str, Any]]:
    """Each threat model with its description and the table fields that only it takes (those
    whose description starts with its name)."""
    described = _bullets(threats.__doc__)
    fields = _table(AttackConfig)
    listed = []
    for name in THREATS:
        entry = {"name": name, "description": described.get(name, ""),
                 "fields": [field for field in fields if field["description"].startswith(f"{name}:")]}
        if name == "coalition":
            entry["defenses"] = list(DYNAMICS)
        listed.append(entry)
    return listed


def _min_agents(topology: str) -> int | None:
    """The fewest agents the topology is built on, found by building it from 2 agents up:
    `build_graph` alone knows each graph's minimum, and a graph of a few nodes costs nothing."""
    for agents in range(2, _MAX_AGENTS_PROBED + 1):
        try:
            build_graph(topology, agents)
        except ValueError:
            continue
        return agents
    return None


def topologies() -> dict[str, Any]:
    return {"topologies": [{"name": name, "min_agents": _min_agents(name)} for name in TOPOLOGIES],
            "mixing": list(MIXING_RULES)}


def models() -> list[dict[str, Any]]:
    """Each model with its description and the `model_options` its builder takes."""
    listed = []
    for name, build in MODELS.items():
        options = [{"name": p.name, "default": p.default} for p in inspect.signature(build).parameters.values()
                   if p.kind is inspect.Parameter.KEYWORD_ONLY]
        listed.append({"name": name, "description": _summary(build.__doc__), "options": options})
    return listed


def datasets() -> dict[str, Any]:
    return {"table": _table(DataConfig), "images": list(DATASETS), "synthetic": list(SYNTHETIC),
            "partitions": list(PARTITIONS)}


_BUILDERS = {"defenses": defenses, "attacks": attacks, "scenarios": scenarios, "threats": threat_models,
             "topologies": topologies, "models": models, "datasets": datasets}


def catalogue(category: str | None = None) -> dict[str, Any]:
    """Every category (or only `category`, one of `CATEGORIES`) as plain data; UsageError naming
    the categories for another one."""
    if category is not None and category not in CATEGORIES:
        raise UsageError(f"list: unknown category '{category}' (choose from {', '.join(CATEGORIES)})")
    return {name: _BUILDERS[name]() for name in CATEGORIES if category in (None, name)}


# ---------------------------------------------------------------- text


def _value(value: Any) -> str:
    """A default as a campaign file writes it: "ring", true, [0.001, 0.01]."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _type_and_default(field: dict[str, Any], optional: str, show: Callable[[Any], str]) -> tuple[str, str]:
    """A field's type and its default in words: "required", `optional` where the default is None
    (TOML has no None: leave the key out; the type then drops its "| None"), else `show(default)`."""
    if field["required"]:
        return field["type"], "required"
    if field["default"] is None:
        return field["type"].removesuffix(" | None"), optional
    return field["type"], show(field["default"])


def _field_lines(fields: list[dict[str, Any]], indent: str) -> list[str]:
    """`name: type = default — description`; a field whose default is None is "optional" (TOML
    has no None: leave the key out)."""
    lines = []
    for field in fields:
        kind, default = _type_and_default(field, "(optional)", lambda value: f"= {_value(value)}")
        line = f"{indent}{field['name']}: {kind} {default}"
        lines.append(line + (f" — {field['description']}" if field["description"] else ""))
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _defenses_text(found: dict[str, Any]) -> list[str]:
    lines = ["defenses ([[defense]] kind = ...)", "  every table:"] + _field_lines(found["table"], "    ")
    for entry in found["kinds"]:
        described = f": {entry['description']}" if entry["description"] else ""
        where = "" if entry["origin"] == "privaudit" else f" [{entry['origin']}]"
        lines += [f"  {entry['kind']} — {entry['title']}{where}{described}"] + _field_lines(entry["params"], "    ")
        lines.append(f"    scenarios: {', '.join(entry['scenarios']) or 'none'}; "
                     f"membership: {_yes(entry['membership'])}; canary audit: {entry['canary_audit'] or 'no'}; "
                     f"coalition: {_yes(entry['coalition'])}; steered by a liar: {_yes(entry['steering'])}; "
                     f"noise: {', '.join(entry['noise']) or 'none named'}")
    lines += [f"  not loaded: {problem}" for problem in found.get("unloadable", [])]
    return lines


def _attacks_text(found: dict[str, Any]) -> list[str]:
    inversion, membership, audits = found["inversion"], found["membership"], found["audits"]
    lines = ["attacks", "  inversion ([[attack]] kind = ...), every table:"] + _field_lines(inversion["table"], "    ")
    for entry in inversion["kinds"]:
        lines.append(f"    {entry['kind']} — {entry['description'] or entry['title']}")
        lines += _field_lines(entry["params"], "      ")
    for entry in inversion["active"]:
        lines.append(f"    {entry['kind']} — active (threat = \"{entry['threat']}\"): {entry['description'] or entry['title']}")
        lines.append(f"      applies to: {', '.join(entry['defenses']) or 'no registered defense'}")
        lines += _field_lines(entry["params"], "      ")
    lines.append(f"  membership ([[membership]]): {', '.join(membership['methods'])} at once; targets: "
                 f"{', '.join(membership['targets'])}")
    lines += [f"    intercepted model of {entry['defense']}: {entry['needs']}" for entry in membership["models"]]
    lines += ["    every table:"] + _field_lines(membership["table"], "      ")
    lines.append("  audits ([[audit]] kind = \"mechanism\" | \"canary\" | \"reconstruction\"), every table:")
    lines += _field_lines(audits["table"], "    ")
    lines.append("    mechanisms (mechanism = ..., params = {...}):")
    for entry in audits["mechanisms"]:
        of = f" — one release of defense {entry['defense']}" if entry["defense"] else ""
        lines.append(f"      {entry['name']} — {entry['title']}{of}")
        lines += _field_lines(entry["params"], "        ")
    lines.append(f"    canaries (canary = ...): {', '.join(audits['canaries'])}")
    lines.append("    channels (kind = \"canary\"; channels = ...):")
    lines += [f"      {entry['defense']}: {', '.join(entry['scenarios'])} ({entry['adjacency']})"
              for entry in audits["channels"]]
    return lines


def _scenarios_text(found: list[dict[str, Any]]) -> list[str]:
    lines = ["scenarios ([[attack]] scenario = ...)"]
    for entry in found:
        kinds = ", ".join(entry["kinds"])
        lines.append(f"  {entry['defense']} / {entry['scenario']} ({kinds}): needs {entry['needs']}")
    return lines


def _threats_text(found: list[dict[str, Any]]) -> list[str]:
    lines = ["threats (threat = ...)"]
    for entry in found:
        lines.append(f"  {entry['name']} {entry['description']}")
        lines += _field_lines(entry["fields"], "    ")
        if "defenses" in entry:
            lines.append(f"    modelled for: {', '.join(entry['defenses'])}")
    return lines


def _topologies_text(found: dict[str, Any]) -> list[str]:
    lines = ["topologies (topology = ...)"]
    lines += [f"  {entry['name']}" + (f" (at least {entry['min_agents']} agents)" if entry["min_agents"] else "")
              for entry in found["topologies"]]
    return lines + [f"  mixing rules (mixing = ...): {', '.join(found['mixing'])}"]


def _models_text(found: list[dict[str, Any]]) -> list[str]:
    lines = ["models (model = ...; model_options = {...}; also \"torchvision:NAME\" or \"package.module:factory\" "
             "with --allow-code)"]
    for entry in found:
        options = ", ".join(f"{option['name']} = {_value(option['default'])}" for option in entry["options"])
        lines.append(f"  {entry['name']} — {entry['description']}" + (f" Options: {options}." if options else ""))
    return lines


def _datasets_text(found: dict[str, Any]) -> list[str]:
    return ["datasets ([data] dataset = ...)", f"  images: {', '.join(found['images'])}",
            f"  synthetic (generated per agent): {', '.join(found['synthetic'])}",
            f"  partitions (partition = ...): {', '.join(found['partitions'])}",
            "  every [data] table:"] + _field_lines(found["table"], "    ")


_TEXT = {"defenses": _defenses_text, "attacks": _attacks_text, "scenarios": _scenarios_text,
         "threats": _threats_text, "topologies": _topologies_text, "models": _models_text,
         "datasets": _datasets_text}


def catalogue_text(found: dict[str, Any]) -> str:
    """`catalogue`'s data for a terminal: one block per category, one line per field."""
    return "\n\n".join("\n".join(_TEXT[name](value)) for name, value in found.items())


# ---------------------------------------------------------------- Markdown

MARKDOWN_COMMAND = ".venv/bin/privaudit list --format markdown > docs/reference.md"
"""The command that writes the committed campaign reference (tests/test_docs.py compares them)."""


def _cell(text: Any) -> str:
    """Text for one Markdown table cell: on one line, its pipes escaped (GitHub's tables split
    on them even inside code)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: Any) -> str:
    return f"`{_cell(text)}`" if str(text) else ""


def _field_table(fields: list[dict[str, Any]]) -> list[str]:
    """One row per field: name, type with bounds, default ("required"; "optional" where the
    default is None, since TOML has no None: leave the key out), description."""
    if not fields:
        return ["No fields of its own."]
    lines = ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for field in fields:
        kind, default = _type_and_default(field, "optional", lambda value: _code(_value(value)))
        lines.append(f"| {_code(field['name'])} | {_code(kind)} | {default} | {_cell(field['description'])} |")
    return lines


def _names(names: list[str]) -> str:
    return ", ".join(_code(name) for name in names) or "none"


_CANARY_AUDIT = {"law": "yes, scored with the noise law its view states", "law-free": "yes, law-free (from its "
                 "extractors alone)", None: "no"}


def _defenses_markdown(found: dict[str, Any]) -> list[str]:
    lines = ["## Defenses", "", "A `[[defense]]` table runs one algorithm: `kind = \"...\"` names it.", "",
             "### Fields of every `[[defense]]` table", "", *_field_table(found["table"]), "",
             "Every other key of the table is a hyperparameter of its defense, below."]
    for entry in found["kinds"]:
        where = "" if entry["origin"] == "privaudit" else f" (from `{entry['origin']}`)"
        lines += ["", f"### `{entry['kind']}`: {entry['title']}{where}", ""]
        if entry["description"]:
            lines += [entry["description"], ""]
        lines += _field_table(entry["params"])
        lines += ["", f"- scenarios (`[[attack]] scenario`): {_names(entry['scenarios'])}",
                  f"- membership inference: {_yes(entry['membership'])}",
                  f"- canary audit: {_CANARY_AUDIT[entry['canary_audit']]}",
                  f"- coalition attack: {_yes(entry['coalition'])}",
                  f"- steered by a participant who lies (active attacks): {_yes(entry['steering'])}"
                  + (f": {entry['steering_rule']}" if entry.get("steering_rule") else ""),
                  f"- noise parameters: {_names(entry['noise'])}"]
    lines += [f"\nNot loaded: {problem}" for problem in found.get("unloadable", [])]
    return lines


def _attacks_markdown(found: dict[str, Any]) -> list[str]:
    inversion, membership, audits = found["inversion"], found["membership"], found["audits"]
    lines = ["## Attacks", "", "### Gradient inversion: `[[attack]]`", "",
             "Fields of every `[[attack]]` table (`kind` names the attack below):", "",
             *_field_table(inversion["table"])]
    for entry in inversion["kinds"]:
        lines += ["", f"#### `{entry['kind']}`", "", entry["description"] or entry["title"], "",
                  *_field_table(entry["params"])]
    for entry in inversion["active"]:
        lines += ["", f"#### `{entry['kind']}` (active: `threat = \"{entry['threat']}\"`)", "",
                  entry["description"] or entry["title"], "",
                  f"Applies to: {_names(entry['defenses']) if entry['defenses'] else 'no registered defense'}.", "",
                  *_field_table(entry["params"])]
    lines += ["", "### Membership inference: `[[membership]]`", "",
              f"Methods, all run at once: {_names(membership['methods'])}. Targets (`target`): "
              f"{_names(membership['targets'])}.", "", "| defense | the intercepted model needs |", "| --- | --- |"]
    lines += [f"| {_code(entry['defense'])} | {_cell(entry['needs'])} |" for entry in membership["models"]]
    lines += ["", "Fields of every `[[membership]]` table:", "", *_field_table(membership["table"])]
    lines += ["", "### Audits: `[[audit]]`", "",
              f"`kind` is one of {', '.join(f'`{json.dumps(kind)}`' for kind in AUDIT_KINDS)}. Fields of every "
              "`[[audit]]` table:", "",
              *_field_table(audits["table"]), "", "#### Mechanisms (`kind = \"mechanism\"`)", "",
              "`mechanism = \"...\"` names one, `params = {...}` sets its parameters."]
    for entry in audits["mechanisms"]:
        of = f" One release of defense `{entry['defense']}`." if entry["defense"] else ""
        lines += ["", f"##### `{entry['name']}`: {entry['title']}", ""] + ([of.strip(), ""] if of else [])
        lines += _field_table(entry["params"])
    lines += ["", "#### Canaries and channels (`kind = \"canary\"`)", "",
              f"Canaries (`canary`): {_names(audits['canaries'])}.", "",
              "| defense | channels (`channels`) | the channel's neighbouring relation |", "| --- | --- | --- |"]
    lines += [f"| {_code(entry['defense'])} | {_names(entry['scenarios'])} | {_cell(entry['adjacency'])} |"
              for entry in audits["channels"]]
    return lines


def _scenarios_markdown(found: list[dict[str, Any]]) -> list[str]:
    lines = ["## Scenarios", "", "What an `[[attack]]` table's `scenario` can name, per defense, with the messages "
             "it must hear.", "", "| defense | scenario | message kinds | needs |", "| --- | --- | --- | --- |"]
    lines += [f"| {_code(entry['defense'])} | {_code(entry['scenario'])} | {_names(entry['kinds'])} | "
              f"{_cell(entry['needs'])} |" for entry in found]
    return lines


def _threats_markdown(found: list[dict[str, Any]]) -> list[str]:
    lines = ["## Threat models", "", "`threat = \"...\"` in `[[attack]]`, `[[membership]]` and `[[audit]]` tables."]
    for entry in found:
        lines += ["", f"### `{entry['name']}`", "", f"`{entry['name']}` {entry['description']}"]
        if entry["fields"]:
            lines += ["", *_field_table(entry["fields"])]
        if "defenses" in entry:
            lines += ["", f"Modelled for: {_names(entry['defenses'])}."]
    return lines


def _topologies_markdown(found: dict[str, Any]) -> list[str]:
    lines = ["## Topologies", "", "`topology = \"...\"` in a `[[defense]]` table.", "", "| topology | fewest agents |",
             "| --- | --- |"]
    lines += [f"| {_code(entry['name'])} | {entry['min_agents'] or '—'} |" for entry in found["topologies"]]
    return lines + ["", f"Mixing rules (`mixing`): {_names(found['mixing'])}."]


def _models_markdown(found: list[dict[str, Any]]) -> list[str]:
    lines = ["## Models", "", "`model = \"...\"` and `model_options = {...}` in a `[[defense]]` table: a name below, "
             "`\"torchvision:NAME\"` (a torchvision classification architecture, without weights, BatchNorm "
             "replaced by GroupNorm), or a factory of your own, `\"package.module:factory\"` (with `--allow-code`; "
             "docs/extending.md, \"Your model\").", "",
             "| model | description | options (`model_options`) |", "| --- | --- | --- |"]
    for entry in found:
        options = ", ".join(_code(f"{option['name']} = {_value(option['default'])}") for option in entry["options"])
        lines.append(f"| {_code(entry['name'])} | {_cell(entry['description'])} | {options or '—'} |")
    return lines


def _datasets_markdown(found: dict[str, Any]) -> list[str]:
    return ["## Datasets", "", f"Images (`dataset`): {_names(found['images'])}.", "",
            f"Synthetic problems, generated per agent: {_names(found['synthetic'])}.", "",
            f"Partitions (`partition`): {_names(found['partitions'])}.", "", "Fields of the `[data]` table:", "",
            *_field_table(found["table"])]


_MARKDOWN = {"defenses": _defenses_markdown, "attacks": _attacks_markdown, "scenarios": _scenarios_markdown,
             "threats": _threats_markdown, "topologies": _topologies_markdown, "models": _models_markdown,
             "datasets": _datasets_markdown}


def catalogue_markdown(found: dict[str, Any]) -> str:
    """`catalogue`'s data as a Markdown page: the same entries as `catalogue_text`, with tables
    for the fields. Over every category it is the committed campaign reference,
    docs/reference.md (`MARKDOWN_COMMAND` writes it)."""
    head = ["# Campaign reference", "",
            "Everything a campaign file can name, with each field's type, bounds and default. This page is "
            "generated from the registries `privaudit run` validates campaigns against (the same data as "
            "`privaudit list`); do not edit it by hand. To regenerate it:", "", "```sh", MARKDOWN_COMMAND, "```"]
    titles = [_MARKDOWN[name](value)[0].removeprefix("## ") for name, value in found.items()]
    if len(titles) > 1:
        head += ["", "Sections: " + " · ".join(f"[{title}](#{title.lower().replace(' ', '-')})" for title in titles)
                 + "."]
    sections = ["\n".join(_MARKDOWN[name](value)) for name, value in found.items()]
    return "\n\n".join(["\n".join(head), *sections])
