"""One home per measure: the registry row (:mod:`torch_rankeval.measures.registry`) holds every fact about
a measure, so nothing below it names one. The conventions, the ranking core and the kernels are scanned
for string literals that spell a registered measure (its key, an alias, its ir_measures or trec_eval name):
a route, a preset rule or a kernel that decided by a measure's name would be a second home for it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO
from torch_rankeval.measures.registry import FAMILIES, TREC_NAMES

BELOW = ("torch_rankeval/conventions.py", "torch_rankeval/ranking", "torch_rankeval/kernels")
#: Words that spell a measure but mean something else where they stand, (module folder or file, word) -> why.
NOT_A_MEASURE = {
    ("ranking", "judged"): "the judged-flags input and the ranked view's field of that name, not the Judged@k measure",
    ("intent_aware.py", "dcg"): "the discount kind of the intent-aware kernels' shared loop (1 / log2(r + 1))",
    ("intent_aware.py", "err"): "the discount kind of the intent-aware kernels' shared loop (1 / r)",
}


def _names() -> dict[str, str]:
    """Every spelling of a registered measure, lowercased -> the family key."""
    names: dict[str, str] = {}
    for f in FAMILIES.values():
        for name in (f.key, *f.aliases, *((f.ir,) if f.ir else ())):
            names[name.lower()] = f.key
    for t in TREC_NAMES:
        names[t.name.lower()] = t.family
    return names


def _modules() -> list[Path]:
    out = []
    for where in BELOW:
        path = REPO / where
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def _literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings (prose may mention a measure)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


NAMES = _names()


def test_the_scan_finds_every_module_below_the_registry():
    modules = _modules()
    assert REPO / "torch_rankeval/conventions.py" in modules
    assert {"ranking", "kernels"} <= {p.parent.name for p in modules}
    assert len(modules) > 20


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_below_the_registry_names_a_measure(path):
    found = [
        f"{path.relative_to(REPO)} line {line}: {text!r} (measure {NAMES[text.lower()]!r})"
        for line, text in _literals(path)
        if text.lower() in NAMES
        and (path.parent.name, text) not in NOT_A_MEASURE
        and (path.name, text) not in NOT_A_MEASURE
    ]
    assert not found, "a measure's fact below the registry; move it into its row: " + "; ".join(found)


def test_the_scan_would_catch_a_measure_name(tmp_path):
    """The check is not vacuous: the strings that lived in the conventions and the catalogue are caught."""
    module = tmp_path / "m.py"
    module.write_text('"""Doc naming ndcg."""\nTOPK = frozenset({"ndcg", "hit_rate"})\nTIES = ("map",)\n')
    assert sorted(text for _, text in _literals(module) if text.lower() in NAMES) == ["hit_rate", "map", "ndcg"]


def test_the_presets_per_measure_settings_are_the_rows():
    """The torchmetrics presets rank each measure with the tie rule its row names (and nothing else differs
    per measure); a measure without a rule follows the preset's own."""
    from torch_rankeval.conventions import PRESETS

    for preset in ("torchmetrics", "torchmetrics_1.7"):
        conv = PRESETS[preset]
        assert {key for key, _ in conv.by_measure} == {
            f.key for f in FAMILIES.values() if preset in dict(f.preset_rules)
        }
        for f in FAMILIES.values():
            assert conv.for_measure(f.key).ties == f.preset_ties.get(preset, conv.ties), (preset, f.key)


def test_a_preset_asked_for_before_the_registry_is_an_error_not_another_convention():
    import subprocess
    import sys

    code = (
        "from torch_rankeval.conventions import PRESETS\n"
        "assert 'torchmetrics' in PRESETS and PRESETS['trec_eval'].gain == 'linear'\n"
        "try:\n    PRESETS['torchmetrics']\nexcept RuntimeError as err:\n    assert 'import torch_rankeval.measures' in str(err)\n"
        "else:\n    raise AssertionError('an incomplete preset')\n"
        "import torch_rankeval\n"
        "assert torch_rankeval.PRESETS['torchmetrics'].for_measure('map').ties == 'torch_topk'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
