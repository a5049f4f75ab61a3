"""The `privaudit` command line.

    privaudit run [CAMPAIGN.toml] [--out DIR] [--force]   run a campaign (the embedded demo by default),
        [--backend local|ray] [--workers N]                N cells at once in local processes or Ray tasks;
                                                           it ends with the verdict table
    privaudit check [CAMPAIGN.toml] [--out DIR] [--force]  every pre-flight check of `run`, no training:
                                                           a one-paragraph summary and an estimate of
                                                           each cell's time, or the one-line error
    run, check, claims: [--allow-code]                     import the modules a campaign lists in
                                                           [campaign] imports (their code runs)
    privaudit list [KIND] [--json | --format FORMAT]       what a campaign can name: defenses, attacks,
                                                           scenarios, threats, topologies, models, datasets
                                                           (FORMAT: text, json, markdown)
    privaudit claims [CAMPAIGN.toml] [--json]              each run's claim beside its sound ε
    privaudit report RESULTS_DIR [-o FILE]                 re-render the report of a results directory
        [--format html|json]                               json: the verdict table's records on stdout
    run, report: [--fail-on VERDICT]                       the privacy gate: exit 1 on a verdict of that
                                                           kind (`privaudit.reports.gate`)
    privaudit audit MECHANISM [--param K=V ...] [--json]   empirical DP lower bound of a mechanism vs its claim
        [--claim-eps E [--claim-delta D]]                  … or vs a claim you state
    privaudit weights                                      the LPIPS backbone files: where they go, which are there
    privaudit weights lpips [--from FILE]                  fetch torchvision's AlexNet weights once (online), or
                                                           install a weights file you have (privaudit.weights)
    every command: [--threads N]                           torch's CPU threads (default 1; see privaudit.threads)

Exit status: 0 done (the gate passed); 1 the privacy gate failed; 2 a `PrivauditError` (bad field,
missing file, unknown name), a bad option, or what the machine refused (a full disk, a file-size
limit, memory), printed on one line; 3 a bug of privaudit, with its traceback; 130 interrupted.
Results already written stay on disk. The thread policy is set before
torch is first imported (`privaudit.threads`), which is why every heavy import here is inside a
command.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from privaudit import __version__, threads
from privaudit.errors import ConfigError, PrivauditError, UsageError, json_text, printable


class _Parser(argparse.ArgumentParser):
    """argparse whose errors (a missing argument, `--dim abc`) are a `UsageError`, printed on one
    line with exit code 2 like every other error, instead of the usage text: `--dim: expected a
    whole number, got 'abc'`, or `audit: the following arguments are required: mechanism`."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            raise UsageError(message.removeprefix("argument "))
        command = self.prog.removeprefix("privaudit").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def _whole(minimum: int, maximum: int | None = None):
    """An argparse type: a whole number in [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    return parse


def _finite(text: str) -> float:
    """An argparse type: a finite number (inf and nan mean nothing to any option)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _say_skipped(directory: str | Path) -> None:
    """Warn on stderr, in one line, about lines of a results file that cannot be read."""
    from privaudit.store import ResultsStore

    skipped = ResultsStore(directory).read().summary()
    if skipped:
        print(f"privaudit: warning: {printable(skipped)}", file=sys.stderr)


def _warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"privaudit: warning: {printable(warning)}", file=sys.stderr)


@contextlib.contextmanager
def _about(campaign: str | None) -> Iterator[None]:
    """Name the campaign file in a one-line error that a cell's pre-flight raised without it
    (`defense[0] (dpsgd, seed 0): batch_size 32 exceeds …`), as every error of the file itself is."""
    try:
        yield
    except ConfigError as error:
        text = str(error)
        raise ConfigError(text if campaign is None or text.startswith(f"{campaign}:") else f"{campaign}: {text}") \
            from None


def _run(args: argparse.Namespace) -> int:
    from privaudit.campaign.config import read_campaign
    from privaudit.campaign.executors import make_executor
    from privaudit.campaign.run import run_campaign
    from privaudit.reports.html import render_report
    from privaudit.reports.summary import summary, summary_table

    fail_on = _fail_on(args)
    executor = make_executor(args.backend, args.workers, args.ray_address)
    campaign, text = read_campaign(args.campaign, allow_code=args.allow_code)
    _warn(campaign.warnings())
    out = Path(args.out) if args.out else Path("results") / campaign.campaign.name
    print(f"campaign '{campaign.campaign.name}': results in {printable(str(out))}")
    with _about(args.campaign):
        store = run_campaign(campaign, text, out, force=args.force, progress=not args.quiet, executor=executor)
    report = render_report(out)
    print(f"results: {printable(str(store.path))}")
    print(f"report:  {printable(str(report.resolve()))}")
    found = summary(out)
    print(f"\n{summary_table(found)}")
    return _gate(out, found, fail_on)


def _fail_on(args: argparse.Namespace) -> list[str]:
    """The statuses `--fail-on` names, checked before any work (`privaudit.reports.gate.statuses`)."""
    from privaudit.reports.gate import statuses

    return statuses(args.fail_on)


def _gate(results_dir: str | Path, found: dict, fail_on: list[str]) -> int:
    """Exit status 1 when a verdict's status is one `fail_on` names, after writing the verdicts for
    a CI system and saying which verdicts failed (on stderr, where a `--format json` reader's
    stdout stays JSON); 0 otherwise, and without `--fail-on`."""
    if not fail_on:
        return 0
    from privaudit.reports.gate import gate_fails, gate_line, write_gate_files

    written = write_gate_files(results_dir, found, fail_on)
    print(f"{gate_line(found, fail_on)} (verdicts: {printable(str(written[0]))}, {printable(str(written[1]))})",
          file=sys.stderr)
    return 1 if gate_fails(found, fail_on) else 0


def _check(args: argparse.Namespace) -> int:
    from privaudit.campaign.config import read_campaign
    from privaudit.campaign.preflight import preflight

    campaign, _ = read_campaign(args.campaign, allow_code=args.allow_code)
    with _about(args.campaign):
        found = preflight(campaign, Path(args.out) if args.out else Path("results") / campaign.campaign.name,
                          args.force, progress=True)
    _warn(found.warnings)
    print(found.summary())
    for line in found.reach_lines() + found.estimate_lines():
        print(printable(line))
    return 0


def _list(args: argparse.Namespace) -> int:
    from privaudit.campaign.catalogue import catalogue, catalogue_text
    from privaudit.store import json_safe

    found = catalogue(args.kind)
    form = "json" if args.json else args.format
    if form == "json":
        print(json_text(json_safe(found), indent=2, allow_nan=False, default=str))
    elif form == "markdown":
        from privaudit.campaign.catalogue import catalogue_markdown

        print(catalogue_markdown(found))
    else:
        print(catalogue_text(found))
    return 0


_CLAIM_COLUMNS = ("label", "notion", "adjacency", "eps_claimed", "eps_stated", "eps_sound", "delta", "horizon")


_CELL_WIDTH = 44


def _cell_text(value) -> str:
    """A table cell: numbers to 4 significant digits, text escaped (`printable`: a plugin's claim is
    its author's text) and cut when long (it is printed in full below)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = printable(str(value))
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + "…"


def _understated_by(row: dict) -> str | None:
    """Why a claim row is below its sound accountant (ε, else δ), in words, or None: the accounting
    finding the report's verdicts would name, said where the claims are listed."""
    for name, claimed, sound in (("ε", row.get("eps_claimed"), row.get("eps_sound")),
                                 ("δ", row.get("delta"), row.get("delta_sound"))):
        if isinstance(claimed, (int, float)) and isinstance(sound, (int, float)) and claimed < sound * (1 - 1e-6):
            return (f"the claim's {name} = {claimed:.4g} is below the sound accountant's {sound:.4g} for the mechanism "
                    "the code runs")
    return None


def _claims(args: argparse.Namespace) -> int:
    from privaudit.campaign.cells import claims
    from privaudit.campaign.config import read_campaign

    from privaudit.store import json_safe

    campaign, _ = read_campaign(args.campaign, allow_code=args.allow_code)
    with _about(args.campaign):
        rows = claims(campaign)
    if args.json:
        print(json_text(json_safe(rows), indent=2, allow_nan=False))
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
        print(f"\n{printable(row['label'])}: {printable(row['equation'])}")
        understated = _understated_by(row)
        if understated:
            print(f"  understated: {understated}")
        for finding in row.get("findings") or []:
            print(f"  finding ({printable(finding['kind'])}): {printable(finding['text'])}")
        print(f"  adjacency: {printable(row['adjacency'])}")
        print(f"  sound ε: {printable(row['sound_method'])}")
        for assumption in row["assumptions"]:
            print(f"  assumption: {printable(assumption)}")
        for statement in row["statements"]:
            print(f"  the paper also states: {printable(statement)}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from privaudit.files import placed, write_inside
    from privaudit.store import output_file
    from privaudit.reports.html import render_report

    fail_on = _fail_on(args)
    if Path(args.results_dir).is_file():
        raise UsageError(f"{args.results_dir} is a file: report takes the results folder that holds results.jsonl")
    output = output_file(args.results_dir, args.output) if args.output else None
    try:
        if args.format == "json" or fail_on:
            from privaudit.store import json_safe
            from privaudit.reports.summary import summary

            found = summary(args.results_dir)
        if args.format == "json":
            text = json_text(json_safe(found), indent=2, allow_nan=False)
            if output is not None:
                write_inside(*placed(args.results_dir, output), (text + "\n").encode("utf-8"), "the report")
            else:
                print(text)
            _say_skipped(args.results_dir)
            return _gate(args.results_dir, found, fail_on)
        report = render_report(args.results_dir, output)
        _say_skipped(args.results_dir)
        print(f"report: {printable(str(report.resolve()))}")
        return _gate(args.results_dir, found, fail_on) if fail_on else 0
    except BrokenPipeError:
        raise  # the reader of stdout left: `main` ends quietly
    except OSError as error:
        raise PrivauditError(f"cannot write the report: {error.strerror or error} ({error.filename or output})") from None


def _key_values(items: Sequence[str]) -> dict[str, str]:
    """`--param K=V` items as a dict; ConfigError on a malformed or repeated item."""
    from privaudit.errors import ConfigError

    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param {item!r}: expected KEY=VALUE")
        if key.strip() in params:
            raise ConfigError(f"--param {key.strip()}: given twice")
        params[key.strip()] = value.strip()
    return params


def _number(value) -> str:
    return _cell_text(value) if not isinstance(value, str) else value


def _audit(args: argparse.Namespace) -> int:
    from privaudit.attacks.audit.mechanism_audit import audit

    report = audit(args.mechanism, _key_values(args.param), adjacency=args.adjacency, dim=args.dim,
                   releases=args.releases, samples=args.samples, confidence=args.confidence, delta=args.delta,
                   seed=args.seed, claim_eps=args.claim_eps, claim_delta=args.claim_delta)
    row = report.as_dict()
    if args.json:
        print(json_text(row, indent=2))
        return 0
    params = ", ".join(f"{key} = {_number(value)}" for key, value in row["params"].items())
    print(f"{report.title} ({params}); adjacency {row['adjacency']}, dim {row['dim']}, {row['releases']} "
          f"release(s) seen together; {row['samples']:,} samples per input, confidence {row['confidence']:g}")
    print(f"pair: {row['pair']['label']}")
    exact, sound = row["exact"] or {}, row["sound"]
    print(f"  ε_LB = {_number(row['eps_lb'])} at δ = {row['delta']:g}   (exact for the pair: "
          f"{_number(exact.get('eps'))}; sound: {_number(sound['eps'])})")
    print(f"  δ_LB = {_number(row['delta_lb'])} at ε = {_number(row['delta_lb_eps'])}   (exact for the pair: "
          f"{_number(exact.get('delta'))}; sound: {_number(sound['delta'])})")
    claim = row["claim"]
    if claim is not None:
        print(f"claim: {claim['statement']}: {claim['equation']}")
        for statement in claim["statements"]:
            print(f"  the paper also states: {statement}")
    verdict = row["verdict"]
    print(f"verdict: {verdict['status']} — {verdict['reason']}")
    tightness = row["tightness"]
    print(f"tightness of the {tightness['of']} bound: {_number(tightness['sound'])} of the sound value, "
          f"{_number(tightness['exact'])} of the pair's exact value ({row['wall_s']:.1f} s)")
    return 0


FAIL_ON_HELP = ("the privacy gate: exit 1 when a verdict has this status (refuted, understated, …; repeatable or "
                "comma-separated), saying which on one line, with the verdicts written to verdicts.json and "
                "verdicts.junit.xml in the results folder")

_MAX_THREADS = 1024


def _common() -> argparse.ArgumentParser:
    """The options every command has."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--threads", type=_whole(0, _MAX_THREADS), metavar="N",
                        help="torch's CPU threads (default: OMP_NUM_THREADS when set, else 1; 0: one per core); "
                        "waiting threads sleep (OMP_WAIT_POLICY=PASSIVE unless set), so a busy machine does not "
                        "slow a run down many times")
    return common


def _code() -> argparse.ArgumentParser:
    """The opt-in of commands that read a campaign: a defense, model or data loader imported by path
    runs its module."""
    code = argparse.ArgumentParser(add_help=False)
    code.add_argument("--allow-code", action="store_true",
                      help="import the modules the campaign lists in [campaign] imports (a defense kind = "
                      "'module:Class', a model = 'module:factory', a dataset = 'module:loader'), which runs their "
                      "code; without it such a campaign is refused. Installed entry points and what privaudit "
                      "ships need no flag")
    return code


def _weights(args: argparse.Namespace) -> int:
    from privaudit import weights

    if args.name is None:
        if args.source is not None:
            raise UsageError("weights: --from installs a backbone; name it: privaudit weights lpips --from FILE")
        return _installed_weights()
    if args.source is not None:
        found, fetched = weights.install_from(args.source), False
    else:
        found, fetched = weights.download()
    what = ("torchvision's published ImageNet AlexNet weights" if found.published
            else "a user file, not torchvision's published ImageNet weights: every LPIPS scored with it says so")
    done = "installed" if args.source is not None else "downloaded" if fetched else "already installed"
    print(printable(f"{done}: {found.path} (sha256 {found.sha256[:8]}…), {what}"))
    published = weights.published_path()
    if not found.published and published.is_file():
        print(printable(f"note: scoring uses {published} first (torchvision's published weights); remove it to "
                        "score with this file"))
    return 0


def _installed_weights() -> int:
    """`privaudit weights`: the folder, each backbone file it can hold, and which one scoring uses."""
    from privaudit import weights

    used = weights.scoring_path()
    where = weights.VARIABLE if os.environ.get(weights.VARIABLE, "").strip() else (
        f"torch hub's checkpoints; set {weights.VARIABLE} for another folder")
    print(printable(f"LPIPS backbone (AlexNet trunk) folder: {weights.directory()} ({where})"))
    for what, path, present in weights.installed():
        mark = "used by scoring" if path == used else "installed" if present else "absent"
        print(printable(f"  {path.name:<28} {mark:<16} {what}"))
    if used is None:
        print("LPIPS is reported unavailable until one is installed: privaudit weights lpips (online), or "
              "privaudit weights lpips --from FILE")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="privaudit", description="Audit private decentralized learning.")
    parser.add_argument("--version", action="version", version=f"privaudit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    common = [_common()]
    reading = [_common(), _code()]

    run = commands.add_parser("run", parents=reading, help="run a campaign and write its results and report")
    run.add_argument("campaign", nargs="?", help="campaign TOML file (default: the embedded privaudit/presets/demo.toml)")
    run.add_argument("--out", help="results directory (default: results/<campaign name>)")
    run.add_argument("--force", action="store_true", help="recompute cells that already have results")
    run.add_argument("--quiet", action="store_true", help="no progress bars or progress lines")
    run.add_argument("--backend", default="local", metavar="{local,ray}",
                     help="where cells run: local (this machine's processes) or ray (default local)")
    run.add_argument("--workers", type=_whole(1), default=1, metavar="N",
                     help="cells run at once (default 1: one after another in this process)")
    run.add_argument("--fail-on", action="append", default=[], metavar="VERDICT",
                     help=FAIL_ON_HELP)
    run.add_argument("--ray-address", metavar="ADDR", help="a running Ray cluster to join (default: start a local Ray "
                     "instance with --workers CPUs); the results directory must be shared with its nodes")
    run.set_defaults(handler=_run)

    check = commands.add_parser("check", parents=reading,
                                help="every pre-flight check of run, without training (with --allow-code, the "
                                "campaign's own modules are imported, which runs their code): a summary or the error")
    check.add_argument("campaign", nargs="?", help="campaign TOML file (default: the embedded demo)")
    check.add_argument("--out", help="results directory a run would use, to say which cells it would skip "
                       "(default: results/<campaign name>)")
    check.add_argument("--force", action="store_true", help="as run --force: count finished cells as to run")
    check.set_defaults(handler=_check)

    listing = commands.add_parser("list", parents=common, help="what a campaign can name, with parameters and defaults")
    listing.add_argument("kind", nargs="?", metavar="KIND", help="only one category: defenses, attacks, scenarios, "
                         "threats, topologies, models or datasets")
    form = listing.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON object, by category (as --format json)")
    form.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                      help="text (default), json, or markdown: the page docs/reference.md is, over every category")
    listing.set_defaults(handler=_list)

    claims = commands.add_parser("claims", parents=reading,
                                 help="print each run's privacy claim beside its sound ε (no training)")
    claims.add_argument("campaign", nargs="?", help="campaign TOML file (default: the embedded demo)")
    claims.add_argument("--json", action="store_true", help="a JSON list, one object per run")
    claims.set_defaults(handler=_claims)

    report = commands.add_parser("report", parents=common, help="render the HTML report of a results directory")
    report.add_argument("results_dir", help="a directory holding results.jsonl")
    report.add_argument("-o", "--output", help="report file (default: RESULTS_DIR/report.html; with --format json: "
                        "stdout)")
    report.add_argument("--format", choices=("html", "json"), default="html",
                        help="html: render the report (default); json: print the verdicts as JSON records")
    report.add_argument("--fail-on", action="append", default=[], metavar="VERDICT", help=FAIL_ON_HELP)
    report.set_defaults(handler=_report)

    audit = commands.add_parser(
        "audit", parents=common, help="empirical DP lower bounds of a mechanism, beside its claim and exact curve",
        description="Sample the mechanism on neighbouring inputs, bound ε (at --delta) and δ (at the claim's ε) "
        "from below at --confidence, and judge the claim: refuted / consistent / not evaluable. Mechanisms: laplace, "
        "gaussian, rr, onebit, ternary, dpdl_cross_gradient, lt_admm_round, tvss_state, tvss_gradient; an unknown "
        "--param names the mechanism's parameters.")
    audit.add_argument("mechanism", help="the mechanism to audit (see above)")
    audit.add_argument("--param", action="append", default=[], metavar="K=V",
                       help="a mechanism parameter, e.g. r=100 for ternary (repeatable)")
    audit.add_argument("--adjacency", default="l1", help="l1, l2 or linf: neighbours have ‖x − x′‖ ≤ 1 (default l1)")
    audit.add_argument("--dim", type=_whole(1), default=1, help="input dimension (default 1)")
    audit.add_argument("--releases", type=_whole(1), default=1,
                       help="releases of the same input the attacker sees together (default 1)")
    audit.add_argument("--samples", type=_whole(100),
                       help="observations per input (default 1e6, fewer when dim × releases > 32, at least 1e4)")
    audit.add_argument("--delta", type=_finite, default=1e-5,
                       help="δ at which ε_LB is reported, and of claims that take δ as input (default 1e-5)")
    audit.add_argument("--confidence", type=_finite, default=0.95, help="confidence of the bounds (default 0.95)")
    audit.add_argument("--claim-eps", type=_finite, metavar="E",
                       help="test the claim you state, (E, --claim-delta)-DP for this adjacency and releases, instead "
                       "of the mechanism's own formula (the ε bound is then taken at your δ)")
    audit.add_argument("--claim-delta", type=_finite, metavar="D", help="δ of the claim you state (default 0)")
    audit.add_argument("--seed", type=_whole(0), default=0, help="random seed (default 0)")
    audit.add_argument("--json", action="store_true", help="one JSON object")
    audit.set_defaults(handler=_audit)

    weighting = commands.add_parser(
        "weights", parents=common, help="the LPIPS backbone: which weights are installed, fetch them, or install a file",
        description="LPIPS needs ImageNet AlexNet weights that no dependency ships. Without a name: the files "
        "scoring looks for and which are there. `weights lpips` downloads torchvision's published weights once into "
        "torch hub's cache (or PRIVAUDIT_WEIGHTS) and checks their hash; offline, `--from FILE` installs a file you "
        "have (read with torch.load(weights_only=True), checked for AlexNet's feature layers).")
    weighting.add_argument("name", nargs="?", choices=("lpips",), help="the backbone to install: lpips (AlexNet)")
    weighting.add_argument("--from", dest="source", metavar="FILE",
                           help="install this weights file instead of downloading: a state dict holding AlexNet's "
                           "features.N.weight/bias (a whole torchvision alexnet state dict will do); one that is not "
                           "torchvision's published file is used, and every LPIPS scored with it says so")
    weighting.set_defaults(handler=_weights)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        threads.apply(args.threads)
        with warnings.catch_warnings():
            # numpy's floating-point RuntimeWarnings (an overflow in an accountant at an extreme
            # parameter) would print lines beside the one-line error or the table each command
            # already gives for that case
            warnings.simplefilter("ignore", RuntimeWarning)
            return args.handler(args)
    except PrivauditError as error:
        print(f"privaudit: error: {printable(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("privaudit: interrupted; finished cells are kept and a re-run resumes", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader closed the pipe (`privaudit list | head -1`): stop quietly, as `yes | head` does,
        # and point stdout at /dev/null so that Python's flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (OSError, MemoryError) as error:
        # the machine refused (a full disk, a file-size limit, memory): the environment's failure,
        # not the input's nor a bug; one line, and never the gate's status 1
        print(f"privaudit: error: {printable(_environment_error(error))}; finished cells are kept", file=sys.stderr)
        return 2
    except Exception:  # noqa: BLE001 - a bug: its traceback, and a status no gate reads as a verdict
        traceback.print_exc()
        print(f"privaudit: internal error (a bug of privaudit {__version__}: the traceback above says where); "
              "finished cells are kept", file=sys.stderr)
        return INTERNAL_ERROR


INTERNAL_ERROR = 3
"""The exit status of a bug: not 1, which `--fail-on` gives a gated verdict, so that a crash is
never read as a verdict (nor, by `|| true` on status 1 only, as a passing build)."""


def _environment_error(error: BaseException) -> str:
    """An OSError or MemoryError as one line: what failed and on which file."""
    if isinstance(error, MemoryError):
        return "out of memory"
    where = f" ({error.filename})" if getattr(error, "filename", None) else ""
    return f"{error.strerror or error}{where}"


if __name__ == "__main__":
    sys.exit(main())
