"""With validate_args=False the kernels compile with fullgraph=True: no host sync, no graph break."""

from __future__ import annotations

import pytest
import torch

from torch_rankeval import functional as F


@pytest.mark.parametrize(
    "fn",
    [
        lambda p, t, m: F.ndcg(p, t, [3, 10], mask=m, validate_args=False),
        lambda p, t, m: F.average_precision(p, t, [3, 10], mask=m, denominator="retrieved_relevant", validate_args=False),
    ],
    ids=["ndcg", "average_precision"],
)
def test_fullgraph_compile_matches_eager(fn):
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    preds = (torch.rand(8, 16, generator=g) * 4).round() / 4  # ties
    target = torch.randint(0, 4, (8, 16), generator=g)
    mask = torch.rand(8, 16, generator=g) > 0.2
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(preds, target, mask), fn(preds, target, mask))
