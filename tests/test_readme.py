"""The README cannot go stale: its recipe "Audit a claim in three steps" runs as written, and the
output it shows still appears; the README stays short; no relative link in it or in docs/ points
nowhere.

The recipe's steps are the fenced ```sh blocks of that section, one command each, with its exit
status in a trailing comment (`# exit status N`), each followed by a ```text block of what it
prints. A line "…" in the output leaves out any number of lines; a "…" inside a line stands for
any text there (a time, an absolute path). A number shown matches a number printed within
`NUMBER_TOLERANCE` of it: the audit's bound is a count of Monte-Carlo runs past a threshold, and
CPUs whose vector units round the sampled noise differently move that count, and so the bound, by a
little (the quickstart's ε_LB is 0.4546 on the machine that wrote the README and 0.4057 on another
of the same kind, same torch, same seed); a change that moves a number further, or any word, makes
the README stale and fails. The commands run verbatim, in a temporary folder that
holds a copy of the presets (`privaudit/presets/`) and the repository's `.venv`, so they write nothing outside it; the
audit runs on the CPU (`PRIVAUDIT_DEVICE=cpu`, as the README says its numbers are).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RECIPE = "## Audit a claim in three steps"
MAX_LINES = 150
ELIDED = "…"
NUMBER_TOLERANCE = 0.2
"""How far, relative to the number shown, a printed number may be."""
_NUMBER = r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"


def _blocks(section: str) -> list[tuple[str, str]]:
    """The fenced blocks of `section`, as (language, body)."""
    return [(language, body) for language, body in re.findall(r"^```(\w*)\n(.*?)^```$", section, re.M | re.S)]


def recipe_steps() -> list[tuple[str, int, list[str]]]:
    """(command, exit status, output lines shown) of each step of the README's recipe."""
    text = README.read_text(encoding="utf-8")
    assert RECIPE in text, f"README.md has no heading {RECIPE!r}"
    section = text.split(RECIPE, 1)[1].split("\n## ", 1)[0]
    blocks = _blocks(section)
    steps = []
    for (language, body), after in zip(blocks, blocks[1:] + [("", "")]):
        if language != "sh":
            continue
        (command,) = body.strip().splitlines()
        status = re.search(r"#\s*exit status (\d+)\s*$", command)
        assert status, f"README recipe: {command!r} does not say its exit status ('# exit status N')"
        assert after[0] == "text", f"README recipe: {command!r} is not followed by a ```text block of its output"
        steps.append((command, int(status.group(1)), after[1].splitlines()))
    return steps


def _pattern(line: str) -> tuple[re.Pattern[str], list[float]]:
    """A shown output line as a pattern, "…" inside it matching any text and each number any
    number, with the numbers shown in it."""
    parts, numbers = [], []
    for piece in line.rstrip().split(ELIDED):
        cut = re.split(f"({_NUMBER})", piece)
        parts.append("".join(f"({_NUMBER})" if k % 2 else re.escape(text) for k, text in enumerate(cut)))
        numbers += [_value(text) for text in cut[1::2]]
    return re.compile(".*".join(parts)), numbers


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _matches(line: str, printed: str) -> bool:
    """Whether `printed` is the shown `line`, each number within `NUMBER_TOLERANCE` of it."""
    pattern, numbers = _pattern(line)
    found = pattern.fullmatch(printed)
    return found is not None and all(abs(_value(got) - shown) <= NUMBER_TOLERANCE * abs(shown)
                                     for got, shown in zip(found.groups(), numbers))


def missing_lines(shown: list[str], printed: str) -> list[str]:
    """The shown lines (but "…" lines) that do not appear in `printed` in their order."""
    lines = [line.rstrip() for line in printed.splitlines()]
    at, missing = 0, []
    for line in shown:
        if line.strip() == ELIDED:
            continue
        found = next((k for k in range(at, len(lines)) if _matches(line, lines[k])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


def test_the_recipe_is_three_commands_each_with_its_output():
    steps = recipe_steps()
    assert len(steps) == 3
    assert all(command.startswith(".venv/bin/privaudit ") for command, _, _ in steps)
    assert all(any(line.strip() and line.strip() != ELIDED for line in shown) for _, _, shown in steps)


def test_a_shown_line_matches_only_in_order_and_an_ellipsis_only_stands_for_text():
    printed = "a 1\nb (0.2 s)\nc\n"
    assert missing_lines(["a 1", ELIDED, "c"], printed) == []
    assert missing_lines(["b (…)", "c"], printed) == []
    assert missing_lines(["c", "a 1"], printed) == ["a 1"]
    assert missing_lines(["b (0.3 s)"], printed) == ["b (0.3 s)"]
    assert missing_lines(["a 1.1"], printed) == [] and missing_lines(["a 1.3"], printed) == ["a 1.3"]
    assert missing_lines(["ε_LB 0.4546 (95%)"], "ε_LB 0.4057 (95%)") == []
    assert missing_lines(["ε_LB 0.4546 (95%)"], "ε_LB 0.3057 (95%)") == ["ε_LB 0.4546 (95%)"]
    assert missing_lines(["[2/2] cells"], "[2/3] cells") == ["[2/2] cells"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder the recipe can run in as in the repository's root: the presets copied, `.venv`
    the repository's (or, where the suite runs from another environment, a `privaudit` script
    that runs this interpreter's privaudit)."""
    shutil.copytree(ROOT / "privaudit" / "presets", tmp_path / "privaudit" / "presets",
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    venv = ROOT / ".venv"
    if (venv / "bin" / "privaudit").exists():
        (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    else:
        script = tmp_path / ".venv" / "bin" / "privaudit"
        script.parent.mkdir(parents=True)
        script.write_text(textwrap.dedent(f"""\
            #!{sys.executable}
            import sys
            from privaudit.cli import main
            sys.exit(main())
            """))
        script.chmod(0o755)
    return tmp_path


def test_the_readme_recipe_runs_as_written_and_prints_what_it_shows(workdir: Path):
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    env.update(PRIVAUDIT_DEVICE="cpu", PYTHONUNBUFFERED="1")
    for command, status, shown in recipe_steps():
        done = subprocess.run(command, shell=True, cwd=workdir, env=env, capture_output=False,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        assert done.returncode == status, f"{command}\nexited {done.returncode}, the README says {status}:\n" \
                                          f"{done.stdout}"
        missing = missing_lines(shown, done.stdout)
        assert not missing, (f"{command}\nprinted:\n{done.stdout}\nbut the README shows lines it did not print "
                             f"(update README.md):\n" + "\n".join(missing))
    assert (workdir / "results" / "quickstart" / "report.html").is_file()


def test_the_readme_is_at_most_150_lines():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; keep it to {MAX_LINES} and move the rest to docs/"


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (outside code blocks), repeats numbered as GitHub does."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    text = re.sub(r"^```.*?^```$", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        found.add(base if base not in counts else f"{base}-{counts[base]}")
        counts[base] = counts.get(base, 0) + 1
    return found


def relative_links(path: Path) -> list[str]:
    """The targets of the Markdown links in `path` (outside code) that are not URLs."""
    text = re.sub(r"^```.*?^```$", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [target for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page: Path):
    broken = []
    for target in relative_links(page):
        file, _, anchor = target.partition("#")
        where = (page.parent / file).resolve() if file else page
        if not where.exists():
            broken.append(f"{target}: no file {where}")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no heading with anchor #{anchor} in {where.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_guide_has_its_pages():
    names = {page.name for page in PAGES[1:]}
    assert {"index.md", "campaigns.md", "reference.md", "threat-models.md", "audits.md", "extending.md",
            "python-api.md", "limits.md", "ci.md", "results.md", "development.md"} <= names
