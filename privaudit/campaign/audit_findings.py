"""Audit findings: the results rows of a campaign's `[[audit]]` tables.

A mechanism audit (`privaudit.attacks.audit.mechanism_audit.audit`) samples one release in isolation; a canary audit
(`privaudit.attacks.audit.canary_audit.audit_game`) trains a defense many times with and without a canary record. Both
end in an ε lower bound at a stated confidence, which a row sets beside the claim and the sound ε
with a verdict, in one shape for both kinds (the report reads only these common fields; the
audit's own record is kept under `detail`):

    kind, method, subject, defense, defense_label, status, eps_lb, delta_lb, delta_lb_eps, delta,
    confidence, samples, eps_claimed, eps_stated, eps_sound, delta_sound, eps_estimate, estimate_method,
    exact, verdict, tightness, curve, attack, findings, detail

Three kinds of number stay apart in it: the rigorous bounds (eps_lb, delta_lb, with their
confidence), the estimate (eps_estimate, named by estimate_method, never a bound), and the claim
(eps_claimed, the paper's formula recomputed; eps_stated, the number the paper prints) beside the
sound accountant's eps_sound. `attack` says in words what the audit did (canary, channels heard,
adjacency, how the test was chosen).

A canary audit's verdict compares ε_LB with the ε the paper's formula gives (`eps_claimed`) at
the claim's δ, and a mechanism audit's its δ_LB at the claimed ε with the claimed δ; what that
means for the claim (refuted, refuted only for a range of assumed constants, outside the
theorem's range, ...) is decided by the one rule of `privaudit.attacks.audit.verdict` for both. A defense that
claims no privacy has nothing to refute, and its bound stands alone. `findings` are the claim's
analytic findings and, for a mechanism audit of a claim whose relation the code does not enforce
for records, the record-level measurement (`privaudit.attacks.audit.mechanism_audit`'s premise).

A reconstruction audit (`privaudit.attacks.audit.reconstruction_game.play`) plays the informed-adversary game
on one run: in each trial the victim holds exactly one record drawn from a candidate pool, an
inversion attack rebuilds it from what the threat model heard, and the successes force ε up
(`privaudit.attacks.audit.reconstruction_bounds`). Its row has the canary row's fields; its verdict uses the
same rule, for the relation the game tests, replacing one record (an add/remove claim (ε, δ)
implies (2ε, (1 + e^ε)δ) for it).

A position audit (`privaudit.attacks.audit.position.position_audit`) runs one canary audit for many attackers
at once, each a curious agent (or coalition) hearing only what it receives: its row is a canary
row whose bound is the strongest pair's, judged against the defense's claim (which holds for every
attacker), with every pair under `pairs` (attacker, graph distance, ε_LB, estimate, the pairwise
network accountant's figures and the pair's own verdict where a pairwise claim exists).

A canary audit's game is built here from a campaign cell or a `[[defense]]` table
(`game_for_cell`, `game_for_table`): `privaudit.attacks.audit.canary_audit` takes a set-up and a defense's parameters,
and only this layer knows how a campaign turns into them.
"""

from __future__ import annotations

import math
import time
from typing import Any

from privaudit.attacks.audit.bounds import perfect_test_eps
from privaudit.attacks import views
from privaudit.attacks.audit.canary_audit import Game, audit_delta, audit_game, make_game, one_run_game
from privaudit.attacks.audit.canary_statistics import SELECT_FRACTION
from privaudit.attacks.audit.mechanism_audit import audit
from privaudit.attacks.audit.mechanisms import MECHANISMS
from privaudit.attacks.audit.one_run import one_run_eps
from privaudit.attacks.audit.position import model_work, position_audit, positions
from privaudit.attacks.audit.reconstruction_bounds import reconstruction_bound
from privaudit.attacks.audit.reconstruction_game import ReconstructionGame, make_reconstruction_game, play
from privaudit.attacks.audit.verdict import Verdict, decide, threat_words
from privaudit.attacks.inversion import INVERSIONS
from privaudit.attacks.views import EXTRACTORS
from privaudit import __version__, devices
from privaudit.accounting import Claim, Neighbours
from privaudit.campaign.cells import AuditCell, Cell, build_setup, expand, shipped
from privaudit.campaign.config import AuditConfig, parse_campaign
from privaudit.errors import ConfigError
from privaudit.progress import Progress
from privaudit.threats import ACTIVE_THREATS
from privaudit.limits import limit, require
from privaudit.models import TORCHVISION


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def mechanism_finding(cell: AuditCell) -> dict[str, Any]:
    """The audit of `cell.table.mechanism` at the table's samples, then again at each size of its
    `curve` (each an independent audit with the same seed), for the tightness figure."""
    table = cell.table
    delta = 1e-5 if table.delta is None else table.delta

    def run(samples: int | None) -> Any:
        return audit(table.mechanism, table.params, adjacency=table.adjacency, dim=table.dim,
                     releases=table.releases, samples=samples, confidence=table.confidence, delta=delta,
                     seed=cell.seed)

    report = run(table.samples)
    record = report.as_dict()
    curve = [{"samples": point.samples, "eps_lb": point.eps_bound.value, "delta_lb": point.delta_bound.value}
             for point in map(run, sorted(set(table.curve)))]
    claim = record["claim"]
    return {
        "subject": report.title,
        "defense": MECHANISMS[table.mechanism].defense,
        "defense_label": None,
        "eps_lb": record["eps_lb"],
        "delta_lb": record["delta_lb"],
        "delta_lb_eps": record["delta_lb_eps"],
        "delta": delta,
        "confidence": table.confidence,
        "samples": report.samples,
        "eps_claimed": None if claim is None else claim["audited_eps"],
        "eps_stated": None,
        "eps_sound": _finite(report.sound.eps),
        "eps_estimate": None,
        "estimate_method": None,
        "delta_sound": _finite(report.sound.delta),
        "exact": record["exact"],
        "verdict": record["verdict"],
        "tightness": record["tightness"],
        "curve": curve,
        "attack": f"{report.title} sampled on the pair {record['pair']['label']}, {record['releases']} release(s)",
        "findings": (claim["findings"] if claim is not None else []) + (
            [{"kind": report.premise["kind"], "text": report.premise["text"]}] if report.premise else []),
        "relation": mechanism_relation(report),
        "detail": record,
    }


def mechanism_relation(report: Any) -> dict[str, Any]:
    """The neighbouring relation a mechanism audit samples (its inputs in the unit of the claim's
    sensitivity, ‖x − x′‖ ≤ 1 in the audit's norm) beside the claim's own."""
    audited = report.claim.claim.neighbours if report.claim is not None else None
    if audited is None:
        return {"claimed": None, "audited": f"‖x − x′‖ ≤ 1 ({report.adjacency})", "same": False,
                "why": "no claim states a relation for this mechanism"}
    if report.params.get("level", "claim") == "claim":
        return {"claimed": audited.words(), "audited": audited.words(), "same": True, "why": None}
    return {"claimed": audited.words(), "audited": Neighbours("replace-one", "record").words(), "same": False,
            "why": "the table asks for the record level (level = \"record\"): a measurement of the premise, "
                   "not of the claim's relation"}


def game_options(table: AuditConfig) -> dict[str, Any]:
    """The canary game's options that a `[[audit]]` table sets (`privaudit.attacks.audit.canary_audit.make_game`)."""
    return {"victim": table.victim, "threat": table.threat, "observer": table.observer, "links": table.links,
            "directed_links": table.directed_links, "canary": table.canary, "canary_label": table.canary_label,
            "canary_scale": table.canary_scale, "scenarios": table.channels, "statistic": table.statistic,
            "canary_norm": table.canary_norm, **({"liar": table.liar, "agents": table.agents}
                                                 if table.threat in ACTIVE_THREATS else {})}


def game_for_cell(cell: Cell, count: int = 1, **options: Any) -> Game:
    """The canary game of one training cell (its data, run shape, hyperparameters and seed), with
    `count` canaries and `privaudit.attacks.audit.canary_audit.make_game`'s options; every problem is a one-line
    ConfigError."""
    return make_game(build_setup(cell), cell.run.kind, cell.params, cell.run.rounds, count=count, **options)


def game_for_table(defense: dict[str, Any], data: dict[str, Any] | None = None, *, seed: int = 0, count: int = 1,
                   **options: Any) -> Game:
    """The canary game of a `[[defense]]` table and a `[data]` table, as a campaign file writes
    them; every problem is a one-line ConfigError. A kind or a model given by import path is
    imported: the Python caller names it in its own code."""
    imports = [name.partition(":")[0].strip() for name in (defense.get("kind"), defense.get("model"))
               if isinstance(name, str) and ":" in name and not name.startswith(TORCHVISION)]
    campaign = parse_campaign({"campaign": {"name": "canary", "seeds": [seed], "imports": imports}, "data": data or {},
                               "defense": [defense]}, allow_code=True)
    cells = expand(campaign)
    if len(cells) != 1:
        raise ConfigError(f"a canary audit runs one configuration; the defense table expands to {len(cells)}")
    return game_for_cell(cells[0], count, **options)


def canary_audit(defense: dict[str, Any], data: dict[str, Any] | None = None, *, runs: int = 200,
                 confidence: float = 0.95, delta: float | None = None, seed: int = 0, null: bool = False,
                 protocol: str = "auto", worlds: int | None = None, **options: Any) -> dict[str, Any]:
    """The repeated-runs canary audit of one defense table (`game_for_table`, then
    `privaudit.attacks.audit.canary_audit.audit_game`)."""
    game = game_for_table(defense, data, seed=seed, **options)
    return audit_game(game, runs=runs, confidence=confidence, delta=delta, seed=seed, null=null, protocol=protocol,
                      worlds=worlds)


def one_run_audit(defense: dict[str, Any], data: dict[str, Any] | None = None, *, canaries: int = 200,
                  guesses: int = 20, confidence: float = 0.95, delta: float | None = None, seed: int = 0,
                  **options: Any) -> dict[str, Any]:
    """The one-run audit of one defense table (`game_for_table` with `canaries` canaries, then
    `privaudit.attacks.audit.canary_audit.one_run_game`)."""
    game = game_for_table(defense, data, seed=seed, count=canaries, **options)
    return one_run_game(game, guesses=guesses, confidence=confidence, delta=delta, seed=seed)


def _game(cell: AuditCell) -> Game:
    table = cell.table
    return game_for_cell(cell.training, table.canaries if table.method == "one_run" else 1, **game_options(table))


def position_victims(cell: AuditCell) -> list[int]:
    """The victims of a position audit: `victims` ("all": every agent of the run), else `victim`."""
    table = cell.table
    if table.victims == "all":
        return list(range(cell.training.run.agents))
    return list(table.victims) if table.victims is not None else [table.victim]


def _attackers_of(cell: AuditCell, victim: int) -> list[int | list[int]] | None:
    """The table's attackers without those holding `victim` (with several victims, an attacker of
    one may be another's victim); None: every other agent."""
    attackers = cell.table.attackers
    if attackers is None or cell.table.victims is None:
        return attackers
    return [a for a in attackers if victim not in (a if isinstance(a, list) else [a])]


def _position_games(cell: AuditCell) -> list[tuple[Game, list[int | list[int]] | None]]:
    """A position audit's game per victim with its attackers, each checked against the run's graph
    (`positions`): ConfigError (one line) for an agent the graph lacks or an attacker holding the
    victim. The victims' games share the first one's claim, computed once: it does not depend on
    the victim, and on a complete graph of 16 it took 5 s a victim, 90 % of `check`'s time."""
    games = []
    claim = None
    for victim in position_victims(cell):
        if victim >= cell.training.run.agents:
            raise ConfigError(f"position audit: victim {victim} names no agent of 0..{cell.training.run.agents - 1}")
        game = game_for_cell(cell.training, 1, victim=victim, canary=cell.table.canary,
                             canary_label=cell.table.canary_label, canary_scale=cell.table.canary_scale, claim=claim)
        claim = game.claim
        attackers = _attackers_of(cell, victim)
        if attackers == []:
            raise ConfigError(f"position audit: every attacker holds victim {victim}")
        games.append((game, attackers))
    work = sum(model_work(game, attackers) for game, attackers in games)
    require("position_work", work, "position audit: the least-squares models of its victims and attackers")
    for game, attackers in games:
        positions(game, attackers)
    return games


def _position_game(cell: AuditCell) -> Game:
    """Check a position audit before it runs (`_position_games`); its first victim's game."""
    return _position_games(cell)[0][0]


def reconstruction_game(cell: AuditCell) -> ReconstructionGame:
    """The reconstruction game of the training cell `cell.training` (its data, run shape,
    hyperparameters and seed) as the table sets it; every problem is a one-line ConfigError."""
    table, training = cell.table, cell.training
    kind = training.run.kind
    scenario = table.scenario or next(s for k, s in EXTRACTORS if k == kind)
    return make_reconstruction_game(build_setup(training), kind, training.params, training.run.rounds,
                                    scenario=scenario, round=table.round, attack=table.attack,
                                    threshold_db=table.threshold_db, pool=table.pool, victim=table.victim,
                                    threat=table.threat, observer=table.observer, links=table.links,
                                    directed_links=table.directed_links)


def check_audit(cell: AuditCell) -> None:
    """Build a canary or reconstruction audit's game, so a victim, threat, channel or round its
    run cannot serve fails before anything runs, as a ConfigError naming the cell; a mechanism
    audit needs no check here. A canary audit's reach (`audit_reach`) is kept on the way."""
    if cell.training is None:
        return
    try:
        game = {"reconstruction": reconstruction_game, "position": _position_game}.get(cell.table.kind, _game)(cell)
    except ConfigError as error:
        raise ConfigError(f"{cell.where}: {error}") from None
    if cell.table.kind == "canary":
        _REACH[cell.id] = _reach(cell, game)


def _trials(runs: int, protocol: str) -> int:
    """The runs per side a repeated audit's bound counts: all of them when the threshold is fixed
    from the law ("model"), else those not held out to choose it."""
    return runs if protocol == "model" else runs - max(2, int(runs * SELECT_FRACTION))


def _ceiling(record: dict[str, Any]) -> float | None:
    """The ε_LB an error-free attack would reach with what this audit's bound counts: for repeated
    runs, every run (the threshold fixed from the law) or the part not held out; for one run
    (Steinke, Nasr & Jagielski 2023), every guess correct. None when the record says neither."""
    if isinstance(record.get("guesses"), int) and isinstance(record.get("canaries"), int):
        return one_run_eps(record["guesses"], record["guesses"], record["canaries"], record["delta"],
                           record["confidence"])
    runs = record.get("runs_per_side")
    if not isinstance(runs, int):
        return None
    whole_run = record.get("whole_run") or {}
    return perfect_test_eps(_trials(runs, record.get("protocol")), whole_run.get("confidence_each", record["confidence"]),
                            record["delta"])


def runs_needed(eps: float, confidence: float, delta: float, protocol: str, most: int) -> int | None:
    """The fewest runs per side whose error-free test certifies more than `eps` (`perfect_test_eps`
    inverted: it grows with the runs), None when not even `most` do."""
    def reaches(runs: int) -> bool:
        return perfect_test_eps(_trials(runs, protocol), confidence, delta) > eps

    if not reaches(most):
        return None
    low, high = 3, 4
    while not reaches(high):
        low, high = high, min(2 * high, most)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def _sampling(game: Game) -> str:
    """The canary's inclusion probability per local step, in words: one record among the victim's,
    drawn into a batch of the defense's public size (`views.batch_size`). A run that never samples
    it is the same in both worlds, so a rare canary needs many runs before any test tells them
    apart (docs/audits.md)."""
    try:
        size = views.batch_size(game.kind, game.params.model_dump())
    except Exception:  # noqa: BLE001 - a plugin's reader may not take these parameters: the rate is then not said
        size = None
    if not isinstance(size, int) or size < 1:
        return f"the canary is one record among the victim's {game.records:,} (the defense states no public " \
               "batch size, so its sampling rate is not known here)"
    rate = min(size / game.records, 1.0)
    missed = (1 - rate) ** game.rounds
    return (f"the canary is one record among the victim's {game.records:,}: a batch of {size:,} holds it with "
            f"probability {rate:.3g} a local step, and a run of {game.rounds:,} round{'' if game.rounds == 1 else 's'} of one step each never "
            f"samples it with probability {missed:.3g}")


_REACH: dict[str, str] = {}
"""`_reach` of each canary audit `check_audit` built, by cell id (a hash of the cell's normalised
configuration), so `privaudit check` says it without building the game again."""


def audit_reach(cell: AuditCell) -> str | None:
    """What a canary audit can show at its size, said by `privaudit check` before anything runs
    (`_reach`); None for other audits."""
    if cell.training is None or cell.table.kind != "canary":
        return None
    if cell.id not in _REACH:
        _REACH[cell.id] = _reach(cell, _game(cell))
    return _REACH[cell.id]


def _reach(cell: AuditCell, game: Game) -> str:
    """The largest ε the audit's runs (or guesses) can certify with an error-free test at its
    confidence, the runs per side needed to certify the claim's ε, and the canary's sampling rate,
    in one line."""
    table = cell.table
    claim, delta = game.claim.eps_claimed, audit_delta(game.claim, table.delta)
    confidence = f"{table.confidence:.0%} confidence, δ = {delta:.3g}"
    if table.method == "one_run":
        ceiling = one_run_eps(table.guesses, table.guesses, table.canaries, delta, table.confidence)
        reach = (f"one run, {table.guesses} guesses among {table.canaries} canaries: even every guess right "
                 f"certifies at most ε ≥ {ceiling:.3g} ({confidence})")
    else:
        protocol = table.protocol if table.protocol != "auto" else \
            ("model" if game.law_free is None and game.release is None and game.canaries.kind == "gradient" and claim
             else "held-out")
        ceiling = perfect_test_eps(_trials(table.runs, protocol), table.confidence, delta)
        reach = (f"{table.runs:,} runs per side ({'threshold from the law' if protocol == 'model' else 'a quarter held out'}"
                 f"{', as auto would likely choose' if table.protocol == 'auto' else ''}): an error-free test would "
                 f"reach ε ≥ {ceiling:.3g} at most ({confidence})")
        if claim is not None and math.isfinite(claim) and claim > 0:
            needed = runs_needed(claim, table.confidence, delta, protocol, limit("runs"))
            reach += (f"; certifying the claimed ε = {claim:.3g} needs at least {needed:,} runs per side even with "
                      "an error-free test" if needed is not None else
                      f"; no run count within the limit ({limit('runs'):,}) can certify the claimed ε = {claim:.3g}")
    if claim is not None and ceiling <= claim:
        reach += f"; at this size the audit cannot refute the claim (ε = {claim:.3g})"
    return f"{cell.label} on {cell.training.label} seed {cell.seed}: {reach}; {_sampling(game)}"


def _counted(record: dict[str, Any]) -> str:
    """What the audit's bound counts, in words."""
    if isinstance(record.get("guesses"), int):
        return f"its {record['guesses']} guesses among {record['canaries']} canaries"
    return f"its {record['runs_per_side']:,} runs per side"


def active_adversary(threat: str | None) -> str | None:
    """What the adversary of an audit's threat model did, in words, where it sends crafted messages
    (`privaudit.threats.ACTIVE_THREATS`): `decide`'s `active`; None for a threat that only listens."""
    if threat not in ACTIVE_THREATS:
        return None
    return f"an active adversary (the {threat} threat: a participant that sent crafted messages)"


def canary_verdict(record: dict[str, Any], claim: Claim, threat: str | None = None) -> dict[str, Any]:
    """The canary audit's verdict on `claim` (the defense's, for the run audited), by the one rule
    of `privaudit.attacks.audit.verdict`: the bound exceeds the claim when the canary's ε_LB exceeds the ε the
    paper's formula gives at the claim's δ (for a (0, δ) claim: when δ_LB at ε = 0 exceeds the
    claimed δ). The audit could not have refuted the claim when even an error-free test on its
    runs stays at or below it. Not evaluable when the defense claims no privacy, or when the
    audited channel's unit is not the claim's (the row says why). Evidence from an active `threat`
    judges only a claim stated against any adversary (`privaudit.accounting.ClaimThreat`)."""
    eps_lb, claimed, delta = record["eps_lb"], record["eps_claimed"], record["delta"]
    confidence = f"{record['confidence']:.0%} confidence"
    forced = f"the canary forces ε ≥ {eps_lb:.4g} at δ = {delta:.3g} ({confidence})"
    if claimed is None:
        return Verdict("not evaluable", None, f"no DP claim is made; {forced}").as_dict()
    if record.get("unaudited"):
        return Verdict("not evaluable", None, f"{record['unaudited']}; {forced}", threat=threat_words(claim)).as_dict()
    if record.get("delta_lb") is not None:
        delta_lb = record["delta_lb"]
        exceeds = delta_lb > delta
        measured = (f"the canary forces δ ≥ {delta_lb:.4g} at ε = {claimed:.4g} ({confidence}), "
                    f"{'above' if exceeds else 'not above'} the claimed δ = {delta:.3g}")
        return decide(claim, f"({claimed:.4g}, {delta:.3g})-DP", exceeds=exceeds, found=delta_lb > 0,
                      measured=measured, partial=_partial(record), active=active_adversary(threat)).as_dict()
    exceeds = eps_lb > claimed
    measured = f"{forced}, {'above' if exceeds else 'not above'} the claimed ε = {claimed:.4g}"
    ceiling = _ceiling(record)
    powerless = None
    if ceiling is not None and ceiling <= claimed:
        powerless = (f"this audit cannot refute ε = {claimed:.4g}: even an error-free attack on {_counted(record)} "
                     f"certifies at most ε ≥ {ceiling:.4g}")
    elif ceiling is not None and eps_lb <= 0:
        measured += f" (an error-free test would reach ε ≥ {ceiling:.4g})"
    return decide(claim, f"(ε = {claimed:.4g}, δ = {delta:.3g})-DP", exceeds=exceeds, found=eps_lb > 0,
                  measured=measured, ratio=eps_lb / claimed if claimed > 0 else math.inf,
                  powerless=powerless, partial=_partial(record), active=active_adversary(threat)).as_dict()


def _partial(record: dict[str, Any]) -> str | None:
    """What a released-model audit saw, in words (the verdict's `partial`); None for a transcript audit."""
    released = record.get("released")
    return None if released is None else f"only the last iterate ({released['threat']}: {released['sees']})"


def canary_relation(game: Game) -> dict[str, Any]:
    """The neighbouring relation the canary audit tests beside the one its claim states, and why
    they differ where they do (the channel's `unaudited`)."""
    channel, neighbours = game.channel, game.claim.neighbours
    audited = Neighbours(channel.adjacency, channel.unit).words()
    if neighbours is None:
        return {"claimed": None, "audited": audited, "same": False, "why": _unstated(game.claim)}
    same = (channel.adjacency, channel.unit) == (neighbours.change, neighbours.unit)
    why = None if same else (channel.unaudited or f"the channel changes {audited}, the claim {neighbours.words()}")
    return {"claimed": neighbours.words(), "audited": audited, "same": same, "why": why}


def _unstated(claim: Claim) -> str:
    """Why a relation row names no claimed relation: the defense claims no privacy, or (a claim
    built without `checked_claim`'s default) its claim states an ε but no relation."""
    if claim.eps_claimed is None:
        return "the defense claims no privacy"
    return "the claim states no neighbouring relation"


def _canary_attack(table: AuditConfig, record: dict[str, Any]) -> str:
    """What a canary audit did, in words, for the report: for a whole run, the statistic its bound
    counts and how it was chosen (`privaudit.attacks.audit.canary_audit.whole_run_choice`)."""
    whole_run = record.get("whole_run") or {}
    if table.method == "one_run":
        how = (f"one training run, {record['canaries']} {record['canary']} canaries, {record['guesses']} guesses "
               f"({record['correct']} right)")
    elif whole_run.get("candidates", 1) > 1:
        how = (f"{table.runs:,} runs per world, {record['canary']} canary, statistic counted: {whole_run['chosen']} "
               f"({whole_run['method']})")
    else:
        how = (f"{table.runs:,} runs per world, {record['canary']} canary, threshold "
               + ("fixed in advance from the mechanism's law" if record["protocol"] == "model"
                  else "chosen on a held-out quarter of the runs"))
    if record.get("released") is not None:
        released = record["released"]
        return (f"{how}; {table.threat} receives {released['sees']}, scored by {record['statistic_method']}; "
                f"{record['adjacency']}: {record.get('pair') or 'canary present or absent'}")
    scored = (", scored law-free (each round's projection weighted on held-out runs; no law assumed)"
              if record.get("statistic") == "projection" else "")
    if record.get("active") is not None:
        scored += (f"; active: agent {record['active']['liar']} steers the victim every round to a point where the "
                   "canary's gradient is clipped at full length and separated from the other records'")
    return (f"{how}{scored}; {table.threat} hears {', '.join(record['channels'])}; {record['adjacency']}: "
            f"{record.get('pair') or 'canary present or absent'}")


def canary_finding(cell: AuditCell, progress: bool = False) -> dict[str, Any]:
    """The canary audit of the training cell `cell.training` (its data, run shape, hyperparameters
    and seed): `cell.table.runs` runs per world, or one run with `cell.table.canaries` canaries.
    With `progress`, the runs are counted on stderr as they are scored (`privaudit.progress`)."""
    table, training = cell.table, cell.training
    game = _game(cell)
    if table.method == "repeated":
        counter = Progress(f"{cell.label} on {training.label}", 2 * table.runs) if progress else None
        try:
            record = audit_game(game, runs=table.runs, confidence=table.confidence, delta=table.delta,
                                seed=training.seed, protocol=table.protocol, progress=counter)
        finally:
            if counter is not None:
                counter.close()
    else:
        record = one_run_game(game, guesses=table.guesses, confidence=table.confidence, delta=table.delta,
                              seed=training.seed)
    sound = _finite(record["eps_sound"])
    return {
        "subject": training.label,
        "defense": training.run.kind,
        "defense_label": training.label,
        "eps_lb": record["eps_lb"],
        "delta_lb": record.get("delta_lb"),
        "delta_lb_eps": record.get("delta_lb_eps"),
        "delta": record["delta"],
        "confidence": table.confidence,
        "samples": table.runs if table.method == "repeated" else table.canaries,
        "eps_claimed": record["eps_claimed"],
        "eps_stated": game.claim.eps_stated,
        "eps_sound": sound,
        "delta_sound": None,
        "eps_estimate": record.get("eps_estimate"),
        "estimate_method": record.get("estimate_method"),
        "exact": None,
        "verdict": canary_verdict(record, game.claim, game.threat),
        "tightness": {"of": "delta", "sound": None, "exact": None} if record.get("delta_lb") is not None else
        {"of": "eps", "sound": record["eps_lb"] / sound if sound else None, "exact": None},
        "curve": [],
        "attack": _canary_attack(table, record),
        "findings": [{"kind": kind, "text": text} for kind, text in game.claim.analytic()],
        "relation": canary_relation(game),
        "statistic_choice": record.get("whole_run"),
        "detail": record,
        **({"threat": game.threat} if game.release is not None or game.active is not None else {}),
        **({"active": game.active} if game.active is not None else {}),
    }


_PAIR_FIELDS = ("victim", "attacker", "threat", "distance", "heard", "unreached", "eps_lb", "eps_estimate", "estimate_method",
                "separation", "eps_pair_claimed", "eps_pair_linear", "pairwise", "verdict", "test",
                "formula_finding", "released")
"""What the report reads of each pair of a position audit (`privaudit.attacks.audit.position.position_audit`)."""


def position_finding(cell: AuditCell, progress: bool = False) -> dict[str, Any]:
    """The position audit of the training cell `cell.training`: for each victim (`position_victims`),
    `cell.table.runs` runs per world, every attacker of `cell.table.attackers` scored from what it
    receives. The row's bound is the strongest pair's and its verdict judges the defense's claim
    with it (the claim holds for every attacker about every victim, so any pair may refute it);
    `pairs` keeps every pair with its victim, `detail` what they share."""
    table, training = cell.table, cell.training
    games = _position_games(cell)
    counter = Progress(f"{cell.label} on {training.label}", 2 * table.runs * len(games)) if progress else None
    pairs = []
    try:
        for game, attackers in games:
            pairs += position_audit(game, attackers, runs=table.runs, confidence=table.confidence, delta=table.delta,
                                    seed=training.seed, progress=counter, released=table.released)
    finally:
        if counter is not None:
            counter.close()
    game = games[0][0]
    strongest = max(pairs, key=lambda pair: pair["eps_lb"])
    shared = {key: value for key, value in strongest.items() if key not in _PAIR_FIELDS and key != "scores"}
    record = {**shared, "eps_lb": strongest["eps_lb"]}
    sound = _finite(shared["eps_sound"])
    who = f"agent {strongest['attacker'][0]}" if len(strongest["attacker"]) == 1 else \
        f"the coalition {strongest['attacker']}"
    return {
        "subject": training.label,
        "defense": training.run.kind,
        "defense_label": training.label,
        "eps_lb": strongest["eps_lb"],
        "delta_lb": None,
        "delta_lb_eps": None,
        "delta": shared["delta"],
        "confidence": table.confidence,
        "samples": table.runs,
        "eps_claimed": shared["eps_claimed"],
        "eps_stated": game.claim.eps_stated,
        "eps_sound": sound,
        "delta_sound": None,
        "eps_estimate": strongest["eps_estimate"],
        "estimate_method": strongest["estimate_method"],
        "exact": None,
        "verdict": canary_verdict(record, game.claim, game.threat),
        "tightness": {"of": "eps", "sound": strongest["eps_lb"] / sound if sound else None, "exact": None},
        "curve": [],
        "attack": (f"{table.runs:,} runs per world and victim, one {table.canary} canary at "
                   f"{_agents_text([g.victim for g, _ in games])}; {len(pairs)} pair(s), each attacker hearing only "
                   f"what it receives (its neighbours' states and its own), scored by {shared['statistic_method']}; "
                   f"strongest: {who} about agent {strongest['victim']}, {strongest['distance']} hop(s) away"),
        "findings": [{"kind": kind, "text": text} for kind, text in game.claim.analytic()],
        "relation": canary_relation(game),
        "pairs": [{key: pair[key] for key in _PAIR_FIELDS} for pair in pairs],
        "graph": {"agents": game.setup.topology.n,
                  "edges": sorted([min(i, j), max(i, j)] for i, j in game.setup.topology.graph.edges)},
        "detail": {**shared, "victims": [g.victim for g, _ in games]},
    }


def _agents_text(agents: list[int]) -> str:
    return f"agent {agents[0]}" if len(agents) == 1 else f"each of agents {', '.join(map(str, agents))}"


REPLACE_ONE = Neighbours("replace-one", "record")
"""The relation a reconstruction game tests: the victim's one record replaced by another."""


def replace_one_claim(claim: Claim) -> tuple[float, float] | str | None:
    """The (ε, δ) the claim gives for replacing one record, or why it gives none (a str), or None
    when it claims nothing. An add/remove claim composes over the two steps, removing z and adding
    z′: P[M(D) ∈ S] ≤ e^ε(e^ε P[M(D′) ∈ S] + δ) + δ, i.e. (2ε, (1 + e^ε)δ) (group privacy)."""
    if claim.eps_claimed is None or claim.neighbours is None:
        return None
    neighbours, eps, delta = claim.neighbours, claim.eps_claimed, claim.delta or 0.0
    if neighbours.unit != "record":
        return (f"the claim's neighbours differ in {neighbours.words()}; a reconstruction game replaces one record, "
                "which the claim does not bound")
    if neighbours.change == "replace-one":
        return eps, delta
    implied = (1.0 + math.exp(min(eps, 700.0))) * delta if delta > 0 else 0.0
    if implied >= 1:
        return (f"the add/remove claim (ε = {eps:.4g}, δ = {delta:.3g}) gives nothing for replacing one record: "
                f"(1 + e^ε)δ ≥ 1")
    return 2.0 * eps, implied


def reconstruction_delta(claim: Claim, asked: float | None) -> float:
    """δ of a reconstruction audit's bound: the one asked for, else the δ of the claim for
    replacing one record (`replace_one_claim`), else `privaudit.attacks.audit.canary_audit.audit_delta`'s."""
    compared = replace_one_claim(claim)
    if asked is None and isinstance(compared, tuple):
        return compared[1]
    return audit_delta(claim, asked)


def reconstruction_verdict(record: dict[str, Any], claim: Claim, threat: str | None = None) -> dict[str, Any]:
    """The reconstruction audit's verdict on `claim`, by the one rule of `privaudit.attacks.audit.verdict`:
    the bound exceeds the claim when ε_LB at the bound's δ exceeds the ε the claim gives for
    replacing one record at a δ no larger. The audit could not have refuted the claim when even
    every trial succeeding stays at or below it, or when its δ is below the claim's. Trials of an
    active `threat` judge only a claim stated against any adversary."""
    eps_lb, delta = record["eps_lb"], record["delta"]
    forced = (f"the reconstructions ({record['successes']} of {record['trials']} trials succeeding, the prior's "
              f"baseline κ ≤ {record['kappa']:.3g}) force ε ≥ {eps_lb:.4g} at δ = {delta:.3g} for replacing one "
              f"record ({record['confidence']:.0%} confidence)")
    compared = replace_one_claim(claim)
    if compared is None:
        return Verdict("not evaluable", None, f"no DP claim is made; {forced}").as_dict()
    if isinstance(compared, str):
        return Verdict("not evaluable", None, f"{compared}; {forced}", threat=threat_words(claim)).as_dict()
    eps, claimed_delta = compared
    exceeds = eps_lb > eps and delta >= claimed_delta
    doubled = "" if claim.neighbours.change == "replace-one" else f" (2 × ε = {claim.eps_claimed:.4g} of add/remove)"
    measured = f"{forced}, {'above' if exceeds else 'not above'} the claimed ε = {eps:.4g}{doubled}"
    ceiling = reconstruction_bound(record["trials"], record["trials"], record["kappa"], delta,
                                   record["confidence"]).eps_lb
    powerless = None
    if delta < claimed_delta:
        powerless = (f"the bound's δ = {delta:.3g} is below the claim's δ = {claimed_delta:.3g} for replacing one "
                     "record")
    elif ceiling <= eps:
        powerless = (f"this audit cannot refute ε = {eps:.4g}: even {record['trials']} successes in "
                     f"{record['trials']} trials certify at most ε ≥ {ceiling:.4g}")
    elif eps_lb <= 0:
        measured += f" (every trial succeeding would give ε ≥ {ceiling:.4g})"
    return decide(claim, f"(ε = {eps:.4g}, δ = {claimed_delta:.3g})-DP for replacing one record", exceeds=exceeds,
                  found=eps_lb > 0, measured=measured, ratio=eps_lb / eps if eps > 0 else math.inf,
                  powerless=powerless, active=active_adversary(threat)).as_dict()


def reconstruction_relation(claim: Claim) -> dict[str, Any]:
    """The relation the reconstruction game tests (replacing one record) beside the claim's."""
    audited, neighbours = REPLACE_ONE.words(), claim.neighbours
    if neighbours is None or claim.eps_claimed is None:
        return {"claimed": None, "audited": audited, "same": False, "why": _unstated(claim)}
    compared = replace_one_claim(claim)
    same = (neighbours.change, neighbours.unit) == ("replace-one", "record")
    why = None if same else compared if isinstance(compared, str) else (
        "replacing one record is two add/remove steps: the claim (ε, δ) gives (2ε, (1 + e^ε)δ) for it")
    return {"claimed": neighbours.words(), "audited": audited, "same": same, "why": why}


def _reconstruction_attack(record: dict[str, Any]) -> str:
    """What a reconstruction audit did, in words, for the report."""
    return (f"{INVERSIONS[record['attack']].title} on the {record['scenario']} target at round {record['round']}, "
            f"{record['trials']} trials, the victim holding one record; success = PSNR ≥ "
            f"{record['threshold_db']:g} dB against a prior of {record['pool']:,} records, "
            f"κ ≤ {record['kappa']:.3g} (≥ {record['kappa_lower']:.3g})")


def reconstruction_finding(cell: AuditCell) -> dict[str, Any]:
    """The reconstruction audit of the training cell `cell.training`: `cell.table.trials` trials
    of the informed-adversary game (`privaudit.attacks.audit.reconstruction_game`), the ε_LB they force
    for replacing one record, and the verdict on the run's claim (the game keeps its sampling
    rates, `privaudit.attacks.audit.reconstruction_game.holding`)."""
    table = cell.table
    return played_reconstruction(reconstruction_game(cell), cell.training, trials=table.trials,
                                 confidence=table.confidence, delta=table.delta)


def played_reconstruction(game: ReconstructionGame, training: Cell, *, trials: int, confidence: float,
                          delta: float | None) -> dict[str, Any]:
    """`trials` trials of `game`, built on the training cell `training`, as a reconstruction
    audit's row fields: the bound at `delta` (default `reconstruction_delta`'s) and its verdict on
    the game's claim. Shared by the `[[audit]]` table and the game a leaking inversion plays
    (`privaudit.campaign.inversion_findings.leak_bound`), so both follow one rule."""
    claim = game.claim
    record = play(game, trials=trials, confidence=confidence, delta=reconstruction_delta(claim, delta))
    sound = _finite(claim.eps_sound)
    compared = replace_one_claim(claim)
    sound_compared = None if sound is None or not isinstance(compared, tuple) else (
        sound if claim.neighbours.change == "replace-one" else 2.0 * sound)
    return {
        "subject": training.label,
        "defense": training.run.kind,
        "defense_label": training.label,
        "eps_lb": record["eps_lb"],
        "delta_lb": None,
        "delta_lb_eps": None,
        "delta": record["delta"],
        "confidence": confidence,
        "samples": trials,
        "eps_claimed": claim.eps_claimed,
        "eps_stated": claim.eps_stated,
        "eps_sound": sound,
        "delta_sound": None,
        "eps_estimate": None,
        "estimate_method": None,
        "exact": None,
        "verdict": reconstruction_verdict(record, claim, game.threat),
        "tightness": {"of": "eps", "sound": record["eps_lb"] / sound_compared if sound_compared else None,
                      "exact": None},
        "curve": [],
        "attack": _reconstruction_attack(record),
        "findings": [{"kind": kind, "text": text} for kind, text in claim.analytic()],
        "relation": reconstruction_relation(claim),
        "detail": record,
    }


def audit_headline(row: dict[str, Any]) -> str:
    """One line for the campaign log: the bound, its confidence and the verdict."""
    if row["status"] != "ok":
        return row["status"]
    bound = (f"δ_LB {row['delta_lb']:.4g} at ε = {row['delta_lb_eps']:.3g}" if row["tightness"]["of"] == "delta"
             else f"ε_LB {row['eps_lb']:.4g} at δ = {row['delta']:.3g}")
    return f"{bound} ({row['confidence']:.0%}), {row['verdict']['status']}"


_EMPTY = {"eps_lb": None, "delta_lb": None, "delta_lb_eps": None, "eps_claimed": None, "eps_stated": None,
          "eps_sound": None, "delta_sound": None, "eps_estimate": None, "estimate_method": None, "exact": None,
          "tightness": None, "curve": [], "attack": None, "findings": [], "detail": None}


def _device(kind: str, found: dict[str, Any]) -> str:
    """The device an audit ran on, as its record names it; a mechanism audit samples with numpy on
    the CPU, and a failed audit names the device it was to run on."""
    if found.get("detail") and "device" in found["detail"]:
        return found["detail"]["device"]
    return "cpu" if kind == "mechanism" else devices.name(devices.work_device())


def audit_row(cell: AuditCell, progress: bool = False) -> dict[str, Any]:
    """The results row of one audit cell; an audit that fails on a value (a non-finite score, a
    mechanism that cannot be sampled), or whose defense, written outside privaudit, raises
    anything, gives a `failed: …` row and the campaign goes on. `progress`: a canary audit counts
    its runs on stderr."""
    started = time.perf_counter()
    table = cell.table
    try:
        found = (canary_finding(cell, progress) if table.kind == "canary" else
                 position_finding(cell, progress) if table.kind == "position" else
                 {"mechanism": mechanism_finding, "reconstruction": reconstruction_finding}[table.kind](cell))
        found["status"] = "ok"
    except Exception as error:  # noqa: BLE001 - only a value error, or a defense written elsewhere, fails a row
        plugin = cell.training is not None and not shipped(cell.training.run.kind)
        if not (isinstance(error, (ValueError, FloatingPointError)) or plugin):
            raise
        reason = (error.args[0] if error.args and isinstance(error, (ValueError, FloatingPointError)) else
                  f"defense '{cell.training.run.kind}' failed at run time: {type(error).__name__}: {error}")
        found = {**_EMPTY, "subject": table.mechanism or cell.training.label, "defense": None,
                 "defense_label": None if cell.training is None else cell.training.label,
                 "delta": table.delta, "confidence": table.confidence, "samples": None,
                 "verdict": Verdict("not evaluable", None, f"the audit failed: {reason}").as_dict(),
                 "status": f"failed: {reason}"}
    return {
        "type": "audit",
        "cell": cell.id,
        "group": cell.group,
        "training": None if cell.training is None else cell.training.id,
        "label": cell.label,
        "kind": table.kind,
        "method": table.method if table.kind == "canary" else None,
        "seed": cell.seed,
        **found,
        "device": _device(table.kind, found),
        "wall_s": time.perf_counter() - started,
        "config": cell.describe(),
        "version": __version__,
    }
