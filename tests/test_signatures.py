"""Every public metric class shows the arguments it accepts, and accepts the convention options its
measures read: ``inspect.signature`` (so ``help()`` and IDEs) names each argument the class honours, its
docstring lists them, a convention option its measures do not read is a TypeError naming it, and an
unknown keyword is a TypeError naming it. Only torchmetrics' own Metric options pass through ``**kwargs``.

The class list comes from the exports and is checked against the registry rows (``Family.metric_class``);
what a single-measure class must accept comes from its row (``Family.reads``); what a class accepts is
found by calling it (every Convention field and every option, one at a time), not read from the
signature under test. One check per class.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
import torchmetrics

import torch_rankeval
from torch_rankeval import functional as F
from torch_rankeval import metrics as M
from torch_rankeval.conventions import PRESETS, Convention
from torch_rankeval.measures import FAMILIES
from torch_rankeval.measures.registry import OPTIONS
from torch_rankeval.metrics._options import METRIC_OPTIONS
from torch_rankeval.metrics.single import _SingleMetric


def _public_metric_classes() -> dict[str, type]:
    out = {}
    for name in sorted({*torch_rankeval.__all__, *M.__all__}):
        obj = getattr(torch_rankeval, name, None) or getattr(M, name, None)
        if isinstance(obj, type) and issubclass(obj, torchmetrics.Metric):
            out[name] = obj
    return out


CLASSES = _public_metric_classes()
#: The registry rows that have a metric class, by class name.
ROWS = {f.metric_class: f for f in FAMILIES.values() if f.metric_class}
REQUIRED = {  # arguments without a default (RankingMetrics: measures that read every convention option)
    "RankingMetrics": {"metrics": ("ndcg", "map", "precision@3")},
    "ItemExposure": {"num_items": 6, "k": 2},
    "IntraListDiversity": {"num_items": 6, "k": 2, "categories": torch.tensor([0, 0, 1, 1, 2, 2])},
    "Novelty": {"num_items": 6, "k": 2, "popularity": torch.arange(6.0)},
    "Unexpectedness": {"num_items": 6, "k": 2, "categories": torch.tensor([0, 0, 1, 1, 2, 2])},
    "Serendipity": {"num_items": 6, "k": 2, "categories": torch.tensor([0, 0, 1, 1, 2, 2])},
    "AvgRecPopularity": {"num_items": 6, "k": 2, "popularity": torch.arange(6.0)},
    "MeanInvUserFreq": {"num_items": 6, "k": 2, "users_per_item": torch.arange(6.0), "num_users": 6},
    "PopularityRankSerendipity": {"num_items": 6, "k": 2, "popularity": torch.arange(6.0)},
}


def _discount(ranks):  # noqa: ANN001, ANN202
    return 1.0 / ranks


#: One valid, non-default value of every Convention field ...
CONVENTION_VALUES = {
    "gain": "linear",
    "log_base": 10.0,
    "discount": _discount,
    "ties": "first",
    "relevance_threshold": 2.0,
    "empty_target_action": "skip",
    "denominator": "retrieved_relevant",
    "graded": True,
    "adaptive_k": True,
    "min_k_relevant": True,
    "ideal_ranking": "k_relevant",
    "nonpositive_not_relevant": True,
    "by_measure": {"ndcg": {"ties": "first"}},
    "all_skipped": "zero",  # the torchmetrics presets' mean over no counted query
    "torch_topk_k": 3,  # set per measure by the torchmetrics presets (torch.topk's k), not an argument
}
#: ... and of every other argument a class may take by convention.
OPTION_VALUES = {
    "convention": "trec_eval",
    "ignore_index": -1,
    "validate_args": False,
    "keep_per_query": True,
    "input_format": "padded",
    "whole_queries": True,
    "compile": True,
    "strata": 3,
    "window": 3,
    "half_life": 5.0,
    "window_unit": "queries",
}
VALUES = {**CONVENTION_VALUES, **OPTION_VALUES}
NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
#: The arguments of RankingMetrics that are not convention options: every single-measure class shows them.
RUN_OPTIONS = [p for p in inspect.signature(M.RankingMetrics).parameters if p not in ("metrics", "kwargs", *OPTIONS)]


def _build(name: str, **kwargs):  # noqa: ANN003, ANN202
    return CLASSES[name](**REQUIRED.get(name, {}), **kwargs)


def test_the_class_list_is_the_exports_and_the_rows():
    assert set(CONVENTION_VALUES) == {f.name for f in dataclasses.fields(Convention)}  # a new field: add it here
    assert set(OPTIONS) <= set(CONVENTION_VALUES)
    assert set(CLASSES) == {n for n in M.__all__ if isinstance(getattr(M, n), type)}
    singles = {n for n, c in CLASSES.items() if issubclass(c, _SingleMetric)}
    assert singles == set(ROWS), "a single-measure class without its row's metric_class, or a row naming no class"
    assert all(CLASSES[n]._metric == ROWS[n].key for n in singles)
    assert {"RankingMetrics", *singles} <= set(torch_rankeval.__all__)


def _check_arguments(name: str) -> None:
    """Every candidate argument: accepted (then a named parameter, and honoured) or a TypeError naming it."""
    params = inspect.signature(CLASSES[name]).parameters
    for arg, value in VALUES.items():
        try:
            metric = _build(name, **{arg: value})
        except TypeError as err:  # not accepted: then it is not a parameter, and the error names it
            assert arg not in params, (name, arg, err)
            assert repr(arg) in str(err) or f" {arg}=" in str(err), (name, arg, err)
            if arg in OPTIONS:
                assert f"{name} does not read {arg}=" in str(err), (name, arg, err)
            continue
        assert arg in params and params[arg].kind in NAMED, f"{name} accepts {arg}= but its signature hides it"
        convention = getattr(metric, "convention", None)
        if arg == "convention":  # FallOut's own default empty_target_action="pos" wins over the preset
            fixed = {"empty_target_action": "pos"} if name == "FallOut" else {}
            assert convention == dataclasses.replace(PRESETS[value], **fixed), name
        elif arg in CONVENTION_VALUES and isinstance(convention, Convention):
            assert getattr(convention, arg) == value, (name, arg)
        else:
            assert getattr(metric, arg) == value, (name, arg)


def _check_kwargs(name: str) -> None:
    params = inspect.signature(CLASSES[name]).parameters
    assert [p.name for p in params.values() if p.kind == inspect.Parameter.VAR_KEYWORD] == ["kwargs"]
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument 'definitely_not_an_argument'"):
        _build(name, definitely_not_an_argument=1)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments 'colour', 'flavour'"):
        _build(name, colour=1, flavour=2)
    metric = _build(name, sync_on_compute=False, compute_on_cpu=False, dist_sync_on_step=False)
    assert metric.sync_on_compute is False and metric.compute_on_cpu is False


def _check_docstring(name: str) -> None:
    doc = inspect.getdoc(CLASSES[name])
    assert ">>> " in doc, f"{name} has no doctest"
    assert "Args:" in doc, f"{name} has no Args list"
    args = doc[doc.index("Args:") :]
    missing = [p for p in inspect.signature(CLASSES[name]).parameters if p not in args]
    assert missing == [], f"{name}'s Args list misses {missing}"


def _check_against_the_row(name: str) -> None:
    """A single-measure class shows exactly the convention options its row reads, and every other argument
    of RankingMetrics with RankingMetrics' default (FallOut's empty case scores 1, as torchmetrics)."""
    shown = inspect.signature(CLASSES[name]).parameters
    base = inspect.signature(M.RankingMetrics).parameters
    assert [p for p in shown if p in OPTIONS] == [o for o in OPTIONS if o in ROWS[name].reads], name
    expected = [p for p in RUN_OPTIONS if not (p == "k" and not ROWS[name].cutoff)]
    assert [p for p in expected if p not in shown] == []
    for p in [*expected, *ROWS[name].reads]:
        want = "pos" if (name, p) == ("FallOut", "empty_target_action") else base[p].default
        assert shown[p].default == want, (name, p)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_class_takes_what_its_measures_read_and_names_what_it_refuses(name):
    if name in ROWS:
        _check_against_the_row(name)
    elif name == "RankingMetrics":  # many measures: every convention option (the union is checked per call)
        assert set(OPTIONS) <= set(inspect.signature(M.RankingMetrics).parameters)
    _check_arguments(name)
    _check_kwargs(name)
    _check_docstring(name)


def test_ranking_metrics_accepts_the_union_of_what_its_measures_read():
    M.RankingMetrics(("mrr", "ndcg@5"), gain="linear", relevance_threshold=2)  # ndcg reads gain, mrr the threshold
    M.RankingMetrics(("mrr",), gain=None)  # None: not given
    with pytest.raises(TypeError, match=r"RankingMetrics does not read gain= \(its measures mrr, recall@5 read"):
        M.RankingMetrics(("mrr", "recall@5"), gain="linear")
    with pytest.raises(TypeError, match=r"does not read adaptive_k="):
        M.RankingMetrics(adaptive_k=True)  # the default measures: ndcg, map, mrr
    M.RankingMetrics(("mrr",), convention="lightgbm")  # a preset sets every convention, read or not
    with pytest.raises(TypeError, match=r"MRR does not read gain= \(its measures mrr read ties=, relevance_threshold="):
        M.MRR(gain="linear")


def test_a_misspelt_argument_gets_a_close_match():
    with pytest.raises(
        TypeError, match=r"NDCG\(\) got an unexpected keyword argument 'gains' \(did you mean 'gain'\?\)"
    ):
        M.NDCG(k=10, gains="linear")
    with pytest.raises(TypeError, match=r"'empty_action' \(did you mean 'empty_target_action'\?\)"):
        M.MAP(empty_action="skip")


def test_the_public_functions_are_the_rows():
    """Each row's public function is exported and takes exactly the convention options its row reads; every
    one-measure function of ``functional`` is a row's."""
    functions = {f.function: f for f in FAMILIES.values() if f.function}
    assert set(functions) <= set(F.__all__)
    for fn, family in functions.items():
        params = inspect.signature(getattr(F, fn)).parameters
        assert {p for p in params if p in OPTIONS} == set(family.reads), fn
        assert list(params)[:2] == ["preds", "target"] and params["convention"].default is None
    one_measure = {n for n in F.__all__ if "evaluate_family(" in inspect.getsource(getattr(F, n))}
    assert one_measure == set(functions)


def test_the_listed_metric_options_are_torchmetrics_own():
    """If torchmetrics drops one of them, this fails (the list in _options.py must follow)."""

    class Bare(torchmetrics.Metric):
        def update(self) -> None:
            pass

        def compute(self) -> None:
            pass

    defaults = {
        "compute_on_cpu": False,
        "dist_sync_on_step": False,
        "sync_on_compute": True,
        "compute_with_cache": True,
    }
    for option in METRIC_OPTIONS:
        Bare(**{option: defaults.get(option)})
    with pytest.raises(ValueError, match="Unexpected keyword"):
        Bare(not_an_option=1)
