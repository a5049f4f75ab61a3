"""Issue 35 (hardening, round three), the writes and reads under an output folder, the consent to
run code, the gate, the Python API and the exit status: each test reproduces one hostile input of
the issue's probe (items 1–4, 6–10, 21–23, 29) and checks the one-line error (exit 2), the refusal
or the bounded outcome, and that nothing outside the output folder was written or replaced."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import privaudit
from privaudit.cli import main
from privaudit.errors import ConfigError, PrivauditError
from privaudit.files import read_inside, write_inside
from privaudit.store import ResultsStore
from tests.helpers import one_line_error

ROOT = Path(__file__).resolve().parent.parent

CAMPAIGN = """[campaign]
name = "tiny"
[data]
dataset = "digits"
max_train = 200
[[defense]]
kind = "dpsgd"
agents = 4
rounds = 2
eval_every = 2
batch_size = 4
model = "logreg"
[[attack]]
kind = "idlg"
rounds = [0]
batch_size = 1
evaluations = 20
[[attack]]
kind = "idlg"
label = "coalition"
threat = "coalition"
agents = [1, 2]
window = 1
rounds = [0]
evaluations = 20
[[membership]]
target = "average"
references = 2
bootstrap = 0
"""
"""A campaign whose run writes every kind of file a run writes: rows, the kept campaign, the lock,
the report, the gate's verdicts, and artifacts in cells' folders and in a folder below a cell's
(reconstructions, tensors, an exposure figure, membership scores)."""


class Outside:
    """Files and a folder outside the output folder that planted links point at; `unchanged`
    says whether anything was written, replaced or added there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folder = root / "victim-folder"
        self.folder.mkdir(parents=True)
        self.file = root / "victim.txt"
        self.file.write_text("precious\n")
        (self.folder / "inside.txt").write_text("precious too\n")
        self.before = self._state()

    def _state(self) -> dict[str, tuple[bytes, int]]:
        return {str(path.relative_to(self.root)): (path.read_bytes(), path.stat().st_mtime_ns)
                for path in sorted(self.root.rglob("*")) if path.is_file()}

    def unchanged(self) -> bool:
        return self._state() == self.before


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """A finished run of `CAMPAIGN` with the gate: its campaign file, its folder and every path
    in it (files and folders, relative), which is every path a run writes."""
    work = tmp_path_factory.mktemp("finished")
    campaign = work / "c.toml"
    campaign.write_text(CAMPAIGN)
    out = work / "out"
    assert main(["run", str(campaign), "--out", str(out), "--quiet", "--fail-on", "refuted"]) == 0
    paths = sorted(str(path.relative_to(out)) for path in out.rglob("*"))
    assert {"results.jsonl", "campaign.toml", ".lock", "report.html", "verdicts.json", "verdicts.junit.xml",
            "artifacts"} <= set(paths)
    assert any(path.endswith("scores.npz") for path in paths) and any(path.count("/") == 3 for path in paths)
    return campaign, out, paths


def _copy(out: Path, where: Path) -> Path:
    copied = where / "out"
    shutil.copytree(out, copied, symlinks=True)
    return copied


def _plant(path: Path, outside: Outside) -> None:
    """Replace `path` by a link to what is outside: a folder for a folder, a file for a file."""
    folder = path.is_dir()
    shutil.rmtree(path) if folder else path.unlink()
    path.symlink_to(outside.folder if folder else outside.file)


# Acceptance 2 and items 1, 2: a link planted at any path a run or a report writes


def test_no_run_or_report_writes_through_a_link_planted_at_any_path_it_writes(finished, tmp_path, capsys):
    campaign, out, paths = finished
    for number, relative in enumerate(paths):
        where = tmp_path / str(number)
        outside = Outside(where / "outside")
        copied = _copy(out, where)
        _plant(copied / relative, outside)
        err = one_line_error(capsys, ["run", str(campaign), "--out", str(copied), "--quiet", "--force"])
        assert "symbolic link" in err and relative in err, (relative, err)
        code = main(["report", str(copied), "--fail-on", "refuted"])
        err = capsys.readouterr().err
        assert code in (0, 1, 2) and "Traceback" not in err, (relative, err)
        if code == 2:
            assert len(err.strip().splitlines()) == 1
        assert outside.unchanged(), relative
        assert (copied / relative).is_symlink(), relative


def test_a_link_planted_at_a_cells_folder_during_a_run_is_refused_by_the_write(tmp_path):
    """A link planted after the run's own check (a race): the writer refuses it on its own."""
    outside = Outside(tmp_path / "outside")
    store = ResultsStore(tmp_path / "out")
    (tmp_path / "out" / "artifacts").mkdir(parents=True)
    (tmp_path / "out" / "artifacts" / "cell").symlink_to(outside.folder)
    with pytest.raises(PrivauditError, match="artifacts/cell is a symbolic link, not a folder"):
        store.write_artifact("cell", "inside.txt", b"overwritten")
    (tmp_path / "out" / "artifacts" / "cell").unlink()
    (tmp_path / "out" / "artifacts").rmdir()
    (tmp_path / "out" / "artifacts").symlink_to(outside.folder)
    with pytest.raises(PrivauditError, match="artifacts is a symbolic link, not a folder"):
        store.write_artifact("cell", "x.png", b"x")
    assert outside.unchanged()


def test_a_run_whose_temporary_names_are_taken_by_links_each_time_writes_through_none(tmp_path, monkeypatch):
    """An attacker who wins every race: just before each temporary file is created, a link to a
    file outside is planted at its exact name. Every write then takes another random name, and
    the run ends with its files written and nothing outside touched."""
    outside = Outside(tmp_path / "outside")
    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN)
    real_open = os.open
    planted: list[str] = []

    def racing_open(path, flags, mode=0o777, *, dir_fd=None):
        if dir_fd is not None and str(path).endswith(".tmp") and flags & os.O_EXCL and len(planted) % 2 == 0:
            os.symlink(outside.file, path, dir_fd=dir_fd)
            planted.append(str(path))
        elif dir_fd is not None and str(path).endswith(".tmp") and flags & os.O_EXCL:
            planted.append("")  # the retry, which this attacker lets through
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", racing_open)
    assert main(["run", str(campaign), "--out", str(tmp_path / "out"), "--quiet", "--fail-on", "refuted"]) == 0
    monkeypatch.setattr(os, "open", real_open)
    written = [name for name in planted if name]
    assert len(written) >= 10 and outside.unchanged()
    assert sorted(link.name for link in (tmp_path / "out").rglob("*.tmp") if link.is_symlink()) == sorted(
        Path(name).name for name in written)
    assert tomllib.loads((tmp_path / "out" / "campaign.toml").read_text())["campaign"]["name"] == "tiny"


def test_the_issues_probe_links_at_pid_temporary_names_are_never_written_through(finished, tmp_path):
    """Item 1 as the probe ran it: links named `<target>.<pid>.tmp` for the next few hundred
    process ids, then `privaudit report` in a new process."""
    _, out, _ = finished
    outside = Outside(tmp_path / "outside")
    copied = _copy(out, tmp_path)
    first = os.getpid()
    for target in ("report.html", "verdicts.json", "verdicts.junit.xml"):
        for pid in range(first, first + 400):
            (copied / f"{target}.{pid}.tmp").symlink_to(outside.file)
    done = subprocess.run([sys.executable, "-m", "privaudit.cli", "report", str(copied), "--fail-on", "refuted"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert outside.unchanged()
    assert stat.S_ISREG(os.lstat(copied / "report.html").st_mode)


def test_the_writer_refuses_to_replace_what_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for name, what in (("fifo", "a FIFO"), ("link", "a symbolic link"), ("folder", "a folder")):
        with pytest.raises(PrivauditError, match=f"it exists and is {what}, not a regular file"):
            write_inside(tmp_path, name, b"x", "the report")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode) and (tmp_path / "link").is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["fifo", "folder", "link"]  # no temporary file left behind
    for relative in ("../x", "/etc/x", "a/../../x"):
        with pytest.raises(PrivauditError, match="not a path inside its folder"):
            write_inside(tmp_path, relative, b"x", "artifact")


# Item 3: code runs only with consent, whatever containers the campaign dict is made of


PLUGIN = ("import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"
          "from examples.laplace_gossip import LaplaceGossip\n\nclass Planted(LaplaceGossip):\n    name = 'planted3'\n")


def _containers():
    from collections import UserDict, deque
    from types import MappingProxyType

    table = {"kind": "planted_three:Planted"}
    return {"tuple": lambda: (table,), "deque": lambda: deque([table]), "generator": lambda: (t for t in [table]),
            "mapping proxy": lambda: [MappingProxyType(table)], "UserDict": lambda: [UserDict(table)]}


@pytest.mark.parametrize("container", list(_containers()))
@pytest.mark.parametrize("listed", [False, True])
def test_the_api_imports_no_plugin_without_allow_code_whatever_the_tables_container(tmp_path, monkeypatch,
                                                                                    container, listed):
    marker = tmp_path / "marker"
    (tmp_path / "planted_three.py").write_text(PLUGIN.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    raw = {"defense": _containers()[container]()}
    if listed:
        raw["campaign"] = {"imports": ("planted_three",)}
    with pytest.raises(ConfigError) as refused:
        privaudit.load_campaign(raw)
    assert "planted_three" in str(refused.value) or "not a campaign value" in str(refused.value)
    assert not marker.exists()


def test_with_consent_a_tuple_of_tables_imports_the_listed_plugin(tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    (tmp_path / "planted_four.py").write_text(PLUGIN.format(marker=str(marker)).replace("planted3", "planted4"))
    monkeypatch.syspath_prepend(str(tmp_path))
    campaign = privaudit.load_campaign({"campaign": {"imports": ("planted_four",)},
                                        "defense": ({"kind": "planted_four:Planted"},)}, allow_code=True)
    assert campaign.defense[0].kind == "planted4" and marker.read_text() == "ran"


# Item 4: a gate that fails closed


@pytest.mark.parametrize("value", ["", ",", " ", "refuted,", " , refuted"])
def test_a_blank_or_empty_fail_on_exits_2_before_any_work(finished, tmp_path, capsys, value):
    campaign, out, _ = finished
    err = one_line_error(capsys, ["run", str(campaign), "--out", str(tmp_path / "new"), "--fail-on", value])
    assert "--fail-on" in err and "turn the gate off" in err and not (tmp_path / "new").exists()
    copied = _copy(out, tmp_path)
    for name in ("verdicts.json", "verdicts.junit.xml"):
        (copied / name).unlink()
    err = one_line_error(capsys, ["report", str(copied), "--fail-on", value])
    assert "--fail-on" in err and not (copied / "verdicts.json").exists()


# Items 6–8: report -o never replaces a device, a FIFO, another folder's rows or the gate's file


def test_report_output_onto_a_fifo_or_a_device_node_leaves_it_as_it_is(finished, tmp_path, capsys):
    _, out, _ = finished
    os.mkfifo(tmp_path / "fifo")
    targets = [tmp_path / "fifo"]
    if os.geteuid() == 0:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        targets.append(tmp_path / "null")
    for target in targets:
        for fmt in ("html", "json"):
            err = one_line_error(capsys, ["report", str(out), "-o", str(target), "--format", fmt])
            assert "not a regular file" in err
        assert not stat.S_ISREG(os.lstat(target).st_mode)


@pytest.mark.parametrize("name", ["results.jsonl", "campaign.toml", "campaign.3.toml", ".lock", "verdicts.json",
                                  "verdicts.junit.xml", "artifacts/x/original.png"])
def test_report_output_never_replaces_another_results_folders_files(finished, tmp_path, capsys, name):
    _, out, _ = finished
    other = _copy(out, tmp_path)
    (other / name).parent.mkdir(parents=True, exist_ok=True)
    (other / name).write_bytes(b"kept")
    err = one_line_error(capsys, ["report", str(out), "-o", str(other / name)])
    assert "writing the report there would replace it" in err
    assert (other / name).read_bytes() == b"kept"


def test_report_output_onto_the_gates_own_file_is_refused_so_the_report_is_not_lost(finished, tmp_path, capsys):
    _, out, _ = finished
    copied = _copy(out, tmp_path)
    before = (copied / "verdicts.json").read_bytes()
    err = one_line_error(capsys, ["report", str(copied), "--fail-on", "refuted", "-o", str(copied / "verdicts.json")])
    assert "the privacy gate's verdicts" in err and (copied / "verdicts.json").read_bytes() == before


# Item 9: the API reads a campaign file as the command line does


@pytest.mark.timeout(60)
def test_the_api_reads_a_campaign_file_with_the_command_lines_checks(tmp_path):
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "latin1.toml").write_bytes(b'[campaign]\nname = "caf\xe9"\n')
    (tmp_path / "big.toml").write_bytes(b"# " + b"x" * (5 * 2**20) + b"\n")
    cases = {"/dev/zero": "not a regular file", str(tmp_path / "fifo.toml"): "not a regular file",
             str(tmp_path / "latin1.toml"): "not UTF-8", str(tmp_path / "big.toml"): "bytes, more than",
             str(tmp_path / "missing.toml"): "not found"}
    for path, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            privaudit.run(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# Item 10: report reads artifacts bounded, never hanging


@pytest.mark.timeout(120)
def test_report_shows_a_note_for_an_artifact_that_is_a_fifo_or_a_huge_sparse_file(finished, tmp_path):
    import resource

    _, out, paths = finished
    copied = _copy(out, tmp_path)
    images = [copied / path for path in paths if path.endswith("reconstruction.png")]
    os.unlink(images[0])
    os.mkfifo(images[0])
    os.unlink(images[1])
    with open(images[1], "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n")
        handle.truncate(4 * 2**30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert main(["report", str(copied)]) == 0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500 * 2**10  # kB: far from 4 GiB
    html = (copied / "report.html").read_text()
    assert "is a FIFO, not a regular file" in html and "bytes, more than the 8,388,608 read" in html


def test_the_reader_refuses_links_at_any_component(tmp_path):
    outside = Outside(tmp_path / "outside")
    (tmp_path / "out" / "artifacts").mkdir(parents=True)
    (tmp_path / "out" / "artifacts" / "cell").symlink_to(outside.folder)
    with pytest.raises(PrivauditError, match="is a symbolic link"):
        read_inside(tmp_path / "out", "artifacts/cell/inside.txt", 100, "artifact")
    (tmp_path / "out" / "artifacts" / "file").symlink_to(outside.file)
    with pytest.raises(PrivauditError, match="a symbolic link"):
        read_inside(tmp_path / "out", "artifacts/file", 100, "artifact")


# Item 21: privaudit.results is the documented function, before and after any other call


def test_privaudit_results_stays_the_function_after_other_api_calls(finished):
    _, out, _ = finished
    import importlib

    first = privaudit.results(out)
    for module in ("privaudit.store", "privaudit.campaign.api", "privaudit.rows"):
        importlib.import_module(module)  # the engine's own modules never shadow the API's names
    second = privaudit.results(out)
    assert callable(privaudit.results) and first.verdicts == second.verdicts and first.rows == second.rows


# Item 22: what the machine refuses is one line, before any work where it can be seen


@pytest.mark.parametrize("name, make", [("report.html", "folder"), ("artifacts", "file"), ("verdicts.json", "folder")])
def test_a_results_folder_with_a_folder_or_file_in_the_wrong_place_is_refused_before_training(
        finished, tmp_path, capsys, name, make):
    campaign, _, _ = finished
    out = tmp_path / "out"
    out.mkdir()
    (out / name).mkdir() if make == "folder" else (out / name).write_text("")
    err = one_line_error(capsys, ["run", str(campaign), "--out", str(out), "--quiet", "--fail-on", "refuted"])
    assert f"{name} is not" in err
    assert not (out / "results.jsonl").exists()


def test_a_write_past_the_file_size_limit_is_one_line_and_a_rerun_resumes(tmp_path):
    import resource

    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.split("[[attack]]")[0])
    out = tmp_path / "out"

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500))

    limited = subprocess.run([sys.executable, "-m", "privaudit.cli", "run", str(campaign), "--out", str(out),
                              "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                             preexec_fn=limit_file_size)
    lines = limited.stderr.strip().splitlines()
    assert limited.returncode == 2 and len(lines) == 1 and "Traceback" not in limited.stderr, limited.stderr
    assert "results.jsonl" in lines[0] and "File too large" in lines[0]
    assert (out / "results.jsonl").stat().st_size == 1500  # a torn line
    assert main(["run", str(campaign), "--out", str(out), "--quiet"]) == 0
    reading = ResultsStore(out).read()
    assert len(reading.rows) == 1 and reading.skipped == []  # the torn line was cut off: the folder healed


def test_a_results_path_with_a_component_too_long_is_one_line(finished, tmp_path, capsys):
    campaign, _, _ = finished
    err = one_line_error(capsys, ["run", str(campaign), "--out", str(tmp_path / ("x" * 300)), "--quiet"])
    assert "File name too long" in err


def test_a_bug_exits_3_with_its_traceback_never_the_gates_1(finished, monkeypatch, capsys):
    campaign, out, _ = finished

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("privaudit.reports.summary.summary", broken)
    assert main(["report", str(out), "--fail-on", "refuted"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug" in err and "internal error" in err.splitlines()[-1]


# Item 23: the API's arguments


def test_the_apis_bad_arguments_are_one_line_errors(finished, tmp_path):
    campaign, _, _ = finished
    with pytest.raises(ConfigError, match="threads: expected a whole number >= 0, got -1"):
        privaudit.run(campaign, tmp_path / "o", threads=-1)
    with pytest.raises(ConfigError, match="workers: expected a whole number >= 1, got True"):
        privaudit.run(campaign, tmp_path / "o", workers=True)
    with pytest.raises(ConfigError, match="campaign file not found"):
        privaudit.run(tmp_path / "missing.toml", tmp_path / "o")
    with pytest.raises(ConfigError, match="audit option samples"):
        privaudit.audit("laplace", samples=1000.5)
    with pytest.raises(ConfigError, match="audit option seed"):
        privaudit.audit("laplace", seed="1")
    for claim in (("a", "b"), (1.0,), (True, 0.0), "ab", (float("inf"), 0.0)):
        with pytest.raises(ConfigError, match="claim is"):
            privaudit.audit("laplace", claim=claim)
    with pytest.raises(ConfigError, match="load_campaign takes"):
        privaudit.load_campaign(42)
    assert not (tmp_path / "o").exists()


# Item 29: the campaign kept from Python is the campaign, and is kept once


def test_a_campaign_given_as_a_dict_is_kept_as_the_toml_it_is_equivalent_to(tmp_path, monkeypatch, capsys):
    raw = tomllib.loads(CAMPAIGN.split("[[attack]]")[0])
    raw["defense"][0]["label"] = 'quote " backslash \\ é'
    raw["campaign"]["description"] = 'line one\n\tline "two" \\ ünï'
    monkeypatch.chdir(tmp_path)
    results = privaudit.run(privaudit.load_campaign(raw), "")
    assert results.directory == Path("results/tiny") and sorted(os.listdir(tmp_path)) == ["results"]
    kept = (tmp_path / "results" / "tiny" / "campaign.toml").read_text()
    assert tomllib.loads(kept) == raw
    assert main(["run", "results/tiny/campaign.toml", "--out", "results/tiny", "--quiet"]) == 0
    assert "1 of 1 cells already finished" in capsys.readouterr().out
    assert len(ResultsStore(tmp_path / "results" / "tiny").rows()) == 1  # the same cell ids: nothing ran again
    assert sorted(os.listdir(tmp_path / "results" / "tiny")) == [".lock", "campaign.toml", "report.html",
                                                                 "results.jsonl"]


def test_alternating_command_line_and_api_runs_keep_one_campaign_file(tmp_path):
    campaign = tmp_path / "c.toml"
    campaign.write_text("# my campaign\n" + CAMPAIGN.split("[[attack]]")[0])
    out = tmp_path / "out"
    for _ in range(2):
        assert main(["run", str(campaign), "--out", str(out), "--quiet"]) == 0
        privaudit.run(campaign, out)
        privaudit.run(privaudit.load_campaign(tomllib.loads(campaign.read_text())), out)
    assert sorted(name for name in os.listdir(out) if name.startswith("campaign")) == ["campaign.toml"]
    text = campaign.read_text()
    for rounds in (3, 2, 3, 2):  # two versions, alternated: each earlier version is kept once
        campaign.write_text(text.replace("rounds = 2", f"rounds = {rounds}"))
        assert main(["run", str(campaign), "--out", str(out), "--quiet"]) == 0
        privaudit.run(campaign, out)
    kept = sorted(name for name in os.listdir(out) if name.startswith("campaign"))
    assert kept == ["campaign.1.toml", "campaign.2.toml", "campaign.toml"]
    assert {tomllib.loads((out / name).read_text())["defense"][0]["rounds"] for name in kept} == {2, 3}


def _plain_data():
    from hypothesis import strategies as st

    text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
    scalars = st.one_of(text, st.booleans(), st.integers(-2**63, 2**63 - 1),
                        st.floats(allow_nan=False, allow_infinity=False))
    values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(text, inner, max_size=4)), max_leaves=20)
    return st.dictionaries(text, values, max_size=6)


def test_the_toml_a_campaign_dict_is_kept_as_parses_back_to_the_same_data():
    from hypothesis import given, settings

    from privaudit.campaign.document import plain, toml_text

    @settings(max_examples=300, deadline=None)
    @given(_plain_data())
    def round_trip(data):
        assert tomllib.loads(toml_text(plain(data), "a header\nof two lines")) == data

    round_trip()


# Beyond the issue's classes: a hard link, which O_NOFOLLOW lets through


@pytest.mark.parametrize("name", ["results.jsonl", ".lock"])
def test_a_hard_link_planted_at_a_file_written_in_place_is_refused(finished, tmp_path, capsys, name):
    campaign, out, _ = finished
    outside = Outside(tmp_path / "outside")
    copied = _copy(out, tmp_path)
    (copied / name).unlink()
    os.link(outside.file, copied / name)
    err = one_line_error(capsys, ["run", str(campaign), "--out", str(copied), "--quiet", "--force"])
    assert name in err and "hard link" in err
    assert outside.unchanged()


# Item 26, model options too: a model's options are numbers one way, as every other field


@pytest.mark.parametrize("options, message", [("{ nonconvex_reg = true }", "nonconvex_reg"),
                                               ('{ nonconvex_reg = "0.5" }', "nonconvex_reg"),
                                               ("{ hidden = [true] }", "hidden.0")])
def test_a_boolean_or_text_for_a_models_option_is_refused_at_check(tmp_path, capsys, options, message):
    model = "mlp" if "hidden" in options else "logreg"
    (tmp_path / "c.toml").write_text(f'[[defense]]\nkind = "dpsgd"\nagents = 3\nrounds = 1\nmodel = "{model}"\n'
                                     f"model_options = {options}\n")
    err = one_line_error(capsys, ["check", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o")])
    assert f"option {message}: Input should be a valid" in err


# The re-probe: an inversion's memory, a position audit's work


@pytest.mark.parametrize("field, value, megabytes", [("restarts", 100_000, "24,570 MB"),
                                                     ("history_size", 1_000_000_000, "15,258,789,627,076 MB")])
def test_an_inversion_whose_memory_is_over_the_limit_is_refused_at_check(tmp_path, capsys, field, value, megabytes):
    (tmp_path / "c.toml").write_text('[[defense]]\nkind = "dpsgd"\nagents = 3\nrounds = 2\nmodel = "logreg"\n'
                                     f'batch_size = 1\n[[attack]]\nkind = "dlg"\nrounds = [0]\n{field} = {value}\n')
    err = one_line_error(capsys, ["check", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o")])
    assert f"the attack's working memory (restarts × history_size × batch, and restarts × 650 model parameters) = " \
           f"{megabytes}" in err and "PRIVAUDIT_MAX_MEMORY_MB=" in err


def test_a_position_audit_over_thousands_of_rounds_is_refused_before_any_model_is_solved(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(
        '[data]\ndataset = "digits"\n[[defense]]\nkind = "dp_dpsgd"\ntopology = "ring"\nagents = 4\nrounds = 3000\n'
        'model = "logreg"\nbatch_size = 2\n[[audit]]\nkind = "position"\nruns = 16\n')
    err = one_line_error(capsys, ["check", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o")])
    assert "position audit: the least-squares models of its victims and attackers: 2,913,085 exceeds the limit of 100,000" in err
    assert "PRIVAUDIT_MAX_POSITION_WORK=" in err


def _edit_rows(folder: Path, edit) -> None:
    """Rewrite a results folder's rows, each passed through `edit` (a row dict, changed in place)."""
    import json

    path = folder / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        edit(row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_a_false_positive_rate_too_small_to_resolve_is_refused_and_a_row_naming_one_is_read(finished, tmp_path):
    from privaudit.campaign.config import parse_campaign

    raw = tomllib.loads(CAMPAIGN)
    raw["membership"][0]["fprs"] = [1e-320]
    with pytest.raises(ConfigError, match="membership\\[0\\].fprs: the false-positive rate 1e-320 is below 1e-09"):
        parse_campaign(raw)

    def tiny_rate(row):
        for metrics in (row.get("metrics") or {}).values():
            if isinstance(metrics, dict) and "auc" in metrics:
                metrics["tpr@1e-320"] = metrics["tpr@nan"] = 0.5
    copied = _copy(finished[1], tmp_path)
    _edit_rows(copied, tiny_rate)
    assert "tpr@1e-320" in (copied / "results.jsonl").read_text()
    assert main(["report", str(copied)]) == 0


def test_an_artifact_path_holding_a_nul_or_a_hard_linked_artifact_is_a_note_not_a_traceback(finished, tmp_path):
    _, out, paths = finished
    copied = _copy(out, tmp_path)
    image = next(path for path in paths if path.endswith("reconstruction.png"))
    outside = Outside(tmp_path / "elsewhere")
    os.unlink(copied / image)
    os.link(outside.file, copied / image)

    def nul_path(row):
        if row.get("type") == "inversion":
            for key, value in (row.get("artifacts") or {}).items():
                if isinstance(value, str) and value.endswith("original.png"):
                    row["artifacts"][key] = value + "\0x"
    _edit_rows(copied, nul_path)
    assert main(["report", str(copied)]) == 0
    html = (copied / "report.html").read_text()
    assert "has 2 hard links: a file in an output folder has one" in html
    assert "a path holding a NUL character" in html and "precious" not in html
    with pytest.raises(PrivauditError, match="a path holding a NUL character"):
        write_inside(tmp_path, "a\0b", b"x", "artifact")


def test_the_gate_line_escapes_the_folders_name(finished, tmp_path, capsys):
    copied = _copy(finished[1], tmp_path)
    shown = copied.rename(tmp_path / "out\x1b[2Jx")
    assert main(["report", str(shown), "--fail-on", "refuted"]) == 0
    err = capsys.readouterr().err
    assert "privacy gate passed" in err and "\x1b" not in err and "\\x1b[2Jx" in err


def test_the_apis_switches_are_booleans_its_paths_paths_and_its_statuses_known(finished, tmp_path):
    campaign, out, _ = finished
    for keyword in ("allow_code", "force", "progress"):
        with pytest.raises(ConfigError, match=f"{keyword}: expected True or False, got 'false'"):
            privaudit.run(campaign, tmp_path / "o", **{keyword: "false"})
    with pytest.raises(ConfigError, match="allow_code: expected True or False, got 1"):
        privaudit.load_campaign(campaign, allow_code=1)
    for call in (lambda: privaudit.run(campaign, f"{tmp_path}/o\0x"), lambda: privaudit.run(f"{campaign}\0x"),
                 lambda: privaudit.load_campaign(f"{campaign}\0x"), lambda: privaudit.results(f"{out}\0x")):
        with pytest.raises(ConfigError, match="a path holding a NUL character"):
            call()
    for value in (None, 123, b"out"):
        with pytest.raises(ConfigError, match="results folder: a path, got a"):
            privaudit.results(value)
    assert not (tmp_path / "o").exists()
    found = privaudit.results(_copy(out, tmp_path))
    assert found.failing("refuted") == [] and found.unreadable is None
    for statuses in ((), ("No Privacy",), ("refuted", ""), (3,)):
        with pytest.raises(ConfigError, match="failing: "):
            found.failing(*statuses)


def test_json_output_escapes_what_a_terminal_would_not_show_and_reads_back_the_same(finished, tmp_path, capsys):
    import json

    from privaudit.errors import json_text

    value = {"label": "a\u202eb\u200bc\x1b[31m\x7f é ε", "n": [1, 2.5]}
    text = json_text(value, indent=2)
    assert json.loads(text) == value and "é ε" in text
    assert not any(char in text for char in "\u202e\u200b\x1b\x7f")
    copied = _copy(finished[1], tmp_path)
    _edit_rows(copied, lambda row: row.update(label=row["label"] + "\u202e") if row.get("type") == "training"
               else None)
    main(["report", str(copied), "--format", "json"])
    out = capsys.readouterr().out
    assert "\u202e" not in out and "\\u202e" in out


def test_a_huge_limit_variable_is_named_not_echoed(monkeypatch):
    from privaudit.limits import limit

    monkeypatch.setenv("PRIVAUDIT_MAX_RUNS", "x" * 100_000)
    with pytest.raises(ConfigError) as error:
        limit("runs")
    assert len(str(error.value)) < 200 and "(100,000 characters)" in str(error.value)


def test_report_output_below_the_results_folder_never_follows_a_link_planted_there(finished, tmp_path, capsys):
    copied = _copy(finished[1], tmp_path)
    outside = Outside(tmp_path / "elsewhere")
    (copied / "sub").symlink_to(outside.folder)
    for form in ("html", "json"):
        one_line_error(capsys, ["report", str(copied), "--format", form, "-o", str(copied / "sub" / "x.html")])
        assert outside.unchanged()
    assert main(["report", str(copied), "-o", str(copied / "new" / "x.html")]) == 0
    assert (copied / "new" / "x.html").is_file()


def test_the_gate_fails_closed_on_unreadable_lines_and_a_resumed_run_heals_a_torn_tail(finished, tmp_path, capsys):
    import json

    campaign, out, _ = finished
    copied = _copy(out, tmp_path)
    rows = (copied / "results.jsonl").read_bytes()
    (copied / "results.jsonl").write_bytes(rows + rows.splitlines()[-1][:40])
    assert main(["report", str(copied), "--fail-on", "refuted"]) == 1
    err = capsys.readouterr().err
    assert "privacy gate failed:" in err and "skipped 1 unreadable line" in err and "a verdict may be in them" in err
    junit = (copied / "verdicts.junit.xml").read_text()
    assert 'type="unreadable"' in junit
    assert json.loads((copied / "verdicts.json").read_text())["unreadable"]
    store = ResultsStore(copied)
    last = json.loads(rows.splitlines()[-1])
    store.append(last)
    assert store.read().summary() is None
    assert (copied / "results.jsonl").read_bytes().startswith(rows)
    assert main(["run", str(campaign), "--out", str(copied), "--quiet", "--fail-on", "refuted"]) == 0
    whole = (copied / "results.jsonl").read_bytes()
    (copied / "results.jsonl").write_bytes(whole[:-1])
    store.append(last)
    assert store.read().summary() is None and (copied / "results.jsonl").read_bytes().startswith(whole)
