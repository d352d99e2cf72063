"""The ``torch-rankeval`` command line.

Subcommands:

- ``evaluate QRELS RUN [RUN ...]``: trec_eval's evaluation (same semantics, same numbers); with
  ``--format trec`` the output is trec_eval's, line for line.
- ``compare QRELS RUN_A RUN_B [RUN ...]``: per-measure means, paired differences with bootstrap
  confidence intervals, paired t-test and randomization-test p-values with Holm or Bonferroni
  correction, and a table that marks significant wins.

Each subcommand is a :class:`Command` in :data:`COMMANDS` (its arguments and its function), or a
module named in :data:`SUBCOMMAND_MODULES` with an ``add_parser(subparsers)`` function; adding one
is adding an entry. :func:`add_input_arguments` and :func:`evaluate_inputs` give a new subcommand
the shared ``QRELS RUN... -m -l -c --device`` arguments and the evaluated runs.

Errors in the inputs (a malformed or empty file, a duplicate document, a run without any judged
query, an unknown measure) print one line on stderr and exit with status 1.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import importlib
import io
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from torch_rankeval.trec._text import TrecFormatError
from torch_rankeval.measures import Measure, parse_measures
from torch_rankeval.trec import TREC_EVAL_VERSIONS, Evaluation, Qrels, Run, evaluate, read_qrels, read_run, trec_measures

__all__ = [
    "Command",
    "COMMANDS",
    "SUBCOMMAND_MODULES",
    "CommandError",
    "add_input_arguments",
    "evaluate_inputs",
    "build_parser",
    "main",
    "format_trec_eval",
    "reuse_freed_memory",
]

PROG = "torch-rankeval"
EXIT_INPUT_ERROR = 1


class CommandError(Exception):
    """An error the user can fix; printed as one line on stderr, exit status 1."""


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, help, arguments and the function that runs it.

    Attributes:
        name: the subcommand (``torch-rankeval NAME``).
        help: one line for ``torch-rankeval --help``.
        add_arguments: adds the subcommand's arguments to its parser.
        run: runs it on the parsed arguments, writing to ``out``; returns the exit status.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, io.TextIOBase], int]


# ----------------------------------------------------------------------------- shared arguments
def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """QRELS, RUN..., -m/--measure, -l/--level, -c/--complete, --device, --progress: shared by subcommands.

    Example:
        >>> p = argparse.ArgumentParser()
        >>> add_input_arguments(p)
        >>> a = p.parse_args(["q.txt", "r1.txt", "r2.txt", "-m", "nDCG@10", "-l", "2"])
        >>> a.runs, a.measures, a.level, a.complete
        (['r1.txt', 'r2.txt'], ['nDCG@10'], 2, False)
    """
    parser.add_argument(
        "qrels", metavar="QRELS", help="qrels file: 'qid iter docno rel' lines (plain or gzip; - for stdin)"
    )
    parser.add_argument(
        "runs", metavar="RUN", nargs="+", help="run file(s): 'qid Q0 docno rank score tag' lines (plain or gzip)"
    )
    parser.add_argument(
        "-m",
        "--measure",
        dest="measures",
        action="append",
        metavar="MEASURE",
        help="a measure, repeatable: trec_eval names (map, ndcg_cut.10, P.5,10, recip_rank, Rprec, success.1), "
        "ir_measures names (nDCG@10, AP, P(rel=2)@5, RR), or the sets 'official' and 'all_trec'",
    )
    parser.add_argument(
        "-l",
        "--level",
        type=int,
        default=1,
        metavar="LEVEL",
        help="minimum grade of a relevant document for binary measures (trec_eval -l; default 1)",
    )
    parser.add_argument(
        "-c",
        "--complete",
        action="store_true",
        help="score queries of the qrels that a run does not answer as 0 (trec_eval -c)",
    )
    parser.add_argument(
        "-M",
        "--max-docs",
        type=int,
        default=None,
        metavar="N",
        help="evaluate only each query's first N ranked documents (trec_eval -M)",
    )
    parser.add_argument(
        "--trec-eval-version",
        choices=TREC_EVAL_VERSIONS,
        default="10.0",
        help="trec_eval version to reproduce: 10.0 (default) or 9.0.8 (pytrec_eval's: older recall-level rounding "
        "of iprec_at_recall and 11pt_avg)",
    )
    parser.add_argument("--device", default="cpu", help="where to compute: cpu (default) or cuda")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bars while reading files (default: for large files on a terminal)",
    )


def _measures(args: argparse.Namespace, default: Sequence[str]) -> list[Measure]:
    return trec_measures(args.measures or list(default), trec_eval_version=args.trec_eval_version)


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError:
        raise CommandError(f"--device {name!r} is not a device: use cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise CommandError("--device cuda: CUDA is not available on this machine; use --device cpu")
    return device


def _read_inputs(args: argparse.Namespace) -> tuple[Qrels, list[Run]]:
    if args.level < 1:
        raise CommandError(f"-l/--level must be 1 or more (the minimum grade of a relevant document), got {args.level}")
    qrels = read_qrels(args.qrels, progress=args.progress)
    return qrels, [read_run(path, progress=args.progress) for path in args.runs]


def evaluate_inputs(
    args: argparse.Namespace, measures: list[Measure], *, complete: bool
) -> tuple[Qrels, list[Evaluation]]:
    """Read the inputs of :func:`add_input_arguments` and evaluate every run (for subcommands).

    Example:
        >>> import os, tempfile
        >>> from torch_rankeval.trec import write_qrels, write_run
        >>> d = tempfile.mkdtemp()
        >>> write_qrels(os.path.join(d, "q"), {"q1": {"d1": 1}}); write_run(os.path.join(d, "r"), {"q1": {"d1": 1.0}})
        >>> p = argparse.ArgumentParser(); add_input_arguments(p)
        >>> args = p.parse_args([os.path.join(d, "q"), os.path.join(d, "r")])
        >>> _, results = evaluate_inputs(args, parse_measures(["map"]), complete=False)
        >>> results[0].summary
        {'map': 1.0}
    """
    device = _device(args.device)
    qrels, runs = _read_inputs(args)
    results = [
        evaluate(
            qrels, run, measures, relevance_level=args.level, complete=complete, max_docs=args.max_docs,
            trec_eval_version=args.trec_eval_version, device=device,
        )
        for run in runs
    ]
    return qrels, results


def _fmt(value: float | int | str, decimals: int = 4) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    return f"{value:.{decimals}f}"


# ----------------------------------------------------------------------------- evaluate
def format_trec_eval(result: Evaluation, *, per_query: bool = False, summary: bool = True) -> list[str]:
    """trec_eval's output lines for one run: ``measure<pad>\\tqid\\tvalue`` (``%-22s\\t%s\\t%6.4f``).

    Measures print in trec_eval's order; with ``per_query`` every query's values come first,
    query by query, then the summary (``all``) lines.

    Example:
        >>> from torch_rankeval.trec import Qrels, Run, evaluate
        >>> qrels, run = Qrels.from_dict({"q1": {"d1": 1}}), Run.from_dict({"q1": {"d1": 0.5}}, tag="x")
        >>> r = evaluate(qrels, run, ["map", "num_q"])
        >>> format_trec_eval(r)
        ['num_q                 \\tall\\t1', 'map                   \\tall\\t1.0000']
    """
    return result.trec_lines(per_query=per_query, summary=summary)


def _table(header: list[str], rows: list[list[str]], right: int = 1) -> list[str]:
    """Aligned text columns; columns from index ``right`` on are right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < right else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return [line(header), *(line(r) for r in rows)]


def _evaluate_table(results: list[Evaluation], per_query: bool) -> list[str]:
    names = [o.name for o in results[0].outputs]
    if not per_query:
        rows = [[r.run] + [_fmt(r.summary[n]) for n in names] for r in results]
        return _table(["run", *names], rows)
    cols = [n for n in names if n in results[0].per_query]
    rows = []
    for r in results:
        values = {n: r.per_query[n].tolist() for n in cols}
        integer = {o.name: o.measure.family.integer for o in r.outputs}
        for i, qid in enumerate(r.qids):
            rows.append([r.run, qid] + [_fmt(int(round(values[n][i])) if integer[n] else values[n][i]) for n in cols])
        rows.append([r.run, "all"] + [_fmt(r.summary[n]) for n in cols])
    return _table(["run", "qid", *cols], rows, right=2)


def _evaluate_json(results: list[Evaluation], per_query: bool) -> str:
    runs = []
    for r in results:
        entry: dict = {"run": r.run, "runid": r.runid, "num_q": len(r.qids), "summary": r.summary}
        if per_query:
            values = {n: v.tolist() for n, v in r.per_query.items()}
            entry["per_query"] = {q: {n: values[n][i] for n in values} for i, q in enumerate(r.qids)}
        runs.append(entry)
    return json.dumps({"measures": [o.name for o in results[0].outputs], "runs": runs}, indent=2)


def _evaluate_csv(results: list[Evaluation], per_query: bool) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run", "qid", "measure", "value"])
    for r in results:
        if per_query:
            values = {n: v.tolist() for n, v in r.per_query.items()}
            for i, q in enumerate(r.qids):
                writer.writerows([r.run, q, n, repr(values[n][i])] for n in values)
        writer.writerows([r.run, "all", o.name, r.summary[o.name]] for o in r.outputs)
    return buffer.getvalue().rstrip("\n")


def _add_evaluate(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument("-q", "--per-query", action="store_true", help="also print each query's values (trec_eval -q)")
    parser.add_argument(
        "-n", "--no-summary", action="store_true", help="omit the summary over all queries (trec_eval -n)"
    )
    parser.add_argument(
        "--format",
        choices=("table", "trec", "json", "csv"),
        default="table",
        help="table (default), trec (trec_eval's output, line for line), json or csv",
    )


def _run_evaluate(args: argparse.Namespace, out: io.TextIOBase) -> int:
    measures = _measures(args, ["official"])
    _, results = evaluate_inputs(args, measures, complete=args.complete)
    if args.format == "trec":
        for r in results:
            lines = format_trec_eval(r, per_query=args.per_query, summary=not args.no_summary)
            if lines:
                out.write("\n".join(lines) + "\n")
        return 0
    if args.no_summary and args.format != "trec":
        raise CommandError("-n/--no-summary applies to --format trec only")
    text = {
        "table": lambda: "\n".join(_evaluate_table(results, args.per_query)),
        "json": lambda: _evaluate_json(results, args.per_query),
        "csv": lambda: _evaluate_csv(results, args.per_query),
    }[args.format]()
    out.write(text + "\n")
    return 0


# ----------------------------------------------------------------------------- compare
def _labels(n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [letters[i] if n <= 26 else f"r{i + 1}" for i in range(n)]


def _add_compare(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument(
        "--test",
        choices=("randomization", "t"),
        default="randomization",
        help="the test that decides significance marks: randomization (default) or t (paired t-test)",
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
        "--resamples", type=int, default=10_000, help="bootstrap and randomization resamples (default 10000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")


def _run_compare(args: argparse.Namespace, out: io.TextIOBase) -> int:
    from torch_rankeval import stats

    if len(args.runs) < 2:
        raise CommandError("compare needs at least two runs")
    if not 0 < args.alpha < 1:
        raise CommandError(f"--alpha must be in (0, 1), got {args.alpha}")
    measures = _measures(args, ["ndcg_cut.10", "map"])
    _, results = evaluate_inputs(args, measures, complete=True)
    # Queries: every judged query (-c), or those answered by at least one run (missing ones score 0).
    answered = torch.stack([r.retrieved for r in results]).any(0)
    keep = torch.ones_like(answered) if args.complete else answered
    names = [o.name for o in results[0].outputs if o.name in results[0].per_query]
    skipped = [
        o.name for o in results[0].outputs if o.name not in results[0].per_query and o.measure.per_query is False
    ]
    if not names:
        raise CommandError("no measure with per-query values to compare (runid, num_q and gm_map have none)")
    n_missing = [int((keep & ~r.retrieved).sum()) for r in results]
    for r, missing in zip(results, n_missing):
        if missing:
            print(
                f"{PROG}: note: {r.run} does not answer {missing} of the compared queries; they score 0",
                file=sys.stderr,
            )
    if skipped:
        print(f"{PROG}: note: {', '.join(skipped)} has no per-query values and is not compared", file=sys.stderr)

    labels = _labels(len(results))
    values = torch.stack([torch.stack([r.per_query[n][keep] for n in names], -1) for r in results])  # (R, Q, M)
    n_queries = values.shape[1]
    if n_queries < 2:
        raise CommandError(f"compare needs at least 2 queries, found {n_queries}")
    means = values.mean(1)  # (R, M)
    pairs = [(i, j) for i in range(len(results)) for j in range(i + 1, len(results))]
    x = torch.stack([values[j] for _, j in pairs], -1)  # (Q, M, P): second run of each pair
    y = torch.stack([values[i] for i, _ in pairs], -1)
    low, high = stats.bootstrap_ci(x, y, confidence=args.confidence, n_resamples=args.resamples, seed=args.seed)
    randomized = stats.randomization_test(x, y, n_resamples=args.resamples, seed=args.seed)
    try:
        t = stats.paired_t_test(x, y)
        t_stat, t_p = t.statistic, t.pvalue
    except ImportError:
        if args.test == "t":
            raise CommandError("--test t needs scipy: pip install 'torch-rankeval[cli]'") from None
        print(
            f"{PROG}: note: scipy is not installed, the paired t-test is skipped (pip install 'torch-rankeval[cli]')",
            file=sys.stderr,
        )
        t_stat = t_p = torch.full_like(randomized.pvalue, math.nan)
    deciding = t_p if args.test == "t" else randomized.pvalue
    adjusted = stats.adjust_pvalues(deciding, args.correction)  # over pairs, per measure

    comparisons = []
    wins: dict[tuple[int, int], list[str]] = {}
    for m, name in enumerate(names):
        for p, (i, j) in enumerate(pairs):
            diff = float(means[j, m] - means[i, m])
            significant = bool(adjusted[m, p] < args.alpha) and diff != 0
            winner = None
            if significant:
                winner = j if diff > 0 else i
                wins.setdefault((winner, m), []).append(labels[i if winner == j else j])
            comparisons.append(
                {
                    "measure": name,
                    "run_a": results[i].run,
                    "run_b": results[j].run,
                    "label_a": labels[i],
                    "label_b": labels[j],
                    "mean_a": float(means[i, m]),
                    "mean_b": float(means[j, m]),
                    "difference": diff,
                    "ci_low": float(low[m, p]),
                    "ci_high": float(high[m, p]),
                    "t_statistic": _finite(t_stat[m, p]),
                    "t_pvalue": _finite(t_p[m, p]),
                    "randomization_pvalue": float(randomized.pvalue[m, p]),
                    "pvalue_adjusted": float(adjusted[m, p]),
                    "significant": significant,
                    "winner": None if winner is None else results[winner].run,
                }
            )
    settings = {
        "queries": n_queries,
        "test": args.test,
        "correction": args.correction,
        "alpha": args.alpha,
        "confidence": args.confidence,
        "resamples": args.resamples,
        "seed": args.seed,
    }
    if args.format == "json":
        runs = [
            {
                "label": labels[k],
                "run": r.run,
                "runid": r.runid,
                "means": {n: float(means[k, m]) for m, n in enumerate(names)},
            }
            for k, r in enumerate(results)
        ]
        out.write(
            json.dumps({**settings, "measures": names, "runs": runs, "comparisons": comparisons}, indent=2) + "\n"
        )
        return 0

    test_text = "randomization test" if args.test == "randomization" else "paired t-test"
    lines = [
        f"{n_queries} queries; {test_text}, {args.correction} correction over {len(pairs)} pair(s) per measure, "
        f"alpha {args.alpha}",
        "",
    ]
    rows = []
    for k, r in enumerate(results):
        cells = []
        for m in range(len(names)):
            beaten = "".join(sorted(wins.get((k, m), [])))
            cells.append(f"{float(means[k, m]):.4f}" + (f"^{beaten}" if beaten else ""))
        rows.append([labels[k], r.run, *cells])
    lines += _table(["", "run", *names], rows, right=2)
    lines += ["", "x^ab: significantly better than runs a and b", ""]
    ci = f"{round(args.confidence * 100, 2):g}% CI"
    detail = []
    for c in comparisons:
        detail.append(
            [
                c["measure"],
                f"{c['label_b']} - {c['label_a']}",
                f"{c['difference']:+.4f}",
                f"[{c['ci_low']:+.4f}, {c['ci_high']:+.4f}]",
                _p(c["t_pvalue"]),
                _p(c["randomization_pvalue"]),
                _p(c["pvalue_adjusted"]),
                "*" if c["significant"] else "",
            ]
        )
    lines += _table(["measure", "pair", "diff", ci, "t-test p", "rand. p", "adj. p", "sig"], detail, right=2)
    out.write("\n".join(lines) + "\n")
    return 0


def _finite(value: torch.Tensor) -> float | None:
    """A JSON-safe number: NaN (a skipped test) becomes None (null)."""
    v = float(value)
    return None if math.isnan(v) else v


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


# ----------------------------------------------------------------------------- entry point
COMMANDS: list[Command] = [
    Command(
        "evaluate", "evaluate runs against qrels (trec_eval's measures and semantics)", _add_evaluate, _run_evaluate
    ),
    Command(
        "compare",
        "compare runs: means, differences, confidence intervals, significance tests",
        _add_compare,
        _run_compare,
    ),
]

# Subcommands that live in their own modules: each module has ``add_parser(subparsers)``, which adds
# its parser and sets ``func`` (``func(args) -> exit status``). Modules not present are skipped.
SUBCOMMAND_MODULES: list[str] = ["torch_rankeval.cli.profile"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one subparser per entry of :data:`COMMANDS`.

    Example:
        >>> args = build_parser().parse_args(["evaluate", "qrels.txt", "run.txt", "-m", "map", "-q"])
        >>> args.command, args.measures, args.per_query
        ('evaluate', ['map'], True)
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Ranking evaluation with trec_eval's semantics, on CPU or GPU, and significance tests.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(p)
        p.set_defaults(_run=command.run)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.add_parser(sub)
    return parser


def reuse_freed_memory() -> bool:
    """Ask glibc's allocator to keep freed memory for reuse rather than return it to the system.

    Reading and evaluating a large run allocates many large temporary arrays (numpy per block of
    the file, torch per slice of queries). By default glibc maps each one fresh and unmaps it when
    freed, so every one of them is page-faulted in again, which can cost more than the arithmetic
    (on some virtual machines, half of the run time). The command line calls this once at start;
    it affects only its own process. Returns whether the allocator accepted the settings (False
    on other platforms or C libraries, where nothing changes).

    Example:
        >>> isinstance(reuse_freed_memory(), bool)
        True
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_mmap_threshold, 256 << 20)) and bool(mallopt(m_trim_threshold, 1 << 30))


def main(argv: Sequence[str] | None = None, out: io.TextIOBase | None = None) -> int:
    """Run the command line; returns the exit status (0, 1 for input errors, 2 for usage errors).

    Example:
        >>> import os, tempfile
        >>> from torch_rankeval.trec import write_qrels, write_run
        >>> d = tempfile.mkdtemp()
        >>> write_qrels(os.path.join(d, "qrels"), {"q1": {"d1": 1, "d2": 1}})
        >>> write_run(os.path.join(d, "run"), {"q1": {"d1": 0.3, "d3": 0.2}}, tag="demo")
        >>> out = io.StringIO()
        >>> files = [os.path.join(d, "qrels"), os.path.join(d, "run")]
        >>> main(["evaluate", *files, "-m", "map", "-m", "P.2", "--format", "trec"], out)
        0
        >>> out.getvalue().split()
        ['map', 'all', '0.5000', 'P_2', 'all', '0.5000']
    """
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    reuse_freed_memory()
    if getattr(args, "func", None) is not None:  # a subcommand from SUBCOMMAND_MODULES
        return args.func(args)
    try:
        return args._run(args, out)
    except (CommandError, TrecFormatError, ValueError, OSError, ImportError) as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
