"""examples/stratified_monitoring.py runs in seconds and shows what the monitoring guide says: the
day-to-day spread of nDCG@10 on unevenly sampled sets shrinks under post-stratification and under
stratified sampling, and the stratified means stay near the population's."""

from __future__ import annotations

from tests.conftest import run_example


def test_stratified_monitoring_prints_a_smaller_spread_for_stratified_sets():
    lines = run_example("stratified_monitoring.py").strip().splitlines()
    assert lines[0].startswith("population nDCG@10")
    population = float(lines[0].split()[-1])
    assert lines[1].split()[:3] == ["evaluation", "set", "mean"]
    rows = {}
    for line in lines[2:5]:
        name, numbers = line[:26].strip(), line[26:].split()
        rows[name] = (float(numbers[0]), float(numbers[1].rstrip("%")), float(numbers[2]))
    assert list(rows) == ["uneven", "uneven, post-stratified", "stratified"]
    uneven, post, stratified = (rows[name][1] for name in rows)
    assert uneven > 2 * post and uneven > 3 * stratified  # the swing shrinks (the numbers the guide quotes)
    for name in ("uneven, post-stratified", "stratified"):
        assert abs(rows[name][0] - population) < 0.02, name
        assert 0 < rows[name][2] < 0.1  # a finite daily standard error
