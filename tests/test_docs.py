"""The user guide cannot drift from the code: docs/reference.md is what `privaudit list --format
markdown` prints now; every repository path, `privaudit` command line and PRIVAUDIT_ variable the
README and docs/ name exists; and the accountant behaviour docs/extending.md describes is the
accountant's."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import dp_accounting
import pytest

from privaudit.accounting import epsilon
from privaudit.campaign.catalogue import MARKDOWN_COMMAND
from privaudit.cli import build_parser, main
from privaudit.errors import UsageError
from privaudit.reports.gate import statuses

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
TOP = ("privaudit", "tests", "bench", "examples", "docs", ".ci")


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_committed_reference_is_what_the_registries_give_now():
    """In a fresh process, so that defenses other tests register in this one are not listed."""
    done = subprocess.run([sys.executable, "-m", "privaudit.cli", "list", "--format", "markdown"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    committed = (DOCS / "reference.md").read_text(encoding="utf-8")
    assert committed == done.stdout, ("docs/reference.md is not what the registries give now; regenerate it "
                                      f"from the repository root with:\n    {MARKDOWN_COMMAND}")


def test_list_prints_one_category_as_markdown_and_refuses_two_formats(capsys):
    assert main(["list", "threats", "--format", "markdown"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# Campaign reference") and "\n## Threat models\n" in printed
    assert "## Defenses" not in printed and "Sections:" not in printed
    assert main(["list", "--json", "--format", "markdown"]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "--format" in error


def test_the_reference_names_every_category_and_its_tables():
    text = (DOCS / "reference.md").read_text(encoding="utf-8")
    for heading in ("## Defenses", "## Attacks", "## Scenarios", "## Threat models", "## Topologies", "## Models",
                    "## Datasets", "### Fields of every `[[defense]]` table", "### Audits: `[[audit]]`"):
        assert f"\n{heading}\n" in text
    assert MARKDOWN_COMMAND in text


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_repository_path_named_exists(page: Path):
    text = page.read_text(encoding="utf-8")
    pattern = r"(?<![\w/.~-])((?:" + "|".join(re.escape(top) for top in TOP) + r")/[\w./-]*)"
    named = {path.rstrip(".") for path in re.findall(pattern, text)}
    placeholder = re.compile(r"/[A-Z]+(?=[./]|$)")  # bench/NAME.py
    missing = sorted(path for path in named if not placeholder.search(path) and not (ROOT / path).exists())
    assert not missing, f"{_name(page)} names paths that do not exist: {missing}"


def _command_lines(page: Path) -> list[list[str]]:
    """The `privaudit` command lines of the page's ```sh and ```yaml blocks, as the arguments after
    `privaudit`."""
    found = []
    for block in re.findall(r"^```(?:sh|yaml)\n(.*?)^```$", page.read_text(encoding="utf-8"), re.M | re.S):
        for line in block.splitlines():
            tokens = shlex.split(line, comments=True)
            start = next((k for k, token in enumerate(tokens) if token.endswith("privaudit")), None)
            if start is None:
                continue
            arguments = tokens[start + 1:]
            cut = next((k for k, token in enumerate(arguments) if token in (">", "|", "&&", ";")), len(arguments))
            found.append(arguments[:cut])
    return found


@pytest.mark.parametrize("page", [page for page in PAGES if _command_lines(page)], ids=_name)
def test_every_privaudit_command_line_shown_parses(page: Path, capsys):
    parser = build_parser()
    wrong = []
    for arguments in _command_lines(page):
        if arguments == ["--version"]:
            continue
        try:
            parsed = parser.parse_args(arguments)
            statuses(getattr(parsed, "fail_on", []))
        except (UsageError, SystemExit) as error:
            wrong.append(f"privaudit {' '.join(arguments)}: {error}")
    assert not wrong, f"{_name(page)}: " + "; ".join(wrong)


def test_every_privaudit_variable_named_is_read_by_the_code():
    code = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "privaudit").rglob("*.py"))
    named = {variable for page in PAGES for variable in re.findall(r"PRIVAUDIT_[A-Z_]+", page.read_text("utf-8"))}
    assert named and not sorted(variable for variable in named if variable not in code)


def test_replace_one_is_what_docs_extending_says():
    """docs/extending.md, "The claim and the mechanism": under the PLD accountant replace-one doubles
    a Gaussian's sensitivity (σ reads as σ/2 under add/remove); the RDP accountant gives a plain
    Gaussian the same ε under both relations and refuses a Poisson-sampled one under replace-one;
    the PLD accountant refuses Laplace under replace-one. If this changes, change the page too."""
    sigma, delta = 2.0, 1e-5
    gaussian = dp_accounting.GaussianDpEvent(sigma)
    assert epsilon(gaussian, delta, relation="replace_one") == pytest.approx(
        epsilon(dp_accounting.GaussianDpEvent(sigma / 2), delta), rel=1e-9)
    assert epsilon(gaussian, delta, relation="replace_one") > 2 * epsilon(gaussian, delta)
    assert epsilon(gaussian, delta, "rdp", relation="replace_one") == pytest.approx(epsilon(gaussian, delta, "rdp"))
    with pytest.raises(ValueError, match="does not support"):
        epsilon(dp_accounting.PoissonSampledDpEvent(0.1, gaussian), delta, "rdp", relation="replace_one")
    with pytest.raises(ValueError, match="does not support"):
        epsilon(dp_accounting.LaplaceDpEvent(1.0), delta, relation="replace_one")
    page = (DOCS / "extending.md").read_text(encoding="utf-8")
    assert 'relation="replace_one"' in page and "GaussianDpEvent(σ / 2)" in page
