"""``torch-rankeval profile QRELS RUN``: quality by rank position of a TREC run.

The work is :func:`torch_rankeval.diagnostics.profile_from_tensors`; this module only reads the two
files into padded tensors (trec_eval's order: queries in both files, documents by docno
descending so that ``ties="first"`` breaks score ties as trec_eval does), prints and plots. It
runs on the core install: without scipy the inversions' t-test is skipped (with a note), and
matplotlib is needed only for ``--plot`` / ``--hist``.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="torch-rankeval profile")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["qrels.txt", "run.txt", "-k", "5", "--bands", "1-2,4-5"])
    >>> args.positions, args.bands, args.stat
    (5, '1-2,4-5', 'relevance')
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from typing import TextIO

from torch_rankeval._choices import GAINS, INVERSION_STATS, PRESET_NAMES, TIES
from torch_rankeval.cli._common import CommandError, json_safe, note

__all__ = ["HELP", "NAME", "add_arguments", "run"]

NAME = "profile"
HELP = "quality by rank position of a run: profile vs ideal, relevance inversions, worst queries"
DESCRIPTION = (
    "Profile a TREC run against qrels: mean relevance, gain, relevant share and DCG contribution at each "
    "rank position (model and ideal ranking), rank bands where lower positions hold more relevant "
    "documents than higher ones (paired t-test over queries, needs scipy), and the per-query nDCG@P distribution."
)

_PAD = -1  # grade marking padding in the tensors built here (negative trec grades become 0 first)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments."""
    p = parser
    p.add_argument("qrels", help="TREC qrels file: 'qid iter docno grade' per line")
    p.add_argument("run", help="TREC run file: 'qid Q0 docno rank score tag' per line")
    p.add_argument(
        "-k",
        "--positions",
        type=int,
        default=10,
        help="number of rank positions to profile (default 10; at most the longest list)",
    )
    p.add_argument("--bands", default=None, help="position bands to compare, e.g. '1-3,5-8' (default: 4 equal bands)")
    p.add_argument("--stat", choices=INVERSION_STATS, default="relevance", help="statistic compared between bands")
    p.add_argument(
        "--convention", choices=PRESET_NAMES, default="trec_eval", help="convention preset (default trec_eval)"
    )
    p.add_argument("--gain", choices=GAINS, default=None, help="override the preset's gain")
    p.add_argument("--ties", choices=TIES, default=None, help="override the preset's tie policy")
    p.add_argument(
        "-l", "--relevance-level", type=int, default=None, help="grade from which a document is relevant (trec_eval -l)"
    )
    p.add_argument("--worst", type=int, default=10, help="how many worst queries (by nDCG@P) to list")
    p.add_argument(
        "--plot", default=None, metavar="PATH", help="save the position profile figure (.png, .svg, .pdf; matplotlib)"
    )
    p.add_argument("--hist", default=None, metavar="PATH", help="save the per-query nDCG@P histogram (matplotlib)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Profile the run, write the profile (text or JSON) to ``out`` and save the figures; returns 0."""
    from torch_rankeval.diagnostics import parse_band, profile_from_batches

    if args.positions < 1:
        raise CommandError(f"-k/--positions must be 1 or more, got {args.positions}")
    if args.worst < 0:
        raise CommandError(f"--worst must be 0 or more, got {args.worst}")
    conventions = {k: v for k, v in (("gain", args.gain), ("ties", args.ties)) if v is not None}
    if args.relevance_level is not None:
        if args.relevance_level < 1:
            raise CommandError(f"-l/--relevance-level must be 1 or more, got {args.relevance_level}")
        conventions["relevance_threshold"] = args.relevance_level
    bands = None if args.bands is None else [b for b in args.bands.split(",") if b.strip()]
    for band in bands or ():
        parse_band(band)  # a malformed band fails before the files are read
    for option, path in (("--plot", args.plot), ("--hist", args.hist)):
        if path is not None:
            _check_figure_path(option, path)
    qids, batches = _batches(args.qrels, args.run)
    positions = args.positions
    longest = max(max(b[0].shape[-1], b[3].shape[-1]) for b in batches)
    if positions > longest:  # beyond the longest list every position is empty: do not allocate them
        note(f"-k {positions} is more than the longest list ({longest} documents); profiling {longest} positions")
        positions = longest
        for band in bands or ():
            if parse_band(band)[1] > longest:
                raise CommandError(f"--bands: band {band} goes beyond the longest list ({longest} documents)")
    test = importlib.util.find_spec("scipy") is not None
    if not test:
        note("scipy is not installed, the inversions' t-test is skipped (pip install 'torch-rankeval[cli]')")
    summary = profile_from_batches(
        batches,
        positions=positions,
        bands=bands,
        stat=args.stat,
        worst=args.worst,
        test=test,
        convention=args.convention,
        ignore_index=_PAD,
        **conventions,
    )
    if args.format == "json":
        out.write(json.dumps(json_safe(summary.to_dict(qids)), indent=2) + "\n")
    else:
        out.write(f"{len(qids)} queries, {positions} positions, convention {args.convention}\n")
        out.write(summary.to_text(qids) + "\n")
    if args.plot is not None or args.hist is not None:
        from torch_rankeval.plotting import plot_position_profile, plot_query_histogram

        if args.plot is not None:
            plot_position_profile(summary.profile, stat=args.stat, report=summary.report, path=args.plot)
        if args.hist is not None:
            plot_query_histogram(summary.query_values, summary.breakdown.key, path=args.hist)
    return 0


def _check_figure_path(option: str, path: str) -> None:
    """Before any work: matplotlib is installed, the folder exists and takes files, the format is known."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise CommandError(f"{option} needs matplotlib: pip install 'torch-rankeval[plot]'") from None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CommandError(f"{option} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise CommandError(f"{option} {path}: cannot write into {folder}")
    if os.path.isdir(path):
        raise CommandError(f"{option} {path}: is a folder; give a file name such as profile.png")
    extension = os.path.splitext(path)[1][1:].lower()
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if extension and extension not in formats:
        raise CommandError(f"{option} {path}: unknown image format {extension!r}; use one of {', '.join(formats)}")


def _batches(qrels_path: str, run_path: str) -> tuple[list[str], list[tuple]]:
    """The queries in both files as length buckets of padded tensors, in trec_eval's order
    (:func:`torch_rankeval.trec.to_batches`: memory follows the documents, however skewed the query
    lengths): ``(qids, [(preds, target, mask, ideal_target, query_ids), ...])``. Unjudged and
    negatively graded documents of the run count as grade 0; the ideal holds every judged grade,
    with ``_PAD`` for padding (and negative grades)."""
    from torch_rankeval.trec import read_qrels, read_run, to_batches

    joined = to_batches(read_qrels(qrels_path), read_run(run_path))
    batches = [(b.preds, b.target.clamp(min=0), b.mask, b.ideal_target.clamp(min=_PAD), b.rows) for b in joined]
    return joined.qids, batches
