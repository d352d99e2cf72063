"""The layers of DESIGN.md, checked on the source: every ``torch_rankeval`` module imports only modules of its
own layer or below, at module level or inside functions (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

# top-level module -> layer; a module may import its own layer and the ones below
LAYERS = {
    "torch_rankeval._choices": 0,  # plain names, no imports
    "torch_rankeval.conventions": 0,
    "torch_rankeval.ranking": 1,  # the input stage and the ranked views
    "torch_rankeval.kernels": 2,  # one module per measure family
    "torch_rankeval.measures": 3,  # parameters, registry, grammar, the plan
    "torch_rankeval.functional": 4,  # the public functions
    "torch_rankeval.metrics": 5,
    "torch_rankeval.propensity": 5,
    "torch_rankeval.losses": 5,  # ranking losses on the public functions (functional's ideal DCG)
    "torch_rankeval.compat": 5,  # peers' classes (torchmetrics' Retrieval*) on the metrics of layer 5
    "torch_rankeval.sampler": 6,
    "torch_rankeval.data": 6,
    "torch_rankeval.trec": 6,
    "torch_rankeval.stats": 6,
    "torch_rankeval.diagnostics": 6,  # no plotting imports
    "torch_rankeval.plotting": 7,  # imports downward only
    "torch_rankeval.lightning": 8,
    "torch_rankeval.cli": 8,
    "torch_rankeval.__main__": 9,
    "torch_rankeval": 9,  # the package's lazy exports
}


def _top(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2])


def _imports() -> dict[str, set[tuple[str, int]]]:
    found: dict[str, set[tuple[str, int]]] = {}
    for path in sorted((REPO / "torch_rankeval").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == "torch_rankeval":
                    found.setdefault(module, set()).add((target, node.lineno))
    return found


IMPORTS = _imports()


def test_every_module_has_a_layer():
    unknown = {_top(m) for m in IMPORTS} - set(LAYERS)
    assert not unknown, f"add {sorted(unknown)} to LAYERS in tests/test_layers.py"


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_imports_go_downward(module):
    layer = LAYERS[_top(module)]
    upward = [
        f"{module} line {line} imports {target} (layer {LAYERS.get(_top(target))} > {layer})"
        for target, line in sorted(IMPORTS[module])
        if target != "torch_rankeval" and LAYERS.get(_top(target), -1) > layer  # the bare package: __version__
    ]
    assert not upward, "; ".join(upward)


def test_the_known_circle_is_broken():
    """metrics -> plotting -> diagnostics -> metrics was a circle (PositionProfile.plot imported plotting)."""
    position_profile = {t for t, _ in IMPORTS.get("torch_rankeval.metrics.position_profile", ())}
    assert not {t for t in position_profile if t.startswith(("torch_rankeval.plotting", "torch_rankeval.diagnostics"))}
    assert not any(t.startswith("torch_rankeval.plotting") for t, _ in IMPORTS.get("torch_rankeval.diagnostics", ()))
    assert Path(REPO / "torch_rankeval" / "plotting.py").exists()


def _module_of(target: str, modules: set[str]) -> str | None:
    """The package module a dotted import names: itself, or the longest known prefix (a name in it)."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in modules:
            return name
    return None


def test_no_import_circle():
    """No circle among the package's modules, deferred imports included: a submodule that imports its own
    package's ``__init__`` (which imports it) is a circle too."""
    modules = set(IMPORTS) | {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in (REPO / "torch_rankeval").rglob("*.py")
    }
    graph = {m: set() for m in modules}
    for module, targets in IMPORTS.items():
        for target, _ in targets:
            if target == "torch_rankeval":  # the bare package: __version__, lazy names
                continue
            to = _module_of(target, modules)
            if to is not None and to != module:
                graph[module].add(to)
    circles, state, stack = [], {}, []

    def visit(m: str) -> None:
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                circles.append(" -> ".join([*stack[stack.index(n) :], n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not circles, "import circles: " + "; ".join(circles)


def test_layers_are_distinct():
    """The ranking core, kernels, measures and the public functions are four layers, not one slot."""
    core = ("ranking", "kernels", "measures", "functional")
    assert len({LAYERS[f"torch_rankeval.{name}"] for name in core}) == len(core)
