"""examples/debiased_click_eval.py runs with small settings, prints its table and saves the plot."""

from __future__ import annotations

from tests.conftest import run_example


def test_debiased_click_eval_prints_a_table_and_saves_a_plot(tmp_path, monkeypatch):
    out_png = tmp_path / "plot.png"
    monkeypatch.setenv("MPLBACKEND", "Agg")
    argv = ("--queries", "150", "--sessions", "1", "30", "300", "--output", str(out_png))
    lines = run_example("debiased_click_eval.py", *argv).strip().splitlines()

    assert lines[0].startswith("nDCG@5 from a simulated click log")
    assert lines[1].split() == ["sessions", "with_click", "new_naive", "new_ips", "logger_naive", "logger_ips"]
    rows = [line.split() for line in lines[2:5]]
    assert [int(r[0]) for r in rows] == [1, 30, 300]
    values = [[float(v) for v in r[1:]] for r in rows]
    assert all(0 <= v <= 1 for r in values for v in r)
    truth = dict(kv.split("=") for kv in lines[5].split(":", 1)[1].split())
    true_new, true_logger = float(truth["new"]), float(truth["logger"])
    assert true_new > true_logger
    # at 300 sessions per query: IPS is close to the truth and orders the rankers right; naive does not
    _, new_naive, new_ips, logger_naive, logger_ips = values[-1]
    assert abs(new_ips - true_new) < 0.03 and abs(logger_ips - true_logger) < 0.03
    assert new_ips > logger_ips and new_naive < logger_naive
    assert lines[6] == f"plot saved to {out_png}"
    assert out_png.stat().st_size > 10_000 and out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
