"""The browser check's layout rules, each shown to fail on a page that breaks it: a word or number
split across two lines, a table wider than its container, a refuted verdict whose deciding ratio is
off the first screen; and a report with a refuted verdict passes them all."""

import shutil

import pytest

from privaudit.reports.browser_check import CheckFailed, check_report
from tests.test_report_verdicts import _render, rows  # noqa: F401 - the verdicts' rows fixture

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test-browser installs it)")


@pytest.fixture
def report(tmp_path, rows):  # noqa: F811 - the imported fixture
    _render(tmp_path, rows)
    return tmp_path / "report.html"


def _with_style(report, css: str):
    """The same page with one more style sheet (the page's policy allows inline styles)."""
    broken = report.with_name("broken.html")
    broken.write_text(report.read_text().replace("</head>", f"<style>{css}</style></head>", 1))
    return broken


def test_a_report_with_a_refuted_verdict_passes_with_its_ratio_on_the_first_screen(report):
    line = check_report(report, report.with_suffix(".png"), CHROMIUM)
    assert "no broken word or number" in line and "1 refuted verdict(s) with their ratio on the first screen" in line


def test_a_word_broken_inside_a_cell_fails(report):
    squeezed = _with_style(report, "td { overflow-wrap: anywhere; } table.verdicts td.status { width: 1px; }")
    with pytest.raises(CheckFailed, match="broken across lines"):
        check_report(squeezed, report.with_suffix(".png"), CHROMIUM)


def test_a_table_wider_than_its_container_fails(report):
    wide = _with_style(report, "#claims table { min-width: 1150px; }")
    with pytest.raises(CheckFailed, match="wider than their container"):
        check_report(wide, report.with_suffix(".png"), CHROMIUM)


def test_a_refuted_ratio_below_the_first_screen_fails(report):
    pushed = _with_style(report, 'li[data-status="refuted"] .ratio { display: block; margin-top: 900px; }')
    with pytest.raises(CheckFailed, match="deciding ratio is not on the first screen"):
        check_report(pushed, report.with_suffix(".png"), CHROMIUM)
