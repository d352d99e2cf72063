"""The ``torch-rankeval profile QRELS RUN`` subcommand: quality by position of a TREC run.

Wiring (the command line registers it on its subparsers)::

    sub = parser.add_subparsers(dest="command")
    profile.add_parser(sub)          # sets func=profile.run
    args = parser.parse_args()
    raise SystemExit(args.func(args))

The work is :func:`torch_rankeval.diagnostics.profile_from_tensors`; this module only reads the two
files into padded tensors (trec_eval's order: queries in both files, documents by docno
descending so that ``ties="first"`` breaks score ties as trec_eval does) and prints or plots.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="torch-rankeval")
    >>> _ = add_parser(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["profile", "qrels.txt", "run.txt", "-k", "5", "--bands", "1-2,4-5"])
    >>> args.positions, args.bands, args.func is run
    (5, '1-2,4-5', True)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import torch

from torch_rankeval.conventions import PRESETS, TIES
from torch_rankeval.diagnostics import INVERSION_STATS, ProfileSummary, profile_from_tensors
from torch_rankeval.trec import read_qrels, read_run, to_tensors

__all__ = ["add_parser", "run"]

_PAD = -1  # grade marking padding in the tensors built here (negative trec grades become 0 first)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``profile`` subcommand on an ``argparse`` subparsers object; returns its parser."""
    p = subparsers.add_parser(
        "profile",
        help="quality by rank position of a run: profile vs ideal, relevance inversions, worst queries",
        description=(
            "Profile a TREC run against qrels: mean relevance, gain, relevant share and DCG contribution at each "
            "rank position (model and ideal ranking), rank bands where lower positions hold more relevant "
            "documents than higher ones (paired t-test over queries), and the per-query nDCG@P distribution."
        ),
    )
    p.add_argument("qrels", help="TREC qrels file: 'qid iter docno grade' per line")
    p.add_argument("run", help="TREC run file: 'qid Q0 docno rank score tag' per line")
    p.add_argument("-k", "--positions", type=int, default=10, help="number of rank positions to profile (default 10)")
    p.add_argument("--bands", default=None, help="position bands to compare, e.g. '1-3,5-8' (default: 4 equal bands)")
    p.add_argument("--stat", choices=INVERSION_STATS, default="relevance", help="statistic compared between bands")
    p.add_argument("--convention", choices=sorted(PRESETS), default="trec_eval", help="convention preset (default trec_eval)")
    p.add_argument("--gain", choices=("linear", "exp2"), default=None, help="override the preset's gain")
    p.add_argument("--ties", choices=TIES, default=None, help="override the preset's tie policy")
    p.add_argument("-l", "--relevance-level", type=int, default=None, help="grade from which a document is relevant (trec_eval -l)")
    p.add_argument("--worst", type=int, default=10, help="how many worst queries (by nDCG@P) to list")
    p.add_argument("--plot", default=None, metavar="PATH", help="save the position profile figure (.png, .svg, .pdf)")
    p.add_argument("--hist", default=None, metavar="PATH", help="save the per-query nDCG@P histogram figure")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the subcommand: print the profile (text or JSON), save the figures; 0 on success, 2 on bad input."""
    try:
        if args.positions <= 0:
            raise ValueError(f"--positions must be a positive int, got {args.positions}")
        qids, preds, target, mask, ideal = _tensors(args.qrels, args.run)
        conventions = {k: v for k, v in (("gain", args.gain), ("ties", args.ties)) if v is not None}
        if args.relevance_level is not None:
            if args.relevance_level <= 0:
                raise ValueError(f"--relevance-level must be >= 1, got {args.relevance_level}")
            conventions["relevance_threshold"] = args.relevance_level
        summary = profile_from_tensors(
            preds, target, mask=mask, ideal_target=ideal, positions=args.positions,
            bands=None if args.bands is None else [b for b in args.bands.split(",") if b.strip()],
            stat=args.stat, worst=args.worst, convention=args.convention, ignore_index=_PAD, **conventions,
        )
    except (OSError, ValueError) as err:
        print(f"torch-rankeval profile: error: {err}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(_json_safe(summary.to_dict(qids)), indent=2))
    else:
        print(f"{len(qids)} queries, {args.positions} positions, convention {args.convention}")
        print(summary.to_text(qids))
    _figures(summary, args)
    return 0


def _figures(summary: ProfileSummary, args: argparse.Namespace) -> None:
    if args.plot is None and args.hist is None:
        return
    from torch_rankeval.plotting import plot_position_profile, plot_query_histogram

    if args.plot is not None:
        plot_position_profile(summary.profile, stat=args.stat, report=summary.report, path=args.plot)
    if args.hist is not None:
        plot_query_histogram(summary.query_values, summary.breakdown.key, path=args.hist)


def _json_safe(x: Any) -> Any:
    """NaN/inf (positions no query reaches) become null: strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _tensors(qrels_path: str, run_path: str) -> tuple[list[str], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded tensors of the queries in both files, in trec_eval's order (:func:`torch_rankeval.trec.to_tensors`):
    unjudged and negatively graded documents of the run count as grade 0; the ideal holds every
    judged grade, with ``_PAD`` for padding (and negative grades)."""
    batch = to_tensors(read_qrels(qrels_path), read_run(run_path))
    return batch.qids, batch.preds, batch.target.clamp(min=0), batch.mask, batch.ideal_target
