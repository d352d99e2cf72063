"""The RecBole recipe of docs/migration/recbole.md (``RankingMetrics(..., denominator="min_k_relevant",
empty_target_action="skip")``) against RecBole's own expected values, transcribed from RecBole's
``tests/metrics/test_topk_metrics.py`` (``TestTopKMetrics.test_hit``, ``test_ndcg``, ``test_mrr``,
``test_map``, ``test_recall``, ``test_precision``; RUCAIBox/RecBole, commit 319b687).

RecBole's fixture gives, for 4 users, whether each of the top 3 items is held out (``pos_idx``) and the
number of held-out items (``pos_len``); its expected values are per user and cutoff 1, 2, 3, and RecBole
reports their mean over users (``TopkMetric.topk_result``: ``value.mean(axis=0)``). RecBole evaluates only
users with held-out items (its evaluation data holds no other user): two users without any are added here,
which the recipe must leave out and the default counts as 0."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torch_rankeval import RankingMetrics
from torch_rankeval.functional import sparse_from_ids

POS_IDX = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 1], [0, 0, 1]])
POS_LEN = np.array([1, 3, 4, 2])
L2 = np.log2
#: RecBole's expected per-user values at cutoffs 1, 2, 3 (test_topk_metrics.py, as written there)
RECBOLE = {
    "hit_rate": [[0, 0, 0], [1, 1, 1], [1, 1, 1], [0, 0, 1]],
    "ndcg": [
        [0, 0, 0],
        [1, 1, 1],
        [1, (1 / L2(2) / (1 / L2(2) + 1 / L2(3))), ((1 / L2(2) + 1 / L2(4)) / (1 / L2(2) + 1 / L2(3) + 1 / L2(4)))],
        [0, 0, (1 / L2(4) / (1 / L2(2) + 1 / L2(3)))],
    ],
    "mrr": [[0, 0, 0], [1, 1, 1], [1, 1, 1], [0, 0, 1 / 3]],
    "map": [[0, 0, 0], [1, 1, 1], [1, (1 / 2), (1 / 3) * ((1 / 1) + (2 / 3))], [0, 0, (1 / 3) * (1 / 2)]],
    "recall": [[0, 0, 0], [1 / 3, 2 / 3, 3 / 3], [1 / 4, 1 / 4, 2 / 4], [0, 0, 1 / 2]],
    "precision": [[0, 0, 0], [1 / 1, 2 / 2, 3 / 3], [1 / 1, 1 / 2, 2 / 3], [0, 0, 1 / 3]],
}
NAMES = tuple(f"{m}@{k}" for m in RECBOLE for k in (1, 2, 3))


def _fixture() -> tuple[torch.Tensor, torch.Tensor]:
    """RecBole's 4 users as a catalogue of 10 items ranked 0, 1, ..., 9 (distinct scores), their held-out
    items placed so that the top 3 hit as ``POS_IDX`` says and they number ``POS_LEN``; then 2 users
    without held-out items."""
    held_out = [[5], [0, 1, 2], [0, 2, 6, 7], [2, 8], [], []]
    for row, hits, n in zip(held_out, POS_IDX, POS_LEN):
        assert [int(i in row) for i in range(3)] == hits.tolist() and len(row) == n
    ids = torch.full((6, 4), -1)
    for u, row in enumerate(held_out):
        ids[u, : len(row)] = torch.tensor(row, dtype=torch.long)
    scores = torch.linspace(1.0, 0.1, 10).expand(6, 10).clone()
    return scores, sparse_from_ids(ids, num_items=10)


def test_recipe_reproduces_recbole_fixture() -> None:
    scores, target = _fixture()
    recipe = RankingMetrics(NAMES, denominator="min_k_relevant", empty_target_action="skip")
    recipe.update(scores, target)
    out = recipe.compute()
    for metric, rows in RECBOLE.items():
        means = np.asarray(rows, dtype=np.float64).mean(axis=0)
        for j, k in enumerate((1, 2, 3)):
            assert out[f"{metric}@{k}"].item() == pytest.approx(means[j], abs=1e-6), (metric, k)


def test_default_counts_users_without_held_out_items() -> None:
    """Without the recipe, the two users without held-out items score 0 and count: every mean is 4/6 of
    RecBole's; MAP also divides by every held-out item (user 2 at k=3: (1 + 2/3) / 4, RecBole's / 3)."""
    scores, target = _fixture()
    default = RankingMetrics(NAMES)
    default.update(scores, target)
    out = default.compute()
    hit = np.asarray(RECBOLE["hit_rate"], dtype=np.float64).mean(axis=0)
    assert out["hit_rate@3"].item() == pytest.approx(hit[2] * 4 / 6, abs=1e-6)
    recbole_map = np.asarray(RECBOLE["map"], dtype=np.float64).mean(axis=0)[2]
    assert out["map@3"].item() == pytest.approx((0 + 1 + (1 + 2 / 3) / 4 + (1 / 3) / 2) / 6, abs=1e-6)
    assert out["map@3"].item() != pytest.approx(recbole_map, abs=1e-3)
