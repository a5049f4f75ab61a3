"""Helpers for tests: small campaigns built from dicts the way a user's TOML would be, and a
set-up small enough to check one round of a defense by hand."""

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any
from unittest import mock

from privaudit.campaign.config import parse_campaign


def small_campaign(defenses: list[dict[str, Any]], seeds=(0,), **data: Any):
    """A validated campaign on digits with the given `[[defense]]` tables."""
    raw = {
        "campaign": {"name": "test", "seeds": list(seeds)},
        "data": {"dataset": "digits", **data},
        "defense": defenses,
    }
    return parse_campaign(raw)


def tiny_setup(n_agents: int = 3, *, topology: str = "complete", samples: int = 6, features: int = 2,
               classes: int = 2, seed: int = 0, module=None):
    """A Setup small enough to check one round by hand: `n_agents` agents with `samples` random
    samples each of a `features`-dimensional problem, a linear classifier (or `module`)."""
    import numpy as np
    import torch

    from privaudit.data import Dataset, Normalisation
    from privaudit.flatmodel import FlatModel
    from privaudit.models import build_model
    from privaudit.sampling import LocalData
    from privaudit.setup import Setup
    from privaudit.topology import Topology

    generator = torch.Generator().manual_seed(seed)
    total = n_agents * samples
    x = torch.randn((total, features), generator=generator)
    y = torch.randint(0, classes, (total,), generator=generator)
    data = Dataset("tiny", x, y, x[:4], y[:4], classes, Normalisation((0.0,), (1.0,)), tuple(map(str, range(classes))))
    torch.manual_seed(seed)
    module = module if module is not None else build_model("logreg", (features,), classes)
    shards = [np.arange(i * samples, (i + 1) * samples) for i in range(n_agents)]
    return Setup(Topology.build(topology, n_agents), FlatModel(module), "logreg", data,
                 LocalData(x, y, shards), torch.Generator().manual_seed(seed + 1), seed)


def one_line_error(capsys, argv: list[str]) -> str:
    """Run the CLI; assert it failed with one `privaudit: error:` line (exit 2) and no traceback."""
    from privaudit.cli import main

    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("privaudit: error: ") and "Traceback" not in err
    return err


def without_notation(html: str) -> str:
    """A rendered page without the markup the report adds to text (`privaudit.reports.notation`): line-break
    opportunities in long runs, and the spans around a number in scientific notation or an
    unbreakable piece (they hold no other tag), so a test can look for the text it expects."""
    return re.sub(r'<span class="(?:nb|long)">([^<]*)</span>', r"\1", html.replace("<wbr>", ""))


def run_logged(directory: Path, campaign: str) -> tuple[int, str]:
    """`privaudit run` of the campaign text `campaign` in this process, its stdout and stderr going
    to a file (not a terminal), a progress line at every update (`PRIVAUDIT_PROGRESS_SECONDS=0`):
    its exit status and the log as a reader of that file sees it."""
    from privaudit.cli import main

    (directory / "c.toml").write_text(campaign)
    log = directory / "log"
    with log.open("w") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle), \
            mock.patch.dict(os.environ, {"PRIVAUDIT_PROGRESS_SECONDS": "0"}):
        code = main(["run", str(directory / "c.toml"), "--out", str(directory / "out")])
    return code, log.read_text()


def _toml_value(value: Any) -> str:
    """A campaign field's value as TOML: inline tables for dicts, JSON (which TOML reads) otherwise."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml_value(item)}" for key, item in value.items()) + " }"
    return json.dumps(value)


def campaign_file(path: Path, defense: dict[str, Any], table: str, fields: dict[str, Any],
                  data: tuple[str, ...] = ()) -> str:
    """A one-seed campaign on digits (`data`: more `[data]` lines) with one defense and one `[[table]]`
    (attack, audit …) written to `path`; its path as text, for the command line."""
    lines = ["[campaign]", 'name = "t"', "seeds = [0]", "[data]", 'dataset = "digits"', *data, "[[defense]]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in defense.items()] + [f"[[{table}]]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in fields.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)

