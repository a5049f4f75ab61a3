"""One namespace (issue 36, item 8): privaudit installs as the `privaudit` package alone, its
attacks, defenses, reports and presets below it, so no folder of a user's working directory
(a `reports/` or `attacks/` package of their own) can stand in for one of privaudit's modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHADOWS = ("reports", "attacks", "defenses", "campaigns", "presets")
"""The names privaudit's subpackages had at the top level before, and its presets' folder."""


TINY = ('[data]\ndataset = "digits"\nmax_train = 100\n[[defense]]\nkind = "dp_dpsgd"\nagents = 3\nrounds = 1\n'
        'model = "logreg"\nbatch_size = 4\n')
"""A campaign whose run imports the defenses, the claims and the report, in a few seconds."""


def _run_beside_shadows(folder: Path, campaign: Path) -> str:
    """Run `campaign` through the API from `folder`, which holds a raising package under each name
    of `SHADOWS`; what the run printed (its rows and verdicts)."""
    for name in SHADOWS:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(f'raise ImportError("the user\'s {name} was imported")\n')
    code = (f"import privaudit; found = privaudit.run({str(campaign)!r}, 'out'); "
            "print(len(found.rows), [v.status for v in found.verdicts])")
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_users_folders_named_like_privaudits_subpackages_shadow_nothing(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    assert _run_beside_shadows(tmp_path, tmp_path / "tiny.toml") == "1 ['not audited']"


@pytest.mark.slow
def test_the_quickstart_runs_beside_a_users_shadowing_folders(tmp_path):
    quickstart = ROOT / "privaudit" / "presets" / "quickstart.toml"
    assert _run_beside_shadows(tmp_path, quickstart) == "2 ['consistent']"


def test_the_wheel_holds_the_privaudit_package_alone_with_its_presets_and_templates(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copytree(ROOT / "privaudit", source / "privaudit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-w", str(tmp_path / "wheel"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "wheel").glob("privaudit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"privaudit", next(top for top in tops if top.endswith(".dist-info"))}
    assert {"privaudit/presets/demo.toml", "privaudit/presets/quickstart.toml",
            "privaudit/reports/templates/report.html", "privaudit/attacks/views/__init__.py",
            "privaudit/defenses/dpsgd.py"} <= set(names)
    top_level = next(name for name in names if name.endswith("top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["privaudit"]
