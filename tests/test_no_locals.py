"""No ``locals()`` argument bags (issue 26): a function that hands its ``locals()`` (or ``vars()``, the
same dict) on passes every argument it has, under whatever name it has today, so a renamed parameter
silently becomes another keyword downstream. Every argument is passed by name instead, and a rename
breaks loudly. The package's source is scanned (``ast``) for a call to ``locals()`` or ``vars()`` with
no argument."""

from __future__ import annotations

import ast

from tests.conftest import REPO

PACKAGE = REPO / "torch_rankeval"


def _bags(source: str) -> list[tuple[int, str]]:
    """The ``(line, call)`` of each ``locals()`` / argument-less ``vars()`` call in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "locals" or (node.func.id == "vars" and not node.args and not node.keywords):
                found.append((node.lineno, f"{node.func.id}()"))
    return sorted(found)


def test_the_scan_finds_a_bag() -> None:
    source = (
        "def f(a, b=1):\n"
        "    g(**locals())\n"
        "    settings = {k: v for k, v in vars().items()}\n"
        "    return vars(a), h(a=a, b=b)\n"
    )
    assert _bags(source) == [(2, "locals()"), (3, "vars()")]


def test_no_locals_argument_bags() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50, f"expected the package's modules under {PACKAGE}, found {len(modules)}"
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {call}"
        for path in modules
        for line, call in _bags(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "locals()/vars() argument bags (pass each argument by name, so that renaming one breaks loudly):\n"
        + "\n".join(offenders)
    )
