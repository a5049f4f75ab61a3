"""Progress on every long step (issue 27, item 3): a training run's rounds, a membership table's
reference models, a coalition's record fit and every inversion's loss evaluations are counted in
a log as plain lines (no carriage return), with the rate and, where a total is known, the time
left as an estimate ("at most" where the step may stop sooner)."""

import io

from privaudit.progress import Progress
from tests.helpers import run_logged

CAMPAIGN = """
[campaign]
name = "long-steps"
[data]
dataset = "digits"
max_train = 100
test_fraction = 0.5
[[defense]]
kind = "dpsgd"
label = "line"
data = { dataset = "digits", max_train = 6, min_size = 1 }
topology = "line"
agents = 6
model_options = { hidden = [16], activation = "sigmoid" }
rounds = 8
eval_every = 8
batch_size = 1
lr = 0.2
[[defense]]
kind = "dpsgd"
label = "ring"
agents = 4
rounds = 20
eval_every = 20
batch_size = 5
lr = 0.5
[[attack]]
kind = "idlg"
label = "coalition"
defense = ["line"]
threat = "coalition"
agents = [0]
rounds = [0]
window = 6
[[attack]]
kind = "idlg"
label = "iDLG"
defense = ["line"]
rounds = [0]
evaluations = 30
tolerance = 0
[[membership]]
label = "MIA"
defense = ["ring"]
rounds = [19]
references = 2
non_members = 50
rmia_samples = 50
bootstrap = 20
"""


def _lines(**kwargs) -> list[str]:
    stream = io.StringIO()
    progress = Progress("step", stream=stream, every=0.0, **kwargs)
    for _ in range(3):
        progress.update(2)
    progress.close()
    assert "\r" not in stream.getvalue()
    return stream.getvalue().splitlines()


def test_a_step_in_parts_says_the_parts_done_and_a_ceiling_says_at_most():
    lines = _lines(total=12, unit="rounds", parts=(3, "reference models"))
    assert lines[-1].startswith("  step: 1/3 reference models, 6/12 rounds (") and "s left, an estimate)" in lines[-1]
    lines = _lines(total=12, unit="rounds replayed", ceiling=True, parts=(2, "Gauss–Newton steps"))
    assert lines[-1].startswith("  step: 1/at most 2 Gauss–Newton steps, 6/at most 12 rounds replayed (")
    assert ", at most about " in lines[-1]


def test_a_step_without_a_total_gives_its_count_and_rate_only():
    lines = _lines(total=None, unit="loss evaluations")
    assert len(lines) == 3 and lines[-1].startswith("  step: 6 loss evaluations (") and lines[-1].endswith("/s)")


def test_a_slow_rate_is_not_rounded_to_zero():
    progress = Progress("step", 10, unit="reference models", stream=io.StringIO())
    progress.done, progress.start = 1, 0.0
    assert "(0.01/s, about 900 s left" in progress.line(100.0)


def test_a_campaign_logged_to_a_file_counts_every_long_step_in_plain_lines(tmp_path):
    code, text = run_logged(tmp_path, CAMPAIGN)
    assert code == 0 and "\r" not in text, text
    lines = text.splitlines()

    def shown(prefix: str, *parts: str) -> bool:
        return any(line.startswith(prefix) and all(part in line for part in parts) for line in lines)

    assert shown("  line seed 0: ", "/8 rounds (", "s left, an estimate)")
    assert shown("  MIA on ring seed 0: ", "/2 reference models, ", "/40 rounds (", "s left, an estimate)")
    assert shown("  record fit of coalition on line seed 0 round 0: ", "/at most 6 Gauss–Newton steps, ",
                 "/at most 36 rounds replayed (", "at most about ")
    assert shown("  coalition on line seed 0 round 0, agent 1: ", "/at most 2,000 loss evaluations (")
    assert shown("  iDLG on line seed 0 round 0: ", "/at most 30 loss evaluations (")
    assert "[5/5] MIA on ring seed 0 round 19: " in text
