"""With validate_args=False the kernels compile with fullgraph=True: no host sync, no graph break."""

from __future__ import annotations

import pytest
import torch

from torch_rankeval import functional as F


@pytest.mark.parametrize(
    "fn",
    [
        lambda p, t, m: F.ndcg(p, t, [3, 10], mask=m, validate_args=False),
        lambda p, t, m: F.average_precision(
            p, t, [3, 10], mask=m, denominator="retrieved_relevant", validate_args=False
        ),
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


@pytest.mark.parametrize(
    ("names", "ties"),
    [
        (
            [
                "bpref",
                "binG",
                "Rndcg",
                "Rprec_mult.0.5,2",
                "relative_P.3,10",
                "set_F",
                "utility",
                "num_nonrel_judged_ret",
            ],
            "average",
        ),
        (["infAP", "iprec_at_recall.0,0.5,1", "11pt_avg", "G", "ndcg_rel", "yaap", "bpref", "Rprec_mult.1"], "first"),
    ],
    ids=["averaged", "first"],
)
def test_trec_eval_measures_compile_fullgraph(names, ties):
    """trec_eval's other measures (bpref, infAP, interpolated precision, gain and set measures) compile too."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(1)
    preds = (torch.rand(8, 16, generator=g) * 4).round() / 4  # ties
    target = torch.randint(-2, 4, (8, 16), generator=g)
    mask = torch.rand(8, 16, generator=g) > 0.2
    judged = target >= 0

    def fn(p, t, m, j):
        return F.evaluate(
            p, t, names, mask=m, judged=j, ties=ties, gain="linear", reduction="none", validate_args=False
        )

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    got, want = compiled(preds, target, mask, judged), fn(preds, target, mask, judged)
    assert list(got) == list(want)
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)
