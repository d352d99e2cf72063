"""The suite's selection. The subset `.ci/run` repeats against the oldest supported torchmetrics
(`pytest -m torchmetrics`): registered as a marker, applied by tests/conftest.py to the modules it names, and complete: every test
module that imports torchmetrics' classes, our compat module or our torchmetrics hooks is in it or is
named outside it with a reason. And every compiled test runs inductor."""

from __future__ import annotations

import ast

import pytest

from tests import conftest
from tests.conftest import NOT_IN_OLDEST_TORCHMETRICS, OLDEST_TORCHMETRICS, REPO

TESTS = REPO / "tests"


def _imports(path) -> set[str]:  # noqa: ANN001
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _meets_torchmetrics(names: set[str]) -> bool:
    """torchmetrics itself (its Metric, MetricCollection, Retrieval* classes; its functional API alone is
    an oracle of values), our compat module, or our hooks."""
    return any(
        (n == "torchmetrics" or n.startswith("torchmetrics."))
        and not n.startswith("torchmetrics.functional")
        or n.startswith("torch_rankeval.compat")
        or n == "torch_rankeval.metrics._hooks"
        for n in names
    )


def test_the_marker_is_registered():
    assert '"torchmetrics: ' in (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_every_named_module_exists_once():
    assert not set(OLDEST_TORCHMETRICS) & set(NOT_IN_OLDEST_TORCHMETRICS)
    for name in (*OLDEST_TORCHMETRICS, *NOT_IN_OLDEST_TORCHMETRICS):
        assert (TESTS / name).is_file(), name


def test_every_module_that_meets_torchmetrics_is_placed():
    unplaced = [
        path.name
        for path in sorted(TESTS.glob("test_*.py"))
        if _meets_torchmetrics(_imports(path))
        and path.name not in OLDEST_TORCHMETRICS
        and path.name not in NOT_IN_OLDEST_TORCHMETRICS
    ]
    assert not unplaced, (
        f"add each to OLDEST_TORCHMETRICS or NOT_IN_OLDEST_TORCHMETRICS in tests/conftest.py: {unplaced}"
    )


def test_the_hooks_and_compat_tests_are_in_the_subset():
    assert {"test_hooks.py", "test_compat_torchmetrics.py", "test_lightning_callback.py"} <= set(OLDEST_TORCHMETRICS)


def test_this_module_is_outside_the_subset(request: pytest.FixtureRequest):
    assert request.node.get_closest_marker("torchmetrics") is None


class _Item:
    def __init__(self, path):  # noqa: ANN001
        self.path, self.marks = path, []

    def add_marker(self, mark) -> None:  # noqa: ANN001
        self.marks.append(mark.name)


def test_the_conftest_hook_marks_the_named_modules_and_the_torchmetrics_doctests():
    paths = {
        "tests/test_hooks.py": True,
        "tests/test_compat_torchmetrics.py": True,
        "tests/test_trec.py": False,
        "tests/test_signatures.py": False,
        "torch_rankeval/metrics/base.py": True,
        "torch_rankeval/compat/torchmetrics.py": True,
        "torch_rankeval/lightning.py": True,
        "torch_rankeval/functional/dcg.py": False,
        "docs/guide/lightning.md": False,
    }
    items = [_Item(REPO / p) for p in paths]
    conftest.pytest_collection_modifyitems(items)
    assert {p: item.marks == ["torchmetrics"] for p, item in zip(paths, items)} == paths


def test_ci_runs_the_readme_command_then_the_subset_against_the_oldest_torchmetrics():
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    main = 'python -m pip install -e ".[all]" && python -m pytest -n 2\n'
    assert main in script and main.strip() in readme
    oldest = script[script.index("torchmetrics==$oldest") :]  # installed after the main run, then the subset
    assert script.index(main) < script.index("torchmetrics==$oldest")
    assert 'python -m pytest -n 2 -m "torchmetrics and not slow"\n' in oldest


def _compile_backends(path) -> list[tuple[int, str]]:  # noqa: ANN001
    """``(line, backend)`` of every ``torch.compile(...)`` call in ``path`` (``"inductor"`` without ``backend=``),
    and of every ``setattr(..., "BACKEND", value)`` (a test swapping ``compile=True``'s backend)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "compile" and getattr(func.value, "id", None) == "torch":
            given = [k.value for k in node.keywords if k.arg == "backend"]
            found.append((node.lineno, ast.unparse(given[0]) if given else "'inductor'"))
        elif getattr(func, "attr", None) == "setattr" and len(node.args) == 3:
            if isinstance(node.args[1], ast.Constant) and node.args[1].value == "BACKEND":
                found.append((node.lineno, ast.unparse(node.args[2])))
    return found


def test_every_compiled_test_runs_inductor():
    """A compiled path is tested on inductor, the backend users run: ``aot_eager`` and ``eager`` trace the
    graph but never lower it, so an operation inductor cannot lower (or lowers wrongly) would pass there."""
    calls = {path.name: _compile_backends(path) for path in sorted(TESTS.glob("test_*.py"))}
    assert sum(len(found) for found in calls.values()) >= 10  # the search finds the suite's direct compiles
    assert [
        (name, line, backend) for name, found in calls.items() for line, backend in found if backend != "'inductor'"
    ] == []
