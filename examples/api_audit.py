"""Auditing a defense end to end from Python (`privaudit`'s public API, `privaudit/campaign/api.py`).

    python examples/api_audit.py [RESULTS_DIR]

The defense is `examples/laplace_gossip.py` (gossip with Laplace noise on every broadcast model,
its view beside it), written outside privaudit: the campaign lists its module and
`allow_code=True` consents to importing it, as `--allow-code` does on the command line. The
script trains it, canary-audits it, prints each verdict, and then audits a mechanism against a
claim it states; it exits 1 if any verdict is refuted (a privacy gate in three lines).
"""

from __future__ import annotations

import sys
from pathlib import Path

import privaudit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
"""The repository root first: a script's own folder heads `sys.path`, not the root that holds this
`examples` package, and another distribution's top-level `examples` (Opacus installs one) would
otherwise be found instead."""

CAMPAIGN = {
    "campaign": {"name": "api_example", "seeds": [0], "imports": ["examples.laplace_gossip"]},
    "data": {"dataset": "digits", "max_train": 240},
    "defense": [{"kind": "examples.laplace_gossip:LaplaceGossip", "label": "Laplace gossip", "topology": "ring",
                 "agents": 4, "model": "logreg", "rounds": 4, "eval_every": 4, "lr": 0.1, "batch_size": 1,
                 "clip": 10.0, "epsilon": 1.0}],
    "audit": [{"kind": "canary", "label": "canary", "runs": 200}],
}


def main(out: str = "results/api_example") -> int:
    campaign = privaudit.load_campaign(CAMPAIGN, allow_code=True)
    results = privaudit.run(campaign, out)
    for verdict in results.verdicts:
        bound = "no bound" if verdict.eps_lb is None else f"ε_LB {verdict.eps_lb:.3g}"
        print(f"{verdict.subject}: {verdict.status} (claimed ε {verdict.eps_claimed}, sound ε {verdict.eps_sound}, "
              f"{bound})")
    print(f"report: {results.report}")
    stated = privaudit.audit("gaussian", {"sigma": 1.0}, claim=(0.5, 1e-5), samples=20_000)
    print(f"gaussian σ = 1 against a stated (0.5, 1e-5)-DP: {stated.verdict.status} (ε_LB {stated.eps_bound.value:.3g})")
    return 1 if results.failing("refuted") else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
