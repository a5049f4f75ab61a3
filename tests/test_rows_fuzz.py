"""The row reader, fuzzed (Hypothesis): random mutations of the demo's stored rows (a value
replaced by any JSON value — an integer of hundreds of digits, "nan" as text, null, a list, a
dict — or a key removed, at any depth) never give a traceback: the reader keeps the row or names
why it skipped it (`privaudit.rows`), and a report of the demo's rows with the mutated row in
place of its original renders."""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privaudit.store import _parse, encode
from privaudit.reports.html import render_report

ROWS = json.loads((Path(__file__).parent / "data" / "demo_rows.json").read_text())["rows"]
SPECIAL = [10**400, -(10**400), "nan", "inf", "", "x", None, True, False, [], {}, [None], {"": None}, 0, -1, 1e308,
           -1e308, float("inf"), float("nan"), 2**63, [1, 2], {"round": "x"}]
scalars = st.one_of(st.sampled_from(SPECIAL), st.integers(), st.floats(), st.text(max_size=5), st.booleans())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                      max_leaves=5)
REMOVE = object()


def mutated(data: st.DataObject) -> dict:
    """A deep copy of a random stored row with one value replaced (or its key removed) at a random depth."""
    row = json.loads(json.dumps(data.draw(st.sampled_from(ROWS))))
    holder, key = row, None
    while True:
        keys = list(holder) if isinstance(holder, dict) else list(range(len(holder))) if isinstance(holder, list) else []
        if not keys or (key is not None and data.draw(st.integers(0, 3)) == 0):
            break
        parent, key = holder, data.draw(st.sampled_from(keys))
        holder = parent[key]
    if key is None:
        return row
    value = data.draw(st.one_of(values, st.just(REMOVE)))
    if value is REMOVE and isinstance(parent, dict):
        del parent[key]
    else:
        parent[key] = None if value is REMOVE else value
    return row


@settings(max_examples=600, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_mutated_row_is_read_or_skipped_with_its_reason(data):
    row = mutated(data)
    kept, problem = _parse(encode(row).encode())
    assert (problem is None) == bool(kept)
    assert problem is None or (isinstance(problem, str) and "\n" not in problem)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzzed_rows")


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_report_renders_whatever_the_reader_keeps(folder, data):
    row = mutated(data)
    kept, problem = _parse(encode(row).encode())
    others = [other for other in ROWS if other["cell"] != row.get("cell")]
    (folder / "results.jsonl").write_text("".join(encode(other) + "\n" for other in others) + encode(row) + "\n")
    render_report(folder)
    assert (folder / "report.html").exists()
