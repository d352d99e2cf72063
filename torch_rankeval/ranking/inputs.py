"""Input checking, normalisation to a padded batch, and the final empty-query / reduction step.

Shape, dtype and argument checks cost nothing and always run. Checks that must read tensor values
(NaN scores, negative grades, inconsistent ``n_relevant``) need a host sync and run only with
``validate_args=True``; with ``validate_args=False`` the kernels are free of syncs and of
data-dependent shapes, so they compile with ``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Callable

import torch
from torch import Tensor

from torch_rankeval.conventions import REDUCTIONS, Convention, _check_choice
from torch_rankeval.ranking.view import RankedBatch, relevant

__all__ = [
    "GAINS_NOT_FINITE",
    "SCORES_NOT_FINITE",
    "Cutoffs",
    "check_mask",
    "check_reduction",
    "check_scores",
    "check_values",
    "grade_checks",
    "item_weights",
    "parse_k",
    "prepare",
    "reads_host",
    "weight_checks",
    "work_dtype",
]

Cutoffs = tuple  # tuple[int | None, ...]
#: A validated batch of at most this many lists reads which lists hold a tie in its one host sync (an
#: unvalidated one where :func:`reads_host` and ``RankedBatch._cpu_path`` say it may, from memory);
#: when at most one list in SPLIT_SHARE does, ``prepare(split_ties=True)`` ranks the batch with the
#: plain formulas and names those lists in ``split_rows`` for the caller to redo with tie statistics.
SPLIT_MAX_LISTS = 1 << 16
SPLIT_SHARE = 8

#: Whether an unvalidated call on the CPU in eager mode may read values from memory, which is no
#: device sync there: the top-k views read their spilled rows (and the largest excluded count), a
#: large dense batch which lists hold a tie (:func:`prepare`) and its integer grades' range
#: (``RankedBatch.host_reads``, ``_level_counts``). ``HostSyncGuard`` (tests/sync_guard.py)
#: sets it to False so that CPU tests run the sync-free path of CUDA.
CPU_HOST_READS = True


def reads_host(preds: Tensor) -> bool:
    """Whether reading values of ``preds`` costs no device sync: a plain CPU tensor in eager mode
    (not CUDA or another accelerator, not ``torch.compile``, not a fake or wrapped tensor), and
    :data:`CPU_HOST_READS` on.

    Example:
        >>> reads_host(torch.zeros(2)), reads_host(torch.zeros(2, device="meta"))
        (True, False)
    """
    return (
        CPU_HOST_READS
        and not torch.compiler.is_compiling()
        and preds.device.type == "cpu"
        and type(preds) is Tensor
        and not torch._C._functorch.is_functorch_wrapped_tensor(preds)
    )


def parse_k(k: Any, *, name: str = "k") -> tuple[tuple[int | None, ...], bool]:
    """Normalise ``k`` to a tuple of cutoffs; the flag says whether a sequence was given.

    Example:
        >>> parse_k(10), parse_k([5, 10]), parse_k(None)
        (((10,), False), ((5, 10), True), ((None,), False))
    """
    if k is None:
        return (None,), False
    if isinstance(k, (int, torch.SymInt)) and not isinstance(k, bool):
        _check_positive_int(k, name)
        return (int(k),), False
    if isinstance(k, Sequence) and not isinstance(k, (str, bytes)):
        if len(k) == 0:
            raise ValueError(f"{name} is an empty sequence: give at least one cutoff, or None for the whole list")
        for v in k:
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must hold positive ints, got {v!r} ({type(v).__name__})")
            _check_positive_int(v, name)
        return tuple(int(v) for v in k), True
    raise TypeError(f"{name} must be None, a positive int or a sequence of positive ints, got {type(k).__name__}")


def _check_positive_int(v: int, name: str) -> None:
    if v <= 0:
        raise ValueError(f"{name} must be a positive int (a cutoff of 1 or more documents), got {v}")


def check_reduction(reduction: str) -> None:
    _check_choice("reduction", reduction, REDUCTIONS)


def _check_tensor(x: Any, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")


def work_dtype(*tensors: object) -> torch.dtype:
    """The working dtype of a computation: float64 when any input tensor is float64, else float32
    (arguments that are not tensors, e.g. None, are ignored).

    Example:
        >>> work_dtype(torch.zeros(1), None, torch.zeros(1, dtype=torch.float64)), work_dtype(torch.zeros(1, dtype=torch.int64))
        (torch.float64, torch.float32)
    """
    for t in tensors:  # a loop, not a generator: no Python call per tensor (an update's hot path)
        if isinstance(t, Tensor) and t.dtype == torch.float64:
            return torch.float64
    return torch.float32


def check_scores(preds: Any) -> None:
    """``preds`` is a floating torch tensor: the first check of every entry point (the ranking metrics,
    the full-catalogue metrics), with the same messages (no host sync).

    Example:
        >>> check_scores(torch.tensor([1, 2]))
        Traceback (most recent call last):
        ...
        TypeError: preds must be a floating tensor (float16/bfloat16/float32/float64), got torch.int64; call preds.float()
    """
    _check_tensor(preds, "preds")
    if not preds.is_floating_point():
        raise TypeError(
            f"preds must be a floating tensor (float16/bfloat16/float32/float64), got {preds.dtype}; call preds.float()"
        )


def check_mask(mask: Any, preds: Tensor) -> None:
    """``mask`` is a bool tensor of the shape and device of ``preds`` (True = real document, False =
    padding), with the messages of every entry point.

    Example:
        >>> check_mask(torch.tensor([1, 0]), torch.zeros(2))
        Traceback (most recent call last):
        ...
        TypeError: mask must be a bool tensor (True = real document, False = padding), got torch.int64
    """
    _check_flags(mask, "mask", "True = real document, False = padding", preds)


def check_preds_target(preds: Any, target: Any, mask: Any = None, *, target_name: str = "target") -> None:
    """Type, shape and device checks shared by every entry point (no host sync). The conditions are
    tested here and the helpers that word the messages called only when one fails: no further call
    on an update's hot path."""
    if not isinstance(preds, Tensor) or not preds.is_floating_point():
        check_scores(preds)  # raises: not a tensor, or not floating
    if not isinstance(target, Tensor):
        _check_tensor(target, target_name)  # raises
    if target.dtype not in _GRADE_DTYPES:
        _check_grades(target, target_name)  # raises
    if preds.shape != target.shape:
        raise ValueError(
            f"preds and {target_name} must have the same shape, got {tuple(preds.shape)} and {tuple(target.shape)}"
        )
    if preds.ndim not in (1, 2):
        raise ValueError(f"preds must be (L,) for one list or (N, L) for a batch of lists, got {preds.ndim} dimensions")
    if target.device != preds.device:
        _same_device(preds, target, target_name)  # raises
    if mask is not None:
        check_mask(mask, preds)


#: the dtypes of grades: bool, the signed integers and uint8, every floating dtype (never complex)
_GRADE_DTYPES = frozenset(
    [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
    + [d for d in vars(torch).values() if isinstance(d, torch.dtype) and d.is_floating_point]
)


def _check_grades(grades: Tensor, name: str) -> None:
    if grades.dtype not in _GRADE_DTYPES:
        raise TypeError(f"{name} must hold bool, integer or float grades, got {grades.dtype}")


def _check_flags(flags: Any, name: str, meaning: str, preds: Tensor) -> None:
    """A bool tensor of the shape and device of ``preds``; ``meaning`` says what True marks."""
    _check_tensor(flags, name)
    if flags.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor ({meaning}), got {flags.dtype}")
    check_like(flags, preds, name)


def check_like(x: Tensor, like: Tensor, name: str, like_name: str = "preds") -> None:
    """``x`` has the shape and the device of ``like``."""
    if x.shape != like.shape:
        raise ValueError(f"{name} must have the shape of {like_name} {tuple(like.shape)}, got {tuple(x.shape)}")
    _same_device(like, x, name, like_name)


def _same_device(preds: Tensor, other: Tensor, name: str, like_name: str = "preds") -> None:
    if other.device != preds.device:
        raise ValueError(
            f"{name} is on {other.device} but {like_name} is on {preds.device}: move all inputs to one device"
        )


def valid_mask(target: Tensor, mask: Tensor | None, ignore_index: int | float | None) -> Tensor | None:
    """True for real documents: inside ``mask`` and not equal to ``ignore_index``; None if no padding."""
    if ignore_index is None:
        return mask
    valid = target != ignore_index
    return valid if mask is None else valid & mask


def prepare(
    preds: Tensor,
    target: Tensor,
    *,
    convention: Convention,
    mask: Tensor | None = None,
    ignore_index: int | float | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    judged: Tensor | None = None,
    validate_args: bool = True,
    uses_gain: bool = False,
    discounts: Tensor | None = None,
    gain: Callable[[Tensor], Tensor] | None = None,
    split_ties: bool = False,
    subtopics: Tensor | None = None,
    ideal_subtopics: Tensor | None = None,
    extra_checks: list[tuple[Tensor, str]] | None = None,
    weights: Tensor | None = None,
    checked: bool = False,
    head: int | None = None,
) -> tuple[RankedBatch, bool]:
    """Check the inputs and rank them; returns the ranked batch and whether the input was 1-D.

    ``validate_args`` adds the checks that read values (:func:`check_values`), resolved in one host
    sync; the ranked batch is the same either way. ``subtopics`` / ``ideal_subtopics``: the
    ``(N, L, S)`` / ``(N, M, S)`` subtopic grades of a subtopic target
    (:func:`~torch_rankeval.ranking.subtopics.split_subtopics`), whose ad-hoc view ``target`` /
    ``ideal_target`` are. ``extra_checks``: the caller's own value checks (flag,
    message), resolved in the same host sync (validated calls only). ``weights``: per-document weights
    like ``preds`` (:func:`item_weights`), kept by the ranked batch as ``item_weights`` (0 at padding).
    ``checked``: the caller ran :func:`check_preds_target` on these ``preds``, ``target`` and ``mask``
    (the plan, once per batch for all its conventions): the type checks are not repeated. ``head``: the
    caller reads only the first ``head`` ranked positions (``RankedBatch(head=)``)."""
    inputs = _normalize(preds, target, mask, ignore_index, ideal_target, n_relevant, judged, convention, checked)
    if weights is not None:
        weights = item_weights(weights, preds)
        extra_checks = [*(extra_checks or []), *weight_checks(weights, inputs[2])]
        if inputs[2] is not None:  # padding is never read: weight 0 there, whatever was passed
            weights = torch.where(inputs[2], weights, 0.0)
    ranked = _ranked(
        inputs,
        convention,
        discounts=discounts,
        gain=gain,
        subtopics=subtopics,
        ideal_subtopics=ideal_subtopics,
        item_weights=weights,
        head=head,
    )
    ranked.host_reads = ranked._cpu_path and reads_host(preds)
    # The checks sync with the host once anyway; the same sync tells whether the batch holds any tie
    # at all. A batch without one skips the tie-group statistics (the same values: every group has
    # one document). No extra sync, no re-ranking. Unvalidated, a large CPU batch in eager mode reads
    # the same flags from memory (no device sync there; the whole row's tie statistics cost it twice
    # the plain formulas); otherwise validate_args=False never branches.
    per_list = split_ties and ranked.averaged and 1 < ranked.n_lists <= SPLIT_MAX_LISTS
    flags = None
    if validate_args:
        tied = None if not ranked.averaged else ranked.tied_lists() if per_list else ranked.any_tie()
        flags = _check_normalized(inputs, convention, uses_gain, tied, ranked, extra_checks)
    elif split_ties and ranked.averaged and ranked.host_reads:
        flags = ranked.tied_lists() if per_list else ranked.any_tie().reshape(1)
    if flags is not None:  # a list read in the sync, or (read from memory) the flags' tensor: counted there
        tied_count = sum(flags) if isinstance(flags, list) else int(flags.count_nonzero())
        if not tied_count:  # tied_count: the lists holding a tie (or 1: the batch holds one)
            ranked.assume_no_ties()
        elif per_list and tied_count * SPLIT_SHARE <= ranked.n_lists:
            ranked.assume_no_ties()
            ranked.split_rows = _flagged(flags)
    return ranked, inputs[-1]


def _flagged(flags: list[bool] | Tensor) -> list[int]:
    """The positions of the true flags (a list, or a bool tensor read from memory)."""
    return [i for i, flag in enumerate(flags if isinstance(flags, list) else flags.tolist()) if flag]


def _ranked(inputs: tuple, convention: Convention, **options: Any) -> RankedBatch:
    """The ranked batch of :func:`_normalize`'s inputs; ``options``: RankedBatch's gain, discounts, subtopics."""
    preds, target, valid, ideal_target, ideal_valid, n_relevant, judged, _ = inputs
    return RankedBatch(
        preds,
        target,
        valid,
        convention,
        ideal_target=ideal_target,
        ideal_valid=ideal_valid,
        n_relevant=n_relevant,
        judged=judged,
        dtype=work_dtype(preds, target, ideal_target),
        **options,
    )


def check_values(
    preds: Tensor,
    target: Tensor,
    *,
    convention: Convention,
    mask: Tensor | None = None,
    ignore_index: int | float | None = None,
    ideal_target: Tensor | None = None,
    n_relevant: Tensor | None = None,
    judged: Tensor | None = None,
    uses_gain: bool = False,
    gain: Callable[[Tensor], Tensor] | None = None,
    weights: Tensor | None = None,
    checked: bool = False,
) -> None:
    """The checks of ``validate_args=True`` on their own: shapes and types, then the checks that read
    values (NaN/inf scores, negative grades under exp2, ``n_relevant`` below the relevant documents
    found), resolved in one host sync. For callers that rank elsewhere (a compiled update).
    ``checked``: the caller ran :func:`check_preds_target` on ``preds``, ``target`` and ``mask``.

    Example:
        >>> import torch
        >>> from torch_rankeval.conventions import DEFAULT
        >>> check_values(torch.tensor([0.5, float("nan")]), torch.tensor([1, 0]), convention=DEFAULT)
        Traceback (most recent call last):
        ...
        ValueError: preds contains NaN or infinite scores at unmasked positions (neither padding nor excluded); fix the model output, or mark those documents as padding with mask=False (or exclude them with exclude=)
    """
    inputs = _normalize(preds, target, mask, ignore_index, ideal_target, n_relevant, judged, convention, checked)
    ranked = None
    if uses_gain or inputs[3] is not None:  # finite gains, ideal_target holding the list: checks of a ranked batch
        ranked = _ranked(inputs, convention, gain=gain)
    extra = None if weights is None else weight_checks(item_weights(weights, preds), inputs[2])
    _check_normalized(inputs, convention, uses_gain, None, ranked, extra)


def item_weights(weights: Any, preds: Tensor) -> Tensor:
    """Per-document weights checked without a host sync (a floating tensor of the shape and device of
    ``preds``) and shaped as the ranked batch's ``(N, L)`` (a list without documents: one padding slot).

    Example:
        >>> item_weights(torch.tensor([2.0, 1.0]), torch.tensor([0.9, 0.1]))
        tensor([[2., 1.]])
        >>> item_weights(torch.tensor([2, 1]), torch.tensor([0.9, 0.1]))
        Traceback (most recent call last):
        ...
        TypeError: weights must be a floating tensor (one weight per document, like preds), got torch.int64; call weights.float()
    """
    _check_tensor(weights, "weights")
    if not weights.is_floating_point():
        raise TypeError(
            f"weights must be a floating tensor (one weight per document, like preds), got {weights.dtype}; "
            "call weights.float()"
        )
    check_like(weights, preds, "weights")
    weights = weights.unsqueeze(0) if weights.ndim == 1 else weights
    return weights if weights.shape[-1] else weights.new_zeros(weights.shape[0], 1)


def weight_checks(weights: Tensor, valid: Tensor | None) -> list[tuple[Tensor, str]]:
    """The value check of per-document weights ``(N, L)`` (flag, message): finite and ``>= 0`` where
    a document is real (padding is never read)."""
    bad = ~torch.isfinite(weights) | (weights < 0)
    return [
        (
            (bad if valid is None else bad & valid).any(),
            "weights must be finite and >= 0 at unmasked positions (one weight per document); a document "
            "that should not count takes weight 0, or mask=False to take it out of the ranking",
        )
    ]


def _normalize(
    preds: Tensor,
    target: Tensor,
    mask: Tensor | None,
    ignore_index: int | float | None,
    ideal_target: Tensor | None,
    n_relevant: Tensor | None,
    judged: Tensor | None = None,
    convention: Convention | None = None,
    checked: bool = False,
) -> tuple:
    """Type and shape checks (no host sync), 1-D input as one list: (preds, target, valid,
    ideal_target, ideal_valid, n_relevant, judged, single). A convention whose scores ``<= 0`` are
    never relevant (torchmetrics' quirk) turns those documents unjudged here. ``checked``: the
    caller ran :func:`check_preds_target` on ``preds``, ``target`` and ``mask``."""
    if not checked:
        check_preds_target(preds, target, mask)
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, float))):
        raise TypeError(f"ignore_index must be an int (or float) grade value marking padding, got {ignore_index!r}")
    if judged is not None:
        _check_flags(judged, "judged", "True = the document has a relevance judgment", preds)
    single = preds.ndim == 1
    if single:
        preds, target = preds.unsqueeze(0), target.unsqueeze(0)
        mask = None if mask is None else mask.unsqueeze(0)
        judged = None if judged is None else judged.unsqueeze(0)
    n = preds.shape[0]
    if preds.shape[-1] == 0:  # lists without documents: as if padded to one slot with mask=False
        preds, target, mask, judged = _one_padding_slot(preds, target, judged)
    ideal_valid = None
    if ideal_target is not None:
        _check_tensor(ideal_target, "ideal_target")
        _check_grades(ideal_target, "ideal_target")
        if ideal_target.ndim != (1 if single else 2) or (not single and ideal_target.shape[0] != n):
            want = "(M,) for a single list" if single else f"({n}, M), one row of judged grades per list"
            raise ValueError(f"ideal_target must have shape {want}, got {tuple(ideal_target.shape)}")
        _same_device(preds, ideal_target, "ideal_target")
        if single:
            ideal_target = ideal_target.unsqueeze(0)
        ideal_valid = valid_mask(ideal_target, None, ignore_index)
        if ideal_target.shape[-1] == 0:  # no judged document
            ideal_target, _, ideal_valid, _ = _one_padding_slot(ideal_target, ideal_target, None)
    if n_relevant is not None:
        _check_tensor(n_relevant, "n_relevant")
        if n_relevant.is_floating_point() or n_relevant.is_complex() or n_relevant.dtype == torch.bool:
            raise TypeError(
                f"n_relevant must be an integer tensor (number of relevant documents per query), got {n_relevant.dtype}"
            )
        want_shape = () if single else (n,)
        if tuple(n_relevant.shape) != want_shape:
            raise ValueError(
                f"n_relevant must have shape {want_shape}, one count per list, got {tuple(n_relevant.shape)}"
            )
        _same_device(preds, n_relevant, "n_relevant")
        n_relevant = n_relevant.reshape(n)
    valid = mask if ignore_index is None else valid_mask(target, mask, ignore_index)  # no call without ignore_index
    if convention is not None and convention.nonpositive_not_relevant:  # torchmetrics' quirk: see Convention
        judged, n_relevant = _nonpositive_not_relevant(
            preds, target, valid, judged, convention, n_relevant, ideal_target
        )
    return preds, target, valid, ideal_target, ideal_valid, n_relevant, judged, single


def _check_normalized(
    inputs: tuple,
    convention: Convention,
    uses_gain: bool,
    tied: Tensor | None = None,
    ranked: RankedBatch | None = None,
    extra: list[tuple[Tensor, str]] | None = None,
) -> list[bool] | Tensor | None:
    """Run the value checks in one host sync; returns the values of ``tied`` (a bool tensor: one
    flag for the batch, or one per list) read in the same sync, None without ``tied``; where the
    flags are read from memory (a CPU batch in eager mode), ``tied`` itself, flattened (no sync to
    share; the caller counts it there). With ``ranked``, the checks of the ranked batch join them."""
    preds, target, valid, ideal_target, ideal_valid, n_relevant, judged, _ = inputs
    graded = valid if judged is None else (judged if valid is None else valid & judged)  # grades that count
    dtype = work_dtype(preds, target, ideal_target) if ranked is None else ranked.dtype  # the same answer
    # a CPU batch in eager mode reads its integer grades' range from memory (shared with its ideal's histogram)
    grade_range = ranked.grade_range() if ranked is not None and uses_gain and convention.gain == "exp2" else None
    host = ranked is not None and ranked.host_reads  # a CPU batch in eager mode: its flags read from memory
    checks = _value_checks(
        preds, target, valid, graded, convention, ideal_target, ideal_valid, uses_gain, dtype, grade_range, host
    )
    if n_relevant is not None:
        found = relevant(target, convention)
        found = (found if graded is None else found & graded).sum(-1)
        checks.append(
            (
                (found > n_relevant).any() | (n_relevant < 0).any(),
                "n_relevant is smaller than the number of relevant documents found in the list (or negative): "
                "it must count all relevant documents of each query, retrieved or not",
            )
        )
    if extra:
        checks += extra
    if ranked is not None:
        checks += _ranked_checks(
            ranked, uses_gain=uses_gain, ideal=ideal_target is not None, counted=n_relevant is not None
        )
    if host:  # each flag read where it is (no copies into one tensor to read)
        read = iter([bool(flag) for flag, _ in checks if not isinstance(flag, bool)])
    else:
        parts = [flag.to(preds.device).reshape(1) for flag, _ in checks if not isinstance(flag, bool)]
        if tied is not None:
            parts.append(tied.reshape(-1).to(preds.device))
        read = iter(torch.cat(parts).tolist() if parts else [])  # the one host sync (the flags and the ties)
    for i, (flag, message) in enumerate(checks):
        if (flag if isinstance(flag, bool) else next(read)) and not (
            i == 0 and valid is None and bool(torch.isfinite(preds).all())
        ):
            raise ValueError(message)
    if tied is None:
        return None
    return (tied if tied.ndim == 1 else tied.reshape(-1)) if host else list(read)


def _nonpositive_not_relevant(
    preds: Tensor,
    target: Tensor,
    valid: Tensor | None,
    judged: Tensor | None,
    convention: Convention,
    n_relevant: Tensor | None,
    ideal_target: Tensor | None,
) -> tuple[Tensor, Tensor | None]:
    """Documents scored ``<= 0`` as unjudged (never relevant, no gain, rank kept), with the query's
    relevant count taken before that, from the list, unless ``n_relevant`` / ``ideal_target`` give it."""
    counted = judged if valid is None else (valid if judged is None else valid & judged)
    if n_relevant is None and ideal_target is None:
        rel = relevant(target, convention)
        n_relevant = (rel if counted is None else rel & counted).sum(-1)
    positive = preds > 0
    return (positive if counted is None else positive & counted), n_relevant


def _one_padding_slot(
    preds: Tensor, target: Tensor, judged: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """``(N, 0)`` lists as ``(N, 1)`` lists whose one slot is padding: a list without documents
    scores exactly as a fully masked list of any width (the empty-list policy), so results do
    not depend on how wide a batch was padded."""
    n = preds.shape[0]
    padding = torch.zeros(n, 1, dtype=torch.bool, device=preds.device)
    return preds.new_zeros(n, 1), target.new_zeros(n, 1), padding, None if judged is None else judged.new_zeros(n, 1)


#: The value checks' messages, one per defect, the same on every route (dense view, top-k view,
#: sparse target, exclude=, flat input, compiled update).
SCORES_NOT_FINITE = (
    "preds contains NaN or infinite scores at unmasked positions (neither padding nor excluded); fix the "
    "model output, or mark those documents as padding with mask=False (or exclude them with exclude=)"
)
GAINS_NOT_FINITE = (
    "the gains are not finite (or their sum per list overflows the float range): check the gain mapping "
    "or callable (it must give finite numbers for every grade), or pass float64 grades"
)


def _not_finite(x: Tensor) -> Tensor:
    """0-d bool: whether ``x`` holds a NaN or an infinite value, in three operations (``x * 0`` is NaN
    exactly there, and its sum carries the NaN) where ``~torch.isfinite(x).all()`` takes six.

    Example:
        >>> _not_finite(torch.tensor([1.0, 3e38])), _not_finite(torch.tensor([1.0, float("-inf")]))
        (tensor(False), tensor(True))
    """
    zeros = x.mul(0)
    return (zeros if zeros.ndim == 0 else zeros.sum()).isnan()


def grade_checks(
    grades: Tensor,
    counted: Callable[[Tensor], Tensor],
    *,
    name: str,
    exp2: bool,
    wide: bool,
    grade_range: tuple[int, int] | None = None,
) -> list[tuple[Tensor | bool, str]]:
    """The checks of one grade tensor (dense ``(N, L)``, or a sparse target's ``(nnz,)`` entries) as
    (flag, message) pairs: non-finite grades; with ``exp2`` (a measure reads gains under
    ``gain="exp2"``) negative grades and grades whose gain overflows the working dtype (float64
    when ``wide``). ``counted(bad)`` reduces a bool tensor of the grades' shape to "bad somewhere
    it counts" (padding, unjudged and excluded items never count). ``grade_range``: the integer
    grades' ``(low, high)`` over the documents that count, already read from memory
    (:meth:`~torch_rankeval.ranking.view.RankedBatch.grade_range`): the bounds' flags are Python bools.

    Example:
        >>> t = torch.tensor([[1.0, float("nan")]])
        >>> [(bool(flag), msg[:44]) for flag, msg in grade_checks(t, torch.any, name="target", exp2=False, wide=False)]
        [(True, 'target contains NaN or infinite grades at un')]
    """
    checks: list[tuple[Tensor | bool, str]] = []
    if grades.is_floating_point():
        checks.append(
            (
                counted(~torch.isfinite(grades)),
                f"{name} contains NaN or infinite grades at unmasked positions (neither padding nor excluded); "
                "mask or exclude them, or use ignore_index",
            )
        )
    if exp2 and grades.dtype != torch.bool:
        limit, dtype, wider = (
            (1024, "float64", "") if wide else (128, "float32", "pass float64 grades (exact up to grade 1023), or ")
        )
        negative: Tensor | bool
        overflow: Tensor | bool | None
        if grade_range is not None:  # read already (a CPU batch in eager mode)
            negative, overflow = grade_range[0] < 0, grade_range[1] >= limit
        else:
            # an integer dtype whose grades all stay below the limit (int8, uint8; int16 in float32) cannot
            # overflow, and the limit would wrap around in a comparison with it (int8 reads 128 as -128)
            reachable = grades.is_floating_point() or torch.iinfo(grades.dtype).max >= limit
            if counted is torch.any and grades.numel():  # every grade counts: one pass for both bounds
                low, high = torch.aminmax(grades)
                negative, overflow = low < 0, high >= limit if reachable else None
            else:
                negative, overflow = counted(grades < 0), counted(grades >= limit) if reachable else None
        checks.append(
            (
                negative,
                f"{name} has negative grades, which gain='exp2' (2**rel - 1) turns into negative gains; use "
                "gain='linear', mark unjudged documents with ignore_index / mask (or exclude them), or clamp "
                "the grades at 0",
            )
        )
        if overflow is not None:
            checks.append(
                (
                    overflow,
                    f"{name} has grades >= {limit}, whose gain 2**rel - 1 overflows {dtype} (inf, then NaN in nDCG): "
                    f"{wider}use gain='linear' or a gain mapping",
                )
            )
    return checks


def _value_checks(
    preds: Tensor,
    target: Tensor,
    valid: Tensor | None,
    graded: Tensor | None,
    convention: Convention,
    ideal_target: Tensor | None,
    ideal_valid: Tensor | None,
    uses_gain: bool,
    dtype: torch.dtype,
    grade_range: tuple[int, int] | None = None,
    host: bool = False,
) -> list[tuple[Tensor | bool, str]]:
    """Checks that read tensor values, as (flag, message) pairs resolved in one host sync;
    ``dtype``: the working dtype (:func:`work_dtype` of the inputs); ``grade_range``: the target's
    integer grades' range where the ranked batch read it (:func:`grade_checks`); ``host``: the
    scores are read from memory (a CPU batch in eager mode), their screen's flag a Python bool."""

    def where(v: Tensor | None) -> Callable[[Tensor], Tensor]:
        return torch.any if v is None else lambda bad: (bad & v).any()

    # Without padding, one reduction screens the scores: the sum is finite unless a score is NaN or
    # infinite (or the sum overflows, which the exact re-check in prepare() rules out).
    if valid is not None:
        screen: Tensor | bool = where(valid)(~torch.isfinite(preds))
    else:
        screen = not math.isfinite(preds.sum().item()) if host else _not_finite(preds.sum())
    checks: list[tuple[Tensor | bool, str]] = [(screen, SCORES_NOT_FINITE)]
    wide = dtype == torch.float64
    exp2 = uses_gain and convention.gain == "exp2"
    checks += grade_checks(target, where(graded), name="target", exp2=exp2, wide=wide, grade_range=grade_range)
    if ideal_target is not None:
        checks += grade_checks(ideal_target, where(ideal_valid), name="ideal_target", exp2=exp2, wide=wide)
    return checks


@functools.cache
def _log2_max(dtype: torch.dtype) -> float:
    """log2 of the largest finite number of a float ``dtype`` (made once per dtype).

    Example:
        >>> _log2_max(torch.float64), round(_log2_max(torch.float32), 6)
        (1024.0, 128.0)
    """
    return math.log2(torch.finfo(dtype).max)


def _finite_gain_sums(ranked: RankedBatch) -> bool:
    """Whether every sum of gains is finite whatever the grades' values, so that checking them would
    prove nothing: the linear gain of integer or boolean grades (at most 2^63 each, so a row of fewer
    than 2^31 documents sums to less than 2^94, which float32 holds), the exp2 gain of boolean grades,
    and of integer grades whose range the batch read (:meth:`RankedBatch.grade_range`) when the row's
    length times the largest gain stays below the float range."""
    if ranked._gain_given is not None:
        return False
    grade_range = ranked.grade_range() if ranked.convention.gain == "exp2" else None
    if grade_range is not None:
        # exp2 gains of integer grades at most ``high``: a list sums to less than row_length * 2**high (a bit
        # of margin for the rounding of the sum); nearer the float range, the sums are checked
        return grade_range[1] + 1 + math.log2(ranked.row_length) <= _log2_max(ranked.dtype)
    grades = (ranked._target_in,) if ranked.ideal_target is None else (ranked._target_in, ranked.ideal_target)
    if ranked.convention.gain == "linear":
        return not any(t.is_floating_point() for t in grades)
    return ranked.convention.gain == "exp2" and all(t.dtype == torch.bool for t in grades)


def _ranked_checks(ranked: RankedBatch, *, uses_gain: bool, ideal: bool, counted: bool) -> list[tuple[Tensor, str]]:
    """Checks of the ranked batch (no extra host sync: resolved with the others). Gains must be
    finite, and their sums too (a gain mapping or callable that gives inf/NaN, linear grades near
    the float range). ``ideal_target`` must hold every judged document of the list: each relevant
    document, and each gain, of the list needs its counterpart there, else nDCG, AP and recall
    exceed 1 (one more sort of the gains, only with ``ideal_target``)."""
    checks = []
    if uses_gain and not _finite_gain_sums(ranked):
        # without ideal_target the judged gains are the list's own, in input order: no gather into ranked order
        sums = torch.stack((ranked.gains.sum(-1), ranked.ideal_gains.sum(-1))) if ideal else ranked.ideal_gains.sum(-1)
        checks.append((_not_finite(sums), GAINS_NOT_FINITE))
    if not ideal:
        return checks
    lacks = "ideal_target must hold the grades of all judged documents of each query, the list's own included, "
    if not counted:
        checks.append(
            (
                (ranked.rel.sum(-1) > ranked.n_relevant).any(),
                (
                    lacks + "but a row of ideal_target has fewer relevant documents than its list (AP, recall and "
                    "R-precision would exceed 1): build ideal_target from all judgments of the query (retrieved or not)"
                ),
            )
        )
    if uses_gain:
        # Each list's gains, sorted, must stay at or below the ideal's, position by position (then
        # DCG@k <= IDCG@k at every k). The ideal side is the IDCG's own sorted table.
        listed = ranked.gains.clamp(min=0).sort(-1, descending=True).values
        best = ranked.ideal_top((None,)).clamp(min=0)
        width = min(listed.shape[-1], best.shape[-1])
        checks.append(
            (
                (listed[:, :width] > best[:, :width]).any() | (listed[:, width:] > 0).any(),
                (
                    lacks
                    + "but a list holds a document whose grade (gain) its ideal_target row lacks (nDCG would exceed "
                    "1): build ideal_target from all judgments of the query (retrieved or not)"
                ),
            )
        )
    return checks
