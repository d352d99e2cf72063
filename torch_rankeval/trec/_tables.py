"""Plain-Python table writers shared by the result types (:class:`~torch_rankeval.trec.Evaluation`,
:class:`~torch_rankeval.stats.RunComparison`): CSV text, LaTeX escaping, and pandas on demand."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["csv_text", "latex_escape", "latex_number", "latex_table", "require_pandas"]


def require_pandas() -> Any:
    """The ``pandas`` module, or an ImportError that says how to install it.

    Example:
        >>> require_pandas().__name__  # doctest: +SKIP
        'pandas'
    """
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "to_pandas() needs pandas, an optional extra: pip install torch-rankeval[pandas] "
            "(to_dict(), to_csv() and to_latex() need nothing more)"
        ) from None
    return pandas


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]], path: str | os.PathLike | None = None) -> str:
    """CSV text (``\\n`` line ends, floats as ``repr``: they read back exactly), written to ``path`` too when given.

    Example:
        >>> print(csv_text(["a", "b"], [["x,y", 0.1], ["z", None]]), end="")
        a,b
        "x,y",0.1
        z,
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([("" if v is None else repr(v) if isinstance(v, float) else v) for v in row] for row in rows)
    text = buffer.getvalue()
    if path is not None:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return text


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped.

    Example:
        >>> latex_escape("ndcg_cut_10 & 50%")
        'ndcg\\\\_cut\\\\_10 \\\\& 50\\\\%'
    """
    return "".join(_LATEX.get(c, c) for c in text)


def latex_number(value: float | int, decimals: int) -> str:
    """A cell: integers as they are, floats with ``decimals`` digits, NaN as ``--``.

    Example:
        >>> latex_number(0.12345, 3), latex_number(7, 3), latex_number(float("nan"), 3)
        ('0.123', '7', '--')
    """
    if isinstance(value, int):
        return str(value)
    return "--" if math.isnan(value) else f"{value:.{decimals}f}"


def latex_table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], caption: str | None, label: str | None, note: str = ""
) -> str:
    r"""A booktabs table of runs: a ``Run`` column, then ``columns`` (escaped); ``rows`` hold LaTeX
    cells, ``note`` (when given) is a line after the tabular.

    Example:
        >>> print(latex_table(["P_1"], [["bm25", "0.5"]], None, None).splitlines()[4:7])
        ['Run & P\\_1 \\\\', '\\midrule', 'bm25 & 0.5 \\\\']
    """
    lines = [r"\begin{table}", r"\centering"]
    if caption is not None:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label is not None:
        lines.append(rf"\label{{{label}}}")
    lines += [r"\begin{tabular}{l" + "r" * len(columns) + "}", r"\toprule"]
    lines += [" & ".join(["Run", *map(latex_escape, columns)]) + r" \\", r"\midrule"]
    lines += [" & ".join(row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", *([note] if note else []), r"\end{table}"]
    return "\n".join(lines)
