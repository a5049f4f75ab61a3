"""`privaudit claims`, fuzzed (Hypothesis): every shipped defense with random finite values of its
hyperparameters — extremes included (1e-300, 1e300, the largest and smallest floats, huge
integers, 0 and negatives) — prints its claims table or fails in one line (exit 2), never a
traceback. Each defense runs on the data its seed paper uses (`tests/test_canary.py`'s tables)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privaudit.defenses import DEFENSES
from privaudit.cli import main
from privaudit.errors import printable

DATA = {"dpdl": '[data]\ndataset = "digits"\nmax_train = 120\n',
        "lt_admm_dp": '[data]\ndataset = "logistic"\nsamples_per_agent = 40\n',
        "tvss_output": '[data]\ndataset = "estimation_wz"\nsamples_per_agent = 20\n',
        "tvss_gradient": '[data]\ndataset = "estimation_wz"\nsamples_per_agent = 20\n',
        "ternary": '[data]\ndataset = "estimation_wb"\nsamples_per_agent = 20\n'}
REQUIRED = {"dpdl": "noise_multiplier = 1.0\nbatch_size = 8\n", "dp_dpsgd": "noise_multiplier = 1.0\nbatch_size = 8\n",
            "dpsgd": "batch_size = 8\n", "lt_admm_dp": "batch_size = 8\n", "ternary": "batch_size = 1\n"}
"""What each defense needs to build on its data, given before the drawn values (a drawn value of
the same field replaces it: TOML keeps one, so the drawn ones are written in its place)."""
MODEL = {"lt_admm_dp": 'model = "logreg"\nmodel_options = { binary = true }\n', "tvss_output": 'model = "linear_estimator"\n',
         "tvss_gradient": 'model = "linear_estimator"\n', "ternary": 'model = "linear_estimator"\n'}
KINDS = sorted(DEFENSES)
EXTREMES = [0, 1, -1, 2, 0.5, 1e-300, -1e-300, 1e300, -1e300, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308,
            1e-5, 1e5, 10**20, -(10**20), 2**63 - 1]
values = st.one_of(st.sampled_from(EXTREMES), st.floats(allow_nan=False, allow_infinity=False),
                   st.integers(-10**6, 10**6), st.floats(1e-3, 10), st.integers(1, 20))


def toml_value(value) -> str:
    return repr(value) if isinstance(value, int) else f"{value!r}".replace("inf", "1e999")


def numeric_fields(kind: str) -> list[str]:
    """The hyperparameters of `kind` that take a number."""
    fields = DEFENSES[kind].Params.model_fields
    return sorted(name for name, field in fields.items() if any(t in str(field.annotation) for t in ("int", "float")))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("claims_fuzz")


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_hyperparameters_give_a_claims_table_or_one_line(folder, capsys, kind, data):
    """Ten drawn tables of each defense (`test_many_random_hyperparameters_give_a_claims_table_or_one_line`
    draws forty, under `make test-slow`)."""
    _claims_table_or_one_line(folder, capsys, kind, data)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_many_random_hyperparameters_give_a_claims_table_or_one_line(folder, capsys, kind, data):
    _claims_table_or_one_line(folder, capsys, kind, data)


def _claims_table_or_one_line(folder, capsys, kind: str, data) -> None:
    """The property, on a table of `kind` with up to three of its numeric fields drawn."""
    fields = numeric_fields(kind)
    chosen = data.draw(st.dictionaries(st.sampled_from(fields), values, max_size=3)) if fields else {}
    rounds = data.draw(st.sampled_from([1, 3, 30, 1000]))
    required = {line.split(" = ")[0]: line for line in REQUIRED.get(kind, "").splitlines()}
    lines = "".join(f"{line}\n" for name, line in required.items() if name not in chosen)
    lines += "".join(f"{name} = {toml_value(value)}\n" for name, value in chosen.items())
    path = folder / "campaign.toml"
    path.write_text(f'{DATA.get(kind, "")}[[defense]]\nkind = "{kind}"\nagents = 3\ntopology = "ring"\n'
                    f'rounds = {rounds}\n{MODEL.get(kind, "")}{lines}')
    code = main(["claims", str(path), "--json"])
    captured = capsys.readouterr()
    assert code in (0, 2), captured.err
    if code == 2:
        assert len(captured.err.strip().splitlines()) == 1 and captured.err.startswith("privaudit: error: ")
        assert captured.err == printable(captured.err.rstrip("\n")) + "\n"
