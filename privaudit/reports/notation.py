"""Mathematical notation in the report: the papers' formulas as the defenses write them (LaTeX-like
`y_{i,1}`, `Σ_{j∈N_i}`, `x_i^{k+1}`) drawn as a reader expects them, and numbers that a line break
never splits.

The defenses keep their claims' equations in that plain-text form because it is what the rows, the
terminal and `report --format json` carry. The page shows subscripts and superscripts as HTML
(`<sub>`, `<sup>`), the figures as Unicode where a character has a sub- or superscript form, and
every number with an exponent (`1e-05`) inside one unbreakable span, since a browser may break a line
after its hyphen. A long run without spaces (a path, a formula written without them) may break after
its punctuation; only a piece without any (a hash) may break anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from markupsafe import Markup, escape

from privaudit.errors import printable

_BRACED = re.compile(r"([_^])\{([^{}]*)\}")
"""`_{...}` or `^{...}`: a group written out (one holding no brace: the innermost are replaced first)."""
_INDEX = r"(?:[^\W_]+(?:\.\d+)?|∞)"
_SINGLE = re.compile(rf"((?<![\w\\])[^\W\d_]|[)‖|])((?:[_^]{_INDEX})+)(?![\w])")
"""`x_i`, `w_ii`, `g_i^k`, `(k+1)^0.3`, `‖x‖_∞`: one symbol (a single letter, a closing bracket or a
norm bar) carrying one index or a chain of them. A word before the underscore (`cross_gradient`) is
an identifier and left alone."""
_CHAIN = re.compile(rf"([_^])({_INDEX})")
_EXPONENT_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?e[-+]\d+)")
"""A number in scientific notation, as `_number` and Python print it: `1e-05`, `2.981e-06`."""

LONG_RUN = 16
"""Characters without a space from which a run gets line-break opportunities after its punctuation
(`a/b`, `k=1,`): a table column is then as wide as its longest piece, not as its longest run,
and no word or number inside the run is split."""
UNBREAKABLE = 24
"""Characters without a space or a break opportunity beyond which a piece is no word or number a
reader reads (a hash, a pasted blob): the page may break it anywhere, the one place a break falls
inside a token, and the browser check exempts it (`.long`)."""
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{LONG_RUN},}}")
_BREAK = re.compile(r"(?:(?<=[/=:;|+)])|(?<=,)(?!\d))(?=[^\s_^])|(?<=\S)(?=\()")
"""A break opportunity in a long run: after its punctuation (a comma before a digit, inside a number,
excepted) unless an index follows, and before an opening bracket. An empty match, so it is
replaced by a fixed text, without a template to expand at each of a long run's many breaks."""
_WBR, _LONG_OPEN, _LONG_CLOSE = "\ue000", "\ue001", "\ue002"
"""Where `_breakable` marks a break opportunity and a `.long` span in text not yet escaped: private-use
characters, which text reaching `_breakable` cannot hold (`printable` has written each as its
escape), replaced by the markup once the text is escaped."""
_UNBREAKABLE = re.compile(rf"([^\s/=:;|+),(\ue000]{{{UNBREAKABLE},}})")
_MARKUP = {_WBR: "<wbr>", _LONG_OPEN: '<span class="long">', _LONG_CLOSE: "</span>"}
PAGE_ALLOWED = "\n\r\t"
"""The characters `printable` leaves in text for the page: a line break or a tab is white space to a
browser (the campaign file, a description keep theirs); every other control or invisible character
is shown as its escape."""


def _breakable(match: re.Match[str]) -> str:
    """One long run of text not yet escaped with a break opportunity after its punctuation and
    before an opening bracket, its pieces that are still too long marked as `.long` (`_WBR`, …)."""
    return _UNBREAKABLE.sub(_LONG_OPEN + r"\1" + _LONG_CLOSE, _BREAK.sub(_WBR, match.group(0)))


def _escaped_with_breaks(text: str) -> str:
    """`text` escaped, its long runs given `<wbr>` and `.long` spans. The runs are found and cut in
    the text before it is escaped, so a break or a span's end never falls inside an entity (a
    label ending in a quote gave `&#34</span>;`), and a run's length counts the characters a
    reader sees, not their entities."""
    marked = str(escape(_LONG_RUN.sub(_breakable, text)))
    for mark, markup in _MARKUP.items():
        marked = marked.replace(mark, markup)
    return marked


_SUBSCRIPTS = dict(zip("0123456789+-−=()aehijklmnoprstuvxβγρφχ", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓᵦᵧᵨᵩᵪ"))
_SUPERSCRIPTS = dict(zip("0123456789+-−=()abcdefghijklmnoprstuvwxyzABDEGHIJKLMNOPRTUVWβγδθιφχ",
                         "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻᴬᴮᴰᴱᴳᴴᴵᴶᴷᴸᴹᴺᴼᴾᴿᵀᵁⱽᵂᵝᵞᵟᶿᶥᵠᵡ"))


def _script(kind: str, body: str) -> str | None:
    """`body` in Unicode sub- or superscript characters (a comma kept as it is), or None when one
    of its characters has no such form."""
    table = _SUBSCRIPTS if kind == "_" else _SUPERSCRIPTS
    if not all(char in table or char == "," for char in body):
        return None
    return "".join(table.get(char, char) for char in body)


def _singles(text: str, write: Callable[[str, str], str]) -> str:
    """`text` with each single-symbol index chain written by `write(kind, index)`; a chain with two
    indices of one kind (`a_b_c`) is an identifier, not an index, and left alone."""

    def replace(match: re.Match[str]) -> str:
        chain = _CHAIN.findall(match.group(2))
        kinds = [kind for kind, _ in chain]
        if len(kinds) != len(set(kinds)):
            return match.group(0)
        return match.group(1) + "".join(write(kind, index) for kind, index in chain)

    return _SINGLE.sub(replace, text)


NESTING = 8
"""Levels of braced groups written as indices (a paper's formula nests two or three); deeper ones stay
as typed. Each level is one pass over the text, so a results row's label of 100,000 nested groups
costs eight passes, not 100,000."""


def _groups(text: str, write: Callable[[re.Match[str]], str]) -> str:
    """`text` with each braced group written by `write`, innermost first (a group holds no brace
    when it is replaced), at most `NESTING` levels deep."""
    for _ in range(NESTING):
        written = _BRACED.sub(write, text)
        if written == text:
            break
        text = written
    return text


def _unicode_index(kind: str, index: str) -> str:
    return _script(kind, index) or kind + index


def _unicode_singles(text: str) -> str:
    return _singles(text, _unicode_index)


def unicode_text(text: str) -> str:
    """`text` with every index written in Unicode sub- and superscripts where each of its characters
    has one (`y_{i,1}` → `yᵢ,₁`, `x_i^k` → `xᵢᵏ`); an index with a character that has none keeps its
    plain form without braces (`Σ_{j∈N_i}` → `Σ_(j∈Nᵢ)`), which reads as text, not as LaTeX. For
    figures and other places without markup."""
    text = _groups(text, lambda m: _script(m.group(1), _unicode_singles(m.group(2)))
                   or f"{m.group(1)}({_unicode_singles(m.group(2))})")
    return _unicode_singles(text)


_TAGS = {"_": "sub", "^": "sup"}


def _html_index(kind: str, index: str) -> str:
    return f"<{_TAGS[kind]}>{index}</{_TAGS[kind]}>"


def _html_scripts(escaped: str) -> str:
    """Escaped text with its indices as `<sub>`/`<sup>` elements (braced groups, innermost first,
    then single-symbol indices)."""
    escaped = _groups(escaped, lambda m: _html_index(m.group(1), _singles(m.group(2), _html_index)))
    return _singles(escaped, _html_index)


NOTATION = 10_000
"""Characters of a text beyond which the page shows it escaped and breakable anywhere (`.long`), without
indices or break opportunities: no formula, sentence or label is that long (a campaign's label is at
most 200), while a results row written by hand may hold a label of 300,000 characters, which the
notation's passes took a second over at each of the places the page shows it."""


class Verbatim(Markup):
    """Escaped text to be shown exactly as written (a campaign file, a cell id, an attribute value)."""


def verbatim(value: Any) -> Verbatim:
    """`value` escaped and nothing else but its unsafe characters written as escapes (`printable`):
    the template marks attribute values, code and the campaign file with it, where an index or a
    span would change what is written."""
    return Verbatim(printable(str(escape(value)), PAGE_ALLOWED))


def html_text(value: Any) -> Markup:
    """`value` as the page shows it (the template environment's `finalize`, so every `{{ … }}` gets
    it): its unsafe characters written as escapes (`printable`: a bidi override or a zero-width
    space is seen, not obeyed), escaped, its long runs breakable, its indices as sub- and
    superscripts, each number in scientific notation unbreakable; a text longer than `NOTATION`
    only escaped and breakable anywhere. `Verbatim` text passes unchanged; other Markup reaching
    here is text Jinja escaped itself (its `join` filter), which holds no tag: it is read back as
    text, so its long runs are cut where its characters are, not inside their entities."""
    if isinstance(value, Verbatim):
        return value
    text = printable(value.unescape() if isinstance(value, Markup) else "" if value is None else str(value),
                     PAGE_ALLOWED)
    if len(text) > NOTATION:
        return Markup(f'<span class="long">{escape(text)}</span>')
    text = _html_scripts(_escaped_with_breaks(text))
    return Markup(_EXPONENT_NUMBER.sub(r'<span class="nb">\1</span>', text))
