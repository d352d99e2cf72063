"""Evaluate a built-in example ranking and print a table of metrics.

Run: ``python examples/quickstart.py``. The embedded data are four queries of a small search
engine: the model's scores and graded relevance judgments (0-3), padded to one tensor.
"""

from __future__ import annotations

import torch

from torch_rankeval import functional as F

# Four queries, up to six candidate documents each; padding is masked out.
PREDS = torch.tensor(
    [
        [2.1, 1.7, 0.3, -0.4, -1.2, 0.0],
        [0.9, 0.8, 0.8, 0.1, 0.0, 0.0],  # a tie at 0.8
        [-0.2, 1.5, 0.7, 0.6, 2.2, 0.1],
        [1.0, 0.2, -0.3, 0.0, 0.0, 0.0],
    ]
)
TARGET = torch.tensor(
    [
        [3, 0, 2, 0, 1, 0],
        [0, 2, 1, 0, 0, 0],
        [1, 0, 3, 0, 0, 2],
        [0, 0, 0, 0, 0, 0],  # no relevant document
    ]
)
MASK = torch.tensor(
    [
        [True, True, True, True, True, False],
        [True, True, True, True, False, False],
        [True, True, True, True, True, True],
        [True, True, True, False, False, False],
    ]
)


def evaluate(convention: str | None) -> dict[str, float]:
    kw = {"mask": MASK, "convention": convention}
    ndcg = F.ndcg(PREDS, TARGET, [3, 5], **kw)
    return {
        "nDCG@3": ndcg[0].item(),
        "nDCG@5": ndcg[1].item(),
        "MAP": F.average_precision(PREDS, TARGET, **kw).item(),
        "MRR": F.reciprocal_rank(PREDS, TARGET, **kw).item(),
        "P@3": F.precision(PREDS, TARGET, 3, **kw).item(),
        "R@3": F.recall(PREDS, TARGET, 3, **kw).item(),
        "Rprec": F.r_precision(PREDS, TARGET, **kw).item(),
    }


def main() -> None:
    rows = {"default (exp2 gain, ties averaged)": evaluate(None), "trec_eval preset": evaluate("trec_eval")}
    names = list(next(iter(rows.values())))
    width = max(len(r) for r in rows)
    print(f"{'convention':<{width}}  " + "  ".join(f"{n:>7}" for n in names))
    for label, values in rows.items():
        print(f"{label:<{width}}  " + "  ".join(f"{values[n]:7.4f}" for n in names))


if __name__ == "__main__":
    main()
