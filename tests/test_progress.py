"""Progress of long steps (issue 27, item 3): in a log (not a terminal) a canary audit writes one
plain line per interval — runs done, rate, time left as an estimate — and no carriage return
reaches the log from any progress bar."""

import io

from privaudit.progress import Progress
from tests.helpers import run_logged

CAMPAIGN = ('[campaign]\nname = "progress"\n[data]\ndataset = "digits"\nmax_train = 200\n[[defense]]\n'
            'kind = "dp_dpsgd"\nlabel = "DP"\nagents = 4\ntopology = "complete"\nrounds = 6\neval_every = 6\n'
            'model = "logreg"\nbatch_size = 10\nlr = 0.5\nnoise_multiplier = 1.0\n[[audit]]\nkind = "canary"\n'
            'label = "canary"\nruns = 200\n')


def test_in_a_log_progress_is_plain_lines_with_the_rate_and_time_left():
    stream = io.StringIO()
    progress = Progress("audit", 100, every=0.0, stream=stream)
    for _ in range(4):
        progress.update(20)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in stream.getvalue()
    assert lines[-1].startswith("  audit: 80/100 runs (") and "s left, an estimate)" in lines[-1]


def test_a_campaign_logged_to_a_file_shows_canary_progress_and_no_carriage_return(tmp_path):
    code, text = run_logged(tmp_path, CAMPAIGN)
    assert code == 0 and "\r" not in text
    assert any(line.startswith("  canary on DP: ") and "/400 runs" in line for line in text.splitlines()), text
