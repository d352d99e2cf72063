"""A core a newcomer can read (issue 26, item 4): no function of ``measures/`` or ``ranking/`` over 60 lines of code.

Counted from the ``def`` line to the function's last line, its docstring left out (a long docstring
explains, it does not add steps). The plan's routes are small objects (``measures/plan.py``:
``_DenseRoute``, ``_TopkRoute``), not one long method with a nested closure.
"""

from __future__ import annotations

import ast

from tests.conftest import REPO

LIMIT = 60
CHECKED = ("torch_rankeval/measures", "torch_rankeval/ranking")


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's lines, its docstring left out."""
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if ast.get_docstring(node, clean=False) is not None:
        lines -= first.end_lineno - first.lineno + 1
    return lines


def _long_functions(folder: str) -> list[str]:
    found = []
    for path in sorted((REPO / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = _code_lines(node)
            if lines > LIMIT:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_long_function_in_the_core() -> None:
    long = [entry for folder in CHECKED for entry in _long_functions(folder)]
    assert not long, f"functions over {LIMIT} lines (split them into named steps): {long}"


def test_the_rule_counts_code_not_docstrings() -> None:
    source = "def f():\n    '''doc\n\n    more doc'''\n" + "    x = 1\n" * 3
    assert _code_lines(ast.parse(source).body[0]) == 4  # the def line and three statements
