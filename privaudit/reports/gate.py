"""The privacy gate: a CI job fails when a verdict of a kind it names appears.

Users of privacy tools build release gates by hand (fail the build when an attack beats a
threshold). `privaudit run … --fail-on refuted` (and `privaudit report DIR --fail-on …`, on
results already computed) exits 1 when any verdict has a status the flag names, says which in one
line, and writes the verdicts where a CI system reads them: `verdicts.json` (the records of
`privaudit report --format json`) and `verdicts.junit.xml` (one test case per verdict, failed
where its status is gated, so the CI's test view lists each claim). The verdicts are the
report's own (`privaudit.reports.summary`), so the gate, the terminal and the page never disagree.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from privaudit.errors import UsageError, json_text, printable
from privaudit.files import write_inside
from privaudit.store import JUNIT_FILE, VERDICTS_FILE, json_safe
from privaudit.reports.verdicts import MEANINGS



def statuses(values: list[str]) -> list[str]:
    """The statuses `--fail-on` names (repeatable, or comma-separated); a UsageError naming an
    unknown one and the choices. The gate fails closed: an empty or blank value, or an empty item
    of a list (`--fail-on "$GATE"` with GATE unset, `"refuted,$MORE"`), is an error, never a gate
    that passes every build."""
    pieces = [value.strip() for text in values for value in text.split(",")]
    if any(not piece for piece in pieces):
        given = next(text for text in values if any(not value.strip() for value in text.split(",")))
        raise UsageError(f"--fail-on: {'empty' if not given.strip() else 'an empty item in'} value {given!r}: name "
                         f"the verdicts that fail the gate ({', '.join(MEANINGS)}); an unset variable there would "
                         "turn the gate off")
    chosen = pieces
    unknown = [value for value in chosen if value not in MEANINGS]
    if unknown:
        raise UsageError(f"--fail-on: unknown verdict '{unknown[0]}' (choose from {', '.join(MEANINGS)})")
    return list(dict.fromkeys(chosen))


def failing(found: dict[str, Any], fail_on: list[str]) -> list[dict[str, Any]]:
    """The verdict records whose status is one `fail_on` names, or which carry it as a finding (a
    refuted claim that is also below the sound accountant fails `--fail-on understated` too)."""
    return [record for record in found["verdicts"]
            if record["status"] in fail_on or set(record.get("findings") or []) & set(fail_on)]


def gate_fails(found: dict[str, Any], fail_on: list[str]) -> bool:
    """Whether the gate fails: a verdict `fail_on` names, or lines of the results that could not be
    read (a torn or edited line may hold the verdict the gate is for: it fails closed)."""
    return bool(failing(found, fail_on) or found.get("unreadable"))


def gate_line(found: dict[str, Any], fail_on: list[str]) -> str:
    """One line: which verdicts fail the gate, or that none does."""
    failed = failing(found, fail_on)
    gated = " or ".join(fail_on)
    if found.get("unreadable"):
        return (f"privacy gate failed: {printable(found['unreadable'])}, and a verdict may be in them "
                f"({len(failed)} of {len(found['verdicts'])} verdicts read are {gated})")
    if not failed:
        count = len(found["verdicts"])
        return f"privacy gate passed: no verdict is {gated} ({count} verdict{'' if count == 1 else 's'})"
    names = "; ".join(f"{printable(record['subject'])} ({record['status']}"
                      + ("" if record["status"] in fail_on else f", {_gated_as(record, fail_on)}") + ")"
                      for record in failed)
    return f"privacy gate failed: {len(failed)} of {len(found['verdicts'])} verdicts {gated}: {names}"


def _gated_as(record: dict[str, Any], fail_on: list[str]) -> str:
    """The verdict kind in `fail_on` that a failing record shows: its status, or a finding it carries."""
    if record["status"] in fail_on:
        return record["status"]
    return next(kind for kind in record.get("findings") or [] if kind in fail_on)


def junit(found: dict[str, Any], fail_on: list[str]) -> str:
    """The verdicts as a JUnit XML test suite: one case per verdict, a failure where its status is
    gated, its numbers in the case's output. Control characters are escaped (XML 1.0 has no way to
    write most of them)."""
    failed = failing(found, fail_on)
    suite = ElementTree.Element("testsuite", name="privaudit verdicts", tests=str(len(found["verdicts"])),
                                failures=str(len(failed)), errors="0", skipped="0")
    for record in found["verdicts"]:
        case = ElementTree.SubElement(suite, "testcase", classname=f"privaudit.{record['status'].replace(' ', '_')}",
                                      name=printable(record["subject"]))
        numbers = (f"status {record['status']}; claimed ε {record['eps_claimed']}; sound ε {record['eps_sound']}; "
                   f"empirical ε_LB {record['eps_lb']}; estimate {record['eps_estimate']}")
        if record in failed:
            gated = _gated_as(record, fail_on)
            ElementTree.SubElement(case, "failure", message=f"{gated}: {MEANINGS[gated]}",
                                   type=gated).text = printable(numbers)
        ElementTree.SubElement(case, "system-out").text = printable(numbers)
    if found.get("unreadable"):
        suite.set("tests", str(len(found["verdicts"]) + 1))
        suite.set("failures", str(len(failed) + 1))
        case = ElementTree.SubElement(suite, "testcase", classname="privaudit.unreadable", name="the results file")
        ElementTree.SubElement(case, "failure", message="lines of the results could not be read",
                               type="unreadable").text = printable(found["unreadable"])
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_gate_files(results_dir: str | Path, found: dict[str, Any], fail_on: list[str]) -> tuple[Path, Path]:
    """Write `verdicts.json` and `verdicts.junit.xml` into the results folder (atomically, never
    through a link: `privaudit.files.write_inside`)."""
    text = json_text(json_safe(found), indent=2, allow_nan=False) + "\n"
    return (write_inside(results_dir, VERDICTS_FILE, text.encode("utf-8"), "gate verdicts"),
            write_inside(results_dir, JUNIT_FILE, junit(found, fail_on).encode("utf-8"), "gate verdicts"))
