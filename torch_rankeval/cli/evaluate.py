"""``torch-rankeval evaluate QRELS RUN [RUN ...]``: trec_eval's evaluation, same semantics, same numbers.

With ``--format trec`` the output is trec_eval's, line for line; ``table`` (default) fits the
terminal: a row per run, or, when the measures do not fit across, a row per measure and a column
per run; ``json`` and ``csv`` hold every value.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="torch-rankeval evaluate")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["qrels.txt", "run.txt", "-m", "map", "-q", "--format", "csv", "--convention", "ranx", "-J"])
    >>> args.measures, args.per_query, args.format, args.convention, args.judged_only
    (['map'], True, 'csv', 'ranx', True)
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from typing import TYPE_CHECKING, TextIO

from torch_rankeval.cli._common import (
    CommandError,
    add_input_arguments,
    evaluate_inputs,
    fits,
    fmt,
    json_safe,
    measures,
    run_column,
    table,
    terminal_width,
    transposed,
)

if TYPE_CHECKING:  # pragma: no cover
    from torch_rankeval.trec import Evaluation

__all__ = ["CONVENTIONS", "HELP", "NAME", "add_arguments", "format_trec_eval", "run"]

NAME = "evaluate"
HELP = "evaluate runs against qrels (trec_eval's measures and semantics)"
FORMATS = ("table", "trec", "json", "csv")
#: ``--convention``: whose numbers (:func:`torch_rankeval.trec.evaluate`'s ``convention``)
CONVENTIONS = ("trec_eval", "ranx", "ir_measures")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's arguments: the shared inputs, ``-q``, ``-n``, ``-J``, ``--format`` and ``--convention``."""
    add_input_arguments(parser)
    parser.add_argument("-q", "--per-query", action="store_true", help="also print each query's values (trec_eval -q)")
    parser.add_argument(
        "-n", "--no-summary", action="store_true", help="omit the summary over all queries (trec_eval -n)"
    )
    parser.add_argument(
        "-J",
        "--judged-only",
        action="store_true",
        help="evaluate each query on its judged documents only: unjudged ones are removed from the ranking (trec_eval -J)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (default; fits the terminal), trec (trec_eval's output, line for line), json or csv",
    )
    parser.add_argument(
        "--convention",
        choices=CONVENTIONS,
        default="trec_eval",
        help="whose numbers: trec_eval (default), ranx (ranx.evaluate's: its tie order, bpref, hits@k; every "
        "query of the qrels) or ir_measures (ir_measures.calc_aggregate's: each measure's provider and its tie order)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Evaluate the runs and write them in ``args.format`` to ``out``; returns 0."""
    if args.no_summary and args.format != "trec":
        raise CommandError("-n/--no-summary applies to --format trec only")
    if args.convention == "trec_eval":
        chosen = measures(args, ["official"])
    else:
        from torch_rankeval.trec.evaluation import preset_measures

        chosen = preset_measures(
            args.measures or ["official"], args.convention, trec_eval_version=args.trec_eval_version
        )
    _, results = evaluate_inputs(
        args, chosen, complete=args.complete, convention=args.convention, judged_only=args.judged_only
    )
    if args.format == "trec":
        for r in results:
            lines = format_trec_eval(r, per_query=args.per_query, summary=not args.no_summary)
            if lines:
                out.write("\n".join(lines) + "\n")
        return 0
    if args.format == "table":
        text = "\n".join(_table(results, args.per_query, terminal_width()))
    else:
        text = {"json": _json, "csv": _csv}[args.format](results, args.per_query)
    out.write(text + "\n")
    return 0


def format_trec_eval(result: Evaluation, *, per_query: bool = False, summary: bool = True) -> list[str]:
    """trec_eval's output lines for one run: ``measure<pad>\\tqid\\tvalue`` (``%-22s\\t%s\\t%6.4f``).

    Measures print in trec_eval's order; with ``per_query`` every query's values come first,
    query by query, then the summary (``all``) lines (:meth:`~torch_rankeval.trec.Evaluation.trec_lines`).

    Example:
        >>> from torch_rankeval.trec import Qrels, Run, evaluate
        >>> qrels, run = Qrels.from_dict({"q1": {"d1": 1}}), Run.from_dict({"q1": {"d1": 0.5}}, tag="x")
        >>> r = evaluate(qrels, run, ["map", "num_q"])
        >>> format_trec_eval(r)
        ['num_q                 \\tall\\t1', 'map                   \\tall\\t1.0000']
    """
    return result.trec_lines(per_query=per_query, summary=summary)


def _table(results: list[Evaluation], per_query: bool, width: int) -> list[str]:
    """The default table: a row per run (or per run and query with ``-q``), fitted to ``width``.

    Summary: a row per run when the measures fit across, else a row per measure and a column per
    run. Per query: a row per run and query, the measure columns wrapped into blocks.
    """
    paths = [r.run for r in results]
    names = [o.name for o in results[0].outputs]
    runs, legend = run_column(paths)
    if not per_query:
        cells = [[fmt(r.printed[n]) for n in names] for r in results]
        wide = table(["run", *names], [[name, *c] for name, c in zip(runs, cells)])
        if fits(wide, width):
            return [*legend, ""] + wide if legend else wide
        return transposed(paths, names, cells, corner="measure", width=width)
    cols = [n for n in names if n in results[0].per_query]
    rows = []
    for name, r in zip(runs, results):
        values = {n: r.per_query[n].tolist() for n in cols}
        integer = {o.name: o.measure.family.integer for o in r.outputs}
        for i, qid in enumerate(r.qids):
            rows.append([name, qid] + [fmt(round(values[n][i]) if integer[n] else values[n][i]) for n in cols])
        rows.append([name, "all"] + [fmt(r.summary[n]) for n in cols])
    body = table(["run", "qid", *cols], rows, keys=2, width=width)
    return [*legend, ""] + body if legend else body


def _json(results: list[Evaluation], per_query: bool) -> str:
    runs = []
    for r in results:
        entry: dict = {"run": r.run, "runid": r.runid, "num_q": len(r.qids), "summary": r.printed}
        entry["stderr"] = json_safe(r.stderr())  # the standard error of each summary over queries
        if per_query:
            values = {n: v.tolist() for n, v in r.per_query.items()}
            entry["per_query"] = {q: {n: values[n][i] for n in values} for i, q in enumerate(r.qids)}
        runs.append(entry)
    return json.dumps({"measures": [o.name for o in results[0].outputs], "runs": runs}, indent=2)


def _csv(results: list[Evaluation], per_query: bool) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run", "qid", "measure", "value", "stderr"])  # stderr: of the summary, over queries
    for r in results:
        if per_query:
            values = {n: v.tolist() for n, v in r.per_query.items()}
            for i, q in enumerate(r.qids):
                writer.writerows([r.run, q, n, repr(values[n][i]), ""] for n in values)
        errors = r.stderr()
        writer.writerows([r.run, "all", o.name, r.printed[o.name], errors.get(o.name, "")] for o in r.outputs)
    return buffer.getvalue().rstrip("\n")
