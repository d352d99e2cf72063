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
    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
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

    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
    got, want = compiled(preds, target, mask, judged), fn(preds, target, mask, judged)
    assert list(got) == list(want)
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)


def test_compiled_metrics_with_other_cutoffs_in_one_process_on_inductor():
    """Issue 18 item 10: the second compiled metric with another cutoff crashed in inductor's lowering
    (``LoweringException: Cannot convert symbols to int``): every metric's kernel shared one code
    object, so dynamo recompiled it for the new cutoff with the cutoff as a symbolic int. The
    inductor backend (not aot_eager, which never lowers) against the eager metric."""
    from torch_rankeval import RankingMetrics
    from torch_rankeval.metrics import _compiled

    assert _compiled.BACKEND == "inductor"
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(3)
    preds = (torch.rand(6, 12, generator=g) * 4).round() / 4  # ties
    target = torch.randint(0, 3, (6, 12), generator=g)
    mask = torch.rand(6, 12, generator=g) > 0.2
    for k in (5, 10):  # 10: the one that crashed
        kw = {"metrics": ("ndcg", "map"), "k": k, "validate_args": False}
        compiled, eager = RankingMetrics(**kw, compile=True), RankingMetrics(**kw)
        for m in (compiled, eager):
            m.update(preds, target, mask=mask)
        got, want = compiled.compute(), eager.compute()
        assert list(got) == [f"ndcg@{k}", f"map@{k}"]
        for key in want:
            torch.testing.assert_close(got[key], want[key], msg=key)


@pytest.mark.parametrize("name", ["diversity", "novelty", "serendipity"])
def test_beyond_accuracy_update_compiles_fullgraph(name):
    """Unvalidated beyond-accuracy updates trace with fullgraph=True (no host sync, no data-dependent
    shape: under torch.compile the view takes the sync-free path, not the CPU eager host reads) and
    equal the validated eager metric, with tie groups spilling past the cutoff and a dense exclude."""
    from torch_rankeval.metrics import IntraListDiversity, Novelty, Serendipity

    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    scores = (torch.rand(6, 12, generator=g) * 3).round()  # ties across the cutoff
    exclude = torch.rand(6, 12, generator=g) < 0.2
    history = torch.rand(6, 12, generator=g) < 0.3
    target = torch.randint(0, 2, (6, 12), generator=g).float()
    embeddings = torch.randn(12, 4, generator=g)
    make = {
        "diversity": lambda v: IntraListDiversity(12, 4, embeddings=embeddings, validate_args=v),
        "novelty": lambda v: Novelty(12, 4, torch.arange(1.0, 13.0), validate_args=v),
        "serendipity": lambda v: Serendipity(12, 4, embeddings=embeddings, validate_args=v),
    }[name]
    args = (scores, target, history, exclude) if name == "serendipity" else (scores, exclude)
    compiled, eager = make(False), make(True)
    torch.compile(compiled.update, fullgraph=True, backend="inductor")(*args)
    eager.update(*args)
    want = eager.compute()
    assert set(compiled.compute()) == set(want)
    for key, value in want.items():
        torch.testing.assert_close(compiled.compute()[key], value, msg=key)
