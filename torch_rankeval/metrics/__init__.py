"""Streaming torchmetrics classes: running sums, one ranking per update, one all-reduce per sync.

Example:
    >>> from torch_rankeval.metrics import RankingMetrics, NDCG
    >>> NDCG(k=10).keys, RankingMetrics(("ndcg@5", "map")).keys
    (['ndcg@10'], ['ndcg@5', 'map'])
"""

from torch_rankeval.metrics.base import RankingMetrics
from torch_rankeval.metrics.beyond import (
    AvgRecPopularity,
    IntraListDiversity,
    MeanInvUserFreq,
    Novelty,
    PopularityRankSerendipity,
    Serendipity,
    Unexpectedness,
)
from torch_rankeval.metrics.debiased import PositionDebiasedDCG, PositionDebiasedNDCG
from torch_rankeval.metrics.exposure import ItemExposure
from torch_rankeval.metrics.position_profile import PositionProfile
from torch_rankeval.metrics.single import (
    AUROC,
    DCG,
    IDCG,
    MAP,
    MRR,
    NDCG,
    FallOut,
    HitRate,
    Precision,
    Recall,
    RPrecision,
)

__all__ = [
    "RankingMetrics",
    "DCG",
    "IDCG",
    "NDCG",
    "MAP",
    "MRR",
    "Precision",
    "Recall",
    "HitRate",
    "RPrecision",
    "FallOut",
    "AUROC",
    "PositionDebiasedNDCG",
    "PositionDebiasedDCG",
    "PositionProfile",
    "ItemExposure",
    "IntraListDiversity",
    "Novelty",
    "Serendipity",
    "Unexpectedness",
    "AvgRecPopularity",
    "MeanInvUserFreq",
    "PopularityRankSerendipity",
]
