"""torch_rankeval: ranking metrics for PyTorch that agree with trec_eval and run on the GPU.

The public names are imported on first use (PEP 562), so ``import torch_rankeval`` and the
command line's ``--help`` do not pay for torch until a metric is asked for.

Example:
    >>> import torch, torch_rankeval
    >>> torch_rankeval.functional.ndcg(torch.tensor([0.3, 0.9]), torch.tensor([1, 0])).item() < 1
    True
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> (module, attribute in it; None for the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "functional": ("torch_rankeval.functional", None),
    "Convention": ("torch_rankeval.conventions", "Convention"),
    "PRESETS": ("torch_rankeval.conventions", "PRESETS"),
    "presets": ("torch_rankeval.conventions", "presets"),
    **{
        name: ("torch_rankeval.metrics", name)
        for name in (
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
        )
    },
}
# Subpackages reachable as attributes (``torch_rankeval.trec``) without an import statement; the
# optional-dependency modules (``lightning``, ``plotting``) and ``cli`` need an explicit import.
_SUBMODULES = (
    "compat",
    "conventions",
    "data",
    "diagnostics",
    "losses",
    "measures",
    "metrics",
    "propensity",
    "sampler",
    "stats",
    "trec",
)

# A literal list, so that type checkers read it (mypy: "does not explicitly export"); equal to
# sorted([*_EXPORTS, "__version__"]) (checked on import below).
__all__ = [
    "AUROC",
    "Convention",
    "DCG",
    "FallOut",
    "HitRate",
    "IDCG",
    "IntraListDiversity",
    "ItemExposure",
    "MAP",
    "MRR",
    "NDCG",
    "Novelty",
    "PRESETS",
    "PositionDebiasedDCG",
    "PositionDebiasedNDCG",
    "PositionProfile",
    "Precision",
    "RPrecision",
    "RankingMetrics",
    "Recall",
    "Serendipity",
    "Unexpectedness",
    "__version__",
    "functional",
    "presets",
]
assert __all__ == sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562) and keep it in the module."""
    if name in _EXPORTS:
        module_name, attribute = _EXPORTS[name]
        if name in ("PRESETS", "presets"):  # the presets' per-measure settings come from the registry's rows
            importlib.import_module("torch_rankeval.measures")
        value = importlib.import_module(module_name)
        if attribute is not None:
            value = getattr(value, attribute)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and subpackages (loaded or not), not this module's helpers."""
    loaded = {n for n, v in globals().items() if isinstance(v, ModuleType) and v.__name__.startswith(f"{__name__}.")}
    return sorted({*__all__, *_SUBMODULES, *loaded})


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only (names of __all__)
    # ruff: noqa: F401
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
        IntraListDiversity,
        ItemExposure,
        Novelty,
        PositionDebiasedDCG,
        PositionDebiasedNDCG,
        PositionProfile,
        Precision,
        RankingMetrics,
        Recall,
        RPrecision,
        Serendipity,
        Unexpectedness,
    )
