"""torch_rankeval: ranking metrics for PyTorch that agree with trec_eval and run on the GPU.

Example:
    >>> import torch, torch_rankeval
    >>> torch_rankeval.functional.ndcg(torch.tensor([0.3, 0.9]), torch.tensor([1, 0])).item() < 1
    True
"""

from torch_rankeval import functional
from torch_rankeval.conventions import PRESETS, Convention, presets
from torch_rankeval.metrics import (
    AUROC,
    DCG,
    IDCG,
    MAP,
    MRR,
    NDCG,
    FallOut,
    HitRate,
    PositionDebiasedDCG,
    PositionDebiasedNDCG,
    PositionProfile,
    Precision,
    RankingMetrics,
    Recall,
    RPrecision,
)

__version__ = "0.1.0"

__all__ = [
    "functional",
    "Convention",
    "PRESETS",
    "presets",
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
    "__version__",
]
