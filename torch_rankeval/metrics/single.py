"""One class per metric: thin specialisations of :class:`~torch_rankeval.RankingMetrics`.

Each takes the cutoff ``k`` (None, an int, or a sequence of ints) and the conventions its measure
reads (its registry row's ``reads``: :attr:`~torch_rankeval.measures.Family.reads`); any other
convention argument is a ``TypeError`` naming it (a preset, ``convention=``, sets them all).
``compute`` returns a scalar, or one value per cutoff when ``k`` is a sequence. Every class
accepts padded ``(N, L)`` input or flat torchmetrics-style input with ``indexes`` (see
:class:`~torch_rankeval.RankingMetrics` for inputs, states, distributed semantics and edge cases).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Literal, overload

from torch import Tensor

from torch_rankeval.conventions import Convention
from torch_rankeval.metrics.base import RankingMetrics

__all__ = ["DCG", "IDCG", "NDCG", "MAP", "MRR", "Precision", "Recall", "HitRate", "RPrecision", "FallOut", "AUROC"]


class _SingleMetric(RankingMetrics):
    """A :class:`RankingMetrics` with one metric whose ``compute`` returns a tensor.

    Each subclass's ``__init__`` lists the arguments of :class:`RankingMetrics` but ``metrics`` (the
    class names it) and the convention arguments its measure does not read, so that ``help()``,
    ``inspect.signature`` and IDEs show exactly what it takes, and passes them on by name.
    """

    _metric: str = ""
    # plot(): the measures of these classes lie in [0, 1] (DCG and IDCG override: unbounded)
    plot_lower_bound: float | None = 0.0
    plot_upper_bound: float | None = 1.0

    def __init__(
        self,
        k: int | Sequence[int] | None,
        conventions: dict[str, Any],
        *,
        convention: str | Convention | None,
        ignore_index: int | None,
        input_format: str,
        whole_queries: bool,
        keep_per_query: bool,
        strata: int | None,
        stratum_weights: Sequence[float] | Tensor | None,
        validate_args: bool,
        compile: bool,
        window: int | None,
        half_life: float | None,
        window_unit: str,
        **kwargs: Any,
    ) -> None:
        """``conventions``: the convention arguments the subclass takes (those its measure reads), by name."""
        self._sequence_k = isinstance(k, Sequence)
        super().__init__(
            (self._metric,),
            k,
            **conventions,
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )

    def _plot_name(self) -> str:
        """``"NDCG@10"``: the class name and its cutoff(s) (``"NDCG@5,10"``; none for the whole list)."""
        cutoffs = [key.partition("@")[2] for key in self.keys if "@" in key]
        return f"{type(self).__name__}@{','.join(cutoffs)}" if cutoffs else type(self).__name__

    @overload
    def compute(self, stderr: Literal[False] = False) -> Tensor: ...

    @overload
    def compute(self, stderr: Literal[True]) -> dict[str, Tensor]: ...

    def compute(self, stderr: bool = False) -> Tensor | dict[str, Tensor]:  # type: ignore[override]
        """The mean over queries (one value per cutoff when ``k`` is a sequence). With ``stderr``:
        ``{key: mean, "<key>/stderr": its standard error}`` for every key, as
        :meth:`RankingMetrics.compute(stderr=True) <torch_rankeval.RankingMetrics.compute>`. A metric
        created with ``window``, ``half_life`` or ``strata`` always returns a dict, as
        :class:`~torch_rankeval.RankingMetrics` does: the plain means, with the recent values
        (``"window/<key>"``, ``"decay/<key>"``) and the post-stratified and per-stratum ones
        (``"<key>/poststratified"``, ``"<key>/stratum/<h>"``) beside, each with its error under
        ``stderr``; :meth:`compute_per_stratum` gives the per-stratum table. The static return type
        (``Tensor`` without ``stderr``) is that of the plain metric.

        Example:
            >>> import torch
            >>> from torch_rankeval import MRR
            >>> metric = MRR()
            >>> metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.3, 0.6]]), torch.tensor([[1, 0], [1, 0], [1, 1]]))
            >>> {k: round(v.item(), 4) for k, v in metric.compute(stderr=True).items()}
            {'mrr': 0.8333, 'mrr/stderr': 0.1667}
        """
        if stderr is not False or self._windowed or self.strata is not None:
            return self._with_stderr(stderr)
        means = self._means()
        return means if self._sequence_k else means[0]


class DCG(_SingleMetric):
    """Mean discounted cumulative gain ``sum_{rank <= k} gain(rel) / log_b(rank + 1)``.

    DCG has no empty case: a list without gains scores 0.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        gain: ``"exp2"`` (default, ``2**rel - 1``), ``"linear"``, a ``{grade: gain}`` mapping or a callable.
        log_base, discount: the rank discount ``1 / log_b(rank + 1)`` (default base 2) or a callable
            of the 1-based rank tensor.
        ties: ``"average"`` (default: exact expectation over tie orders), ``"first"``, ``"pessimistic"``,
            ``"optimistic"``.
        convention: a preset name (``"trec_eval"``, ``"sklearn"``, ...) or a
            :class:`~torch_rankeval.conventions.Convention`; explicit arguments win over it.
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import DCG
        >>> metric = DCG(k=2, gain="linear")
        >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[1, 2, 3]]))
        >>> metric.compute()
        tensor(2.2619)
    """

    plot_upper_bound: float | None = None

    _metric = "dcg"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        gain: Any = None,
        log_base: float | None = None,
        discount: Callable[[Tensor], Tensor] | None = None,
        ties: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(gain=gain, log_base=log_base, discount=discount, ties=ties),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class IDCG(_SingleMetric):
    """Mean ideal DCG: the DCG of each query's judged documents in decreasing gain.

    Pass ``ideal_target`` to ``update`` to include judged documents the ranking did not return.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        gain, log_base, discount: the gain and the rank discount, as in :class:`DCG`.
        convention: a preset name or a :class:`~torch_rankeval.conventions.Convention`.
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import IDCG
        >>> metric = IDCG(gain="linear")
        >>> metric.update(torch.tensor([[0.9, 0.5]]), torch.tensor([[0, 1]]))
        >>> metric.compute()
        tensor(1.)
    """

    plot_upper_bound: float | None = None

    _metric = "idcg"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        gain: Any = None,
        log_base: float | None = None,
        discount: Callable[[Tensor], Tensor] | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(gain=gain, log_base=log_base, discount=discount),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class NDCG(_SingleMetric):
    """Mean normalised DCG, ``DCG@k / IDCG@k``.

    Drop-in for torchmetrics' ``RetrievalNormalizedDCG(top_k=10)``: ``NDCG(k=10, convention="torchmetrics")``
    with the same ``update(preds, target, indexes=...)``.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        gain: ``"exp2"`` (default), ``"linear"``, a ``{grade: gain}`` mapping or a callable.
        log_base, discount: the rank discount ``1 / log_b(rank + 1)`` (default base 2) or a callable.
        ties: ``"average"`` (default: exact expectation over tie orders), ``"first"``, ``"pessimistic"``,
            ``"optimistic"``.
        empty_target_action: queries whose ideal DCG is 0: ``"neg"`` (default: 0, counted),
            ``"pos"`` (1), ``"skip"`` (left out of the mean), ``"error"``.
        ideal_ranking: ``"achievable"`` (default: the list's gains in decreasing order) or ``"k_relevant"``
            (``k`` documents of its highest gain: RecTools' ``divide_by_achievable=False``).
        convention: a preset name (``"torchmetrics"``, ``"trec_eval"``, ``"sklearn"``, ...) or a
            :class:`~torch_rankeval.conventions.Convention`; explicit arguments win over it.
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import NDCG
        >>> metric = NDCG(k=[1, 3])
        >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 2, 1]]))
        >>> metric.compute()
        tensor([0.0000, 0.6590])
    """

    _metric = "ndcg"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        gain: Any = None,
        log_base: float | None = None,
        discount: Callable[[Tensor], Tensor] | None = None,
        ties: str | None = None,
        empty_target_action: str | None = None,
        ideal_ranking: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(
                gain=gain,
                log_base=log_base,
                discount=discount,
                ties=ties,
                empty_target_action=empty_target_action,
                ideal_ranking=ideal_ranking,
            ),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class MAP(_SingleMetric):
    """Mean average precision (AP@k averaged over queries).

    With ``n_relevant`` or ``ideal_target`` in ``update``, relevant documents the ranking missed count
    as misses.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        denominator: ``"all_relevant"`` (trec_eval, default), ``"retrieved_relevant"``
            (torchmetrics), ``"min_k_relevant"`` or ``"k"`` (RecTools' ``divide_by_k``).
        graded: gain-weighted AP (default False).
        relevance_threshold: relevant when ``target >= threshold`` (default: ``>= 1`` for integer
            grades, ``> 0`` for float/bool).
        ties: ``"average"`` (default), ``"first"``, ``"pessimistic"``, ``"optimistic"``.
        empty_target_action: queries without a relevant document: ``"neg"`` (default: 0),
            ``"pos"``, ``"skip"``, ``"error"``.
        convention: a preset name or a :class:`~torch_rankeval.conventions.Convention`.
        gain: the gain of graded AP (``graded=True``), as in :class:`NDCG`.
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import MAP
        >>> metric = MAP()
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]))
        >>> metric.compute()
        tensor(0.8333)
    """

    _metric = "map"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        gain: Any = None,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        denominator: str | None = None,
        graded: bool | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(
                gain=gain,
                ties=ties,
                relevance_threshold=relevance_threshold,
                empty_target_action=empty_target_action,
                denominator=denominator,
                graded=graded,
            ),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class MRR(_SingleMetric):
    """Mean reciprocal rank of the first relevant document (within the top ``k``).

    Scores of any sign count as retrieved (raw logits work).

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        relevance_threshold, ties, empty_target_action, convention: as in :class:`MAP` (relevant when
            ``target >= threshold``; queries without a relevant document score 0 by default).
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import MRR
        >>> metric = MRR()
        >>> metric.update(torch.tensor([[-0.1, -0.5, -0.9]]), torch.tensor([[0, 0, 1]]))
        >>> metric.compute()
        tensor(0.3333)
    """

    _metric = "mrr"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(ties=ties, relevance_threshold=relevance_threshold, empty_target_action=empty_target_action),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class Precision(_SingleMetric):
    """Mean precision@k; ``k`` beyond the list divides by ``k`` unless ``adaptive_k=True``.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        adaptive_k: divide by ``min(k, list length)`` instead of ``k`` (default False).
        min_k_relevant: divide by at most the query's relevant documents, ``min(k, R)`` (RecTools'
            ``r_precision=True``; default False).
        relevance_threshold, ties, empty_target_action, convention: as in :class:`MAP` (relevant when
            ``target >= threshold``; queries without a relevant document score 0 by default).
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import Precision
        >>> metric = Precision(k=2)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "precision"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        adaptive_k: bool | None = None,
        min_k_relevant: bool | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(
                ties=ties,
                relevance_threshold=relevance_threshold,
                empty_target_action=empty_target_action,
                adaptive_k=adaptive_k,
                min_k_relevant=min_k_relevant,
            ),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class Recall(_SingleMetric):
    """Mean recall@k over all relevant documents of each query (``n_relevant``/``ideal_target`` or the list).

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        relevance_threshold, ties, empty_target_action, convention: as in :class:`MAP` (relevant when
            ``target >= threshold``; queries without a relevant document score 0 by default).
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import Recall
        >>> metric = Recall(k=2)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[1, 0, 1]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "recall"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(ties=ties, relevance_threshold=relevance_threshold, empty_target_action=empty_target_action),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class HitRate(_SingleMetric):
    """Share of queries with a relevant document in the top ``k`` (trec_eval ``success.k``).

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        relevance_threshold, ties, empty_target_action, convention: as in :class:`MAP` (relevant when
            ``target >= threshold``; queries without a relevant document score 0 by default).
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import HitRate
        >>> metric = HitRate(k=[1, 3])
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[0, 0, 1]]))
        >>> metric.compute()
        tensor([0., 1.])
    """

    _metric = "hit_rate"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(ties=ties, relevance_threshold=relevance_threshold, empty_target_action=empty_target_action),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class RPrecision(_SingleMetric):
    """Mean R-precision: precision at rank R, the number of relevant documents of the query.

    Args:
        relevance_threshold, ties, empty_target_action, convention: as in :class:`MAP` (relevant when
            ``target >= threshold``; queries without a relevant document score 0 by default).
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import RPrecision
        >>> metric = RPrecision()
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[1, 0, 1, 0]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "r_precision"

    def __init__(
        self,
        *,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            None,
            dict(ties=ties, relevance_threshold=relevance_threshold, empty_target_action=empty_target_action),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class FallOut(_SingleMetric):
    """Mean fall-out@k: the share of each list's non-relevant documents that the top ``k`` hold.

    Drop-in for torchmetrics' ``RetrievalFallOut(top_k=k)``: a list without non-relevant document
    scores ``empty_target_action`` (default ``"pos"``: 1, as torchmetrics). Ties (default
    ``"average"``): the expected value over the orders of tied documents.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        empty_target_action: lists without a non-relevant document: ``"pos"`` (default: 1, as
            torchmetrics), ``"neg"``, ``"skip"``, ``"error"``.
        relevance_threshold, ties, convention: as in :class:`MAP`.
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import FallOut
        >>> metric = FallOut(k=2)
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.7, 0.6]]), torch.tensor([[1, 0, 1, 0]]))
        >>> metric.compute()
        tensor(0.5000)
    """

    _metric = "fall_out"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str = "pos",
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            k,
            dict(ties=ties, relevance_threshold=relevance_threshold, empty_target_action=empty_target_action),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )


class AUROC(_SingleMetric):
    """Mean retrieval AUROC of each list's top ``k`` (torchmetrics' ``RetrievalAUROC(top_k=k, max_fpr=...)``).

    Tied scores count half a correctly ordered pair (the trapezoidal ROC); a top ``k`` without a
    relevant or a non-relevant document scores 0; a list without relevant document is empty
    (``empty_target_action``, default ``"neg"``: 0). ``max_fpr``: the McClish-standardised partial
    AUC over false-positive rates ``[0, max_fpr]``.

    Args:
        k: cutoff: None (whole list), an int, or a sequence of ints (``compute`` then returns one value per cutoff).
        max_fpr: None (default: the whole ROC) or the false-positive rate in ``(0, 1]`` up to which
            the McClish-standardised partial AUC is taken.
        ties: ``"average"`` (default: a tied pair counts 1/2, averaged over which tied documents the
            cutoff keeps), ``"first"``, ``"pessimistic"``, ``"optimistic"``.
        empty_target_action: lists without a relevant document: ``"neg"`` (default: 0), ``"pos"``,
            ``"skip"``, ``"error"``.
        relevance_threshold, convention: as in :class:`MAP`.
        ignore_index, input_format, whole_queries, keep_per_query, strata, stratum_weights, validate_args,
            compile, window, half_life, window_unit, kwargs: as in :class:`~torch_rankeval.RankingMetrics`
            (with ``window``, ``half_life`` or ``strata``, :meth:`compute` returns a dict).

    Example:
        >>> import torch
        >>> from torch_rankeval import AUROC
        >>> metric = AUROC()
        >>> metric.update(torch.tensor([[0.9, 0.8, 0.8, 0.6]]), torch.tensor([[1, 0, 1, 0]]))
        >>> metric.compute()                      # pairs: right, tied (1/2), right, right
        tensor(0.8750)
    """

    _metric = "auroc"

    def __init__(
        self,
        k: int | Sequence[int] | None = None,
        *,
        max_fpr: float | None = None,
        ties: str | None = None,
        relevance_threshold: float | None = None,
        empty_target_action: str | None = None,
        convention: str | Convention | None = None,
        ignore_index: int | None = None,
        input_format: str = "auto",
        whole_queries: bool = False,
        keep_per_query: bool = False,
        strata: int | None = None,
        stratum_weights: Sequence[float] | Tensor | None = None,
        validate_args: bool = True,
        compile: bool = False,
        window: int | None = None,
        half_life: float | None = None,
        window_unit: str = "updates",
        **kwargs: Any,
    ) -> None:
        if max_fpr is not None:
            self._metric = f"auroc(max_fpr={max_fpr!r})"
        super().__init__(
            k,
            dict(ties=ties, relevance_threshold=relevance_threshold, empty_target_action=empty_target_action),
            convention=convention,
            ignore_index=ignore_index,
            input_format=input_format,
            whole_queries=whole_queries,
            keep_per_query=keep_per_query,
            strata=strata,
            stratum_weights=stratum_weights,
            validate_args=validate_args,
            compile=compile,
            window=window,
            half_life=half_life,
            window_unit=window_unit,
            **kwargs,
        )
