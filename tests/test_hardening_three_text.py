"""Issue 35 (hardening, round three), the text items: one sanitiser (`privaudit.errors.printable`) for
every text that reaches a terminal, the page or a figure, and the rules for labels — printed text
(no control, bidi, zero-width, private-use or unassigned character), not blank, at most `MAX_LABEL`
characters, one label whatever its Unicode normal form — with a report that stays whole and quick
on a label of any length written into a results folder by hand."""

import io
import json
import re
import shutil
import time
import unicodedata
import warnings

import pytest
from markupsafe import escape

from privaudit.campaign.cells import expand, expand_all
from privaudit.campaign.config import MAX_LABEL, parse_campaign, read_campaign
from privaudit.cli import main
from privaudit.errors import ConfigError, escaped, printable, unsafe_character
from privaudit.progress import Progress
from privaudit.reports.figures import DRAWN, audit_curve, plain
from privaudit.reports.notation import html_text, verbatim
from privaudit.reports.summary import summary_table
from tests.demo_rows import STORED
from tests.helpers import one_line_error, without_notation

UNSAFE = {
    "ESC": "\x1b", "DEL": "\x7f", "C1 NEL": "\x85", "right-to-left override": "\u202e",
    "left-to-right embedding": "\u202a", "first strong isolate": "\u2068", "left-to-right mark": "\u200e",
    "right-to-left mark": "\u200f", "Arabic letter mark": "\u061c", "zero-width space": "\u200b",
    "zero-width joiner": "\u200d", "word joiner": "\u2060", "byte order mark": "\ufeff",
    "noncharacter FDD0": "\ufdd0", "noncharacter FFFF": "\uffff", "noncharacter 1FFFE": "\U0001fffe",
    "surrogate": "\ud800", "private use": "\ue000", "unassigned": "\u0378", "line separator": "\u2028",
    "paragraph separator": "\u2029",
}
"""One character of each kind a terminal or a page does not show as itself."""
SHOWN = "\x1b[2J\x1b[31m\u202eevil\u200b\uffff"
"""A label that clears a terminal, turns it red, reverses what follows and hides two characters."""
RAW = ("\x1b", "\u202e", "\u200b", "\uffff")


def _raw_in(text: str) -> list[str]:
    return [char for char in RAW if char in text]


def _campaign(**tables) -> str:
    body = '[campaign]\nname = "c"\n[data]\ndataset = "digits"\nmax_train = 100\n'
    for name, lines in tables.items():
        for table in lines:
            body += f"[[{name}]]\n{table}\n"
    return body


def _check(tmp_path, capsys, text: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    return one_line_error(capsys, ["check", str(path)])


def _labelled(table: str, label: str) -> str:
    """A small campaign whose `table` (its first) carries `label`, written as a TOML string."""
    fields = {"defense": 'kind = "dpsgd"\nbatch_size = 4', "attack": 'kind = "dlg"\nrounds = [0]',
              "membership": 'target = "average"', "audit": 'kind = "mechanism"\nmechanism = "ternary"'}
    tables = {"defense": [fields["defense"]]}
    tables[table] = [f"{fields[table]}\nlabel = {json.dumps(label)}"]  # TOML reads JSON's \\uXXXX escapes
    return _campaign(**tables)


@pytest.fixture(scope="module")
def results(tiny_results):
    return tiny_results


def _relabelled(results, folder, label: str):
    """A copy of the tiny run's folder whose rows all carry `label`, as a hand would write them."""
    shutil.copytree(results, folder)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    (folder / "results.jsonl").write_text("".join(json.dumps(row | {"label": label}) + "\n" for row in rows))
    (folder / "report.html").unlink()
    return folder


# 5. Terminal escapes, bidi and invisible characters: one sanitiser, and the schema refuses them


@pytest.mark.parametrize("kind", UNSAFE)
def test_the_sanitiser_writes_every_unsafe_character_as_its_escape(kind):
    char = UNSAFE[kind]
    shown = printable(f"a{char}b")
    assert shown == f"a{escaped(char)}b" and unsafe_character(shown) is None
    assert html_text(f"a{char}b") == f"a{escaped(char)}b" and verbatim(f"a{char}b") == f"a{escaped(char)}b"
    assert char not in plain(f"a{char}b")


def test_the_sanitiser_keeps_printable_text_and_what_the_page_allows():
    text = "ε_LB ≥ 0.5 · DP-SGD (é, ü, 中文) a\u00a0b"
    assert printable(text) == text
    assert printable("a\n\tb") == "a\\n\\tb" and printable("a\n\tb", "\n\t") == "a\n\tb"
    assert verbatim("x = 1\r\ny = 2\n\t") == "x = 1\r\ny = 2\n\t"  # a campaign file keeps its lines


@pytest.mark.parametrize("kind", ["right-to-left override", "zero-width space", "noncharacter FFFF",
                                  "first strong isolate", "byte order mark", "line separator", "private use"])
@pytest.mark.parametrize("table", ["defense", "attack", "membership", "audit"])
def test_a_label_with_an_unsafe_character_is_refused_at_check(tmp_path, capsys, kind, table):
    err = _check(tmp_path, capsys, _labelled(table, f"a{UNSAFE[kind]}b"))
    assert f"{table}[0].label: contains the " in err and escaped(UNSAFE[kind]) in err
    assert UNSAFE[kind] not in err


def test_a_description_keeps_lines_and_tabs_but_refuses_a_bidi_override(tmp_path, capsys):
    text = _campaign(defense=['kind = "dpsgd"\nbatch_size = 4'])
    err = _check(tmp_path, capsys, text.replace('name = "c"', 'name = "c"\ndescription = "a\\u202eb"'))
    assert "campaign.description: contains the invisible format character '\\u202e'" in err
    campaign = parse_campaign({"campaign": {"description": "line one\n\tline two"}, "defense": [{"kind": "dpsgd"}]})
    assert campaign.campaign.description == "line one\n\tline two"


def test_a_label_in_a_row_never_reaches_the_terminal_raw_in_runs_table_or_the_page(results, tmp_path, capsys):
    """`run` ends with the verdicts of every row in its folder, a hand-written one included: the
    table and the report show the label's escapes, never the characters."""
    folder = _relabelled(results, tmp_path / "hostile", SHOWN)
    assert main(["run", str(results.parent / "c.toml"), "--out", str(folder), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert not _raw_in(out) and "\\x1b[2J\\x1b[31m\\u202eevil\\u200b\\uffff" in out
    page = (folder / "report.html").read_text()
    assert not _raw_in(page) and "\\u202eevil" in page


def test_the_summary_table_escapes_what_rows_hold():
    record = {"subject": SHOWN, "eps_claimed": "1", "eps_sound": "2", "eps_lb": None, "bound": None,
              "eps_estimate": None, "status": "consistent", "findings": ["premise\u202e"]}
    table = summary_table({"verdicts": [record]})
    assert not _raw_in(table) and "\\u202eevil" in table and "premise\\u202e" in table


def test_a_progress_line_escapes_its_label():
    stream = io.StringIO()
    progress = Progress(f"{SHOWN} seed 0", 10, every=0.0, stream=stream)
    progress.update(1)
    assert stream.getvalue() and not _raw_in(stream.getvalue()) and "\\u202eevil" in stream.getvalue()


def test_a_figure_draws_escapes_and_matplotlib_never_warns_with_a_raw_character():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        uri = audit_curve([(100.0, 0.5), (1000.0, 0.7)], {}, "ε", f"{SHOWN} \u4e2d")
    assert uri.startswith("data:image/png;base64,")
    assert [str(w.message) for w in caught if unsafe_character(str(w.message))] == []
    assert not _raw_in(plain(SHOWN)) and plain(SHOWN).startswith("\\x1b[2J")


# 15. Label length: bounded in the schema, and a report of any length of label in a row


def test_a_label_is_at_most_max_label_characters_but_a_grid_variants_label_may_be_longer(tmp_path, capsys):
    assert MAX_LABEL == 200
    name = "x" * MAX_LABEL
    campaign = parse_campaign({"defense": [{"kind": "dpsgd", "label": name, "grid": {"lr": [0.1, 0.2]}}]})
    assert [run.label for run in campaign.defense[0].variants()] == [f"{name} (lr=0.1)", f"{name} (lr=0.2)"]
    for length in (MAX_LABEL + 1, 300_000):
        started = time.perf_counter()
        err = _check(tmp_path, capsys, _labelled("defense", "x" * length))
        assert f"defense[0].label: is {length:,} characters long; a label is a name of at most 200" in err
        assert time.perf_counter() - started < 10


def test_a_figure_draws_a_long_label_cut_with_an_ellipsis():
    drawn = plain("x" * 300_000)
    assert len(drawn) == DRAWN and drawn.endswith("…")
    assert plain("x" * 300_000, 44) == "x" * 43 + "…"


def test_report_on_a_row_with_a_300000_character_label_is_whole_and_quick(results, tmp_path, capsys):
    label = "x" * 299_999 + '"'
    folder = _relabelled(results, tmp_path / "long", label)
    started = time.perf_counter()
    assert main(["report", str(folder)]) == 0
    assert time.perf_counter() - started < 30  # 3 minutes and 5.8 MB of page before; about 1 s now
    assert "Traceback" not in capsys.readouterr().err
    page = (folder / "report.html").read_text()
    assert str(escape(label)) in page  # the page shows it whole
    assert page.count('src="data:image/png;base64,') >= 2  # the figures drew it, cut


@pytest.mark.parametrize("shape", ["\u202e" * 300_000, "(a)" * 100_000, "a_{" * 100_000 + "}" * 100_000,
                                   "a/" * 150_000, "1e-5 " * 60_000])
def test_the_page_shows_a_text_of_any_shape_in_a_moment(shape):
    started = time.perf_counter()
    shown = html_text(shape)
    assert time.perf_counter() - started < 2
    assert without_notation(str(shown)) == str(escape(printable(shape, "\n\r\t")))


# 25. The long-text span never cuts an entity


@pytest.mark.parametrize("last", ['"', "'", "&", "<", ">"])
@pytest.mark.parametrize("length", [5, 20, 40])
def test_a_label_ending_in_a_character_the_page_escapes_keeps_its_entity_whole(last, length):
    label = "a" * length + last
    shown = html_text(label)
    assert re.findall(r"&(?!(?:#\d+|[a-z]+);)", shown) == [], shown
    assert without_notation(str(shown)) == str(escape(label))


def test_a_long_run_breaks_after_a_quote_only_where_the_text_has_punctuation():
    assert html_text('path/"to"/file_with_a_long_name') == 'path/<wbr>&#34;to&#34;/<wbr>file_with_a_long_name'


# 28. Blank labels; one label whatever its normal form


@pytest.mark.parametrize("label", ["", " ", "\t "])
@pytest.mark.parametrize("table", ["defense", "attack", "membership", "audit"])
def test_an_empty_or_blank_label_is_refused_at_check(tmp_path, capsys, label, table):
    err = _check(tmp_path, capsys, _labelled(table, label))
    assert f"{table}[0].label: {label!r} is blank" in err


NFC, NFD = "r\u00e9seau", "re\u0301seau"


@pytest.mark.parametrize("label, named", [(NFD, NFC), (NFC, NFD)])
def test_a_label_and_its_reference_match_whatever_their_normal_form(label, named):
    assert NFC != NFD and unicodedata.normalize("NFC", NFD) == NFC
    campaign = parse_campaign({"data": {"dataset": "digits"},
                               "defense": [{"kind": "dp_dpsgd", "label": label}, {"kind": "dpsgd"}],
                               "membership": [{"target": "average", "defense": [named]}],
                               "audit": [{"kind": "canary", "defense": [named]}]})
    assert campaign.defense[0].label == NFC and campaign.membership[0].defense == [NFC]
    assert campaign.membership_targets(0) == [0] and campaign.audit_targets(0) == [0]


def test_two_tables_whose_labels_differ_only_in_normal_form_are_a_repeat():
    campaign = parse_campaign({"data": {"dataset": "digits"}, "defense": [{"kind": "dpsgd", "label": NFC},
                                                                          {"kind": "dpsgd", "label": NFD}]})
    with pytest.raises(ConfigError, match=r"defense\[1\] \(réseau, seed 0\): the same cell as defense\[0\]"):
        expand(campaign)


def test_the_demos_cell_ids_are_unchanged():
    """Labels are normalised to NFC, which leaves an ASCII label as it is: the demo's cells keep the
    ids its stored rows have."""
    campaign, _ = read_campaign(None)
    ids = sorted(cell.id for cells in expand_all(campaign) for cell in cells)
    stored = json.loads(STORED.read_text())["rows"]
    assert ids == sorted(row["cell"] for row in stored)
