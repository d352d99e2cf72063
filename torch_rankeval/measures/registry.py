"""The measure registry: every measure of the library in one table.

A :class:`Family` is one row: what it measures, the kernel that computes it off the ranked view,
its declared, typed parameters (:class:`~torch_rankeval.measures.params.Param`), its names (ir_measures' name and the library's
case-insensitive aliases) and how per-query values combine. :data:`TREC_NAMES` says how trec_eval
spells each family (``ndcg`` and ``ndcg_cut`` are one family, with and without a cutoff) and gives
trec_eval's output order. A :class:`Measure` is a family with one cutoff and parameter values; it
compares and hashes by value, so equal settings written differently (``nDCG@10``, ``ndcg_cut.10``)
are one measure, computed once.

The row is the only place that knows a measure: nothing below it (the conventions, the ranking core,
the kernels) names one (``tests/test_one_home.py``). Adding a measure is a kernel ``(ranked_batch,
cutoffs, convention, **params) -> (values (N, K), empty flags (N, 1 or K) or None)`` and a row: its
names, parameters, the convention options it reads, whether the top-k route serves it; it then works by
name in ``F.evaluate``, ``RankingMetrics``, ``trec.evaluate``, the command line and the docs' tables
(``kernels/ncrr.py`` and its row are the worked example).

Example:
    >>> FAMILIES["ndcg"].ir, [p.name for p in FAMILIES["ndcg"].params]
    ('nDCG', ['gains', 'dcg', 'ideal_ranking'])
    >>> Measure("ndcg", 10) == Measure("ndcg", 10, label="nDCG@10")
    True
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from torch_rankeval.conventions import Convention, gain_fn, resolve_convention, set_measure_rules
from torch_rankeval.kernels.accuracy import accuracy_values
from torch_rankeval.kernels.ap import average_precision_values
from torch_rankeval.kernels.bpref import JudgedNonRelevant, bpref_values, infap_values, num_nonrel_judged_ret_values
from torch_rankeval.kernels.compat import compat_values
from torch_rankeval.kernels.confusion import catalogue_accuracy_values, catalogue_checks, mcc_values
from torch_rankeval.kernels.counts import num_q_values, num_rel_ret_values, num_rel_values, num_ret_values
from torch_rankeval.kernels.cwl import (
    bpm_values,
    insq_values,
    inst_values,
    nerr8_values,
    nerr9_values,
    nerr10_values,
    nerr11_values,
    sdcg_values,
)
from torch_rankeval.kernels.dcg import dcg_values, idcg_values, ndcg_values
from torch_rankeval.kernels.err import err_grade_checks, err_values
from torch_rankeval.kernels.f1 import f1_values
from torch_rankeval.kernels.gain_measures import bing_values, g_values, ndcg_rel_values, rndcg_values
from torch_rankeval.kernels.intent_aware import (
    alpha_dcg_values,
    alpha_ndcg_values,
    ap_ia_values,
    err_ia_values,
    nerr_ia_values,
    nnrbp_values,
    nrbp_values,
    precision_ia_values,
    subtopic_recall_values,
)
from torch_rankeval.kernels.interpolated import (
    R_MULTIPLES,
    RECALL_LEVELS,
    eleven_point_values,
    iprec_at_recall_values,
    relative_precision_values,
    rprec_mult_values,
    yaap_values,
)
from torch_rankeval.kernels.judged import judged_values, unjudged_values
from torch_rankeval.kernels.ncrr import ncrr_values
from torch_rankeval.kernels.pairwise import arp_values, auroc_values, fall_out_values, opa_values
from torch_rankeval.kernels.precision_recall import hit_rate_values, precision_values, r_precision_values, recall_values
from torch_rankeval.kernels.pwa import pwa_values
from torch_rankeval.kernels.rbp import rbp_residual_values, rbp_values
from torch_rankeval.kernels.rr import reciprocal_rank_values
from torch_rankeval.kernels.set_measures import (
    set_ap_values,
    set_f_values,
    set_precision_values,
    set_recall_values,
    set_relative_precision_values,
    utility_values,
)
from torch_rankeval.measures.params import (
    ADAPTIVE_K,
    ALPHA,
    ALPHA_NORM,
    BETA,
    BPREF_TREC,
    CATALOG_SIZE,
    COEFFICIENTS,
    COMPAT_NORMALIZE,
    COMPAT_P,
    CWL_DEPTH,
    CWL_T,
    DCG,
    DENOMINATOR,
    GAINS,
    IDEAL,
    LENGTH,
    LEVELS,
    MAX_FPR,
    MAX_GRADE,
    MAX_REL,
    MIN_K_RELEVANT,
    MIN_REL,
    MULTIPLE,
    NRBP_BETA,
    PERSISTENCE,
    RBP_DEPTH,
    RBP_GAINS,
    RBP_REL,
    RECALL,
    REL,
    ROUNDING,
    SDCG_DCG,
    TAIL,
    Param,
    number_text,
)
from torch_rankeval.ranking.catalogue import topk_convention

__all__ = [
    "Family",
    "TrecName",
    "Measure",
    "FAMILIES",
    "TREC_NAMES",
    "TREC_BY_NAME",
    "TREC_SYNTAXES",
    "TREC_CUTOFFS",
    "MIN_GEO_MEAN",
    "OPTIONS",
    "UnjudgedZeroGain",
]

#: The convention options a metric class or a public function takes one by one (the other fields of
#: :class:`~torch_rankeval.conventions.Convention` come with ``convention=``); each row says which it reads.
OPTIONS = (
    "gain",
    "log_base",
    "discount",
    "ties",
    "relevance_threshold",
    "empty_target_action",
    "denominator",
    "graded",
    "adaptive_k",
    "min_k_relevant",
    "ideal_ranking",
)
#: What the binary measures read: the relevance threshold, the tie policy and the empty-query policy.
_BINARY = ("relevance_threshold", "ties", "empty_target_action")
_DCG_READS = ("gain", "log_base", "discount", "ties")
_AP_READS = (*_BINARY, "gain", "denominator", "graded")


def _torchmetrics(ties: str, *, nonpositive: bool = False) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """A measure's settings under the torchmetrics presets: the tie rule of the torch call its
    ``retrieval_*`` function ranks with, and (``nonpositive``, torchmetrics >= 1.8) documents scored
    ``<= 0`` not relevant."""
    older = (("ties", ties),)
    return (
        ("torchmetrics", older + ((("nonpositive_not_relevant", True),) if nonpositive else ())),
        ("torchmetrics_1.7", older),
    )


#: trec_eval's default cutoffs of P, recall, ndcg_cut, map_cut (success: 1, 5, 10).
TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
#: trec_eval's floor of each value before the logarithm of a geometric mean (gm_map).
MIN_GEO_MEAN = 1e-5


#: What a kernel returns: values ``(N, K)`` and the empty flags ``(N, 1 or K)`` or None. Kernels are
#: module-level functions of :mod:`torch_rankeval.kernels` (not lambdas), so that measures, plans and metrics pickle.
Values = tuple[Tensor, "Tensor | None"]


# ----------------------------------------------------------------------------- families
@dataclass(frozen=True)
class Family:
    """One row of the measure table.

    Attributes:
        key: the canonical name (lowercase, used in the library's keys: ``"ndcg@10"``).
        kernel: ``(ranked_batch, cutoffs, convention, **kernel_params) -> (values (N, K), empty or
            None)``; ``None`` for ``runid``, which describes a run file, not a ranking.
        summary: one line: what it measures.
        ir: ir_measures' name (``"nDCG"``), or None.
        aliases: more accepted names (case-insensitive), e.g. ``("mrr", "rr", "reciprocal_rank")``.
        cutoff: whether the measure takes a cutoff ``@k``.
        params: the declared parameters.
        aggregate: how per-query values combine: ``"mean"``, ``"sum"`` (counts), ``"gmean"``
            (geometric mean with trec_eval's floor), ``"info"`` (``runid``: no values), ``"text"``
            (``relstring``: a text per query, no summary).
        per_query: whether trec_eval prints a value per query.
        uses_gain: ``"always"``, ``"graded"`` (when the convention's ``graded`` is set) or ``"never"``.
        oracle: the independent implementation the tests compare against (for the README table).
        at: what ``@`` sets: ``"cutoff"`` (a rank, ``nDCG@10``) or a parameter that the kernel
            receives in place of the cutoffs (``IPrec@0.1``: ``recall``), so that one kernel call
            serves every value.
        gain: the family's own gain, a function of the relevance threshold (bpref ranks under
            :class:`~torch_rankeval.kernels.bpref.JudgedNonRelevant` to count the judged
            non-relevant documents); ``None``: the convention's.
        ties_average: whether the kernel gives the exact expected value over the orders of tied
            documents; without it, ``ties="average"`` is refused when the measure is planned.
        ir_defaults: parameter values that ir_measures' spelling (``ir``) implies where they differ
            from the library's defaults (``RBP`` is ``p=0.8`` in ir_measures, ``rbp`` is trec_eval's 0.9).
        check: optional ``(ranked_batch, **kernel_params) -> [(flag tensor, message)]``: value checks
            of the inputs that the plan resolves with its other checks when ``validate_args`` is set.
        subtopics: an intent-aware measure: it reads subtopic judgments, a target ``(N, L, S)``
            (:mod:`~torch_rankeval.ranking.subtopics`), and only those.
        reads: the convention options (of :data:`OPTIONS`) its values depend on: what its metric
            class and its public function accept (an option it ignores is a ``TypeError`` there).
        topk: whether the top-k route (:mod:`~torch_rankeval.ranking.catalogue`) serves it: its kernel
            reads only the top-k view's quantities (the first ``W`` positions with their whole tie
            groups, the relevant and valid counts, the ideal top gains).
        topk_not_when: boolean convention fields under which the top-k route cannot serve it (graded
            AP normalises by the sum of all judged gains, not a top-k quantity).
        preset_rules: its own settings under a preset that treats measures differently, as
            ``((preset, ((field, value), ...)), ...)`` (torchmetrics ranks each metric with its own torch
            call: :attr:`preset_ties`); the registry gives them to the presets
            (:func:`~torch_rankeval.conventions.set_measure_rules`).
        function: the name of its public one-measure function in :mod:`torch_rankeval.functional`, if any.
        metric_class: the name of its metric class in :mod:`torch_rankeval.metrics`, if any (every measure
            is also a name of :class:`~torch_rankeval.RankingMetrics`, ``F.evaluate``, ``trec.evaluate`` and
            the command line).
        peer_names: other libraries' names for it that are not already among its names (ranx's, RecBole's;
            case-insensitive), with the parameter values each implies: ``(("ndcg_burges", (("dcg",
            "exp-log2"),)),)``.
        item_weights: whether its kernel reads per-document weights (``weights=``, like ``preds``;
            TF-Ranking's per-example weights) from ``rb.item_weights``; the plan refuses them for any
            other measure.
        ir_switches: ir_measures' spellings of another family through one of this family's parameters,
            ``((parameter, ((value or None: any, family key), ...)), ...)``: ``NumRet(rel=1)`` (how
            ir_measures prints ``NumRelRet``) is ``num_rel_ret``.
        ir_cutoff: for a family without a cutoff, what its ir_measures name means with one, ``(family
            key, implied parameters)``: ``SetP@5`` is the set precision of the top 5, ``P(adaptive_k=True)@5``.
        tie_sums: the tie-group sums its kernel reads, ``"gain"`` and/or ``"rel"``: when a plan's kernels
            read both, one prefix sum of the ranked pair serves them (saves operations; a missing entry
            never changes a value).
    """

    key: str
    kernel: Callable[..., Values] | None
    summary: str
    ir: str | None = None
    aliases: tuple[str, ...] = ()
    cutoff: bool = True
    params: tuple[Param, ...] = ()
    aggregate: str = "mean"
    per_query: bool = True
    uses_gain: str = "never"
    oracle: str = ""
    at: str = "cutoff"
    gain: Callable[[Any], Any] | None = None
    ties_average: bool = True
    ir_defaults: tuple[tuple[str, Any], ...] = ()
    check: Callable[..., list] | None = None
    subtopics: bool = False
    reads: tuple[str, ...] = ()
    topk: bool = False
    topk_not_when: tuple[str, ...] = ()
    preset_rules: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    function: str | None = None
    metric_class: str | None = None
    peer_names: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    ir_switches: tuple[tuple[str, tuple[tuple[Any, str], ...]], ...] = ()
    ir_cutoff: tuple[str, tuple[tuple[str, Any], ...]] | None = None
    item_weights: bool = False
    tie_sums: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.reads) - set(OPTIONS))
        if unknown:
            raise ValueError(f"family {self.key!r} reads unknown options {unknown}: use names of OPTIONS")

    @property
    def whole_list(self) -> bool:
        """Whether it measures the whole ranking (no cutoff: the ranked view must reach the last relevant document)."""
        return not self.cutoff

    @property
    def preset_ties(self) -> dict[str, str]:
        """Its tie rule under each preset that sets one for it (``{"torchmetrics": "torch_topk", ...}``)."""
        return {preset: dict(fields_)["ties"] for preset, fields_ in self.preset_rules if "ties" in dict(fields_)}

    def topk_serves(self, conv: Convention) -> bool:
        """Whether the top-k route computes it under ``conv`` (its row allows it and the convention does)."""
        return self.topk and topk_convention(conv) and not any(getattr(conv, f) for f in self.topk_not_when)

    @property
    def integer(self) -> bool:
        """Whether values are counts (printed without decimals)."""
        return self.aggregate == "sum"

    def param(self, name: str) -> Param | None:
        """The declared parameter ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    def needs_gain(self, conv: Convention) -> bool:
        return self.uses_gain == "always" or (self.uses_gain == "graded" and conv.graded)


def _row(**defaults: Any) -> Callable[..., Family]:
    """A row builder for a group of families: ``Family(key, kernel, summary, **fields)``, the group's
    ``defaults`` filling the fields not given."""

    def build(key: str, kernel: Callable[..., Values] | None, summary: str, **fields: Any) -> Family:
        return Family(key, kernel, summary, **{**defaults, **fields})

    return build


_whole = _row(cutoff=False, reads=_BINARY)  # a measure of the whole ranking: no cutoff
_count = _row(
    cutoff=False, params=(REL,), aggregate="sum", oracle="pytrec_eval", reads=("relevance_threshold",)
)  # a count, summed over queries
# trec_eval's gm_*: a geometric mean over queries, no per-query value
_gmean = _row(cutoff=False, params=(REL,), aggregate="gmean", per_query=False, oracle="pytrec_eval", reads=_BINARY)
_set = _row(
    cutoff=False, params=(REL,), oracle="pytrec_eval", reads=("relevance_threshold", "empty_target_action")
)  # trec_eval's set_*: the whole retrieved set
# trec_eval's gain measures (pytrec_eval checks other gains on relabelled qrels)
_relabelled = _row(
    cutoff=False,
    params=(GAINS,),
    uses_gain="always",
    oracle="pytrec_eval (gains: on relabelled qrels)",
    reads=(*_DCG_READS, "empty_target_action"),
)
_intent_aware = _row(
    params=(ALPHA, REL), subtopics=True, oracle="pyndeval (ndeval 4.5), brute-force tie orders", reads=_BINARY
)
_peer = _row(
    params=(REL,), oracle="pytrec_eval, torchmetrics", reads=_BINARY, topk=True, tie_sums=("rel",)
)  # the binary measures both peers compute
_gains = _row(
    params=(GAINS, DCG), uses_gain="always", reads=_DCG_READS, topk=True, preset_rules=_torchmetrics("average")
)
# cwl_eval's C/W/L measures: gains (grade - min_rel) / (max_rel - min_rel), clipped to [0, 1], over depth ranks
_cwl = _row(reads=("ties",), oracle="cwl_eval (via ir_measures), its test_cwl_eval.py expected values")
_CWL_GRADES = (MIN_REL, MAX_REL, CWL_DEPTH)
_BRUTE = "pytrec_eval, brute-force tie orders"
_V9 = "pytrec_eval (rounding='v9'), trec_eval 10.0's test outputs"
_PAIRS = (
    "TF-Ranking's formula, hand-computed; weights=: TF-Ranking's expected values (metrics_impl_test.py), "
    "its formula written out"
)

_ROWS = (
    _whole("runid", None, "the run's tag", aggregate="info", per_query=False, oracle="trec_eval", reads=()),
    _count(
        "num_q",
        num_q_values,
        "number of queries evaluated",
        ir="NumQ",
        params=(),
        per_query=False,
        oracle="trec_eval",
        reads=(),
    ),
    _count(
        "num_ret",
        num_ret_values,
        "number of documents retrieved",
        ir="NumRet",
        params=(),
        reads=(),
        ir_switches=(("rel", ((None, "num_rel_ret"),)),),
    ),
    _count("num_rel", num_rel_values, "number of relevant documents (judged, retrieved or not)", ir="NumRel"),
    _count("num_rel_ret", num_rel_ret_values, "number of relevant documents retrieved", ir="NumRelRet"),
    _peer(
        "map",
        average_precision_values,
        "average precision (its mean is MAP)",
        ir="AP",
        aliases=("ap", "average_precision"),
        params=(REL, DENOMINATOR),
        uses_gain="graded",
        reads=_AP_READS,
        topk_not_when=("graded",),
        preset_rules=_torchmetrics("torch_topk", nonpositive=True),
        function="average_precision",
        metric_class="MAP",
    ),
    _gmean(
        "gm_map",
        average_precision_values,
        "geometric mean of average precision over queries",
        uses_gain="graded",
        reads=_AP_READS,
    ),
    _peer(
        "r_precision",
        r_precision_values,
        "precision at rank R, the number of relevant documents",
        ir="Rprec",
        aliases=("rprec", "rprecision"),
        peer_names=(("r-precision", ()),),  # ranx
        cutoff=False,
        preset_rules=_torchmetrics("torch_argsort"),
        function="r_precision",
        metric_class="RPrecision",
    ),
    _peer(
        "mrr",
        reciprocal_rank_values,
        "reciprocal rank of the first relevant document (its mean is MRR)",
        ir="RR",
        aliases=("rr", "reciprocal_rank", "recip_rank"),
        preset_rules=_torchmetrics("torch_topk", nonpositive=True),
        function="reciprocal_rank",
        metric_class="MRR",
    ),
    _peer(
        "precision",
        precision_values,
        "share of the top k that is relevant",
        ir="P",
        aliases=("p",),
        params=(REL, ADAPTIVE_K, MIN_K_RELEVANT),
        reads=(*_BINARY, "adaptive_k", "min_k_relevant"),
        preset_rules=_torchmetrics("torch_topk", nonpositive=True),
        function="precision",
        metric_class="Precision",
    ),
    _peer(
        "recall",
        recall_values,
        "share of the relevant documents found in the top k",
        ir="R",
        aliases=("r",),
        preset_rules=_torchmetrics("torch_argsort", nonpositive=True),
        function="recall",
        metric_class="Recall",
    ),
    Family(
        "f1",
        f1_values,
        "harmonic mean of precision@k and recall@k, per query; F-beta@k with beta (recall weighted beta times)",
        aliases=("f_measure",),
        params=(REL, BETA),
        peer_names=(("fbeta", ()), ("f1beta", ()), ("f_beta", ())),  # RecTools' F1Beta, sklearn's fbeta_score
        oracle="sklearn's f1_score per query, hand-computed; RecTools' F1Beta expected values",
        reads=(*_BINARY, "adaptive_k"),
    ),
    _gains(
        "ndcg",
        ndcg_values,
        "normalised discounted cumulative gain",
        ir="nDCG",
        oracle="pytrec_eval, sklearn, torchmetrics",
        params=(GAINS, DCG, IDEAL),
        peer_names=(("ndcg_burges", (("dcg", "exp-log2"),)),),  # ranx: nDCG with the 2**grade - 1 gain
        reads=(*_DCG_READS, "empty_target_action", "ideal_ranking"),
        tie_sums=("gain",),
        function="ndcg",
        metric_class="NDCG",
    ),
    _peer(
        "hit_rate",
        hit_rate_values,
        "whether the top k hold a relevant document",
        ir="Success",
        aliases=("hr", "hitrate", "success"),
        peer_names=(("hit", ()),),  # RecBole's Hit@k
        preset_rules=_torchmetrics("torch_argsort"),
        function="hit_rate",
        metric_class="HitRate",
    ),
    _gains(
        "dcg",
        dcg_values,
        "discounted cumulative gain",
        oracle="hand-computed, sklearn, trec_eval's loop written out",
        tie_sums=("gain",),
        function="dcg",
        metric_class="DCG",
    ),
    _gains(
        "idcg",
        idcg_values,
        "ideal DCG",
        oracle="hand-computed, trec_eval's loop written out",
        reads=("gain", "log_base", "discount"),
        function="idcg",
        metric_class="IDCG",
    ),
    # trec_eval's other measures (m_*.c); rows follow trec_eval's names, kernels its definitions.
    _whole(
        "bpref",
        bpref_values,
        "binary preference: how few judged non-relevant documents rank above the relevant ones",
        ir="Bpref",
        params=(REL, BPREF_TREC),
        uses_gain="always",
        gain=JudgedNonRelevant,
        oracle="pytrec_eval, hand-computed tie averages; trec=False: TF-Ranking's expected values "
        "(tensorflow_ranking/python/metrics_impl_test.py::BPrefMetricTest)",
    ),
    _gmean(
        "gm_bpref",
        bpref_values,
        "geometric mean of bpref over queries",
        params=(REL, BPREF_TREC),
        uses_gain="always",
        gain=JudgedNonRelevant,
    ),
    _whole(
        "infap",
        infap_values,
        "inferred AP: AP estimated from a sampled judgment pool",
        ir="infAP",
        params=(REL,),
        ties_average=False,
        oracle="pytrec_eval",
    ),
    _whole(
        "iprec_at_recall",
        iprec_at_recall_values,
        "interpolated precision at a recall level",
        ir="IPrec",
        aliases=("iprec",),
        params=(RECALL, REL, ROUNDING),
        at="recall",
        ties_average=False,
        oracle=_V9,
    ),
    _whole(
        "11pt_avg",
        eleven_point_values,
        "interpolated precision averaged over recall levels",
        params=(LEVELS, REL, ROUNDING),
        ties_average=False,
        oracle=_V9,
    ),
    _whole(
        "rprec_mult",
        rprec_mult_values,
        "precision at a multiple of R",
        aliases=("r_precision_mult",),
        params=(MULTIPLE, REL),
        at="multiple",
        oracle=_BRUTE,
    ),
    _whole(
        "utility",
        utility_values,
        "linear utility of the retrieved set",
        params=(COEFFICIENTS, REL),
        reads=("relevance_threshold",),
        oracle="pytrec_eval (default coefficients), its counts (others)",
    ),
    _whole(
        "bing",
        bing_values,
        "binary G: relevant documents discounted by the non-relevant ones above them",
        params=(REL,),
        oracle=_BRUTE,
    ),
    _relabelled("g", g_values, "normalised gain G", ties_average=False, reads=("gain", "ties", "empty_target_action")),
    _relabelled("ndcg_rel", ndcg_rel_values, "nDCG averaged over the relevant documents", ties_average=False),
    _relabelled(
        "rndcg",
        rndcg_values,
        "nDCG averaged at the R levels of the ideal ranking",
        oracle="pytrec_eval (gains: on relabelled qrels), brute-force tie orders",
        reads=(*_DCG_READS, *_BINARY[:1], "empty_target_action"),
    ),
    Family(
        "relative_precision",
        relative_precision_values,
        "relevant documents in the top k over min(k, R)",
        aliases=("relative_p",),
        params=(REL,),
        oracle=_BRUTE,
        reads=_BINARY,
    ),
    _set(
        "set_precision",
        set_precision_values,
        "precision of the whole retrieved set",
        ir="SetP",
        aliases=("set_p",),
        ir_switches=(("relative", ((True, "set_relative_precision"), (False, "set_precision"))),),
        ir_cutoff=("precision", (("adaptive_k", True),)),  # the retrieved set cut at k: r_k / min(k, n)
    ),
    _set(
        "set_relative_precision",
        set_relative_precision_values,
        "relevant retrieved over min(retrieved, R)",
        ir="SetRelP",
        aliases=("set_relative_p",),
    ),
    _set("set_recall", set_recall_values, "recall of the whole retrieved set", ir="SetR", ir_cutoff=("recall", ())),
    _set("set_ap", set_ap_values, "set precision times set recall", ir="SetAP", aliases=("set_map",)),
    _set("set_f", set_f_values, "F-measure of set precision and set recall", ir="SetF", params=(BETA, REL)),
    _count("num_nonrel_judged_ret", num_nonrel_judged_ret_values, "number of judged non-relevant documents retrieved"),
    _whole(
        "yaap",
        yaap_values,
        "yet another AP: log((1 + S) / (1 + R - S)), S the sum of precisions at relevant documents",
        params=(REL,),
        ties_average=False,
        oracle="trec_eval's loop written out",
    ),
    _whole(
        "relstring",
        None,
        "the grades of the top documents as text (trec_eval -q only)",
        params=(LENGTH,),
        aggregate="text",
        reads=(),
        oracle="trec_eval's test outputs",
    ),
    Family(
        "err",
        err_values,
        "expected reciprocal rank (cascade model, gdeval's gain)",
        ir="ERR",
        aliases=("expected_reciprocal_rank",),
        params=(MAX_GRADE,),
        check=err_grade_checks,
        oracle="gdeval (via ir_measures), tie orders enumerated",
        reads=("ties",),
    ),
    Family(
        "rbp",
        rbp_values,
        "rank-biased precision",
        ir="RBP",
        aliases=("rank_biased_precision",),
        params=(PERSISTENCE, RBP_REL, RBP_GAINS, RBP_DEPTH),
        ir_defaults=(("p", 0.8),),
        oracle="trec_eval 10.0 expected outputs, cwl_eval (via ir_measures), tie orders enumerated",
        reads=("ties",),
    ),
    Family(
        "rbp_residual",
        rbp_residual_values,
        "RBP's residual: weight of unjudged documents and of the unread tail",
        aliases=("rbp_res",),
        params=(PERSISTENCE, TAIL),
        oracle="trec_eval 10.0 expected outputs, cwl_eval's residual, hand-computed",
        reads=("ties",),
    ),
    Family(
        "judged",
        judged_values,
        "share of the top k that is judged",
        ir="Judged",
        aliases=("judged_rate",),
        params=(ADAPTIVE_K,),
        ir_defaults=(("adaptive_k", True),),  # ir_measures' Judged@k divides by min(k, retrieved)
        oracle="ir_measures",
        reads=("ties", "adaptive_k"),
    ),
    Family(
        "unjudged",
        unjudged_values,
        "share of the top k that is retrieved but unjudged",
        aliases=("unjudged_rate",),
        oracle="trec_eval 10.0 expected outputs, ir_measures (1 - Judged)",
        reads=("ties", "adaptive_k"),
    ),
    Family(
        "fall_out",
        fall_out_values,
        "share of the non-relevant documents found in the top k",
        aliases=("fallout",),
        oracle="torchmetrics",
        reads=_BINARY,
        preset_rules=_torchmetrics("torch_argsort"),
        metric_class="FallOut",
    ),
    Family(
        "auroc",
        auroc_values,
        "area under the ROC curve of the top k (tied scores count half)",
        aliases=("auc", "retrieval_auroc"),
        params=(MAX_FPR,),
        oracle="torchmetrics, sklearn",
        reads=_BINARY,
        metric_class="AUROC",
    ),
    Family(
        "ncrr",
        ncrr_values,
        "normalised cumulative reciprocal rank: 1/rank summed over the relevant documents of the top k, over its ideal",
        aliases=("normalized_cumulative_reciprocal_rank",),
        params=(REL,),
        oracle="Cornac's expected values (tests/cornac/metrics/test_ranking.py::test_ncrr), tie orders enumerated",
        reads=_BINARY,
    ),
    _whole(
        "opa",
        opa_values,
        "ordered pair accuracy: share of differently graded pairs in the right order",
        aliases=("ordered_pair_accuracy",),
        oracle=_PAIRS,
        reads=("ties", "empty_target_action"),
        item_weights=True,
    ),
    _whole(
        "arp",
        arp_values,
        "average relevance position: mean rank weighted by grade (lower is better)",
        aliases=("average_relevance_position",),
        oracle=_PAIRS,
        reads=("ties", "empty_target_action"),
        item_weights=True,
    ),
    _intent_aware(
        "alpha_dcg",
        alpha_dcg_values,
        "alpha-DCG: novelty-discounted gain over subtopics, over ndeval's ideal-ideal gain (intent-aware)",
        ir="alpha_DCG",
        aliases=("alpha-dcg",),
        params=(ALPHA, ALPHA_NORM, REL),
        reads=(*_BINARY, "log_base", "discount"),
        oracle="pyndeval (ndeval 4.5), TF-Ranking's AlphaDCG (hand-computed), brute-force tie orders",
    ),
    _intent_aware(
        "alpha_ndcg",
        alpha_ndcg_values,
        "alpha-nDCG: alpha-DCG over that of ndeval's greedy ideal ranking (intent-aware)",
        ir="alpha_nDCG",
        aliases=("alpha-ndcg",),
        reads=(*_BINARY, "log_base", "discount"),
    ),
    _intent_aware(
        "err_ia", err_ia_values, "intent-aware ERR over ndeval's ideal-ideal value", ir="ERR_IA", aliases=("err-ia",)
    ),
    _intent_aware(
        "nerr_ia",
        nerr_ia_values,
        "intent-aware ERR over that of ndeval's greedy ideal ranking",
        ir="nERR_IA",
        aliases=("nerr-ia",),
    ),
    _intent_aware(
        "nrbp",
        nrbp_values,
        "novelty- and rank-biased precision (intent-aware), over the whole list",
        ir="NRBP",
        cutoff=False,
        params=(ALPHA, NRBP_BETA, REL),
    ),
    _intent_aware(
        "nnrbp",
        nnrbp_values,
        "NRBP over that of ndeval's greedy ideal ranking",
        ir="nNRBP",
        cutoff=False,
        params=(ALPHA, NRBP_BETA, REL),
    ),
    _intent_aware(
        "p_ia",
        precision_ia_values,
        "intent-aware precision: relevant (document, subtopic) pairs in the top k over k times the subtopics",
        ir="P_IA",
        aliases=("p-ia", "precision_ia"),
        params=(REL,),
        reads=(*_BINARY, "adaptive_k"),
        oracle="pyndeval (ndeval 4.5), TF-Ranking's PrecisionIA (hand-computed), brute-force tie orders",
    ),
    _intent_aware(
        "ap_ia",
        ap_ia_values,
        "intent-aware average precision: the mean over subtopics of each one's AP",
        ir="AP_IA",
        aliases=("map-ia", "map_ia"),
        cutoff=False,
        params=(REL,),
    ),
    _intent_aware(
        "strecall",
        subtopic_recall_values,
        "subtopic recall: the share of the query's subtopics covered by the top k",
        ir="StRecall",
        aliases=("strec", "subtopic_recall"),
        params=(REL,),
    ),
    # --- rectools: RecTools' catalogue confusion-matrix measures (the catalogue size is a parameter) ---
    Family(
        "catalogue_accuracy",
        catalogue_accuracy_values,
        "RecTools' Accuracy@k: the share of the catalogue classified right, (tp + tn) / catalog_size, the top k "
        "predicted relevant",
        aliases=("catalog_accuracy",),
        params=(REL, CATALOG_SIZE),
        check=catalogue_checks,
        oracle="RecTools' expected values (tests/metrics/test_classification.py::TestAccuracy), brute-force tie orders",
        reads=(*_BINARY, "adaptive_k"),
        topk=True,
    ),
    Family(
        "mcc",
        mcc_values,
        "RecTools' MCC@k: Matthews' correlation of the top k with the relevant documents over the catalogue "
        "(catalog_size items)",
        aliases=("matthews_corrcoef", "catalogue_mcc"),
        params=(REL, CATALOG_SIZE),
        check=catalogue_checks,
        oracle="RecTools' expected values (tests/metrics/test_classification.py::TestMCC), brute-force tie orders",
        reads=(*_BINARY, "adaptive_k"),
        topk=True,
    ),
    # --- cwl: cwl_eval's C/W/L user-model measures, as ir_measures computes them (kernels/cwl.py) ---
    _cwl(
        "bpm",
        bpm_values,
        "Bejeweled Player Model: mean gain read until the gain reaches T or k documents",
        ir="BPM",
        params=(CWL_T, *_CWL_GRADES),
        ties_average=False,
    ),
    _cwl(
        "insq",
        insq_values,
        "INSQ: gain weighted by the chance to read on, ((r + 2T - 1) / (r + 2T))^2 per rank",
        ir="INSQ",
        cutoff=False,
        params=(CWL_T, *_CWL_GRADES),
    ),
    _cwl(
        "inst",
        inst_values,
        "INST: INSQ whose patience falls as the gain read approaches T",
        ir="INST",
        cutoff=False,
        params=(CWL_T, *_CWL_GRADES),
        ties_average=False,
    ),
    _cwl(
        "sdcg",
        sdcg_values,
        "scaled DCG: DCG@k of the gains in [0, 1] over that of k fully relevant documents",
        ir="SDCG",
        params=(SDCG_DCG, *_CWL_GRADES),
    ),
    _cwl(
        "nerr8",
        nerr8_values,
        "Not (but nearly) ERR, eq. 8: read on with probability 1 - gain, stop at k",
        ir="NERR8",
        params=_CWL_GRADES,
        ties_average=False,
    ),
    _cwl(
        "nerr9",
        nerr9_values,
        "Not (but nearly) ERR, eq. 9: read on with probability r / (r + 1) (1 - gain), stop at k",
        ir="NERR9",
        params=_CWL_GRADES,
        ties_average=False,
    ),
    _cwl(
        "nerr10",
        nerr10_values,
        "Not (but nearly) ERR, eq. 10: read on with probability p (1 - gain)",
        ir="NERR10",
        cutoff=False,
        params=(PERSISTENCE, *_CWL_GRADES),
        ties_average=False,
    ),
    _cwl(
        "nerr11",
        nerr11_values,
        "Not (but nearly) ERR, eq. 11: INSQ's chance to read on times 1 - gain",
        ir="NERR11",
        cutoff=False,
        params=(CWL_T, *_CWL_GRADES),
        ties_average=False,
    ),
    # --- irm: ir_measures' Compat and pairwise Accuracy (issue 28) ---
    _whole(
        "compat",
        compat_values,
        "compatibility: rank-biased overlap with the ideal ranking (relevant documents by grade), over the ideal's",
        ir="Compat",
        aliases=("compatibility",),
        params=(COMPAT_P, COMPAT_NORMALIZE),
        ties_average=False,
        oracle="ir_measures' expected values (tests/test_compat.py, tests/test_providers.py), ir_measures live",
    ),
    Family(
        "pairwise_accuracy",
        accuracy_values,
        "share of the (relevant, non-relevant) pairs of the top k in which the relevant document ranks first",
        ir="Accuracy",
        params=(REL,),
        oracle="ir_measures' expected values (tests/test_accuracy.py, tests/test_providers.py), ir_measures live",
        reads=_BINARY,
    ),
    # --- tfr: TF-Ranking's definitions (issue 28) ---
    Family(
        "pwa",
        pwa_values,
        "position-weighted average: the grades of the top k weighted by 1/rank, over the sum of those weights",
        aliases=("position_weighted_average",),
        oracle="TF-Ranking's expected values (tensorflow_ranking/python/metrics_impl_test.py::PWAMetricTest), "
        "tie orders enumerated",
        reads=("ties",),
    ),
)
FAMILIES: dict[str, Family] = {f.key: f for f in _ROWS}


def _preset_rules() -> dict[str, dict[str, dict[str, Any]]]:
    """``{preset: {family key: {field: value}}}``: the rows' own settings under each preset."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for f in _ROWS:
        for preset, fields_ in f.preset_rules:
            out.setdefault(preset, {})[f.key] = dict(fields_)
    return out


for _preset, _by_measure in _preset_rules().items():
    set_measure_rules(_preset, _by_measure)


# ----------------------------------------------------------------------------- trec_eval's names
@dataclass(frozen=True)
class TrecName:
    """How trec_eval spells (part of) a family; the table's order is trec_eval's output order.

    Attributes:
        name: trec_eval's measure name (``"ndcg_cut"``).
        family: the :data:`FAMILIES` key. A row whose family is not registered reserves its place
            in the output order and is otherwise inactive.
        defaults: what the bare name expands to: trec_eval's default cutoffs (``P``) or levels
            (``iprec_at_recall``); ``()``: one measure.
        syntax: what ``name.PARAMS`` holds, one of :data:`TREC_SYNTAXES`: ``"cutoffs"``
            (``P.5,10``), ``"levels"`` (``iprec_at_recall.0.1,0.25``: one measure per level),
            ``"gains"`` (``ndcg.0=0,1=1,2=3``), ``"values"`` (``utility.1,-1,0,0``: one measure, the
            values in order), ``"pairs"`` (``rbp.p=0.8,2=1``: the parameters named in ``pairs``, and
            integer grades mapped to gains when ``pairs`` holds ``"gains"``) or ``"none"``.
        param: the measure's field that the syntax fills: ``"cutoff"`` or a parameter name.
        since: the trec_eval version that introduced the name (``official`` and ``all_trec`` of an
            older version leave it out).
        implied: parameter values the trec_eval name implies where they differ from the family's
            defaults (``rbp_resid`` is the family ``rbp_residual`` with ``tail="if_unjudged"``).
        pairs: the parameter names a ``"pairs"`` syntax accepts.
    """

    name: str
    family: str
    defaults: tuple[Any, ...] = ()
    syntax: str = "none"
    param: str = "cutoff"
    since: str = "9.0.8"
    implied: tuple[tuple[str, Any], ...] = ()
    pairs: tuple[str, ...] = ()

    @property
    def cutoffs(self) -> tuple[Any, ...]:
        """trec_eval's default cutoffs (``()`` for a spelling without cutoffs)."""
        return self.defaults if self.syntax == "cutoffs" else ()

    @property
    def active(self) -> bool:
        """Whether the family is registered."""
        return self.family in FAMILIES

    def render(self, measure: Measure) -> str:
        """trec_eval's printed name of ``measure`` (which this spelling expresses)."""
        return TREC_SYNTAXES[self.syntax].render(self, measure)


@dataclass(frozen=True)
class TrecSyntax:
    """One of trec_eval's parameter syntaxes: how ``name.PARAMS`` reads (the grammar's parsers)
    and prints.

    Attributes:
        placeholder: how the README writes the parameters (``"CUTOFFS"``).
        printed: what may follow ``name_`` in a printed name (``P_5``, ``iprec_at_recall_0.10``).
        render: ``(trec_name, measure) -> printed name``.
    """

    placeholder: str
    printed: re.Pattern[str] | None
    render: Callable[[TrecName, Measure], str]


def _given(measure: Measure) -> dict[str, Any]:
    """The measure's parameters that trec_eval's printed name shows."""
    family = measure.family
    return {n: v for n, v in measure.params if family.param(n).trec}  # type: ignore[union-attr]


def _render_plain(t: TrecName, m: Measure) -> str:
    return t.name


def _render_cutoff(t: TrecName, m: Measure) -> str:
    return f"{t.name}_{m.cutoff}"


def _render_level(t: TrecName, m: Measure) -> str:
    return f"{t.name}_{m.param(t.param):3.2f}"  # trec_eval's "%s_%3.2f"


def _render_gains(t: TrecName, m: Measure) -> str:
    gains = _given(m).get("gains")
    if gains is None:
        return t.name
    return f"{t.name}_" + ",".join(f"{number_text(g)}={number_text(v)}" for g, v in gains.items())


def _render_values(t: TrecName, m: Measure) -> str:
    value = _given(m).get(t.param)
    if value is None:
        return t.name
    return f"{t.name}_" + ",".join(number_text(v) for v in (value if isinstance(value, tuple) else (value,)))


def _render_pairs(t: TrecName, m: Measure) -> str:
    """``rbp_p=0.8,2=1``: the named parameters that differ from what the name implies, then the gains."""
    pairs = [f"{n}={number_text(v)}" for n, v in m.differing(t.implied) if n != "gains" and m.family.param(n).trec]  # type: ignore[union-attr]
    gains = m.param("gains")
    if gains is not None:
        pairs += [f"{number_text(g)}={number_text(v)}" for g, v in gains.items()]
    return f"{t.name}_" + ",".join(pairs) if pairs else t.name


_NUMBER = r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"
#: trec_eval's parameter syntaxes (see :class:`TrecName`).
TREC_SYNTAXES: dict[str, TrecSyntax] = {
    "none": TrecSyntax("", None, _render_plain),
    "cutoffs": TrecSyntax("CUTOFFS", re.compile(r"^\d+$"), _render_cutoff),
    "levels": TrecSyntax("LEVELS", re.compile(rf"^{_NUMBER}$"), _render_level),
    "gains": TrecSyntax("GRADE=GAIN,...", re.compile(rf"^-?\d+={_NUMBER}(,-?\d+={_NUMBER})*$"), _render_gains),
    "values": TrecSyntax("VALUES", re.compile(rf"^{_NUMBER}(,{_NUMBER})*$"), _render_values),
    "pairs": TrecSyntax("NAME=VALUE,...", re.compile(rf"^\w+={_NUMBER}(,\w+={_NUMBER})*$"), _render_pairs),
}

TREC_NAMES: tuple[TrecName, ...] = (
    TrecName("runid", "runid"),
    TrecName("num_q", "num_q"),
    TrecName("num_ret", "num_ret"),
    TrecName("num_rel", "num_rel"),
    TrecName("num_rel_ret", "num_rel_ret"),
    TrecName("map", "map"),
    TrecName("gm_map", "gm_map"),
    TrecName("Rprec", "r_precision"),
    TrecName("bpref", "bpref"),
    TrecName("recip_rank", "mrr"),
    TrecName("iprec_at_recall", "iprec_at_recall", RECALL_LEVELS, "levels", "recall"),
    TrecName("P", "precision", TREC_CUTOFFS, "cutoffs"),
    TrecName("relstring", "relstring", (), "values", "length"),
    TrecName("recall", "recall", TREC_CUTOFFS, "cutoffs"),
    TrecName("infAP", "infap"),
    TrecName("gm_bpref", "gm_bpref"),
    TrecName("Rprec_mult", "rprec_mult", R_MULTIPLES, "levels", "multiple"),
    TrecName("utility", "utility", (), "values", "coefficients"),
    TrecName("11pt_avg", "11pt_avg", (), "values", "levels"),
    TrecName("binG", "bing"),
    TrecName("G", "g", (), "gains", "gains"),
    TrecName("dcg", "dcg", (), "gains", "gains", since="10.0"),
    TrecName("ideal_dcg", "idcg", (), "gains", "gains", since="10.0"),
    TrecName("ndcg", "ndcg", (), "gains", "gains"),
    TrecName("ndcg_rel", "ndcg_rel", (), "gains", "gains"),
    TrecName("Rndcg", "rndcg", (), "gains", "gains"),
    TrecName("ndcg_cut", "ndcg", TREC_CUTOFFS, "cutoffs"),
    TrecName("map_cut", "map", TREC_CUTOFFS, "cutoffs"),
    TrecName("relative_P", "relative_precision", TREC_CUTOFFS, "cutoffs"),
    TrecName("success", "hit_rate", (1, 5, 10), "cutoffs"),
    TrecName("set_P", "set_precision"),
    TrecName("set_relative_P", "set_relative_precision"),
    TrecName("set_recall", "set_recall"),
    TrecName("set_map", "set_ap"),
    TrecName("set_F", "set_f", (), "values", "beta"),
    TrecName("num_nonrel_judged_ret", "num_nonrel_judged_ret"),
    TrecName("yaap", "yaap"),
    # trec_eval 10.0's RBP, its residual and the unjudged share, last in its output order.
    TrecName("rbp", "rbp", (), "pairs", since="10.0", pairs=("p", "gains")),
    TrecName("rbp_resid", "rbp_residual", (), "pairs", since="10.0", implied=(("tail", "if_unjudged"),), pairs=("p",)),
    TrecName("unj", "unjudged", (5, 10, 20), "cutoffs", since="10.0"),
)
#: The active trec_eval spellings by name.
TREC_BY_NAME: dict[str, TrecName] = {t.name: t for t in TREC_NAMES if t.active}
TREC_ORDER: dict[str, int] = {t.name: i for i, t in enumerate(TREC_NAMES)}


# ----------------------------------------------------------------------------- measures
@dataclass(frozen=True)
class UnjudgedZeroGain:
    """A gain function that gives negative grades (unjudged documents in TREC data) gain 0 and
    applies ``inner`` (``"linear"``, ``"exp2"`` or a :class:`~torch_rankeval.conventions.GainMap`)
    to the others. Compared by value and picklable, so equal settings share one ranking.

    Example:
        >>> UnjudgedZeroGain("linear")(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([0., 0., 2.])
    """

    inner: Any = "linear"

    def __call__(self, t: Tensor) -> Tensor:
        return torch.where(t < 0, torch.zeros((), dtype=t.dtype, device=t.device), gain_fn(self.inner)(t))


@dataclass(frozen=True)
class Measure:
    """One measure: a family, one cutoff and parameter values. Compares and hashes by value.

    Attributes:
        key: the :data:`FAMILIES` key.
        cutoff: ``None`` (the whole ranking) or a positive int.
        params: the given parameters as sorted ``(name, value)`` pairs (defaults left out).
        label: the output name: the user's spelling where they gave one (``"mrr@10"``,
            ``"nDCG@10"``, trec_eval's printed ``"ndcg_cut_10"``), else :meth:`canonical`.
        trec_label: trec_eval's printed name where trec_eval has the measure, else ``label``.

    Example:
        >>> m = Measure("precision", 5, (("rel", 2),))
        >>> m.canonical(), m.ir_name(), m.trec_name()
        ('precision(rel=2)@5', 'P(rel=2)@5', 'P(rel=2)@5')
        >>> Measure("ndcg", 10).trec_name(), Measure("mrr").trec_name()
        ('ndcg_cut_10', 'recip_rank')
    """

    key: str
    cutoff: int | None = None
    params: tuple[tuple[str, Any], ...] = ()
    label: str = field(default="", compare=False)
    trec_label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        family = FAMILIES.get(self.key)
        if family is None:
            raise ValueError(f"unknown measure family {self.key!r}; known: {', '.join(FAMILIES)}")
        if self.cutoff is not None:
            if not family.cutoff:
                raise ValueError(f"measure {self.key!r} takes no cutoff")
            if isinstance(self.cutoff, bool) or not isinstance(self.cutoff, int) or self.cutoff <= 0:
                raise ValueError(f"measure {self.key!r}: the cutoff must be a positive int, got {self.cutoff!r}")
        given = dict(self.params)
        for name in given:
            if family.param(name) is None:
                raise ValueError(f"measure {self.key!r} takes no parameter {name!r}")
        coerced = ((n, family.param(n).coerce(v, self.key)) for n, v in given.items())  # type: ignore[union-attr]
        # A value equal to the parameter's default is the default: set_F and set_F.1, RBP(p=0.9) and rbp are one measure.
        params = tuple(sorted((n, v) for n, v in coerced if v != family.param(n).default))  # type: ignore[union-attr]
        object.__setattr__(self, "params", params)
        missing = [p for p in family.params if p.required and p.name not in given]
        if missing:
            needed = ", ".join(f"{p.name}={p.example!r}" for p in missing)
            raise ValueError(
                f"measure {self.key!r} needs {', '.join(p.name for p in missing)} ({missing[0].doc}), which a "
                f"ranking does not hold: write e.g. {family.ir or self.key}({needed})@10"
            )
        if family.at != "cutoff" and self.param(family.at) is None:
            example = f"{family.ir or family.key}@0.5"
            raise ValueError(
                f"measure {self.key!r} needs its {family.at} ({family.param(family.at).doc}): write e.g. {example}"
            )  # type: ignore[union-attr]
        if not self.label:
            object.__setattr__(self, "label", self.canonical())
        if not self.trec_label:
            object.__setattr__(self, "trec_label", self.trec_name())

    # ------------------------------------------------------------------ descriptions
    @property
    def family(self) -> Family:
        return FAMILIES[self.key]

    def param(self, name: str) -> Any:
        """The parameter's value (its default when not given)."""
        p = self.family.param(name)
        return dict(self.params).get(name, None if p is None else p.default)

    def differing(self, defaults: tuple[tuple[str, Any], ...] = ()) -> list[tuple[str, Any]]:
        """The parameters whose values differ from what a spelling implies (``defaults`` over the
        family's defaults), sorted by name: what that spelling must write out."""
        implied = dict(defaults)
        return [
            (p.name, v)
            for p in sorted(self.family.params, key=lambda q: q.name)
            if (v := self.param(p.name)) is not None and v != implied.get(p.name, p.default)
        ]

    def _render(self, name: str, implied: tuple[tuple[str, Any], ...] = ()) -> str:
        family = self.family
        params = ",".join(f"{n}={family.param(n).render(v)}" for n, v in self.differing(implied) if n != family.at)  # type: ignore[union-attr]
        where = self.at_value
        return name + (f"({params})" if params else "") + ("" if where is None else f"@{number_text(where)}")

    @property
    def at_value(self) -> Any:
        """What ``@`` shows and the kernel receives among its "cutoffs": the cutoff, or the family's
        ``at`` parameter (``IPrec@0.1``: the recall level)."""
        at = self.family.at
        return self.cutoff if at == "cutoff" else self.param(at)

    def canonical(self) -> str:
        """The library's spelling: lowercase key, parameters, cutoff (``"precision(rel=2)@5"``)."""
        return self._render(self.key)

    def ir_name(self) -> str:
        """ir_measures' spelling (``"P(rel=2)@5"``, ``"RBP(p=0.9)"``); the library key where ir_measures has none."""
        if self.family.ir:
            return self._render(self.family.ir, self.family.ir_defaults)
        return self._render(self.key)

    def trec_spelling(self) -> TrecName | None:
        """The trec_eval name that expresses this measure, or None (``RR@10``, ``P(rel=2)@5``)."""
        for t in TREC_NAMES:
            if t.family != self.key or not t.active or (self.cutoff is not None) != (t.syntax == "cutoffs"):
                continue
            shown = {n for n, _ in self.differing(t.implied) if self.family.param(n).trec}  # type: ignore[union-attr]
            expressible = (
                set(t.pairs) if t.syntax == "pairs" else set() if t.syntax in ("none", "cutoffs") else {t.param}
            )
            if shown - expressible:
                continue
            return t
        return None

    def trec_name(self) -> str:
        """trec_eval's printed name (``"ndcg_cut_10"``, ``"ndcg_0=0,1=1"``, ``"iprec_at_recall_0.10"``),
        or :meth:`ir_name` where trec_eval has no name for the measure."""
        t = self.trec_spelling()
        return self.ir_name() if t is None else t.render(self)

    def with_label(self, label: str, trec_label: str = "") -> Measure:
        return Measure(self.key, self.cutoff, self.params, label, trec_label)

    # ------------------------------------------------------------------ computing
    @property
    def per_query(self) -> bool:
        """Whether trec_eval prints a value per query (not for ``runid``, ``num_q``, ``gm_map``)."""
        return self.family.per_query

    @property
    def integer(self) -> bool:
        """Whether values are counts (printed without decimals)."""
        return self.family.integer

    def sort_key(self) -> tuple[Any, ...]:
        """trec_eval's output order: its table order, then the cutoff."""
        t = self.trec_spelling()
        family_rank = TREC_ORDER[t.name] if t is not None else _FIRST_TREC.get(self.key, len(TREC_NAMES))
        where = self.at_value
        return (family_rank, where if isinstance(where, (int, float)) else 0)

    def convention(self, base: Convention, *, negative_unjudged: bool = False) -> Convention:
        """The convention the measure is computed under: ``base`` with the measure's own settings
        (``rel``: the relevance threshold; ``gains`` / ``dcg``: the gain; the family's own gain, such
        as bpref's judged non-relevant indicator). ``negative_unjudged`` (TREC data) gives negative
        grades gain 0.

        Example:
            >>> from torch_rankeval.conventions import PRESETS
            >>> c = Measure("precision", 5, (("rel", 2),)).convention(PRESETS["trec_eval"])
            >>> c.relevance_threshold, c.ties
            (2, 'first')
        """
        base = base.for_measure(self.key)  # a preset's settings for this measure (torchmetrics: nDCG ties)
        overrides: dict[str, Any] = {}
        rel = self.param("rel")
        if rel is not None:
            overrides["relevance_threshold"] = rel
        gain = base.gain
        if self.param("dcg") is not None:
            gain = "exp2" if self.param("dcg") == "exp-log2" else "linear"
        if self.param("gains") is not None:
            gain = self.param("gains")
        if self.family.gain is not None:  # e.g. bpref: judged non-relevant indicator (no other gain)
            gain = self.family.gain(rel if rel is not None else base.relevance_threshold)
        elif negative_unjudged:
            gain = UnjudgedZeroGain(gain)
        if gain is not base.gain:
            overrides["gain"] = gain
        for p in self.family.params:  # the options a name sets as they are (AP(denominator='k')@10)
            if p.convention not in (None, "relevance_threshold", "gain") and self.param(p.name) is not None:
                overrides[p.convention] = self.param(p.name)
        return resolve_convention(base, **overrides) if overrides else base

    def kernel_params(self) -> dict[str, Any]:
        """The parameters the kernel takes as keyword arguments (those that set no convention), with
        their defaults filled in."""
        return {p.name: v for p in self.family.params if p.convention is None and (v := self.param(p.name)) is not None}


_FIRST_TREC: dict[str, int] = {t.family: i for i, t in reversed(list(enumerate(TREC_NAMES)))}  # the first row of each


def literal_params(text: str, where: str) -> dict[str, Any]:
    """``"rel=2, gains={0:0}"`` -> ``{"rel": 2, "gains": {0: 0}}`` (Python literals only).

    Example:
        >>> literal_params("rel=2, dcg='exp-log2'", "x")
        {'rel': 2, 'dcg': 'exp-log2'}
    """
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise ValueError(f"measure {where!r}: parameters must read like Name(key=value, ...)@k") from None
    if not isinstance(call, ast.Call) or call.args or any(kw.arg is None for kw in call.keywords):
        raise ValueError(f"measure {where!r}: parameters must be keyword arguments, e.g. P(rel=2)@5")
    out = {}
    for kw in call.keywords:
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise ValueError(f"measure {where!r}: parameter {kw.arg} must be a literal value") from None
    return out
