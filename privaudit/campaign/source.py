"""A campaign's source: the plain data a campaign must be, and the TOML text it is kept as.

A campaign file parses to plain data: tables (str-keyed dicts), arrays, strings, numbers, booleans
and dates. A campaign given from Python (`privaudit.load_campaign({...})`) must be the same: its
input is copied into that shape first (`plain`), so no container of another type (a generator
read once by validation, a deque, a mapping proxy), no cycle and no nesting deeper than any
campaign needs reaches the schema, and the copy is what is validated and kept. The kept copy is
TOML (`toml_text`), the same file a user would have written, so a results folder's
`campaign.toml` always says what was run, however the campaign was given.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from privaudit.errors import ConfigError

MAX_DEPTH = 32
"""The deepest nesting of tables and arrays a campaign may have (the shipped ones reach 4: an
audit's attackers, a list of lists, inside an array of tables)."""

_INTEGER_BITS = 13_000
"""Integers past about 3,900 digits are refused: Python will not print one of 4,300 digits, so its
error could not quote it."""
_SCALARS = (str, bool, int, float, datetime.datetime, datetime.date, datetime.time)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def plain(raw: Any, source: str = "campaign") -> dict[str, Any]:
    """`raw` copied as plain TOML data: mappings as dicts (string keys), lists and tuples as lists,
    scalars as they are; ConfigError (one line, naming the place) for anything else, a cycle, a
    non-finite number, text that is not Unicode, or nesting deeper than `MAX_DEPTH`."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: a campaign is a table (a dict), got a {type(raw).__name__}")
    return _plain(raw, (), source, set())


def _plain(value: Any, place: tuple[Any, ...], source: str, holding: set[int]) -> Any:
    if isinstance(value, _SCALARS):
        return _scalar(value, place, source)
    if not isinstance(value, (Mapping, list, tuple)):
        raise ConfigError(f"{source}: {_where(place)}: a {type(value).__name__} is not campaign data (give tables, "
                          "lists, strings, numbers, booleans and dates, as a TOML file holds)")
    if len(place) >= MAX_DEPTH:
        raise ConfigError(f"{source}: {_where(place)}: nested more than {MAX_DEPTH} levels deep")
    if id(value) in holding:
        raise ConfigError(f"{source}: {_where(place)}: holds itself (a cycle)")
    holding.add(id(value))
    try:
        if isinstance(value, Mapping):
            copied = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ConfigError(f"{source}: {_where(place)}: key {key!r} is not a string")
                copied[_scalar(key, place, source)] = _plain(item, place + (key,), source, holding)
            return copied
        return [_plain(item, place + (index,), source, holding) for index, item in enumerate(value)]
    finally:
        holding.discard(id(value))


def _scalar(value: Any, place: tuple[Any, ...], source: str) -> Any:
    """A scalar checked: a finite float, an integer Python can print (no field takes one of even
    20 digits: each is checked against its limit), text that UTF-8 can hold (no lone surrogate)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > _INTEGER_BITS:
        raise ConfigError(f"{source}: {_where(place)}: an integer of more than 3,900 digits")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{source}: {_where(place)}: must be a finite number, got {value}")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{source}: {_where(place)}: text holds a lone surrogate, not Unicode text") from None
    return value


def _where(place: tuple[Any, ...]) -> str:
    text = ""
    for part in place:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "campaign"


def toml_text(data: dict[str, Any], header: str = "") -> str:
    """`data` (plain, as `plain` returns) as a TOML document that parses back to it: its top-level
    values first, then each table as `[name]` and each array of tables as `[[name]]`, whatever is
    nested deeper inline. `header` is a comment put first."""
    lines = [f"# {line}" for line in header.splitlines()]
    tables = {key: value for key, value in data.items() if _is_table(value) or _is_tables(value)}
    lines += [f"{_key(key)} = {_value(value)}" for key, value in data.items() if key not in tables]
    for key, value in tables.items():
        for table in [value] if isinstance(value, dict) else value:
            lines += ["", f"[{_key(key)}]" if isinstance(value, dict) else f"[[{_key(key)}]]"]
            lines += [f"{_key(inner)} = {_value(item)}" for inner, item in table.items()]
    return "\n".join(lines) + "\n"


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


def _is_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(key)} = {_value(item)}" for key, item in value.items()) + "}"
    return "[" + ", ".join(_value(item) for item in value) + "]"


def _string(text: str) -> str:
    """A TOML basic string: quotes and backslashes escaped, every control character (and DEL) as
    a \\u escape, which TOML requires; the rest as UTF-8."""
    escaped = json.dumps(text, ensure_ascii=False)
    return escaped.replace("\x7f", "\\u007f")
