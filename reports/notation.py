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
(`a/b`, `k=1,`, `&lt;`): a table column is then as wide as its longest piece, not as its longest run,
and no word or number inside the run is split."""
UNBREAKABLE = 24
"""Characters without a space or a break opportunity beyond which a piece is no word or number a
reader reads (a hash, a pasted blob): the page may break it anywhere, the one place a break falls
inside a token, and the browser check exempts it (`.long`)."""
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{LONG_RUN},}}")
_BREAK_AFTER = re.compile(r"([/=:;|+)]|,(?!\d))(?=[^\s_^])")
_BREAK_BEFORE = re.compile(r"(?<=\S)(\()")
_UNBREAKABLE = re.compile(rf"([^\s/=:;|+),(]{{{UNBREAKABLE},}})")


def _breakable(match: re.Match[str]) -> str:
    """One long run with `<wbr>` after its punctuation and before an opening bracket, its pieces that
    are still too long in `.long` spans."""
    run = _BREAK_BEFORE.sub(r"<wbr>\1", _BREAK_AFTER.sub(r"\1<wbr>", match.group(0)))
    return _UNBREAKABLE.sub(r'<span class="long">\1</span>', run)


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


def _unicode_index(kind: str, index: str) -> str:
    return _script(kind, index) or kind + index


def _unicode_singles(text: str) -> str:
    return _singles(text, _unicode_index)


def unicode_text(text: str) -> str:
    """`text` with every index written in Unicode sub- and superscripts where each of its characters
    has one (`y_{i,1}` → `yᵢ,₁`, `x_i^k` → `xᵢᵏ`); an index with a character that has none keeps its
    plain form without braces (`Σ_{j∈N_i}` → `Σ_(j∈Nᵢ)`), which reads as text, not as LaTeX. For
    figures and other places without markup."""
    previous = None
    while previous != text:  # innermost groups first: a group holds no brace when it is replaced
        previous = text
        text = _BRACED.sub(lambda m: _script(m.group(1), _unicode_singles(m.group(2)))
                           or f"{m.group(1)}({_unicode_singles(m.group(2))})", text)
    return _unicode_singles(text)


_TAGS = {"_": "sub", "^": "sup"}


def _html_index(kind: str, index: str) -> str:
    return f"<{_TAGS[kind]}>{index}</{_TAGS[kind]}>"


def _html_scripts(escaped: str) -> str:
    """Escaped text with its indices as `<sub>`/`<sup>` elements (braced groups, innermost first,
    then single-symbol indices)."""
    previous = None
    while previous != escaped:
        previous = escaped
        escaped = _BRACED.sub(lambda m: _html_index(m.group(1), _singles(m.group(2), _html_index)), escaped)
    return _singles(escaped, _html_index)


class Verbatim(Markup):
    """Escaped text to be shown exactly as written (a campaign file, a cell id, an attribute value)."""


def verbatim(value: Any) -> Verbatim:
    """`value` escaped and nothing else: the template marks attribute values, code and the campaign
    file with it, where an index or a span would change what is written."""
    return Verbatim(escape(value))


def html_text(value: Any) -> Markup:
    """`value` as the page shows it (the template environment's `finalize`, so every `{{ … }}` gets
    it): escaped, its indices as sub- and superscripts, each number in scientific notation
    unbreakable. `Verbatim` text passes unchanged; other Markup reaching here is text Jinja escaped
    itself (its `join` filter), which holds no tag."""
    if isinstance(value, Verbatim):
        return value
    text = str(value) if isinstance(value, Markup) else str(escape("" if value is None else value))
    text = _html_scripts(_LONG_RUN.sub(_breakable, text))
    return Markup(_EXPONENT_NUMBER.sub(r'<span class="nb">\1</span>', text))
