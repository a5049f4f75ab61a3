"""What a campaign document may hold before its schema reads it, and how the schema reads it.

A campaign is a TOML file, or the dict a Python caller passes instead (`parse_campaign`). Before
any model sees it:

* **Its nesting is bounded in the text**, before the TOML parser runs (`too_deep`): dotted keys and
  table headers nest tables without a bracket (`model_options.a.a.…`, `[z.z.….z]`), and 1,000
  levels gave a RecursionError, 50,000 levels (100 KB) 3.4 GB inside the parser. A scan of TOML's
  structure (keys, headers, brackets, strings, comments) finds the depth in one pass.
* **Its values are TOML's** (`plain`): tables (any mapping, keys text), arrays (lists or tuples),
  text, booleans, 64-bit integers (TOML's range) and finite floats, nested at most `MAX_NESTING`
  deep, at most as many as a campaign file could hold; a self-referencing or 5,000-deep dict is one
  error, not a RecursionError. A Python caller may also give None (an optional field left to its
  default), and a path (`data_root = Path(...)`), which reads as its text.
* **It is validated strictly** (`strictly`): as the JSON document it is, with pydantic's strict
  mode, so every model reads numbers one way — no boolean for a number (`lr = true` ran at 1.0),
  no text for a number (`lr = "0.5"`), no float for an integer, an integer for a float as TOML
  means it — while arrays still fill tuples and text fills paths. The campaign's tables, each
  defense's `Params`, each attack's dataclass and each mechanism's `Params` all go through it.
* **It is kept as TOML** (`toml_text`): a campaign given as a dict is kept in its results folder as
  the campaign file it is equivalent to, so campaign.toml always says what was run.
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter

from privaudit.errors import ConfigError
from privaudit.files import CAMPAIGN_BYTES
from privaudit.limits import MAX_NESTING

TOML_INTEGERS = (-(2**63), 2**63 - 1)
"""TOML's integers are 64-bit signed: a parser must refuse what it cannot hold losslessly."""

MAX_VALUES = CAMPAIGN_BYTES // 2
"""Values a campaign dict may hold: as many as the largest campaign file could (each value and its
separator take 2 bytes at least), so a dict that shares one list many times over cannot make the
walk visit billions of values."""


class NotACampaignValue(Exception):
    """A value no campaign holds, at `loc` (the field path), and why."""

    def __init__(self, loc: tuple[Any, ...], why: str) -> None:
        super().__init__(why)
        self.loc, self.why = loc, why


_STRUCTURE = re.compile(r"""["'#\[\]{},=.\n]""")
_IN_ARRAY = re.compile(r"""["'#\[\]{}\n]""")
"""What changes the depth inside an array's values (its commas and numbers' dots do not): an
array of 10⁵ numbers is one search."""
_BASIC_END = re.compile(r'\\[\s\S]|"|\n')
_MULTILINE_BASIC_END = re.compile(r'\\[\s\S]|"""')


def too_deep(text: str) -> int | None:
    """The line of the first table or array of TOML `text` nested more than `MAX_NESTING` deep
    (a header's keys, a dotted key's parts and each bracket count one), or None. A scan, not a
    parse: what it cannot follow in a malformed file the parser refuses after it; on a valid file
    it counts no deeper than the document is."""
    return _Scan(text).deepest()


class _Scan:
    """One pass of `too_deep` over a TOML text: where it is (a line's start, a key, a value), the
    open brackets with the depth of each, and the depth of the current `[table]`."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1
        self.open: list[tuple[str, int]] = []
        self.table = 0
        self.state, self.base, self.parts, self.slot = "start", 0, 1, 0

    def deepest(self) -> int | None:
        while (found := self.pattern().search(self.text, self.pos)) is not None:
            self.pos = found.end()
            if self.step(found.group()):
                return self.line
        return None

    def pattern(self) -> re.Pattern[str]:
        in_array = self.state == "value" and self.open and self.open[-1][0] == "["
        return _IN_ARRAY if in_array else _STRUCTURE

    def step(self, char: str) -> bool:
        """Read one structural character; True when it opens something too deep."""
        if char == "\n":
            self.line += 1
            if not self.open:
                self.state, self.parts = "start", 1
            return False
        if char in "\"'":
            self.skip_string(char)
            return False
        if char == "#":
            end = self.text.find("\n", self.pos)
            self.pos = len(self.text) if end < 0 else end
            return False
        if self.state == "start" and char == "[":
            if self.text.startswith("[", self.pos):
                self.pos += 1
            self.state, self.parts = "header", 1
            return False
        if self.state in ("start", "key", "header"):
            return self.in_key(char)
        if self.state == "value":
            return self.in_value(char)
        return False

    def in_key(self, char: str) -> bool:
        if char == ".":
            self.parts += 1
            return self.parts > MAX_NESTING
        if char == "]" and self.state == "header":
            self.table, self.state = self.parts, "after"
            return False
        if char == "=":
            base = self.table if self.state == "start" else self.base
            self.state, self.slot = "value", base + self.parts
            return base + self.parts - 1 > MAX_NESTING
        if char == "}" and self.open:
            self.close()
        return False

    def in_value(self, char: str) -> bool:
        if char in "[{":
            self.open.append((char, self.slot))
            if char == "[":
                self.slot += 1
            else:
                self.state, self.base, self.parts = "key", self.slot, 1
            return self.open[-1][1] > MAX_NESTING
        if char in "]}" and self.open:
            self.close()
        elif char == "," and self.open:
            kind, depth = self.open[-1]
            if kind == "{":
                self.state, self.base, self.parts = "key", depth, 1
            else:
                self.slot = depth + 1
        return False

    def close(self) -> None:
        """A bracket closed: back in the value that held it (an array's next element, or the
        table's next key after a comma)."""
        self.open.pop()
        self.state = "value"
        if self.open and self.open[-1][0] == "[":
            self.slot = self.open[-1][1] + 1

    def skip_string(self, quote: str) -> None:
        """Move past the string whose opening `quote` was just read, counting its lines."""
        start = self.pos
        if self.text.startswith(quote * 2, self.pos):
            self.pos += 2
            end = self.multiline_end(quote)
        elif quote == "'":
            ends = [i for i in (self.text.find("'", self.pos), self.text.find("\n", self.pos)) if i >= 0]
            end = min(ends) + 1 if ends else len(self.text)
        else:
            found = _BASIC_END.search(self.text, self.pos)
            while found is not None and found.group().startswith("\\"):
                found = _BASIC_END.search(self.text, found.end())
            end = len(self.text) if found is None else found.end()
        self.line += self.text.count("\n", start, end - 1 if self.text[end - 1:end] == "\n" else end)
        self.pos = end - 1 if self.text[end - 1:end] == "\n" else end

    def multiline_end(self, quote: str) -> int:
        """Where a multi-line string that opened before `self.pos` ends (up to two more quotes
        after its closing three belong to it)."""
        if quote == "'":
            found = self.text.find("'''", self.pos)
            end = len(self.text) if found < 0 else found + 3
        else:
            match = _MULTILINE_BASIC_END.search(self.text, self.pos)
            while match is not None and match.group() != '"""':
                match = _MULTILINE_BASIC_END.search(self.text, match.end())
            end = len(self.text) if match is None else match.end()
        extra = 0
        while extra < 2 and self.text.startswith(quote, end):
            end, extra = end + 1, extra + 1
        return end


def plain(value: Any) -> Any:
    """`value` (a parsed TOML document, or the dict a Python caller passes) as plain JSON values:
    dicts, lists, text, booleans, integers, floats and None; NotACampaignValue for anything a campaign
    cannot hold (module docstring)."""
    return _Walk().plain(value, (), frozenset())


_SCALARS = frozenset((bool, str))
"""What needs no check (the common case, tested first: isinstance against numbers' ABCs is slow)."""


class _Walk:
    """One walk of `plain`, counting the values it has visited."""

    def __init__(self) -> None:
        self.visited = 0

    def plain(self, value: Any, loc: tuple[Any, ...], ancestors: frozenset[int]) -> Any:
        self.visited += 1
        if self.visited > MAX_VALUES:
            raise NotACampaignValue(loc, f"the campaign holds more than {MAX_VALUES:,} values, more than a campaign "
                                         f"file of {CAMPAIGN_BYTES // 2**20} MB could")
        if type(value) is str and not value.isascii():
            return _unicode(value, loc)
        if value is None or type(value) in _SCALARS:
            return value
        if isinstance(value, (int, float, numbers.Real)):
            return _number(value, loc)
        if isinstance(value, os.PathLike):
            return os.fsdecode(value)
        if isinstance(value, (Mapping, list, tuple)):
            return self.container(value, loc, ancestors)
        if isinstance(value, (datetime.date, datetime.time)):
            raise NotACampaignValue(loc, "a date or time, which no campaign field takes")
        raise NotACampaignValue(loc, f"not a campaign value: a {type(value).__name__} (a table is a mapping, an "
                                     "array a list or tuple, and values text, booleans or numbers)")

    def container(self, value: Mapping | list | tuple, loc: tuple[Any, ...], ancestors: frozenset[int]) -> Any:
        if id(value) in ancestors:
            raise NotACampaignValue(loc, "contains itself")
        if len(loc) > MAX_NESTING:
            raise NotACampaignValue(loc, f"tables and arrays nested too deeply (more than {MAX_NESTING} levels)")
        inside = ancestors | {id(value)}
        if not isinstance(value, Mapping):
            return [self.plain(item, loc + (index,), inside) for index, item in enumerate(value)]
        key = next((key for key in value if not isinstance(key, str)), None)
        if key is not None:
            raise NotACampaignValue(loc, f"a table's keys are text, got {key!r}")
        return {key: self.plain(item, loc + (key,), inside) for key, item in value.items()}


def _unicode(text: str, loc: tuple[Any, ...]) -> str:
    """`text` once UTF-8 can hold it (a Python string may carry a lone surrogate, which no file can)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotACampaignValue(loc, "text holding a lone surrogate, which is not Unicode text") from None
    return text


def _number(value: numbers.Real, loc: tuple[Any, ...]) -> int | float:
    """An integer within TOML's 64-bit range, or a finite float (numpy's numbers included)."""
    if isinstance(value, float) or not isinstance(value, (int, numbers.Integral)):
        if not math.isfinite(float(value)):
            raise NotACampaignValue(loc, f"must be a finite number, got {value}")
        return float(value)
    if not TOML_INTEGERS[0] <= value <= TOML_INTEGERS[1]:
        raise NotACampaignValue(loc, "an integer beyond TOML's 64-bit range (-2^63 to 2^63 - 1)")
    return int(value)


def strictly(schema: type[BaseModel] | TypeAdapter, value: Any, context: dict[str, Any] | None = None) -> Any:
    """`value`, part of a campaign document that `plain` has passed (or a dump of what validated
    it, where a path may stand for its text), validated by `schema` (a model or a TypeAdapter) as
    the JSON document it is, in pydantic's strict mode (module docstring), with the validation's
    `context` (the consent to import code); pydantic's ValidationError when it does not fit."""
    text = json.dumps(value, default=os.fspath)
    if isinstance(schema, TypeAdapter):
        return schema.validate_json(text, strict=True, context=context)
    return schema.model_validate_json(text, strict=True, context=context)


def toml_text(document: dict[str, Any], header: str = "") -> str:
    """`document` (as `plain` returns it) as a TOML file that parses back to it, a key whose value
    is None (a field left to its default) left out: the campaign file a campaign given as a dict is
    kept as, so a results folder's campaign.toml always says what was run. Its top-level values
    come first, then each table as `[name]` and each array of tables as `[[name]]`, whatever is
    nested deeper inline; `header` is a comment put first."""
    document = {key: value for key, value in document.items() if value is not None}
    lines = [f"# {line}" for line in header.splitlines()]
    tables = {key: value for key, value in document.items() if isinstance(value, dict) or _tables(value)}
    lines += [f"{_key(key)} = {_value(value)}" for key, value in document.items() if key not in tables]
    for key, value in tables.items():
        for table in [value] if isinstance(value, dict) else value:
            lines += ["", f"[{_key(key)}]" if isinstance(value, dict) else f"[[{_key(key)}]]"]
            lines += [f"{_key(inner)} = {_value(item)}" for inner, item in table.items() if item is not None]
    return "\n".join(lines) + "\n"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _tables(value: Any) -> bool:
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
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(key)} = {_value(item)}" for key, item in value.items() if item is not None) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise ConfigError(f"a campaign holding {value!r} inside an array cannot be kept as a TOML file"[:200])


def _string(text: str) -> str:
    """A TOML basic string: quotes and backslashes escaped, every control character (and DEL) as
    a \\u escape, which TOML requires; the rest as UTF-8."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
