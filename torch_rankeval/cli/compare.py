"""``torch-rankeval compare QRELS RUN_A RUN_B [RUN ...]``: are the differences between runs significant?

Per measure: each run's mean, and for every pair of runs the mean difference, its bootstrap
confidence interval, the paired t-test and randomization-test p-values, the p-value adjusted over
the pairs (Holm by default) and whether it is significant. The numbers are
:func:`torch_rankeval.stats.compare_runs`'; this module reads the files and formats.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="torch-rankeval compare")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["qrels.txt", "a.txt", "b.txt", "--test", "t", "--resamples", "1000"])
    >>> args.runs, args.test, args.correction, args.resamples
    (['a.txt', 'b.txt'], 't', 'holm', 1000)
"""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import TYPE_CHECKING, TextIO

from torch_rankeval.cli._common import (
    CommandError,
    add_input_arguments,
    evaluate_inputs,
    fits,
    json_safe,
    labels,
    measures,
    note,
    run_names,
    table,
    terminal_width,
    transposed,
)

if TYPE_CHECKING:  # pragma: no cover
    from torch_rankeval.stats import RunComparison
    from torch_rankeval.trec import Evaluation

__all__ = ["HELP", "NAME", "add_arguments", "run"]

NAME = "compare"
HELP = "compare runs: means, differences, confidence intervals, significance tests"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments: the shared inputs and the tests' settings."""
    add_input_arguments(parser)
    parser.add_argument(
        "--test",
        choices=("randomization", "t"),
        default="randomization",
        help="the test that decides significance marks: randomization (default) or t (paired t-test, needs scipy)",
    )
    parser.add_argument(
        "--correction",
        choices=("holm", "bonferroni", "none"),
        default="holm",
        help="family-wise correction over the pairs of runs, per measure (default holm)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    parser.add_argument("--confidence", type=float, default=0.95, help="bootstrap interval coverage (default 0.95)")
    parser.add_argument(
        "--resamples",
        type=int,
        default=10_000,
        help="bootstrap and randomization resamples (default 10000; memory does not grow with it, time does)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Evaluate the runs, compare them (:func:`~torch_rankeval.stats.compare_runs`) and write the result."""
    import torch

    from torch_rankeval.stats import compare_runs

    if len(args.runs) < 2:
        raise CommandError("compare needs at least two runs")
    if not 0 < args.alpha < 1:
        raise CommandError(f"--alpha must be in (0, 1), got {args.alpha}")
    if not 0 < args.confidence < 1:
        raise CommandError(f"--confidence must be in (0, 1), e.g. 0.95; got {args.confidence}")
    if args.resamples < 1:
        raise CommandError(f"--resamples must be 1 or more, got {args.resamples}")
    chosen = measures(args, ["ndcg_cut.10", "map"])
    _, results = evaluate_inputs(args, chosen, complete=True)
    # Queries: every judged query (-c), or those answered by at least one run (missing ones score 0).
    answered = torch.stack([r.retrieved for r in results]).any(0)
    keep = torch.ones_like(answered) if args.complete else answered
    names = [o.name for o in results[0].outputs if o.name in results[0].per_query]
    skipped = [
        o.name for o in results[0].outputs if o.name not in results[0].per_query and o.measure.per_query is False
    ]
    if not names:
        raise CommandError("no measure with per-query values to compare (runid, num_q and gm_map have none)")
    for r in results:
        missing = int((keep & ~r.retrieved).sum())
        if missing:
            note(f"{r.run} does not answer {missing} of the compared queries; they score 0")
    if skipped:
        note(f"{', '.join(skipped)} has no per-query values and is not compared")
    n_queries = int(keep.sum())
    if n_queries < 2:
        raise CommandError(f"compare needs at least 2 queries, found {n_queries}")
    scores = torch.stack([torch.stack([r.per_query[n][keep] for n in names], -1) for r in results])  # (R, Q, M)
    try:
        comparison = compare_runs(
            scores,
            runs=[r.run for r in results],
            measures=names,
            test=args.test,
            correction=args.correction,
            alpha=args.alpha,
            confidence=args.confidence,
            n_resamples=args.resamples,
            seed=args.seed,
        )
    except ImportError:
        raise CommandError("--test t needs scipy: pip install 'torch-rankeval[cli]'") from None
    if comparison.t_test_skipped:
        note("scipy is not installed, the paired t-test is skipped (pip install 'torch-rankeval[cli]')")
    if args.format == "json":
        out.write(json.dumps(_json(comparison, results), indent=2) + "\n")
    else:
        out.write("\n".join(_text(comparison, terminal_width())) + "\n")
    return 0


def _json(c: RunComparison, results: list[Evaluation]) -> dict:
    tags = labels(len(c.runs))
    comparisons = [
        {**record, "label_a": tags[i], "label_b": tags[j]}
        for record, (i, j) in zip(c.records(), c.pairs * len(c.measures))
    ]
    order = [
        "measure", "run_a", "run_b", "label_a", "label_b", "mean_a", "mean_b", "difference", "ci_low", "ci_high",
        "t_statistic", "t_pvalue", "randomization_pvalue", "pvalue_adjusted", "significant", "winner",
    ]  # fmt: skip
    runs = [
        {
            "label": tags[k],
            "run": r.run,
            "runid": r.runid,
            "means": {n: float(c.means[k, m]) for m, n in enumerate(c.measures)},
        }
        for k, r in enumerate(results)
    ]
    return json_safe(
        {
            "queries": c.n_queries,
            "test": c.test,
            "correction": c.correction,
            "alpha": c.alpha,
            "confidence": c.confidence,
            "resamples": c.n_resamples,
            "seed": c.seed,
            "measures": list(c.measures),
            "runs": runs,
            "comparisons": [{k: record[k] for k in order} for record in comparisons],
        }
    )


def _text(c: RunComparison, width: int) -> list[str]:
    tags = labels(len(c.runs))
    test_text = "randomization test" if c.test == "randomization" else "paired t-test"
    settings = f"{test_text}, {c.correction} correction over {len(c.pairs)} pair(s) per measure, alpha {c.alpha:g}"
    lines = [*textwrap.wrap(f"{c.n_queries} queries; {settings}", width), ""]
    beaten = [["".join(tags[b] for b in c.beats(k, m)) for m in range(len(c.measures))] for k in range(len(c.runs))]
    cells = [
        [f"{float(c.means[k, m]):.4f}" + (f"^{b}" if b else "") for m, b in enumerate(row)]
        for k, row in enumerate(beaten)
    ]
    names = run_names(c.runs)
    wide = table(["", "run", *c.measures], [[t, n, *row] for t, n, row in zip(tags, names, cells)], keys=2)
    if fits(wide, width):
        lines += wide
    else:  # a row per measure, a column per run (labelled a, b, ... with a legend)
        legend = [f"{t}: {n}" for t, n in zip(tags, names)]
        body = transposed(tags, list(c.measures), cells, corner="measure", width=width)
        lines += [*legend, "", *body]
    lines += ["", "x^ab: significantly better than runs a and b", ""]
    ci = f"{round(c.confidence * 100, 2):g}% CI"
    detail = [
        [
            record["measure"],
            f"{tags[j]} - {tags[i]}",
            f"{record['difference']:+.4f}",
            f"[{record['ci_low']:+.4f}, {record['ci_high']:+.4f}]",
            *(
                "n/a" if record[k] is None else f"{record[k]:.4f}"
                for k in ("t_pvalue", "randomization_pvalue", "pvalue_adjusted")
            ),
            "*" if record["significant"] else "",
        ]
        for record, (i, j) in zip(c.records(), c.pairs * len(c.measures))
    ]
    lines += table(["measure", "pair", "diff", ci, "t-test p", "rand. p", "adj. p", "sig"], detail, keys=2, width=width)
    return lines
