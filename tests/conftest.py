"""Shared test fixtures: the trec_eval conformance collection and small generators."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TORCH_RANKEVAL_SHARED", REPO.parent / "shared"))
TREC_EVAL_TEST = SHARED / "trec_eval_test"


@pytest.fixture(scope="session")
def trec_eval_test_dir() -> Path:
    """trec_eval's own test collection (qrels, runs, expected outputs), read from ../shared."""
    if not (TREC_EVAL_TEST / "qrels.test").exists():
        pytest.skip(f"trec_eval's test collection is not at {TREC_EVAL_TEST} (set TORCH_RANKEVAL_SHARED)")
    return TREC_EVAL_TEST
