"""The ``torch-rankeval`` command line: one module per subcommand.

Subcommands, in :data:`SUBCOMMANDS`:

- ``evaluate QRELS RUN [RUN ...]`` (:mod:`~torch_rankeval.cli.evaluate`): trec_eval's evaluation,
  same semantics, same numbers; with ``--format trec`` the output is trec_eval's, line for line.
- ``compare QRELS RUN_A RUN_B [RUN ...]`` (:mod:`~torch_rankeval.cli.compare`): means, paired
  differences with bootstrap confidence intervals, t-test and randomization-test p-values with
  Holm or Bonferroni correction, and a table that marks significant wins.
- ``profile QRELS RUN`` (:mod:`~torch_rankeval.cli.profile`): quality by rank position,
  relevance inversions, worst queries, figures.
- ``measures [PATTERN]`` (:mod:`~torch_rankeval.cli.measures`): the measure names ``-m`` accepts,
  one per line.

A subcommand is a module with ``NAME``, ``HELP`` (its line in ``torch-rankeval --help``),
``add_arguments(parser)`` and ``run(args, out) -> exit status`` (optionally ``DESCRIPTION``);
adding one is adding its module to :data:`SUBCOMMANDS`. Shared arguments and helpers live in
:mod:`torch_rankeval.cli._common`. The modules import nothing heavy at import time (torch, scipy
and matplotlib are imported inside ``run``), so ``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TextIO

from torch_rankeval import __version__
from torch_rankeval.cli import compare, evaluate, measures, profile
from torch_rankeval.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    PROG,
    CommandError,
    one_line,
    take_notes,
)
from torch_rankeval.cli.evaluate import format_trec_eval

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILURE",
    "SUBCOMMANDS",
    "CommandError",
    "build_parser",
    "format_trec_eval",
    "main",
    "reuse_freed_memory",
]

SUBCOMMANDS: tuple[ModuleType, ...] = (evaluate, compare, profile, measures)
"""The subcommand modules, in the order ``--help`` lists them."""

TRACEBACK_VARIABLE = "TORCH_RANKEVAL_TRACEBACK"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (and exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser(subcommands: Sequence[ModuleType] | None = None) -> argparse.ArgumentParser:
    """The argument parser: one subparser per module of ``subcommands`` (default :data:`SUBCOMMANDS`);
    the parsed arguments hold the chosen module as ``_subcommand``.

    Example:
        >>> args = build_parser().parse_args(["evaluate", "qrels.txt", "run.txt", "-m", "map", "-q"])
        >>> args.command, args.measures, args.per_query, args._subcommand is evaluate
        ('evaluate', ['map'], True, True)
    """
    parser = _Parser(
        prog=PROG,
        description="Ranking evaluation with trec_eval's semantics, on CPU or GPU, significance tests and diagnostics.",
        epilog="Exit status: 0 success, 2 bad input or usage, 1 any other failure, 130 interrupted, "
        "141 the reader of the output left (as for SIGPIPE).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS if subcommands is None else subcommands:
        p = sub.add_parser(module.NAME, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(p)
        p.set_defaults(_subcommand=module)  # not `run`: a subcommand may have an argument named run
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


def _failure(exc: BaseException) -> tuple[int, str]:
    """The exit status and the one-line message of an exception raised by a subcommand."""
    text = one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, (CommandError, ValueError, OSError, ImportError)):
        return EXIT_BAD_INPUT, f"error: {text}"
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        return EXIT_FAILURE, f"error: out of memory ({text}); try smaller inputs, --device cpu, or fewer resamples"
    return EXIT_FAILURE, (
        f"internal error: {type(exc).__name__}: {text} (set {TRACEBACK_VARIABLE}=1 for the traceback, and please report it)"
    )


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``), writing to ``out`` (default stdout).

    Returns the exit status, the same for every subcommand:

    - 0: success (also ``--help`` and ``--version``);
    - 2: bad input or usage: an unknown option or value (argparse), a file that is missing,
      unreadable, malformed or empty, a run without any judged query, an unknown measure, an
      option out of range, an output path that cannot be written, a missing optional dependency
      that an option needs (scipy for ``--test t``, matplotlib for ``--plot``);
    - 1: any other failure: out of memory, or an internal error (a bug: please report it);
    - 130: interrupted (Ctrl-C);
    - 141: the reader of the output left (``torch-rankeval evaluate ... | head -0``): the command
      ends quietly, with the status a shell reports for coreutils, which SIGPIPE kills (128 + 13).

    Every failure prints exactly one line on stderr, ``torch-rankeval COMMAND: error: ...``, never a
    traceback; set the environment variable ``TORCH_RANKEVAL_TRACEBACK=1`` to let an unexpected
    error raise with its traceback instead. After a success, notes (e.g. a skipped test, a run
    that misses queries) follow on stderr, one line each, starting ``torch-rankeval: note:``.

    Example:
        >>> import io, os, tempfile
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
        >>> main(["evaluate", *files, "-m", "nope"], out)  # stderr: torch-rankeval evaluate: error: ...
        2
    """
    out = out or sys.stdout
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: argparse has written its message
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    reuse_freed_memory()
    take_notes()
    try:
        status = args._subcommand.run(args, out)
        if out is sys.stdout:
            out.flush()  # a reader that left shows here, not in Python's flush at exit
    except KeyboardInterrupt:
        take_notes()
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `torch-rankeval evaluate ... | head`: the reader left, nothing to say
        take_notes()
        if out is sys.stdout:  # point stdout at /dev/null so that Python's exit flush does not complain
            with contextlib.suppress(OSError, ValueError, AttributeError):  # no file descriptor (e.g. a StringIO)
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
            raise
        take_notes()  # a failure is one line: the notes that led to it go unsaid
        status, text = _failure(exc)
        print(f"{PROG} {args.command}: {text}", file=sys.stderr)
        return status
    for line in take_notes():
        print(line, file=sys.stderr)
    return status
