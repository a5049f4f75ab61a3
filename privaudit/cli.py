"""The `privaudit` command line.

    privaudit run [CAMPAIGN.toml] [--out DIR] [--force]   run a campaign (the embedded demo by default)
    privaudit claims [CAMPAIGN.toml] [--json]              each run's claim beside its sound ε
    privaudit report RESULTS_DIR [-o FILE]                 re-render the report of a results directory

Any `PrivauditError` (bad field, missing file, unknown name) is printed on one line and exits
with code 2; results already written stay on disk.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from privaudit import __version__
from privaudit.errors import PrivauditError


def _run(args: argparse.Namespace) -> int:
    from privaudit.campaign import read_campaign, run_campaign
    from reports.html import render_report

    campaign, text = read_campaign(args.campaign)
    out = Path(args.out) if args.out else Path("results") / campaign.campaign.name
    print(f"campaign '{campaign.campaign.name}': results in {out}")
    store = run_campaign(campaign, text, out, force=args.force, progress=not args.quiet)
    report = render_report(out)
    print(f"results: {store.path}")
    print(f"report:  {report.resolve()}")
    return 0


_CLAIM_COLUMNS = ("label", "notion", "adjacency", "eps_claimed", "eps_stated", "eps_sound", "delta", "horizon")


_CELL_WIDTH = 44


def _cell_text(value) -> str:
    """A table cell: numbers to 4 significant digits, long text cut (it is printed in full below)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + "…"


def _claims(args: argparse.Namespace) -> int:
    from privaudit.campaign import claims, read_campaign

    campaign, _ = read_campaign(args.campaign)
    rows = claims(campaign)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    columns = list(_CLAIM_COLUMNS)
    if any(row["delta_sound"] is not None for row in rows):
        columns.insert(columns.index("delta") + 1, "delta_sound")
    table = [columns] + [[_cell_text(row[column]) for column in columns] for row in rows]
    widths = [max(len(line[k]) for line in table) for k in range(len(columns))]
    for number, line in enumerate(table):
        print("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip())
        if number == 0:
            print("  ".join("-" * width for width in widths))
    for row in rows:
        print(f"\n{row['label']}: {row['equation']}")
        print(f"  adjacency: {row['adjacency']}")
        print(f"  sound ε: {row['sound_method']}")
        for assumption in row["assumptions"]:
            print(f"  assumption: {assumption}")
        for statement in row["statements"]:
            print(f"  the paper also states: {statement}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from reports.html import render_report

    report = render_report(args.results_dir, args.output)
    print(f"report: {report.resolve()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="privaudit", description="Audit private decentralized learning.")
    parser.add_argument("--version", action="version", version=f"privaudit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run a campaign and write its results and report")
    run.add_argument("campaign", nargs="?", help="campaign TOML file (default: the embedded campaigns/demo.toml)")
    run.add_argument("--out", help="results directory (default: results/<campaign name>)")
    run.add_argument("--force", action="store_true", help="recompute cells that already have results")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(handler=_run)

    claims = commands.add_parser("claims", help="print each run's privacy claim beside its sound ε (no training)")
    claims.add_argument("campaign", nargs="?", help="campaign TOML file (default: the embedded demo)")
    claims.add_argument("--json", action="store_true", help="a JSON list, one object per run")
    claims.set_defaults(handler=_claims)

    report = commands.add_parser("report", help="render the HTML report of a results directory")
    report.add_argument("results_dir", help="a directory holding results.jsonl")
    report.add_argument("-o", "--output", help="report file (default: RESULTS_DIR/report.html)")
    report.set_defaults(handler=_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except PrivauditError as error:
        print(f"privaudit: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("privaudit: interrupted; finished cells are kept and a re-run resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
