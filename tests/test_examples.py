"""The example scripts run and print what the README promises."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def _env() -> dict[str, str]:
    """The examples import the package from this checkout even when it is not installed."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def test_quickstart_prints_a_table_for_both_conventions():
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env=_env(),
    ).stdout
    lines = out.strip().splitlines()
    assert lines[0].split()[:1] == ["convention"] and "nDCG@3" in lines[0] and "MAP" in lines[0]
    assert len(lines) == 3
    for line in lines[1:]:
        values = [float(v) for v in line.split()[-7:]]
        assert all(0 <= v <= 1 for v in values)
