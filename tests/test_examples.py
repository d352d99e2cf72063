"""The example scripts run and print what the README promises."""

from __future__ import annotations

from tests.conftest import run_example


def test_quickstart_prints_a_table_for_both_conventions():
    out = run_example("quickstart.py")
    lines = out.strip().splitlines()
    assert lines[0].split()[:1] == ["convention"] and "nDCG@3" in lines[0] and "MAP" in lines[0]
    assert len(lines) == 3
    for line in lines[1:]:
        values = [float(v) for v in line.split()[-7:]]
        assert all(0 <= v <= 1 for v in values)
