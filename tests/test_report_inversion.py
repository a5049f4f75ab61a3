"""The report's section on reconstruction attacks, rendered from a hand-written results directory:
DPDL-style tables of mean ± std over seeds with failed attempts counted and kept out of the means,
inlined image strips, the trace figure, escaping, and old training rows without a `type`."""

import base64
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from privaudit.store import RESULTS_FILE
from privaudit.reports.html import render_report
from tests.helpers import without_notation

RING = {"topology": "ring", "agents": 10}
COMPLETE = {"topology": "complete", "agents": 10}
SCRIPT = "<script>alert(1)</script>"
FAILURE = "failed: diverged: loss is nan at iteration 7 (restart 0)"


def _training_row(cell: str, seed: int, typed: bool) -> dict:
    row = {
        "cell": cell, "group": "g-train", "defense": "dpdl", "label": "ND (topology=ring, agents=10)",
        "title": "DPDL", "seed": seed,
        "config": {"run": {"rounds": 400, "topology": "ring", "agents": 10}},
        "metrics": {"avg_acc": 0.9, "agent_acc_mean": 0.85},
        "claim": {"notion": "none", "adjacency": "-", "eps_claimed": None, "eps_stated": None, "eps_sound": None,
                  "delta": None, "horizon": "400 rounds", "equation": "-", "sound_method": "-", "assumptions": []},
        "history": [{"round": 0, "avg_acc": 0.1, "agent_acc_mean": 0.1},
                    {"round": 400, "avg_acc": 0.9, "agent_acc_mean": 0.85}],
        "messages": {"cross_gradient": 100}, "wall_s": 1.5, "version": "0",
    }
    if typed:
        row["type"] = "training"
    return row


def _strip(path: Path, shade: int) -> None:
    """A 2-image strip of 8×8 grey images, distinct per `shade`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (16, 8), color=shade).save(path)


def _inversion_row(tmp: Path, cell: str, *, table: str = "ND", label: str = "CG", setting: dict = RING,
                   round_: int = 200, seed: int = 0, psnr: float = 30.0, mse: float = 0.001, ssim: float = 0.9,
                   floor: float = 10.0, status: str = "ok", trace: list | None = None, images: bool = True) -> dict:
    original, reconstruction = f"artifacts/{cell}/original.png", f"artifacts/{cell}/reconstruction.png"
    if images:
        _strip(tmp / original, 40 + len(cell) + seed)
        _strip(tmp / reconstruction, 140 + seed)
    return {
        "type": "inversion", "cell": cell, "group": f"g-{table}-{label}-{round_}-{json.dumps(setting)}",
        "training": "t0", "label": label, "attack": "dlg", "attack_title": "DLG", "defense": "dpdl",
        "defense_label": f"{table} (topology={setting['topology']}, agents=10)", "defense_table": table,
        "setting": setting, "scenario": "cross_gradient", "scenario_needs": "the cross-gradient and x_j",
        "threat": "global_listener", "victim": 0, "round": round_, "seed": seed, "target_kind": "gradient",
        "batch_size": 2, "status": status, "stopped_by": "tolerance", "iterations": 400, "wall_s": 3.2,
        "metrics": {"mse": mse, "psnr": psnr, "ssim": ssim, "lpips": None, "label_acc": 1.0},
        "lpips_status": "unavailable: AlexNet weights not in the torch hub cache",
        "baseline": {"mse": 0.1, "psnr": floor, "ssim": 0.05},
        "trace": trace or [],
        "artifacts": {"original": original, "reconstruction": reconstruction, "tensors": f"artifacts/{cell}/images.pt"},
        "config": {}, "version": "0",
    }


def _write(tmp: Path, rows: list[dict]) -> Path:
    (tmp / RESULTS_FILE).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return render_report(tmp, tmp / "report.html")


@pytest.fixture
def campaign(tmp_path):
    """ND · CG on two settings × two rounds × seeds 0, 1 (ring at round 200: PSNR 30 and 32), a
    failed third seed there whose scores must not count, a traced row, DPDL · CG under its floor."""
    rows = [_training_row("t0", 0, typed=True), _training_row("t1", 1, typed=False)]
    trace = [{"iteration": 10, "mse": 0.05, "psnr": 13.0}, {"iteration": 20, "mse": 0.004, "psnr": 24.0}]
    rows += [
        _inversion_row(tmp_path, "a0", seed=0, psnr=30.0, mse=0.001, ssim=0.9, floor=10.0, trace=trace),
        _inversion_row(tmp_path, "a1", seed=1, psnr=32.0, mse=0.0006, ssim=0.8, floor=12.0),
        _inversion_row(tmp_path, "a2", seed=2, psnr=99.0, mse=1e-9, ssim=1.0, status=FAILURE),
        _inversion_row(tmp_path, "b0", round_=400, seed=0, psnr=20.0),
        _inversion_row(tmp_path, "b1", round_=400, seed=1, psnr=22.0),
        _inversion_row(tmp_path, "c0", setting=COMPLETE, seed=0, psnr=25.0),
        _inversion_row(tmp_path, "c1", setting=COMPLETE, seed=1, psnr=27.0),
        _inversion_row(tmp_path, "d0", setting=COMPLETE, round_=400, seed=0, psnr=24.0, images=False),
        _inversion_row(tmp_path, "d1", setting=COMPLETE, round_=400, seed=1, psnr=26.0),
        _inversion_row(tmp_path, "e0", table="DPDL", psnr=8.0, floor=10.0),
    ]
    return tmp_path, _write(tmp_path, rows).read_text()


def _section(html: str) -> str:
    html = without_notation(html)
    return html[html.index('<section id="inversion">'):html.index('<section id="provenance">')]


def test_tables_give_mean_and_std_over_seeds_and_keep_failures_out(campaign):
    _, html = campaign
    section = _section(html)
    assert "<h2>Reconstruction attacks</h2>" in section
    assert "<h4>Round 200</h4>" in section and "<h4>Round 400</h4>" in section
    assert "<th title=\"{&#34;agents&#34;: 10, &#34;topology&#34;: &#34;ring&#34;}\">ring, N=10</th>" in section
    assert ">complete, N=10</th>" in section
    assert '<td class="num">31.00 ± 1.00 <span class="failed">1 failed</span></td>' in section
    assert '<td class="num">0.0008 ± 0.0002 <span class="failed">1 failed</span></td>' in section
    assert '<td class="num">0.850 ± 0.050 <span class="failed">1 failed</span></td>' in section
    assert '<td class="num">11.00 ± 1.00</td>' in section  # the noise floor of the same two seeds
    assert '<td class="num">26.00 ± 1.00</td>' in section  # complete, round 200
    assert "99.0" not in section
    assert "LPIPS</th>" not in section


def test_failed_attempt_is_listed_with_its_reason(campaign):
    _, html = campaign
    failures = _section(html).split("<h3>Failed attempts</h3>")[1].split("</table>")[0]
    assert failures.count("<tr>") == 2
    assert FAILURE in failures and "<code>a2</code>" in failures and "ring, N=10" in failures


def test_lead_states_best_median_against_the_noise_floor(campaign):
    _, html = campaign
    lead = _section(html).split("<ul>")[1].split("</ul>")[0]
    old = ("by the old comparison of the median PSNR with the floor&#39;s mean, which states no confidence (rows "
           "written before the leak test)")  # these rows carry no leak decision: tests/test_leak.py has rows that do
    assert ("ND · CG: median PSNR 31.0 dB, SSIM 0.85 (ring, N=10, round 200, 2 seeds), 20.0 dB above "
            f"the noise floor (11.0 dB) {old}. 1 of 9 attempts failed.") in lead
    assert "DPDL · CG: median PSNR 8.0 dB, SSIM 0.90 (ring, N=10, round 200, 1 seed), not above the noise " \
           f"floor (10.0 dB) {old}." in lead
    assert _section(html).count("LPIPS unavailable: AlexNet weights not in the torch hub cache") == 1


def test_images_are_inlined_and_a_missing_file_is_named(campaign):
    tmp, html = campaign
    section = _section(html)
    original = base64.b64encode((tmp / "artifacts/a0/original.png").read_bytes()).decode()
    reconstruction = base64.b64encode((tmp / "artifacts/a0/reconstruction.png").read_bytes()).decode()
    assert f'alt="original" src="data:image/png;base64,{original}"' in section
    assert f'alt="reconstruction" src="data:image/png;base64,{reconstruction}"' in section
    assert "image missing: artifacts/d0/original.png" in section
    assert "image-rendering: pixelated" in html
    assert not re.search(r'(src|href)\s*=\s*"?\s*https?:', html, re.IGNORECASE)
    grid = section.split("<h4>ring, N=10</h4>")[1].split("</table>")[0]
    assert "PSNR 30.0 dB · seed 0" in grid and "seed 1" not in grid


def test_trace_figure_is_drawn_only_from_rows_with_a_trace(campaign, tmp_path_factory):
    _, html = campaign
    assert _section(html).count('alt="MSE of the reconstruction over attack iterations: CG"') == 1
    other = tmp_path_factory.mktemp("untraced")
    untraced = _write(other, [_inversion_row(other, "x0")]).read_text()
    assert "over attack iterations" not in untraced


def test_campaign_strings_are_escaped_and_artifacts_stay_inside_the_results(tmp_path):
    (tmp_path / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\nSECRET")
    row = _inversion_row(tmp_path, "s0", table=SCRIPT, label=SCRIPT, setting={"topology": SCRIPT, "agents": 3},
                         status=f"failed: {SCRIPT}")
    row["artifacts"]["original"] = "../secret.png"
    html = without_notation(_write(tmp_path, [row]).read_text())
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; · &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "image not shown: original ../secret.png: not a path inside its folder" in html
    assert base64.b64encode(b"\x89PNG\r\n\x1a\nSECRET").decode() not in html


def test_old_training_rows_without_a_type_still_render(tmp_path):
    html = _write(tmp_path, [_training_row("t0", 0, typed=False), _training_row("t1", 1, typed=False)]).read_text()
    assert "Reconstruction attacks" not in html
    assert "<td>0, 1</td>" in html  # both seeds summarised as one run
    assert html.count("<td>training</td>") == 2
    assert 'src="data:image/png;base64,' in html


def test_lpips_block_appears_when_a_value_exists(tmp_path):
    rows = [_inversion_row(tmp_path, f"l{seed}", seed=seed) for seed in (0, 1)]
    rows[0]["metrics"]["lpips"], rows[0]["lpips_status"] = 0.25, "ok"
    section = _section(_write(tmp_path, rows).read_text())
    assert "LPIPS</th>" in section and '<td class="num">0.250 (1 seed)</td>' in section
    assert section.count("LPIPS unavailable") == 1


def test_two_configurations_sharing_labels_are_not_pooled(tmp_path):
    rows = [_inversion_row(tmp_path, "p0", psnr=30.0), _inversion_row(tmp_path, "q0", psnr=10.0)]
    rows[1]["group"] = "ffffff-other-config"
    section = _section(_write(tmp_path, rows).read_text())
    assert "<td>ND · CG [ffffff]</td>" in section and section.count("(1 seed)") >= 2
    assert "20.00 ± 10.00" not in section
