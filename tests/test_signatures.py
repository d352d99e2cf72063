"""Every public metric class shows the arguments it accepts: ``inspect.signature`` (so ``help()`` and
IDEs) names each convention argument the class honours, its docstring lists them, and an unknown
keyword is a TypeError naming it. Only torchmetrics' own Metric options pass through ``**kwargs``.

What a class accepts is found by calling it (every Convention field and every option, one at a
time), not read from the signature under test."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
import torchmetrics

import torch_rankeval
from torch_rankeval import metrics as M
from torch_rankeval.conventions import PRESETS, Convention
from torch_rankeval.metrics._options import METRIC_OPTIONS


def _public_metric_classes() -> dict[str, type]:
    out = {}
    for name in sorted({*torch_rankeval.__all__, *M.__all__}):
        obj = getattr(torch_rankeval, name, None) or getattr(M, name, None)
        if isinstance(obj, type) and issubclass(obj, torchmetrics.Metric):
            out[name] = obj
    return out


CLASSES = _public_metric_classes()
REQUIRED = {  # arguments without a default
    "ItemExposure": {"num_items": 6, "k": 2},
    "IntraListDiversity": {"num_items": 6, "k": 2, "categories": torch.tensor([0, 0, 1, 1, 2, 2])},
    "Novelty": {"num_items": 6, "k": 2, "popularity": torch.arange(6.0)},
    "Unexpectedness": {"num_items": 6, "k": 2, "categories": torch.tensor([0, 0, 1, 1, 2, 2])},
    "Serendipity": {"num_items": 6, "k": 2, "categories": torch.tensor([0, 0, 1, 1, 2, 2])},
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


def _build(name: str, **kwargs):  # noqa: ANN003, ANN202
    return CLASSES[name](**REQUIRED.get(name, {}), **kwargs)


def test_the_candidates_cover_every_convention_field_and_every_public_metric_class():
    assert set(CONVENTION_VALUES) == {f.name for f in dataclasses.fields(Convention)}  # a new field: add it here
    assert set(CLASSES) == {n for n in M.__all__ if isinstance(getattr(M, n), type)}
    assert len(CLASSES) == 20


@pytest.mark.parametrize("arg", sorted(VALUES))
@pytest.mark.parametrize("name", sorted(CLASSES))
def test_an_accepted_argument_is_a_named_parameter_and_is_honoured(name, arg):
    params = inspect.signature(CLASSES[name]).parameters
    value = VALUES[arg]
    try:
        metric = _build(name, **{arg: value})
    except TypeError as err:  # not accepted: then it is not a parameter, and the error names it
        assert arg not in params
        assert repr(arg) in str(err) or f"'{arg}'" in str(err)
        return
    assert arg in params and params[arg].kind in NAMED, f"{name} accepts {arg}= but its signature hides it"
    convention = getattr(metric, "convention", None)
    if arg == "convention":  # FallOut's own default empty_target_action="pos" wins over the preset
        fixed = {"empty_target_action": "pos"} if name == "FallOut" else {}
        assert convention == dataclasses.replace(PRESETS[value], **fixed)
    elif arg in CONVENTION_VALUES and isinstance(convention, Convention):
        assert getattr(convention, arg) == value
    else:
        assert getattr(metric, arg) == value


@pytest.mark.parametrize("name", sorted(n for n, c in CLASSES.items() if issubclass(c, M.RankingMetrics)))
def test_single_metric_classes_show_every_argument_of_ranking_metrics(name):
    shown = inspect.signature(CLASSES[name]).parameters
    base = inspect.signature(M.RankingMetrics).parameters
    expected = [p for p in base if p not in ("metrics", "kwargs") and not (name == "RPrecision" and p == "k")]
    assert [p for p in expected if p not in shown] == []
    for p in expected:  # same defaults as RankingMetrics (FallOut's empty case scores 1, as torchmetrics)
        want = "pos" if (name, p) == ("FallOut", "empty_target_action") else base[p].default
        assert shown[p].default == want, (name, p)
    for p in ("gain", "log_base", "discount", "ties", "convention", "empty_target_action", "ignore_index"):
        assert p in shown
    assert "validate_args" in shown and "relevance_threshold" in shown


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_only_torchmetrics_options_pass_through_kwargs(name):
    params = inspect.signature(CLASSES[name]).parameters
    var = [p.name for p in params.values() if p.kind == inspect.Parameter.VAR_KEYWORD]
    assert var == ["kwargs"]
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument 'definitely_not_an_argument'"):
        _build(name, definitely_not_an_argument=1)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments 'colour', 'flavour'"):
        _build(name, colour=1, flavour=2)
    metric = _build(name, sync_on_compute=False, compute_on_cpu=False, dist_sync_on_step=False)
    assert metric.sync_on_compute is False and metric.compute_on_cpu is False


def test_a_misspelt_argument_gets_a_close_match():
    with pytest.raises(
        TypeError, match=r"NDCG\(\) got an unexpected keyword argument 'gains' \(did you mean 'gain'\?\)"
    ):
        M.NDCG(k=10, gains="linear")
    with pytest.raises(TypeError, match=r"'empty_action' \(did you mean 'empty_target_action'\?\)"):
        M.MAP(empty_action="skip")


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


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_docstring_lists_every_argument_and_has_a_doctest(name):
    cls = CLASSES[name]
    doc = inspect.getdoc(cls)
    assert ">>> " in doc, f"{name} has no doctest"
    assert "Args:" in doc, f"{name} has no Args list"
    args = doc[doc.index("Args:") :]
    missing = [p for p in inspect.signature(cls).parameters if p not in args]
    assert missing == [], f"{name}'s Args list misses {missing}"
