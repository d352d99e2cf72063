"""``torch-rankeval measures [PATTERN]``: list the measure names every route accepts.

The names are :func:`torch_rankeval.measures.known_names` (trec_eval, ir_measures, library aliases,
nicknames), one per line so that the list pipes into ``grep`` or ``less``; ``PATTERN`` keeps the
names containing it (case-insensitive). An unknown measure's error points here instead of printing
them all on one line.

Example:
    >>> import argparse, io
    >>> parser = argparse.ArgumentParser(prog="torch-rankeval measures")
    >>> add_arguments(parser)
    >>> out = io.StringIO()
    >>> run(parser.parse_args(["ndcg"]), out)
    0
    >>> print(out.getvalue(), end="")
    alpha-ndcg
    alpha_nDCG
    alpha_ndcg
    nDCG
    ndcg
    ndcg_burges
    ndcg_cut
    ndcg_rel
    Rndcg
    rndcg
"""

from __future__ import annotations

import argparse
from typing import TextIO

from torch_rankeval.cli._common import CommandError

__all__ = ["HELP", "NAME", "SPELLINGS", "add_arguments", "run"]

NAME = "measures"
HELP = "list the measure names -m accepts (optionally those containing PATTERN)"
DESCRIPTION = (
    "List every measure name the library and -m accept (trec_eval, ir_measures and library spellings, "
    "nicknames), one per line. A name takes a cutoff and parameters in any of the spellings of the "
    "measures guide: trec_eval 'ndcg_cut.10', ir_measures 'nDCG@10' or 'P(rel=2)@5', library 'ndcg@10'."
)
SPELLINGS = "trec_eval style 'ndcg_cut.10', ir_measures style 'nDCG@10', 'P(rel=2)@5', library style 'ndcg@10'"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments."""
    parser.add_argument("pattern", nargs="?", default=None, help="keep the names containing it (case-insensitive)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Write the known names (those containing ``args.pattern``) to ``out``, one per line; returns 0."""
    from torch_rankeval.measures import known_names

    names = [n for n in known_names() if args.pattern is None or args.pattern.lower() in n.lower()]
    if not names:
        raise CommandError(f"no measure name contains {args.pattern!r}: run `torch-rankeval measures` for them all")
    out.write("".join(f"{n}\n" for n in names))
    return 0
