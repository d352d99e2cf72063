"""Bridges from padded tensors to the independent oracles (pytrec_eval, trec files), and the
NaN-aware comparison of a metric's result dict with the oracle's values."""

from __future__ import annotations

import collections
import math
from pathlib import Path

import pytest
import torch


def random_batch(n: int, length: int, *, seed: int, max_grade: int = 4, pad: bool = True, extra_judged: int = 0):
    """Seeded padded batch: continuous float64 scores (no ties), grades 0..max_grade.

    Returns preds, target, mask, ideal_target (the list's grades plus ``extra_judged`` judged
    documents per query that the ranking did not return).
    """
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n, length, generator=g, dtype=torch.float64) * 4 - 2
    target = torch.randint(0, max_grade + 1, (n, length), generator=g)
    target = torch.where(torch.rand(n, length, generator=g) < 0.5, torch.zeros_like(target), target)
    if pad:
        lengths = torch.randint(1, length + 1, (n,), generator=g)
        mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    else:
        mask = torch.ones(n, length, dtype=torch.bool)
    extra = torch.randint(0, max_grade + 1, (n, extra_judged), generator=g)
    ideal = torch.cat([torch.where(mask, target, torch.zeros_like(target)), extra], dim=1)
    return preds, target, mask, ideal


def to_pytrec(preds, target, mask, ideal_target=None):
    """qrels and run dicts for pytrec_eval; ``ideal_target`` columns beyond the list are unretrieved docs."""
    qrels, run = {}, {}
    length = preds.shape[1]
    for i in range(preds.shape[0]):
        q = f"q{i}"
        run[q] = {f"d{j}": float(preds[i, j]) for j in range(length) if mask[i, j]}
        judged = {f"d{j}": int(target[i, j]) for j in range(length) if mask[i, j]}
        if ideal_target is not None:
            for j in range(length, ideal_target.shape[1]):
                judged[f"x{j}"] = int(ideal_target[i, j])
        qrels[q] = judged
    return qrels, run


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            q, _, doc, rel = line.split()[:4]
            qrels[q][doc] = int(rel)
    return qrels


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = collections.defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        if line.strip():
            q, _, doc, _, score = line.split()[:5]
            run[q][doc] = float(score)
    return run


def read_expected(path: Path) -> dict[str, dict[str, str]]:
    """trec_eval -q output: {qid: {measure: printed value}}."""
    out: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        measure, q, value = line.split()
        out[q][measure] = value
    return out


def trec_tensors(qrels, run, qids):
    """Padded tensors in trec_eval's tie order: documents sorted by docno descending, so that a
    stable sort by score (``ties="first"``) breaks ties as trec_eval does. Negative grades count
    as unjudged (0)."""
    length = max(len(run[q]) for q in qids)
    judged = max(len(qrels[q]) for q in qids)
    preds = torch.zeros(len(qids), length, dtype=torch.float64)
    target = torch.zeros(len(qids), length, dtype=torch.long)
    mask = torch.zeros(len(qids), length, dtype=torch.bool)
    ideal = torch.zeros(len(qids), judged, dtype=torch.long)
    for i, q in enumerate(qids):
        for j, doc in enumerate(sorted(run[q], reverse=True)):
            preds[i, j] = run[q][doc]
            target[i, j] = max(qrels[q].get(doc, 0), 0)
            mask[i, j] = True
        grades = [max(g, 0) for g in qrels[q].values()]
        ideal[i, : len(grades)] = torch.tensor(grades)
    return preds, target, mask, ideal


def feed(metric, batches) -> None:
    """Update ``metric`` with each ``(preds, target, mask)`` of ``batches``."""
    for preds, target, mask in batches:
        metric.update(preds, target, mask=mask)


def assert_close_dict(got: dict, want: dict, *, same_keys: bool = True) -> None:
    """Each ``want[key]`` (a float; NaN means NaN) equals ``got[key]`` (a scalar tensor) to
    rel 1e-5 / abs 1e-6; with ``same_keys``, ``got`` also has exactly ``want``'s keys, in order."""
    if same_keys:
        assert list(got) == list(want)
    for key, value in want.items():
        g = got[key].item()
        if math.isnan(value):
            assert math.isnan(g), key
        else:
            assert g == pytest.approx(value, rel=1e-5, abs=1e-6), key
