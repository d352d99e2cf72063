"""What the subcommands share: the input arguments, reading and evaluating the files, errors, tables.

Importing this module is cheap (no torch): the heavy imports sit inside the functions that need
them, so that ``torch-rankeval --help`` answers at once.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch_rankeval._choices import TREC_EVAL_VERSIONS

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from torch_rankeval.measures import Measure
    from torch_rankeval.trec import Evaluation, Qrels
    from torch_rankeval.trec.diversity import SubtopicQrels

PROG = "torch-rankeval"
INT64_MAX = 2**63 - 1  # the largest grade (and relevance level) the readers hold

EXIT_FAILURE = 1  # a failure that is not the input's: out of memory, an internal error
EXIT_BAD_INPUT = 2  # bad input or usage: a file, an option, a missing optional dependency
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for coreutils whose reader left (`| head`)


class CommandError(Exception):
    """An error the user can fix; printed as one line on stderr, exit status :data:`EXIT_BAD_INPUT` (2)."""


_notes: list[str] = []


def note(text: str) -> None:
    """Say something on stderr (``torch-rankeval: note: ...``) once the command has succeeded.

    Notes are held until the command ends: a failure prints its one error line and nothing else.

    Example:
        >>> note("scipy is not installed, the t-test is skipped"); take_notes()
        ['torch-rankeval: note: scipy is not installed, the t-test is skipped']
    """
    _notes.append(f"{PROG}: note: {one_line(text)}")


def take_notes() -> list[str]:
    """The notes since the last call (and forget them)."""
    taken = _notes[:]
    _notes.clear()
    return taken


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
        "qrels",
        metavar="QRELS",
        help="qrels file: 'qid iter docno rel' lines (plain or gzip, a file or a pipe; - for stdin)",
    )
    parser.add_argument(
        "runs",
        metavar="RUN",
        nargs="+",
        help="run file(s): 'qid Q0 docno rank score tag' lines (plain or gzip, a file or a pipe; - for stdin)",
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
    parser.add_argument("--device", default="cpu", help="where to compute: cpu (default), cuda or cuda:N")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bars while reading files (default: for large files on a terminal)",
    )


def device(name: str) -> torch.device:
    """The ``--device`` as a ``torch.device`` that can hold data here, or a :class:`CommandError`.

    Example:
        >>> device("cpu")
        device(type='cpu')
        >>> device("meta")
        Traceback (most recent call last):
        ...
        torch_rankeval.cli._common.CommandError: --device meta holds no data (tensors without values): use cpu or cuda
    """
    import torch

    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise CommandError(f"--device {name!r} is not a device: use cpu, cuda or cuda:N") from None
    if dev.type == "meta":
        raise CommandError(f"--device {name} holds no data (tensors without values): use cpu or cuda")
    if dev.type == "cpu":
        return dev
    backend = getattr(torch, dev.type, None)
    available = getattr(backend, "is_available", None)
    if available is None or not available():
        raise CommandError(f"--device {name}: {dev.type.upper()} is not available on this machine; use --device cpu")
    count = getattr(backend, "device_count", None)
    if dev.index is not None and count is not None and dev.index >= count():
        raise CommandError(f"--device {name}: this machine has {count()} {dev.type} device(s), numbered from 0")
    return dev


def measures(args: argparse.Namespace, default: Sequence[str]) -> list[Measure]:
    """The ``-m`` measures (or ``default`` when none is given), read as trec_eval reads them
    (:func:`torch_rankeval.trec.trec_measures`)."""
    from torch_rankeval.trec import trec_measures

    return trec_measures(args.measures or list(default), trec_eval_version=args.trec_eval_version)


def evaluate_inputs(
    args: argparse.Namespace,
    measures: list[Measure],
    *,
    complete: bool,
    convention: str | None = None,
    judged_only: bool = False,
) -> tuple[Qrels | SubtopicQrels, list[Evaluation]]:
    """Read the inputs of :func:`add_input_arguments` and evaluate every run (for subcommands), under
    ``convention`` and ``judged_only`` (:func:`torch_rankeval.trec.evaluate`'s).

    Example:
        >>> import os, tempfile
        >>> from torch_rankeval.measures import parse_measures
        >>> from torch_rankeval.trec import write_qrels, write_run
        >>> d = tempfile.mkdtemp()
        >>> write_qrels(os.path.join(d, "q"), {"q1": {"d1": 1}}); write_run(os.path.join(d, "r"), {"q1": {"d1": 1.0}})
        >>> p = argparse.ArgumentParser(); add_input_arguments(p)
        >>> args = p.parse_args([os.path.join(d, "q"), os.path.join(d, "r")])
        >>> _, results = evaluate_inputs(args, parse_measures(["map"]), complete=False)
        >>> results[0].summary
        {'map': 1.0}
    """
    from torch_rankeval.trec import evaluate, read_qrels, read_run

    dev = device(args.device)
    if args.level < 1:
        raise CommandError(f"-l/--level must be 1 or more (the minimum grade of a relevant document), got {args.level}")
    if args.level > INT64_MAX:
        raise CommandError(f"-l/--level must be at most {INT64_MAX} (grades are 64-bit integers), got {args.level}")
    if args.max_docs is not None and args.max_docs < 1:
        raise CommandError(f"-M/--max-docs must be 1 or more (documents kept per query), got {args.max_docs}")
    if any(m.family.subtopics for m in measures):  # intent-aware measures: TREC diversity qrels
        from torch_rankeval.trec.diversity import read_subtopic_qrels

        qrels = read_subtopic_qrels(args.qrels, progress=args.progress)
    else:
        qrels = _read(read_qrels, args.qrels, args.progress, convention)
    runs = [_read(read_run, path, args.progress, convention) for path in args.runs]
    results = [
        evaluate(
            qrels,
            run,
            measures,
            relevance_level=args.level,
            complete=complete,
            max_docs=args.max_docs,
            trec_eval_version=args.trec_eval_version,
            device=dev,
            convention=convention,
            judged_only=judged_only,
        )
        for run in runs
    ]
    return qrels, results


def _read(reader: Any, path: str, progress: bool | None, convention: str | None) -> Any:
    """``reader(path)``; an empty file (no content line) stays its path under a preset that scores empty
    inputs (ir_measures'), for :func:`torch_rankeval.trec.evaluate` to read as such, and is an error otherwise
    (trec_eval refuses it)."""
    from torch_rankeval.trec._text import EmptyTrecFile
    from torch_rankeval.trec.peers import TREC_PRESETS

    try:
        return reader(path, progress=progress)
    except EmptyTrecFile:
        if convention is None or not TREC_PRESETS[convention].empty_scored:
            raise
        return path


# ----------------------------------------------------------------------------- formatting
def fmt(value: float | str, decimals: int = 4) -> str:
    """A table cell: strings as they are, integers as integers, floats with ``decimals`` digits.

    Example:
        >>> fmt(0.25), fmt(3), fmt("STANDARD")
        ('0.2500', '3', 'STANDARD')
    """
    if isinstance(value, (str, int)):
        return str(value)
    return f"{value:.{decimals}f}"


def json_safe(x: Any) -> Any:
    """NaN and infinities (in nested dicts, lists, tuples) become None: strict JSON.

    Example:
        >>> json_safe({"a": [1.0, float("nan")], "b": float("inf")})
        {'a': [1.0, None], 'b': None}
    """
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def terminal_width() -> int:
    """The width tables must fit: ``$COLUMNS``, else the terminal's, else 80 (output to a pipe or file)."""
    return max(20, shutil.get_terminal_size((80, 24)).columns)


def labels(n: int) -> list[str]:
    """Short labels of ``n`` runs: ``a``..``z``, or ``r1``..``rN`` beyond 26.

    Example:
        >>> labels(3), labels(27)[-2:]
        (['a', 'b', 'c'], ['r26', 'r27'])
    """
    return [chr(ord("a") + i) for i in range(n)] if n <= 26 else [f"r{i + 1}" for i in range(n)]


def run_names(paths: Sequence[str]) -> list[str]:
    """How tables name runs: the files' base names when those are distinct, else the paths as given.

    Example:
        >>> run_names(["/data/trec/bm25.txt", "/data/trec/dense.txt"])
        ['bm25.txt', 'dense.txt']
        >>> run_names(["a/run.txt", "b/run.txt"])
        ['a/run.txt', 'b/run.txt']
    """
    base = [os.path.basename(p.rstrip("/\\")) or p for p in paths]
    return base if len(set(base)) == len(base) else list(paths)


def run_column(paths: Sequence[str], limit: int = 20) -> tuple[list[str], list[str]]:
    """A table's run cells and legend: short names (:func:`run_names`) as they are; longer ones as labels
    ``a``, ``b``... with a legend (``a: name``).

    Example:
        >>> run_column(["x/bm25.txt", "x/dense.txt"])
        (['bm25.txt', 'dense.txt'], [])
        >>> run_column(["runs/a_very_long_run_file_name.txt"])
        (['a'], ['a: a_very_long_run_file_name.txt'])
    """
    names = run_names(paths)
    if max(len(n) for n in names) <= limit:
        return names, []
    tags = labels(len(paths))
    return tags, [f"{t}: {n}" for t, n in zip(tags, names)]


def table(header: list[str], rows: list[list[str]], *, keys: int = 1, width: int | None = None) -> list[str]:
    """Aligned text columns: the first ``keys`` columns left-aligned, the others right-aligned.

    With ``width``, a table wider than it is cut into blocks of value columns that fit, each block
    repeating the key columns, separated by a blank line (a block has at least one value column).

    Example:
        >>> print("\\n".join(table(["run", "map", "P_5"], [["bm25", "0.2500", "0.4000"]])))
        run      map     P_5
        bm25  0.2500  0.4000
        >>> print("\\n".join(table(["run", "map", "P_5"], [["bm25", "0.2500", "0.4000"]], width=12)))
        run      map
        bm25  0.2500
        <BLANKLINE>
        run      P_5
        bm25  0.4000
    """
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def render(columns: list[int]) -> list[str]:
        def line(r: list[str]) -> str:
            cells = (r[i].ljust(widths[i]) if i < keys else r[i].rjust(widths[i]) for i in columns)
            return "  ".join(cells).rstrip()

        return [line(header), *(line(r) for r in rows)]

    key_columns = list(range(min(keys, len(header))))
    values = list(range(len(key_columns), len(header)))
    if width is None or not values:
        return render(key_columns + values)
    blocks: list[list[int]] = [[]]
    used = sum(widths[i] + 2 for i in key_columns) - 2
    for i in values:
        if blocks[-1] and used + 2 + widths[i] > width:
            blocks.append([])
            used = sum(widths[k] + 2 for k in key_columns) - 2
        blocks[-1].append(i)
        used += 2 + widths[i]
    lines = render(key_columns + blocks[0])
    for block in blocks[1:]:
        lines += ["", *render(key_columns + block)]
    return lines


def fits(lines: list[str], width: int) -> bool:
    """Whether every line is at most ``width`` characters."""
    return all(len(line) <= width for line in lines)


def transposed(paths: Sequence[str], names: list[str], cells: list[list[str]], *, corner: str, width: int) -> list[str]:
    """A table with one row per name and one column per run (labels ``a``, ``b``... and a legend when
    the run names are long), wrapped to ``width``; ``cells[run][name]``.

    Example:
        >>> print("\\n".join(transposed(["x/bm25", "x/dense"], ["map", "P_5"], [["0.1", "0.2"], ["0.3", "0.4"]],
        ...                             corner="measure", width=80)))
        measure  bm25  dense
        map       0.1    0.3
        P_5       0.2    0.4
    """
    heads, legend = run_column(paths, limit=16)
    rows = [[name, *(run_cells[k] for run_cells in cells)] for k, name in enumerate(names)]
    body = table([corner, *heads], rows, keys=1, width=width)
    return [*legend, ""] + body if legend else body


def one_line(text: str) -> str:
    """``text`` on one line (newlines and the blanks around them become one space).

    Example:
        >>> one_line("unknown measure 'x'.\\n  Did you mean 'map'?")
        "unknown measure 'x'. Did you mean 'map'?"
    """
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())
